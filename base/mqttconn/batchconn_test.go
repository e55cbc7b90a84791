package mqttconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/testenv"
)

// tcpPair is both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestBatchConnOrder: every byte written arrives once, in order, whether
// the writes come one at a time or faster than the flusher writes them, and
// Close writes what is still queued.
func TestBatchConnOrder(t *testing.T) {
	c, s := tcpPair(t)
	b := newBatchConn(c)
	var want bytes.Buffer
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(s)
		got <- all
	}()
	for i := range 20000 {
		p := fmt.Appendf(nil, "message %d %s;", i, bytes.Repeat([]byte{'x'}, i%97))
		want.Write(p)
		if n, err := b.Write(p); n != len(p) || err != nil {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		if i%1000 == 0 {
			// A pace, not a wait: the queue runs dry now and then, as
			// between a table's bursts, which is part of what is tested.
			time.Sleep(time.Millisecond)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if all := <-got; !bytes.Equal(all, want.Bytes()) {
		t.Fatalf("received %d bytes, want %d; first difference at %d", len(all), want.Len(), firstDiff(all, want.Bytes()))
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestBatchConnPeerGone: once the peer has gone, a write fails and the
// connection is closed, so paho's reader sees it too.
func TestBatchConnPeerGone(t *testing.T) {
	c, s := tcpPair(t)
	b := newBatchConn(c)
	s.Close()
	// The kernel takes writes until it hears the peer is gone.
	testenv.Eventually(t, 10*time.Second, "a write to a closed peer failing", func() bool {
		_, err := b.Write(make([]byte, 64<<10))
		return err != nil
	})
	if _, rerr := c.Read(make([]byte, 1)); rerr == nil {
		t.Fatal("the connection was not closed")
	}
	b.Close()
}

// TestBatchConnRead: what the peer sends arrives whole and in order
// through the read buffer, in reads of any size.
func TestBatchConnRead(t *testing.T) {
	c, s := tcpPair(t)
	b := newBatchConn(c)
	defer b.Close()
	var want bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&want, "puback %d;", i)
	}
	go func() {
		s.Write(want.Bytes())
		s.Close()
	}()
	var got bytes.Buffer
	p := make([]byte, 3)
	for {
		n, err := b.Read(p[:1+got.Len()%3])
		got.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("read %d bytes, want %d; first difference at %d", got.Len(), want.Len(), firstDiff(got.Bytes(), want.Bytes()))
	}
}
