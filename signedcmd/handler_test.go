package signedcmd

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openRecorder(t *testing.T, path string, clk clock.Clock) *audit.Recorder {
	t.Helper()
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := audit.OpenRecorder(context.Background(), path, audit.RecorderOptions{
		Table: "BAC-07", Config: coup.DefaultTableConfig(p), Clock: clk, Logger: quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func rows(t *testing.T, rec *audit.Recorder, from int64) []audit.Record {
	t.Helper()
	var out []audit.Record
	for r, err := range rec.Store().Events(context.Background(), audit.Query{From: from}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

type replies []Reply

func (r *replies) Reply(x Reply) { *r = append(*r, x) }

func TestHandlerRecordsEveryOutcome(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	var direct replies
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Replier: &direct, Clock: clock, Logger: quiet()}

	start := rec.Store().Head().Seq + 1
	suspend := signed(t, clock, "alice", "suspend", func(c *Command) { c.Reason = "camera down" })
	h.Handle(ctx, wire(t, suspend), 0)
	h.Handle(ctx, wire(t, suspend), 0) // replayed
	resume := signed(t, clock, "game-server", "resume", nil)
	h.Handle(ctx, wire(t, resume), 0) // not permitted
	void := signed(t, clock, "bob", "void", nil)
	h.Handle(ctx, wire(t, void), 0) // verified, refused by the table: no shoe
	resync := signed(t, clock, "alice", "resync", func(c *Command) { c.From = 1 })
	h.Handle(ctx, wire(t, resync), 0)
	h.Handle(ctx, []byte("{\"id\":\"cut-short"), 20000)

	var got []Reply
	var kinds []string
	for _, r := range rows(t, rec, start) {
		kinds = append(kinds, r.Kind)
		if rp, ok := ReplyFor(r); ok {
			if rp.Seq != r.Seq || !rp.At.Equal(r.At) {
				t.Fatalf("reply %+v for row %d", rp, r.Seq)
			}
			got = append(got, rp)
		}
		if r.Kind == string(coup.InCmd) {
			var in coup.Input
			if err := json.Unmarshal(r.Body, &in); err != nil || in.Command == nil || in.Command.By == "" {
				t.Fatalf("input row without who signed it: %s", r.Body)
			}
		}
		if r.Kind == KindAccepted {
			var b AcceptedBody
			if err := json.Unmarshal(r.Body, &b); err != nil || b.ID != resync.ID || b.By != "alice" || b.From != 1 {
				t.Fatalf("accepted row %s", r.Body)
			}
		}
	}
	wantKinds := []string{
		"in.cmd", "command_accepted", "suspended",
		audit.KindRejected, audit.KindRejected,
		"in.cmd", "command_refused",
		KindAccepted,
		audit.KindRejected,
	}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("rows %v\nwant %v", kinds, wantKinds)
	}
	want := []struct{ id, result, code, by string }{
		{suspend.ID, Accepted, "", "alice"},
		{suspend.ID, Refused, CodeReplayed, "alice"},
		{resume.ID, Refused, CodeNotPermitted, "game-server"},
		{void.ID, Refused, CodeTable, "bob"},
		{"", Refused, CodeOversized, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("replies %+v", got)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Result != w.result || g.Code != w.code || g.By != w.by || (g.Result == Refused && g.Reason == "") {
			t.Errorf("reply %d: %+v, want %+v", i, g, w)
		}
	}
	if len(direct) != 0 {
		t.Fatalf("direct replies with a writable trail: %+v", direct)
	}
	var rb RejectedBody
	last := rows(t, rec, start)
	if err := json.Unmarshal(last[len(last)-1].Body, &rb); err != nil || rb.Bytes != 20000 || len(rb.SHA256) != 64 {
		t.Fatalf("oversized row %s", last[len(last)-1].Body)
	}
}

// failingRecorder is a trail that cannot be written.
type failingRecorder struct{}

var errDiskFull = errors.New("disk full")

func (failingRecorder) Submit(context.Context, coup.Input) (audit.Commit, error) {
	return audit.Commit{}, errDiskFull
}
func (failingRecorder) Record(context.Context, audit.Event) (audit.Record, error) {
	return audit.Record{}, errDiskFull
}

func TestHandlerRepliesDirectlyWhenTheTrailFails(t *testing.T) {
	clock := newFakeClock()
	var direct replies
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: failingRecorder{}, Replier: &direct, Clock: clock, Logger: quiet()}
	ok := signed(t, clock, "alice", "suspend", nil)
	h.Handle(context.Background(), wire(t, ok), 0)
	bad := signed(t, clock, "mallory", "suspend", nil)
	h.Handle(context.Background(), wire(t, bad), 0)
	if len(direct) != 2 || direct[0].ID != ok.ID || direct[0].Code != CodeTrail || direct[1].ID != bad.ID || direct[1].Code != CodeUnknownKey {
		t.Fatalf("%+v", direct)
	}
}

// TestRestoreAfterRestart: a controller restarted inside the window still
// refuses a command it accepted before, and forgets ids older than two
// windows.
func TestRestoreAfterRestart(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	path := filepath.Join(t.TempDir(), "trail.db")
	rec := openRecorder(t, path, clock)
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Clock: clock, Logger: quiet()}

	old := signed(t, clock, "alice", "suspend", nil)
	h.Handle(ctx, wire(t, old), 0)
	// Rows in between, so the bisection has something to skip.
	for i := 0; i < 50; i++ {
		clock.Advance(10 * time.Second)
		if _, err := rec.Submit(ctx, coup.Input{Kind: coup.InStatus, Status: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	recent := signed(t, clock, "alice", "resume", nil)
	h.Handle(ctx, wire(t, recent), 0)
	resync := signed(t, clock, "bob", "resync", func(c *Command) { c.From = 2 })
	h.Handle(ctx, wire(t, resync), 0)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(30 * time.Second)
	rec = openRecorder(t, path, clock)
	defer rec.Close()
	v := newTestVerifier(t, clock)
	n, err := v.Restore(ctx, rec.Store())
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("restored %d ids, want 2 (the old one is beyond two windows)", n)
	}
	for _, c := range []Command{recent, resync} {
		_, err := v.Verify(wire(t, c))
		var r *Refusal
		if !errors.As(err, &r) || r.Code != CodeReplayed {
			t.Fatalf("%s after restart: %v", c.Action, err)
		}
	}
}

// trimmedTrail is a trail whose rows before from are gone, as retention
// leaves a directory trail whose oldest segments were deleted.
type trimmedTrail struct {
	Trail
	from int64
}

func (tr trimmedTrail) Events(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error] {
	q.From = max(q.From, tr.from)
	if q.To > 0 && q.To < tr.from {
		return func(func(audit.Record, error) bool) {}
	}
	return tr.Trail.Events(ctx, q)
}

// TestRestoreTrimmedTrail: the ids are read back from a trail whose oldest
// rows were deleted, wherever the first row kept falls (past half the head
// too, where a search from row 1 asks for a row that is gone).
func TestRestoreTrimmedTrail(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	rec := openRecorder(t, filepath.Join(t.TempDir(), "trail.db"), clock)
	defer rec.Close()
	h := &Handler{Verifier: newTestVerifier(t, clock), Recorder: rec, Clock: clock, Logger: quiet()}
	for i := 0; i < 100; i++ {
		clock.Advance(10 * time.Second)
		if _, err := rec.Submit(ctx, coup.Input{Kind: coup.InStatus, Status: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	recent := signed(t, clock, "alice", "suspend", nil)
	h.Handle(ctx, wire(t, recent), 0)
	head := rec.Store().Head().Seq
	for _, from := range []int64{1, 2, head / 3, head/2 + 1, head - 20, head} {
		v := newTestVerifier(t, clock)
		n, err := v.Restore(ctx, trimmedTrail{Trail: rec.Store(), from: from})
		if err != nil {
			t.Fatalf("rows from %d of %d: %v", from, head, err)
		}
		_, verr := v.Verify(wire(t, recent))
		var r *Refusal
		if recentKept := from <= head-1; recentKept && (n != 1 || !errors.As(verr, &r) || r.Code != CodeReplayed) {
			t.Fatalf("rows from %d of %d: restored %d ids, the recent command: %v", from, head, n, verr)
		}
	}
}
