package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit/internal/sqlitebatch"
)

// smallRanges makes scanTrail cut a test-sized trail into many ranges and
// batches, so that ranges alternate between the two readers.
func smallRanges(t *testing.T) {
	oldRange, oldBatch := scanRange, scanBatchRows
	scanRange, scanBatchRows = 500, 37
	t.Cleanup(func() { scanRange, scanBatchRows = oldRange, oldBatch })
}

// TestVerifyFastMatchesReference holds the fast read (ranges on two
// connections, rows prepared on the readers) to the simplest one (every row
// through database/sql on one goroutine, checked value by value): on a
// clean trail and on trails edited in each way the sqlite3 shell allows
// once the triggers are dropped, and on one whose table was rebuilt
// without STRICT so values of any type can be stored (which Verify reads
// the reference way; the fast path is forced on it here), both give the
// same report, with two cores and with one, and with sqlitebatch's
// fallback (the driver read through its API) taking over.
func TestVerifyFastMatchesReference(t *testing.T) {
	smallRanges(t)
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 7})
	for range 30 { // 9,000 rows: 18 ranges
		if _, err := s.AppendBatch(ctx, sampleEvents(300)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	const loosen = `ALTER TABLE events RENAME TO old; CREATE TABLE events (seq INTEGER PRIMARY KEY, at, kind, shoe, coup, body, prev_hash, hash);
INSERT INTO events SELECT * FROM old; DROP TABLE old;`
	edits := map[string]string{
		"clean":              ``,
		"body":               `UPDATE events SET body = replace(body, '"', ' "') WHERE seq = 5000`,
		"deleted":            `DELETE FROM events WHERE seq = 4097`,
		"deleted at a range": `DELETE FROM events WHERE seq BETWEEN 1000 AND 1501`,
		"deleted first":      `DELETE FROM events WHERE seq = 1`,
		"deleted last":       `DELETE FROM events WHERE seq > 8990`,
		"at":                 `UPDATE events SET at = '2025-03-14T15:09:26.500Z' WHERE seq = 9`,
		"at not a time":      `UPDATE events SET at = 'noon' WHERE seq = 501`,
		"hash":               `UPDATE events SET hash = 'zz' || substr(hash, 3) WHERE seq = 8191`,
		"prev_hash short":    `UPDATE events SET prev_hash = substr(prev_hash, 3) WHERE seq = 1000`,
		"nul body":           `UPDATE events SET body = body || char(0) || 'x' WHERE seq = 13`,
		"kind":               `UPDATE events SET kind = 'void' WHERE seq = 777`,
		"rows swapped":       loosen + `UPDATE events SET seq = -seq WHERE seq IN (2000, 2001); UPDATE events SET seq = 2001 WHERE seq = -2000; UPDATE events SET seq = 2000 WHERE seq = -2001`,
		"seq far off":        `UPDATE events SET seq = 9000000000000000000 WHERE seq = 6000`,
		"seq negative":       loosen + `UPDATE events SET seq = -9000000000000000000 WHERE seq = 1`,
		"loose body blob":    loosen + `UPDATE events SET body = CAST(body AS BLOB) WHERE seq = 600`,
		"loose shoe text":    loosen + `UPDATE events SET shoe = 'one' WHERE seq = 4`,
		"loose coup real":    loosen + `UPDATE events SET coup = 1.5 WHERE seq = 3333`,
		"loose at integer":   loosen + `UPDATE events SET at = 12 WHERE seq = 1499`,
		"loose hash null":    loosen + `UPDATE events SET hash = NULL WHERE seq = 1500`,
		"loose prev blob":    loosen + `UPDATE events SET prev_hash = CAST(prev_hash AS BLOB) WHERE seq = 1502`,
		"loose many":         loosen + `UPDATE events SET kind = 7 WHERE seq % 97 = 0`,
	}
	for name, edit := range edits {
		p := copyTrail(t, path)
		if edit != "" {
			db := openRaw(t, p)
			for _, tr := range []string{"events_no_update", "events_no_delete"} {
				if _, err := db.Exec(`DROP TRIGGER ` + tr); err != nil {
					t.Fatal(err)
				}
			}
			for _, stmt := range strings.Split(edit, ";") {
				if strings.TrimSpace(stmt) == "" {
					continue
				}
				if _, err := db.Exec(stmt); err != nil {
					t.Fatalf("%s: %s: %v", name, stmt, err)
				}
			}
			db.Close()
		}
		opt := VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}
		scanReference = true
		ref, err := Verify(ctx, p, opt)
		scanReference = false
		if err != nil {
			t.Fatal(err)
		}
		if (name == "clean") == ref.Tampered() {
			t.Errorf("%s: tampered %v: %+v", name, ref.Tampered(), ref.Findings)
		}
		for _, run := range []struct {
			procs int
			plain bool // sqlitebatch's fallback, as when the driver changes shape
		}{{2, false}, {1, false}, {2, true}} {
			old := runtime.GOMAXPROCS(run.procs)
			restore := func() {}
			if run.plain {
				restore = sqlitebatch.ForcePlain()
			}
			// Forced: Verify reads a table rebuilt without STRICT the
			// reference way, but the fast path must cope with any values.
			scanForceRanges = true
			fast, err := Verify(ctx, p, opt)
			scanForceRanges = false
			restore()
			runtime.GOMAXPROCS(old)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fast, ref) {
				t.Errorf("%s, %d cores, sqlitebatch's fallback %v: fast found\n%s\nthe reference found\n%s", name, run.procs, run.plain, reportText(fast), reportText(ref))
			}
		}
	}
}

