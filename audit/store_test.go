package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
)

func TestAppendReadRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1"})
	evs := sampleEvents(20)
	recs := appendAll(t, s, evs)

	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d: seq %d, want %d", i, r.Seq, i+1)
		}
		if i == 0 && r.PrevHash != (Hash{}) {
			t.Errorf("row 1 prev_hash %s, want zeros", r.PrevHash)
		}
		if i > 0 && r.PrevHash != recs[i-1].Hash {
			t.Errorf("row %d prev_hash %s, want row %d's hash %s", r.Seq, r.PrevHash, i, recs[i-1].Hash)
		}
		if r.At.Location() != time.UTC {
			t.Errorf("row %d time zone %v, want UTC", r.Seq, r.At.Location())
		}
	}
	if h := s.Head(); h.Seq != 20 || h.Hash != recs[19].Hash {
		t.Fatalf("Head = %+v, want seq 20 hash %s", h, recs[19].Hash)
	}

	got := readAll(t, s.Events(ctx, Query{}))
	if len(got) != len(recs) {
		t.Fatalf("read %d rows, appended %d", len(got), len(recs))
	}
	for i := range got {
		want := recs[i]
		if !got[i].At.Equal(want.At) || got[i].Seq != want.Seq || got[i].Kind != want.Kind ||
			got[i].Shoe != want.Shoe || got[i].Coup != want.Coup || !bytes.Equal(got[i].Body, want.Body) ||
			got[i].Hash != want.Hash || got[i].PrevHash != want.PrevHash {
			t.Errorf("row %d read back as %+v, appended %+v", i+1, got[i], want)
		}
		if got[i].ComputeHash() != got[i].Hash {
			t.Errorf("row %d: ComputeHash %s, stored %s", i+1, got[i].ComputeHash(), got[i].Hash)
		}
		// The body decodes to what was appended.
		var a, b any
		wantRaw, _ := json.Marshal(evs[i].Body)
		json.Unmarshal(got[i].Body, &a)
		json.Unmarshal(wantRaw, &b)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("row %d body %s, appended %s", i+1, got[i].Body, wantRaw)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopen: the head and the table id come back from the file.
	s2 := openAt(t, path, Options{})
	defer s2.Close()
	if h := s2.Head(); h.Seq != 20 || h.Hash != recs[19].Hash {
		t.Fatalf("after reopen Head = %+v, want seq 20", h)
	}
	if s2.Table() != "T1" {
		t.Fatalf("after reopen Table = %q, want T1", s2.Table())
	}
	r, err := s2.Append(ctx, Event{Kind: "shoe_end", Shoe: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 21 || r.PrevHash != recs[19].Hash {
		t.Fatalf("append after reopen: seq %d prev %s, want 21 and %s", r.Seq, r.PrevHash, recs[19].Hash)
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{}))
}

func TestQueryFilters(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	defer s.Close()
	var evs []Event
	for shoe := int64(1); shoe <= 3; shoe++ {
		for coup := int64(1); coup <= 4; coup++ {
			evs = append(evs, Event{Kind: "card", Shoe: shoe, Coup: coup, Body: []int64{shoe, coup}})
			evs = append(evs, Event{Kind: "coup_result", Shoe: shoe, Coup: coup, Body: nil})
		}
	}
	evs = append(evs, Event{Kind: "suspend", Body: map[string]string{"reason": "lid open"}})
	appendAll(t, s, evs)

	seqs := func(q Query) []int64 {
		var out []int64
		for _, r := range readAll(t, s.Events(ctx, q)) {
			out = append(out, r.Seq)
		}
		return out
	}
	tests := []struct {
		name string
		q    Query
		want []int64
	}{
		{"all", Query{}, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25}},
		{"from", Query{From: 23}, []int64{23, 24, 25}},
		{"from to", Query{From: 3, To: 5}, []int64{3, 4, 5}},
		{"shoe", Query{Shoe: 2}, []int64{9, 10, 11, 12, 13, 14, 15, 16}},
		{"shoe coup", Query{Shoe: 2, Coup: 3}, []int64{13, 14}},
		{"coup in every shoe", Query{Coup: 4}, []int64{7, 8, 15, 16, 23, 24}},
		{"kind", Query{Shoe: 3, Kinds: []string{"coup_result"}}, []int64{18, 20, 22, 24}},
		{"kinds", Query{From: 24, Kinds: []string{"suspend", "coup_result"}}, []int64{24, 25}},
		{"past the head", Query{From: 26}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := seqs(tt.q); !slices.Equal(got, tt.want) {
				t.Errorf("seqs = %v, want %v", got, tt.want)
			}
		})
	}

	// Breaking out of the iteration releases the rows: a later append works.
	for range s.Events(ctx, Query{}) {
		break
	}
	if _, err := s.Append(ctx, Event{Kind: "resume"}); err != nil {
		t.Fatal(err)
	}
}

