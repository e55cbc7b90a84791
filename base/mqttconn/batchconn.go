package mqttconn

import (
	"bufio"
	"net"
	"net/url"
	"os"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// batchConn is a broker connection whose writes are gathered: paho writes
// each packet with a write of its own, one system call per message (and a
// read of its own in the broker); here a Write only queues the bytes, and a
// goroutine of the connection writes everything queued at once. When the
// publisher sends one message and waits, that is one write, as before, a
// goroutine switch later (paho's writer goroutine blocks at once, and the
// flusher runs in its place); when it sends many, they go out in a few
// writes. Bytes queued and not yet written when the connection fails are
// lost with it, as bytes in a socket's buffer are: nothing is taken as
// delivered before its PUBACK, and the publisher sends again from the
// trail what the broker did not acknowledge.
//
// Reads are buffered: paho reads a packet's header a byte at a time, three
// system calls for a 4-byte PUBACK; here one read takes every PUBACK that
// has come.
type batchConn struct {
	net.Conn
	in *bufio.Reader

	mu      sync.Mutex
	room    *sync.Cond // signalled when the queue is written
	buf     []byte     // queued, not yet written
	err     error      // the first write error; sticky
	closed  bool
	wake    chan struct{}
	done    chan struct{} // closed by Close
	flushed chan struct{} // closed when the flusher has stopped
}

// maxQueued is how many bytes may wait before Write waits for the flusher:
// a broker that stops reading holds paho's writer back.
const maxQueued = 1 << 20

// batchWriteTimeout bounds each write of the flusher (paho's own write
// timeout, which it sets around each packet's Write, would otherwise bound
// only the queueing): a broker that stops reading fails the connection.
// closeFlushTimeout bounds the last write on Close.
const (
	batchWriteTimeout = 5 * time.Second
	closeFlushTimeout = time.Second
)

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c, in: bufio.NewReaderSize(c, 16<<10), wake: make(chan struct{}, 1), done: make(chan struct{}), flushed: make(chan struct{})}
	b.room = sync.NewCond(&b.mu)
	go b.flush()
	return b
}

// Read reads through the buffer. Only paho's reader goroutine reads.
func (b *batchConn) Read(p []byte) (int, error) { return b.in.Read(p) }

// Write queues p for the flusher.
func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	for b.err == nil && !b.closed && len(b.buf) >= maxQueued {
		b.room.Wait()
	}
	if b.err != nil {
		b.mu.Unlock()
		return 0, b.err
	}
	if b.closed {
		b.mu.Unlock()
		return 0, net.ErrClosed
	}
	b.buf = append(b.buf, p...)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// flush writes what is queued, in order, until the connection closes
// (after writing what was queued then) or a write fails (then it closes
// the connection, so paho's reader sees it). Deadlines are wall time, as
// the network's are, not the package's clock.
func (b *batchConn) flush() {
	defer close(b.flushed)
	var spare []byte
	for last := false; !last; {
		select {
		case <-b.wake:
		case <-b.done:
			last = true
		}
		b.mu.Lock()
		out := b.buf
		if len(out) == 0 {
			b.mu.Unlock()
			continue
		}
		b.buf = spare[:0] // never out's array: the two take turns
		b.room.Broadcast()
		b.mu.Unlock()
		timeout := batchWriteTimeout
		if last {
			timeout = closeFlushTimeout
		}
		b.Conn.SetWriteDeadline(time.Now().Add(timeout))
		if _, err := b.Conn.Write(out); err != nil {
			b.mu.Lock()
			b.err = err
			b.room.Broadcast()
			b.mu.Unlock()
			b.Conn.Close()
			return
		}
		spare = out
	}
}

// Close writes what is queued (paho's DISCONNECT among it, or the broker
// would publish the will), for up to closeFlushTimeout, and closes the
// connection.
func (b *batchConn) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.room.Broadcast()
	b.mu.Unlock()
	close(b.done)
	b.Conn.SetWriteDeadline(time.Now().Add(closeFlushTimeout)) // a write under way, to a broker that does not read
	<-b.flushed
	return b.Conn.Close()
}

// SetDeadline sets the read deadline only: the flusher sets its own write
// deadlines (see batchWriteTimeout).
func (b *batchConn) SetDeadline(t time.Time) error { return b.Conn.SetReadDeadline(t) }

// SetWriteDeadline does nothing: a Write only queues (see SetDeadline).
func (b *batchConn) SetWriteDeadline(time.Time) error { return nil }

// batchDialer is paho's connection for a plain TCP broker (tcp:// or
// mqtt://), gathered; nil for any other, and when a proxy is set in the
// environment (paho's own dialer honours it): paho then dials as it does.
func batchDialer(broker string) paho.OpenConnectionFunc {
	u, err := url.Parse(broker)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "mqtt") {
		return nil
	}
	for _, v := range []string{"all_proxy", "ALL_PROXY"} {
		if os.Getenv(v) != "" {
			return nil
		}
	}
	return func(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
		d := net.Dialer{Timeout: o.ConnectTimeout}
		c, err := d.Dial("tcp", uri.Host)
		if err != nil {
			return nil, err
		}
		return newBatchConn(c), nil
	}
}