// TestVerifySnapshotProof: the second connection reads only when it sees
// the first one's snapshot. A row committed between the two snapshots
// makes the first read alone, and the report is of the first snapshot.
func TestVerifySnapshotProof(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one core: verify reads on one connection")
	}
	smallRanges(t)
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 1})
	if _, err := s.AppendBatch(ctx, sampleEvents(3000)); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	for _, commit := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit between %v", commit), func(t *testing.T) {
			before := s.Head().Seq
			first, err := r.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			var tx *sql.Tx
			scanPinHook = func() {
				if commit {
					if _, err := s.Append(ctx, sampleEvents(1)[0]); err != nil {
						t.Error(err)
					}
				}
			}
			second, secondTx, err := snapshotConns(ctx, r.db, first, func() error {
				var err error
				if tx, err = first.BeginTx(ctx, nil); err != nil {
					return err
				}
				var n int64
				return tx.QueryRow(`SELECT count(*) FROM events`).Scan(&n)
			})
			scanPinHook = nil
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if commit != (second == nil) {
				t.Fatalf("a commit between the snapshots %v, a second connection %v", commit, second != nil)
			}
			conns := []*sql.Conn{first}
			if second != nil {
				defer second.Close()
				defer secondTx.Rollback()
				conns = append(conns, second)
				// What the second sees is what the first sees.
				var a, b int64
				if err := tx.QueryRow(`SELECT max(seq) FROM events`).Scan(&a); err != nil {
					t.Fatal(err)
				}
				if err := secondTx.QueryRow(`SELECT max(seq) FROM events`).Scan(&b); err != nil {
					t.Fatal(err)
				}
				if a != b || a != before {
					t.Fatalf("the first sees seq %d, the second %d, the store wrote %d", a, b, before)
				}
			}
			var seen, last int64
			if err := scanTrail(ctx, tx, conns, func(row *scanRow) {
				seen++
				if row.seq != last+1 {
					t.Errorf("seq %d after %d", row.seq, last)
				}
				last = row.seq
			}); err != nil {
				t.Fatal(err)
			}
			if seen != before {
				t.Errorf("%d rows read, %d in the first snapshot", seen, before)
			}
		})
	}

	// And through Verify: a commit in that instant leaves a clean report
	// of the rows before it.
	before := s.Head().Seq
	scanPinHook = func() {
		if _, err := s.Append(ctx, sampleEvents(1)[0]); err != nil {
			t.Error(err)
		}
	}
	rep, err := r.Verify(ctx, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
	scanPinHook = nil
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, rep)
	if rep.Events != before {
		t.Errorf("%d rows verified, %d before the commit", rep.Events, before)
	}
}

// TestVerifyCancelled: a cancelled verify returns the context's error and
// leaves no reader behind (the reader's connections close).
func TestVerifyCancelled(t *testing.T) {
	smallRanges(t)
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 50})
	if _, err := s.AppendBatch(context.Background(), sampleEvents(5000)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	r, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cancel()
	if _, err := r.Verify(ctx, VerifyOptions{}); err == nil {
		t.Fatal("a cancelled verify succeeded")
	}
	if n := r.db.Stats().InUse; n != 0 {
		t.Errorf("%d connections still in use", n)
	}
}

// FuzzPrepareRow: a row's values come from a file that may be hostile;
// whatever they are, prepareRow agrees with the plain functions (ParseHash,
// parseTime, rowHash) and never panics.
func FuzzPrepareRow(f *testing.F) {
	h := Hash{1, 2, 3}.String()
	f.Add(int64(1), "2026-11-25T15:58:00.123Z", "card", int64(1), int64(2), `{"card":"KH"}`, zeroHashHex, h)
	f.Add(int64(-5), "2026-11-25T15:58:00.120Z", "", int64(-1), int64(0), "", h, "zz"+h[2:])
	f.Add(int64(7), "2026-11-25T16:58:00+01:00", "k", int64(0), int64(0), "\x00", h, h)
	f.Add(int64(7), "2026-11-25T15:58:00Z", "k", int64(0), int64(0), "{}", strings.ToUpper(h), h)
	f.Fuzz(func(t *testing.T, seq int64, at, kind string, shoe, coup int64, body, prev, hash string) {
		// Twice with one scratch space, the second time with the first's
		// hash as prev_hash and the same time, as for the next row of a
		// commit; and once more with the texts swapped.
		var sc prepScratch
		checkPrepared(t, prepareRow(&sc, seq, at, kind, shoe, coup, body, prev, hash), seq, at, kind, shoe, coup, body, prev, hash)
		checkPrepared(t, prepareRow(&sc, seq, at, kind, shoe, coup, body, hash, prev), seq, at, kind, shoe, coup, body, hash, prev)
		checkPrepared(t, prepareRow(&sc, seq, at, kind, shoe, coup, body, prev, hash), seq, at, kind, shoe, coup, body, prev, hash)
	})
}

