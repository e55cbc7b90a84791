package clock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

// fired reports whether c holds a value, and which.
func fired(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimer(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(3 * time.Second)
	f.Advance(2 * time.Second)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("fired 1 s early")
	}
	f.Advance(time.Second)
	if v, ok := fired(tm.C()); !ok || !v.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("at its time: fired %v with %v, want true with %v", ok, v, t0.Add(3*time.Second))
	}
	f.Advance(time.Hour)
	if _, ok := fired(tm.C()); ok {
		t.Fatal("a one-shot timer fired twice")
	}
	if tm.Stop() {
		t.Error("Stop of a fired timer reported it running")
	}
}

func TestFakeStopAndResetDropStaleTicks(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second) // due, unread
	if tm.Stop() {
		t.Error("Stop reported a fired timer as running")
	}
	if _, ok := fired(tm.C()); ok {
		t.Error("a value from before Stop was received")
	}
	if tm.Reset(5 * time.Second) {
		t.Error("Reset reported a stopped timer as running")
	}
	f.Advance(4 * time.Second)
	if !tm.Reset(time.Second) {
		t.Error("Reset reported a running timer as stopped")
	}
	f.Advance(time.Second)
	if v, ok := fired(tm.C()); !ok || !v.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("after Reset: fired %v at %v, want %v", ok, v, t0.Add(6*time.Second))
	}
}

func TestFakeTickerDropsMissedTicks(t *testing.T) {
	f := NewFake(t0)
	k := f.NewTicker(time.Second)
	f.Advance(3500 * time.Millisecond) // three ticks due, one kept
	if v, ok := fired(k.C()); !ok || !v.Equal(t0.Add(3500*time.Millisecond)) {
		t.Fatalf("tick %v %v", v, ok)
	}
	if _, ok := fired(k.C()); ok {
		t.Fatal("a missed tick was kept")
	}
	f.Advance(500 * time.Millisecond) // the 4 s tick
	if _, ok := fired(k.C()); !ok {
		t.Fatal("the next period's tick did not come")
	}
	k.Reset(10 * time.Second)
	f.Advance(9 * time.Second)
	if _, ok := fired(k.C()); ok {
		t.Fatal("ticked before the new period")
	}
	k.Stop()
	f.Advance(time.Minute)
	if _, ok := fired(k.C()); ok {
		t.Fatal("ticked after Stop")
	}
}

func TestStepping(t *testing.T) {
	f := NewStepping(t0, 250*time.Millisecond)
	for i := range 4 {
		if got, want := f.Now(), t0.Add(time.Duration(i)*250*time.Millisecond); !got.Equal(want) {
			t.Fatalf("reading %d: %v, want %v", i, got, want)
		}
	}
}

func TestVirtualSleepMovesTime(t *testing.T) {
	f := NewVirtual(t0)
	ctx := context.Background()
	for _, d := range []time.Duration{time.Second, 0, -time.Second, 90 * time.Minute} {
		if err := Sleep(ctx, f, d); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := f.Now(), t0.Add(time.Second+90*time.Minute); !got.Equal(want) {
		t.Errorf("after sleeping: %v, want %v", got, want)
	}
	if got, want := f.Armed(), []time.Duration{time.Second, 90 * time.Minute}; !slices.Equal(got, want) {
		t.Errorf("armed %v, want %v", got, want)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Sleep(cctx, f, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep on a done context: %v", err)
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	f := NewFake(t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, f, time.Hour) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := f.WaitArmed(wctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep returned %v", err)
	}
}

func TestWaitArmed(t *testing.T) {
	f := NewFake(t0)
	go func() { f.NewTimer(7 * time.Second) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	when, err := f.WaitArmed(ctx, 7*time.Second)
	if err != nil || !when.Equal(t0.Add(7*time.Second)) {
		t.Fatalf("WaitArmed: %v %v", when, err)
	}
	short, scancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer scancel()
	if _, err := f.WaitArmed(short, time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("no such timer: %v", err)
	}
}

func TestReal(t *testing.T) {
	if Or(nil) != Real {
		t.Error("Or(nil) is not Real")
	}
	f := NewFake(t0)
	if Or(f) != Clock(f) {
		t.Error("Or(f) is not f")
	}
	before := time.Now()
	if err := Sleep(context.Background(), Real, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if Real.Now().Sub(before) < time.Millisecond {
		t.Error("Real slept less than asked")
	}
	k := Real.NewTicker(time.Millisecond)
	<-k.C()
	k.Stop()
}

func TestSteppingFiresTimers(t *testing.T) {
	f := NewStepping(t0, time.Second)
	tm := f.NewTimer(2 * time.Second)
	f.Now() // t0; now t0+1s
	if _, ok := fired(tm.C()); ok {
		t.Fatal("fired early")
	}
	f.Now() // t0+1s; now t0+2s: due
	if v, ok := fired(tm.C()); !ok || !v.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("fired %v at %v", ok, v)
	}
}
