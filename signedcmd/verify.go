package signedcmd

import (
	"container/heap"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// Refusal codes: why a command was refused. They are a published
// interface (docs/mqtt.md): add, never rename.
const (
	CodeOversized    = "oversized"     // more than MaxBytes
	CodeMalformed    = "malformed"     // not a well-formed command
	CodeUnknownKey   = "unknown_key"   // no key in the keyring for the supervisor
	CodeBadSignature = "bad_signature" // the signature does not verify
	CodeWrongTable   = "wrong_table"   // signed for another table
	CodeStale        = "stale"         // issued longer ago than the window
	CodeFuture       = "future"        // issued further ahead than the window
	CodeReplayed     = "replayed"      // an id already used
	CodeNotPermitted = "not_permitted" // the key may not sign this action
	CodeKeyExpired   = "key_expired"   // signed when the key was not valid (before not_before, from not_after)
	CodeBusy         = "busy"          // too many commands inside the window
	CodeTable        = "table"         // the table refused it (wrong phase, nothing to void...)
	CodeTrail        = "audit_write_failed"
	// CodeQueueFull: dropped unread, because too many commands of its lane
	// (Screen) waited for the handler. It has no row or reply of its own,
	// only a count in a KindRefusals row.
	CodeQueueFull = "queue_full"
	// CodeRateLimited: dropped by the embedded broker, because its client
	// published faster than the broker allows one client. Only counted, in
	// a KindRefusals row.
	CodeRateLimited = "rate_limited"
	// CodeRetained: a command published as a retained message, which the
	// broker would deliver again to every later subscriber: refused by
	// the embedded broker, or dropped by the controller when a broker
	// delivers it as retained (and cleared there). Only counted, in a
	// KindRefusals row.
	CodeRetained = "retained"
)

// Refusal is a command refused before it reached the table.
type Refusal struct {
	Code   string
	Reason string
	// What could be read of the command, for the reply and the trail.
	ID, Action, Supervisor, Table string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Reason }

func refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Reason: fmt.Sprintf(format, args...)}
}

func (r *Refusal) identify(c Command) {
	r.ID, r.Action, r.Supervisor, r.Table = c.ID, c.Action, c.Supervisor, c.Table
}

// Verified is a command that passed every check.
type Verified struct {
	Command Command
	// IssuedAt is Command.IssuedAt parsed.
	IssuedAt time.Time
	// Card is the manual entry's card.
	Card *coup.Card
	// Signed is the exact bytes the signature covers; KeyID names the key
	// that verified it.
	Signed []byte
	KeyID  string
	// KeyLabel is the keyring's label of the key ("" when its supervisor
	// holds one key).
	KeyLabel string
}

// Input is the table input a verified table action becomes; By is the
// supervisor whose key signed it. It carries the signed bytes, the
// signature and the key id, so the trail can be re-verified (CheckTrail).
func (v Verified) Input() coup.Input {
	c := v.Command
	return coup.Input{Kind: coup.InCmd, Command: &coup.Command{
		ID: c.ID, Action: c.Action, By: c.Supervisor, Coup: c.Coup, Card: v.Card, Reason: c.Reason, Dealer: c.Dealer,
		Signed: string(v.Signed), Sig: c.Sig, KeyID: v.KeyID, Key: v.KeyLabel,
	}}
}

// VerifierOptions configure a Verifier.
type VerifierOptions struct {
	// Table is this table's id.
	Table string
	Keys  *Keyring
	// Window is how far issued_at may be from the controller's clock, either
	// way; 0 is DefaultWindow. Ids are remembered for as long as a command
	// carrying them could still be accepted.
	Window time.Duration
	// MaxSeen bounds the ids remembered; 0 is DefaultMaxSeen. Beyond it new
	// commands are refused (CodeBusy) until old ids expire.
	MaxSeen int
	Clock   clock.Clock
}

// Defaults for VerifierOptions.
const (
	DefaultWindow  = 2 * time.Minute
	DefaultMaxSeen = 1 << 16
)

// Verifier checks commands: size and form, key, signature, table, issue
// time, permission and id reuse, in that order. It is safe for concurrent
// use.
type Verifier struct {
	opt VerifierOptions

	mu   sync.Mutex
	seen seenIDs
}

// NewVerifier returns a Verifier.
func NewVerifier(opt VerifierOptions) (*Verifier, error) {
	if opt.Keys == nil {
		return nil, fmt.Errorf("command verifier: no keyring")
	}
	if opt.Table == "" {
		return nil, fmt.Errorf("command verifier: no table id")
	}
	if opt.Window <= 0 {
		opt.Window = DefaultWindow
	}
	if opt.MaxSeen <= 0 {
		opt.MaxSeen = DefaultMaxSeen
	}
	opt.Clock = clock.Or(opt.Clock)
	return &Verifier{opt: opt, seen: seenIDs{ids: map[string]time.Time{}}}, nil
}

// Window is the accepted distance between issued_at and the clock.
func (v *Verifier) Window() time.Duration { return v.opt.Window }

