package floor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// MaxMessageBytes bounds a message the witness reads; a row's body is at
// most audit.MaxBodyBytes and the rest of the row is small.
const MaxMessageBytes = audit.MaxBodyBytes + 4096

// Topic kinds, the last part of a table's subject.
const (
	KindEvents     = "events"
	KindCheckpoint = "checkpoint"
	KindStatus     = "status"
	KindAlerts     = "alerts"
)

// Subjects maps a table's MQTT topics (tablectl/<table>/pit/events) to the
// NATS subjects the floor's broker gives them (tablectl.<table>.pit.events)
// and back. NATS's MQTT listener turns '/' into '.', so a table id must
// not hold a '.' (NATS refuses such a topic); docs/floor.md says so.
type Subjects struct {
	// Root is the first part of every table's prefix, "tablectl".
	Root string
}

// DefaultRoot is the root of the default prefix tablectl/<table>.
const DefaultRoot = "tablectl"

func (s Subjects) root() string {
	if s.Root == "" {
		return DefaultRoot
	}
	return s.Root
}

// Stream is what the JetStream stream keeps: every table's events and
// checkpoints.
func (s Subjects) Stream() []string {
	return []string{s.root() + ".*.pit.events", s.root() + ".*.pit.checkpoint"}
}

// TablesStream is what of the stream concerns tables: their events and
// checkpoints (a group's consumer's filter).
func (s Subjects) TablesStream(tables []string) []string {
	out := make([]string, 0, 2*len(tables))
	for _, t := range tables {
		out = append(out, s.root()+"."+t+".pit.events", s.root()+"."+t+".pit.checkpoint")
	}
	return out
}

// Status is what the floor view follows besides the stream: each table's
// status and active alerts (retained, so a new witness has them at once).
func (s Subjects) Status() []string {
	return []string{s.root() + ".*.status", s.root() + ".*.pit.alerts.active"}
}

// Command is the subject of a table's cmd topic.
func (s Subjects) Command(table string) string { return s.root() + "." + table + ".cmd" }

// Alerts is the subject of the floor's alerts (MQTT floor/alerts).
const AlertsSubject = "floor.alerts"

// Parse returns the table and the kind of message a subject carries.
func (s Subjects) Parse(subject string) (table, kind string, err error) {
	rest, ok := strings.CutPrefix(subject, s.root()+".")
	if !ok {
		return "", "", fmt.Errorf("subject %.100q: not under %s", subject, s.root())
	}
	table, rest, ok = strings.Cut(rest, ".")
	if !ok || table == "" {
		return "", "", fmt.Errorf("subject %.100q: no table", subject)
	}
	if err := checkTable(table); err != nil {
		return "", "", fmt.Errorf("subject %.100q: %w", subject, err)
	}
	switch rest {
	case "pit.events":
		return table, KindEvents, nil
	case "pit.checkpoint":
		return table, KindCheckpoint, nil
	case "status":
		return table, KindStatus, nil
	case "pit.alerts.active":
		return table, KindAlerts, nil
	}
	return "", "", fmt.Errorf("subject %.100q: not a table's events, checkpoint, status or alerts", subject)
}

// checkTable allows what audit allows in a table id, less '.', which the
// floor's broker cannot carry in a topic.
func checkTable(id string) error {
	if len(id) == 0 || len(id) > 64 {
		return fmt.Errorf("table id %.80q: want 1 to 64 bytes", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("table id %.80q: byte %q is not one of A-Z a-z 0-9 _ -", id, c)
		}
	}
	return nil
}

// Row is one audit row as a table published it on pit/events, with the
// time as the text it was sent in: the hash covers that text.
type Row struct {
	Table    string
	Seq      int64
	At       string
	Kind     string
	Shoe     int64
	Coup     int64
	Body     []byte
	PrevHash audit.Hash
	Hash     audit.Hash
}

// ComputeHash is the row's hash recomputed from what was sent.
func (r Row) ComputeHash() audit.Hash {
	return audit.RowHash(r.Seq, r.At, r.Kind, r.Shoe, r.Coup, r.Body, r.PrevHash)
}

// rowJSON is the pit/events payload (mqttpub.Event), read strictly.
type rowJSON struct {
	Seq      *int64          `json:"seq"`
	At       *string         `json:"at"`
	Kind     *string         `json:"kind"`
	Shoe     *int64          `json:"shoe"`
	Coup     *int64          `json:"coup"`
	Body     json.RawMessage `json:"body"`
	PrevHash *audit.Hash     `json:"prev_hash"`
	Hash     *audit.Hash     `json:"hash"`
}

// ParseRow reads a pit/events payload of table. Every field must be there;
// the body is kept as sent. A row whose body a publisher re-encoded (HTML
// escapes) is put back into canonical form, which is what its hash covers.
func ParseRow(table string, payload []byte) (Row, error) {
	if len(payload) > MaxMessageBytes {
		return Row{}, fmt.Errorf("pit/events of %s: %d bytes, more than %d", table, len(payload), MaxMessageBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var j rowJSON
	if err := dec.Decode(&j); err != nil {
		return Row{}, fmt.Errorf("pit/events of %s: %w", table, err)
	}
	if dec.More() {
		return Row{}, fmt.Errorf("pit/events of %s: more than one JSON value", table)
	}
	if j.Seq == nil || j.At == nil || j.Kind == nil || j.Shoe == nil || j.Coup == nil || j.Body == nil || j.PrevHash == nil || j.Hash == nil {
		return Row{}, fmt.Errorf("pit/events of %s: a field of seq, at, kind, shoe, coup, body, prev_hash, hash is missing", table)
	}
	if *j.Seq < 1 {
		return Row{}, fmt.Errorf("pit/events of %s: seq %d", table, *j.Seq)
	}
	if _, err := time.Parse(time.RFC3339Nano, *j.At); err != nil {
		return Row{}, fmt.Errorf("pit/events of %s seq %d: %w", table, *j.Seq, err)
	}
	if *j.Kind == "" || len(*j.Kind) > 64 {
		return Row{}, fmt.Errorf("pit/events of %s seq %d: kind %.80q", table, *j.Seq, *j.Kind)
	}
	r := Row{Table: table, Seq: *j.Seq, At: *j.At, Kind: *j.Kind, Shoe: *j.Shoe, Coup: *j.Coup,
		Body: j.Body, PrevHash: *j.PrevHash, Hash: *j.Hash}
	if r.ComputeHash() != r.Hash {
		// json.Marshal escapes '<', '>' and '&' in a body; the stored
		// canonical form does not. Only the canonical form can match.
		if c, err := audit.Canonicalize(r.Body); err == nil && !bytes.Equal(c, r.Body) {
			r.Body = c
		}
	}
	return r, nil
}

// ParseCheckpoint reads a pit/checkpoint payload of table.
func ParseCheckpoint(table string, payload []byte) (audit.Checkpoint, error) {
	if len(payload) > MaxMessageBytes {
		return audit.Checkpoint{}, fmt.Errorf("pit/checkpoint of %s: %d bytes", table, len(payload))
	}
	c, err := audit.ParseCheckpoint(payload)
	if err != nil {
		return audit.Checkpoint{}, fmt.Errorf("pit/checkpoint of %s: %w", table, err)
	}
	return c, nil
}
