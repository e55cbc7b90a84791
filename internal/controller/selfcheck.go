package controller

import (
	"context"
	"sync"
	"time"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/selfcheck"
)

// selfChecker runs the checks and remembers the last result for /health.
type selfChecker struct {
	check selfcheck.Checker
	every time.Duration
	mu    sync.Mutex
	last  string // the last result recorded, "" before the first
}

func newSelfChecker(c config.Config) *selfChecker {
	s := c.SelfCheck
	// A Config made in code (the demo, tests) takes the defaults too; an
	// interval out of bounds cannot come from ParseConfig.
	if err := s.Complete(""); err != nil {
		s.Every = config.Duration(config.MaxSelfCheckEvery)
	}
	return &selfChecker{every: time.Duration(s.Every), check: selfcheck.Checker{
		Manifest: s.Manifest, PublicKey: s.PublicKey, Require: s.Require, Config: c.File(),
	}}
}

// state is the last result, for /health: "ok", "unsigned", "failed", or
// "pending" before the start-up check is recorded.
func (s *selfChecker) state() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == "" {
		return "pending"
	}
	return s.last
}

// selfCheck checks and records the result as a table input: a failure
// raises the alert that suspends the table.
func (ctl *Controller) selfCheck(start bool) {
	res := ctl.checker.check.Check()
	res.Start = start
	log := ctl.log.With("result", res.Result, "start", start, "manifest", ctl.checker.check.Manifest)
	if len(res.Files) > 0 {
		log = log.With("executable_sha256", res.Files[0].SHA256)
	}
	switch res.Result {
	case coup.SelfCheckOK:
		log.Info("self-check passed")
	case coup.SelfCheckUnsigned:
		log.Warn("self-check: unsigned development build (no manifest; self_check.require is off)")
	default:
		log.Error("self-check failed: the table is suspended until a check passes", "detail", res.Detail)
	}
	in := coup.Input{Kind: coup.InSelfCheck, Check: &res}
	if start {
		// The start-up check goes in at the time of the last input before
		// this start (its row's own time is now): what the shoe buffered
		// meanwhile is read next and judged at the times it was sent,
		// which an input stamped now would push forward.
		in.At = ctl.downSince
	}
	if _, err := ctl.rec.Submit(context.Background(), in); err != nil {
		ctl.log.Warn("self-check not recorded", "err", err)
		return
	}
	ctl.checker.mu.Lock()
	ctl.checker.last = res.Result
	ctl.checker.mu.Unlock()
}

// runSelfChecks checks again every interval until ctx is done.
func (ctl *Controller) runSelfChecks(ctx context.Context) {
	t := ctl.clock.NewTicker(ctl.checker.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			ctl.selfCheck(false)
		}
	}
}
