package floor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/natsserver"
	"github.com/tablectl/tablectl/internal/testenv"
)

// addRow appends a row of kind and body, at at, to c's chain.
func (c *chain) addRow(kind, body string, at time.Time) Row {
	var prev audit.Hash
	if len(c.rows) > 0 {
		prev = c.rows[len(c.rows)-1].Hash
	}
	seq := int64(len(c.rows) + 1)
	r := Row{Table: c.table, Seq: seq, At: at.UTC().Format(time.RFC3339Nano), Kind: kind, Shoe: 1, Coup: seq, Body: []byte(body), PrevHash: prev}
	r.Hash = r.ComputeHash()
	c.rows = append(c.rows, r)
	return r
}

// viewServer serves v until the test ends; the event streams it holds
// open are cut first.
func viewServer(t *testing.T, v *View) *httptest.Server {
	srv := httptest.NewServer(v)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// largestEvent is the largest data line events has read, in bytes.
var largestEvent atomic.Int64

// events follows a floor view's server-sent events: each data line.
func events(t *testing.T, url string) <-chan string {
	t.Helper()
	resp, err := http.Get(url + "/floor/events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan string, 4096)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				if n := int64(len(d)); n > largestEvent.Load() {
					largestEvent.Store(n) // one writer: this goroutine
				}
				out <- d
			}
		}
	}()
	return out
}

// nextEntry is the next table entry on evs for which ok holds.
func nextEntry(t *testing.T, evs <-chan string, what string, ok func(TableView) bool) TableView {
	t.Helper()
	var got TableView
	testenv.Eventually(t, 10*time.Second, what, func() bool {
		for {
			select {
			case d, open := <-evs:
				if !open {
					return false
				}
				var tv TableView
				if json.Unmarshal([]byte(d), &tv) == nil && tv.Table != "" && ok(tv) {
					got = tv
					return true
				}
			default:
				return false
			}
		}
	})
	return got
}

// group is tv's alert group of kind, or nil.
func group(tv TableView, kind string) *AlertGroup {
	for i := range tv.Alerts {
		if tv.Alerts[i].Kind == kind {
			return &tv.Alerts[i]
		}
	}
	return nil
}

// TestView: the floor view shows a table's status in words, its dealer,
// its alerts grouped by kind and the floor's, and what the database
// witnessed, in the snapshot and, live, in its stream of changes.
func TestView(t *testing.T) { eachStore(t, testView) }

