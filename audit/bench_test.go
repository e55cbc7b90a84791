package audit

import (
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
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

// BenchmarkVerify verifies a 100,000-row trail with checkpoints every 100
// rows and reports rows checked per second.
func BenchmarkVerify(b *testing.B) {
	const rows = 100_000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "trail.db")
	s := openAt(b, path, Options{Table: "T1", Key: testKey()})
	evs := sampleEvents(100)
	for n := 0; n < rows; n += len(evs) {
		if _, err := s.AppendBatch(ctx, evs); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Checkpoint(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	opt := VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}
	b.ResetTimer()
	for b.Loop() {
		rep, err := Verify(ctx, path, opt)
		if err != nil {
			b.Fatal(err)
		}
		if !rep.OK() || rep.Events != rows {
			b.Fatalf("verify: %d rows, %d findings", rep.Events, len(rep.Findings))
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
