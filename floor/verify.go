package floor

import (
	"context"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/tablectl/tablectl/audit"
)

// TrailReport is a table's trail compared with what the floor witnessed
// of it (tablectl-floor verify).
type TrailReport struct {
	Table string `json:"table"`
	// Rows is how many of the trail's rows the witness holds, hash for
	// hash; TrailHead the trail's last seq, WitnessedMax the witness's.
	Rows         int64 `json:"rows_matched"`
	TrailHead    int64 `json:"trail_head"`
	WitnessedMax int64 `json:"witnessed_max"`
	// Differ are seqs whose row the witness holds with another hash: the
	// trail was rewritten after the floor saw them.
	Differ []int64 `json:"differ,omitempty"`
	// Beyond are rows the witness holds past the trail's head: the trail
	// was cut back.
	Beyond int64 `json:"beyond_head,omitempty"`
	// Unwitnessed are the trail's rows the floor never received (not a
	// finding on their own: a table's rows not yet resynced).
	Unwitnessed int64 `json:"unwitnessed,omitempty"`
	// Forks are seqs the table published with two hashes.
	Forks int64 `json:"forks,omitempty"`
	// Alerts are the tamper alerts the floor raised for the table.
	Alerts []string `json:"alerts,omitempty"`
	// NothingWitnessed: the trail has rows and the witness holds none of
	// this table's: a wrong database, schema or table name, or a floor
	// that never received the table. Nothing was compared, so it is not a
	// match.
	NothingWitnessed bool `json:"nothing_witnessed,omitempty"`
	differN          int64
}

// OK reports whether the trail is what the floor witnessed: no row
// differs, none is missing at the end, the table never forked and the
// floor raised no tamper alert for it.
func (r *TrailReport) OK() bool {
	return r.differN == 0 && r.Beyond == 0 && r.Forks == 0 && len(r.Alerts) == 0 && !r.NothingWitnessed
}

// Summary is the report in one line.
func (r *TrailReport) Summary() string {
	verdict := "matches the witness"
	if r.NothingWitnessed {
		return fmt.Sprintf("%s: NOT COMPARED: the witness holds no row of this table (wrong database, schema or table?); trail head %d", r.Table, r.TrailHead)
	}
	if !r.OK() {
		verdict = "DIFFERS from the witness"
	}
	s := fmt.Sprintf("%s: %s: %d rows matched; trail head %d, witnessed up to %d", r.Table, verdict, r.Rows, r.TrailHead, r.WitnessedMax)
	if r.differN > 0 {
		s += fmt.Sprintf("; %d rows differ (first %v)", r.differN, r.Differ)
	}
	if r.Beyond > 0 {
		s += fmt.Sprintf("; %d witnessed rows past the trail's head (cut back)", r.Beyond)
	}
	if r.Forks > 0 {
		s += fmt.Sprintf("; %d seqs published twice with different hashes", r.Forks)
	}
	if r.Unwitnessed > 0 {
		s += fmt.Sprintf("; %d rows never witnessed", r.Unwitnessed)
	}
	if len(r.Alerts) > 0 {
		s += "; floor alerts: " + strings.Join(r.Alerts, ", ")
	}
	return s
}

// WriteText writes the summary and each finding.
func (r *TrailReport) WriteText(w io.Writer) error {
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// Trail is what VerifyTrail reads of a table's own trail.
type Trail interface {
	Events(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error]
}

// VerifyTrail compares trail, the table's own, row by row with what the
// store witnessed of it.
func VerifyTrail(ctx context.Context, trail Trail, s Store, table string) (*TrailReport, error) {
	rep := &TrailReport{Table: table}
	// The witnessed rows, in seq order, walked beside the trail's.
	type wrow struct {
		seq  int64
		hash audit.Hash
	}
	var all []wrow
	if err := s.witnessed(ctx, table, func(seq int64, h audit.Hash) error {
		all = append(all, wrow{seq, h})
		rep.WitnessedMax = max(rep.WitnessedMax, seq)
		return nil
	}); err != nil {
		return nil, err
	}
	k := 0
	for rec, err := range trail.Events(ctx, audit.Query{}) {
		if err != nil {
			return nil, err
		}
		rep.TrailHead = rec.Seq
		for k < len(all) && all[k].seq < rec.Seq {
			k++
		}
		switch {
		case k == len(all) || all[k].seq > rec.Seq:
			rep.Unwitnessed++
		case all[k].hash == rec.Hash:
			rep.Rows++
		default:
			rep.differN++
			if len(rep.Differ) < 10 {
				rep.Differ = append(rep.Differ, rec.Seq)
			}
		}
	}
	for ; k < len(all); k++ {
		if all[k].seq > rep.TrailHead {
			rep.Beyond++
		}
	}
	rep.NothingWitnessed = len(all) == 0 && rep.TrailHead > 0
	var err error
	if rep.Forks, err = s.forkedSeqs(ctx, table); err != nil {
		return nil, err
	}
	alerts, err := s.tamperAlerts(ctx, table)
	if err != nil {
		return nil, err
	}
	for _, a := range alerts {
		if len(rep.Alerts) < 20 {
			rep.Alerts = append(rep.Alerts, fmt.Sprintf("%s at %d", a.Kind, a.Seq))
		}
	}
	return rep, nil
}
