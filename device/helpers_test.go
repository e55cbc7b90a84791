package device

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/creack/pty"
)

// guard bounds every wait in these tests. It is a failure guard only:
// every test synchronises on events, so a loaded machine makes the tests
// slower, never wrong.
const guard = 20 * time.Second

// fakeClock is the shared fake clock with a test's wait on it.
type fakeClock struct{ *clock.Fake }

func newFakeClock() fakeClock {
	return fakeClock{clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))}
}

// waitTimer waits until a timer of duration d is running and returns when
// it is due.
func (c fakeClock) waitTimer(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	when, err := c.WaitArmed(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	return when
}

// recorder collects what a Link hands its consumer.
type recorder struct {
	states chan Status

	mu      sync.Mutex
	data    []byte
	changed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{states: make(chan Status, 1000), changed: make(chan struct{})}
}

func (r *recorder) onState(s Status) { r.states <- s }

func (r *recorder) onData(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.data = append(r.data, p...)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.data)
}

// waitData waits until n bytes in all have arrived and returns them.
func (r *recorder) waitData(t *testing.T, n int) []byte {
	t.Helper()
	deadline := time.After(guard)
	for {
		r.mu.Lock()
		got, changed := bytes.Clone(r.data), r.changed
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("got %d bytes within %s, want %d", len(got), guard, n)
		}
	}
}

// expect takes the next status report and checks its state.
func (r *recorder) expect(t *testing.T, want State) Status {
	t.Helper()
	select {
	case s := <-r.states:
		if s.State != want {
			t.Fatalf("status %s (port %q, err %v), want %s", s.State, s.Port, s.Err, want)
		}
		return s
	case <-time.After(guard):
		t.Fatalf("no status report within %s, want %s", guard, want)
	}
	return Status{}
}

// noMoreStates checks that no status report is waiting.
func (r *recorder) noMoreStates(t *testing.T) {
	t.Helper()
	select {
	case s := <-r.states:
		t.Fatalf("unexpected status %s (port %q, err %v)", s.State, s.Port, s.Err)
	default:
	}
}

// shoe is the far end of a pseudo-terminal standing in for a shoe: the
// test writes to the master, the Link opens the slave by path.
type shoe struct {
	master *os.File
	path   string
}

func plugShoe(t *testing.T) *shoe {
	t.Helper()
	m, s, err := pty.Open()
	if err != nil {
		t.Fatalf("open pseudo-terminal: %v", err)
	}
	path := s.Name()
	// The Link opens the slave by name; this fd is not needed.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sh := &shoe{master: m, path: path}
	t.Cleanup(func() { sh.master.Close() })
	return sh
}

func (s *shoe) write(t *testing.T, p []byte) {
	t.Helper()
	if _, err := s.master.Write(p); err != nil {
		t.Fatalf("write to shoe %s: %v", s.path, err)
	}
}

// unplug closes the master: the slave hangs up.
func (s *shoe) unplug(t *testing.T) {
	t.Helper()
	if err := s.master.Close(); err != nil {
		t.Fatalf("unplug %s: %v", s.path, err)
	}
}

// pointLink makes link a symlink to target, replacing it atomically as
// udev does.
func pointLink(t *testing.T, link, target string) {
	t.Helper()
	tmp := link + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// runLink starts l.Run and returns a stop function that cancels it, waits
// for it to return and checks its last report.
func runLink(t *testing.T, l *Link, r *recorder) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != context.Canceled {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		case <-time.After(guard):
			t.Fatalf("Run did not return within %s of cancel", guard)
		}
		// The last report is always Disconnected(stopped), once.
		var last Status
	drain:
		for {
			select {
			case s := <-r.states:
				last = s
			default:
				break drain
			}
		}
		if last.State != Disconnected || !errors.Is(last.Err, ErrStopped) {
			t.Errorf("last status %s (%v), want disconnected (stopped)", last.State, last.Err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// logSink is a slog.Handler that hands records to the test.
type logSink struct{ records chan slog.Record }

func newLogSink() *logSink { return &logSink{records: make(chan slog.Record, 1000)} }

func (h *logSink) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSink) Handle(_ context.Context, r slog.Record) error {
	h.records <- r.Clone()
	return nil
}
func (h *logSink) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logSink) WithGroup(string) slog.Handler      { return h }

// waitLog waits for a record at level whose message starts with prefix.
func (h *logSink) waitLog(t *testing.T, level slog.Level, prefix string) slog.Record {
	t.Helper()
	deadline := time.After(guard)
	for {
		select {
		case r := <-h.records:
			if r.Level == level && len(r.Message) >= len(prefix) && r.Message[:len(prefix)] == prefix {
				return r
			}
		case <-deadline:
			t.Fatalf("no %s log %q within %s", level, prefix, guard)
		}
	}
}
