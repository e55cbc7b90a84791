package floor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
)

// TestRetry: the floor's retries say the last failure after the last try
// (issue 36: an earlier loop returned "%!w(<nil>)", its error shadowed),
// wait on the clock they are given, and stop with their context.
func TestRetry(t *testing.T) {
	start := time.Date(2026, 11, 28, 20, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		failures int // tries that fail before one succeeds
		tries    int
		want     string // "" for success
		calls    int
	}{
		{"first try", 0, 30, "", 1},
		{"third try", 2, 30, "", 3},
		{"never", 100, 30, "try 30: no JetStream leader", 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewVirtual(start)
			calls := 0
			err := retry(context.Background(), clk, c.tries, time.Second, time.Second, func(context.Context) error {
				calls++
				if calls <= c.failures {
					return fmt.Errorf("try %d: no JetStream leader", calls)
				}
				return nil
			})
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("err %v", err)
			case c.want != "" && (err == nil || err.Error() != c.want):
				t.Fatalf("err %v, want %q", err, c.want)
			case calls != c.calls:
				t.Fatalf("%d calls, want %d", calls, c.calls)
			}
			// The waits were the clock's: a second between tries.
			if got := clk.Now().Sub(start); got != time.Duration(c.calls-1)*time.Second {
				t.Fatalf("the clock moved %v over %d tries", got, c.calls)
			}
		})
	}
	t.Run("context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		boom := errors.New("refused")
		err := retry(ctx, clock.NewVirtual(start), 30, time.Second, time.Second, func(context.Context) error {
			calls++
			if calls == 3 {
				cancel()
			}
			return boom
		})
		if !errors.Is(err, boom) || calls != 3 {
			t.Fatalf("err %v after %d calls, want the last failure after 3", err, calls)
		}
	})
}
