package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/testenv"
)

// TestWitnessGroups (issue 32, item 5): two witnesses' groups share a
// floor (a NATS cluster, PostgreSQL), each through a consumer of its own
// that gives it only its group's tables. Both groups work at once; then
// group a's witness leaves while rows keep coming and another witness of
// group a joins: the group moves to it. At the end every table's rows are
// witnessed exactly once, and each group's consumer gave out its own
// tables' messages and no other's (no message counted twice).
func TestWitnessGroups(t *testing.T) {
	testenv.Long(t, "two witnesses' groups on one floor (a NATS cluster, PostgreSQL; the pin's 5 s)")
	cluster := floortest.Cluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, schema := floortest.Postgres(t)
	store, err := OpenStore(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 300 // each table's, half before group a's witness leaves
	stream, subj := "GROUPS_"+strings.ToUpper(schema), Subjects{Root: "grp" + strings.ToLower(schema[2:8])}
	reg := &Registry{Heartbeat: time.Hour, Tables: map[string]TableEntry{}}
	groups := map[string][]string{"a": {"A-1", "A-2"}, "b": {"B-1", "B-2", "B-3"}}
	chains := map[string]*chain{}
	for g, tables := range groups {
		for _, id := range tables {
			c := newChain(t, id, rows)
			c.registry(reg)
			e := reg.Tables[id]
			e.Group = g
			reg.Tables[id] = e
			chains[id] = c
		}
	}
	if got := reg.Groups(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("groups %v", got)
	}
	if _, err := EnsureStream(ctx, js, stream, subj, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	// publish sends rows from..to of every table, each with its checkpoint.
	publish := func(from, to int) {
		t.Helper()
		for seq := from; seq <= to; seq++ {
			for id, c := range chains {
				r := c.rows[seq-1]
				cp, _ := json.Marshal(c.checkpoint(r.Seq, t0.Add(time.Duration(r.Seq)*time.Millisecond)))
				if _, err := js.PublishAsync(subj.root()+"."+id+".pit.events", rowPayload(r)); err != nil {
					t.Fatal(err)
				}
				if _, err := js.PublishAsync(subj.root()+"."+id+".pit.checkpoint", cp); err != nil {
					t.Fatal(err)
				}
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			t.Fatal("rows not in the stream after 30s")
		}
	}
	config := func(name, group string) Config {
		return Config{Name: name, NATS: nc.ConnectedUrl(), Stream: stream, Consumer: "witness", Group: group, Replicas: 3, Subjects: subj,
			MaxAge: time.Hour, Store: store, Registry: reg, Logger: quietLog(), Batch: 100}
	}
	start := func(name, group string) *Witness {
		t.Helper()
		w, err := New(ctx, config(name, group))
		if err != nil {
			t.Fatal(err)
		}
		go w.Run(ctx)
		return w
	}
	witnessed := func(upTo int64) func() error {
		return func() error {
			for id := range chains {
				var n, contig int64
				if err := pool.QueryRow(ctx, store.sql(`SELECT (SELECT count(*) FROM S.rows WHERE table_id = $1), coalesce((SELECT contig FROM S.tables WHERE table_id = $1), 0)`), id).Scan(&n, &contig); err != nil {
					return err
				}
				if contig < upTo || n != contig {
					return fmt.Errorf("%s: rows 1..%d witnessed, %d stored; want 1..%d", id, contig, n, upTo)
				}
			}
			return nil
		}
	}

	publish(1, rows/2)
	a1, b1 := start("a1", "a"), start("b1", "b")
	defer b1.Close()
	testenv.EventuallyErr(t, time.Minute, "both groups witnessed", witnessed(rows/2))

	// Group a's witness leaves with rows on their way; another joins.
	a1.Close()
	publish(rows/2+1, rows)
	a2 := start("a2", "a")
	defer a2.Close()
	testenv.EventuallyErr(t, 2*time.Minute, "group a moved to a2, every row witnessed", witnessed(rows))

	// Each group's consumer gave out exactly its tables' messages: a row
	// and a checkpoint per seq, none of the other group's.
	for g, tables := range groups {
		cons, err := js.Consumer(ctx, stream, GroupConsumer("witness", g))
		if err != nil {
			t.Fatal(err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(2 * rows * len(tables))
		if ci.Delivered.Consumer != want || ci.NumPending != 0 {
			t.Errorf("group %s's consumer gave out %d messages (%d pending); its %d tables have %d", g, ci.Delivered.Consumer, ci.NumPending, len(tables), want)
		}
	}
	if s := a2.Stats(); s.Rows == 0 {
		t.Errorf("a2, which joined group a, witnessed no row: %+v", s)
	}
	var tamper int64
	if err := pool.QueryRow(ctx, store.sql(`SELECT count(*) FROM S.alerts WHERE tamper`)).Scan(&tamper); err != nil || tamper != 0 {
		t.Fatalf("%d tamper alerts (%v)", tamper, err)
	}
}

// TestRegistryGroups: the registry's groups, and the names it refuses.
func TestRegistryGroups(t *testing.T) {
	key := `"public_keys": ["` + strings.Repeat("A", 43) + `="]`
	reg, err := ParseRegistry([]byte(`{"tables": {"T-1": {`+key+`, "group": "east"}, "T-2": {`+key+`}, "T-3": {`+key+`, "group": "east"}, "T-4": {`+key+`, "group": "west_2"}}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if g := reg.Groups(); !slices.Equal(g, []string{"east", "west_2"}) {
		t.Errorf("groups %v", g)
	}
	if g := reg.GroupTables("east"); !slices.Equal(g, []string{"T-1", "T-3"}) {
		t.Errorf("east's tables %v", g)
	}
	if g := reg.GroupTables(""); len(g) != 4 {
		t.Errorf("the whole floor's tables %v", g)
	}
	if !reg.inGroup("T-2", "") || reg.inGroup("T-2", "east") || !reg.inGroup("T-1", "east") {
		t.Error("inGroup")
	}
	for _, bad := range []string{"a.b", "a b", "a*", ">", strings.Repeat("g", 33)} {
		if _, err := ParseRegistry([]byte(`{"tables": {"T-1": {`+key+`, "group": "`+bad+`"}}}`), ""); err == nil {
			t.Errorf("group %q taken", bad)
		}
	}
}
