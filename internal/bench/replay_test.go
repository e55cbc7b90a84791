package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// BenchmarkReplay replays a 200,000-row trail built as the bench command
// builds its million-row one, and reports rows per second: the figure
// behind the "Audit replay" row of docs/benchmarks.md, small enough to
// profile (-cpuprofile).
func BenchmarkReplay(b *testing.B) {
	const want = 200_000
	ctx := context.Background()
	p, err := coup.BuiltinProfile("vip")
	if err != nil {
		b.Fatal(err)
	}
	tc := coup.DefaultTableConfig(p)
	dir := b.TempDir()
	_, key, err := benchKey(dir)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "trail.db")
	rows, _, err := buildBenchTrail(ctx, path, tc, key, 1, want, batched)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		r, err := audit.OpenReader(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		rp, err := audit.Replay(r.Events(ctx, audit.Query{}), tc, audit.ReplayVisitor{})
		r.Close()
		if err != nil {
			b.Fatal(err)
		}
		if d := rp.Differences(); len(d) > 0 || rp.Rows() != rows {
			b.Fatalf("replay: %d rows, %d differences (first: %+v)", rp.Rows(), len(d), d)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
