package floor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"

	"github.com/tablectl/tablectl/floor"
	"github.com/tablectl/tablectl/internal/floorsim"
	"github.com/tablectl/tablectl/internal/floortest"
	"github.com/tablectl/tablectl/internal/logtail"
	"github.com/tablectl/tablectl/internal/mosquitto"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/signedcmd"
)

// TestResyncExact is issue 32's measure of the exact resync: a real table
// (controller process, simulated shoe, its own Mosquitto) whose uplink to
// the floor's NATS is a relay that loses chosen pit/events messages, three
// holes of 5, 1 and 11 rows; the witness finds each hole and asks the
// table, signed, for exactly its rows (from..to); the table sends them
// again and the witnessed copy is whole. The rows the table sent twice
// (each event message on the table's subject whose row had been sent
// before) are at most 1.1 times the rows lost, and each hole is asked for
// once before it is filled: one resync in flight per hole.
func TestResyncExact(t *testing.T) {
	testenv.Long(t, "a table controller, a NATS node, PostgreSQL and a witness (about a minute)")
	schema, bridge, exe := bridgedFloorParts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	f, err := floorsim.Start(ctx, floorsim.Options{Dir: t.TempDir(), Tables: 1, Nodes: 1, Witness: 1,
		CardPace: 100 * time.Millisecond, CoupPace: 500 * time.Millisecond, Seed: 32,
		Postgres: floortest.PostgresURL(), Schema: schema, Bridge: string(bridge),
		Exe: exe, Env: []string{childEnv + "=1"}, Log: testLog(t),
		// The table's Mosquitto without its bridge: the relay below is
		// its uplink.
		StartBroker: func(conf string) (floorsim.Broker, error) {
			return mosquitto.Start(withoutBridge(t, conf), 10*time.Second)
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tb := f.Tables[0]
	r := startRelay(t, f, tb)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("table %s controller:\n%s", tb.ID, logtail.Lines(tb.Log(), 20))
			t.Logf("witness:\n%s", logtail.Lines(f.WitnessLog(0), 20))
		}
	})
	contig := func() int64 {
		var n int64
		if err := f.Pool.QueryRow(ctx, `SELECT coalesce(max(contig),0) FROM `+f.Store.(*floor.PGStore).Schema()+`.tables WHERE table_id = $1`, tb.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := testenv.WaitFor(ctx, "30 rows witnessed", func() bool { return contig() >= 30 }); err != nil {
		t.Fatal(err)
	}
	// The holes, a little ahead of what the table has sent.
	holes := r.arm([][2]int64{{10, 14}, {30, 30}, {50, 60}})
	missing := 0
	for _, h := range holes {
		missing += int(h[1] - h[0] + 1)
	}
	last := holes[len(holes)-1][1]
	t.Logf("holes %v: %d rows lost on the way to the floor", holes, missing)
	// Each hole asked for, sent again, witnessed; then the table deals
	// on past the last one and the witness holds every row.
	if err := testenv.WaitFor(ctx, fmt.Sprintf("every row to %d witnessed", last+20), func() bool { return contig() >= last+20 }); err != nil {
		t.Fatalf("%v (witnessed to %d; resyncs asked %v)", err, contig(), r.asks())
	}
	resent, dropped, asks := r.result()
	ratio := float64(resent) / float64(missing)
	t.Logf("missing %d, dropped %d, resent %d (ratio %.2f), resyncs asked %v", missing, dropped, resent, ratio, r.asks())
	if dropped != missing {
		t.Fatalf("the relay dropped %d rows, want %d", dropped, missing)
	}
	if float64(resent) > 1.1*float64(missing) {
		t.Errorf("resent %d rows for %d missing: more than 1.1 times", resent, missing)
	}
	// One resync per hole, for exactly its rows, before it was filled.
	for _, h := range holes {
		var got []string
		for _, a := range asks {
			if a.from >= h[0] && a.from <= h[1] && !a.afterFill {
				got = append(got, fmt.Sprintf("%d-%d", a.from, a.to))
			}
		}
		if want := fmt.Sprintf("%d-%d", h[0], h[1]); len(got) != 1 || got[0] != want {
			t.Errorf("hole %d-%d: resyncs asked before it was filled %v, want one, %s", h[0], h[1], got, want)
		}
	}
}

// withoutBridge writes the Mosquitto config conf without its bridge (the
// lines from its first `connection`) and returns the new file.
func withoutBridge(t *testing.T, conf string) string {
	b, err := os.ReadFile(conf)
	if err != nil {
		return conf
	}
	text := string(b)
	if i := regexp.MustCompile(`(?m)^connection `).FindStringIndex(text); i != nil {
		text = text[:i[0]]
	}
	out := conf + ".nobridge"
	if err := os.WriteFile(out, []byte(text), 0o644); err != nil {
		t.Error(err)
	}
	return out
}

// relay is the table's uplink in the test: every message of the table's
// Mosquitto under its prefix to the floor's NATS (topic to subject), but
// the pit/events messages of the rows armed to be lost, the first time
// each is sent; and the floor's commands to the table back.
type relay struct {
	t  *testing.T
	nc *nats.Conn
	mu sync.Mutex
	// head is the highest row sent; sent, how often each row was sent
	// (dropped or not) since the holes were armed.
	head     int64
	armed    bool
	drop     map[int64]bool
	sent     map[int64]int
	resent   int
	dropped  int
	filledAt map[int64]time.Time // each row's first arrival after its loss
	asked    []resyncAsk
}

type resyncAsk struct {
	from, to  int64
	at        time.Time
	afterFill bool
}

func startRelay(t *testing.T, f *floorsim.Floor, tb *floorsim.Table) *relay {
	t.Helper()
	var cfg struct {
		MQTT struct{ Broker, Prefix string } `json:"mqtt"`
	}
	b, err := os.ReadFile(tb.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(f.Cluster.URLs())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &relay{t: t, nc: nc, drop: map[int64]bool{}, sent: map[int64]int{}, filledAt: map[int64]time.Time{}}
	prefix := cfg.MQTT.Prefix
	opts := paho.NewClientOptions().AddBroker(cfg.MQTT.Broker).SetClientID("test-relay-" + tb.ID).SetCleanSession(true).
		SetOrderMatters(true).SetAutoReconnect(true)
	cl := paho.NewClient(opts)
	if tok := cl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("the relay's connection to the table's Mosquitto: %v", tok.Error())
	}
	t.Cleanup(func() { cl.Disconnect(100) })
	cmdTopic := prefix + "/cmd"
	if tok := cl.Subscribe(prefix+"/#", 1, func(_ paho.Client, m paho.Message) {
		if m.Topic() == cmdTopic {
			return // the floor's own command, relayed down below
		}
		if strings.HasSuffix(m.Topic(), "/pit/events") && !r.pass(m.Payload()) {
			return
		}
		if err := nc.Publish(strings.ReplaceAll(m.Topic(), "/", "."), m.Payload()); err != nil {
			t.Errorf("relay to NATS: %v", err)
		}
	}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("relay subscribe: %v", tok.Error())
	}
	if _, err := nc.Subscribe(strings.ReplaceAll(cmdTopic, "/", "."), func(m *nats.Msg) {
		r.heard(m.Data)
		cl.Publish(cmdTopic, 1, false, m.Data)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// pass says whether an event message goes on to the floor, counting it.
func (r *relay) pass(payload []byte) bool {
	var ev struct {
		Seq int64 `json:"seq"`
	}
	if err := json.Unmarshal(payload, &ev); err != nil || ev.Seq == 0 {
		r.t.Errorf("an event message the relay cannot read: %v %.80q", err, payload)
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.head = max(r.head, ev.Seq)
	if !r.armed {
		return true
	}
	n := r.sent[ev.Seq]
	r.sent[ev.Seq] = n + 1
	switch {
	case n == 0 && r.drop[ev.Seq]:
		r.dropped++
		return false
	case n > 0:
		r.resent++
		if _, ok := r.filledAt[ev.Seq]; !ok {
			r.filledAt[ev.Seq] = time.Now()
		}
	}
	return true
}

// arm makes holes at the given offsets past the rows sent so far and
// returns them as rows.
func (r *relay) arm(offsets [][2]int64) [][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var holes [][2]int64
	for _, o := range offsets {
		h := [2]int64{r.head + o[0], r.head + o[1]}
		for s := h[0]; s <= h[1]; s++ {
			r.drop[s] = true
		}
		holes = append(holes, h)
	}
	r.armed = true
	return holes
}

// heard notes a resync the floor asked the table for.
func (r *relay) heard(data []byte) {
	var c signedcmd.Command
	if err := json.Unmarshal(data, &c); err != nil || c.Action != signedcmd.ActionResync {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, resyncAsk{from: c.From, to: c.To, at: time.Now()})
}

func (r *relay) asks() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.asked {
		out = append(out, fmt.Sprintf("%d-%d", a.from, a.to))
	}
	return out
}

// result is the rows sent again, the rows dropped, and each resync asked
// for, marked when its hole's last row had arrived before it.
func (r *relay) result() (resent, dropped int, asks []resyncAsk) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.asked {
		a.afterFill = r.filledBefore(a.from, max(a.to, a.from), a.at)
		asks = append(asks, a)
	}
	sort.Slice(asks, func(i, j int) bool { return asks[i].at.Before(asks[j].at) })
	return r.resent, r.dropped, asks
}

// filledBefore says whether every row from..to had arrived again before at.
func (r *relay) filledBefore(from, to int64, at time.Time) bool {
	for s := from; s <= to; s++ {
		got, ok := r.filledAt[s]
		if !ok || !got.Before(at) {
			return false
		}
	}
	return true
}
