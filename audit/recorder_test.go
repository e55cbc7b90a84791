package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
)

func vipConfig(t testing.TB) coup.TableConfig {
	t.Helper()
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	return coup.DefaultTableConfig(p)
}

func openRecorder(t testing.TB, path string, commits *[]Commit) *Recorder {
	t.Helper()
	var mu sync.Mutex
	r, err := OpenRecorder(context.Background(), path, RecorderOptions{
		Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Key: testKey(), CheckpointEvery: 5, Logger: quietLogger(),
		OnCommit: func(c Commit) {
			if commits != nil {
				mu.Lock()
				*commits = append(*commits, c)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// shoeScript is a shoe start, burn and one coup, as the shoe sends them.
func shoeScript(t testing.TB) []coup.Input {
	t.Helper()
	var ins []coup.Input
	seq := uint32(0)
	add := func(in coup.Input) {
		seq++
		in.ShoeSeq = seq
		ins = append(ins, in)
	}
	card := func(s string) {
		c, err := coup.ParseCard(s)
		if err != nil {
			t.Fatal(err)
		}
		add(coup.Input{Kind: coup.InCard, Card: &c})
	}
	add(coup.Input{Kind: coup.InButton, Button: coup.ButtonNewShoe})
	for _, s := range []string{"3S", "2C", "3C", "4C"} {
		card(s)
	}
	add(coup.Input{Kind: coup.InButton, Button: coup.ButtonBurnDone})
	add(coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets})
	for _, s := range []string{"6S", "6H", "7D", "KC", "5H"} {
		card(s)
	}
	add(coup.Input{Kind: coup.InButton, Button: coup.ButtonReveal})
	return ins
}

func TestRecorderRestartSameState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	var commits []Commit
	r := openRecorder(t, path, &commits)
	script := shoeScript(t)
	// Stop in the middle of the coup: after two of its cards.
	cut := len(script) - 4
	for _, in := range script[:cut] {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	_, pitBefore := r.View()
	seqBefore := r.LastShoeSeq()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Every commit's rows: the input first, then what it derived, contiguous.
	var next int64
	for _, c := range commits {
		if !coup.IsInput(c.Records[0].Kind) || len(c.Records) != 1+len(c.Events) {
			t.Fatalf("commit %+v", c.Records)
		}
		for _, rec := range c.Records {
			if next != 0 && rec.Seq != next {
				t.Fatalf("seq %d after %d", rec.Seq, next-1)
			}
			next = rec.Seq + 1
		}
	}

	r2 := openRecorder(t, path, nil)
	defer r2.Close()
	_, pitAfter := r2.View()
	if !reflect.DeepEqual(pitBefore, pitAfter) || r2.LastShoeSeq() != seqBefore {
		t.Fatalf("state after restart differs:\n%+v\n%+v", pitBefore, pitAfter)
	}
	// The coup goes on where it stopped.
	var last Commit
	for _, in := range script[cut:] {
		c, err := r2.Submit(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		last = c
	}
	if last.Public.Result == nil || last.Public.Result.Winner != coup.SidePlayer {
		t.Fatalf("result after restart: %+v", last.Public)
	}
	rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
	requireClean(t, rep)
}

func TestRecorderRefusesTamperedAndDifferingTrails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.db")
	r := openRecorder(t, path, nil)
	for _, in := range shoeScript(t) {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	// An edited row: verification fails before anything is rebuilt.
	db := openRaw(t, path)
	if _, err := db.Exec("DROP TRIGGER events_no_update"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE events SET body = replace(body, '"6S"', '"9S"') WHERE kind = 'in.card'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Key: testKey(), Logger: quietLogger()})
	if err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("tampered trail opened: %v", err)
	}

	// A trail whose chain is whole but whose derived rows are not what the
	// rules derive (a forged result appended through the store itself).
	path2 := filepath.Join(dir, "forged.db")
	st, err := Open(ctx, path2, Options{Table: "T1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	kh := coup.Card{Rank: coup.King, Suit: coup.Hearts}
	if _, err := st.AppendBatch(ctx, []Event{
		{Kind: string(coup.InCard), Body: coup.Input{Kind: coup.InCard, At: time.Unix(0, 0).UTC(), Card: &kh}},
		{Kind: string(coup.EvCoupResult), Body: map[string]string{"winner": "player"}},
	}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err = OpenRecorder(ctx, path2, RecorderOptions{Table: "T1", Config: vipConfig(t), Logger: quietLogger()})
	if !errors.Is(err, ErrTrailDiffers) {
		t.Fatalf("forged trail: %v", err)
	}
}

// TestRecorderWriteFailure fills the disk mid-coup: the input is refused,
// the table keeps its state, and once the trail is writable again the outage
// is recorded first and suspends the table.
func TestRecorderWriteFailure(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	var failures []error
	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Clock: newStepClock(), Logger: quietLogger(),
		OnWriteFailure: func(err error, v coup.View) {
			if !v.Suspended {
				t.Error("failure view not suspended")
			}
			failures = append(failures, err)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	script := shoeScript(t)
	for _, in := range script[:8] {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	_, before := r.View()
	if _, err := r.store.w.ExecContext(ctx, "PRAGMA query_only = ON"); err != nil {
		t.Fatal(err)
	}
	for _, in := range script[8:10] {
		if _, err := r.Submit(ctx, in); !errors.Is(err, ErrWriteFailed) {
			t.Fatalf("submit on a read-only trail: %v", err)
		}
	}
	if _, after := r.View(); !reflect.DeepEqual(before, after) || len(failures) != 2 || r.Failing() == nil {
		t.Fatalf("state moved on an unrecorded input, or failure not told (%d)", len(failures))
	}
	if r.RetryTrail(ctx) {
		t.Fatal("a read-only trail retried as writable")
	}
	if _, err := r.store.w.ExecContext(ctx, "PRAGMA query_only = OFF"); err != nil {
		t.Fatal(err)
	}
	// The outage is recorded as soon as the trail is tried again, before
	// any input comes.
	if !r.RetryTrail(ctx) || r.Failing() != nil {
		t.Fatal("retry did not record the outage")
	}
	if _, pit := r.View(); !pit.Suspended || len(pit.Alerts) != 1 || pit.Alerts[0].Kind != coup.AlertAuditFailed {
		t.Fatalf("after the retry: %+v", pit)
	}
	c, err := r.Submit(ctx, script[10])
	if err != nil {
		t.Fatal(err)
	}
	_, pit := r.View()
	// The outage is recorded first; the card that came after it was drawn
	// while the table was suspended.
	if !pit.Suspended || len(pit.Alerts) != 2 || pit.Alerts[0].Kind != coup.AlertAuditFailed || !strings.Contains(pit.Alerts[0].Message, "9 to 10") ||
		pit.Alerts[1].Kind != coup.AlertCardSuspended {
		t.Fatalf("after the outage: %+v", pit)
	}
	if !strings.Contains(kindsOf(c.Events), string(coup.AlertCardSuspended)) {
		t.Fatalf("events %s", kindsOf(c.Events))
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{}))
}

func kindsOf(evs []coup.Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(string(e.Kind))
		if e.Alert != nil {
			b.WriteString(":" + string(e.Alert.Kind))
		}
		b.WriteByte(' ')
	}
	return b.String()
}

func TestRecorderTimers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "trail.db")
	committed := make(chan Commit, 100)
	cfg := vipConfig(t)
	cfg.BettingTime = 20 * time.Second
	clk := clock.NewFake(time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC))
	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: cfg, Clock: clk, Logger: quietLogger(),
		OnCommit: func(c Commit) { committed <- c }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go r.RunTimers(ctx)
	for _, in := range shoeScript(t)[:6] { // new shoe, burn, burn done: betting opens
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	for len(committed) > 0 {
		<-committed
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	due, err := clk.WaitArmed(wctx, cfg.BettingTime)
	if err != nil {
		t.Fatalf("no timer set for the betting time: %v", err)
	}
	// A millisecond short: no timer fires, so nothing can wake the
	// recorder's timers, and nothing was committed.
	running := clk.Running()
	clk.Advance(cfg.BettingTime - time.Millisecond)
	if after := clk.Running(); !slices.Equal(after, running) {
		t.Fatalf("timers running %v, then %v a millisecond before the betting time was up", running, after)
	}
	if when, err := clk.WaitArmed(wctx, cfg.BettingTime); err != nil || !when.Equal(due) {
		t.Fatalf("the betting time's timer due at %v (%v), want %v", when, err, due)
	}
	select {
	case c := <-committed:
		t.Fatalf("committed %s before the betting time was up", c.Input.Kind)
	default:
	}
	clk.Advance(time.Millisecond)
	select {
	case c := <-committed:
		if c.Input.Kind != coup.InTick || c.Public.Phase != coup.PhaseBettingClosed || !c.Input.At.Equal(due) {
			t.Fatalf("tick commit %s at %v, phase %s; want a tick at %v closing betting", c.Input.Kind, c.Input.At, c.Public.Phase, due)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tick not committed")
	}
}

func TestRecorderRefusesUnwritableTrail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.db")
	r := openRecorder(t, path, nil)
	r.Close()
	// A trail whose directory cannot take SQLite's side files: a regular
	// file stands where the directory should be.
	blocked := filepath.Join(dir, "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenRecorder(context.Background(), filepath.Join(blocked, "trail.db"), RecorderOptions{Table: "T1", Config: vipConfig(t), Logger: quietLogger()})
	if !errors.Is(err, ErrWriteFailed) || !strings.Contains(err.Error(), blocked) {
		t.Fatalf("err %v", err)
	}
}

func TestReplayerFlagsDifferences(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	r := openRecorder(t, path, nil)
	for _, in := range shoeScript(t) {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	rd, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var recs []Record
	for rec, err := range rd.Events(ctx, Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	rp, err := Replay(func(yield func(Record, error) bool) {
		for _, rec := range recs {
			if rec.Kind == string(coup.EvCoupResult) {
				var body map[string]any
				json.Unmarshal(rec.Body, &body)
				body["outcomes"] = map[string]any{}
				rec.Body, _ = CanonicalJSON(body)
			}
			if !yield(rec, nil) {
				return
			}
		}
	}, vipConfig(t), ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	d := rp.Differences()
	if len(d) != 1 || d[0].Kind != string(coup.EvCoupResult) {
		t.Fatalf("differences %+v", d)
	}
}

// TestRecorderGroupCommit submits a whole coup as one batch: one
// transaction, each input's rows in order, the same trail and state as
// one at a time.
func TestRecorderGroupCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var batched []Commit
	rb := openRecorder(t, filepath.Join(dir, "batch.db"), &batched)
	defer rb.Close()
	one := openRecorder(t, filepath.Join(dir, "one.db"), nil)
	defer one.Close()
	script := shoeScript(t)
	var commits int
	rb.opt.ObserveCommit = func(time.Duration, int) { commits++ }
	cs, err := rb.SubmitBatch(ctx, script)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range script {
		if _, err := one.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if commits != 1 || len(cs) != len(script) || len(batched) != len(script) {
		t.Fatalf("%d transactions, %d commits returned, %d heard", commits, len(cs), len(batched))
	}
	var rows int
	for i, c := range cs {
		if c.Records[0].Kind != string(script[i].Kind) || len(c.Records) != 1+len(c.Events) {
			t.Fatalf("commit %d: %+v", i, c.Records)
		}
		rows += len(c.Records)
	}
	// Each commit's views are the table after its own input.
	if cs[6].Public.Phase != coup.PhaseBettingClosed || cs[len(cs)-1].Public.Result == nil {
		t.Fatalf("views: %s, %+v", cs[6].Public.Phase, cs[len(cs)-1].Public.Result)
	}
	_, a := rb.View()
	_, b := one.View()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("batched state differs:\n%+v\n%+v", a, b)
	}
	if got := rb.store.Head().Seq - one.store.Head().Seq; got != 0 {
		t.Fatalf("trails differ in length by %d rows", got)
	}
}