// checkPrepared compares prepareRow's result with the plain functions'.
func checkPrepared(t *testing.T, p preparedRow, seq int64, at, kind string, shoe, coup int64, body, prev, hash string) {
	t.Helper()
	wantPrev, errPrev := ParseHash(prev)
	wantHash, errHash := ParseHash(hash)
	if (errPrev == nil) != (p.errPrev == nil) || (errHash == nil) != (p.errHash == nil) || p.prev != wantPrev || p.hash != wantHash {
		t.Fatalf("hashes %v %v %v %v, want %v %v %v %v", p.prev, p.errPrev, p.hash, p.errHash, wantPrev, errPrev, wantHash, errHash)
	}
	if errPrev != nil || errHash != nil {
		return
	}
	_, errAt := parseTime(at)
	if p.canonAt != (errAt == nil) {
		t.Fatalf("at %q: canonical %v, parseTime says %v", at, p.canonAt, errAt)
	}
	if want := rowHash(seq, at, kind, shoe, coup, []byte(body), wantPrev); p.want != want {
		t.Fatalf("hash %s, rowHash %s", p.want, want)
	}
}

// TestCanonicalTime: the stored form and nothing else, like parseTime.
func TestCanonicalTime(t *testing.T) {
	now := time.Date(2026, 11, 25, 15, 58, 0, 120_000_000, time.UTC)
	for s, want := range map[string]bool{
		formatTime(now):                  true,
		"2026-11-25T15:58:00.12Z":        true,
		"2026-11-25T15:58:00.120Z":       false,
		"2026-11-25T16:58:00.12+01:00":   false,
		"2026-11-25T15:58:00Z":           true,
		"2026-11-25 15:58:00Z":           false,
		"":                               false,
		"2026-11-25T15:58:00.123456789Z": true,
		// The hand-checked form's edges (plainCanonicalTime).
		"2024-02-29T00:00:00Z":            true,
		"2023-02-29T00:00:00Z":            false,
		"2100-02-29T00:00:00Z":            false,
		"2000-02-29T23:59:59.9Z":          true,
		"2026-04-31T00:00:00Z":            false,
		"2026-13-01T00:00:00Z":            false,
		"2026-00-01T00:00:00Z":            false,
		"2026-11-00T00:00:00Z":            false,
		"2026-11-25T24:00:00Z":            false,
		"2026-11-25T23:60:00Z":            false,
		"2026-11-25T23:59:60Z":            false,
		"2026-11-25T15:58:00.Z":           false,
		"2026-11-25T15:58:00.1234567891Z": false,
		"2026-11-25T15:58:00.1x3Z":        false,
		"2026-11-25T15:58:00.100Z":        false,
		"2026-11-25t15:58:00Z":            false,
		"2026-11-25T15:58:00z":            false,
		"+026-11-25T15:58:00Z":            false,
		"0001-01-01T00:00:00Z":            true,
	} {
		if got := canonicalTime(s); got != want {
			t.Errorf("canonicalTime(%q) = %v, want %v", s, got, want)
		}
	}
}

// FuzzCanonicalTime: the hand check of the common form never accepts what
// parseTime refuses, and canonicalTime always agrees with parseTime.
func FuzzCanonicalTime(f *testing.F) {
	for _, s := range []string{"2026-11-25T15:58:00.12Z", "2024-02-29T00:00:00Z", "2026-11-25T23:59:60Z", "0000-01-01T00:00:00Z", "2026-11-25T15:58:00.100Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := parseTime(s)
		if plainCanonicalTime(s) && err != nil {
			t.Fatalf("plainCanonicalTime(%q) true, parseTime: %v", s, err)
		}
		if got := canonicalTime(s); got != (err == nil) {
			t.Fatalf("canonicalTime(%q) = %v, parseTime: %v", s, got, err)
		}
	})
}

// TestVerifyOneConnection: a pool that allows one connection gets a
// verify on that one, not a verify waiting for a second forever.
func TestVerifyOneConnection(t *testing.T) {
	smallRanges(t)
	ctx := context.Background()
	s, path := openTest(t, Options{Table: "T1", Key: testKey(), CheckpointEvery: 10})
	if _, err := s.AppendBatch(ctx, sampleEvents(2000)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.db.SetMaxOpenConns(1)
	rep, err := r.Verify(ctx, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, rep)
	if rep.Events != 2000 {
		t.Errorf("%d rows verified, want 2000", rep.Events)
	}
}
