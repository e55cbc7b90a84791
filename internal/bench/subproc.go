package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// The bench's subscribers run in a process of their own, as every display
// and pit system does. In the bench's own process a subscriber's
// goroutines would wait for the controller's: go.bug.st/serial waits for
// the shoe in pselect(2), a system call that keeps one of the process's Go
// processors until the runtime's monitor takes it back (up to 10 ms on a
// quiet table), so on a two-core box everything else shares the other
// one, and a message that reached the subscriber's socket waited there
// until the publisher's follow-up work was done. A subscriber process has
// processors of its own and shares only the machine's cores, as a
// display on the same box would.
//
// The child stamps each message with the wall clock as paho hands it over
// and relays it to the parent down a pipe, where the parent decodes it;
// the pipe's delay adds to the bench's pacing, not to what it measures.
// Both processes read the same clock (CLOCK_REALTIME), so the parent's
// times and the child's subtract.

// subprocEnv carries a subscriber's spec (JSON) to the child.
const subprocEnv = "TABLECTL_BENCH_SUBSCRIBER"

// subSpec is what a subscriber process subscribes to.
type subSpec struct {
	Broker   string          `json:"broker"`
	ClientID string          `json:"client_id"`
	Filters  map[string]byte `json:"filters"` // topic filter -> QoS
	// Rows: each payload is a pit/events row (or a floor message), and the
	// child relays only the fields the bench reads (rowFields), so the
	// decoding's CPU is not the bench's process's, which hosts the
	// controller. A payload that does not decode is not relayed.
	Rows bool `json:"rows"`
}

// rowFields is what the bench reads of a row.
type rowFields struct {
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	Body struct {
		ShoeSeq uint32 `json:"shoe_seq"`
		Link    string `json:"link"`
	} `json:"body"`
}

// appendRowFields and parseRowFields carry rowFields down the pipe as
// NUL-separated text: seq, shoe_seq, kind, link.
func appendRowFields(b []byte, f rowFields) []byte {
	b = strconv.AppendInt(b, f.Seq, 10)
	b = append(b, 0)
	b = strconv.AppendUint(b, uint64(f.Body.ShoeSeq), 10)
	b = append(b, 0)
	b = append(b, f.Kind...)
	b = append(b, 0)
	return append(b, f.Body.Link...)
}

func parseRowFields(b []byte) (f rowFields, err error) {
	parts := bytes.Split(b, []byte{0})
	if len(parts) != 4 {
		return f, fmt.Errorf("row fields: %d parts, want 4", len(parts))
	}
	if f.Seq, err = strconv.ParseInt(string(parts[0]), 10, 64); err != nil {
		return f, fmt.Errorf("row fields: %w", err)
	}
	ss, err := strconv.ParseUint(string(parts[1]), 10, 32)
	if err != nil {
		return f, fmt.Errorf("row fields: %w", err)
	}
	f.Body.ShoeSeq = uint32(ss)
	f.Kind, f.Body.Link = string(parts[2]), string(parts[3])
	return f, nil
}

// subReady is the topic of the frame that says the broker granted every
// subscription; no MQTT topic is empty.
const subReady = ""

// ServeSubscriber runs this process as a bench subscriber when the bench
// started it as one (os.Exit when it is done) and returns otherwise. Call
// it first thing in main (and in TestMain of a test that runs the bench).
func ServeSubscriber() {
	spec := os.Getenv(subprocEnv)
	if spec == "" {
		return
	}
	if err := serveSubscriber([]byte(spec), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "bench subscriber: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveSubscriber subscribes as spec says and writes a frame for each
// message, and the ready frame once the broker has granted every
// subscription, until stdin ends (the bench closed it or is gone) or the
// connection to the broker is lost: then it fails, so the process ends and
// the bench's waits end at once with the reason, not at their timeout.
func serveSubscriber(raw []byte, stdin io.Reader, stdout io.Writer) error {
	var spec subSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	out := bufio.NewWriter(stdout)
	var mu sync.Mutex
	var werr error
	frame := func(topic string, at time.Time, payload []byte) {
		mu.Lock()
		defer mu.Unlock()
		if werr == nil {
			werr = writeFrame(out, topic, at, payload)
		}
	}
	lost := make(chan error, 1)
	po := paho.NewClientOptions().AddBroker(spec.Broker).SetClientID(spec.ClientID).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second).SetOrderMatters(true).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			select {
			case lost <- err:
			default:
			}
		})
	c := paho.NewClient(po)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("connect to %s: %v", spec.Broker, errOr(tok.Error(), "no answer in 10s"))
	}
	defer c.Disconnect(100)
	tok := c.SubscribeMultiple(spec.Filters, func(_ paho.Client, m paho.Message) {
		at := time.Now()
		payload := m.Payload()
		if spec.Rows {
			var f rowFields
			if json.Unmarshal(payload, &f) != nil {
				return
			}
			payload = appendRowFields(nil, f)
		}
		frame(m.Topic(), at, payload)
	})
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		return fmt.Errorf("subscribe: %v", errOr(tok.Error(), "no answer in 10s"))
	}
	for t, q := range tok.(*paho.SubscribeToken).Result() {
		if q == 0x80 {
			return fmt.Errorf("the broker refused %s", t)
		}
	}
	frame(subReady, time.Now(), nil)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(closed)
	}()
	select {
	case <-closed:
	case err := <-lost:
		return fmt.Errorf("the connection to %s was lost: %w", spec.Broker, err)
	}
	mu.Lock()
	defer mu.Unlock()
	return werr
}