func TestAppendBatch(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Key: testKey(), CheckpointEvery: 10})
	recs, err := s.AppendBatch(ctx, sampleEvents(25))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 25 || recs[24].Seq != 25 {
		t.Fatalf("batch gave %d records ending at %d", len(recs), recs[24].Seq)
	}
	// One checkpoint per batch, after its last row.
	if recs[24].Checkpoint == nil || recs[24].Checkpoint.Seq != 25 {
		t.Fatalf("batch checkpoint %+v, want one at seq 25", recs[24].Checkpoint)
	}
	// A bad event anywhere refuses the whole batch.
	_, err = s.AppendBatch(ctx, []Event{{Kind: "card"}, {Kind: "BAD"}})
	if !errors.Is(err, ErrInvalidEvent) {
		t.Fatalf("batch with a bad kind: %v, want ErrInvalidEvent", err)
	}
	if s.Head().Seq != 25 {
		t.Fatalf("head moved to %d after a refused batch", s.Head().Seq)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))
}

func TestInvalidEvents(t *testing.T) {
	s, _ := openTest(t, Options{})
	defer s.Close()
	tests := []struct {
		name string
		e    Event
	}{
		{"empty kind", Event{Kind: ""}},
		{"upper case kind", Event{Kind: "Card"}},
		{"space in kind", Event{Kind: "coup result"}},
		{"long kind", Event{Kind: strings.Repeat("k", 65)}},
		{"negative shoe", Event{Kind: "card", Shoe: -1}},
		{"negative coup", Event{Kind: "card", Coup: -2}},
		{"body not JSON", Event{Kind: "card", Body: func() {}}},
		{"raw body not JSON", Event{Kind: "card", Body: json.RawMessage(`{"a":`)}},
		{"duplicate key", Event{Kind: "card", Body: json.RawMessage(`{"a":1,"a":2}`)}},
		{"body too big", Event{Kind: "card", Body: strings.Repeat("x", MaxBodyBytes)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Append(context.Background(), tt.e)
			if !errors.Is(err, ErrInvalidEvent) || errors.Is(err, ErrWriteFailed) {
				t.Fatalf("Append = %v, want ErrInvalidEvent only", err)
			}
		})
	}
	if s.Head().Seq != 0 {
		t.Fatalf("head moved to %d on refused events", s.Head().Seq)
	}
	// A cancelled context is refused before anything is written.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Append(ctx, Event{Kind: "card"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with cancelled ctx = %v", err)
	}
	if s.Head().Seq != 0 {
		t.Fatal("head moved on a cancelled append")
	}
}

func TestPragmas(t *testing.T) {
	s, _ := openTest(t, Options{})
	defer s.Close()
	ctx := context.Background()
	var mode string
	var sync, version int
	if err := s.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if err := s.w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 2 || version != schemaVersion {
		t.Fatalf("journal_mode %q synchronous %d user_version %d; want wal, 2 (FULL), %d", mode, sync, version, schemaVersion)
	}
}