// Verify checks one command as received. On refusal the error is a
// *Refusal. An accepted command's id is remembered, so the same command
// sent again is refused as replayed.
func (v *Verifier) Verify(payload []byte) (Verified, error) {
	p := parse(payload)
	if p.refusal != nil {
		return Verified{}, p.refusal
	}
	c := p.cmd
	fail := func(code, format string, args ...any) (Verified, error) {
		r := refuse(code, format, args...)
		r.identify(c)
		return Verified{}, r
	}
	keys := v.opt.Keys.Lookup(c.Supervisor)
	if len(keys) == 0 {
		return fail(CodeUnknownKey, "no key for supervisor %q in the keyring", c.Supervisor)
	}
	var key *Key
	for i := range keys {
		if ed25519.Verify(keys[i].PublicKey, p.signed, p.sig) {
			key = &keys[i]
			break
		}
	}
	if key == nil {
		return fail(CodeBadSignature, "the signature does not verify with %s's key", c.Supervisor)
	}
	if !key.ValidAt(p.issued) {
		return fail(CodeKeyExpired, "%s's key %s is not valid at %s (%s)", c.Supervisor, audit.KeyID(key.PublicKey), c.IssuedAt, key.validity())
	}
	if c.Table != v.opt.Table {
		return fail(CodeWrongTable, "signed for table %q; this is %q", c.Table, v.opt.Table)
	}
	now := v.opt.Clock.Now()
	switch w := v.opt.Window; {
	case p.issued.Before(now.Add(-w)):
		return fail(CodeStale, "issued %s ago, more than the %s allowed", now.Sub(p.issued).Round(time.Millisecond), w)
	case p.issued.After(now.Add(w)):
		return fail(CodeFuture, "issued %s ahead of the controller's clock, more than the %s allowed", p.issued.Sub(now).Round(time.Millisecond), w)
	}
	if !key.Permits(c.Action) {
		return fail(CodeNotPermitted, "%s's key may not sign %s", c.Supervisor, c.Action)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen.expire(now)
	if _, ok := v.seen.ids[c.ID]; ok {
		return fail(CodeReplayed, "command id %s was already used", c.ID)
	}
	if len(v.seen.ids) >= v.opt.MaxSeen {
		return fail(CodeBusy, "more than %d commands inside %s", v.opt.MaxSeen, v.opt.Window)
	}
	// Once issued_at is outside the window the id is refused as stale anyway.
	v.seen.add(c.ID, p.issued.Add(v.opt.Window))
	return Verified{Command: c, IssuedAt: p.issued, Card: p.card, Signed: p.signed, KeyID: audit.KeyID(key.PublicKey), KeyLabel: key.Label}, nil
}

// Remember marks id as used until until, for ids read back from the trail.
func (v *Verifier) Remember(id string, until time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.seen.ids[id]; !ok && len(v.seen.ids) < v.opt.MaxSeen {
		v.seen.add(id, until)
	}
}

// Seen is how many ids are remembered now.
func (v *Verifier) Seen() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen.expire(v.opt.Clock.Now())
	return len(v.seen.ids)
}

// Trail is the audit trail as Restore reads it (*audit.Store).
type Trail interface {
	Head() audit.Head
	Events(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error]
}

// Restore remembers the ids of the commands the trail recorded within the
// last two windows, so that a restarted controller still refuses them. The
// row's time stands in for issued_at, which the trail does not keep: a
// command accepted at row time t was issued no earlier than t - window, and
// so is stale from t + 2 windows on at the latest. It finds the first such
// row by bisecting the rows the trail still holds on time, so it reads only
// the recent rows, and never one that retention has deleted with the oldest
// segments of a directory trail.
func (v *Verifier) Restore(ctx context.Context, trail Trail) (int, error) {
	head := trail.Head().Seq
	if head == 0 {
		return 0, nil
	}
	// The oldest row still there: seq 1, unless retention removed it.
	first := int64(0)
	for rec, err := range trail.Events(ctx, audit.Query{}) {
		if err != nil {
			return 0, fmt.Errorf("restore command ids: %w", err)
		}
		first = rec.Seq
		break
	}
	if first == 0 {
		return 0, nil
	}
	since := v.opt.Clock.Now().Add(-2 * v.opt.Window)
	at := func(seq int64) (time.Time, error) {
		for rec, err := range trail.Events(ctx, audit.Query{From: seq, To: seq}) {
			if err != nil {
				return time.Time{}, err
			}
			return rec.At, nil
		}
		return time.Time{}, fmt.Errorf("restore command ids: row %d missing", seq)
	}
	// The first row at or after since, assuming times do not go backwards
	// by much (the store stamps rows from the wall clock).
	lo, hi := first, head+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		t, err := at(mid)
		if err != nil {
			return 0, err
		}
		if t.Before(since) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	n := 0
	for rec, err := range trail.Events(ctx, audit.Query{From: lo, Kinds: []string{string(coup.InCmd), KindAccepted}}) {
		if err != nil {
			return n, err
		}
		var id string
		switch rec.Kind {
		case string(coup.InCmd):
			var in coup.Input
			if json.Unmarshal(rec.Body, &in) == nil && in.Command != nil {
				id = in.Command.ID
			}
		case KindAccepted:
			var b AcceptedBody
			if json.Unmarshal(rec.Body, &b) == nil {
				id = b.ID
			}
		}
		if id != "" {
			v.Remember(id, rec.At.Add(2*v.opt.Window))
			n++
		}
	}
	return n, nil
}

// seenIDs remembers ids until they expire: a map for lookups and a heap
// ordered by expiry for pruning.
type seenIDs struct {
	ids map[string]time.Time
	exp expiryHeap
}

func (s *seenIDs) add(id string, until time.Time) {
	s.ids[id] = until
	heap.Push(&s.exp, seenEntry{id: id, until: until})
}

func (s *seenIDs) expire(now time.Time) {
	for len(s.exp) > 0 && s.exp[0].until.Before(now) {
		e := heap.Pop(&s.exp).(seenEntry)
		if u, ok := s.ids[e.id]; ok && u.Equal(e.until) {
			delete(s.ids, e.id)
		}
	}
}

type seenEntry struct {
	id    string
	until time.Time
}

type expiryHeap []seenEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].until.Before(h[j].until) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(seenEntry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}
