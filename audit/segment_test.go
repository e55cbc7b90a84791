package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
)

// segPeriod is the tests' gaming day: play() spaces inputs 0.2 to 3.2 s
// apart, so a shoe of play is cut a dozen times or so.
const segPeriod = 2 * time.Minute

func segPolicy(sealed *[]string) *SegmentPolicy {
	return &SegmentPolicy{period: segPeriod, OnSealed: func(p string) {
		if sealed != nil {
			*sealed = append(*sealed, p)
		}
	}}
}

func openSegRecorder(t testing.TB, dir string, sealed *[]string, commits *[]Commit) *Recorder {
	t.Helper()
	r, err := OpenRecorder(context.Background(), dir, RecorderOptions{
		Table: "T1", Config: vipConfig(t), Clock: clock.NewStepping(time.Date(2025, 3, 14, 15, 0, 0, 0, time.UTC), time.Millisecond),
		Key: testKey(), CheckpointEvery: 1, Logger: quietLogger(), Segments: segPolicy(sealed),
		OnCommit: func(c Commit) {
			if commits != nil {
				*commits = append(*commits, c)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func keysOpt() VerifyOptions { return VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}} }

// TestSegmentsCutBetweenCoups plays two shoes on a directory trail whose
// gaming day is two minutes and checks the cut-overs: each falls where the
// table is between coups, every segment but the newest ends with its seal
// row (signed), every segment after the first opens with a snapshot, the
// seqs run on across files, the directory verifies, and a replay across the
// files finds nothing to differ; the rows the publisher hears are every row.
func TestSegmentsCutBetweenCoups(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	var sealed []string
	var commits []Commit
	r := openSegRecorder(t, dir, &sealed, &commits)
	ins := playInputs(t, rand.New(rand.NewPCG(5, 16)), 2)
	for i := 0; i < len(ins); {
		n := min(1+i%2, len(ins)-i)
		if _, err := r.SubmitBatch(ctx, slices.Clone(ins[i:i+n])); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	head := r.Store().Head()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 || len(sealed) != len(files)-1 {
		t.Fatalf("%d segments, %d sealed: want several cut-overs", len(files), len(sealed))
	}
	// Every row the publisher heard of, in order, with no gap.
	var seqs []int64
	for _, c := range commits {
		for _, rec := range c.Records {
			seqs = append(seqs, rec.Seq)
		}
	}
	for i, s := range seqs {
		if s != seqs[0]+int64(i) {
			t.Fatalf("OnCommit rows jump from %d to %d", seqs[i-1], s)
		}
	}
	rep := mustVerify(t, dir, keysOpt())
	requireClean(t, rep)
	if rep.Head != head || rep.Events != head.Seq || rep.Segments != len(files) {
		t.Fatalf("verify: head %+v events %d segments %d; want head %+v, %d segments", rep.Head, rep.Events, rep.Segments, head, len(files))
	}
	prevHead := Head{}
	for i, f := range files {
		rd, err := OpenReader(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		rows := readAll(t, rd.Events(ctx, Query{}))
		cps, err := rd.Checkpoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rd.Close()
		if rd.Base() != prevHead || rows[0].Seq != prevHead.Seq+1 || rows[0].PrevHash != prevHead.Hash {
			t.Fatalf("segment %d: base %+v, first row %d; want it to follow %+v", i, rd.Base(), rows[0].Seq, prevHead)
		}
		if i > 0 && rows[0].Kind != KindSnapshot {
			t.Errorf("segment %d opens with a %s row, want %s", i, rows[0].Kind, KindSnapshot)
		}
		last := rows[len(rows)-1]
		if i < len(files)-1 {
			if last.Kind != KindSeal || cps[len(cps)-1].Seq != last.Seq {
				t.Fatalf("segment %d ends with %s seq %d, last checkpoint %d: want a signed seal row", i, last.Kind, last.Seq, cps[len(cps)-1].Seq)
			}
			var b SealBody
			if err := json.Unmarshal(last.Body, &b); err != nil || b.Segment != filepath.Base(f) || b.FirstSeq != rows[0].Seq {
				t.Errorf("segment %d seal %s: %v", i, last.Body, err)
			}
		}
		// The table was between coups at the cut: the row before the
		// seal leaves it so, which a replay up to there shows.
		prevHead = Head{Seq: last.Seq, Hash: last.Hash}
	}
	// Replay across every file; and each cut-over fell between coups.
	rd, err := OpenReader(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var cutsChecked int
	var table *coup.Table
	rp, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{
		Input: func(_ Record, _ coup.Input, _ []coup.Event, t *coup.Table) { table = t },
		Other: func(rec Record) {
			if rec.Kind == KindSeal {
				if !table.BetweenCoups() {
					t.Errorf("seal row %d cut the trail in a coup: phase %s, coup %d", rec.Seq, table.Phase(), table.CoupNumber())
				}
				cutsChecked++
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("replay across segments: %d differences, first %+v", len(d), d[0])
	}
	if cutsChecked != len(sealed) {
		t.Fatalf("%d seal rows replayed, %d segments sealed", cutsChecked, len(sealed))
	}
}

// TestSegmentsRecallAfterCut: just after a cut-over the last 10 coups are
// all there, from the live table, from a replay of the directory, and from
// a replay of the new segment alone (its older segments archived away).
func TestSegmentsRecallAfterCut(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	r := openSegRecorder(t, dir, nil, nil)
	ins := playInputs(t, rand.New(rand.NewPCG(9, 9)), 1)
	var recall []coup.CoupRecord
	base := r.Store().Base()
	for _, in := range ins {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
		if b := r.Store().Base(); b != base && len(r.Recall()) >= 10 {
			recall = r.Recall()
			break
		}
		base = r.Store().Base()
	}
	if recall == nil {
		t.Fatal("no cut-over after ten coups")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := ListSegments(dir)
	for _, paths := range [][]string{{dir}, files[len(files)-1:]} {
		rd, err := OpenTrail(ctx, paths...)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := Replay(rd.Events(ctx, Query{}), DefaultReplayConfig(), ReplayVisitor{})
		rd.Close()
		if err != nil {
			t.Fatal(err)
		}
		if d := rp.Differences(); len(d) > 0 {
			t.Fatalf("%v: %d differences, first %+v", paths, len(d), d[0])
		}
		if got := rp.Table().Recall(); len(got) != len(recall) || !reflect.DeepEqual(got, recall) {
			t.Fatalf("%v: recall of %d coups, want the live table's %d:\n%+v\n%+v", paths, len(got), len(recall), got, recall)
		}
	}
}

// TestSealAfterHeadsRead is the background history check's view of a cut-
// over it races: it read the newest segment's head (here the row before the
// seal), and the live recorder then committed the seal row. The seal is the
// live table's, past the history being checked: not an unsealed_segment.
// (CI found this once: TestE2EKillDuringCutover's restart suspended itself.)
func TestSealAfterHeadsRead(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	var sealed []string
	r := openSegRecorder(t, dir, &sealed, nil)
	for _, in := range playInputs(t, rand.New(rand.NewPCG(9, 9)), 1) {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
		if len(sealed) > 0 {
			break
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(sealed) == 0 {
		t.Fatal("no cut-over in a shoe")
	}
	rd, err := OpenTrail(ctx, sealed[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	head, err := rd.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := []*Reader{rd}
	var got []Finding
	add := func(f Finding) { got = append(got, f) }
	// As read before the seal committed: the file's newest segment, its
	// head the row before the seal.
	if err := checkLinks(ctx, parts, []Head{{Seq: head.Seq - 1}}, true, add); err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		t.Fatalf("a seal committed after the heads were read: %+v", got)
	}
	// The same file read whole still has its seal where it belongs; a seal
	// row that is not the last row is still found.
	if err := checkLinks(ctx, parts, []Head{head}, true, add); err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		t.Fatalf("a sealed segment read whole: %+v", got)
	}
	if err := checkLinks(ctx, parts, []Head{{Seq: head.Seq + 1}}, true, add); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != FindingUnsealed {
		t.Fatalf("a row after the seal: findings %+v, want one %s", got, FindingUnsealed)
	}
}

// copyDir copies a directory trail's segment files (a closed trail: no
// -wal to carry).
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	files, err := ListSegments(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		in, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(to, filepath.Base(f)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return to
}

// TestSegmentsTamper: what goes wrong between files is found. A missing
// middle segment is a gap; two segments swapped are out of order; a seal
// row edited is an edited row; a segment's base rewritten is a broken link
// (and the meta's trigger dropped to do it, an altered schema); a sealed
// segment without its seal row, followed by another, is unsealed.
func TestSegmentsTamper(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	r := openSegRecorder(t, dir, nil, nil)
	for _, in := range playInputs(t, rand.New(rand.NewPCG(3, 1)), 1) {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	files, _ := ListSegments(dir)
	if len(files) < 4 {
		t.Fatalf("%d segments, want 4 or more", len(files))
	}
	requireClean(t, mustVerify(t, dir, keysOpt()))
	has := func(rep *Report, kind FindingKind, detail string) bool {
		for _, f := range rep.Findings {
			if f.Kind == kind && strings.Contains(f.Detail, detail) {
				return true
			}
		}
		return false
	}
	t.Run("missing middle segment", func(t *testing.T) {
		d := copyDir(t, dir)
		files, _ := ListSegments(d)
		os.Remove(files[1])
		rep := mustVerify(t, d, keysOpt())
		if !has(rep, FindingGap, "no segment between") {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
	t.Run("reordered segments", func(t *testing.T) {
		d := copyDir(t, dir)
		files, _ := ListSegments(d)
		rep, err := func() (*Report, error) {
			rd, err := OpenTrail(ctx, files[0], files[2], files[1], files[3])
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			return rd.Verify(ctx, keysOpt())
		}()
		if err != nil {
			t.Fatal(err)
		}
		if !has(rep, FindingSegmentOrder, "out of order") || !has(rep, FindingGap, "no segment between") {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
	t.Run("seal row edited", func(t *testing.T) {
		d := copyDir(t, dir)
		files, _ := ListSegments(d)
		db := openRaw(t, files[1])
		mustExec(t, db, `DROP TRIGGER events_no_update`)
		mustExec(t, db, `UPDATE events SET body = replace(body, '"cutover"', '"other"') WHERE kind = 'ctl.seal'`)
		mustExec(t, db, schemaTriggers["events_no_update"])
		db.Close()
		rep := mustVerify(t, d, keysOpt())
		if !has(rep, FindingEdited, "segment "+filepath.Base(files[1])) {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
	t.Run("base rewritten", func(t *testing.T) {
		d := copyDir(t, dir)
		files, _ := ListSegments(d)
		db := openRaw(t, files[2])
		mustExec(t, db, `DROP TRIGGER meta_no_update`)
		mustExec(t, db, `UPDATE meta SET value = '`+strings.Repeat("ab", 32)+`' WHERE key = 'base_hash'`)
		db.Close()
		rep := mustVerify(t, d, keysOpt())
		if !has(rep, FindingBrokenLink, "links to hash") || !has(rep, FindingMissingTrigger, "meta_no_update") {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
	t.Run("seal row cut off", func(t *testing.T) {
		d := copyDir(t, dir)
		files, _ := ListSegments(d)
		db := openRaw(t, files[0])
		mustExec(t, db, `DROP TRIGGER events_no_delete`)
		mustExec(t, db, `DROP TRIGGER checkpoints_no_delete`)
		mustExec(t, db, `DELETE FROM checkpoints WHERE seq = (SELECT max(seq) FROM events)`)
		mustExec(t, db, `DELETE FROM events WHERE kind = 'ctl.seal'`)
		db.Close()
		rep := mustVerify(t, d, keysOpt())
		if !has(rep, FindingUnsealed, "does not end with a seal row") {
			t.Fatalf("findings %v", rep.Findings)
		}
	})
}

func mustExec(t testing.TB, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestVersion1TrailStillWorks: a trail made before segments (schema
// version 1: no base in meta, version 1's triggers) is opened as it is,
// takes appends under its own triggers, and verifies; its triggers are not
// reported as altered.
func TestVersion1TrailStillWorks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db := openRaw(t, path)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := createSchemaVersion(ctx, tx, "T1", 1, Head{}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := openAt(t, path, Options{Table: "T1", Key: testKey(), CheckpointEvery: 1})
	appendAll(t, s, sampleEvents(12))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, path, keysOpt())
	requireClean(t, rep)
	if rep.Events != 12 {
		t.Fatalf("%d rows", rep.Events)
	}
	var v int
	raw := openRaw(t, path)
	defer raw.Close()
	if err := raw.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != 1 {
		t.Fatalf("user_version %d (%v): the file was changed, want it left at 1", v, err)
	}
	// Version 1's trigger still refuses a first row that skips row 1.
	if _, err := raw.Exec(`INSERT INTO events (seq, at, kind, shoe, coup, body, prev_hash, hash) VALUES (14, 'x', 'k', 0, 0, '{}', '', '')`); err == nil {
		t.Fatal("version 1 trigger let a gap in")
	}
}

// TestSegmentCreationNeverCommitted: the power went while the next
// segment's file was being made (SQLite left it empty): the start takes it
// as the live file to be made, links it to the sealed one, and deals on.
func TestSegmentCreationNeverCommitted(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	r := openSegRecorder(t, dir, nil, nil)
	for _, in := range playInputs(t, rand.New(rand.NewPCG(4, 4)), 1)[:60] {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	// Seal by hand, as a cut-over killed after its seal row would leave it.
	st := r.Store()
	seal, err := st.Seal(ctx, SealBody{Segment: filepath.Base(st.Path()), FirstSeq: st.Base().Seq + 1, Reason: "cutover"})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	empty := filepath.Join(dir, SegmentName(seal.Seq+1, "20250314T160000"))
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, dir, keysOpt()))
	r = openSegRecorder(t, dir, nil, nil)
	if got := r.Store().Path(); got != empty || r.Store().Base().Seq != seal.Seq {
		t.Fatalf("live segment %s base %d; want %s after seq %d", got, r.Store().Base().Seq, empty, seal.Seq)
	}
	first := readAll(t, r.Store().Events(ctx, Query{From: seal.Seq + 1, To: seal.Seq + 1}))
	if len(first) != 1 || first[0].Kind != KindSnapshot || first[0].PrevHash != seal.Hash {
		t.Fatalf("the new segment opens with %+v, want a snapshot linked to the seal", first)
	}
	r.Close()
	requireClean(t, mustVerify(t, dir, keysOpt()))
}

// checkCutsPrompt replays a directory trail written by inputs submitted one
// at a time and checks the cut-over rule: once the gaming day has ended,
// the trail is cut right after the first input that leaves the table
// between coups, before any other input; and never elsewhere.
func checkCutsPrompt(t *testing.T, dir string, p *SegmentPolicy) (cuts int) {
	t.Helper()
	ctx := context.Background()
	rd, err := OpenReader(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var due time.Time
	var lastAt time.Time
	var waiting int64 // the input after which a cut was due, 0 if none
	rp, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{
		Input: func(rec Record, in coup.Input, _ []coup.Event, tb *coup.Table) {
			if waiting != 0 {
				t.Errorf("input row %d: a cut was due after input row %d (the table between coups past %s) and did not come", rec.Seq, waiting, due)
				waiting = 0
			}
			lastAt = in.At
			if !in.At.Before(due) && tb.BetweenCoups() {
				waiting = rec.Seq
			}
		},
		Other: func(rec Record) {
			switch {
			case due.IsZero():
				due = p.DayEnd(rec.At) // the first segment: from its first row
			case rec.Kind == KindSeal:
				if waiting == 0 {
					t.Errorf("seal row %d: no cut was due", rec.Seq)
				}
				waiting = 0
				cuts++
				at := lastAt
				if rec.At.After(at) {
					at = rec.At
				}
				due = p.DayEnd(at)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("replay: %+v", d[0])
	}
	return cuts
}

// TestCutAtFirstMomentBetweenCoups: past the hour, the cut comes right
// after the first input that leaves the table between coups (a coup's
// result final, or the shoe ended), never later and never elsewhere.
func TestCutAtFirstMomentBetweenCoups(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	r := openSegRecorder(t, dir, nil, nil)
	for _, in := range playInputs(t, rand.New(rand.NewPCG(12, 5)), 2) {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if cuts := checkCutsPrompt(t, dir, segPolicy(nil)); cuts < 5 {
		t.Fatalf("%d cut-overs, want several", cuts)
	}
}

// TestCutEveryShoes: with EveryShoes 1 and a gaming day that does not end,
// the trail is cut at the end of each shoe (no shoe in play), for that
// reason, and nowhere else.
func TestCutEveryShoes(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	r, err := OpenRecorder(ctx, dir, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(), CheckpointEvery: 1,
		Logger: quietLogger(), Segments: &SegmentPolicy{Cutover: 6 * time.Hour, EveryShoes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		dealShoe(t, r, 4)
	}
	r.Close()
	requireClean(t, mustVerify(t, dir, keysOpt()))
	rd, err := OpenReader(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ended := 0
	var seals []SealBody
	for rec, err := range rd.Events(ctx, Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case string(coup.EvShoeEnded):
			ended++
		case KindSeal:
			var b SealBody
			json.Unmarshal(rec.Body, &b)
			seals = append(seals, b)
		}
	}
	if ended < 2 || len(seals) != ended {
		t.Fatalf("%d shoes ended, %d seals (%+v): want one a shoe", ended, len(seals), seals)
	}
	for _, b := range seals {
		if b.Reason != "shoes" {
			t.Errorf("seal %+v: want reason shoes", b)
		}
	}
}

// dealShoe deals a shoe on the recorder's own table: a new shoe, its burn,
// coups cards drawn from what the shoe holds, each result revealed and its
// result time ticked away, then the shoe ended by the pit.
func dealShoe(t *testing.T, r *Recorder, coups int) {
	t.Helper()
	ctx := context.Background()
	submit := func(in coup.Input) {
		t.Helper()
		if in.Kind != coup.InCmd && in.Kind != coup.InTick {
			in.ShoeSeq = r.LastShoeSeq() + 1
		}
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	// A different order each shoe: the shuffle check must not take the
	// shoes for unshuffled ones.
	rng := rand.New(rand.NewPCG(uint64(r.LastShoeSeq()), 9))
	card := func() {
		left := r.Remaining()
		from := rng.IntN(coup.CardCount)
		for k := range coup.CardCount {
			if c := coup.CardAt((from + k) % coup.CardCount); left.Count(c) > 0 {
				submit(coup.Input{Kind: coup.InCard, Card: &c})
				return
			}
		}
		t.Fatal("the shoe is empty")
	}
	submit(coup.Input{Kind: coup.InButton, Button: coup.ButtonNewShoe})
	for n := 0; n < 500; n++ {
		_, pit := r.View()
		if pit.Suspended {
			t.Fatalf("suspended: %+v", pit.Alerts)
		}
		switch pit.Phase {
		case coup.PhaseBurn:
			if r.table.Burn().First != nil && r.table.Burn().Burned >= r.table.Burn().Required {
				submit(coup.Input{Kind: coup.InButton, Button: coup.ButtonBurnDone})
			} else {
				card()
			}
		case coup.PhaseBettingOpen:
			if pit.Coup > coups {
				submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionShoeEnd, By: "pit-boss", ID: fmt.Sprintf("e%d", r.LastShoeSeq()), Reason: "test"}})
				return
			}
			submit(coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets})
		case coup.PhaseBettingClosed, coup.PhaseDealing:
			card()
		case coup.PhaseResult:
			if !r.table.ResultFinal() {
				submit(coup.Input{Kind: coup.InButton, Button: coup.ButtonReveal})
			} else if d, ok := r.Deadline(); ok {
				submit(coup.Input{Kind: coup.InTick, At: d})
			} else {
				t.Fatal("a final result with no result time")
			}
		default:
			t.Fatalf("phase %s", pit.Phase)
		}
	}
	t.Fatal("the shoe did not end")
}

// FuzzParseSegmentName: a directory's file names are outside input. No
// name panics the parser; a name it takes names a seq of 1 or more, and
// SegmentName of that seq and the name's day gives the name back.
func FuzzParseSegmentName(f *testing.F) {
	for _, s := range []string{SegmentName(1, "20261125"), SegmentName(133201, "20261125T060000"), "seg-000000000001-.db",
		"seg-00000000001-x.db", "seg--1.db", "seg-999999999999-20261125.db-wal", "seg-000000000000-x.db", "trail.db", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		first, ok := parseSegmentName(name)
		if !ok {
			return
		}
		if first < 1 {
			t.Fatalf("%q: seq %d", name, first)
		}
		day := strings.TrimSuffix(name[len(segPrefix)+13:], segSuffix)
		if got := SegmentName(first, day); got != name {
			t.Fatalf("%q parses to seq %d day %q, which names %q", name, first, day, got)
		}
	})
}

// TestReplayHeadlessWithoutSnapshot: rows that begin after row 1 with no
// snapshot among them cannot be replayed, and the replay says so instead
// of reporting nothing wrong.
func TestReplayHeadlessWithoutSnapshot(t *testing.T) {
	rows := func(yield func(Record, error) bool) {
		for seq := int64(5); seq < 9; seq++ {
			if !yield(Record{Seq: seq, Kind: "ctl.start", Body: []byte(`{}`)}, nil) {
				return
			}
		}
	}
	rp, err := Replay(rows, vipConfig(t), ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) != 1 || !strings.Contains(d[0].Detail, "no snapshot") {
		t.Fatalf("differences %+v", d)
	}
}

// TestMoveIntoSegments: a trail kept in one file (version 1, as every trail
// before segments) becomes the first segment of a directory trail: sealed
// under its own triggers and moved, the chain and seq going on in the next
// segment; the directory verifies, recall is the file's, and a second
// start (the file gone) just starts.
func TestMoveIntoSegments(t *testing.T) {
	ctx := context.Background()
	tmp := t.TempDir()
	path := filepath.Join(tmp, "trail.db")
	db := openRaw(t, path)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := createSchemaVersion(ctx, tx, "T1", 1, Head{}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	db.Close()
	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(), CheckpointEvery: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		dealShoe(t, r, 6)
	}
	recall, head := r.Recall(), r.Store().Head()
	r.Close()

	dir := filepath.Join(tmp, "trail")
	open := func() *Recorder {
		t.Helper()
		r, err := OpenRecorder(ctx, dir, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(), CheckpointEvery: 1,
			Logger: quietLogger(), Segments: &SegmentPolicy{Cutover: 6 * time.Hour}, MoveFrom: path})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r = open()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file is still at %s: %v", path, err)
	}
	if b := r.Store().Base(); b.Seq != head.Seq+1 {
		t.Fatalf("the live segment starts after %d, want after the seal at %d", b.Seq, head.Seq+1)
	}
	if got := r.Recall(); !reflect.DeepEqual(got, recall) {
		t.Fatalf("recall after the move:\n%+v\nwant\n%+v", got, recall)
	}
	dealShoe(t, r, 3)
	r.Close()
	rep := mustVerify(t, dir, keysOpt())
	requireClean(t, rep)
	if rep.Segments != 2 {
		t.Fatalf("%d segments", rep.Segments)
	}
	r = open() // moved already: nothing to do
	r.Close()
	requireClean(t, mustVerify(t, dir, keysOpt()))
}
