package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// Enrolment is a key to add to the keyring: a supervisor's public key
// (made in a pit console's browser, or by tablectl keygen), what it may
// sign and when.
type Enrolment struct {
	Name string
	// Label names the key among its supervisor's keys: needed when the
	// name already has a key (and then by that key too).
	Label     string
	PublicKey ed25519.PublicKey
	Actions   []string // nil: every action
	// NotBefore and NotAfter bound when the key may sign (zero: no bound).
	NotBefore, NotAfter time.Time
	Comment             string
}

// ParsePublicKey reads an Ed25519 public key as the pit console shows it
// (the raw 32 bytes in standard base64) or as a PKIX PEM file holds it
// (tablectl keygen's NAME.pub).
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	text = string(bytes.TrimSpace([]byte(text)))
	if len(text) > 4096 {
		return nil, errors.New("public key: too long")
	}
	if raw, err := base64.StdEncoding.Strict().DecodeString(text); err == nil {
		if len(raw) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("public key: %d bytes, want %d", len(raw), ed25519.PublicKeySize)
		}
		return ed25519.PublicKey(raw), nil
	}
	pub, err := audit.ParsePublicKey([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("public key: neither %d bytes in standard base64 nor a PEM public key: %w", ed25519.PublicKeySize, err)
	}
	return pub, nil
}

// AddKey returns the keyring document doc (a keyring file's contents;
// empty for a new keyring) with e added. The result is checked as the
// controller checks it at start: a key already listed, an unknown action,
// a window that ends before it starts, or a second key of a name without
// labels is an error, and doc is left as it was. The result is a draft:
// the officer's signature, which no longer covers it, is dropped (the
// serial stays, for SignKeyring to follow), so no controller takes it
// until it is signed again.
func AddKey(doc []byte, e Enrolment) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		doc = []byte(`{"keys": []}`)
	}
	if _, err := ParseKeyring(doc); err != nil {
		return nil, fmt.Errorf("the keyring as it is: %w", err)
	}
	var kj keyringJSON
	if err := json.Unmarshal(doc, &kj); err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if len(e.PublicKey) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("enrol %s: public key is %d bytes, want %d", clip(e.Name), len(e.PublicKey), ed25519.PublicKeySize)
	}
	actions := slices.Clone(e.Actions)
	if len(actions) == 0 {
		actions = []string{ActionsAll}
	}
	k := keyJSON{Name: e.Name, Key: e.Label, PublicKey: base64.StdEncoding.EncodeToString(e.PublicKey), Actions: actions, Comment: e.Comment}
	if !e.NotBefore.IsZero() {
		k.NotBefore = e.NotBefore.UTC().Format(time.RFC3339)
	}
	if !e.NotAfter.IsZero() {
		k.NotAfter = e.NotAfter.UTC().Format(time.RFC3339)
	}
	kj.Keys = append(kj.Keys, k)
	kj.SignedAt, kj.Authority, kj.Signature = "", "", ""
	out, err := json.MarshalIndent(kj, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	out = append(out, '\n')
	kr, err := ParseKeyring(out)
	if err == nil {
		err = errors.Join(checkLabels(kr.Keys(), true)...)
	}
	if err != nil {
		return nil, fmt.Errorf("enrol %s: %w", clip(e.Name), err)
	}
	return out, nil
}

// EnrolFile adds e to the keyring file at path (made when missing),
// replacing the file whole: a new file written and synced beside it, then
// renamed over it, so a controller starting meanwhile reads the old
// keyring or the new one, never half of one. The keyring it writes is a
// draft for the officer to sign (AddKey): enrolling on the table box
// itself makes a keyring the controller refuses.
func EnrolFile(path string, e Enrolment) error {
	doc, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		doc = nil
	case err != nil:
		return fmt.Errorf("keyring: %w", err)
	}
	if len(doc) > maxKeyring {
		return fmt.Errorf("keyring %s: more than %d bytes", path, maxKeyring)
	}
	out, err := AddKey(doc, e)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := writeFileAtomic(path, out, modeOf(path, 0o644)); err != nil {
		return fmt.Errorf("keyring %s: %w", path, err)
	}
	return nil
}
