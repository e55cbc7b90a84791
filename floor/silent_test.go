package floor_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/mosquitto"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestSilentMeansSilent (issue 32, item 3): on a real floor (NATS
// cluster, two witnesses into PostgreSQL, two tables dealing through
// their bridges), `silent` says only that a table said nothing:
//
//   - a table whose bridge is cut for three heartbeats is silent, and the
//     alert resolves when its rows arrive;
//   - both witnesses down for three heartbeats while the tables deal on,
//     then both started again: their rows waited in the stream, so while
//     the active witness works through the backlog neither it nor the
//     standby alerts a table silent (the issue saw the standby raise
//     silent on every table, still open five minutes later).
func TestSilentMeansSilent(t *testing.T) {
	testenv.Long(t, "witnesses stopped and a bridge cut on a real floor (NATS cluster, PostgreSQL, Mosquitto; a minute or two)")
	schema, bridge, exe := bridgedFloorParts(t)
	const (
		heartbeat = 8 * time.Second
		cut       = 1 // the table whose bridge is cut
	)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// Small batches make the catch-up last seconds, as a backlog of
	// minutes at a floor's pace does.
	f, err := floorsim.Start(ctx, floorsim.Options{Dir: t.TempDir(), Tables: 2, Nodes: 3, Witness: 2, Batch: 10,
		CardPace: 100 * time.Millisecond, CoupPace: 500 * time.Millisecond, Seed: 32,
		Postgres: floortest.PostgresURL(), Schema: schema, Bridge: string(bridge), Proxied: map[int]bool{cut: true},
		Exe: exe, Env: []string{childEnv + "=1"}, Heartbeat: heartbeat, Log: testLog(t),
		StartBroker: func(conf string) (floorsim.Broker, error) { return mosquitto.Start(conf, 10*time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	waitFor(t, ctx, 2*time.Minute, "every table's rows witnessed", func() bool {
		for _, tb := range f.Tables {
			if witnessedMax(t, f, tb.ID) < 10 {
				return false
			}
		}
		return true
	})

	// A table that is silent: its bridge cut. Its silence resolves when
	// its rows arrive.
	tb := f.Tables[cut]
	tb.Cut()
	waitFor(t, ctx, 3*heartbeat+time.Minute, tb.ID+" alerted silent", func() bool {
		return slices.Equal(silences(t, f)[tb.ID], []string{"open"})
	})
	tb.Mend()
	waitFor(t, ctx, 2*time.Minute, tb.ID+"'s silence resolved once its rows arrive", func() bool {
		return slices.Equal(silences(t, f)[tb.ID], []string{"resolved"})
	})
	before := silences(t, f)

	// Both witnesses down while the tables deal on.
	f.KillWitness(0)
	f.KillWitness(1)
	down := time.Now()
	waitFor(t, ctx, 2*time.Minute, "three heartbeats of the tables dealing unwitnessed", func() bool {
		if time.Since(down) < 3*heartbeat {
			return false
		}
		for _, tb := range f.Tables {
			if trailHead(t, tb.Trail) < witnessedMax(t, f, tb.ID)+20 {
				return false
			}
		}
		return true
	})
	heads := map[string]int64{}
	for _, tb := range f.Tables {
		heads[tb.ID] = trailHead(t, tb.Trail)
	}
	for i := range 2 {
		if err := f.StartWitness(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("witnesses down %s, started again with %v rows in the tables' trails", time.Since(down).Round(time.Second), heads)
	waitFor(t, ctx, 5*time.Minute, "the witnesses to catch up", func() bool {
		for id, h := range heads {
			if contig(t, f, id) < h {
				return false
			}
		}
		return true
	})
	if s := silences(t, f); !maps.EqualFunc(s, before, slices.Equal) {
		t.Fatalf("tables alerted silent while their rows waited in the stream: %v (before the witnesses stopped: %v)", s, before)
	}
}

// silences gives, per table alerted silent, whether each of its
// silences is open or resolved, in order.
func silences(t *testing.T, f *floorsim.Floor) map[string][]string {
	t.Helper()
	rows, err := f.Pool.Query(context.Background(), `SELECT table_id, resolved_at IS NOT NULL FROM `+f.Store.(*floor.PGStore).Schema()+`.alerts WHERE kind = $1 ORDER BY id`, string(floor.AlertSilent))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var table string
		var resolved bool
		if err := rows.Scan(&table, &resolved); err != nil {
			t.Fatal(err)
		}
		out[table] = append(out[table], map[bool]string{false: "open", true: "resolved"}[resolved])
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
