package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/browsertest"
)

// viewLayoutJS checks the floor view's page as a pit boss sees it: the
// page does not scroll, every tile lies inside the viewport and holds all
// of its content (nothing spills or scrolls), and every piece of text is
// at least min px. It returns what is wrong.
const viewLayoutJS = `((min) => {
  const bad = [];
  const W = innerWidth, H = innerHeight;
  const de = document.documentElement;
  if (de.scrollWidth > W || de.scrollHeight > H) bad.push("the page scrolls: " + de.scrollWidth + "x" + de.scrollHeight);
  const tiles = [...document.querySelectorAll(".tile")];
  for (const t of tiles) {
    const r = t.getBoundingClientRect();
    if (r.left < 0 || r.top < 0 || r.right > W + 0.5 || r.bottom > H + 0.5 || r.width < 50 || r.height < 50) bad.push(t.id + " outside the screen: " + JSON.stringify(r));
    if (t.scrollHeight > t.clientHeight + 1 || t.scrollWidth > t.clientWidth + 1) bad.push(t.id + " overflows: " + t.scrollWidth + "x" + t.scrollHeight + " in " + t.clientWidth + "x" + t.clientHeight);
    // Its parts one under the other, none over another or out of it.
    let below = r.top;
    for (const c of t.children) {
      if (c.hidden) continue;
      const cr = c.getBoundingClientRect();
      if (cr.height === 0) continue;
      if (cr.top < below - 1 || cr.bottom > r.bottom + 1 || cr.left < r.left - 1 || cr.right > r.right + 1) bad.push(t.id + ": its " + c.className + " overlaps or spills: " + JSON.stringify(cr));
      below = cr.bottom;
    }
  }
  let smallest = 1e9;
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const e = n.parentElement;
    if (!n.textContent.trim() || !e || e.closest("script,style,[hidden]")) continue;
    const s = parseFloat(getComputedStyle(e).fontSize);
    smallest = Math.min(smallest, s);
    if (s < min) bad.push(JSON.stringify(n.textContent.slice(0, 30)) + " at " + s + " px");
  }
  return {bad: bad.slice(0, 20), tiles: tiles.length, smallest};
})`

// viewFloor is a floor of n tables as a pit sees one: most dealing with a
// dealer signed in, some suspended (one by a supervisor, its rows
// witnessed), one offline, one not heard from, one with an advantage bet
// and one in an alert storm.
func viewFloor(t *testing.T, n int) *View {
	ctx := context.Background()
	reg := &Registry{Heartbeat: time.Minute, Tables: map[string]TableEntry{}}
	s := newStore(t) // the floor's PostgreSQL
	now := time.Now()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("BAC-%02d", i)
		c := newChain(t, id, 0)
		c.registry(reg)
		e := reg.Tables[id]
		e.PitView = "https://" + id + ".pit.casino.internal/pit"
		reg.Tables[id] = e
		// Each table's pace: 8 to 17 coups in the last quarter hour.
		results := 8 + i%10
		for k := range results {
			at := now.Add(-15*time.Minute + time.Duration(k+1)*15*time.Minute/time.Duration(results+1))
			c.addRow("card_dealt", `{"card":"9H"}`, at)
			c.addRow("coup_result", fmt.Sprintf(`{"coup":%d}`, k), at)
		}
		if i == 3 {
			// BAC-03's suspension is in its witnessed rows: a supervisor's.
			c.addRow("command_accepted", `{"action":"suspend","by":"alice.martin","command":"c1","reason":"dealer change, count the float"}`, now.Add(-4*time.Minute))
			c.addRow("suspended", `{"by":"alice.martin","phase":"betting_open","reason":"dealer change, count the float"}`, now.Add(-4*time.Minute))
		}
		if _, err := s.apply(ctx, append(rowItems(c.rows), cpItem(c.checkpoint(int64(len(c.rows)), now.Add(-time.Duration(i)*time.Second)))), reg, "w", now); err != nil {
			t.Fatal(err)
		}
	}
	v := NewView(s, reg, Subjects{}, nil, quietLog())
	phases := []string{"betting_open", "betting_closed", "dealing", "result", "dealing", "betting_open"}
	dealers := []string{"Mei Lin", "D-1042", "Ana Sousa", "K. Oduya", "Tomasz W.", "Priya R."}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("BAC-%02d", i)
		st := fmt.Sprintf(`{"state":"online","table":%q,"phase":%q,"shoe":%d,"coup":%d,"suspended":false,"dealer":%q}`,
			id, phases[i%len(phases)], 2+i%3, 10+i*3%60, dealers[i%len(dealers)])
		switch i {
		case 3:
			st = `{"state":"online","table":"BAC-03","phase":"betting_open","shoe":4,"coup":15,"suspended":true,"suspend_reason":"table_check","dealer":"Mei Lin"}`
		case 5:
			st = `{"state":"online","table":"BAC-05","phase":"dealing","shoe":2,"coup":33,"suspended":true,"suspend_reason":"card_check","dealer":"D-1042"}`
			v.take("tablectl.BAC-05.pit.alerts.active", viewStorm())
		case 8:
			st = `{"state":"offline","table":"BAC-08"}`
		case 9:
			st = ""
		case 12:
			v.take("tablectl.BAC-12.pit.alerts.active", []byte(`{"alerts":[{"state":"raised","id":"advantage-3-41","source":"advantage","kind":"advantage","suspends":false,"message":"Player Pair EV +1.2%","at":"`+now.Add(-time.Minute).UTC().Format(time.RFC3339)+`"}]}`))
		}
		if st != "" {
			v.take("tablectl."+id+".status", []byte(st))
		} else {
			v.update(id, func(*tableRaw) {})
		}
	}
	if err := v.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	return v
}

