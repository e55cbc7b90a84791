package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattn/go-sqlite3"
)

// TestDiskFull fills a real trail file up to PRAGMA max_page_count (SQLite
// then fails the write with SQLITE_FULL, as on a full disk), checks the
// failure is reported and changes nothing, then raises the limit, as an
// operator freeing space would, and checks the chain goes on with no gap.
func TestDiskFull(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Key: testKey(), CheckpointEvery: 7})
	defer s.Close()
	appendAll(t, s, sampleEvents(5))

	var pages int64
	if err := s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages+2)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("burn card ", 200) // ~2 KB a row: a few pages fill up fast
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		before := s.Head()
		_, err := s.Append(ctx, Event{Kind: "card", Shoe: 1, Coup: 2, Body: map[string]string{"note": big}})
		if err != nil {
			full = err
			if got := s.Head(); got != before {
				t.Fatalf("head moved from %+v to %+v on a failed append", before, got)
			}
		}
	}
	if full == nil {
		t.Fatal("1000 appends past max_page_count all succeeded")
	}
	t.Logf("full: %v", full)
	if !errors.Is(full, ErrWriteFailed) || !errors.Is(full, ErrDiskFull) || errors.Is(full, ErrReadOnly) {
		t.Fatalf("append on a full trail = %v, want ErrWriteFailed and ErrDiskFull", full)
	}
	var se sqlite3.Error
	if !errors.As(full, &se) || se.Code != sqlite3.ErrFull {
		t.Fatalf("append on a full trail = %v, want SQLITE_FULL underneath", full)
	}
	var we *WriteError
	if !errors.As(full, &we) || we.Seq != s.Head().Seq+1 {
		t.Fatalf("WriteError %+v should name seq %d", we, s.Head().Seq+1)
	}
	stuck := s.Head()
	// Still full: a retry fails the same way and still moves nothing.
	if _, err := s.Append(ctx, Event{Kind: "card", Body: big}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("retry on a full trail = %v", err)
	}
	// The file as it stands verifies: nothing half-written.
	requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))

	if _, err := s.w.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	r, err := s.Append(ctx, Event{Kind: "card", Shoe: 1, Coup: 2, Body: map[string]string{"card": "QS"}})
	if err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	if r.Seq != stuck.Seq+1 || r.PrevHash != stuck.Hash {
		t.Fatalf("append after space was freed: seq %d prev %s, want %d and %s", r.Seq, r.PrevHash, stuck.Seq+1, stuck.Hash)
	}
	appendAll(t, s, sampleEvents(10))
	if _, err := s.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
	requireClean(t, rep)
	if rep.Events != s.Head().Seq {
		t.Fatalf("verify read %d rows, head is %d", rep.Events, s.Head().Seq)
	}
}

// TestReadOnlyAtOpen opens an existing trail through a read-only SQLite
// connection (mode=ro). As root, chmod 0444 stops nothing, and a read-only
// mount needs privileges a test does not have; mode=ro is what SQLite
// itself falls back to when the OS refuses write access, so the write path
// meets the same SQLITE_READONLY either way.
func TestReadOnlyAtOpen(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1"})
	recs := appendAll(t, s, sampleEvents(3))
	s.Close()

	_, err := Open(ctx, path, Options{Table: "T1", Logger: quietLogger(), readOnly: true})
	t.Logf("read-only open: %v", err)
	if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Open of a read-only trail = %v, want ErrWriteFailed and ErrReadOnly", err)
	}
	// The trail can still be read to rebuild state.
	r, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := r.Head(ctx); err != nil || h.Hash != recs[2].Hash {
		t.Fatalf("Head of the read-only trail = %+v, %v", h, err)
	}
	r.Close()
	// Once writable again, the chain goes on.
	s2 := openAt(t, path, Options{Table: "T1"})
	defer s2.Close()
	rec, err := s2.Append(ctx, Event{Kind: "card"})
	if err != nil || rec.Seq != 4 || rec.PrevHash != recs[2].Hash {
		t.Fatalf("append after reopening writable: %+v, %v", rec, err)
	}
}

// TestReadOnlyWhileRunning turns the writer's connection read-only under a
// running store (PRAGMA query_only makes every write fail with
// SQLITE_READONLY, as a filesystem remounted read-only does), then back.
func TestReadOnlyWhileRunning(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t, Options{Key: testKey(), CheckpointEvery: 2})
	defer s.Close()
	appendAll(t, s, sampleEvents(3))
	before := s.Head()
	if _, err := s.w.ExecContext(ctx, "PRAGMA query_only = ON"); err != nil {
		t.Fatal(err)
	}
	// The next append would also write a checkpoint (4 - 2 >= 2): both fail.
	_, err := s.Append(ctx, Event{Kind: "card"})
	t.Logf("read-only append: %v", err)
	if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append to a read-only trail = %v, want ErrWriteFailed and ErrReadOnly", err)
	}
	if _, err := s.Checkpoint(ctx); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("checkpoint of a read-only trail = %v", err)
	}
	if s.Head() != before {
		t.Fatalf("head moved to %+v", s.Head())
	}
	if _, err := s.w.ExecContext(ctx, "PRAGMA query_only = OFF"); err != nil {
		t.Fatal(err)
	}
	r, err := s.Append(ctx, Event{Kind: "card"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != before.Seq+1 || r.PrevHash != before.Hash || r.Checkpoint == nil {
		t.Fatalf("append after recovery: %+v, want seq %d linked to %s with a checkpoint", r, before.Seq+1, before.Hash)
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))
}

