package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// suspensionRows is a table's suspension as its witnessed rows tell it:
// since when (the "suspended" row), why (its reason: the alert's kind, or
// the supervisor's note) and which supervisor's suspend command holds it
// (the newest accepted since). found is false when the newest of those
// rows says the table resumed, or none is witnessed.
type suspensionRows struct {
	found    bool
	since    time.Time
	note, by string
}

// suspensionReader reads a table's suspension from the witnessed rows:
// both stores (view_hold.go), kept out of Store since only the view asks.
type suspensionReader interface {
	lastSuspension(ctx context.Context, table string) (suspensionRows, error)
}

// suspensionKinds are the rows a suspension is read from.
var suspensionKinds = []string{string(coup.EvSuspended), string(coup.EvResumed), string(coup.EvCommandDone)}

// suspensionKindsSQL is suspensionKinds as SQL literals (the game's own
// names, no quote in them): written into the query, not passed as
// parameters, so that PostgreSQL plans it on the partial index over
// exactly those rows (it cannot prove a parameter is one of them).
var suspensionKindsSQL = "'" + strings.Join(suspensionKinds, "', '") + "'"

// suspensionSQL reads a table's newest suspension rows.
var suspensionSQL = `SELECT at, kind, body FROM S.rows WHERE table_id = $1 AND kind IN (` + suspensionKindsSQL + `) ORDER BY seq DESC LIMIT ` + fmt.Sprint(suspensionScan)

// suspensionScan bounds how far back the rows are read: a table holds a
// suspension for minutes, and a supervisor's commands are few.
const suspensionScan = 200

// readSuspension walks a table's suspension rows, newest first.
func readSuspension(next func() (at, kind string, body []byte, ok bool, err error)) (suspensionRows, error) {
	var s suspensionRows
	for {
		at, kind, body, ok, err := next()
		if err != nil || !ok {
			return suspensionRows{}, err
		}
		var ev struct {
			Action string `json:"action"`
			By     string `json:"by"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(body, &ev) != nil {
			continue
		}
		switch coup.EventKind(kind) {
		case coup.EvResumed:
			return suspensionRows{}, nil
		case coup.EvCommandDone:
			if ev.Action == coup.ActionSuspend && s.by == "" {
				s.by, s.note = ev.By, ev.Reason
				if s.note == "" {
					s.note = "suspended by " + ev.By
				}
			}
		case coup.EvSuspended:
			t, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				return suspensionRows{}, fmt.Errorf("row at %q: %w", at, err)
			}
			s.found, s.since = true, t.UTC()
			if s.by == "" {
				s.by = ev.By
				if ev.By != "" {
					s.note = ev.Reason // a supervisor's note
				} else {
					s.note = words(kindWords, ev.Reason) // an alert's kind
				}
			}
			return s, nil
		}
	}
}

// lastSuspension reads table's suspension from its witnessed rows, on
// either database.
func (s sqlStore) lastSuspension(ctx context.Context, table string) (suspensionRows, error) {
	type row struct {
		at, kind string
		body     []byte
	}
	var rs []row
	err := s.d.each(ctx, suspensionSQL, []any{table}, func(scan scanFunc) error {
		var r row
		if err := scan(&r.at, &r.kind, &r.body); err != nil {
			return err
		}
		rs = append(rs, r)
		return nil
	})
	if err != nil {
		return suspensionRows{}, fmt.Errorf("floor database: %w", err)
	}
	r, err := readSuspension(func() (at, kind string, body []byte, ok bool, err error) {
		if len(rs) == 0 {
			return "", "", nil, false, nil
		}
		at, kind, body, rs = rs[0].at, rs[0].kind, rs[0].body, rs[1:]
		return at, kind, body, true, nil
	})
	if err != nil {
		return r, fmt.Errorf("floor database: %w", err)
	}
	return r, nil
}
