package signedcmd

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// maxKeyring bounds the keyring file: a few hundred supervisors.
const maxKeyring = 1 << 20

// ActionsAll in a key's actions permits every action.
const ActionsAll = "*"

// Key is one keyring entry: a supervisor's (or the game server's) public
// key and the actions it may sign.
type Key struct {
	Name string
	// Label names the key among its supervisor's keys ("pit-pc-2"): a name
	// holds more than one key only when each of its entries has one.
	Label     string
	PublicKey ed25519.PublicKey
	Actions   []string
	// NotBefore and NotAfter bound when the key may sign (zero: no
	// bound). A replaced key stays in the keyring with a NotAfter, so the
	// commands it signed before still verify when the trail is checked.
	NotBefore, NotAfter time.Time
}

// ValidAt reports whether the key may sign a command issued at t.
func (k Key) ValidAt(t time.Time) bool {
	return (k.NotBefore.IsZero() || !t.Before(k.NotBefore)) && (k.NotAfter.IsZero() || t.Before(k.NotAfter))
}

func (k Key) validity() string {
	f := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	return "valid " + f(k.NotBefore) + " to " + f(k.NotAfter)
}

// Permits reports whether the key may sign action.
func (k Key) Permits(action string) bool {
	return slices.Contains(k.Actions, ActionsAll) || slices.Contains(k.Actions, action)
}

// Keyring holds the public keys commands are checked against. A name may
// have more than one key (while a key is being replaced, or one per pit
// PC) only when the keyring labels each. The keyring the controller loads
// is signed by the security officer's key (signed.go); a running
// controller's keyring is replaced whole when its file changes
// (WatchKeyring). It is safe for concurrent use.
type Keyring struct {
	mu    sync.RWMutex
	keys  []Key
	names map[string]bool
	meta  KeyringMeta
}

// KeyringMeta is what a keyring document says of itself besides its keys:
// the officer's signature, which covers the keys and these fields.
type KeyringMeta struct {
	// Serial grows with each keyring the officer signs: a controller
	// refuses one older than the newest its trail recorded.
	Serial int64
	// SignedAt is when it was signed; Authority the id (audit.KeyID) of the
	// key the document says signed it, which only VerifySignature proves.
	SignedAt  time.Time
	Authority string
	// Signature is the officer's Ed25519 signature of SigningBytes (nil:
	// unsigned, a draft).
	Signature []byte
	// SigningBytes are what the signature covers: KeyringDomain and the
	// canonical JSON of the document without its signature; Hash is their
	// SHA-256 in hex, the keyring's identity in the trail.
	SigningBytes []byte
	Hash         string
}

// keyringJSON is the keyring file (deploy/supervisors.json).
type keyringJSON struct {
	Keys      []keyJSON `json:"keys"`
	Serial    int64     `json:"serial,omitempty"`
	SignedAt  string    `json:"signed_at,omitempty"`
	Authority string    `json:"authority,omitempty"`
	Signature string    `json:"signature,omitempty"`
}

type keyJSON struct {
	Name string `json:"name"`
	// Key labels the key among its supervisor's keys.
	Key string `json:"key,omitempty"`
	// PublicKey is the raw 32-byte Ed25519 public key in standard base64.
	PublicKey string   `json:"public_key"`
	Actions   []string `json:"actions"`
	// NotBefore and NotAfter are RFC 3339 times; either may be left out.
	NotBefore string `json:"not_before,omitempty"`
	NotAfter  string `json:"not_after,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// ParseKeyring reads a keyring file strictly: unknown fields, a bad name,
// key or action, a repeated key, and trailing data are errors.
func ParseKeyring(data []byte) (*Keyring, error) {
	if len(data) > maxKeyring {
		return nil, fmt.Errorf("keyring: %d bytes, more than %d", len(data), maxKeyring)
	}
	var kj keyringJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kj); err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("keyring: data after the JSON document")
	}
	kr := &Keyring{}
	seen := map[string]bool{}
	var errs []error
	for i, e := range kj.Keys {
		if !coup.ValidStaffName(e.Name) {
			errs = append(errs, fmt.Errorf("keyring: key %d: name %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", i, clip(e.Name)))
			continue
		}
		pub, err := base64.StdEncoding.Strict().DecodeString(e.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			errs = append(errs, fmt.Errorf("keyring: key %d (%s): public_key: want %d bytes in standard base64", i, e.Name, ed25519.PublicKeySize))
			continue
		}
		if seen[string(pub)] {
			errs = append(errs, fmt.Errorf("keyring: key %d (%s): the same public key is listed twice", i, e.Name))
			continue
		}
		seen[string(pub)] = true
		if len(e.Actions) == 0 {
			errs = append(errs, fmt.Errorf("keyring: key %d (%s): no actions: list them, or \"*\" for all", i, e.Name))
			continue
		}
		for _, a := range e.Actions {
			if a != ActionsAll && !slices.Contains(Actions, a) {
				errs = append(errs, fmt.Errorf("keyring: key %d (%s): unknown action %q", i, e.Name, clip(a)))
			}
		}
		if e.Key != "" && !coup.ValidStaffName(e.Key) {
			errs = append(errs, fmt.Errorf("keyring: key %d (%s): key label %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", i, e.Name, clip(e.Key)))
		}
		k := Key{Name: e.Name, Label: e.Key, PublicKey: ed25519.PublicKey(pub), Actions: slices.Clone(e.Actions)}
		for _, b := range []struct {
			field, text string
			to          *time.Time
		}{{"not_before", e.NotBefore, &k.NotBefore}, {"not_after", e.NotAfter, &k.NotAfter}} {
			if b.text == "" {
				continue
			}
			t, err := time.Parse(time.RFC3339, b.text)
			if err != nil {
				errs = append(errs, fmt.Errorf("keyring: key %d (%s): %s %q: want an RFC 3339 time", i, e.Name, b.field, clip(b.text)))
				continue
			}
			*b.to = t
		}
		if !k.NotBefore.IsZero() && !k.NotAfter.IsZero() && !k.NotBefore.Before(k.NotAfter) {
			errs = append(errs, fmt.Errorf("keyring: key %d (%s): not_before %s is not before not_after %s", i, e.Name, e.NotBefore, e.NotAfter))
		}
		kr.keys = append(kr.keys, k)
	}
	errs = append(errs, checkLabels(kr.keys, false)...)
	kr.names = namesOf(kr.keys)
	meta, err := parseMeta(kj)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	kr.meta = meta
	return kr, nil
}

// checkLabels refuses two keys of a name with one label; strict, it also
// holds a name to one key unless the keyring labels each of its keys: the
// officer's signed say-so that one supervisor signs with several keys, and
// how the trail tells them apart. A signed keyring (SignKeyring,
// VerifySignature) and an enrolment (AddKey) are held to it; ParseKeyring
// alone is not, so surveillance still reads the unsigned keyrings of
// before, where a name had two keys while one replaced the other.
func checkLabels(keys []Key, strict bool) []error {
	byName := map[string][]Key{}
	var order []string
	for _, k := range keys {
		if byName[k.Name] == nil {
			order = append(order, k.Name)
		}
		byName[k.Name] = append(byName[k.Name], k)
	}
	var errs []error
	for _, name := range order {
		ks := byName[name]
		if len(ks) < 2 {
			continue
		}
		seen := map[string]bool{}
		for _, k := range ks {
			switch {
			case k.Label == "" && !strict:
			case k.Label == "":
				errs = append(errs, fmt.Errorf("keyring: %s has %d keys, and key %s has no \"key\" label: a name holds more than one key only when the keyring labels each", name, len(ks), audit.KeyID(k.PublicKey)))
			case seen[k.Label] && k.Label != "":
				errs = append(errs, fmt.Errorf("keyring: %s has two keys labelled %q", name, k.Label))
			}
			seen[k.Label] = true
		}
	}
	return errs
}

// LoadKeyring reads the keyring file at path.
func LoadKeyring(path string) (*Keyring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("keyring: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyring+1))
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", path, err)
	}
	kr, err := ParseKeyring(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return kr, nil
}

func namesOf(keys []Key) map[string]bool {
	names := make(map[string]bool, len(keys))
	for _, k := range keys {
		names[k.Name] = true
	}
	return names
}

// Lookup returns the keys of name.
func (kr *Keyring) Lookup(name string) []Key {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	var out []Key
	for _, k := range kr.keys {
		if k.Name == name {
			out = append(out, k)
		}
	}
	return out
}

// ByID returns the key of name whose id (audit.KeyID) is id.
func (kr *Keyring) ByID(name, id string) (Key, bool) {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	for _, k := range kr.keys {
		if k.Name == name && audit.KeyID(k.PublicKey) == id {
			return k, true
		}
	}
	return Key{}, false
}

// Len is the number of keys.
func (kr *Keyring) Len() int {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return len(kr.keys)
}

// HasName reports whether the keyring holds a key of name.
func (kr *Keyring) HasName(name string) bool {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return kr.names[name]
}

// hasName is HasName for the screen's bytes, without a copy.
func (kr *Keyring) hasName(name []byte) bool {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return kr.names[string(name)]
}

// Keys returns a copy of every key, in the keyring's order.
func (kr *Keyring) Keys() []Key {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return slices.Clone(kr.keys)
}

// Meta is what the keyring document says of itself (serial, signature).
func (kr *Keyring) Meta() KeyringMeta {
	kr.mu.RLock()
	defer kr.mu.RUnlock()
	return kr.meta
}

// Replace makes kr hold the keys of from, at once: a command checked
// meanwhile sees the old keys or the new ones, never a mix.
func (kr *Keyring) Replace(from *Keyring) {
	from.mu.RLock()
	keys, meta := slices.Clone(from.keys), from.meta
	from.mu.RUnlock()
	names := namesOf(keys)
	kr.mu.Lock()
	kr.keys, kr.names, kr.meta = keys, names, meta
	kr.mu.Unlock()
}

// Entry is the keyring entry for a key, as a line to paste into the file.
func Entry(name string, pub ed25519.PublicKey, actions []string) ([]byte, error) {
	return json.Marshal(keyJSON{Name: name, PublicKey: base64.StdEncoding.EncodeToString(pub), Actions: actions})
}

// GenerateKey makes a supervisor's key pair in dir: NAME.key (PKCS #8 PEM,
// mode 0600), which signs commands and never leaves the supervisor, and
// NAME.pub (PKIX PEM). It never overwrites a file. The keyring entry for
// the public key is returned for the controller's keyring.
func GenerateKey(dir, name string) (privPath, pubPath string, entry []byte, err error) {
	if !coup.ValidStaffName(name) {
		return "", "", nil, fmt.Errorf("name %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", clip(name))
	}
	privPath = filepath.Join(dir, name+".key")
	pubPath = filepath.Join(dir, name+".pub")
	pub, err := audit.WriteKeyPair(privPath, pubPath)
	if err != nil {
		return "", "", nil, err
	}
	entry, err = Entry(name, pub, []string{ActionsAll})
	return privPath, pubPath, entry, err
}