// TestHeadMovedUnderneath covers the file's head moving past the store's
// own: rows of a commit that reported failure but reached the file are the
// store's and stand; rows it did not write make it refuse every further
// write and sign nothing over them.
func TestHeadMovedUnderneath(t *testing.T) {
	ctx := context.Background()
	t.Run("own commit that reported failure", func(t *testing.T) {
		s, path := openTest(t, Options{Key: testKey(), CheckpointEvery: 1})
		defer s.Close()
		recs := appendAll(t, s, sampleEvents(3))
		// The lost acknowledgement: the store believes rows 2-3 failed.
		s.mu.Lock()
		s.head, s.attempt = Head{Seq: 1, Hash: recs[0].Hash}, recs[1:]
		s.mu.Unlock()
		r, err := s.Append(ctx, Event{Kind: "card"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq != 4 {
			t.Fatalf("append after a lost acknowledgement took seq %d, want 4", r.Seq)
		}
		requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))
	})
	// Rows appended by another program (the sqlite3 shell on the live
	// trail: next seq, linked, correct hash, triggers untouched), whatever
	// the store last tried and failed to commit.
	for name, attempt := range map[string]func(Record) []Record{
		"no failed commit":               func(Record) []Record { return nil },
		"a failed commit of other rows":  func(Record) []Record { return []Record{{Seq: 4, Hash: Hash{1}}} },
		"a failed commit at another seq": func(r Record) []Record { return []Record{{Seq: 5, Hash: r.Hash}} },
	} {
		t.Run("foreign rows, "+name, func(t *testing.T) {
			s, path := openTest(t, Options{Key: testKey(), CheckpointEvery: 1})
			recs := appendAll(t, s, sampleEvents(3))
			forged := forgeRow(t, path, recs[2], "coup_voided", `{"by":"mallory"}`)
			s.mu.Lock()
			s.attempt = attempt(forged)
			s.mu.Unlock()
			for range 2 { // sticky
				_, err := s.Append(ctx, Event{Kind: "card"})
				var te *TamperError
				if !errors.Is(err, ErrTampered) || !errors.Is(err, ErrWriteFailed) || !errors.As(err, &te) {
					t.Fatalf("append over a foreign row: %v, want a TamperError", err)
				}
				if te.From != 4 || te.To != 4 || !slices.Equal(te.Kinds, []string{"coup_voided"}) {
					t.Fatalf("tamper error names rows %d-%d %v, want 4-4 [coup_voided]", te.From, te.To, te.Kinds)
				}
			}
			if _, err := s.Checkpoint(ctx); !errors.Is(err, ErrTampered) {
				t.Fatalf("checkpoint over a foreign row: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Never signed over, so verify names it.
			rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
			if got := findingSet(rep.Findings); !slices.Equal(got, []string{"unsigned_rows@4"}) {
				t.Fatalf("findings %v, want unsigned_rows@4", got)
			}
		})
	}
}

// forgeRow appends a row after prev with the sqlite3 shell, as an insider
// would: the next seq, linked to prev, with a correct hash.
func forgeRow(t *testing.T, path string, prev Record, kind, body string) Record {
	t.Helper()
	at := formatTime(prev.At.Add(time.Second))
	r := Record{Seq: prev.Seq + 1, Kind: kind, Body: []byte(body), PrevHash: prev.Hash}
	r.Hash = rowHash(r.Seq, at, kind, prev.Shoe, prev.Coup, r.Body, r.PrevHash)
	sqlite3Shell(t, path, fmt.Sprintf(`INSERT INTO events (seq, at, kind, shoe, coup, body, prev_hash, hash) VALUES (%d, '%s', '%s', %d, %d, '%s', '%s', '%s');`,
		r.Seq, at, kind, prev.Shoe, prev.Coup, body, r.PrevHash, r.Hash))
	return r
}

func TestWriteErrorClassification(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		cause error
	}{
		{"full", sqlite3.Error{Code: sqlite3.ErrFull}, ErrDiskFull},
		{"read-only", sqlite3.Error{Code: sqlite3.ErrReadonly, ExtendedCode: sqlite3.ErrReadonlyDbMoved}, ErrReadOnly},
		{"fsync", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrFsync}, ErrIO},
		{"write", fmt.Errorf("commit: %w", sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite}), ErrIO},
		{"busy", sqlite3.Error{Code: sqlite3.ErrBusy}, nil},
		{"other", errors.New("connection gone"), nil},
	}
	causes := []error{ErrDiskFull, ErrReadOnly, ErrIO}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := error(&WriteError{Op: "commit", Seq: 9, Err: tt.err})
			if !errors.Is(err, ErrWriteFailed) {
				t.Fatalf("%v is not ErrWriteFailed", err)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("%v does not wrap %v", err, tt.err)
			}
			for _, c := range causes {
				if errors.Is(err, c) != (c == tt.cause) {
					t.Errorf("errors.Is(%v, %v) = %v", err, c, errors.Is(err, c))
				}
			}
			if !strings.Contains(err.Error(), "seq 9") {
				t.Errorf("%q does not name the seq", err)
			}
		})
	}
}