func testView(t *testing.T, s Store) {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-07", 9)
	c.registry(reg)
	e := reg.Tables["BAC-07"]
	e.PitView = "http://bac-07.local:8080/pit"
	reg.Tables["BAC-07"] = e
	c.addRow("coup_result", `{"coup":1}`, t0.Add(time.Second))
	now := time.Now()
	if _, err := s.apply(ctx, append(rowItems(c.rows), cpItem(c.checkpoint(10, now.Add(-time.Minute)))), reg, "w", now); err != nil {
		t.Fatal(err)
	}
	v := NewView(s, reg, Subjects{}, nil, quietLog())
	if err := v.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	srv := viewServer(t, v)
	evs := events(t, srv.URL)

	v.take("tablectl.BAC-07.status", []byte(`{"state":"online","table":"BAC-07","phase":"dealing","shoe":3,"coup":41,"suspended":false,"dealer":"D-1042"}`))
	tv := nextEntry(t, evs, "the status", func(tv TableView) bool { return tv.State == "dealing" })
	if tv.Shoe != 3 || tv.Coup != 41 || tv.Dealer != "D-1042" || tv.Level != "ok" || tv.Witnessed != 10 || tv.CoupsPerHour != 4 ||
		tv.RateMinutes != 15 || tv.CheckpointAt == nil || tv.PitView != e.PitView {
		t.Errorf("after status: %+v", tv)
	}
	v.take("tablectl.BAC-07.pit.alerts.active", []byte(`{"alerts":[{"state":"raised","id":"advantage-3-41","source":"advantage","kind":"advantage","suspends":false,"message":"Player Pair EV +1.2%"}]}`))
	tv = nextEntry(t, evs, "the advantage alert", func(tv TableView) bool { return group(tv, "advantage") != nil })
	if g := group(tv, "advantage"); g.Words != "advantage bet" || g.Count != 1 || g.Source != "advantage" || g.Alarm || g.Last == nil || tv.Level != "ok" {
		t.Errorf("after the advantage alert: %+v %+v", tv, *g)
	}
	fa, _ := json.Marshal(Alert{ID: 7, State: "raised", Table: "BAC-07", Kind: AlertFork, Seq: 5, Message: "row 5 forked", Tamper: true, At: t0})
	v.take(AlertsSubject, fa)
	tv = nextEntry(t, evs, "the fork", func(tv TableView) bool { return group(tv, "fork") != nil })
	if g := group(tv, "fork"); !g.Alarm || g.Source != "floor" || g.Words != "tamper: fork" || g.Message != "row 5 forked" || tv.Level != "alarm" || tv.Alerts[0].Kind != "fork" {
		t.Errorf("after the fork: %+v", tv)
	}
	// The floor's own alerts (no table) show above the tables until resolved.
	stalled, _ := json.Marshal(Alert{State: "raised", Kind: AlertWitnessStalled, Witness: "w1", Message: "no message acknowledged for 1m0s", At: t0})
	v.take(AlertsSubject, stalled)
	testenv.Eventually(t, 10*time.Second, "the floor's own alert", func() bool {
		for {
			select {
			case d := <-evs:
				if strings.Contains(d, `"floor":[{"kind":"witness_stalled","words":"witnesses stalled","witness":"w1"`) {
					return true
				}
			default:
				return false
			}
		}
	})
	resolved, _ := json.Marshal(Alert{State: "resolved", Kind: AlertWitnessStalled, Witness: "w1", At: t0.Add(time.Minute)})
	v.take(AlertsSubject, resolved)
	testenv.Eventually(t, 10*time.Second, "the floor's own alert resolved", func() bool {
		for {
			select {
			case d := <-evs:
				if d == `{"floor":[]}` {
					return true
				}
			default:
				return false
			}
		}
	})
	// Junk on the subjects changes nothing.
	v.take("tablectl.BAC-07.status", []byte(`{{`))
	v.take(AlertsSubject, []byte(`{"table":"../../x"}`))
	v.take("tablectl.BAC-99.status", []byte(`{"state":"online","table":"BAC-99","phase":"dealing"}`))

	r, err := http.Get(srv.URL + "/floor.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	var out struct{ Tables []TableView }
	if err := json.Unmarshal(b, &out); err != nil || len(out.Tables) != 1 || out.Tables[0].State != "dealing" || len(out.Tables[0].Alerts) != 2 {
		t.Errorf("floor.json: %s (%v)", b, err)
	}
	r, err = http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(page), "EventSource(\"floor/events\")") {
		t.Errorf("the page does not follow floor/events")
	}
}

// TestViewStates: a table's status in words, and the tile's level.
func TestViewStates(t *testing.T) {
	for _, tc := range []struct {
		name, status, alerts string
		state, level         string
	}{
		{"not heard from", "", "", "not heard from", "off"},
		{"betting", `{"state":"online","phase":"betting_open","shoe":1,"coup":2}`, "", "betting open", "ok"},
		{"no shoe", `{"state":"online","phase":"no_shoe"}`, "", "no shoe", "ok"},
		{"offline", `{"state":"offline"}`, "", "offline", "off"},
		{"suspended", `{"state":"online","phase":"dealing","suspended":true,"suspend_reason":"card_check"}`,
			`{"alerts":[{"id":"table-1","source":"table","kind":"unreadable_card","suspends":true,"message":"card 2 unreadable"}]}`, "suspended", "warn"},
		{"audit failing", `{"state":"online","phase":"dealing","suspended":true,"suspend_reason":"system_check","audit":"failing"}`, "", "audit trail failing", "warn"},
		{"trail tampered", `{"state":"online","phase":"dealing","suspended":true,"suspend_reason":"system_check"}`,
			`{"alerts":[{"id":"audit","source":"audit","kind":"trail_tampered","suspends":true,"message":"rows this controller did not write"}]}`, "suspended", "alarm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := NewView(nil, nil, Subjects{}, nil, quietLog())
			if tc.status != "" {
				v.take("tablectl.BAC-01.status", []byte(tc.status))
			}
			if tc.alerts != "" {
				v.take("tablectl.BAC-01.pit.alerts.active", []byte(tc.alerts))
			}
			if tc.status == "" && tc.alerts == "" {
				v.update("BAC-01", func(*tableRaw) {})
			}
			tv := v.Snapshot()[0]
			if tv.State != tc.state || tv.Level != tc.level {
				t.Errorf("state %q level %q, want %q %q", tv.State, tv.Level, tc.state, tc.level)
			}
			if strings.Contains(tc.status, `"suspended":true`) != (tv.Suspension != nil) {
				t.Errorf("suspension %+v for %s", tv.Suspension, tc.status)
			}
		})
	}
}