// A frame is the arrival (Unix nanoseconds), the topic's and the
// payload's lengths, then the topic and the payload; each is flushed at
// once, so the bench sees a message as soon as the child has it.
const frameHead = 8 + 4 + 4

func writeFrame(w *bufio.Writer, topic string, at time.Time, payload []byte) error {
	var h [frameHead]byte
	binary.BigEndian.PutUint64(h[0:], uint64(at.UnixNano()))
	binary.BigEndian.PutUint32(h[8:], uint32(len(topic)))
	binary.BigEndian.PutUint32(h[12:], uint32(len(payload)))
	w.Write(h[:])
	w.WriteString(topic)
	w.Write(payload)
	return w.Flush()
}

// maxFrame bounds a frame's topic and payload: far over any message the
// controller publishes, so a corrupt length fails instead of allocating.
const maxFrame = 16 << 20

func readFrame(r *bufio.Reader) (topic string, at time.Time, payload []byte, err error) {
	var h [frameHead]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", time.Time{}, nil, err
	}
	tl, pl := binary.BigEndian.Uint32(h[8:]), binary.BigEndian.Uint32(h[12:])
	if tl > maxFrame || pl > maxFrame {
		return "", time.Time{}, nil, fmt.Errorf("a frame of %d+%d bytes", tl, pl)
	}
	b := make([]byte, int(tl)+int(pl))
	if _, err := io.ReadFull(r, b); err != nil {
		return "", time.Time{}, nil, fmt.Errorf("a frame cut short: %w", io.ErrUnexpectedEOF)
	}
	return string(b[:tl]), time.Unix(0, int64(binary.BigEndian.Uint64(h[0:]))), b[tl:], nil
}

// subProc is a subscriber process and the goroutine that reads its
// frames.
type subProc struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr bytes.Buffer
	done   chan struct{} // closed when the frames end: the process ended, or sent a bad frame
	err    error         // why they ended, once done is closed
	waited bool          // the process was waited for, once done is closed
}

// startSubscriber starts a subscriber process (this executable again, which
// must call ServeSubscriber) and returns once the broker has granted its
// subscriptions, or ctx is done. handle runs for each message, on one
// goroutine, in the order they arrived: a message the broker delivered
// before it granted the last subscription too, perhaps before
// startSubscriber returns. An error from handle ends the frames, as a bad
// frame does.
func startSubscriber(ctx context.Context, spec subSpec, handle func(topic string, at time.Time, payload []byte) error) (*subProc, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("subscriber process: %w", err)
	}
	p := &subProc{cmd: exec.Command(exe), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), subprocEnv+"="+string(raw))
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("subscriber process: %w", err)
	}
	p.stdin = stdin
	ready := make(chan struct{})
	go func() {
		defer close(p.done)
		r := bufio.NewReaderSize(stdout, 64<<10)
		signal := ready
		for {
			topic, at, payload, err := readFrame(r)
			if err != nil {
				if errors.Is(err, io.EOF) {
					// Its stdout ended, so it did: its reason is on stderr,
					// whole once it has been waited for.
					werr := p.cmd.Wait()
					p.waited = true
					err = fmt.Errorf("the subscriber process ended (%v): %s", werr, bytes.TrimSpace(p.stderr.Bytes()))
				}
				p.err = err
				return
			}
			if topic == subReady {
				if signal != nil {
					close(signal)
					signal = nil
				}
				continue
			}
			if err := handle(topic, at, payload); err != nil {
				p.err = err
				return
			}
		}
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		p.close()
		return nil, fmt.Errorf("subscriber process: %w", p.err)
	case <-ctx.Done():
		p.close()
		return nil, fmt.Errorf("subscriber process: %w", ctx.Err())
	case <-time.After(30 * time.Second):
	}
	p.close()
	return nil, fmt.Errorf("subscriber process: not subscribed in 30s: %s", bytes.TrimSpace(p.stderr.Bytes()))
}

// close ends the subscriber process: its stdin closes, it disconnects and
// exits; it is killed if it has not within 5 seconds.
func (p *subProc) close() {
	p.stdin.Close()
	select {
	case <-p.done: // it exited: its stdout ended
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	if !p.waited {
		p.cmd.Wait()
	}
}
