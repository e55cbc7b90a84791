package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

func TestAckRun(t *testing.T) {
	for _, tc := range []struct {
		seqs  []uint64
		floor uint64
		last  int
		upTo  uint64
	}{
		{[]uint64{1, 2, 3}, 0, 2, 3},
		{[]uint64{3, 1, 2}, 0, 0, 3},  // taken in order of sequence
		{[]uint64{4, 5, 6}, 0, -1, 0}, // above a gap: another witness's 1..3
		{[]uint64{1, 2, 4, 5}, 0, 1, 2},
		{[]uint64{2, 3, 4}, 3, 2, 4},  // 2 and 3 acknowledged already (a redelivery)
		{[]uint64{1, 0, 2}, 0, -1, 0}, // a sequence not known (first in order) acknowledges nothing
		{[]uint64{7, 7, 8}, 6, 2, 8},  // the same message twice
		{[]uint64{}, 5, -1, 5},
	} {
		order := make([]int, len(tc.seqs))
		for i := range order {
			order[i] = i
		}
		// As ackCommitted orders them.
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && tc.seqs[order[j]] < tc.seqs[order[j-1]]; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
		last, upTo := ackRun(tc.seqs, order, tc.floor)
		if last != tc.last || upTo != tc.upTo {
			t.Errorf("ackRun(%v, floor %d) = %d, %d; want %d, %d", tc.seqs, tc.floor, last, upTo, tc.last, tc.upTo)
		}
	}
}

func TestServerAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"2.9.10": false, "2.10.22": false, "2.11.0": true, "2.15.2": true, "v2.12.1": true,
		"3.0.0": true, "2.11.0-beta.1": true, "": false, "x.y": false} {
		if got := serverAtLeast(v, 2, 11); got != want {
			t.Errorf("serverAtLeast(%q, 2, 11) = %v", v, got)
		}
	}
}

// pinFloor is a stream of one table's rows, each followed by the
// checkpoint the table signs over it (row seq k is stream seq 2k-1, its
// checkpoint 2k), and a database, for the consumer's tests.
type pinFloor struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	store  *PGStore
	stream string
	subj   Subjects
	reg    *Registry
	rows   int
}

func newPinFloor(t *testing.T, rows int) *pinFloor {
	cluster := floortest.Cluster(t, 3)
	ctx := context.Background()
	pool, schema := floortest.Postgres(t)
	store, err := OpenStore(ctx, pool, schema)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	f := &pinFloor{nc: nc, js: js, store: store, stream: "PIN_" + strings.ToUpper(schema), subj: Subjects{Root: "pin" + strings.ToLower(schema[2:8])},
		reg: &Registry{Heartbeat: time.Hour, Tables: map[string]TableEntry{}}, rows: rows}
	if _, err := EnsureStream(ctx, js, f.stream, f.subj, 3, time.Hour); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), f.stream) })
	c := newChain(t, "PIN-1", rows)
	c.registry(f.reg)
	for _, r := range c.rows {
		if _, err := js.PublishAsync(f.subj.root()+".PIN-1.pit.events", rowPayload(r)); err != nil {
			t.Fatal(err)
		}
		cp, _ := json.Marshal(c.checkpoint(r.Seq, t0.Add(time.Duration(r.Seq)*time.Millisecond)))
		if _, err := js.PublishAsync(f.subj.root()+".PIN-1.pit.checkpoint", cp); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("rows not in the stream after 30s")
	}
	return f
}

func (f *pinFloor) config(name string) Config {
	return Config{Name: name, NATS: f.nc.ConnectedUrl(), Stream: f.stream, Consumer: "witness", Replicas: 3, Subjects: f.subj, MaxAge: time.Hour,
		Store: f.store, Registry: f.reg, Logger: quietLog(), Batch: 500}
}

// stored is the table's witnessed rows 1..contig and its highest seq.
func (f *pinFloor) stored(t *testing.T) (contig, maxSeq int64) {
	t.Helper()
	err := f.store.pool.QueryRow(context.Background(), f.store.sql(`SELECT coalesce(max(contig),0), coalesce(max(max_seq),0) FROM S.tables`)).Scan(&contig, &maxSeq)
	if err != nil {
		t.Fatal(err)
	}
	return contig, maxSeq
}

