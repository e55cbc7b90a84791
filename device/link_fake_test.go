package device

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"go.bug.st/serial"
)

// fakePort is a serial port whose reads the test hands out one at a time,
// so the Link's reader loop can be driven read by read.
type fakePort struct {
	reads   chan readResult
	timeout atomic.Int64 // the read timeout the Link set
	closed  atomic.Bool
}

type readResult struct {
	data []byte
	err  error
}

func newFakePort() *fakePort { return &fakePort{reads: make(chan readResult)} }

// Read returns the next result the test hands over, or (0, nil) when none
// comes within a millisecond, as go.bug.st/serial does when its read
// timeout expires.
func (p *fakePort) Read(b []byte) (int, error) {
	if p.closed.Load() {
		return 0, errors.New("fake port: read after close")
	}
	select {
	case r := <-p.reads:
		return copy(b, r.data), r.err
	case <-time.After(time.Millisecond):
		return 0, nil
	}
}

func (p *fakePort) Close() error {
	if p.closed.Swap(true) {
		return errors.New("fake port: closed twice")
	}
	return nil
}

func (p *fakePort) SetReadTimeout(d time.Duration) error {
	p.timeout.Store(int64(d))
	return nil
}

// feed hands one read result to the reader; it returns once the reader
// has taken it.
func (p *fakePort) feed(t *testing.T, data string, err error) {
	t.Helper()
	select {
	case p.reads <- readResult{[]byte(data), err}:
	case <-time.After(guard):
		t.Fatalf("the reader did not read %q within %s", data, guard)
	}
}

func newFakeLink(t *testing.T, p *fakePort, clk clock.Clock, opts Options) *Link {
	t.Helper()
	opts.Clock = clk
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l, err := NewLink(Config{Path: "/dev/ttyFAKE0"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	l.openPort = func(name string, mode *serial.Mode) (port, error) {
		if name != "/dev/ttyFAKE0" || mode.BaudRate != DefaultBaud || mode.DataBits != 8 ||
			mode.Parity != serial.NoParity || mode.StopBits != serial.OneStopBit {
			t.Errorf("opened %q with %+v, want /dev/ttyFAKE0 at 9600 8N1", name, *mode)
		}
		return p, nil
	}
	return l
}

func TestLinkReadTimeoutIsNotEOF(t *testing.T) {
	p := newFakePort()
	r := newRecorder()
	l := newFakeLink(t, p, newFakeClock(), Options{OnData: r.onData, OnState: r.onState})
	runLink(t, l, r)
	r.expect(t, Connected)

	if got := time.Duration(p.timeout.Load()); got != readPoll {
		t.Errorf("read timeout %s, want %s", got, readPoll)
	}
	// Explicit (0, nil) reads between data: none of them ends the session.
	for _, s := range []string{"", "ab", "", "", "c", ""} {
		p.feed(t, s, nil)
	}
	broken := errors.New("bad file descriptor")
	p.feed(t, "d", broken) // bytes that come with the error still count
	st := r.expect(t, Disconnected)
	if !errors.Is(st.Err, broken) || errors.Is(st.Err, ErrHangup) {
		t.Errorf("disconnected because %v, want the read error, not a hang-up", st.Err)
	}
	if got := string(r.waitData(t, 4)); got != "abcd" {
		t.Errorf("received %q, want abcd", got)
	}
	if !p.closed.Load() {
		t.Error("port not closed after the read error")
	}
}

// TestLinkHangupErrors pins which read errors count as the shoe going
// away: Linux reports an unplugged adapter or a closed pty master either as
// a zero-length read (PortClosed) or as EIO, depending on timing.
func TestLinkHangupErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		hangup bool
	}{
		{"other port error", &serial.PortError{}, false},
		{"EIO", syscall.EIO, true},
		{"wrapped EIO", fmt.Errorf("read: %w", syscall.EIO), true},
		{"EBADF", syscall.EBADF, false},
		{"other", errors.New("parity"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newFakePort()
			r := newRecorder()
			l := newFakeLink(t, p, newFakeClock(), Options{OnData: r.onData, OnState: r.onState})
			runLink(t, l, r)
			r.expect(t, Connected)
			p.feed(t, "", tc.err)
			st := r.expect(t, Disconnected)
			if got := errors.Is(st.Err, ErrHangup); got != tc.hangup {
				t.Errorf("%v: hang-up %v, want %v", st.Err, got, tc.hangup)
			}
			if !errors.Is(st.Err, tc.err) {
				t.Errorf("%v does not wrap %v", st.Err, tc.err)
			}
		})
	}
}

