// Package audit is the table's append-only, tamper-evident trail: one SQLite
// file in which every event the controller decides on is a row with a
// contiguous sequence number, a UTC time, a kind, the shoe and coup ids, a
// canonical JSON body, the previous row's hash and its own SHA-256 hash.
//
// A Store is the single writer: Append commits one event durably (WAL,
// synchronous=FULL) before returning, and signs an Ed25519 checkpoint of
// the head every N events and on Close. A Reader streams the rows back for
// state rebuilding, replay and export, and Verify checks a trail file
// (edited rows, broken links, deleted rows, truncation behind a checkpoint,
// bad signatures, missing triggers) without writing to it.
//
// The package knows nothing of the game: an event is a kind, a shoe, a coup
// and a JSON body. The formats are documented in docs/audit.md.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Event is what a caller records: the store adds the sequence number, the
// time and the hashes.
type Event struct {
	// Kind names the event ("card", "coup_result", "void"...): 1 to 64
	// bytes of a-z, 0-9, '_', '.' and '-'.
	Kind string
	// Shoe and Coup are the ids the event belongs to, 0 when none.
	Shoe, Coup int64
	// Body is anything encoding/json can marshal (a json.RawMessage is
	// taken as is); it is stored in canonical form (see Canonicalize).
	Body any
}

// Record is one committed row of the trail.
type Record struct {
	Seq  int64     `json:"seq"`
	At   time.Time `json:"at"`
	Kind string    `json:"kind"`
	Shoe int64     `json:"shoe"`
	Coup int64     `json:"coup"`
	// Body is the stored canonical JSON, byte for byte.
	Body     json.RawMessage `json:"body"`
	PrevHash Hash            `json:"prev_hash"`
	Hash     Hash            `json:"hash"`

	// Checkpoint is set by Append when committing this row also wrote a
	// signed checkpoint of it, so the caller can publish the checkpoint.
	Checkpoint *Checkpoint `json:"-"`
}

// Head is the last row of a trail: its sequence number and hash. The head of
// an empty trail is seq 0 with the zero hash.
type Head struct {
	Seq  int64 `json:"seq"`
	Hash Hash  `json:"hash"`
}

// Hash is a SHA-256 digest. It is stored and shown as 64 lower-case hex
// digits.
type Hash [sha256.Size]byte

// String returns h in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText returns h in lower-case hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText parses 64 lower-case hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// ParseHash parses a hash written as 64 lower-case hex digits, the only form
// the trail uses.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("hash %.80q: want %d hex digits, have %d", s, 2*len(h), len(s))
	}
	// One pass, no copy: every row read back has two of these.
	for i := range h {
		hi, lo := hexValue[s[2*i]], hexValue[s[2*i+1]]
		if hi|lo == 0xff {
			c := s[2*i]
			if hi != 0xff {
				c = s[2*i+1]
			}
			return Hash{}, fmt.Errorf("hash %.80q: %q is not a lower-case hex digit", s, c)
		}
		h[i] = hi<<4 | lo
	}
	return h, nil
}

// hexValue maps a lower-case hex digit to its value and every other byte
// to 0xff.
var hexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c - '0'
	}
	for c := byte('a'); c <= 'f'; c++ {
		t[c] = c - 'a' + 10
	}
	return t
}()

// Errors the store returns; test with errors.Is.
var (
	// ErrWriteFailed: the trail could not be written (disk full, read-only
	// file, I/O error, lock held too long...). Nothing of the failed call
	// was committed and the store's head did not move; the caller must stop
	// accepting game input until an Append succeeds again. Every such error
	// is a *WriteError.
	ErrWriteFailed = errors.New("audit trail write failed")
	// ErrDiskFull, ErrReadOnly and ErrIO narrow ErrWriteFailed down to its
	// cause (SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR).
	ErrDiskFull = errors.New("disk full")
	ErrReadOnly = errors.New("read-only")
	ErrIO       = errors.New("I/O error")

	// ErrInvalidEvent: the event itself is wrong (bad kind, negative id,
	// body not JSON); the store is untouched and retrying will not help.
	ErrInvalidEvent = errors.New("invalid audit event")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("audit store closed")
	// ErrLocked: another process holds the trail open for writing.
	ErrLocked = errors.New("audit trail is locked by another writer")
	// ErrNoKey: a checkpoint was asked for but the store has no signing key.
	ErrNoKey = errors.New("no checkpoint signing key")
	// ErrEmptyTrail: there is no row to checkpoint yet.
	ErrEmptyTrail = errors.New("audit trail is empty")
	// ErrTampered: the trail holds rows this store did not write (another
	// program appended them while the controller ran). The store refuses
	// every further write and signs nothing more, so the rows are never
	// covered by a checkpoint; the caller must suspend the table, raise
	// trail_tampered naming the rows (a *TamperError says which), and
	// leave the trail to surveillance. It also matches ErrWriteFailed: no
	// input can be recorded.
	ErrTampered = errors.New("audit trail holds rows this controller did not write")
)

