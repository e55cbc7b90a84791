package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// segmentCutoverGoal is the cut-over's goal: the table waits at most this
// long between a coup's result and the next card it can record.
const segmentCutoverGoal = time.Second

// benchCutover times a segment cut-over on a directory trail whose live
// segment holds o.SegmentRows rows (about a week of play at 1,000,000): from
// the decision to cut to the first row committed in the new segment, the
// path the recorder takes between two coups (the seal row and its signed
// checkpoint, the old file's WAL folded in and its writer closed, the next
// file created, its opening snapshot, then a row of play). It cuts three
// times and reports the first (the long segment) and the slowest.
func benchCutover(ctx context.Context, o Options, dir string) ([]Row, error) {
	p, err := coup.BuiltinProfile(o.Profile)
	if err != nil {
		return nil, err
	}
	tc := coup.DefaultTableConfig(p)
	_, key, err := benchKey(dir)
	if err != nil {
		return nil, err
	}
	trail := filepath.Join(dir, "trail")
	if err := os.MkdirAll(trail, 0o755); err != nil {
		return nil, err
	}
	day := time.Now().UTC().Format("20060102")
	first := filepath.Join(trail, audit.SegmentName(1, day))
	t := time.Now()
	rows, shoes, err := buildBenchTrail(ctx, first, tc, key, o.Seed, o.SegmentRows, batched)
	if err != nil {
		return nil, fmt.Errorf("build the segment: %w", err)
	}
	fmt.Fprintf(o.Progress, "bench: segment of %s rows (%d shoes) built in %s\n", commas(rows), shoes, time.Since(t).Round(100*time.Millisecond))
	st, err := audit.OpenDir(ctx, trail, day, audit.Options{Table: benchTrailTable, Key: key, CheckpointEvery: 1, Logger: quietLog()})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	snap, ok, err := st.LastSnapshot(ctx, 0)
	if err != nil || !ok {
		return nil, fmt.Errorf("the segment's last snapshot: %v (found %v)", err, ok)
	}
	var took []time.Duration
	for i := range 3 {
		t := time.Now()
		if _, err := st.Seal(ctx, audit.SealBody{Segment: filepath.Base(st.Path()), FirstSeq: st.Base().Seq + 1, Day: day, Reason: "cutover"}); err != nil {
			return nil, err
		}
		if err := st.NextSegment(ctx, fmt.Sprintf("%s-%d", day, i+1)); err != nil {
			return nil, err
		}
		// The opening snapshot (the table as it stands: a snapshot's size),
		// then the next card.
		if _, err := st.Append(ctx, audit.Event{Kind: audit.KindSnapshot, Shoe: snap.Shoe, Body: json.RawMessage(snap.Body)}); err != nil {
			return nil, err
		}
		if _, err := st.Append(ctx, audit.Event{Kind: string(coup.InButton), Body: coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets, At: time.Now().UTC()}}); err != nil {
			return nil, err
		}
		took = append(took, time.Since(t))
	}
	st.Close()
	rep, err := audit.Verify(ctx, trail, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}})
	if err != nil {
		return nil, err
	}
	if !rep.OK() || rep.Segments != 4 {
		return nil, fmt.Errorf("the directory after the cut-overs: %d segments, %d findings", rep.Segments, len(rep.Findings))
	}
	worst := max(took[0], took[1], took[2])
	return []Row{{ID: "segment_cutover", Result: fmt.Sprintf("%.0f ms (slowest of 3: %.0f ms)", msf(took[0]), msf(worst)),
		Goal: fmt.Sprintf("≤ %.0f ms at a %s-row segment", msf(segmentCutoverGoal), commas(int64(o.SegmentRows))), Verdict: verdict(worst <= segmentCutoverGoal),
		Detail: fmt.Sprintf("cut of a %s-row segment: seal row + signed checkpoint, WAL folded, next file made, opening snapshot (%d bytes), first row of play; the directory verifies (%d segments)",
			commas(rows), len(snap.Body), rep.Segments),
		Values: map[string]float64{"first_ms": msf(took[0]), "worst_ms": msf(worst), "rows": float64(rows)}}}, nil
}
