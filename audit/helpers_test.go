package audit

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
)

// newStepClock starts at a fixed instant and moves on by 1.5 s at every
// reading, so rows get distinct, reproducible times.
func newStepClock() *clock.Fake {
	return clock.NewStepping(time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC), 1500*time.Millisecond)
}

// testKey is a fixed Ed25519 key (RFC 8032 test 1 seed), so golden files
// hold reproducible signatures.
func testKey() ed25519.PrivateKey {
	seed := []byte{
		0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c, 0xc4,
		0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae, 0x7f, 0x60,
	}
	return ed25519.NewKeyFromSeed(seed)
}

func testPub() ed25519.PublicKey { return testKey().Public().(ed25519.PublicKey) }

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// openTest opens a new trail in a temporary directory.
func openTest(t testing.TB, opt Options) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trail.db")
	return openAt(t, path, opt), path
}

func openAt(t testing.TB, path string, opt Options) *Store {
	t.Helper()
	if opt.Clock == nil {
		opt.Clock = newStepClock()
	}
	if opt.Logger == nil {
		opt.Logger = quietLogger()
	}
	s, err := Open(context.Background(), path, opt)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

// sampleEvents is a small, varied shoe: bodies with nested objects,
// strings that need escaping, and ids that move on.
func sampleEvents(n int) []Event {
	evs := make([]Event, 0, n)
	for i := 0; i < n; i++ {
		coup := int64(i/6 + 1)
		switch i % 6 {
		case 0:
			evs = append(evs, Event{Kind: "betting_open", Shoe: 1, Coup: coup, Body: map[string]any{"timer_ms": 15000}})
		case 1:
			evs = append(evs, Event{Kind: "betting_closed", Shoe: 1, Coup: coup, Body: map[string]any{"by": "dealer"}})
		case 2, 3, 4:
			evs = append(evs, Event{Kind: "card", Shoe: 1, Coup: coup, Body: map[string]any{
				"card": []string{"KH", "9S", "4D"}[i%6-2], "hand": []string{"player", "banker", "player"}[i%6-2], "shoe_seq": i + 10,
			}})
		case 5:
			evs = append(evs, Event{Kind: "coup_result", Shoe: 1, Coup: coup, Body: map[string]any{
				"winner": "banker", "player": 3, "banker": 9, "note": "<natural> & \"tab\"\t\u2028",
			}})
		}
	}
	return evs
}

func appendAll(t testing.TB, s *Store, evs []Event) []Record {
	t.Helper()
	recs := make([]Record, 0, len(evs))
	for _, e := range evs {
		r, err := s.Append(context.Background(), e)
		if err != nil {
			t.Fatalf("Append(%s): %v", e.Kind, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func mustVerify(t testing.TB, path string, opt VerifyOptions) *Report {
	t.Helper()
	rep, err := Verify(context.Background(), path, opt)
	if err != nil {
		t.Fatalf("Verify(%s): %v", path, err)
	}
	return rep
}

func requireClean(t testing.TB, rep *Report) {
	t.Helper()
	if !rep.OK() {
		t.Fatalf("Verify found %d findings on a clean trail: %v", len(rep.Findings), rep.Findings)
	}
}

func readAll(t testing.TB, it func(func(Record, error) bool)) []Record {
	t.Helper()
	var out []Record
	for r, err := range it {
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// openRaw opens a SQLite file with no audit code in between, as an
// attacker with the file would.
func openRaw(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}
