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
