package config

import (
	"fmt"
	"time"

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
	Every Duration `json:"every,omitempty"`
}

// MaxSelfCheckEvery is the longest a self-check interval may be.
const MaxSelfCheckEvery = 24 * time.Hour

// Complete fills in the defaults; relative paths are taken from dir.
func (s *SelfCheckSection) Complete(dir string) error {
	if s.Manifest == "" {
		s.Manifest = selfcheck.DefaultManifest
	}
	if s.PublicKey == "" {
		s.PublicKey = selfcheck.DefaultPublicKey
	}
	s.Manifest, s.PublicKey = under(dir, s.Manifest), under(dir, s.PublicKey)
	switch d := time.Duration(s.Every); {
	case d == 0:
		s.Every = Duration(MaxSelfCheckEvery)
	case d < time.Minute || d > MaxSelfCheckEvery:
		return fmt.Errorf("self_check.every %v: want 1m to 24h", d)
	}
	return nil
}
