package shoesim

import (
	"context"
	"sync"
	"time"
)

// Clock is where a Sim gets its time: the pace of the dealing, heartbeats,
// silences and unplugs all wait on it, so tests can run at full speed.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or until ctx is done, and then returns ctx.Err().
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
var RealClock Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return ctx.Err()
}

// VirtualClock is a clock whose Sleep returns at once, moving its time on by
// the duration slept. A Sim on a VirtualClock deals a shoe at human pace in
// compressed time: the same sentences and heartbeats, none of the waiting.
type VirtualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewVirtualClock returns a VirtualClock reading start.
func NewVirtualClock(start time.Time) *VirtualClock { return &VirtualClock{now: start} }

// Now is the virtual time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep moves the virtual time on by d.
func (c *VirtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.mu.Lock()
		c.now = c.now.Add(d)
		c.mu.Unlock()
	}
	return nil
}
