package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// playInputs is a table's day in miniature: whole shoes dealt by the
// tableau, with random trouble between them (stray and unreadable cards,
// link changes, supervisor commands), so snapshots are taken in every phase
// and with alerts up.
func playInputs(t testing.TB, rng *rand.Rand, shoes int) []coup.Input {
	t.Helper()
	ins, err := play(rng, shoes)
	if err != nil {
		t.Fatal(err)
	}
	return ins
}

// play is playInputs for a child process, which has no testing.T.
func play(rng *rand.Rand, shoes int) (ins []coup.Input, err error) {
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		return nil, err
	}
	shadow, err := coup.NewTable(coup.DefaultTableConfig(p))
	if err != nil {
		return nil, err
	}
	at := time.Date(2025, 3, 14, 15, 0, 0, 0, time.UTC)
	seq := uint32(0)
	add := func(in coup.Input) {
		at = at.Add(time.Duration(200+rng.IntN(3000)) * time.Millisecond)
		in.At = at
		if in.Kind != coup.InCmd && in.Kind != coup.InTick && in.Kind != coup.InLink {
			seq++
			in.ShoeSeq = seq
		}
		shadow.Apply(in)
		ins = append(ins, in)
	}
	card := func(c coup.Card) { add(coup.Input{Kind: coup.InCard, Card: &c}) }
	cmd := func(action string, coupNo int) {
		add(coup.Input{Kind: coup.InCmd, Command: &coup.Command{Action: action, Coup: coupNo, By: "pit-boss", ID: "c" + string(rune('a'+len(ins)%26)), Reason: "test"}})
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
		draw := func() coup.Card { c := deck[next]; next++; return c }
		add(coup.Input{Kind: coup.InButton, Button: coup.ButtonNewShoe})
		for shadow.Phase() == coup.PhaseBurn {
			card(draw())
			if b := shadow.Burn(); b.Burned >= b.Required && b.First != nil {
				add(coup.Input{Kind: coup.InButton, Button: coup.ButtonBurnDone})
			}
		}
		for shadow.Phase() != coup.PhaseNoShoe && next < len(deck)-20 {
			if shadow.Suspended() {
				for _, a := range shadow.Alerts() {
					if a.Needs == coup.NeedsVoid || a.Needs == coup.NeedsCard {
						cmd(coup.ActionVoid, shadow.CoupNumber())
						break
					}
				}
				add(coup.Input{Kind: coup.InLink, Link: coup.LinkConnected})
				cmd(coup.ActionResume, 0)
				if shadow.Suspended() {
					return nil, fmt.Errorf("still suspended: %+v", shadow.Alerts())
				}
				continue
			}
			switch shadow.Phase() {
			case coup.PhaseBettingOpen:
				add(coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets})
			case coup.PhaseBettingClosed, coup.PhaseDealing:
				switch r := rng.IntN(100); {
				case r < 2:
					add(coup.Input{Kind: coup.InCard, Unreadable: true})
				case r < 3:
					add(coup.Input{Kind: coup.InLink, Link: coup.LinkSilent, Reason: "test"})
				case r < 4:
					cmd(coup.ActionSuspend, 0)
				default:
					card(draw())
				}
			case coup.PhaseResult:
				if !shadow.ResultFinal() {
					add(coup.Input{Kind: coup.InButton, Button: coup.ButtonReveal})
				} else {
					at = at.Add(5 * time.Second)
					add(coup.Input{Kind: coup.InTick})
				}
			default:
				return nil, fmt.Errorf("phase %s in play", shadow.Phase())
			}
		}
		if shadow.Phase() != coup.PhaseNoShoe {
			cmd(coup.ActionShoeEnd, 0)
		}
	}
	return ins, nil
}

