package device

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/internal/testenv"

	"github.com/creack/pty"
)

// These tests run a Link against real pseudo-terminals through
// go.bug.st/serial, with a fake clock for the backoff and silence timers.

func newTestLink(t *testing.T, cfg Config, clk clock.Clock, r *recorder) *Link {
	t.Helper()
	l, err := NewLink(cfg, Options{OnData: r.onData, OnState: r.onState, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewLink: %v", err)
	}
	return l
}

// shoeBytes is n bytes of every value, so raw mode is checked too: no byte
// may be translated, eaten as a control character or echoed.
func shoeBytes(n int, salt byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) + salt
	}
	return p
}

func TestLinkBytesArriveInOrder(t *testing.T) {
	sh := plugShoe(t)
	r := newRecorder()
	l := newTestLink(t, Config{Path: sh.path}, newFakeClock(), r)
	stop := runLink(t, l, r)

	st := r.expect(t, Connected)
	if st.Port != sh.path {
		t.Errorf("connected port %q, want %q", st.Port, sh.path)
	}
	var want []byte
	for i := range 200 {
		p := shoeBytes(1+i*3, byte(i))
		sh.write(t, p)
		want = append(want, p...)
	}
	got := r.waitData(t, len(want))
	if !bytes.Equal(got, want) {
		t.Fatalf("received %d bytes differing from the %d written (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	stop()
	if s := l.Stats(); s.Bytes != uint64(len(want)) || s.Opens != 1 || s.Disconnects != 0 {
		t.Errorf("stats %+v, want %d bytes, 1 open, 0 disconnects", s, len(want))
	}
	if got := r.bytes(); !bytes.Equal(got, want) {
		t.Errorf("after stop: %d bytes, want %d", len(got), len(want))
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

func TestLinkUnplugReplug(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "shoe")
	sh1 := plugShoe(t)
	pointLink(t, link, sh1.path)

	clk := newFakeClock()
	r := newRecorder()
	l := newTestLink(t, Config{Path: link}, clk, r)
	stop := runLink(t, l, r)

	if st := r.expect(t, Connected); st.Port != link {
		t.Errorf("connected port %q, want the configured link %q", st.Port, link)
	}
	first := []byte("$CARD,1,KH*00\r\n$CARD,2,9S*00\r\n")
	sh1.write(t, first)
	r.waitData(t, len(first))

	// A pty master closing drops what the slave has not read yet, as an
	// unplugged cable does; everything written was read above.
	sh1.unplug(t)
	st := r.expect(t, Disconnected)
	if !errors.Is(st.Err, ErrHangup) {
		t.Errorf("disconnected because %v, want ErrHangup", st.Err)
	}
	if st.Port != link || st.Retry != DefaultBackoffMin {
		t.Errorf("disconnected status port %q retry %s, want %q and %s", st.Port, st.Retry, link, DefaultBackoffMin)
	}

	// Replug: a new pty, and the configured link pointed at it.
	sh2 := plugShoe(t)
	pointLink(t, link, sh2.path)
	clk.waitTimer(t, DefaultBackoffMin)
	clk.Advance(DefaultBackoffMin)
	r.expect(t, Connected)

	second := []byte("$CARD,3,AD*00\r\n")
	sh2.write(t, second)
	want := append(bytes.Clone(first), second...)
	if got := r.waitData(t, len(want)); !bytes.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	stop()
	if got := r.bytes(); !bytes.Equal(got, want) {
		t.Errorf("after stop received %q, want %q: nothing lost or repeated", got, want)
	}
	if s := l.Stats(); s.Opens != 2 || s.Disconnects != 1 || s.OpenFailures != 0 {
		t.Errorf("stats %+v, want 2 opens, 1 disconnect, 0 open failures", s)
	}
}

func TestLinkSilence(t *testing.T) {
	sh := plugShoe(t)
	clk := newFakeClock()
	r := newRecorder()
	const window = 3 * time.Second
	l := newTestLink(t, Config{Path: sh.path, SilentAfter: Duration(window)}, clk, r)
	runLink(t, l, r)

	r.expect(t, Connected)
	clk.waitTimer(t, window)
	clk.Advance(window)
	st := r.expect(t, Silent)
	if want := clk.Now(); !st.Since.Equal(want) {
		t.Errorf("silent since %v, want %v", st.Since, want)
	}

	sh.write(t, []byte("$HB,7*00\r\n"))
	r.expect(t, Connected)
	r.waitData(t, 10)

	// A byte restarts the window: a byte two seconds in moves the
	// deadline to five.
	start := clk.Now()
	clk.Advance(2 * time.Second)
	sh.write(t, []byte("x"))
	r.waitData(t, 11)
	if due := clk.waitTimer(t, window); !due.Equal(start.Add(5 * time.Second)) {
		t.Errorf("silence due at %v, want %v", due.Sub(start), 5*time.Second)
	}
	clk.Advance(3 * time.Second)
	r.expect(t, Silent)
	if s := l.Stats(); s.Silences != 2 {
		t.Errorf("silences %d, want 2", s.Silences)
	}
}

func TestLinkSilenceOff(t *testing.T) {
	sh := plugShoe(t)
	clk := newFakeClock()
	r := newRecorder()
	l := newTestLink(t, Config{Path: sh.path, SilentAfter: Off}, clk, r)
	runLink(t, l, r)

	r.expect(t, Connected)
	sh.write(t, []byte("hello"))
	r.waitData(t, 5)
	// Data has been handled, so any silence timer would be running now.
	if ds := clk.Running(); len(ds) != 0 {
		t.Errorf("timers running with silence off: %v", ds)
	}
}

func TestLinkBackoff(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "shoe") // does not exist yet
	clk := newFakeClock()
	r := newRecorder()
	cfg := Config{Path: link, BackoffMin: Duration(100 * time.Millisecond), BackoffMax: Duration(time.Second)}
	l := newTestLink(t, cfg, clk, r)
	runLink(t, l, r)

	st := r.expect(t, Disconnected)
	if !errors.Is(st.Err, fs.ErrNotExist) {
		t.Errorf("disconnected because %v, want a not-exist error", st.Err)
	}
	if st.Port != link || st.Retry != 100*time.Millisecond {
		t.Errorf("status port %q retry %s, want %q and 100ms", st.Port, st.Retry, link)
	}
	ms := time.Millisecond
	for _, d := range []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second, time.Second} {
		clk.waitTimer(t, d)
		// The same failure again is not news.
		r.noMoreStates(t)
		clk.Advance(d)
	}
	clk.waitTimer(t, time.Second)
	if s := l.Stats(); s.OpenFailures != 8 {
		t.Errorf("open failures %d, want 8", s.OpenFailures)
	}

	// A port that opens but never speaks is no success: backoff stays capped.
	sh1 := plugShoe(t)
	pointLink(t, link, sh1.path)
	clk.Advance(time.Second)
	r.expect(t, Connected)
	sh1.unplug(t)
	if st := r.expect(t, Disconnected); !errors.Is(st.Err, ErrHangup) || st.Retry != time.Second {
		t.Errorf("after a silent session: %v, retry %s; want a hang-up and 1s", st.Err, st.Retry)
	}

	// A session that delivered bytes resets it.
	sh2 := plugShoe(t)
	pointLink(t, link, sh2.path)
	clk.waitTimer(t, time.Second)
	clk.Advance(time.Second)
	r.expect(t, Connected)
	sh2.write(t, []byte("$HB,1*00\r\n"))
	r.waitData(t, 10)
	sh2.unplug(t)
	if st := r.expect(t, Disconnected); st.Retry != 100*time.Millisecond {
		t.Errorf("after a working session retry %s, want 100ms", st.Retry)
	}
	clk.waitTimer(t, 100*time.Millisecond)
}

func TestLinkBackoffDefaultsDoubleAndCap(t *testing.T) {
	l, err := NewLink(Config{Path: "/dev/ttyUSB0"}, Options{OnData: func([]byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := l.backoff(i); got != w {
			t.Errorf("backoff after %d failures: %s, want %s", i+1, got, w)
		}
	}
	if got := l.backoff(1 << 40); got != 5*time.Second {
		t.Errorf("backoff after very many failures: %s, want 5s", got)
	}
}

func TestLinkUSBResolution(t *testing.T) {
	sh := plugShoe(t)
	clk := newFakeClock()
	r := newRecorder()
	present := make(chan []PortInfo, 1)
	present <- nil
	var last []PortInfo
	lister := func() ([]PortInfo, error) {
		select {
		case last = <-present:
		default:
		}
		return last, nil
	}
	cfg := Config{USB: &USBID{VID: "0x0403", PID: "6001"}}
	l, err := NewLink(cfg, Options{OnData: r.onData, OnState: r.onState, Clock: clk, Lister: lister, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runLink(t, l, r)

	st := r.expect(t, Disconnected)
	if !errors.Is(st.Err, ErrNoPort) || st.Port != "" {
		t.Errorf("status %v port %q, want ErrNoPort and no port", st.Err, st.Port)
	}
	present <- []PortInfo{{Name: sh.path, USB: true, VID: "0403", PID: "6001", Serial: "A1"}}
	clk.waitTimer(t, DefaultBackoffMin)
	clk.Advance(DefaultBackoffMin)
	if st := r.expect(t, Connected); st.Port != sh.path {
		t.Errorf("connected to %q, want %q", st.Port, sh.path)
	}
	sh.write(t, []byte("ok"))
	if got := r.waitData(t, 2); string(got) != "ok" {
		t.Errorf("received %q", got)
	}
}

func TestLinkRunOnce(t *testing.T) {
	sh := plugShoe(t)
	r := newRecorder()
	l := newTestLink(t, Config{Path: sh.path}, newFakeClock(), r)
	runLink(t, l, r)
	r.expect(t, Connected)
	if err := l.Run(t.Context()); err == nil {
		t.Fatal("a second concurrent Run succeeded")
	}
}

// TestLinkNoLeaks unplugs and replugs several times, stops, and checks that
// every goroutine and file descriptor the Link used is gone.
func TestLinkNoLeaks(t *testing.T) {
	// Warm up what the process keeps for good (the runtime's poller).
	plugShoe(t).master.Close()
	baseG, baseFD := runtime.NumGoroutine(), countFDs(t)

	dir := t.TempDir()
	link := filepath.Join(dir, "shoe")
	clk := newFakeClock()
	r := newRecorder()
	l := newTestLink(t, Config{Path: link}, clk, r)

	var shoes []*shoe
	sh := plugShoe(t)
	shoes = append(shoes, sh)
	pointLink(t, link, sh.path)
	stop := runLink(t, l, r)
	r.expect(t, Connected)
	total := 0
	for i := range 5 {
		msg := []byte(fmt.Sprintf("$HB,%d*00\r\n", i))
		sh.write(t, msg)
		total += len(msg)
		r.waitData(t, total)
		sh.unplug(t)
		r.expect(t, Disconnected)
		sh = plugShoe(t)
		shoes = append(shoes, sh)
		pointLink(t, link, sh.path)
		clk.waitTimer(t, DefaultBackoffMin)
		clk.Advance(DefaultBackoffMin)
		r.expect(t, Connected)
	}
	stop()
	for _, s := range shoes {
		s.master.Close()
	}

	// A goroutine that has signalled it is done still needs a moment to
	// exit: wait until it has.
	var g, fds int
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := testenv.WaitFor(ctx, "the goroutines and descriptors of before", func() bool {
		g, fds = runtime.NumGoroutine(), countFDs(t)
		return g <= baseG && fds <= baseFD
	}); err != nil {
		buf := make([]byte, 1<<16)
		t.Fatalf("after stop: %v: %d goroutines (was %d), %d fds (was %d)\n%s",
			err, g, baseG, fds, baseFD, buf[:runtime.Stack(buf, true)])
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("count file descriptors: %v", err)
	}
	return len(entries)
}

// BenchmarkLinkThroughput measures bytes from a pty master to OnData: a
// shoe at 9600 baud sends under 1 kB/s, so anything far above is headroom.
func BenchmarkLinkThroughput(b *testing.B) {
	m, s, err := pty.Open()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	path := s.Name()
	s.Close()
	got := make(chan int, 1024)
	connected := make(chan struct{}, 1)
	l, err := NewLink(Config{Path: path}, Options{
		OnData: func(p []byte) { got <- len(p) },
		OnState: func(st Status) {
			if st.State == Connected {
				connected <- struct{}{}
			}
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-connected

	sentence := []byte("$CARD,123,KH*5A\r\n")
	b.SetBytes(int64(len(sentence)))
	b.ResetTimer()
	go func() {
		for range b.N {
			if _, err := m.Write(sentence); err != nil {
				return
			}
		}
	}()
	for n := 0; n < b.N*len(sentence); {
		n += <-got
	}
}
