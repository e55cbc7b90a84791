package floor

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

var (
	benchBatch  = flag.Int("floor.batch", DefaultBatch, "the witnesses' batch in the catch-up benchmark")
	benchTables = flag.Int("floor.bench-tables", 20, "the tables of the catch-up and store benchmarks (a floor's: 500)")
)

// rowPayload is a row as a table publishes it on pit/events.
func rowPayload(r Row) []byte {
	t, _ := time.Parse(time.RFC3339Nano, r.At)
	b, err := mqttpub.MarshalEvent(mqttpub.Event{Seq: r.Seq, At: t, Kind: r.Kind, Shoe: r.Shoe, Coup: r.Coup, Body: r.Body, PrevHash: r.PrevHash, Hash: r.Hash})
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkWitnessCatchUp: the floor's stream holds b.N rows of 20 tables
// (and a checkpoint every third row, as tables publish one per commit)
// that piled up while every witness was down; the witnesses start and
// verify and store them all. rows/s is the catch-up rate.
//
//	TABLECTL_TEST_ALL=1 go test -run '^$' -bench WitnessCatchUp -benchtime 200000x ./floor/
func BenchmarkWitnessCatchUp(b *testing.B) {
	cluster := floortest.Cluster(b, 3)
	for _, witnesses := range []int{1, 2} {
		b.Run(fmt.Sprintf("witnesses=%d", witnesses), func(b *testing.B) {
			benchCatchUp(b, cluster, witnesses)
		})
	}
}

func benchCatchUp(b *testing.B, cluster *natsserver.Cluster, witnesses int) {
	ctx := context.Background()
	pool, schema := floortest.Postgres(b)
	store, err := OpenStore(ctx, pool, schema)
	if err != nil {
		b.Fatal(err)
	}
	tables := *benchTables
	reg := &Registry{Heartbeat: time.Hour, Tables: map[string]TableEntry{}}
	per := max(1, b.N/tables)
	subj := Subjects{Root: "bench" + strings.ToLower(schema[2:8])}
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream := "BENCH_" + strings.ToUpper(schema)
	if _, err := EnsureStream(ctx, js, stream, subj, 3, time.Hour); err != nil {
		b.Fatal(err)
	}
	defer js.DeleteStream(ctx, stream)
	var chains []*chain
	for i := range tables {
		c := newChain(b, fmt.Sprintf("T%02d", i), per)
		c.registry(reg)
		chains = append(chains, c)
	}
	// Published as the tables would, interleaved.
	pending := 0
	for k := range per {
		for _, c := range chains {
			r := c.rows[k]
			if _, err := js.PublishAsync(subj.root()+"."+c.table+".pit.events", rowPayload(r)); err != nil {
				b.Fatal(err)
			}
			pending++
			// A table signs every commit: its last rows too.
			if k%3 == 2 || k == per-1 {
				cp, _ := json.Marshal(c.checkpoint(r.Seq, t0.Add(time.Duration(r.Seq)*time.Millisecond)))
				if _, err := js.PublishAsync(subj.root()+"."+c.table+".pit.checkpoint", cp); err != nil {
					b.Fatal(err)
				}
			}
			if pending >= 4000 {
				<-js.PublishAsyncComplete()
				pending = 0
			}
		}
	}
	<-js.PublishAsyncComplete()
	b.ResetTimer()
	cpu0 := benchCPU(cluster)
	start := time.Now()
	wctx, cancel := context.WithCancel(ctx)
	// The witnesses' logs are kept, and shown if the catch-up stalls.
	logs := &logtail.Buffer{Keep: 256 << 10}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	var ws []*Witness
	for i := range witnesses {
		w, err := New(ctx, Config{Name: fmt.Sprint("bench-", i), NATS: cluster.URLs(), Stream: stream, Consumer: "witness", Replicas: 3,
			Subjects: subj, Store: store, Registry: reg, Logger: logger.With("witness", i), Batch: *benchBatch})
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
		go w.Run(wctx)
	}
	// A catch-up that stores nothing for a minute has stalled: fail with
	// the witnesses' logs rather than hang (it did once, under CI's load).
	err = testenv.WaitMoving(ctx, time.Minute, fmt.Sprintf("the catch-up of %d rows", per*tables), func() (int64, bool) {
		var done int64
		if err := pool.QueryRow(ctx, store.sql(`SELECT coalesce(sum(contig),0) FROM S.tables`)).Scan(&done); err != nil {
			b.Fatal(err)
		}
		return done, done >= int64(per*tables)
	})
	if err != nil {
		cancel()
		b.Fatalf("%v; the witnesses' logs (last lines):\n%s", err, logtail.Lines(logs.String(), 60))
	}
	el := time.Since(start)
	b.StopTimer()
	cpu := benchCPU(cluster).sub(cpu0)
	cancel()
	for _, w := range ws {
		w.Close()
	}
	var n, alerts int64
	pool.QueryRow(ctx, store.sql(`SELECT count(*) FROM S.rows`)).Scan(&n)
	pool.QueryRow(ctx, store.sql(`SELECT count(*) FROM S.alerts`)).Scan(&alerts)
	if n != int64(per*tables) || alerts != 0 {
		var kinds []string
		rows, _ := pool.Query(ctx, store.sql(`SELECT table_id || ' ' || kind || ' ' || seq || ': ' || message FROM S.alerts ORDER BY id LIMIT 10`))
		for rows.Next() {
			var k string
			rows.Scan(&k)
			kinds = append(kinds, k)
		}
		rows.Close()
		b.Fatalf("%d rows stored of %d, %d alerts: %v", n, per*tables, alerts, kinds)
	}
	b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
	// Where the cores went, per 100,000 rows: the figure the machine's
	// other work moves less than the rate.
	per100k := 1e5 / float64(n)
	b.ReportMetric(cpu.witness.Seconds()*per100k, "witness-cpu-s/100k")
	b.ReportMetric(cpu.nats.Seconds()*per100k, "nats-cpu-s/100k")
	b.ReportMetric(cpu.pg.Seconds()*per100k, "pg-cpu-s/100k")
}

// cpuUse is the CPU time the catch-up's parts have used so far: this
// process (the witnesses), the NATS nodes, and every PostgreSQL process
// (the machine's, so another client's queries count too).
type cpuUse struct{ witness, nats, pg time.Duration }

func (a cpuUse) sub(b cpuUse) cpuUse {
	return cpuUse{a.witness - b.witness, a.nats - b.nats, a.pg - b.pg}
}

func benchCPU(c *natsserver.Cluster) cpuUse {
	var u cpuUse
	u.witness, _ = procCPU(os.Getpid(), false)
	for _, nd := range c.Nodes {
		if pid := nd.Pid(); pid != 0 {
			t, _ := procCPU(pid, false)
			u.nats += t
		}
	}
	// PostgreSQL's backends come and go: the postmaster's children's time
	// counts those that exited.
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "postgres" {
			t, _ := procCPU(pid, true)
			u.pg += t
		}
	}
	return u
}

