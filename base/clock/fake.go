package clock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when told: by Advance or Set, by
// a step at every reading (NewStepping), or, on a virtual clock
// (NewVirtual), by every timer it arms. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	step    time.Duration // moved on after every reading of Now
	virtual bool          // a timer fires as it is armed, moving now to its due time
	active  map[*fakeTimer]struct{}
	armed   []time.Duration
	changed chan struct{} // closed and replaced whenever a timer is armed or stopped
}

// NewFake returns a clock reading start until the test moves it.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, active: map[*fakeTimer]struct{}{}, changed: make(chan struct{})}
}

// NewStepping returns a clock reading start, then moving on by step after
// every reading of Now, so rows stamped with it get distinct, reproducible
// times.
func NewStepping(start time.Time, step time.Duration) *Fake {
	f := NewFake(start)
	f.step = step
	return f
}

// NewVirtual returns a clock on which every wait ends at once, its time
// moved on by the wait: a simulated dealer on it deals a shoe at human pace
// in compressed time, the same sentences and none of the waiting. Meant for
// one waiting goroutine; tickers tick only on Advance.
func NewVirtual(start time.Time) *Fake {
	f := NewFake(start)
	f.virtual = true
	return f
}

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.now
	if f.step != 0 {
		f.now = f.now.Add(f.step)
		f.fire()
	}
	return t
}

// Set moves the time to t (backwards too) and fires the timers now due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
	f.fire()
}

// Advance moves the time on by d and fires the timers now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	f.fire()
}

// Armed returns the duration of every timer and ticker armed so far, in
// the order they were armed.
func (f *Fake) Armed() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.armed...)
}

// Running returns the periods of the timers and tickers now running,
// shortest first.
func (f *Fake) Running() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	ds := make([]time.Duration, 0, len(f.active))
	for t := range f.active {
		ds = append(ds, t.d)
	}
	slices.Sort(ds)
	return ds
}

// WaitArmed waits until a timer or ticker of period d is running and
// returns when it is next due, or ctx's error naming what is running.
func (f *Fake) WaitArmed(ctx context.Context, d time.Duration) (time.Time, error) {
	for {
		f.mu.Lock()
		var running []time.Duration
		for t := range f.active {
			if t.d == d {
				when := t.when
				f.mu.Unlock()
				return when, nil
			}
			running = append(running, t.d)
		}
		changed := f.changed
		f.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no %s timer armed (running: %v): %w", d, running, ctx.Err())
		}
	}
}

// NewTimer arms a one-shot timer on the fake time.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// NewTicker arms a ticker on the fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1), period: d}
	t.reset(d)
	return fakeTicker{t}
}

// fire sends on every timer now due; f.mu is held.
func (f *Fake) fire() {
	for t := range f.active {
		for !t.when.After(f.now) {
			select {
			case t.ch <- f.now:
			default: // a ticker whose reader is behind drops the tick
			}
			if t.period <= 0 {
				delete(f.active, t)
				break
			}
			t.when = t.when.Add(t.period)
		}
	}
	f.notify()
}

// notify wakes WaitArmed; f.mu is held.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f      *Fake
	ch     chan time.Time
	d      time.Duration
	period time.Duration // > 0 for a ticker
	when   time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, was := t.f.active[t]
	delete(t.f.active, t)
	t.drain()
	t.f.notify()
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool { return t.reset(d) }

func (t *fakeTimer) reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	_, was := t.f.active[t]
	t.drain()
	if t.period > 0 {
		t.period = d
	}
	t.d, t.when = d, t.f.now.Add(d)
	t.f.armed = append(t.f.armed, d)
	t.f.active[t] = struct{}{}
	if t.f.virtual && t.period <= 0 && t.when.After(t.f.now) {
		t.f.now = t.when
	}
	t.f.fire()
	return was
}

// drain gives the Go 1.23 guarantee: no stale tick after Stop or Reset.
func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time { return k.t.ch }
func (k fakeTicker) Stop()               { k.t.Stop() }
func (k fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	k.t.reset(d)
}
