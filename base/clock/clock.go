// Package clock is the one way tablectl's packages get the time: the
// reading of now, one-shot timers and tickers. Production code takes a
// Clock and is given Real; tests give it a Fake and move time themselves,
// so backoffs, silences, deadlines and paces are tested without waiting
// and without flaking on a busy machine.
//
// Package coup never takes a Clock: the table reads time only from the
// inputs it is given.
package clock

import (
	"context"
	"time"
)

// Clock is where a package reads the time and waits on it.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer with Go 1.23 semantics: after Stop or Reset
// returns, no value from before is received on C.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Ticker delivers the time on C every period, dropping ticks a slow
// reader misses, as time.Ticker does.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Sleep waits d on c, or until ctx is done, and returns ctx.Err().
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
	return ctx.Err()
}

// Or returns c, or Real when c is nil: the default of every Clock option.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Real is the wall clock.
var Real Clock = wall{}

type wall struct{}

func (wall) Now() time.Time { return time.Now() }

func (wall) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (wall) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }
