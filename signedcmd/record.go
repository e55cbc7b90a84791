package signedcmd

import (
	"encoding/base64"
	"slices"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// KindKeyring records a keyring the controller took: at start, at each
// reload, and again, unchanged, at the head of each new segment of a
// directory trail and after each snapshot of the table (so a segment says
// which keys were trusted while it was written, and a start finds the
// keyring in force a short way back, never in a segment retention
// removed).
const KindKeyring = "ctl.keyring"

// KindKeyringRefused records a keyring the controller refused (unsigned,
// signed by another key, changed after signing, older than the one in
// force, malformed): the keys in use stay, and the pit is told.
const KindKeyringRefused = "ctl.keyring_refused"

// Why a keyring row was written.
const (
	KeyringAtStart  = "start"
	KeyringReloaded = "reload"
	KeyringInForce  = "in_force"
)

// KeyringBody is a KindKeyring row's body: the keyring's identity and
// signature's author, every key it holds, and what changed from the
// keyring in force before (at start: the one the trail recorded last;
// everything is added when it holds none).
type KeyringBody struct {
	Reason string `json:"reason"`
	Path   string `json:"path,omitempty"`
	Serial int64  `json:"serial"`
	// SignedAt is the officer's signing time; Authority the id of the key
	// that signed it, checked against mqtt.keyring_authority.
	SignedAt  string `json:"signed_at,omitempty"`
	Authority string `json:"authority"`
	// SHA256 is the hash of what the officer signed (KeyringMeta.Hash):
	// tablectl keyring show prints it.
	SHA256  string       `json:"sha256"`
	Keys    []KeyringKey `json:"keys"`
	Added   []KeyringKey `json:"added,omitempty"`
	Removed []KeyringKey `json:"removed,omitempty"`
	// Changed are keys kept with another name, label, actions or window
	// (as they are now).
	Changed []KeyringKey `json:"changed,omitempty"`
}

// KeyringKey is one key as a keyring row records it.
type KeyringKey struct {
	Name      string   `json:"name"`
	Key       string   `json:"key,omitempty"`
	KeyID     string   `json:"key_id"`
	PublicKey string   `json:"public_key"`
	Actions   []string `json:"actions"`
	NotBefore string   `json:"not_before,omitempty"`
	NotAfter  string   `json:"not_after,omitempty"`
}

// KeyringRefusedBody is a KindKeyringRefused row's body.
type KeyringRefusedBody struct {
	Reason string `json:"reason"`
	Path   string `json:"path,omitempty"`
	// SHA256 is the refused file's bytes' hash, when it could be read.
	SHA256 string `json:"sha256,omitempty"`
	Error  string `json:"error"`
}

// RecordedKeys are kr's keys as a keyring row records them.
func RecordedKeys(kr *Keyring) []KeyringKey {
	keys := kr.Keys()
	out := make([]KeyringKey, len(keys))
	for i, k := range keys {
		out[i] = KeyringKey{Name: k.Name, Key: k.Label, KeyID: audit.KeyID(k.PublicKey), PublicKey: base64.StdEncoding.EncodeToString(k.PublicKey),
			Actions: slices.Clone(k.Actions), NotBefore: rfc3339(k.NotBefore), NotAfter: rfc3339(k.NotAfter)}
	}
	return out
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// NewKeyringBody is the row that records next, taken for reason from path
// in place of the keys before (nil: none).
func NewKeyringBody(reason, path string, before []KeyringKey, next *Keyring) KeyringBody {
	m := next.Meta()
	b := KeyringBody{Reason: reason, Path: path, Serial: m.Serial, SignedAt: rfc3339(m.SignedAt), Authority: m.Authority, SHA256: m.Hash,
		Keys: RecordedKeys(next)}
	old := map[string]KeyringKey{}
	for _, k := range before {
		old[k.KeyID] = k
	}
	now := map[string]bool{}
	for _, k := range b.Keys {
		now[k.KeyID] = true
		o, ok := old[k.KeyID]
		switch {
		case !ok:
			b.Added = append(b.Added, k)
		case o.Name != k.Name || o.Key != k.Key || !slices.Equal(o.Actions, k.Actions) || o.NotBefore != k.NotBefore || o.NotAfter != k.NotAfter:
			b.Changed = append(b.Changed, k)
		}
	}
	for _, k := range before {
		if !now[k.KeyID] {
			b.Removed = append(b.Removed, k)
		}
	}
	return b
}
