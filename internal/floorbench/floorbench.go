// Package floorbench is the floor part of tablectl-bench (--only floor):
// a three-node nats-server cluster, PostgreSQL, two real witnesses
// (package floor, each a process of its own: this binary again) and N
// simulated tables publishing hash-chained rows and signed checkpoints
// straight to JetStream at a dealer's pace. It measures the rows a second
// the floor witnesses, a table's alert to the floor view's server-sent
// events, and the witnesses' CPU and memory at each table count; at the
// last (the largest) it deals for a longer soak, judging the witnesses'
// memory flat over it, then times the catch-up after a witness outage.
// It imports floor, so it lives apart from internal/bench (which the
// table's own benchmarks use) and from everything cmd/tablectl links.
package floorbench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tablectl/tablectl/internal/bench"
	"github.com/tablectl/tablectl/internal/natsserver"
)

// PostgresEnv names the database the witnesses store into (the tests'
// variable); the bench makes a schema of its own there and drops it.
const PostgresEnv = "TABLECTL_TEST_POSTGRES"

// DefaultPostgres is the database of the project's machine and its tests.
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Options size the floor bench. Zero values take the full or the quick
// defaults (Sizes).
type Options struct {
	// Tables are the table counts measured, one floor each; the last
	// (the largest) runs the soak and the outage.
	Tables []int
	// Pace is a table's mean time between rows (a dealer's: 2.5 s);
	// CheckpointEvery is how many rows a table signs a checkpoint after.
	Pace            time.Duration
	CheckpointEvery int
	// Duration is how long each count but the last deals with its
	// witnesses up, the sustained rate, CPU, memory and alerts measured
	// over it; Soak is that window at the last count, long enough to
	// judge memory flat; Sample is how often the witnesses' memory is
	// read in either.
	Duration, Soak, Sample time.Duration
	// Outage is how long both witnesses are down after the soak while
	// the tables deal, before the catch-up is timed.
	Outage time.Duration
	// AlertEvery is how often the alerting table raises a new alert.
	AlertEvery time.Duration
	// Postgres is the database URL.
	Postgres string
	Progress io.Writer
}

// Sizes fills the zero values: the full run, or --quick (seconds).
func (o *Options) Sizes(quick bool) {
	pick := func(p *time.Duration, full, q time.Duration) {
		if *p == 0 {
			*p = full
			if quick {
				*p = q
			}
		}
	}
	if len(o.Tables) == 0 {
		o.Tables = []int{50, 100, 200, 500}
		if quick {
			o.Tables = []int{20}
		}
	}
	pick(&o.Pace, 2500*time.Millisecond, 2500*time.Millisecond)
	pick(&o.Duration, 3*time.Minute, 10*time.Second)
	pick(&o.Soak, 30*time.Minute, o.Duration) // --quick: no longer than the others
	pick(&o.Sample, time.Minute, 2*time.Second)
	pick(&o.Outage, 10*time.Minute, 8*time.Second)
	pick(&o.AlertEvery, time.Second, 250*time.Millisecond)
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Part is the floor part as tablectl-bench runs it (bench.Options.FloorPart).
func Part(o Options) func(ctx context.Context, dir string) ([]bench.Row, error) {
	return func(ctx context.Context, dir string) ([]bench.Row, error) {
		res, err := run(ctx, o, dir)
		if len(res) == 0 {
			return nil, err
		}
		return rows(o, res), err
	}
}

func run(ctx context.Context, o Options, dir string) ([]result, error) {
	fmt.Fprintf(o.Progress, "bench: floor: a 3-node nats-server cluster (plain, no logins: see docs/benchmarks.md)\n")
	natsDir := filepath.Join(dir, "nats")
	if err := os.MkdirAll(natsDir, 0o755); err != nil {
		return nil, err
	}
	cluster, err := natsserver.Start(ctx, natsDir, 3)
	if err != nil {
		return nil, err
	}
	defer cluster.Stop()
	pool, err := pgxpool.New(ctx, o.Postgres)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at %s: %w", o.Postgres, err)
	}
	defer pool.Close()
	var out []result
	for i, n := range o.Tables {
		soak := i == len(o.Tables)-1
		if soak {
			fmt.Fprintf(o.Progress, "bench: floor: %d tables, a soak of %s, then the witnesses down for %s ...\n", n, o.Soak, o.Outage)
		} else {
			fmt.Fprintf(o.Progress, "bench: floor: %d tables for %s ...\n", n, o.Duration)
		}
		r, err := runFloor(ctx, o, dir, cluster, pool, n, soak)
		if err != nil {
			return out, fmt.Errorf("%d tables: %w", n, err)
		}
		fmt.Fprintf(o.Progress, "bench: floor: %d tables: %s\n", n, r.summary())
		out = append(out, r)
	}
	return out, nil
}

// names are one floor's: its schema, subjects' root and streams, unique
// to the run so that nothing of another is counted.
type names struct{ schema, root, stream, status string }

func newNames(n int) names {
	tag := strings.ToLower(rand.Text()[:8])
	return names{schema: fmt.Sprintf("floorbench_%d_%s", n, tag), root: "fb" + tag,
		stream: strings.ToUpper("FB_" + tag), status: strings.ToUpper("FBS_" + tag)}
}

func dropSchema(pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}