// TestViewRate: coups per hour is the coup results witnessed over the
// last RateWindow, per hour, by the view's clock: results witnessed
// before the window do not count, and the rate falls as the window moves
// past them.
func TestViewRate(t *testing.T) { eachStore(t, testViewRate) }

func testViewRate(t *testing.T, s Store) {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-03", 0)
	c.registry(reg)
	now := t0.Add(2 * time.Hour)
	clk := clock.NewFake(now)
	// Coup results, each batch witnessed at its time: before the
	// window, inside it, and in its last minute.
	batches := []struct {
		ago     time.Duration
		results int
	}{{40 * time.Minute, 10}, {10 * time.Minute, 6}, {time.Minute, 3}}
	for _, b := range batches {
		from := len(c.rows)
		for i := range b.results {
			c.addRow("card_dealt", `{"card":"9H"}`, now.Add(-b.ago))
			c.addRow("coup_result", fmt.Sprintf(`{"coup":%d}`, i), now.Add(-b.ago))
		}
		// Rows are witnessed once a checkpoint covers them.
		its := append(rowItems(c.rows[from:]), cpItem(c.checkpoint(int64(len(c.rows)), now.Add(-b.ago))))
		if _, err := s.apply(ctx, its, reg, "w", now.Add(-b.ago)); err != nil {
			t.Fatal(err)
		}
	}
	v := NewView(s, reg, Subjects{}, clk, quietLog())
	for _, step := range []struct {
		advance time.Duration
		coups   int // witnessed within RateWindow of the clock
	}{{0, 6 + 3}, {5*time.Minute + time.Second, 3}, {10 * time.Minute, 0}} {
		clk.Advance(step.advance)
		if err := v.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		tv := v.Snapshot()[0]
		want := float64(step.coups) * 60 / 15
		if tv.CoupsPerHour != want || tv.RateMinutes != 15 {
			t.Errorf("at %v: %v coups/h over %d min, want %v (%d coups in 15 min)", clk.Now().Sub(now), tv.CoupsPerHour, tv.RateMinutes, want, step.coups)
		}
	}
}

// TestViewSuspension: a suspended table says why, by whom and since when,
// from its witnessed rows: the "suspended" row's time and reason, and the
// supervisor of the suspend command that holds it.
func TestViewSuspension(t *testing.T) { eachStore(t, testViewSuspension) }