// viewStorm is a table's active alerts after 21 cards drawn while
// suspended on an extra card (the issue saw 21 lines in 12 s).
func viewStorm() []byte {
	at := time.Now().Add(-3 * time.Minute)
	var a []map[string]any
	a = append(a, map[string]any{"state": "raised", "id": "table-1", "source": "table", "kind": "extra_card", "suspends": true,
		"message": "9H drawn after coup 33 was complete", "needs": "resume", "at": at.UTC()})
	for i := range 21 {
		a = append(a, map[string]any{"state": "raised", "id": fmt.Sprintf("table-%d", i+2), "source": "table", "kind": "card_while_suspended", "suspends": true,
			"message": "card drawn while suspended", "needs": "resume", "at": at.Add(time.Duration(i+1) * 600 * time.Millisecond).UTC()})
	}
	b, _ := json.Marshal(map[string]any{"alerts": a})
	return b
}

// TestViewBrowser: the floor view in Chromium at a pit monitor's
// 1920x1080 and a wall's 3840x2160, fifty tables: every table on the
// screen, nothing spilling out of its tile, no text under 13 px (26 px on
// the wall), the suspension with its why, who and since; a fork the
// floor's witness finds stands out (red, moving unless the screen asks
// for no motion) until acknowledged on this screen, stays acknowledged
// after a reload, and a second one stands out again; the floor's own
// alert (the witnesses stalled) is a banner above the tables.
func TestViewBrowser(t *testing.T) {
	shots := os.Getenv("TABLECTL_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	b := browsertest.Start(t)
	for _, sz := range []struct {
		name string
		w, h int
		min  float64
	}{{"1920x1080", 1920, 1080, 13}, {"3840x2160", 3840, 2160, 26}} {
		t.Run(sz.name, func(t *testing.T) {
			v := viewFloor(t, 50)
			srv := httptest.NewServer(v)
			// The page's event stream stays open: cut it, then close.
			t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
			pg := b.Open(t, srv.URL+"/", sz.w, sz.h, nil)
			pg.WaitFor("fifty tiles", `document.querySelectorAll(".tile").length === 50 && document.getElementById("conn").textContent === "live"`,
				`document.querySelectorAll(".tile").length`)
			check := func(when string) {
				t.Helper()
				var got struct {
					Bad      []string
					Tiles    int
					Smallest float64
				}
				pg.Eval(viewLayoutJS+fmt.Sprintf("(%v)", sz.min), &got)
				for _, bad := range got.Bad {
					t.Errorf("%s %s: %s", sz.name, when, bad)
				}
				if got.Tiles != 50 {
					t.Errorf("%s %s: %d tiles", sz.name, when, got.Tiles)
				}
				t.Logf("%s %s: smallest text %.1f px", sz.name, when, got.Smallest)
			}
			check("at first")
			tile := func(id string) string { return `document.getElementById("table-` + id + `")` }
			// In words, with why, who and since.
			var sus string
			pg.WaitFor("BAC-03's suspension, from its rows", tile("BAC-03")+`.textContent.includes("by alice.martin")`, tile("BAC-03")+`.textContent`)
			pg.Eval(tile("BAC-03")+`.querySelector(".why").textContent + " / " + `+tile("BAC-03")+`.querySelector(".who").textContent`, &sus)
			for _, want := range []string{"a supervisor's check: dealer change, count the float", "by alice.martin", "since ", "(4 min ago)"} {
				if !strings.Contains(sus, want) {
					t.Errorf("BAC-03's suspension %q: no %q", sus, want)
				}
			}
			var storm struct {
				Lines []string
				Text  string
			}
			pg.Eval(`({lines: [...`+tile("BAC-05")+`.querySelectorAll(".alerts li")].map(l => l.textContent), text: `+tile("BAC-05")+`.textContent})`, &storm)
			if len(storm.Lines) != 2 || !strings.Contains(storm.Text, "card drawn while suspended ×21") || !strings.Contains(storm.Text, "extra card") || strings.Contains(storm.Text, "card_while_suspended") {
				t.Errorf("BAC-05's storm: %q", storm.Lines)
			}
			var rate, pit string
			pg.Eval(tile("BAC-03")+`.querySelector(".rate").textContent`, &rate)
			pg.Eval(tile("BAC-03")+`.querySelector(".name a").href`, &pit)
			if !strings.Contains(rate, "coups/h (15 min)") || pit != "https://bac-03.pit.casino.internal/pit" {
				t.Errorf("BAC-03: rate %q, pit view %q", rate, pit)
			}
			var words string
			pg.Eval(tile("BAC-06")+`.textContent`, &words)
			if !strings.Contains(words, "betting open") || strings.Contains(words, "betting_open") || !strings.Contains(words, "dealer Mei Lin") {
				t.Errorf("BAC-06 in words: %q", words)
			}
			// A fork, found by the floor's witness.
			fork := func(id int64, seq int64) {
				fa, _ := json.Marshal(Alert{ID: id, State: "raised", Table: "BAC-21", Kind: AlertFork, Seq: seq,
					Message: fmt.Sprintf("row %d seen with two hashes", seq), Tamper: true, At: time.Now().UTC()})
				v.take(AlertsSubject, fa)
			}
			fork(101, 4410)
			pg.WaitFor("the fork stands out", tile("BAC-21")+`.classList.contains("unacked") && `+tile("BAC-21")+`.querySelector("button.ack") !== null && document.getElementById("c-alarms").textContent.includes("1 to acknowledge")`,
				`JSON.stringify([`+tile("BAC-21")+`.className, `+tile("BAC-21")+`.querySelector("button.ack") !== null, document.getElementById("c-alarms").textContent, `+tile("BAC-21")+`.querySelector(".alerts").innerHTML])`)
			var bg string
			pg.Eval(`getComputedStyle(`+tile("BAC-21")+`).backgroundColor`, &bg)
			if c := browsertest.Colour(bg); c != "red" {
				t.Errorf("the fork's tile is %s (%s), want red", c, bg)
			}
			pg.ReducedMotion(false)
			var anim string
			pg.Eval(`getComputedStyle(`+tile("BAC-21")+`).animationName`, &anim)
			if anim != "alarm" {
				t.Errorf("the fork's tile does not move: animation %q", anim)
			}
			pg.ReducedMotion(true)
			check("with the fork")
			pg.SaveScreenshot(shots, "floor-"+sz.name, false)
			// Acknowledged: still red-edged, no longer moving.
			pg.Eval(tile("BAC-21")+`.querySelector("button.ack").click(), true`, nil)
			pg.WaitFor("acknowledged", `!`+tile("BAC-21")+`.classList.contains("unacked") && `+tile("BAC-21")+`.classList.contains("alarm") && document.getElementById("c-alarms").textContent === ""`,
				tile("BAC-21")+`.outerHTML`)
			pg.Navigate(srv.URL + "/")
			pg.WaitFor("acknowledged after a reload", `document.querySelectorAll(".tile").length === 50 && document.getElementById("conn").textContent === "live" && `+
				tile("BAC-21")+`.classList.contains("alarm") && !`+tile("BAC-21")+`.classList.contains("unacked")`, tile("BAC-21")+`.outerHTML`)
			fork(102, 4480)
			pg.WaitFor("a second fork stands out again", tile("BAC-21")+`.classList.contains("unacked") && `+tile("BAC-21")+`.textContent.includes("×2")`, tile("BAC-21")+`.outerHTML`)
			// The floor's own alert: a banner above the tables, which still fit.
			stalled, _ := json.Marshal(Alert{State: "raised", Kind: AlertWitnessStalled, Witness: "w1", Message: "no message acknowledged for 1m0s while 812 wait", At: time.Now().UTC()})
			v.take(AlertsSubject, stalled)
			pg.WaitFor("the floor's banner", browsertest.Visible("floor-alerts")+` && document.getElementById("floor-alerts").textContent.includes("witnesses stalled")`, `document.getElementById("floor-alerts").outerHTML`)
			check("with the floor's banner")
			pg.NoProblems()
		})
	}
}
