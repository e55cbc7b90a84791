package floorbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/natsserver"
)

// rig is one floor of n tables being measured.
type rig struct {
	o       Options
	n       int
	nm      names
	cluster *natsserver.Cluster
	pool    *pgxpool.Pool
	regPath string
	nc      *nats.Conn
	js      jetstream.JetStream
	tables  []*simTable
	// published counts the rows the stream took from the tables.
	published atomic.Int64
	wits      []*witnessProc
	cleanup   []func()
}

func (r *rig) close() {
	for _, w := range r.wits {
		w.kill()
	}
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
}

// setup makes the floor's streams, schema and registry and the tables.
func (r *rig) setup(ctx context.Context, dir string) error {
	nc, err := nats.Connect(r.cluster.URLs())
	if err != nil {
		return err
	}
	r.nc = nc
	r.cleanup = append(r.cleanup, nc.Close)
	if r.js, err = jetstream.New(nc); err != nil {
		return err
	}
	subj := floor.Subjects{Root: r.nm.root}
	if _, err := floor.EnsureStream(ctx, r.js, r.nm.stream, subj, 3, time.Hour); err != nil {
		return err
	}
	if _, err := floor.EnsureStatusStream(ctx, r.js, r.nm.status, subj, 3); err != nil {
		return err
	}
	r.cleanup = append(r.cleanup, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r.js.DeleteStream(ctx, r.nm.stream)
		r.js.DeleteStream(ctx, r.nm.status)
	})
	r.cleanup = append(r.cleanup, func() { dropSchema(r.pool, r.nm.schema) })
	for i := range r.n {
		t, err := newSimTable(fmt.Sprintf("BAC-%03d", i+1))
		if err != nil {
			return err
		}
		r.tables = append(r.tables, t)
	}
	r.regPath = filepath.Join(dir, fmt.Sprintf("registry-%d.json", r.n))
	return writeRegistry(r.regPath, r.tables, time.Minute)
}

// view serves the floor view and follows the first table's alerts on it.
func (r *rig) view(ctx context.Context) (<-chan string, error) {
	store, err := floor.OpenStore(ctx, r.pool, r.nm.schema)
	if err != nil {
		return nil, err
	}
	reg, err := floor.LoadRegistry(r.regPath)
	if err != nil {
		return nil, err
	}
	v := floor.NewView(store, reg, floor.Subjects{Root: r.nm.root}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	vctx, cancel := context.WithCancel(ctx)
	go v.Run(vctx, r.nc, r.nm.status, time.Second)
	srv := httptest.NewServer(v)
	r.cleanup = append(r.cleanup, srv.Close, cancel) // cancel first: the events end
	return followAlerts(vctx, srv.URL+"/floor/events", r.tables[0].id)
}

// deal starts every table dealing until the returned stop.
func (r *rig) deal(ctx context.Context) (stop func()) {
	dctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, t := range r.tables {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.deal(dctx, r.js, r.nm.root, r.o.Pace, r.o.CheckpointEvery, &r.published)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// startWitnesses runs the floor's two witnesses, each a process.
func (r *rig) startWitnesses() error {
	for i := range 2 {
		w, err := startWitness(witnessSpec{Name: fmt.Sprint("bench-", i), NATS: r.cluster.URLs(), Stream: r.nm.stream, Consumer: "witness",
			StatusStream: r.nm.status, Root: r.nm.root, Postgres: r.o.Postgres, Schema: r.nm.schema, Registry: r.regPath, Replicas: 3})
		if err != nil {
			return err
		}
		r.wits = append(r.wits, w)
	}
	return nil
}

func (r *rig) killWitnesses() {
	for _, w := range r.wits {
		w.kill()
	}
	r.wits = nil
}

// held is how many rows the floor holds: witnessed (each table's 1 to
// contig) or held until a checkpoint covers them.
func (r *rig) held(ctx context.Context) (int64, error) {
	var n int64
	s := r.nm.schema
	err := r.pool.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT coalesce(sum(contig),0) FROM %s.tables) + (SELECT count(*) FROM %s.pending)`, s, s)).Scan(&n)
	return n, err
}

// waitHeld waits until the floor holds want rows, polling every 20 ms; it
// fails if nothing moves for stall. first is when the count first rose.
func (r *rig) waitHeld(ctx context.Context, want int64, stall time.Duration) (m heldMark, err error) {
	last, moved := int64(-1), time.Now()
	for {
		n, err := r.held(ctx)
		if err != nil && !isMissingSchema(err) {
			return m, err
		}
		now := time.Now()
		if n > last {
			if last >= 0 && m.first.IsZero() {
				m.first, m.firstN = now, n
			}
			last, moved = n, now
		}
		if n >= want {
			m.done = now
			return m, nil
		}
		if now.Sub(moved) > stall {
			return m, fmt.Errorf("the floor holds %d rows of %d and has not moved for %s; witnesses said:\n%s", n, want, stall, r.witnessLogs())
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// natsCPU is the NATS nodes' CPU time so far.
func (r *rig) natsCPU() time.Duration {
	var t time.Duration
	for _, nd := range r.cluster.Nodes {
		if c, err := procCPU(nd.Pid()); err == nil {
			t += c
		}
	}
	return t
}

// streamBytes is the rows' stream's size on a node per row published.
func (r *rig) streamBytes(ctx context.Context) (float64, error) {
	s, err := r.js.Stream(ctx, r.nm.stream)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return float64(info.State.Bytes) / float64(max(1, r.published.Load())), nil
}

// alertKinds counts the alerts the witnesses stored, by kind ("none").
func (r *rig) alertKinds(ctx context.Context) (string, error) {
	rows, err := r.pool.Query(ctx, fmt.Sprintf(`SELECT kind, count(*) FROM %s.alerts GROUP BY kind ORDER BY kind`, r.nm.schema))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return "", err
		}
		out = append(out, fmt.Sprintf("%d %s", n, k))
	}
	if len(out) == 0 {
		return "none", rows.Err()
	}
	return strings.Join(out, ", "), rows.Err()
}

// heldMark is when the floor's count first rose (and to what) and when it
// reached what was waited for.
type heldMark struct {
	first, done time.Time
	firstN      int64
}

// isMissingSchema: the witnesses have not made the schema yet.
func isMissingSchema(err error) bool { return strings.Contains(err.Error(), "does not exist") }

func (r *rig) witnessLogs() string {
	var b strings.Builder
	for i, w := range r.wits {
		fmt.Fprintf(&b, "witness %d:\n%s\n", i, logtail.Lines(w.log.String(), 20))
	}
	return b.String()
}

// witnessUse is the witness processes' CPU time and resident memory.
func (r *rig) witnessUse() (cpu time.Duration, rss int64, err error) {
	for _, w := range r.wits {
		c, err := procCPU(w.pid())
		if err != nil {
			return 0, 0, err
		}
		m, err := procRSS(w.pid())
		if err != nil {
			return 0, 0, err
		}
		cpu += c
		rss += m
	}
	return cpu, rss, nil
}

// procCPU is a process's user and system time, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	// utime and stime are in clock ticks, USER_HZ 100 on Linux.
	return time.Duration(u+s) * 10 * time.Millisecond, nil
}

// procRSS is a process's resident memory in bytes (VmRSS).
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}
