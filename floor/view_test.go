package floor

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/tablectl/tablectl/internal/browsertest"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
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
