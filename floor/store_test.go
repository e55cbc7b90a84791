package floor

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/internal/floortest"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// chain is a table's trail made by hand: rows and their checkpoints.
type chain struct {
	table string
	key   ed25519.PrivateKey
	rows  []Row
}

func newChain(t testing.TB, table string, n int) *chain {
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &chain{table: table, key: key}
	c.extend(n, "")
	return c
}

// extend adds n rows; salt changes their bodies (a rewritten history).
func (c *chain) extend(n int, salt string) {
	var prev audit.Hash
	if len(c.rows) > 0 {
		prev = c.rows[len(c.rows)-1].Hash
	}
	for range n {
		seq := int64(len(c.rows) + 1)
		r := Row{Table: c.table, Seq: seq, At: t0.Add(time.Duration(seq) * 10 * time.Millisecond).Format(time.RFC3339Nano), Kind: "card_dealt",
			Shoe: 1, Coup: seq / 6, Body: fmt.Appendf(nil, `{"card":"%dH","note":"<a&b>%s"}`, seq%9+1, salt), PrevHash: prev}
		r.Hash = r.ComputeHash()
		prev = r.Hash
		c.rows = append(c.rows, r)
	}
}

// rewrite replaces rows from seq on with others, chained and re-signable.
func (c *chain) rewrite(from int64, salt string) {
	n := len(c.rows) - int(from) + 1
	c.rows = c.rows[:from-1]
	c.extend(n, salt)
}

func (c *chain) checkpoint(seq int64, at time.Time) audit.Checkpoint {
	cp := audit.Checkpoint{Table: c.table, Seq: seq, HeadHash: c.rows[seq-1].Hash, SignedAt: at.UTC(), KeyID: audit.KeyID(c.key.Public().(ed25519.PublicKey))}
	cp.Signature = ed25519.Sign(c.key, cp.Message())
	return cp
}

func (c *chain) registry(reg *Registry) {
	reg.Tables[c.table] = TableEntry{Keys: []ed25519.PublicKey{c.key.Public().(ed25519.PublicKey)}, Heartbeat: time.Minute}
}

func rowItems(rows []Row) []item {
	out := make([]item, len(rows))
	for i := range rows {
		r := rows[i]
		out[i] = item{table: r.Table, row: &r}
	}
	return out
}

func cpItem(cp audit.Checkpoint) item { return item{table: cp.Table, cp: &cp} }

// sign follows each row item of its with the checkpoint its table signs
// over it (the controller's checkpoint_every 1), stored by the stream at
// the same time as the row.
func (c *chain) sign(its []item) []item {
	var out []item
	for _, it := range its {
		out = append(out, it)
		if it.row != nil {
			cp := cpItem(c.checkpoint(it.row.Seq, t0.Add(time.Duration(it.row.Seq)*10*time.Millisecond)))
			cp.at = it.at
			out = append(out, cp)
		}
	}
	return out
}

