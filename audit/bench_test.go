package audit

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// BenchmarkAppend is the per-event latency of a durable append: one event
// per transaction, WAL fsynced on commit, on a real file. ns/op is the time
// the controller waits before it may publish a card.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	s, _ := openTest(b, Options{Table: "T1", Key: testKey(), CheckpointEvery: 100})
	defer s.Close()
	ev := Event{Kind: "card", Shoe: 3, Coup: 41, Body: map[string]any{"card": "KH", "hand": "banker", "shoe_seq": 118, "manual": false}}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Append(ctx, ev); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkVerify verifies a 100,002-row trail written as the recorder
// writes it (a commit of 3 rows with its signed checkpoint, the bench
// trail's 2.1 rows per commit rounded up) and reports rows checked per
// second: newest, Verify's default (the newest checkpoint's signature);
// every, with EverySignature.
func BenchmarkVerify(b *testing.B) {
	const rows = 100_002
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "trail.db")
	s := openAt(b, path, Options{Table: "T1", Key: testKey(), CheckpointEvery: 1})
	evs := sampleEvents(102)
	for n := 0; n < rows; n += 3 {
		if _, err := s.AppendBatch(ctx, evs[n%102:n%102+3]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, every := range []bool{false, true} {
		name := map[bool]string{false: "newest", true: "every"}[every]
		b.Run(name, func(b *testing.B) {
			opt := VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}, EverySignature: every}
			for b.Loop() {
				rep, err := Verify(ctx, path, opt)
				if err != nil {
					b.Fatal(err)
				}
				if !rep.OK() || rep.Events != rows || rep.Checkpoints != rows/3 {
					b.Fatalf("verify: %d rows, %d checkpoints, %d findings", rep.Events, rep.Checkpoints, len(rep.Findings))
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkCommitCoup is the controller's transaction: three rows and a
// signed checkpoint of their head (CheckpointEvery 1). "disk" is the test's
// temporary directory, fsync included; "tmpfs" is /dev/shm, where fsync
// costs next to nothing, so ns/op is the store's own work before the fsync
// (statements, cgo, hashing, the signature's hand-over).
func BenchmarkCommitCoup(b *testing.B) {
	dirs := []struct{ name, dir string }{{"disk", b.TempDir()}}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "auditbench")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			dirs = append(dirs, struct{ name, dir string }{"tmpfs", d})
		}
	}
	evs := []Event{
		{Kind: "card", Shoe: 3, Coup: 41, Body: map[string]any{"card": "KH", "hand": "banker", "shoe_seq": 118, "manual": false}},
		{Kind: "card", Shoe: 3, Coup: 41, Body: map[string]any{"card": "9S", "hand": "player", "shoe_seq": 119, "manual": false}},
		{Kind: "coup_result", Shoe: 3, Coup: 41, Body: map[string]any{"winner": "player", "player": 9, "banker": 0}},
	}
	for _, d := range dirs {
		b.Run(d.name, func(b *testing.B) {
			ctx := context.Background()
			s := openAt(b, filepath.Join(d.dir, "trail.db"), Options{Table: "T1", Key: testKey(), CheckpointEvery: 1})
			defer s.Close()
			for b.Loop() {
				recs, err := s.AppendBatch(ctx, evs)
				if err != nil {
					b.Fatal(err)
				}
				if recs[len(recs)-1].Checkpoint == nil {
					b.Fatal("no checkpoint in the transaction")
				}
			}
		})
	}
}

// BenchmarkPrepareShoe is the bodies of a shoe's rows as the recorder
// makes them on the card's path (prepare: each input's and derived
// event's canonical JSON), per row.
func BenchmarkPrepareShoe(b *testing.B) {
	tb, err := coup.NewTable(vipConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	var evs []Event
	for _, in := range shoeScript(b) {
		evs = append(evs, inputEvent(in, tb))
		evs = append(evs, tableEvents(tb.Apply(in))...)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, e := range evs {
			if _, err := prepare(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/row")
}