// procCPU is a process's user and system time from /proc (Linux), with
// its waited-for children's when children is set.
func procCPU(pid int, children bool) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// Fields 14 to 17 of stat(5): utime, stime, cutime, cstime, in clock
	// ticks (USER_HZ, 100 on Linux).
	n := 2
	if children {
		n = 4
	}
	var ticks int64
	for _, s := range f[11 : 11+n] {
		v, _ := strconv.ParseInt(s, 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

var _ = audit.Hash{}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// BenchmarkStoreApply: a catch-up's batches straight into each store, no
// stream and no witness: 20 tables' rows interleaved, each table signing
// every third row, DefaultBatch messages a transaction (signatures checked
// before, as the witness does). rows/s is the store's own rate: the read
// under the tables' locks, the judging and the write of each batch.
//
//	TABLECTL_TEST_ALL=1 go test -run '^$' -bench StoreApply -benchtime 100000x ./floor/
func BenchmarkStoreApply(b *testing.B) {
	opens := []struct {
		name string
		open func(b *testing.B) Store
	}{
		{"postgres", func(b *testing.B) Store {
			pool, schema := floortest.Postgres(b)
			s, err := OpenStore(context.Background(), pool, schema)
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"sqlite", func(b *testing.B) Store {
			s, err := OpenSQLiteStore(context.Background(), filepath.Join(b.TempDir(), "floor.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			return s
		}},
	}
	for _, o := range opens {
		b.Run(o.name, func(b *testing.B) { benchApply(b, o.open(b)) })
	}
}

func benchApply(b *testing.B, s Store) {
	tables := *benchTables
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Hour, Tables: map[string]TableEntry{}}
	per := max(1, b.N/tables)
	var chains []*chain
	for i := range tables {
		c := newChain(b, fmt.Sprintf("T%02d", i), per)
		c.registry(reg)
		chains = append(chains, c)
	}
	var items []item
	for k := range per {
		for _, c := range chains {
			r := &c.rows[k]
			items = append(items, item{table: c.table, row: r})
			if k%3 == 2 || k == per-1 {
				cp := c.checkpoint(r.Seq, t0.Add(time.Duration(r.Seq)*time.Millisecond))
				items = append(items, item{table: c.table, cp: &cp, sig: reg.verify(c.table, cp), sigDone: true})
			}
		}
	}
	b.ResetTimer()
	start := time.Now()
	for len(items) > 0 {
		n := min(DefaultBatch, len(items))
		alerts, err := s.apply(ctx, items[:n], reg, "bench", t0)
		if err != nil {
			b.Fatal(err)
		}
		if len(alerts) > 0 {
			b.Fatalf("alerts from an honest catch-up: %v", alerts)
		}
		items = items[n:]
	}
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(per*tables)/el.Seconds(), "rows/s")
}