// storeKinds are the floor's stores: every store test runs on each, so
// the laptop's SQLite is held to what the floor's PostgreSQL is.
var storeKinds = []struct {
	name string
	open func(t *testing.T) Store
}{
	{"postgres", func(t *testing.T) Store {
		pool, schema := floortest.Postgres(t)
		s, err := OpenStore(context.Background(), pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"sqlite", func(t *testing.T) Store {
		s, err := OpenSQLiteStore(context.Background(), filepath.Join(t.TempDir(), "floor.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}},
}

// eachStore runs f on each store.
func eachStore(t *testing.T, f func(t *testing.T, s Store)) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { f(t, k.open(t)) })
	}
}

// newStore is the PostgreSQL store (the floor's), for the tests of what
// is not the store's.
func newStore(t *testing.T) Store { return storeKinds[0].open(t) }

// scanAll runs q (the stores' shared words: "S." the schema, $n the
// parameters) on s and scans each row with scan.
func scanAll(t *testing.T, s Store, scan func(func(...any) error) error, q string, args ...any) {
	t.Helper()
	d, ok := s.(dialect)
	if !ok {
		t.Fatalf("store %T has no dialect", s)
	}
	if err := d.each(context.Background(), q, args, scan); err != nil {
		t.Fatal(err)
	}
}

// stored is what the store holds of a table: seq -> hash.
func stored(t *testing.T, s Store, table string) map[int64]audit.Hash {
	out := map[int64]audit.Hash{}
	scanAll(t, s, func(scan func(...any) error) error {
		var seq int64
		var h []byte
		if err := scan(&seq, &h); err != nil {
			return err
		}
		if _, dup := out[seq]; dup {
			t.Fatalf("seq %d stored twice", seq)
		}
		out[seq] = toHash(h)
		return nil
	}, `SELECT seq, hash FROM S.rows WHERE table_id = $1`, table)
	return out
}

type storedAlert struct {
	kind AlertKind
	seq  int64
}

func alertsOf(t *testing.T, s Store, table string) []storedAlert {
	var out []storedAlert
	scanAll(t, s, func(scan func(...any) error) error {
		var a storedAlert
		if err := scan(&a.kind, &a.seq); err != nil {
			return err
		}
		out = append(out, a)
		return nil
	}, `SELECT kind, seq FROM S.alerts WHERE table_id = $1 ORDER BY kind, seq`, table)
	return out
}

func contigOf(t *testing.T, s Store, table string) (contig, max int64) {
	found := false
	scanAll(t, s, func(scan func(...any) error) error {
		found = true
		return scan(&contig, &max)
	}, `SELECT contig, max_seq FROM S.tables WHERE table_id = $1`, table)
	if !found {
		t.Fatalf("no line for %s", table)
	}
	return contig, max
}

// TestStoreExactlyOnceConcurrent: two witnesses take shuffled, duplicated
// batches of three tables at once; every row is stored once, the chains
// are whole and nothing is alerted.
func TestStoreExactlyOnceConcurrent(t *testing.T) { eachStore(t, testStoreExactlyOnceConcurrent) }

func testStoreExactlyOnceConcurrent(t *testing.T, s Store) {
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	var all []item
	var chains []*chain
	for i := range 3 {
		c := newChain(t, fmt.Sprintf("T%d", i), 600)
		c.registry(reg)
		chains = append(chains, c)
		all = append(all, rowItems(c.rows)...)
		for seq := int64(50); seq <= 600; seq += 50 {
			all = append(all, cpItem(c.checkpoint(seq, t0.Add(time.Duration(seq)*time.Second))))
		}
	}
	// Delivered at least once: a third again, in an order close to the
	// stream's (batches are shuffled locally, as two witnesses see them).
	rng := rand.New(rand.NewPCG(1, 2))
	for _, it := range slices.Clone(all) {
		if rng.IntN(3) == 0 {
			all = append(all, it)
		}
	}
	for i := 0; i+100 <= len(all); i += 100 {
		rng.Shuffle(100, func(a, b int) { all[i+a], all[i+b] = all[i+b], all[i+a] })
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * 100; i < len(all); i += 200 {
				if _, err := s.apply(context.Background(), all[i:min(i+100, len(all))], reg, fmt.Sprint("w", w), time.Now()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, c := range chains {
		got := stored(t, s, c.table)
		if len(got) != len(c.rows) {
			t.Errorf("%s: %d rows stored, want %d", c.table, len(got), len(c.rows))
		}
		for _, r := range c.rows {
			if got[r.Seq] != r.Hash {
				t.Fatalf("%s seq %d: stored %s, want %s", c.table, r.Seq, got[r.Seq], r.Hash)
			}
		}
		if a := alertsOf(t, s, c.table); len(a) != 0 {
			t.Errorf("%s: alerts %v on an honest trail", c.table, a)
		}
		if contig, max := contigOf(t, s, c.table); contig != 600 || max != 600 {
			t.Errorf("%s: contig %d max %d, want 600 600", c.table, contig, max)
		}
	}
}

// TestStoreTamper: each way a table's published history can lie is
// alerted once, with the right kind and seq, and nothing else is.
func TestStoreTamper(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// feed gives the store what the table published after rows 1..20
		// and a checkpoint at 20 were witnessed.
		feed func(c *chain) []item
		want []storedAlert
	}{
		{"honest", func(c *chain) []item {
			c.extend(10, "")
			return append(rowItems(c.rows[20:]), cpItem(c.checkpoint(30, t0.Add(time.Hour))))
		}, nil},
		{"rewritten and re-signed from row 11, then dealt on", func(c *chain) []item {
			c.rewrite(11, "forged")
			c.extend(5, "forged")
			return append(rowItems(c.rows[20:]), cpItem(c.checkpoint(25, t0.Add(time.Hour))))
		}, []storedAlert{{AlertBrokenLink, 21}}},
		{"rewritten rows republished and re-signed", func(c *chain) []item {
			c.rewrite(11, "forged")
			return append(rowItems(c.rows[10:12]), cpItem(c.checkpoint(12, t0.Add(time.Hour))))
		}, []storedAlert{{AlertCheckpointBack, 12}, {AlertFork, 11}}}, // one fork alert for the run; each kept in forks
		{"rewritten rows republished unsigned: held, not judged", func(c *chain) []item {
			c.rewrite(11, "forged")
			return rowItems(c.rows[10:12])
		}, nil},
		{"the next rows, hash and link right, unsigned: held, not judged", func(c *chain) []item {
			c.extend(2, "anyone's")
			return rowItems(c.rows[20:])
		}, nil},
		{"checkpoint over a rewritten head", func(c *chain) []item {
			c.rewrite(15, "forged")
			return []item{cpItem(c.checkpoint(20, t0.Add(time.Hour)))}
		}, []storedAlert{{AlertCheckpointClash, 20}}},
		{"truncated and re-signed", func(c *chain) []item {
			return []item{cpItem(c.checkpoint(12, t0.Add(time.Hour)))}
		}, []storedAlert{{AlertCheckpointBack, 12}}},
		{"a row altered in flight", func(c *chain) []item {
			c.extend(1, "")
			r := c.rows[20]
			r.Body = []byte(`{"card":"9H"}`)
			return rowItems([]Row{r})
		}, []storedAlert{{AlertQuarantined, 0}}},
		{"signed by another key", func(c *chain) []item {
			c.extend(1, "")
			_, other, _ := ed25519.GenerateKey(nil)
			cp := c.checkpoint(21, t0.Add(time.Hour))
			cp.Signature = ed25519.Sign(other, cp.Message())
			return append(rowItems(c.rows[20:]), cpItem(cp))
		}, []storedAlert{{AlertQuarantined, 0}}},
		{"another table's checkpoint on this table's subject", func(c *chain) []item {
			other := newChain(t, "BAC-99", 30)
			cp := other.checkpoint(25, t0.Add(time.Hour))
			return []item{{table: c.table, cp: &cp}}
		}, []storedAlert{{AlertQuarantined, 0}}},
		{"checkpoint ahead of the rows, then unsigned rows that differ: held, not judged", func(c *chain) []item {
			honest := *c
			honest.rows = slices.Clone(c.rows)
			honest.extend(3, "")
			cp := honest.checkpoint(23, t0.Add(time.Hour))
			c.extend(3, "other")
			return append([]item{cpItem(cp)}, rowItems(c.rows[20:])...)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s Store) {
				reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
				c := newChain(t, "BAC-07", 20)
				c.registry(reg)
				if _, err := s.apply(ctx, append(rowItems(c.rows), cpItem(c.checkpoint(20, t0.Add(time.Minute)))), reg, "w", time.Now()); err != nil {
					t.Fatal(err)
				}
				feed := tc.feed(c)
				// Each item alone, as it might arrive, then all again: the
				// alerts are the same and stored once.
				for _, it := range feed {
					if _, err := s.apply(ctx, []item{it}, reg, "w", time.Now()); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := s.apply(ctx, feed, reg, "w", time.Now()); err != nil {
					t.Fatal(err)
				}
				got := alertsOf(t, s, c.table)
				if !slices.Equal(got, tc.want) {
					t.Errorf("alerts %v, want %v", got, tc.want)
				}
			})
		})
	}
}

// TestStoreGap: rows missing below rows witnessed keep contig below them;
// once they come, contig walks up past everything witnessed since.
func TestStoreGap(t *testing.T) { eachStore(t, testStoreGap) }

func testStoreGap(t *testing.T, s Store) {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-08", 100)
	c.registry(reg)
	for _, part := range [][2]int{{0, 10}, {40, 70}, {20, 30}, {90, 100}} {
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows[part[0]:part[1]])), reg, "w", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if contig, max := contigOf(t, s, c.table); contig != 10 || max != 100 {
		t.Fatalf("contig %d max %d, want 10 100", contig, max)
	}
	if _, err := s.apply(ctx, c.sign(rowItems(c.rows[10:20])), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	if contig, _ := contigOf(t, s, c.table); contig != 30 {
		t.Fatalf("contig %d, want 30", contig)
	}
	if _, err := s.apply(ctx, c.sign(rowItems(c.rows[30:40])), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	if contig, _ := contigOf(t, s, c.table); contig != 70 {
		t.Fatalf("contig %d, want 70", contig)
	}
	if _, err := s.apply(ctx, c.sign(rowItems(c.rows[70:90])), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	if contig, _ := contigOf(t, s, c.table); contig != 100 {
		t.Fatalf("contig %d, want 100", contig)
	}
	if a := alertsOf(t, s, c.table); len(a) != 0 {
		t.Errorf("alerts %v", a)
	}
}

// TestStoreTailGap: rows lost at the tail, after which the table said
// nothing more, are a gap once a checkpoint names them.
func TestStoreTailGap(t *testing.T) { eachStore(t, testStoreTailGap) }

func testStoreTailGap(t *testing.T, s Store) {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-09", 20)
	c.registry(reg)
	if _, err := s.apply(ctx, append(c.sign(rowItems(c.rows[:17])), cpItem(c.checkpoint(20, t0.Add(time.Minute)))), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	if contig, max := contigOf(t, s, c.table); contig != 17 || max != 20 {
		t.Fatalf("contig %d max %d, want 17 20", contig, max)
	}
	if _, err := s.apply(ctx, rowItems(c.rows[17:]), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	if contig, max := contigOf(t, s, c.table); contig != 20 || max != 20 {
		t.Fatalf("after the resync: contig %d max %d, want 20 20", contig, max)
	}
}

// scanWitness is a witness over s, for the scan's tests: a fake clock at
// t0, and a chain of n rows of table registered with a heartbeat of a
// minute.
func scanWitness(t *testing.T, s Store, table string, n int, onAlert func(Alert)) (*Witness, *clock.Fake, *Registry, *chain) {
	clk := clock.NewFake(t0)
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, table, n)
	c.registry(reg)
	w := &Witness{cfg: Config{Store: s, Registry: reg, Clock: clk, OnAlert: onAlert}, log: quietLog()}
	w.cfg.defaults()
	return w, clk, reg, c
}

// openAlertLines is every unresolved alert of s, each as line makes it.
func openAlertLines(t *testing.T, s Store, line func(Alert) string) []string {
	t.Helper()
	all, err := s.openAlerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range all {
		out = append(out, line(a))
	}
	return out
}

// TestWitnessScan: on each store, the scan asks once for a gap that has
// lasted its grace (and not again before ResyncEvery), resolves it once
// filled, finds a table silent past its heartbeat only while caught up,
// and the table's next row resolves the silence.
func TestWitnessScan(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var got []Alert
		w, clk, reg, c := scanWitness(t, s, "BAC-10", 40, func(a Alert) { got = append(got, a) })
		open := func() []string {
			return openAlertLines(t, s, func(a Alert) string { return fmt.Sprintf("%s %d", a.Kind, a.Seq) })
		}
		scan := func(after time.Duration) {
			t.Helper()
			clk.Set(t0.Add(after))
			w.setCaughtUp()
			if err := w.Scan(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.apply(ctx, c.sign(append(rowItems(c.rows[:10]), rowItems(c.rows[19:30])...)), reg, "w", t0); err != nil {
			t.Fatal(err)
		}
		scan(time.Second)
		if o := open(); len(o) != 0 {
			t.Fatalf("alerts within the gap's grace: %v", o)
		}
		scan(5 * time.Second)
		if o := open(); !slices.Equal(o, []string{"gap 11"}) {
			t.Fatalf("after the grace: %v, want the gap from 11", o)
		}
		if len(got) != 1 || !strings.Contains(got[0].Message, "rows 11 to 19 of BAC-10") {
			t.Fatalf("published %+v", got)
		}
		scan(10 * time.Second)
		if len(got) != 1 {
			t.Fatalf("asked again before ResyncEvery: %+v", got[1:])
		}
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows[10:19])), reg, "w", t0.Add(11*time.Second)); err != nil {
			t.Fatal(err)
		}
		scan(12 * time.Second)
		if o := open(); len(o) != 0 || len(got) != 2 || got[1].State != "resolved" || got[1].Kind != AlertGap {
			t.Fatalf("after the resync: open %v, published %+v", o, got)
		}
		// Silent: only once the heartbeat has passed, and once.
		scan(70 * time.Second)
		if o := open(); len(o) != 0 {
			t.Fatalf("silent before the heartbeat: %v", o)
		}
		scan(72 * time.Second)
		scan(73 * time.Second)
		if o := open(); !slices.Equal(o, []string{"silent 30"}) {
			t.Fatalf("after the heartbeat: %v, want silent", o)
		}
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows[30:31])), reg, "w", t0.Add(80*time.Second)); err != nil {
			t.Fatal(err)
		}
		if o := open(); len(o) != 0 {
			t.Fatalf("the table spoke, still %v", o)
		}
	})
}

// TestWitnessScanBehind: a witness working through a backlog judges
// silence in the stream's time, up to the message below which everything
// is in the database: a table that said nothing for a heartbeat of stream
// time before it is found silent however long the backlog, and one whose
// rows may still wait in the backlog is not.
func TestWitnessScanBehind(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		w, clk, reg, c := scanWitness(t, s, "BAC-11", 12, nil)
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows[:10])), reg, "w", t0); err != nil {
			t.Fatal(err)
		}
		open := func() []string {
			return openAlertLines(t, s, func(a Alert) string { return fmt.Sprintf("%s %d: %s", a.Kind, a.Seq, a.Message) })
		}
		// Ten minutes on, never caught up: the backlog may hold anything.
		clk.Set(t0.Add(10 * time.Minute))
		for _, acked := range []time.Duration{0, 30 * time.Second, time.Minute} {
			if acked > 0 {
				w.ackedAt = t0.Add(acked)
			}
			if err := w.Scan(ctx); err != nil {
				t.Fatal(err)
			}
			if o := open(); len(o) != 0 {
				t.Fatalf("everything before t0+%s witnessed, the table last seen at t0, heartbeat 1m: %v", acked, o)
			}
		}
		w.ackedAt = t0.Add(time.Minute + time.Second)
		if err := w.Scan(ctx); err != nil {
			t.Fatal(err)
		}
		o := open()
		if len(o) != 1 || !strings.HasPrefix(o[0], "silent 10: ") || !strings.Contains(o[0], "judged in the floor stream's time") {
			t.Fatalf("a heartbeat of stream time witnessed after the table's last row: %v, want it silent", o)
		}
		// Its next row, stored after the silence, resolves it.
		if _, err := s.apply(ctx, c.sign(rowItems(c.rows[10:11])), reg, "w", t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if o := open(); len(o) != 0 {
			t.Fatalf("the table spoke, still %v", o)
		}
	})
}

