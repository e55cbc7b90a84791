package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fatalTB records Fatalf instead of ending the test, so a wait that gives
// up can be checked.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestEventually(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holdsAt int64 // the look at which cond first holds; 0: never
		timeout time.Duration
		fails   []string // what the failure says; none: no failure
	}{
		{name: "at once", holdsAt: 1, timeout: time.Minute},
		{name: "on the fifth look", holdsAt: 5, timeout: time.Minute},
		{name: "never", timeout: 20 * time.Millisecond, fails: []string{"waited 20ms", "for the fifth look", "never held", "deadline exceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var looks atomic.Int64
			tb := &fatalTB{TB: t}
			Eventually(tb, tc.timeout, "the fifth look", func() bool {
				return looks.Add(1) == tc.holdsAt
			})
			if tc.fails == nil {
				if tb.failed != "" || looks.Load() != tc.holdsAt {
					t.Errorf("failed %q after %d looks, want success at look %d", tb.failed, looks.Load(), tc.holdsAt)
				}
				return
			}
			for _, w := range tc.fails {
				if !strings.Contains(tb.failed, w) {
					t.Errorf("failure %q does not say %q", tb.failed, w)
				}
			}
			if looks.Load() < 2 {
				t.Errorf("gave up after %d looks", looks.Load())
			}
		})
	}
}

func TestEventuallyErrSaysTheLastError(t *testing.T) {
	tb := &fatalTB{TB: t}
	n := 0
	EventuallyErr(tb, 10*time.Millisecond, "the broker", func() error {
		n++
		return fmt.Errorf("refused %d", n)
	})
	if want := fmt.Sprintf("refused %d", n); !strings.Contains(tb.failed, want) || !strings.Contains(tb.failed, "for the broker") {
		t.Errorf("failure %q, want the last error %q and what", tb.failed, want)
	}
}

// TestWaitFor: a condition another goroutine makes true is seen; a
// context ended stops the wait with its cause and what was waited for.
func TestWaitFor(t *testing.T) {
	var ready atomic.Bool
	go func() { ready.Store(true) }()
	if err := WaitFor(t.Context(), "the goroutine", ready.Load); err != nil {
		t.Fatal(err)
	}
	stopped := errors.New("the table closed")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(stopped)
	err := WaitFor(ctx, "a coup", func() bool { return false })
	if !errors.Is(err, stopped) || !errors.Is(err, errNotYet) || !strings.Contains(err.Error(), "for a coup") {
		t.Errorf("WaitFor on an ended context: %v", err)
	}
}

// TestWaitMoving: work that moves is waited for however long it takes in
// all; work that stands still for the stall ends the wait, saying where
// it stood; a context ended ends it too.
func TestWaitMoving(t *testing.T) {
	stopped := errors.New("the floor closed")
	for _, tc := range []struct {
		name    string
		stall   time.Duration
		count   func(look int64) int64 // the count at each look
		doneAt  int64                  // the look that is done; 0: never
		stop    bool                   // the context ended before
		fails   []string               // what the error says; none: nil
		atLeast int64                  // looks before giving up, at least
	}{
		{name: "moving to the end", stall: 50 * time.Millisecond, count: func(n int64) int64 { return n }, doneAt: 12},
		{name: "done at once", stall: time.Millisecond, count: func(int64) int64 { return 0 }, doneAt: 1},
		{name: "stands still", stall: 20 * time.Millisecond, count: func(n int64) int64 { return min(n, 3) },
			fails: []string{"for the catch-up", "at 3", "no progress in 20ms"}, atLeast: 4},
		{name: "context ended", stall: time.Hour, count: func(n int64) int64 { return n }, stop: true,
			fails: []string{"for the catch-up", "at 1", "the floor closed"}, atLeast: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tc.stop {
				cancel(stopped)
			}
			var looks int64
			err := WaitMoving(ctx, tc.stall, "the catch-up", func() (int64, bool) {
				looks++
				return tc.count(looks), looks == tc.doneAt
			})
			if tc.fails == nil {
				if err != nil || looks != tc.doneAt {
					t.Errorf("%v after %d looks, want nil at look %d", err, looks, tc.doneAt)
				}
				return
			}
			if err == nil {
				t.Fatalf("nil after %d looks, want an error", looks)
			}
			for _, w := range tc.fails {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if looks < tc.atLeast {
				t.Errorf("gave up after %d looks, want at least %d", looks, tc.atLeast)
			}
		})
	}
}

// TestEventuallyWoken: a word on wake makes the next look come at once,
// however long the pause has grown; without one the wait still looks and
// still gives up.
func TestEventuallyWoken(t *testing.T) {
	wake := make(chan struct{}, 1)
	var ready atomic.Bool
	var looks atomic.Int64
	tried := make(chan struct{}, 100)
	go func() {
		// Let the pauses grow to their longest, then say the word.
		for looks.Load() < 9 {
			<-tried
		}
		ready.Store(true)
		wake <- struct{}{}
	}()
	start := time.Now()
	var woke time.Time
	EventuallyWoken(t, time.Minute, "the word", wake, func() error {
		looks.Add(1)
		if ready.Load() {
			return nil
		}
		if looks.Load() >= 9 && woke.IsZero() {
			woke = time.Now()
		}
		tried <- struct{}{}
		return errors.New("no word yet")
	})
	if took := time.Since(woke); took > maxPoll/2 {
		t.Errorf("the look after the word came %v after it (the longest pause is %v): the word did not wake it", took, maxPoll)
	}
	t.Logf("%d looks in %v", looks.Load(), time.Since(start))

	tb := &fatalTB{TB: t}
	EventuallyWoken(tb, 20*time.Millisecond, "a word never said", make(chan struct{}), func() error { return errors.New("silence") })
	if !strings.Contains(tb.failed, "for a word never said") || !strings.Contains(tb.failed, "silence") {
		t.Errorf("failure %q, want what and the last error", tb.failed)
	}
}