func TestTriggersRefuseChanges(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 3})
	defer s.Close()
	appendAll(t, s, sampleEvents(6))
	h := s.Head()
	tests := []struct {
		name, sql string
	}{
		{"update event body", `UPDATE events SET body = '{"card":"AS"}' WHERE seq = 2`},
		{"update event hash", `UPDATE events SET hash = prev_hash WHERE seq = 6`},
		{"delete event", `DELETE FROM events WHERE seq = 6`},
		{"delete all events", `DELETE FROM events`},
		{"replace event", `INSERT OR REPLACE INTO events SELECT * FROM events WHERE seq = 3`},
		{"insert with a gap", fmt.Sprintf(`INSERT INTO events VALUES (8, 'x', 'card', 1, 1, '{}', '%s', '%s')`, h.Hash, h.Hash)},
		{"insert with a wrong link", fmt.Sprintf(`INSERT INTO events VALUES (7, 'x', 'card', 1, 1, '{}', '%s', '%s')`, zeroHashHex, h.Hash)},
		{"update checkpoint", `UPDATE checkpoints SET signature = '00' WHERE seq = 3`},
		{"delete checkpoint", `DELETE FROM checkpoints`},
		{"replace checkpoint", `INSERT OR REPLACE INTO checkpoints SELECT * FROM checkpoints WHERE seq = 3`},
		{"checkpoint of a wrong hash", fmt.Sprintf(`INSERT INTO checkpoints VALUES (5, '%s', 'x', 'x', 'x')`, h.Hash)},
		{"update table id", `UPDATE meta SET value = 'T2'`},
		{"replace table id", `INSERT OR REPLACE INTO meta VALUES ('table', 'T2')`},
		{"delete table id", `DELETE FROM meta`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.w.ExecContext(ctx, tt.sql)
			var se sqlite3.Error
			if !errors.As(err, &se) || se.Code != sqlite3.ErrConstraint || !strings.Contains(err.Error(), "audit: ") {
				t.Fatalf("%s: err = %v, want a trigger's constraint error", tt.sql, err)
			}
		})
	}
	if got := s.Head(); got != h {
		t.Fatalf("head moved to %+v", got)
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))
}