func testViewSuspension(t *testing.T, s Store) {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for i, tc := range []struct {
		name, reason string
		rows         [][3]string // kind, body, second
		why, note    string
		by           string
		since        int
	}{
		{"supervisor", "table_check", [][3]string{
			{"command_accepted", `{"action":"suspend","by":"alice","command":"c1","reason":"suspect dealer"}`, "20"},
			{"suspended", `{"by":"alice","phase":"betting_open","reason":"suspect dealer"}`, "20"},
		}, "a supervisor's check", "suspect dealer", "alice", 20},
		{"alert, then a supervisor", "card_check", [][3]string{
			{"alert", `{"alert":{"id":1,"kind":"unreadable_card"}}`, "30"},
			{"suspended", `{"phase":"dealing","reason":"unreadable_card"}`, "30"},
			{"command_accepted", `{"action":"suspend","by":"bob","command":"c2"}`, "45"},
		}, "a card check", "suspended by bob", "bob", 30},
		{"alert", "card_check", [][3]string{
			{"suspended", `{"by":"carol","reason":"first"}`, "5"},
			{"resumed", `{"phase":"betting_open"}`, "8"},
			{"suspended", `{"phase":"dealing","reason":"extra_card"}`, "50"},
			{"alert", `{"alert":{"id":2,"kind":"card_while_suspended"}}`, "51"},
		}, "a card check", "extra card", "", 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("BAC-S%d", i)
			c := newChain(t, id, 3)
			c.registry(reg)
			for _, r := range tc.rows {
				var sec int
				fmt.Sscan(r[2], &sec)
				c.addRow(r[0], r[1], at(sec))
			}
			if _, err := s.apply(ctx, append(rowItems(c.rows), cpItem(c.checkpoint(int64(len(c.rows)), time.Now()))), reg, "w", time.Now()); err != nil {
				t.Fatal(err)
			}
			v := NewView(s, reg, Subjects{}, nil, quietLog())
			v.take("tablectl."+id+".status", []byte(`{"state":"online","phase":"dealing","suspended":true,"suspend_reason":"`+tc.reason+`"}`))
			if err := v.refresh(ctx); err != nil {
				t.Fatal(err)
			}
			var tv TableView
			for _, x := range v.Snapshot() {
				if x.Table == id {
					tv = x
				}
			}
			sp := tv.Suspension
			if sp == nil || sp.Why != tc.why || sp.Note != tc.note || sp.By != tc.by || sp.Since == nil || !sp.Since.Equal(at(tc.since)) {
				t.Fatalf("suspension %+v, want %q %q by %q since %v", sp, tc.why, tc.note, tc.by, at(tc.since))
			}
			// Resumed: the status says so first, and the suspension goes.
			v.take("tablectl."+id+".status", []byte(`{"state":"online","phase":"dealing","suspended":false}`))
			for _, x := range v.Snapshot() {
				if x.Table == id && x.Suspension != nil {
					t.Errorf("resumed, still %+v", *x.Suspension)
				}
			}
		})
	}
}

// TestViewBound: a table in an alert storm (the issue's: one event of
// 3.07 MB, a line per card drawn while suspended) sends a tile: every
// event within MaxEntryBytes, its alerts grouped by kind with their count,
// first and last, at most maxGroups kinds and the rest counted.
func TestViewBound(t *testing.T) {
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-01", 0)
	c.registry(reg)
	v := NewView(nil, reg, Subjects{}, nil, quietLog())
	srv := viewServer(t, v)
	largestEvent.Store(0)
	evs := events(t, srv.URL)
	long := strings.Repeat("a card drawn while the table was suspended, ", 8)
	var all []mqttpub.Alert
	all = append(all, mqttpub.Alert{State: "raised", ID: "table-1", Source: "table", Kind: "extra_card", Suspends: true, Message: "9H drawn after coup 1 was complete"})
	for i := 2; i <= 2000; i++ {
		all = append(all, mqttpub.Alert{State: "raised", ID: fmt.Sprintf("table-%d", i), Source: "table", Kind: "card_while_suspended", Suspends: true, Message: long})
	}
	for k := range 30 {
		all = append(all, mqttpub.Alert{State: "raised", ID: fmt.Sprintf("odd-%d", k), Source: "table", Kind: fmt.Sprintf("kind_%02d_%s", k, strings.Repeat("x", 200)), Message: long})
	}
	raw, _ := json.Marshal(mqttpub.ActiveAlerts{Alerts: all})
	if len(raw) < 900<<10 || len(raw) > MaxMessageBytes {
		t.Fatalf("the storm is %d bytes: want about the issue's 1 MB list, and one the floor takes", len(raw))
	}
	// A table older than the bounded topic sends the whole list; a newer
	// one its newest 50 and the counts by kind.
	v.take("tablectl.BAC-01.pit.alerts.active", raw)
	tv := nextEntry(t, evs, "the storm", func(tv TableView) bool { return group(tv, "card_while_suspended") != nil })
	if g := group(tv, "card_while_suspended"); g.Count != 1999 || g.Words != "card drawn while suspended" || len(g.Message) > maxWords+3 {
		t.Errorf("card_while_suspended: %+v", *g)
	}
	if len(tv.Alerts) != maxGroups || tv.MoreKinds != 32-maxGroups {
		t.Errorf("%d kinds shown, %d more; want %d and %d", len(tv.Alerts), tv.MoreKinds, maxGroups, 32-maxGroups)
	}
	// Summarised by the table: the newest 50 and the counts by kind.
	summarised, _ := json.Marshal(mqttpub.ActiveAlerts{Alerts: all[1990:2040], Omitted: len(all) + 1000 - 50,
		ByKind: map[string]int{"card_while_suspended": 2999, "extra_card": 1}})
	v.take("tablectl.BAC-01.pit.alerts.active", summarised)
	tv = nextEntry(t, evs, "the summarised storm", func(tv TableView) bool {
		g := group(tv, "card_while_suspended")
		return g != nil && g.Count == 2999
	})
	if g := group(tv, "extra_card"); g == nil || g.Count != 1 {
		t.Errorf("a kind the table counted but did not list: %+v", tv.Alerts)
	}
	for i := range 2500 {
		fa, _ := json.Marshal(Alert{ID: int64(i + 1), State: "raised", Table: "BAC-01", Kind: AlertQuarantined, Message: long, At: t0.Add(time.Duration(i) * time.Second)})
		v.take(AlertsSubject, fa)
	}
	tv = nextEntry(t, evs, "the floor's storm", func(tv TableView) bool {
		g := group(tv, "quarantined")
		return g != nil && g.LatestID == "2500"
	})
	if g := group(tv, "quarantined"); g.Count != maxTableSeen || !g.Last.Equal(t0.Add(2499*time.Second)) || !g.First.Equal(t0.Add(1500*time.Second)) {
		t.Errorf("quarantined: %+v", *g)
	}
	// The snapshot a page starts with, and every event, within the bound.
	resp, err := http.Get(srv.URL + "/floor/events")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if len(d) > MaxEntryBytes+64 {
				t.Errorf("the snapshot of one table is %d bytes", len(d))
			}
			break
		}
	}
	resp.Body.Close()
	if n := largestEvent.Load(); n > MaxEntryBytes || n == 0 {
		t.Errorf("the largest event is %d bytes; the bound is %d", n, MaxEntryBytes)
	} else {
		t.Logf("the largest event: %d bytes, for an alert list of %d bytes", n, len(raw))
	}
}