// recordAll commits ins through a recorder at path and closes it.
func recordAll(t testing.TB, path string, ins []coup.Input, every int64) {
	t.Helper()
	r, err := OpenRecorder(context.Background(), path, RecorderOptions{
		Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(), CheckpointEvery: 1,
		Logger: quietLogger(), SnapshotEvery: every, NoHistoryCheck: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(ins); {
		n := min(1+i%3, len(ins)-i) // single commits and group commits
		if _, err := r.SubmitBatch(context.Background(), ins[i:i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotPlusTailIsReplay is the property start-up rests on: for every
// snapshot row in a trail, the table it holds with the rows after it
// replayed is the table a replay from row 1 builds, byte for byte in
// canonical JSON; and every snapshot is the table the rows before it build
// (the full replay checks that on each one, so it reports no difference).
func TestSnapshotPlusTailIsReplay(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	shoes := 2
	if testing.Short() {
		shoes = 1
	}
	path := filepath.Join(t.TempDir(), "trail.db")
	ins := playInputs(t, rand.New(rand.NewPCG(16, 1)), shoes)
	t0 := time.Now()
	recordAll(t, path, ins, 300)
	t.Logf("%d inputs recorded in %v", len(ins), time.Since(t0))

	rd, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	full, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	if d := full.Differences(); len(d) > 0 {
		t.Fatalf("full replay: %d differences, first %+v", len(d), d[0])
	}
	want, err := CanonicalJSON(mustSnapshot(t, full.Table()))
	if err != nil {
		t.Fatal(err)
	}
	snaps := readAll(t, rd.Events(ctx, Query{Kinds: []string{KindSnapshot}}))
	if len(snaps) < 5 {
		t.Fatalf("%d snapshot rows in %d inputs' trail, want several", len(snaps), len(ins))
	}
	phases := map[coup.Phase]bool{}
	for i, snap := range snaps {
		if i%3 != 0 && i < len(snaps)-3 {
			// Each snapshot is held to the table at its place by the full
			// replay above; the tail from every third one (and the last
			// three) keeps this test linear enough for -race.
			continue
		}
		rp, err := NewReplayerFrom(snap, ReplayVisitor{})
		if err != nil {
			t.Fatalf("snapshot %d: %v", snap.Seq, err)
		}
		phases[rp.Table().Phase()] = true
		for rec, err := range rd.Events(ctx, Query{From: snap.Seq + 1}) {
			if err != nil {
				t.Fatal(err)
			}
			rp.Row(rec)
		}
		rp.Finish()
		if d := rp.Differences(); len(d) > 0 {
			t.Fatalf("from snapshot %d: %d differences, first %+v", snap.Seq, len(d), d[0])
		}
		got, err := CanonicalJSON(mustSnapshot(t, rp.Table()))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("from snapshot %d the table ends\n%s\nfrom row 1\n%s", snap.Seq, got, want)
		}
	}
	if len(phases) < 2 {
		t.Errorf("snapshots taken in phases %v only", phases)
	}
}

func mustSnapshot(t testing.TB, tab *coup.Table) []byte {
	t.Helper()
	b, err := tab.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecorderStartsFromSnapshot restarts on a trail with snapshots: the
// table is the one a replay from row 1 builds, start-up verified and
// replayed only the rows since the last snapshot, and the history check in
// the background finds the rest clean.
func TestRecorderStartsFromSnapshot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	ins := playInputs(t, rand.New(rand.NewPCG(16, 2)), 1)
	recordAll(t, path, ins, 200)

	full := func() []byte {
		rd, err := OpenReader(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		rp, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{})
		if err != nil {
			t.Fatal(err)
		}
		return mustSnapshot(t, rp.Table())
	}()
	head := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}).Head.Seq

	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(),
		CheckpointEvery: 1, Logger: quietLogger(), SnapshotEvery: 200})
	if err != nil {
		t.Fatal(err)
	}
	st := r.Start()
	if st.Snapshot == 0 || st.Replayed >= 200 || st.Verified > 202 || st.Verified < st.Replayed {
		t.Fatalf("start %+v on a trail of %d rows with a snapshot every 200", st, head)
	}
	if done, err := r.WaitHistoryCheck(ctx); !done || err != nil {
		t.Fatalf("history check: done %v, %v", done, err)
	}
	r.mu.Lock()
	got := mustSnapshot(t, r.table)
	r.mu.Unlock()
	// The start rows reconfigure nothing and deal nothing: the table is
	// the one the trail built.
	if string(got) != string(full) {
		t.Fatalf("restarted table\n%s\nfrom row 1\n%s", got, full)
	}
	if _, err := r.Submit(ctx, coup.Input{Kind: coup.InButton, Button: coup.ButtonNewShoe, ShoeSeq: r.LastShoeSeq() + 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))
}

// TestHistoryCheckSuspends edits a row before the snapshot, with the
// triggers dropped and the chain re-hashed up to it as an insider with the
// sqlite3 shell could (but without the key, so behind a signed checkpoint).
// Start-up, which checks only from the snapshot, deals; the background
// check finds the edit, the table is refused every further input and the
// failure is reported as tampering.
func TestHistoryCheckSuspends(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	ins := playInputs(t, rand.New(rand.NewPCG(16, 3)), 1)
	recordAll(t, path, ins, 150)

	db := openRaw(t, path)
	if _, err := db.Exec(`DROP TRIGGER events_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET body = replace(body, '"', ' "') WHERE seq = 20`); err != nil {
		t.Fatal(err)
	}
	// Put the trigger back, so the schema check at start passes.
	if _, err := db.Exec(schemaTriggers["events_no_update"]); err != nil {
		t.Fatal(err)
	}
	db.Close()

	var failures atomic.Int32
	var failure atomic.Value
	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(),
		CheckpointEvery: 1, Logger: quietLogger(), SnapshotEvery: 150,
		OnWriteFailure: func(err error, v coup.View) {
			failures.Add(1)
			failure.Store(v.SuspendReason)
		}})
	if err != nil {
		t.Fatalf("start from the snapshot: %v", err)
	}
	defer r.Close()
	done, herr := r.WaitHistoryCheck(ctx)
	var he *HistoryError
	if !done || !errors.As(herr, &he) || he.Seq != 20 || he.Kind != string(FindingEdited) {
		t.Fatalf("history check: done %v, %v; want the edit of row 20", done, herr)
	}
	if failures.Load() == 0 || failure.Load() != "audit trail tampered" {
		t.Fatalf("OnWriteFailure called %d times (%v)", failures.Load(), failure.Load())
	}
	_, err = r.Submit(ctx, coup.Input{Kind: coup.InButton, Button: coup.ButtonNewShoe})
	if !errors.Is(err, ErrHistory) || !errors.Is(err, ErrTampered) {
		t.Fatalf("submit after the finding: %v, want ErrHistory", err)
	}
}