// TamperError names the rows found in the trail that the store did not
// write. It matches ErrTampered and ErrWriteFailed.
type TamperError struct {
	Path     string
	From, To int64    // the foreign rows' seqs
	Kinds    []string // their kinds, in order (the first 16)
}

func (e *TamperError) Error() string {
	kinds := strings.Join(e.Kinds, ", ")
	if n := e.To - e.From + 1; n > int64(len(e.Kinds)) {
		kinds += fmt.Sprintf(", ... %d more", n-int64(len(e.Kinds)))
	}
	return fmt.Sprintf("%v: %s rows %d to %d (%s): nothing more is recorded or signed", ErrTampered, e.Path, e.From, e.To, kinds)
}

// Is makes a TamperError match ErrTampered and ErrWriteFailed.
func (e *TamperError) Is(target error) bool { return target == ErrTampered || target == ErrWriteFailed }

// hashDomain opens every row's hash input, so a row hash can never be
// confused with a hash of anything else.
const hashDomain = "tablectl-audit-v1\x00"

// rowHash is SHA-256 over the row's canonical encoding (docs/audit.md):
//
//	"tablectl-audit-v1\x00"
//	seq                     8 bytes, big-endian
//	len(at)   at            4-byte big-endian length, then the stored text
//	len(kind) kind          likewise
//	shoe                    8 bytes, big-endian two's complement
//	coup                    8 bytes, big-endian two's complement
//	len(body) body          likewise, the stored canonical JSON
//	prev_hash               32 bytes
//
// Lengths make the encoding unambiguous without escaping anything.
func rowHash(seq int64, at, kind string, shoe, coup int64, body []byte, prev Hash) Hash {
	buf := make([]byte, 0, len(hashDomain)+8+4+len(at)+4+len(kind)+8+8+4+len(body)+len(prev))
	return rowHashInto(&buf, seq, at, kind, shoe, coup, body, prev)
}

// formatTime is how times are stored: UTC, RFC 3339 with as many fraction
// digits as needed. Parsing it back and formatting again gives the same text.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// parseTime parses a stored time and insists it is in the stored form, so
// that the text a hash or signature covers is exactly reproducible.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %.80q: %w", s, err)
	}
	if formatTime(t) != s {
		return time.Time{}, fmt.Errorf("time %.80q is not in canonical UTC form %q", s, formatTime(t))
	}
	return t.UTC(), nil
}

// RowHash is a row's hash from its fields as stored: at is the stored
// time text, body the stored canonical JSON. A witness off the box that
// received the row (pit/events, an export line) recomputes it with this.
func RowHash(seq int64, at, kind string, shoe, coup int64, body []byte, prev Hash) Hash {
	return rowHash(seq, at, kind, shoe, coup, body, prev)
}

// ComputeHash recomputes r's hash from its fields; for a row read from an
// intact trail it equals r.Hash.
func (r Record) ComputeHash() Hash {
	return rowHash(r.Seq, formatTime(r.At), r.Kind, r.Shoe, r.Coup, r.Body, r.PrevHash)
}

// checkKind enforces the documented kind alphabet.
func checkKind(k string) error {
	if len(k) == 0 || len(k) > 64 {
		return fmt.Errorf("kind %.80q: want 1 to 64 bytes", k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("kind %q: byte %q is not one of a-z 0-9 _ . -", k, c)
		}
	}
	return nil
}