func TestSecondWriterLocked(t *testing.T) {
	s, path := openTest(t, Options{})
	_, err := Open(context.Background(), path, Options{Logger: quietLogger()})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	// Readers are not writers: they open beside the store.
	r, err := OpenReader(context.Background(), path)
	if err != nil {
		t.Fatalf("OpenReader beside the store: %v", err)
	}
	r.Close()
	s.Close()
	s2 := openAt(t, path, Options{})
	s2.Close()
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, filepath.Join(dir, "t1.db"), Options{Table: "T1"})
	s.Close()
	if _, err := Open(ctx, filepath.Join(dir, "t1.db"), Options{Table: "T2", Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), `belongs to table "T1"`) {
		t.Errorf("opening T1's trail as T2: %v", err)
	}
	if _, err := Open(ctx, filepath.Join(dir, "bad.db"), Options{Table: "T 1"}); err == nil {
		t.Error("table id with a space accepted")
	}
	if _, err := Open(ctx, filepath.Join(dir, "bad.db"), Options{Key: testKey()[:10]}); err == nil {
		t.Error("short key accepted")
	}
	if _, err := Open(ctx, filepath.Join(dir, "bad.db"), Options{CheckpointEvery: -1}); err == nil {
		t.Error("negative checkpoint interval accepted")
	}
	// A SQLite file of something else is not a trail.
	other := filepath.Join(dir, "other.db")
	db := openRaw(t, other)
	if _, err := db.Exec(`CREATE TABLE bets (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(ctx, other, Options{Logger: quietLogger()}); err == nil || !strings.Contains(err.Error(), "not an audit trail") {
		t.Errorf("Open of another database: %v", err)
	}
	if _, err := OpenReader(ctx, other); err == nil || !strings.Contains(err.Error(), "not an audit trail") {
		t.Errorf("OpenReader of another database: %v", err)
	}
	if _, err := OpenReader(ctx, filepath.Join(dir, "missing.db")); err == nil {
		t.Error("OpenReader of a missing file succeeded")
	}
}

func TestCheckpoints(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T9", Key: testKey(), CheckpointEvery: 4})
	recs := appendAll(t, s, sampleEvents(10))
	for _, r := range recs {
		wantCP := r.Seq == 4 || r.Seq == 8
		if (r.Checkpoint != nil) != wantCP {
			t.Fatalf("row %d checkpoint %+v, want one: %v", r.Seq, r.Checkpoint, wantCP)
		}
		if wantCP {
			c := r.Checkpoint
			if c.Seq != r.Seq || c.HeadHash != r.Hash || c.Table != "T9" || c.KeyID != KeyID(testPub()) {
				t.Fatalf("checkpoint %+v does not name row %d hash %s", c, r.Seq, r.Hash)
			}
			if err := c.VerifySignature(testPub()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// An explicit checkpoint of the head, then again: the same one.
	c1, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Seq != 10 || !bytes.Equal(c1.Signature, c2.Signature) || !c1.SignedAt.Equal(c2.SignedAt) {
		t.Fatalf("repeated checkpoint of the head: %+v then %+v", c1, c2)
	}
	appendAll(t, s, sampleEvents(1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, Event{Kind: "card"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v", err)
	}
	r, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cps, err := r.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, c := range cps {
		seqs = append(seqs, c.Seq)
		if c.Table != "T9" {
			t.Errorf("stored checkpoint of table %q", c.Table)
		}
	}
	// Every 4, the explicit one at 10, and Close's at 11.
	if !slices.Equal(seqs, []int64{4, 8, 10, 11}) {
		t.Fatalf("stored checkpoints at %v, want [4 8 10 11]", seqs)
	}
	last, ok, err := r.LastCheckpoint(ctx)
	if err != nil || !ok || last.Seq != 11 {
		t.Fatalf("LastCheckpoint = %+v %v %v", last, ok, err)
	}
	rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}, Checkpoints: []Checkpoint{last}})
	requireClean(t, rep)
	if rep.Checkpoints != 5 || !rep.SignaturesChecked {
		t.Fatalf("report checked %d checkpoints, signatures %v; want 5, true", rep.Checkpoints, rep.SignaturesChecked)
	}
}

func TestCheckpointErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	if _, err := s.Checkpoint(ctx); !errors.Is(err, ErrNoKey) {
		t.Errorf("Checkpoint without key = %v", err)
	}
	s.Close()
	s2, _ := openTest(t, Options{Key: testKey()})
	if _, err := s2.Checkpoint(ctx); !errors.Is(err, ErrEmptyTrail) {
		t.Errorf("Checkpoint of an empty trail = %v", err)
	}
	// Close of an empty trail writes nothing and succeeds.
	if err := s2.Close(); err != nil {
		t.Errorf("Close of an empty trail: %v", err)
	}
	if err := s2.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v", err)
	}
}

func TestExport(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t, Options{})
	defer s.Close()
	recs := appendAll(t, s, sampleEvents(12))
	var buf bytes.Buffer
	n, err := s.Export(ctx, &buf, Query{From: 5})
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Fatalf("exported %d rows, want 8", n)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 8 {
		t.Fatalf("%d lines, want 8", len(lines))
	}
	for i, line := range lines {
		var r Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		want := recs[i+4]
		// The exported body is the stored bytes, so the hash recomputes
		// from the line alone.
		if !bytes.Equal(r.Body, want.Body) || r.ComputeHash() != want.Hash || r.Hash != want.Hash {
			t.Fatalf("line %d: %s\ndoes not recompute to row %d's hash %s", i, line, want.Seq, want.Hash)
		}
	}
	if !strings.Contains(buf.String(), `"note":"<natural> & \"tab\"\t`+"\u2028") {
		t.Errorf("export escaped the body: %s", lines[1])
	}
}