// TestViewSlowFollower: a page that does not read holds the ids of the
// tables changed since it last did, not a queue of every change: a
// thousand changes of ten tables are ten entries when it reads.
func TestViewSlowFollower(t *testing.T) {
	v := NewView(nil, nil, Subjects{}, nil, quietLog())
	f := &follower{dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
	v.mu.Lock()
	v.subs[f] = true
	v.mu.Unlock()
	for i := range 1000 {
		v.take(fmt.Sprintf("tablectl.BAC-%02d.status", i%10), fmt.Appendf(nil, `{"state":"online","phase":"dealing","coup":%d}`, i+1))
	}
	_, got := v.changed(f)
	if len(got) != 10 {
		t.Fatalf("%d entries after 1000 changes of 10 tables", len(got))
	}
	for _, b := range got {
		var tv TableView
		if err := json.Unmarshal(b, &tv); err != nil || tv.Coup < 991 {
			t.Errorf("an entry that is not the table's last: %s (%v)", b, err)
		}
	}
	if fl, again := v.changed(f); len(again) != 0 || fl != nil {
		t.Errorf("%d entries with nothing changed", len(again))
	}
}

// TestViewLateStatus: tables publish their status and active alerts,
// retained, over MQTT to the floor broker (NATS's MQTT listener, as
// their bridges do); a floor view started afterwards shows them at once,
// from the status stream, and then follows changes. A view without the
// stream (as the floor view was) sees nothing until the next change.
func TestViewLateStatus(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, err := natsserver.StartEmbedded(ctx, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Stop()
	nc, err := nats.Connect(cluster.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	stream, err := EnsureStatusStream(ctx, js, DefaultStatusStream, Subjects{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenSQLiteStore(ctx, filepath.Join(t.TempDir(), "floor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	cl := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + cluster.Nodes[0].MQTTAddr()).SetClientID("bridge-BAC-07"))
	if tok := cl.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal("connect:", tok.Error())
	}
	defer cl.Disconnect(100)
	publish := func(topic, payload string) {
		t.Helper()
		if tok := cl.Publish(topic, 1, true, payload); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatal("publish:", tok.Error())
		}
	}
	publish("tablectl/BAC-07/status", `{"state":"online","table":"BAC-07","phase":"dealing","shoe":3,"coup":41,"suspended":false}`)
	publish("tablectl/BAC-08/status", `{"state":"online","table":"BAC-08","phase":"no_shoe","shoe":1,"coup":2,"suspended":false}`)
	publish("tablectl/BAC-07/pit/alerts/active", `{"alerts":[{"state":"raised","id":"advantage-3-41","source":"advantage","kind":"advantage","suspends":false,"message":"Player Pair EV +1.2%"}]}`)
	publish("tablectl/BAC-08/status", `{"state":"online","table":"BAC-08","phase":"dealing","shoe":1,"coup":3,"suspended":false}`)
	testenv.EventuallyErr(t, 10*time.Second, "the status stream to hold 3 messages (BAC-08's first status replaced)", func() error {
		info, err := stream.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != 3 {
			return fmt.Errorf("%d messages", info.State.Msgs)
		}
		return nil
	})

	start := func(statusStream string) (*View, context.CancelFunc) {
		v := NewView(s, nil, Subjects{}, nil, quietLog())
		vctx, stop := context.WithCancel(ctx)
		go v.Run(vctx, nc, statusStream, time.Hour)
		return v, stop
	}
	table := func(v *View, id string) *TableView {
		for _, tv := range v.Snapshot() {
			if tv.Table == id {
				return &tv
			}
		}
		return nil
	}
	// As the view was: live only.
	old, stopOld := start("")
	defer stopOld()
	v, stop := start(DefaultStatusStream)
	defer stop()
	testenv.Eventually(t, 10*time.Second, "a view started after the tables' status to show it", func() bool {
		a, b := table(v, "BAC-07"), table(v, "BAC-08")
		return a != nil && a.State == "dealing" && a.Coup == 41 && group(*a, "advantage") != nil && b != nil && b.State == "dealing" && b.Coup == 3
	})
	if tv := table(old, "BAC-07"); tv != nil && tv.State != "not heard from" {
		t.Fatalf("a view without the status stream saw the retained status: the test tells nothing")
	}
	// And it follows what comes next.
	publish("tablectl/BAC-07/status", `{"state":"online","table":"BAC-07","phase":"result","shoe":3,"coup":41,"suspended":false}`)
	testenv.Eventually(t, 10*time.Second, "the next status", func() bool { return table(v, "BAC-07").State == "result" })
}

// TestViewLogin: the floor view answers only the floor's credentials;
// anyone else gets 401 and a basic-auth challenge, and a login without a
// password lets no one in.
func TestViewLogin(t *testing.T) {
	v := NewView(nil, nil, Subjects{}, nil, quietLog())
	for _, tc := range []struct {
		name       string
		login      Login
		user, pass string
		auth       bool
		want       int
	}{
		{"the floor's login", Login{"floor", "s3cret"}, "floor", "s3cret", true, http.StatusOK},
		{"anonymous", Login{"floor", "s3cret"}, "", "", false, http.StatusUnauthorized},
		{"wrong password", Login{"floor", "s3cret"}, "floor", "s3cret ", true, http.StatusUnauthorized},
		{"wrong user", Login{"floor", "s3cret"}, "pit", "s3cret", true, http.StatusUnauthorized},
		{"password prefix", Login{"floor", "s3cret"}, "floor", "s3c", true, http.StatusUnauthorized},
		{"no password set", Login{"floor", ""}, "floor", "", true, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.login.Guard(v))
			defer srv.Close()
			for _, path := range []string{"/", "/floor.json"} {
				req, _ := http.NewRequest("GET", srv.URL+path, nil)
				if tc.auth {
					req.SetBasicAuth(tc.user, tc.pass)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Fatalf("%s: %s, want %d", path, resp.Status, tc.want)
				}
				if tc.want == http.StatusUnauthorized && (resp.Header.Get("WWW-Authenticate") == "" || strings.Contains(string(body), "tables")) {
					t.Fatalf("%s: a 401 without a challenge, or with the floor in it: %q", path, body)
				}
			}
		})
	}
}
