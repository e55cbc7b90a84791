package mqttpub

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// dealShoes submits whole shoes dealt by the tableau, voiding about one coup
// in ten half-way, so the roads have coups taken off them too.
func dealShoes(t testing.TB, rec *audit.Recorder, rng *rand.Rand, shoes int) {
	t.Helper()
	ctx := context.Background()
	shadow, err := coup.NewTable(vipConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(in coup.Input) {
		if in.Kind != coup.InCmd && in.Kind != coup.InTick {
			in.ShoeSeq = rec.LastShoeSeq() + 1
		}
		c, err := rec.Submit(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		shadow.Apply(c.Input)
	}
	for range shoes {
		deck := make([]coup.Card, 0, 8*52)
		for range 8 {
			for i := range coup.CardCount {
				deck = append(deck, coup.CardAt(i))
			}
		}
		rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		next := 0
		draw := func() *coup.Card { c := deck[next]; next++; return &c }
		submit(button(coup.ButtonNewShoe))
		for shadow.Phase() == coup.PhaseBurn {
			submit(coup.Input{Kind: coup.InCard, Card: draw()})
			if b := shadow.Burn(); b.First != nil && b.Burned >= b.Required {
				submit(button(coup.ButtonBurnDone))
			}
		}
		for next < len(deck)-30 {
			ph, n, final := shadow.Phase(), shadow.CoupNumber(), shadow.ResultFinal()
			switch ph {
			case coup.PhaseBettingOpen:
				submit(button(coup.ButtonNoMoreBets))
			case coup.PhaseBettingClosed, coup.PhaseDealing:
				if ph == coup.PhaseDealing && rng.IntN(40) == 0 {
					submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionVoid, Coup: n, By: "pit", ID: "v", Reason: "test"}})
					submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionResume, By: "pit", ID: "r", Reason: "test"}})
					continue
				}
				submit(coup.Input{Kind: coup.InCard, Card: draw()})
			case coup.PhaseResult:
				if !final {
					submit(button(coup.ButtonReveal))
				} else {
					submit(coup.Input{Kind: coup.InTick})
				}
			default:
				t.Fatalf("phase %s", ph)
			}
		}
		submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionShoeEnd, By: "pit", ID: "e", Reason: "test"}})
	}
}

// TestRebuildFromSnapshot: a publisher that starts from a snapshot row has
// every retained topic (the table, the shoe, the roads, the alerts)
// exactly as one that applied every row from row 1.
func TestRebuildFromSnapshot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	rec, err := audit.OpenRecorder(ctx, path, audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet(),
		Key: checkpointKey(), CheckpointEvery: 1, SnapshotEvery: 61,
	})
	if err != nil {
		t.Fatal(err)
	}
	shoes := 2
	if testing.Short() {
		shoes = 1
	}
	dealShoes(t, rec, rand.New(rand.NewPCG(16, 7)), shoes)
	st := rec.Store()
	head := st.Head().Seq
	snaps := 0
	for to := int64(40); to <= head; to += 1 + to/7 {
		snap, ok, err := st.LastSnapshot(ctx, to)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		snaps++
		topics := func(fromSnap bool) map[string]string {
			e, err := newEngine(Topics{Prefix: "t"}, tableID, "sim", "online", vipConfig(t), quiet())
			if err != nil {
				t.Fatal(err)
			}
			from := int64(1)
			if fromSnap {
				if err := e.restore(snap); err != nil {
					t.Fatal(err)
				}
				from = snap.Seq + 1
			}
			e.quiet = true
			for r, err := range st.Events(ctx, audit.Query{From: from, To: to}) {
				if err != nil {
					t.Fatal(err)
				}
				e.apply(r)
			}
			e.quiet = false
			out := map[string]string{}
			for _, m := range e.retainedMessages(true) {
				out[m.Topic] = string(m.Payload)
			}
			return out
		}
		full, fromSnap := topics(false), topics(true)
		for topic, p := range full {
			if fromSnap[topic] != p {
				t.Fatalf("up to row %d, from the snapshot at %d, %s is\n%s\nfrom row 1\n%s", to, snap.Seq, topic, fromSnap[topic], p)
			}
		}
		if len(full) != len(fromSnap) {
			t.Fatalf("up to row %d: %d retained topics from row 1, %d from the snapshot", to, len(full), len(fromSnap))
		}
	}
	if snaps < 10 {
		t.Fatalf("%d points checked from a snapshot", snaps)
	}
	rec.Close()
}