// TestStreamSilences: which of a batch's rows show a table silent past
// its heartbeat in the stream's own time.
func TestStreamSilences(t *testing.T) {
	const hb = 10 * time.Second
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	row := func(seq int64, s int) item { return item{table: "T", row: &Row{Seq: seq}, at: at(s)} }
	cp := func(s int) item { return item{table: "T", cp: &audit.Checkpoint{}, at: at(s)} }
	seen := at(0)
	line := tableState{known: true, contig: 10, max: 10, lastSeen: &seen}
	for _, tc := range []struct {
		name  string
		st    tableState
		items []item
		want  []quiet
	}{
		{"next row within the heartbeat", line, []item{row(11, 10)}, nil},
		{"next row after it", line, []item{row(11, 11)}, []quiet{{at(0), at(11), 10}}},
		{"in the batch, between two rows", line, []item{row(13, 30), row(11, 5), row(12, 14)}, []quiet{{at(14), at(30), 12}}},
		{"twice in one batch", line, []item{row(11, 11), row(12, 22)}, []quiet{{at(0), at(11), 10}, {at(11), at(22), 11}}},
		{"a checkpoint between", line, []item{cp(6), row(11, 12)}, nil},
		{"a resent row between", line, []item{row(7, 6), row(11, 12)}, nil},
		{"a row out of order stops it", line, []item{row(12, 5), row(11, 30)}, nil},
		{"a gap stops it", line, []item{row(12, 30)}, nil},
		{"a message not from the stream stops it", line, []item{{table: "T", row: &Row{Seq: 11}}, row(12, 30)}, nil},
		{"already found silent", tableState{contig: 10, max: 10, lastSeen: &seen, silent: true}, []item{row(11, 30)}, nil},
		{"never seen", tableState{}, []item{row(1, 30)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := streamSilences(tc.st, tc.items, hb); !slices.Equal(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWitnessSilenceInStream: on each store, a table whose next row came
// a heartbeat of stream time after its last word is alerted silent when
// that row is witnessed, however late, raised and resolved at once, and
// once; a scan after it finds nothing more.
func TestWitnessSilenceInStream(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var got []string
		w, clk, reg, c := scanWitness(t, s, "BAC-12", 12, func(a Alert) { got = append(got, a.State+" "+string(a.Kind)) })
		items := rowItems(c.rows)
		for i := range items {
			items[i].at = t0.Add(time.Duration(i) * time.Second)
		}
		items[10].at = t0.Add(9*time.Second + time.Minute + time.Millisecond) // heartbeat 1m
		items[11].at = items[10].at.Add(time.Second)
		if _, err := s.apply(ctx, c.sign(items[:10]), reg, "w", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// Witnessed an hour late, and twice (a second witness's copy).
		for range 2 {
			a, err := s.apply(ctx, c.sign(items[10:]), reg, "w", t0.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			w.publish(a)
		}
		if !slices.Equal(got, []string{"raised silent", "resolved silent"}) {
			t.Fatalf("published %v, want the silence raised and resolved once", got)
		}
		var msg string
		var resolved bool
		scanAll(t, s, func(scan func(...any) error) error { return scan(&msg, &resolved) },
			`SELECT message, resolved_at IS NOT NULL FROM S.alerts WHERE table_id = $1 AND kind = 'silent'`, "BAC-12")
		if !resolved || !strings.Contains(msg, "from 2026-11-25T12:00:09Z to 2026-11-25T12:01:09Z") || !strings.Contains(msg, "row 11") {
			t.Fatalf("stored %q (resolved %v)", msg, resolved)
		}
		clk.Set(items[11].at.Add(time.Second))
		w.setCaughtUp()
		if err := w.Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if o := openAlertLines(t, s, func(a Alert) string { return string(a.Kind) }); len(o) != 0 || len(got) != 2 {
			t.Fatalf("after a scan: open %v, published %v", o, got)
		}
	})
}

// TestTableRuns: the PostgreSQL store reads a batch's seqs as runs, every
// table's in one statement; the runs must cover exactly the seqs asked for,
// no more, each under its own table.
func TestTableRuns(t *testing.T) {
	for _, c := range []struct {
		name   string
		add    func(r *tableRuns)
		tables []string
		lo, hi []int64
	}{
		{"nothing", func(r *tableRuns) { r.add("A", nil, 1) }, nil, nil, nil},
		{"one", func(r *tableRuns) { r.add("A", []int64{5}, 1) }, []string{"A"}, []int64{5}, []int64{5}},
		{"repeats, out of order", func(r *tableRuns) { r.add("A", []int64{3, 2, 4, 3, 2, 1, 9, 10, 12}, 1) },
			[]string{"A", "A", "A"}, []int64{1, 9, 12}, []int64{4, 10, 12}},
		{"two tables", func(r *tableRuns) {
			r.add("A", []int64{0, 1, 2, 100, 99, 101}, 1)
			r.add("B", []int64{7}, 1)
			r.add("C", nil, 1)
			r.add("D", []int64{8, 9}, 1)
		}, []string{"A", "A", "B", "D"}, []int64{0, 99, 7, 8}, []int64{2, 101, 7, 9}},
		{"signing times, a minute apart ends a run", func(r *tableRuns) {
			m := int64(time.Minute)
			r.add("A", []int64{10, 10 + m, 10 + 2*m + 1, 5}, m)
		}, []string{"A", "A"}, []int64{5, 10 + 2*int64(time.Minute) + 1}, []int64{10 + int64(time.Minute), 10 + 2*int64(time.Minute) + 1}},
	} {
		var r tableRuns
		c.add(&r)
		if !slices.Equal(r.tables, c.tables) || !slices.Equal(r.lo, c.lo) || !slices.Equal(r.hi, c.hi) {
			t.Errorf("%s: runs %v %v..%v, want %v %v..%v", c.name, r.tables, r.lo, r.hi, c.tables, c.lo, c.hi)
		}
	}
}

// TestPickByTable: an answer for a table the batch did not ask for is an
// error, not a row put under another table.
func TestPickByTable(t *testing.T) {
	reads := []tableRead{newTableRead("A"), newTableRead("B")}
	read := readFork(pickByTable([]string{"A", "B"}, reads))
	row := func(table string, seq int64) scanFunc {
		return func(dest ...any) error {
			*dest[0].(*string), *dest[1].(*int64) = table, seq
			return nil
		}
	}
	if err := read(row("B", 7)); err != nil || !reads[1].forkAt[7] || len(reads[0].forkAt) != 0 {
		t.Fatalf("B's fork at 7: err %v, A %v, B %v", err, reads[0].forkAt, reads[1].forkAt)
	}
	if err := read(row("C", 7)); err == nil {
		t.Fatal("an answer for table C, not asked for, was taken")
	}
}

// TestResyncBacksOff: on each store, a hole that stays open is asked for
// again after ResyncEvery, then after twice that, four times, ...; the
// exact hole each time (from, to), never the rows after it.
func TestResyncBacksOff(t *testing.T) {
	eachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		w, clk, reg, c := scanWitness(t, s, "BAC-13", 40, nil)
		type ask struct {
			at       time.Duration
			from, to int64
		}
		var asks []ask
		var now time.Duration
		w.askedResync = func(table string, from, to int64) { asks = append(asks, ask{now, from, to}) }
		if _, err := s.apply(ctx, c.sign(append(rowItems(c.rows[:10]), rowItems(c.rows[19:30])...)), reg, "w", t0); err != nil {
			t.Fatal(err)
		}
		every := w.cfg.ResyncEvery
		for now = 0; now <= 40*every; now += time.Second {
			clk.Set(t0.Add(now))
			w.setCaughtUp()
			if err := w.Scan(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// The first ask once the gap's grace is over, then ResyncEvery,
		// twice, four, eight and sixteen times it, and sixteen times on.
		grace := w.cfg.GapGrace
		want := []time.Duration{grace}
		for k, at := 0, grace; ; k++ {
			at += every << min(k, maxResyncDoublings)
			if at > 40*every {
				break
			}
			want = append(want, at)
		}
		var got []time.Duration
		for _, a := range asks {
			if a.from != 11 || a.to != 19 {
				t.Fatalf("asked for rows %d to %d, want the hole, 11 to 19", a.from, a.to)
			}
			got = append(got, a.at)
		}
		// A scan sees whole seconds: each ask within a second of its time.
		if len(got) != len(want) {
			t.Fatalf("asked at %v, want %v", got, want)
		}
		for i := range got {
			if d := got[i] - want[i]; d < 0 || d > time.Second {
				t.Fatalf("asked at %v, want %v", got, want)
			}
		}
	})
}