// TestHistoryCheckFindsWrongSnapshot: a snapshot row that is not the table
// its rows build (a bug, or a key misused to sign a made-up table) is a
// replay difference, and the start from it is found out in the background.
func TestHistoryCheckFindsWrongSnapshot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	ins := playInputs(t, rand.New(rand.NewPCG(16, 4)), 1)
	recordAll(t, path, ins[:100], -1)

	s := openAt(t, path, Options{Table: "T1", Key: testKey(), CheckpointEvery: 1})
	wrong, err := coup.NewTable(vipConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := SnapshotEvent(wrong, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	s.Close()
	rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
	requireClean(t, rep) // the chain and signatures are whole

	rd, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{})
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) != 1 || d[0].Seq != rep.Head.Seq || !strings.Contains(d[0].Detail, "snapshot is not the table") {
		t.Fatalf("replay differences %+v, want the snapshot at %d", d, rep.Head.Seq)
	}

	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(),
		CheckpointEvery: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, herr := r.WaitHistoryCheck(ctx); !errors.Is(herr, ErrHistory) || !strings.Contains(herr.Error(), "replay_differs") {
		t.Fatalf("history check: %v", herr)
	}
}

// TestStartRefusesEditedTail: an edit after the snapshot is in what start-up
// verifies, so the controller refuses to start, as before snapshots.
func TestStartRefusesEditedTail(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	ins := playInputs(t, rand.New(rand.NewPCG(16, 5)), 1)
	recordAll(t, path, ins[:300], 100)
	rd, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	snap, ok, err := rd.LastSnapshot(ctx, 0)
	rd.Close()
	if err != nil || !ok {
		t.Fatalf("no snapshot: %v", err)
	}
	for _, seq := range []int64{snap.Seq, snap.Seq + 1} {
		p := copyTrail(t, path)
		db := openRaw(t, p)
		db.Exec(`DROP TRIGGER events_no_update`)
		if _, err := db.Exec(`UPDATE events SET body = replace(body, '"', ' "') WHERE seq = ?`, seq); err != nil {
			t.Fatal(err)
		}
		db.Exec(schemaTriggers["events_no_update"])
		db.Close()
		_, err := OpenRecorder(ctx, p, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(),
			CheckpointEvery: 1, Logger: quietLogger()})
		if err == nil || !strings.Contains(err.Error(), "edited") {
			t.Errorf("row %d edited (snapshot at %d): start %v, want refused", seq, snap.Seq, err)
		}
	}
}
