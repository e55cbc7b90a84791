package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/selfcheck"
)

// SelfCheckSection is program self-authentication (docs/operations.md,
// "Self-authentication"): the controller hashes its executable and its
// config file at start and every Every, and checks them against the
// manifest signed at build time.
type SelfCheckSection struct {
	// Manifest is the signed manifest; default /usr/lib/tablectl/manifest.json.
	Manifest string `json:"manifest,omitempty"`
	// PublicKey is the PEM public key of the key that signs it; default
	// /usr/lib/tablectl/manifest.pub.
	PublicKey string `json:"public_key,omitempty"`
	// Require makes a missing manifest a failed check. Without it a
	// controller with no manifest is an unsigned development build: it
	// records "unsigned" and deals. A production table sets it.
	Require bool `json:"require,omitempty"`
	// Every is how often the check runs after start; default and at most
	// 24h (N.J.A.C. 13:69O-1.5), at least 1m.
	Every device.Duration `json:"every,omitempty"`
}

// MaxSelfCheckEvery is the longest a self-check interval may be.
const MaxSelfCheckEvery = 24 * time.Hour

// complete fills in the defaults; relative paths are taken from dir.
func (s *SelfCheckSection) complete(dir string) error {
	if s.Manifest == "" {
		s.Manifest = selfcheck.DefaultManifest
	}
	if s.PublicKey == "" {
		s.PublicKey = selfcheck.DefaultPublicKey
	}
	s.Manifest, s.PublicKey = under(dir, s.Manifest), under(dir, s.PublicKey)
	switch d := time.Duration(s.Every); {
	case d == 0:
		s.Every = device.Duration(MaxSelfCheckEvery)
	case d < time.Minute || d > MaxSelfCheckEvery:
		return fmt.Errorf("self_check.every %v: want 1m to 24h", d)
	}
	return nil
}

// selfChecker runs the checks and remembers the last result for /health.
type selfChecker struct {
	check selfcheck.Checker
	every time.Duration
	mu    sync.Mutex
	last  string // the last result recorded, "" before the first
}

func newSelfChecker(c Config) *selfChecker {
	s := c.SelfCheck
	// A Config made in code (the demo, tests) takes the defaults too; an
	// interval out of bounds cannot come from ParseConfig.
	if err := s.complete(""); err != nil {
		s.Every = device.Duration(MaxSelfCheckEvery)
	}
	return &selfChecker{every: time.Duration(s.Every), check: selfcheck.Checker{
		Manifest: s.Manifest, PublicKey: s.PublicKey, Require: s.Require, Config: c.file,
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
