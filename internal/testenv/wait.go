package testenv

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// The first pause between two looks, doubled after each to at most
// maxPoll: a condition that holds soon is seen soon, one that takes
// seconds is not looked at a thousand times.
const (
	firstPoll = time.Millisecond
	maxPoll   = 100 * time.Millisecond
)

// errNotYet is the last word of a condition that never held.
var errNotYet = errors.New("it never held")

// WaitFor looks at cond until it holds, pausing a little longer after each
// look, and returns nil then, or, once ctx is done, an error naming what it
// waited for and wrapping ctx's cause. It is the wait for code that has a
// context and no test.
func WaitFor(ctx context.Context, what string, cond func() bool) error {
	return poll(ctx, what, holds(cond))
}

// Eventually waits up to timeout for cond to hold and fails the test,
// naming what it waited for, if it does not; the test's end stops the wait
// too. It is the one wait for what another goroutine or process does:
// tests use it, not a loop of their own around time.Sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	EventuallyErr(t, timeout, what, holds(cond))
}

// EventuallyErr is Eventually for a try that says why it is not there yet:
// it waits up to timeout for try to return nil and fails the test naming
// what, with try's last error, if it does not.
func EventuallyErr(t testing.TB, timeout time.Duration, what string, try func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := poll(ctx, what, try); err != nil {
		t.Fatalf("waited %v: %v", timeout, err)
	}
}

func holds(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}

// EventuallyWoken is EventuallyErr for a condition that something says
// may have changed (a line logged, a message arrived): it looks again at
// once whenever wake delivers, and between times as EventuallyErr does in
// case the word never comes.
func EventuallyWoken(t testing.TB, timeout time.Duration, what string, wake <-chan struct{}, try func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := pollWoken(ctx, what, wake, try); err != nil {
		t.Fatalf("waited %v: %v", timeout, err)
	}
}

// poll runs try until it returns nil or ctx is done; the error names what,
// try's last error and why the wait ended.
func poll(ctx context.Context, what string, try func() error) error {
	return pollWoken(ctx, what, nil, try)
}

// pollWoken is poll that also runs try whenever wake delivers (a nil
// wake never does), the pause starting again from the first.
func pollWoken(ctx context.Context, what string, wake <-chan struct{}, try func() error) error {
	pause := firstPoll
	timer := time.NewTimer(pause)
	defer timer.Stop()
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("for %s: %w (%w)", what, err, context.Cause(ctx))
		case <-wake:
			pause = firstPoll / 2
		case <-timer.C:
		}
		pause = min(2*pause, maxPoll)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(pause)
	}
}

// errStalled is why a WaitMoving gave up: what it counts stood still.
var errStalled = errors.New("no progress")

// WaitMoving waits for a long piece of work whose whole time is not known
// (a catch-up of b.N rows under whatever load), as long as it moves: it
// looks until look says done and returns nil, or returns an error naming
// what and the last count once the count look returns has stood still
// for stall, or once ctx is done.
func WaitMoving(ctx context.Context, stall time.Duration, what string, look func() (count int64, done bool)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var last int64
	var movedAt time.Time
	return poll(ctx, what, func() error {
		n, done := look()
		if done {
			return nil
		}
		switch {
		case movedAt.IsZero() || n != last:
			last, movedAt = n, time.Now()
		case time.Since(movedAt) > stall:
			cancel(fmt.Errorf("%w in %v", errStalled, stall))
		}
		return fmt.Errorf("at %d", n)
	})
}