// BenchmarkEngineRow is the publisher's own work for one row of a live
// table, without a broker: apply it to the table copy, make its pit/events
// message and the messages it calls for. At full speed this, not the
// recorder, is what held the whole path back (issue 16).
func BenchmarkEngineRow(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "trail.db")
	rec, err := audit.OpenRecorder(ctx, path, audit.RecorderOptions{
		Table: tableID, Config: vipConfig(b), Clock: newStepClock(), Logger: quiet(), CheckpointEvery: 1, SnapshotEvery: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	dealShoes(b, rec, rand.New(rand.NewPCG(16, 8)), 1)
	var rows []audit.Record
	for r, err := range rec.Store().Events(ctx, audit.Query{}) {
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, r)
	}
	rec.Close()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		e, err := newEngine(Topics{Prefix: "t"}, tableID, "sim", "online", vipConfig(b), quiet())
		if err != nil {
			b.Fatal(err)
		}
		e.quiet = true // the analysis is once a coup, not per row
		for _, r := range rows {
			e.apply(r)
			_ = e.eventMessage(r)
			_ = e.rowMessages(r)
			n++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/row")
}

// TestDiskRowsAlert: the free-space rows the controller records reach the
// pit as an alert raised and resolved.
func TestDiskRowsAlert(t *testing.T) {
	e, err := newEngine(Topics{Prefix: "t"}, tableID, "sim", "online", vipConfig(t), quiet())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ kind, state string }{{audit.KindDiskLow, AlertRaised}, {audit.KindDiskOK, AlertResolved}} {
		body, _ := json.Marshal(audit.DiskBody{Path: "trail.db", FreeBytes: 900 << 20, TotalBytes: 32 << 30, FloorBytes: 1 << 30, DaysLeft: 19.1})
		msgs := e.rowMessages(audit.Record{Seq: 7, Kind: tt.kind, Body: body})
		if len(msgs) != 1 || msgs[0].Topic != "t/"+TopicPitAlerts {
			t.Fatalf("%s: %+v", tt.kind, msgs)
		}
		var a Alert
		if err := json.Unmarshal(msgs[0].Payload, &a); err != nil {
			t.Fatal(err)
		}
		if a.State != tt.state || a.Kind != "disk_low" || a.Source != SourceAudit || a.ID != "disk" {
			t.Fatalf("%s: %+v", tt.kind, a)
		}
	}
}

// TestPublishAcrossSegments: on a directory trail cut over between two
// shoes, the publisher's reading by seq (catch-up, resync, its rebuild)
// runs across the files: every retained topic built from row 1 through the
// seal row into the next segment is the one built from the new segment's
// opening snapshot alone, and the seal row publishes its pit/events line
// and nothing else.
func TestPublishAcrossSegments(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	rec, err := audit.OpenRecorder(ctx, dir, audit.RecorderOptions{
		Table: tableID, Config: vipConfig(t), Clock: newStepClock(), Logger: quiet(),
		Key: checkpointKey(), CheckpointEvery: 1, Segments: &audit.SegmentPolicy{Cutover: 6 * time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	dealShoes(t, rec, rand.New(rand.NewPCG(16, 9)), 1)
	// The shoe's end waits for its coup: play it out, as a dealer would.
	for i := 0; i < 20 && rec.Cut(ctx) != nil; i++ {
		_, pit := rec.View()
		var in coup.Input
		switch pit.Phase {
		case coup.PhaseBettingOpen:
			in = button(coup.ButtonNoMoreBets)
		case coup.PhaseBettingClosed, coup.PhaseDealing:
			left := rec.Remaining()
			for k := range coup.CardCount {
				if c := coup.CardAt(k); left.Count(c) > 0 {
					in = coup.Input{Kind: coup.InCard, Card: &c}
					break
				}
			}
		default:
			in = button(coup.ButtonReveal)
		}
		in.ShoeSeq = rec.LastShoeSeq() + 1
		if _, err := rec.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.Store().SealedSegments()) == 0 {
		_, pit := rec.View()
		t.Fatalf("no cut-over: the table is %s, suspended %v %q, alerts %+v", pit.Phase, pit.Suspended, pit.SuspendReason, pit.Alerts)
	}
	dealShoes(t, rec, rand.New(rand.NewPCG(16, 10)), 1)
	st := rec.Store()
	segs := st.SealedSegments()
	if len(segs) == 0 {
		t.Fatal("no segment sealed")
	}
	last := segs[len(segs)-1]
	opening, ok, err := st.LastSnapshot(ctx, last.Head.Seq+1)
	if err != nil || !ok || opening.Seq != last.Head.Seq+1 {
		t.Fatalf("the new segment's first row: %+v %v %v, want its opening snapshot", opening, ok, err)
	}
	topics := func(from int64, snap *audit.Record) map[string]string {
		e, err := newEngine(Topics{Prefix: "t"}, tableID, "sim", "online", vipConfig(t), quiet())
		if err != nil {
			t.Fatal(err)
		}
		if snap != nil {
			if err := e.restore(*snap); err != nil {
				t.Fatal(err)
			}
		}
		e.quiet = true
		next := from
		for r, err := range st.Events(ctx, audit.Query{From: from}) {
			if err != nil {
				t.Fatal(err)
			}
			if r.Seq != next {
				t.Fatalf("read row %d after %d: the seq does not run on across the files", r.Seq, next-1)
			}
			next++
			if r.Kind == audit.KindSeal {
				if msgs := e.rowMessages(r); len(msgs) != 0 {
					t.Fatalf("the seal row calls for %+v", msgs)
				}
			}
			e.apply(r)
		}
		if next-1 != st.Head().Seq {
			t.Fatalf("read up to %d, the head is %d", next-1, st.Head().Seq)
		}
		e.quiet = false
		out := map[string]string{}
		for _, m := range e.retainedMessages(true) {
			out[m.Topic] = string(m.Payload)
		}
		return out
	}
	full, fromSnap := topics(1, nil), topics(opening.Seq+1, &opening)
	if len(full) != len(fromSnap) || len(full) == 0 {
		t.Fatalf("%d retained topics from row 1, %d from the snapshot", len(full), len(fromSnap))
	}
	for topic, p := range full {
		if fromSnap[topic] != p {
			t.Fatalf("%s from row 1:\n%s\nfrom the new segment's snapshot:\n%s", topic, p, fromSnap[topic])
		}
	}
}