// TestLinkStall checks the slow-consumer policy: with the queue full the
// reader waits without dropping anything, warns after StallAfter, and
// resumes when the consumer catches up.
func TestLinkStall(t *testing.T) {
	p := newFakePort()
	clk := newFakeClock()
	r := newRecorder()
	logs := newLogSink()
	inData := make(chan string, 10)
	release := make(chan struct{})
	onData := func(b []byte) {
		inData <- string(b)
		<-release
		r.onData(b)
	}
	const stallAfter = 7 * time.Second
	l := newFakeLink(t, p, clk, Options{
		OnData: onData, OnState: r.onState, Logger: slog.New(logs),
		QueueLen: 1, StallAfter: stallAfter,
	})
	runLink(t, l, r)
	r.expect(t, Connected)

	p.feed(t, "a", nil)
	if got := <-inData; got != "a" {
		t.Fatalf("first chunk %q, want a", got)
	}
	// The consumer is stuck on "a": "b" fills the queue, "c" waits.
	p.feed(t, "b", nil)
	p.feed(t, "c", nil)
	clk.waitTimer(t, stallAfter)
	clk.Advance(stallAfter)
	logs.waitLog(t, slog.LevelWarn, "shoe data consumer stalled")
	if s := l.Stats(); s.Stalls != 1 {
		t.Errorf("stalls %d, want 1", s.Stalls)
	}

	close(release)
	logs.waitLog(t, slog.LevelInfo, "shoe data consumer caught up")
	if got := string(r.waitData(t, 3)); got != "abc" {
		t.Errorf("received %q, want abc: nothing dropped", got)
	}
	p.feed(t, "d", nil)
	if got := string(r.waitData(t, 4)); got != "abcd" {
		t.Errorf("received %q, want abcd", got)
	}
}

// TestDeliverStops checks that a reader waiting on a full queue lets go
// when its session stops, before and after the stall warning.
func TestDeliverStops(t *testing.T) {
	for _, afterWarning := range []bool{false, true} {
		clk := newFakeClock()
		logs := newLogSink()
		l, err := NewLink(Config{Path: "/dev/ttyFAKE0"}, Options{OnData: func([]byte) {}, Clock: clk, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		q := make(chan chunk, 1)
		q <- chunk{data: []byte("a")}
		stop := make(chan struct{})
		res := make(chan bool)
		go func() { res <- l.deliver("/dev/ttyFAKE0", q, chunk{data: []byte("b")}, stop) }()
		clk.waitTimer(t, DefaultStallAfter)
		if afterWarning {
			clk.Advance(DefaultStallAfter)
			logs.waitLog(t, slog.LevelWarn, "shoe data consumer stalled")
		}
		close(stop)
		select {
		case ok := <-res:
			if ok {
				t.Errorf("afterWarning=%v: deliver reported success on a full queue", afterWarning)
			}
		case <-time.After(guard):
			t.Fatalf("afterWarning=%v: deliver did not return after stop", afterWarning)
		}
		if len(q) != 1 {
			t.Errorf("queue holds %d chunks, want the 1 it had", len(q))
		}
	}
}

// TestLinkGathersQueuedChunks: what queued while the consumer was busy
// reaches it in one call, in order, and a read error queued behind data
// ends the session only after the data is delivered.
func TestLinkGathersQueuedChunks(t *testing.T) {
	// In a bubble, so the test can wait until every goroutine of the Link
	// is blocked, not guess how long queueing takes.
	synctest.Test(t, func(t *testing.T) {
		p := newFakePort()
		r := newRecorder()
		calls := make(chan string, 10)
		release := make(chan struct{})
		onData := func(b []byte) {
			calls <- string(b)
			<-release
			r.onData(b)
		}
		l := newFakeLink(t, p, newFakeClock(), Options{OnData: onData, OnState: r.onState, QueueLen: 8})
		defer close(release) // a consumer left waiting by a failure lets Run end
		runLink(t, l, r)
		r.expect(t, Connected)
		next := func() string {
			t.Helper()
			select {
			case c := <-calls:
				return c
			case <-time.After(guard):
				t.Fatal("no OnData call")
				return ""
			}
		}
		// feed returns once the reader took the read; settle waits until the
		// reader is blocked again, in its next Read or gone after an error,
		// so what it read is queued.
		settle := synctest.Wait

		p.feed(t, "a", nil)
		if got := next(); got != "a" {
			t.Fatalf("first call %q, want a", got)
		}
		// The consumer is busy with "a": three reads queue.
		for _, s := range []string{"b", "cd", "e"} {
			p.feed(t, s, nil)
		}
		settle()
		release <- struct{}{}
		if got := next(); got != "bcde" {
			t.Fatalf("second call %q, want bcde in one call", got)
		}
		// Busy with "bcde": data, then data with a hang-up.
		p.feed(t, "f", nil)
		p.feed(t, "g", syscall.EIO)
		settle()
		release <- struct{}{}
		if got := next(); got != "fg" {
			t.Fatalf("third call %q, want fg", got)
		}
		release <- struct{}{}
		if st := r.expect(t, Disconnected); !errors.Is(st.Err, ErrHangup) {
			t.Fatalf("disconnected because %v, want a hang-up", st.Err)
		}
		if got := string(r.waitData(t, 7)); got != "abcdefg" {
			t.Fatalf("received %q, want abcdefg", got)
		}
	})
}