// TestWitnessPinnedTakeOver: witness a takes a batch and dies with it
// uncommitted; witness b takes over the pinned consumer, stores the rows
// above a's batch and must not acknowledge them (one cumulative
// acknowledgement would cover a's too) until a's rows come again to b and
// are stored. Throughout, the consumer's acknowledgement floor never
// passes what PostgreSQL holds; at the end every row is stored once and
// acknowledged.
func TestWitnessPinnedTakeOver(t *testing.T) {
	testenv.Long(t, "a pinned consumer's take-over (a NATS cluster, PostgreSQL; the pin's 5 s and the ack wait's 10 s)")
	f := newPinFloor(t, 3000)
	if v := f.nc.ConnectedServerVersion(); !serverAtLeast(v, 2, 11) {
		testenv.Missing(t, fmt.Sprintf("nats-server 2.11 or later (this is %s; .ci/test builds go.mod's into %s)", v, natsserver.CachedBinary()))
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := New(ctx, f.config("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !a.pinned {
		t.Fatal("consumer not pinned on nats-server", f.nc.ConnectedServerVersion())
	}
	held, err := a.cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second), jetstream.FetchPriorityGroup(PriorityGroup))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range held.Messages() {
		if md, _ := m.Metadata(); md.Sequence.Stream != uint64(n+1) {
			t.Fatalf("a's message %d is stream seq %d", n, md.Sequence.Stream)
		}
		n++
	}
	if n != 500 {
		t.Fatalf("a took %d messages, want 500 (%v)", n, held.Error())
	}
	a.Close() // dies with rows 1..250 and their checkpoints unacknowledged and not stored

	b, err := New(ctx, f.config("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	go b.Run(ctx)
	above := false // b stored rows above a's batch while a's were missing
	testenv.EventuallyErr(t, 90*time.Second, "every row stored and acknowledged", func() error {
		ci, err := b.cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		contig, maxSeq := f.stored(t)
		// Stream seq 2*contig+1 is row contig+1, which may be held
		// pending (committed) until its checkpoint, the next message.
		if int64(ci.AckFloor.Stream) > 2*contig+1 {
			t.Fatalf("the consumer acknowledged up to stream seq %d, PostgreSQL holds rows 1..%d (highest %d)", ci.AckFloor.Stream, contig, maxSeq)
		}
		if contig == 0 && maxSeq > 250 {
			above = true
		}
		if contig == int64(f.rows) && ci.AckFloor.Stream == uint64(2*f.rows) && ci.NumAckPending == 0 && ci.NumPending == 0 {
			return nil
		}
		return fmt.Errorf("rows 1..%d stored (highest %d), acknowledged to %d, %d pending acknowledgement", contig, maxSeq, ci.AckFloor.Stream, ci.NumAckPending)
	})
	if !above {
		t.Error("b never stored rows above a's held batch before a's came again: the take-over was not tested")
	}
	var count, alerts int64
	f.store.pool.QueryRow(ctx, f.store.sql(`SELECT count(*) FROM S.rows`)).Scan(&count)
	f.store.pool.QueryRow(ctx, f.store.sql(`SELECT count(*) FROM S.alerts WHERE tamper`)).Scan(&alerts)
	if count != int64(f.rows) || alerts != 0 {
		t.Fatalf("%d rows stored of %d, %d tamper alerts", count, f.rows, alerts)
	}
}

// TestWitnessExplicitAcks: a consumer made before the floor broker knew
// pinned clients (or by an older witness) acknowledges each message, and a
// witness keeps it so; two witnesses share it and store every row once.
func TestWitnessExplicitAcks(t *testing.T) {
	testenv.Long(t, "two witnesses on an explicitly acknowledged consumer (a NATS cluster, PostgreSQL)")
	f := newPinFloor(t, 3000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := f.js.Stream(ctx, f.stream)
	if err != nil {
		t.Fatal(err)
	}
	// As a witness on nats-server 2.9 makes it.
	if _, pinned, err := ensureConsumer(ctx, s, "2.9.10", f.config("old")); err != nil || pinned {
		t.Fatalf("consumer for 2.9.10: pinned %v, %v", pinned, err)
	}
	for _, name := range []string{"a", "b"} {
		w, err := New(ctx, f.config(name))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if w.pinned {
			t.Fatal("an explicitly acknowledged consumer was taken as pinned")
		}
		go w.Run(ctx)
	}
	testenv.EventuallyErr(t, 60*time.Second, "every row stored and acknowledged by two witnesses", func() error {
		contig, maxSeq := f.stored(t)
		ci, err := s.Consumer(ctx, "witness")
		if err != nil {
			t.Fatal(err)
		}
		info, err := ci.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.AckPolicy != jetstream.AckExplicitPolicy {
			t.Fatalf("consumer's ack policy became %s", info.Config.AckPolicy)
		}
		if contig == int64(f.rows) && info.AckFloor.Stream == uint64(2*f.rows) && info.NumAckPending == 0 {
			return nil
		}
		return fmt.Errorf("rows 1..%d stored (highest %d), acknowledged to %d", contig, maxSeq, info.AckFloor.Stream)
	})
}

// TestWitnessGuardsStreams: the stream deleted (anyone the broker lets
// use the JetStream API), then the shared consumer, then the stream's
// subjects narrowed: each raises stream_lost on floor/alerts (within
// GuardEvery of a failed fetch or a check), is made or set back again as
// far as the witness's login may, the alert resolved, and the table's
// next rows and checkpoints are witnessed.
func TestWitnessGuardsStreams(t *testing.T) {
	testenv.Long(t, "the witness's guard of its streams (a NATS cluster, PostgreSQL)")
	f := newPinFloor(t, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var alerts []Alert
	cfg := f.config("g")
	cfg.OnAlert = func(a Alert) {
		mu.Lock()
		alerts = append(alerts, a)
		mu.Unlock()
	}
	w, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Each step deals a new table's rows and checkpoints, registered
	// before the witness runs (the registry is read, not locked, by the
	// witness's goroutines).
	chains := map[int]*chain{}
	for i := 1; i <= 3; i++ {
		chains[i] = newChain(t, fmt.Sprintf("G-%d", i), 3)
		chains[i].registry(f.reg)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	step := 0
	witnessed := func(table string, n int64) bool {
		var got int64
		f.store.pool.QueryRow(ctx, f.store.sql(`SELECT coalesce(max(contig),0) FROM S.tables WHERE table_id = $1`), table).Scan(&got)
		return got >= n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		testenv.EventuallyErr(t, 60*time.Second, what, func() error {
			if ok() {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("alerts %+v", alerts)
		})
	}
	alerted := func(state string, kind AlertKind) func() bool {
		n := 0
		mu.Lock()
		for _, a := range alerts {
			if a.State == state && a.Kind == kind {
				n++
			}
		}
		mu.Unlock()
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			k := 0
			for _, a := range alerts {
				if a.State == state && a.Kind == kind {
					k++
				}
			}
			return k > n
		}
	}
	dealOn := func() {
		t.Helper()
		step++
		table := fmt.Sprintf("G-%d", step)
		ch := chains[step]
		for _, r := range ch.rows {
			if _, err := f.js.Publish(ctx, f.subj.root()+"."+table+".pit.events", rowPayload(r)); err != nil {
				t.Fatalf("publish: %v", err)
			}
			cp, _ := json.Marshal(ch.checkpoint(r.Seq, t0.Add(time.Duration(r.Seq)*time.Millisecond)))
			if _, err := f.js.Publish(ctx, f.subj.root()+"."+table+".pit.checkpoint", cp); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
		waitFor(table+"'s rows witnessed", func() bool { return witnessed(table, 3) })
	}
	waitFor("the floor's rows witnessed", func() bool { return witnessed("PIN-1", 4) })
	for _, tc := range []struct {
		name   string
		attack func() error
	}{
		{"stream deleted", func() error { return f.js.DeleteStream(ctx, f.stream) }},
		{"consumer deleted", func() error { return f.js.DeleteConsumer(ctx, f.stream, "witness") }},
		{"subjects narrowed", func() error {
			_, err := f.js.UpdateStream(ctx, jetstream.StreamConfig{Name: f.stream, Subjects: []string{f.subj.root() + ".NONE.pit.events"}, Replicas: 3,
				Storage: jetstream.FileStorage, MaxAge: time.Hour, MaxMsgSize: MaxMessageBytes})
			return err
		}},
	} {
		raised, resolved := alerted("raised", AlertStreamLost), alerted("resolved", AlertStreamLost)
		if err := tc.attack(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		waitFor(tc.name+": stream_lost raised", raised)
		waitFor(tc.name+": stream_lost resolved", resolved)
		dealOn()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range alerts {
		if a.Tamper {
			t.Errorf("a tamper alert: %+v", a)
		}
	}
}

// TestWitnessStalled: messages given out and none acknowledged (a
// witness that cannot commit) is witness_stalled once StallAfter has
// passed on the witness's clock, not before, and resolved once the
// consumer moves again.
func TestWitnessStalled(t *testing.T) {
	testenv.Long(t, "a stalled witness (a NATS cluster, PostgreSQL)")
	f := newPinFloor(t, 4)
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	var got []string
	cfg := f.config("s")
	cfg.Clock = clk
	cfg.OnAlert = func(a Alert) { got = append(got, a.State+" "+string(a.Kind)) }
	w, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The witness takes every message and dies before committing.
	_, cons := w.consumer()
	opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(5 * time.Second)}
	if w.isPinned() {
		opts = append(opts, jetstream.FetchPriorityGroup(PriorityGroup))
	}
	b, err := cons.Fetch(8, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 8 {
		t.Fatalf("fetched %d messages, want 8 (%v)", len(msgs), b.Error())
	}
	g := &guardState{lost: map[string]bool{}, movedAt: clk.Now()}
	for _, step := range []struct {
		after time.Duration
		want  []string
	}{
		{0, nil},
		{StallAfter - time.Second, nil},
		{time.Second, []string{"raised witness_stalled"}},
		{GuardEvery, []string{"raised witness_stalled"}}, // once
	} {
		clk.Advance(step.after)
		w.guard(ctx, g)
		if !slices.Equal(got, step.want) {
			t.Fatalf("%s on: alerts %v, want %v", step.after, got, step.want)
		}
	}
	// Committed at last: the consumer moves.
	if err := w.Apply(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	w.guard(ctx, g)
	if want := []string{"raised witness_stalled", "resolved witness_stalled"}; !slices.Equal(got, want) {
		t.Fatalf("after the commit: %v, want %v", got, want)
	}
}
