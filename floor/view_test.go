package floor

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/internal/browsertest"
	"github.com/tablectl/tablectl/internal/natsserver"
)

// TestView: the floor view shows a table's status and active alerts as
// they arrive, the floor's alerts and what the database witnessed, in the
// snapshot and, live, in its stream of changes.
func TestView(t *testing.T) { eachStore(t, testView) }

func testView(t *testing.T, s Store) {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-07", 30)
	c.registry(reg)
	e := reg.Tables["BAC-07"]
	e.PitView = "http://bac-07.local:8080/pit"
	reg.Tables["BAC-07"] = e
	c.rows[9].Kind = "coup_result"
	c.rows[9].Hash = c.rows[9].ComputeHash()
	c.rows = c.rows[:10] // the rest would not link now
	if _, err := s.apply(ctx, append(rowItems(c.rows), cpItem(c.checkpoint(10, time.Now().Add(-time.Minute)))), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	v := NewView(s, reg, Subjects{}, nil, quietLog())
	if err := v.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(v)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/floor/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
		close(events)
	}()
	next := func(want string) TableView {
		t.Helper()
		for {
			select {
			case d := <-events:
				if strings.Contains(d, want) {
					var tv TableView
					json.Unmarshal([]byte(d), &tv)
					return tv
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no event with %q", want)
			}
		}
	}
	snap := next(`"tables"`)
	_ = snap
	v.take("tablectl.BAC-07.status", []byte(`{"state":"online","table":"BAC-07","phase":"dealing","shoe":3,"coup":41,"suspended":false}`))
	tv := next(`"phase":"dealing"`)
	if tv.Status.Shoe != 3 || tv.Status.Coup != 41 || tv.Witnessed != 10 || tv.CoupsPerHour != 1 || tv.CheckpointAt == nil || tv.PitView == "" {
		t.Errorf("after status: %+v", tv)
	}
	v.take("tablectl.BAC-07.pit.alerts.active", []byte(`{"alerts":[{"state":"raised","id":"advantage-3-41","source":"advantage","kind":"advantage","suspends":false,"message":"Player Pair EV +1.2%"}]}`))
	if tv := next(`advantage-3-41`); len(tv.Alerts) != 1 || tv.Alerts[0].Source != "advantage" {
		t.Errorf("after alerts: %+v", tv)
	}
	fa, _ := json.Marshal(Alert{ID: 7, State: "raised", Table: "BAC-07", Kind: AlertFork, Seq: 5, Message: "row 5 forked", Tamper: true})
	v.take(AlertsSubject, fa)
	if tv := next(`row 5 forked`); len(tv.Floor) != 1 || !tv.Floor[0].Tamper {
		t.Errorf("after the floor alert: %+v", tv)
	}
	// Junk on the subjects changes nothing.
	v.take("tablectl.BAC-07.status", []byte(`{{`))
	v.take(AlertsSubject, []byte(`{"table":"../../x"}`))

	r, err := http.Get(srv.URL + "/floor.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	var out struct{ Tables []TableView }
	if err := json.Unmarshal(b, &out); err != nil || len(out.Tables) != 1 || out.Tables[0].Status.Phase != "dealing" || len(out.Tables[0].Floor) != 1 {
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

// TestViewInBrowser: the floor view's page in Chromium lists the table,
// links its pit view, and shows a floor alert and a table's advantage
// alert as they arrive, without a reload.
func TestViewInBrowser(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	c := newChain(t, "BAC-07", 10)
	c.registry(reg)
	e := reg.Tables["BAC-07"]
	e.PitView = "http://bac-07.local:8080/pit"
	reg.Tables["BAC-07"] = e
	if _, err := s.apply(ctx, append(rowItems(c.rows), cpItem(c.checkpoint(10, time.Now()))), reg, "w", time.Now()); err != nil {
		t.Fatal(err)
	}
	v := NewView(s, reg, Subjects{}, nil, quietLog())
	if err := v.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	v.take("tablectl.BAC-07.status", []byte(`{"state":"online","table":"BAC-07","phase":"betting_open","shoe":2,"coup":7,"suspended":false}`))
	srv := httptest.NewServer(v)
	// The page's event stream stays open: cut it, then close.
	defer func() { srv.CloseClientConnections(); srv.Close() }()
	b := browsertest.Start(t)
	pg := b.Open(t, srv.URL+"/", 1280, 800, nil)
	row := `document.getElementById("table-BAC-07")`
	pg.WaitFor("the table's line", row+` && `+row+`.textContent.includes("betting_open") && `+row+`.textContent.includes("2 / 7")`, row+` && `+row+`.textContent`)
	var href string
	pg.Eval(row+`.querySelector("a").href`, &href)
	if href != "http://bac-07.local:8080/pit" {
		t.Errorf("pit view link %q", href)
	}
	fa, _ := json.Marshal(Alert{ID: 9, State: "raised", Table: "BAC-07", Kind: AlertCheckpointBack, Seq: 4, Message: "checkpoint went back to 4", Tamper: true})
	v.take(AlertsSubject, fa)
	pg.WaitFor("the floor alert, live", row+`.classList.contains("tamper") && `+row+`.textContent.includes("checkpoint went back to 4")`, row+`.outerHTML`)
	v.take("tablectl.BAC-07.pit.alerts.active", []byte(`{"alerts":[{"state":"raised","id":"advantage-2-7","source":"advantage","kind":"advantage","suspends":false,"message":"Tie EV +0.4%"}]}`))
	pg.WaitFor("the advantage alert, live", row+`.querySelector(".alert.advantage") && `+row+`.textContent.includes("Tie EV +0.4%")`, row+`.outerHTML`)
	pg.NoProblems()
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
	publish("tablectl/BAC-08/status", `{"state":"online","table":"BAC-08","phase":"idle","shoe":1,"coup":2,"suspended":false}`)
	publish("tablectl/BAC-07/pit/alerts/active", `{"alerts":[{"state":"raised","id":"advantage-3-41","source":"advantage","kind":"advantage","suspends":false,"message":"Player Pair EV +1.2%"}]}`)
	publish("tablectl/BAC-08/status", `{"state":"online","table":"BAC-08","phase":"dealing","shoe":1,"coup":3,"suspended":false}`)
	for {
		info, err := stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 3 { // BAC-08's first status replaced
			break
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}

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
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, b := table(v, "BAC-07"), table(v, "BAC-08")
		if a != nil && a.Status != nil && len(a.Alerts) == 1 && b != nil && b.Status != nil && b.Status.Coup == 3 {
			if a.Status.Phase != "dealing" || a.Status.Coup != 41 || a.Alerts[0].ID != "advantage-3-41" || b.Status.Phase != "dealing" {
				t.Fatalf("late view: %+v %+v", *a, *b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a view started after the tables' status shows %+v", v.Snapshot())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tv := table(old, "BAC-07"); tv != nil && tv.Status != nil {
		t.Fatalf("a view without the status stream saw the retained status: the test tells nothing")
	}
	// And it follows what comes next.
	publish("tablectl/BAC-07/status", `{"state":"online","table":"BAC-07","phase":"result","shoe":3,"coup":41,"suspended":false}`)
	for deadline = time.Now().Add(10 * time.Second); ; {
		if tv := table(v, "BAC-07"); tv.Status.Phase == "result" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next status did not follow: %+v", v.Snapshot())
		}
		time.Sleep(20 * time.Millisecond)
	}
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
