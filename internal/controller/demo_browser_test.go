package controller

// TestDemoBrowser is issue 6's "done when": headless Chromium opens the web
// display of a running `tablectl demo`, the demo deals a whole shoe, and the
// test checks what a viewer sees against the truth. The truth is the
// simulator's own plan (the cards it deals, scored by coup.Score) and the
// demo's audit trail replayed through the rules, never anything the page or
// the controller's roads computed. Screenshots go to $TABLECTL_SCREENSHOTS
// (or a temporary folder) as test artefacts.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/browsertest"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

const (
	// demoBrowserProfile deals 6 decks (the VIP profile's 8 make a shoe a
	// third longer), and demoBrowserSeed a shoe of 61 coups with ties,
	// Banker pairs and Player pairs (newPlannedShoe checks), so every kind
	// of bead shows.
	demoBrowserProfile = coup.ProfileClassic
	demoBrowserSeed    = 8
	// demoBrowserPace is the simulated dealer's pace within a coup, and
	// demoBrowserCoupPace the betting time between coups. The demo lets a
	// result stand half the betting time (from the coup's last card), so
	// the controller must catch up with the coup's cards and record the
	// result's end within the other half, or the next coup's cards find
	// the table still on the result: an extra card, and the table
	// suspends. Each card commits to the trail with an fsync, which a busy
	// machine makes slow: 15ms between cards keeps the controller from
	// falling behind within a coup, and 200ms covers the stalls of a
	// loaded 2-core machine (the test logs the closest call). The shoe
	// takes about 30s to deal.
	demoBrowserPace     = 15 * time.Millisecond
	demoBrowserCoupPace = 400 * time.Millisecond
	// demoBrowserWait bounds one wait: only a hang reaches it.
	demoBrowserWait = 90 * time.Second
	// envDemoScreenshots names the folder to keep the screenshots in (the
	// display package's browser tests use the same variable).
	envDemoScreenshots = "TABLECTL_SCREENSHOTS"
)

func TestDemoBrowser(t *testing.T) {
	testenv.Long(t, "the demo in Chromium, dealing a whole shoe")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	shots := os.Getenv(envDemoScreenshots)
	if shots == "" {
		shots = t.TempDir()
	} else {
		shots = filepath.Join(shots, "demo")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots go to %s (set %s to keep them)", shots, envDemoScreenshots)

	// The truth: the shoe as the simulator deals it. The demo builds its
	// simulator from these same options (and only paces besides).
	profile, err := coup.BuiltinProfile(demoBrowserProfile)
	if err != nil {
		t.Fatal(err)
	}
	want := newPlannedShoe(t, shoesim.Options{Seed: demoBrowserSeed, Shoes: 1, Decks: profile.Decks})

	browser := browsertest.Shared(t)
	browser.Timeout = demoBrowserWait

	// The demo, on free ports, its trail in a temporary folder.
	dctx, stopDemo := context.WithCancel(ctx)
	defer stopDemo()
	ready := make(chan DemoInfo, 1)
	var logs mqBuffer
	done := make(chan error, 1)
	go func() {
		done <- Demo(dctx, DemoOptions{Dir: filepath.Join(t.TempDir(), "demo"), Table: "DEMO", Profile: demoBrowserProfile,
			MQTTListen: "127.0.0.1:0", MQTTWS: "127.0.0.1:0", HTTP: "127.0.0.1:0", Pace: demoBrowserPace, CoupPace: demoBrowserCoupPace,
			Seed: demoBrowserSeed, Shoes: 1, ResultTime: time.Millisecond, Ready: func(i DemoInfo) { ready <- i }, LogTo: &logs})
	}()
	var info DemoInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatalf("demo stopped: %v\n%s", err, logs.String())
	case <-time.After(demoBrowserWait):
		t.Fatalf("demo not ready:\n%s", logs.String())
	}
	defer func() {
		stopDemo()
		awaitStop(t, "the demo", done, demoBrowserWait, logs.String)
	}()

	// The pit's event stream says when the shoe is over, or that the table
	// stopped on an alert: the shoe will then never end, and every wait
	// stops at once with the alert as its cause.
	ended := make(chan struct{})
	var endOnce sync.Once
	tctx, trouble := context.WithCancelCause(ctx)
	defer trouble(nil)
	mqtttest.Subscribe(t, mqtttest.SubOptions{URL: info.MQTT, Username: info.PitBrokerUser, Password: info.PitBrokerPassword, Topics: []string{info.Prefix + "/" + mqttpub.TopicPitEvents},
		OnMessage: func(m mqtttest.Msg) {
			var e mqttpub.Event
			if json.Unmarshal(m.Payload, &e) != nil {
				return
			}
			switch coup.EventKind(e.Kind) {
			case coup.EvShoeEnded:
				endOnce.Do(func() { close(ended) })
			case coup.EvAlert:
				trouble(fmt.Errorf("the demo's table raised an alert (see demoBrowserPace): %s\n%s", e.Body, trailTiming(info.Trail, e.Coup)))
			}
		}})

	// A viewer opens the display while the shoe is dealt.
	pub := browser.OpenContext(tctx, t, info.HTTP+"/", 1920, 1080, nil)
	watchDemoConnection(t, pub)
	pub.WaitFor("the first coups on the bead plate", `document.getElementById('conn').dataset.state === 'online' && document.querySelectorAll('#road-bead .cell.bead').length >= 3`,
		`[document.getElementById('conn').dataset.state, document.querySelectorAll('#road-bead .cell.bead').length]`)
	pub.SaveScreenshot(shots, "demo-1-dealing", false)

	select {
	case <-ended:
	case <-tctx.Done():
		t.Fatalf("%v\n%s", context.Cause(tctx), logs.String())
	case err := <-done:
		t.Fatalf("demo stopped: %v\n%s", err, logs.String())
	case <-time.After(demoBrowserWait):
		t.Fatalf("the shoe did not end in %v:\n%s", demoBrowserWait, logs.String())
	}

	// The trail, replayed through the rules, holds the shoe the simulator
	// dealt: the controller read every card.
	view, recall := replayDemoTrail(ctx, t, info.Trail, profile, want)

	n := len(want.results)
	pub.WaitFor("the whole shoe on the display", fmt.Sprintf(`document.querySelectorAll('#road-bead .cell.bead').length === %d && document.querySelector('#stat-coups b').textContent === '%d' && document.getElementById('phase').textContent === 'SHOE OVER · WAITING FOR A NEW SHOE' && document.getElementById('cards-dealt').textContent === '%d'`, n, n, view.CardsDealt),
		`[document.querySelectorAll('#road-bead .cell.bead').length, document.querySelector('#stat-coups b').textContent, document.getElementById('phase').textContent, document.getElementById('cards-dealt').textContent]`)
	pub.SaveScreenshot(shots, "demo-2-shoe-dealt", false)
	pub.NoProblems()
	checkDemoConnection(t, pub)
	checkDemoTable(t, pub, view, n)
	checkDemoBeads(t, pub, want.results)
	checkDemoBigRoad(t, pub, want.results)
	checkDemoStats(t, pub, want.results)

	// The pit view, with the credentials the demo gives (tablectl demo
	// prints them: cmd/tablectl's TestPrintDemo).
	pitAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("pit:"+info.PitPassword))
	wrongAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte("pit:"+info.PitPassword+"x"))
	for _, c := range []struct {
		path, auth string
		code       int
	}{
		{"/pit", "", http.StatusUnauthorized},
		{"/pit", wrongAuth, http.StatusUnauthorized},
		{"/pit/recall", "", http.StatusUnauthorized},
		{"/pit/display.json", "", http.StatusUnauthorized},
		{"/recall", "", http.StatusUnauthorized},
		{"/pit", pitAuth, http.StatusOK},
		{"/pit/recall", pitAuth, http.StatusOK},
		{"/", "", http.StatusOK},
	} {
		code, challenge := httpStatus(t, info.HTTP+c.path, c.auth)
		if code != c.code {
			t.Errorf("GET %s (authorization %q): %d, want %d", c.path, c.auth, code, c.code)
		}
		if code == http.StatusUnauthorized && !strings.HasPrefix(challenge, "Basic ") {
			t.Errorf("GET %s: 401 without a basic auth challenge (%q)", c.path, challenge)
		}
	}
	pit := browser.OpenContext(tctx, t, info.HTTP+"/pit", 1920, 1080, map[string]string{"Authorization": pitAuth})
	checkDemoRecall(t, pit, want, recall)
	pit.NoProblems()
	pit.SaveScreenshot(shots, "demo-3-pit", true)
}

// plannedShoe is a shoe as the simulator deals it.
type plannedShoe struct {
	coups   [][]coup.Card // each coup's cards in shoe order
	results []coup.Result // scored here, from the cards
	dealt   int           // cards out of the shoe, burn included
}

func newPlannedShoe(t *testing.T, o shoesim.Options) plannedShoe {
	t.Helper()
	p, err := shoesim.NewPlan(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Shoes) != 1 {
		t.Fatalf("the plan deals %d shoes", len(p.Shoes))
	}
	s := p.Shoes[0]
	ps := plannedShoe{dealt: len(s.Burn)} // the exposed card and the burn
	var ties, bp, pp int
	for _, c := range s.Coups {
		r, err := coup.Score(c.Cards)
		if err != nil {
			t.Fatalf("planned coup %d: %v", c.Number, err)
		}
		ps.coups = append(ps.coups, c.Cards)
		ps.results = append(ps.results, r)
		ps.dealt += len(c.Cards) + len(c.Extra)
		if r.Winner == coup.SideTie {
			ties++
		}
		if r.BankerPair {
			bp++
		}
		if r.PlayerPair {
			pp++
		}
	}
	// A shoe without ties or pairs would leave those cells unchecked.
	if ties == 0 || bp == 0 || pp == 0 || len(ps.results) <= coup.RecallDepth {
		t.Fatalf("seed %d deals %d coups, %d ties, %d Banker pairs, %d Player pairs: pick a seed that shows them all", o.Seed, len(ps.results), ties, bp, pp)
	}
	return ps
}

// replayDemoTrail rebuilds the table from the demo's trail and checks it
// dealt exactly the planned shoe, cleanly; it returns the public view at
// the shoe's end and the table's recall.
func replayDemoTrail(ctx context.Context, t *testing.T, trail string, profile coup.Profile, want plannedShoe) (coup.View, []coup.CoupRecord) {
	t.Helper()
	r, err := audit.OpenReader(ctx, trail)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// How close the controller came to missing the dealer's next "no more
	// bets" with the result's timer: the margin the pace constants leave.
	var lastTick time.Time
	closest := time.Duration(math.MaxInt64)
	rp, err := audit.Replay(r.Events(ctx, audit.Query{}), coup.DefaultTableConfig(profile), audit.ReplayVisitor{
		Input: func(_ audit.Record, in coup.Input, _ []coup.Event, _ *coup.Table) {
			switch {
			case in.Kind == coup.InTick:
				lastTick = in.At
			case in.Kind == coup.InButton && in.Button == coup.ButtonNoMoreBets && !lastTick.IsZero():
				closest = min(closest, in.At.Sub(lastTick))
				lastTick = time.Time{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the trail replays: %d rows; the closest result timer came %v before the next coup's \"no more bets\"", rp.Rows(), closest)
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("the trail differs from its replay: %+v", d[:min(len(d), 5)])
	}
	tbl := rp.Table()
	if tbl.Phase() != coup.PhaseNoShoe || tbl.ShoeNumber() != 1 || tbl.Suspended() {
		t.Fatalf("after the shoe the table is in %s, shoe %d, suspended %v (alerts %+v)", tbl.Phase(), tbl.ShoeNumber(), tbl.Suspended(), tbl.Alerts())
	}
	coups := tbl.ShoeCoups()
	if len(coups) != len(want.coups) {
		t.Fatalf("the trail holds %d coups, the simulator dealt %d", len(coups), len(want.coups))
	}
	for i, c := range coups {
		var cards []coup.Card
		for _, dc := range c.Cards {
			cards = append(cards, dc.Card)
		}
		if c.Coup != i+1 || c.Voided || c.Result == nil || !slices.Equal(cards, want.coups[i]) || c.Result.Winner != want.results[i].Winner {
			t.Fatalf("trail coup %d: %+v, the simulator dealt %v (%s)", i+1, c, want.coups[i], want.results[i].Winner)
		}
	}
	view := tbl.PublicView()
	if total := profile.Decks * coup.CardCount; view.CardsDealt != want.dealt || view.Remaining != total-want.dealt {
		t.Fatalf("the table counts %d cards dealt and %d remaining; the simulator dealt %d of %d", view.CardsDealt, view.Remaining, want.dealt, total)
	}
	if !view.CutCardSeen || view.LastCoup != len(want.coups) {
		t.Fatalf("cut card seen %v, last coup %d; the simulator dealt %d coups", view.CutCardSeen, view.LastCoup, len(want.coups))
	}
	return view, tbl.Recall()
}

// trailTiming lists the inputs the trail recorded for a coup and the one
// before it, with when each came: what the table saw when it raised an
// alert.
func trailTiming(trail string, n int64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := audit.OpenReader(ctx, trail)
	if err != nil {
		return err.Error()
	}
	defer r.Close()
	var b strings.Builder
	var first time.Time
	for _, c := range []int64{n - 1, n} {
		if c < 1 {
			continue // Coup 0 in a Query is every row
		}
		for rec, err := range r.Events(ctx, audit.Query{Coup: c}) {
			if err != nil {
				return b.String() + err.Error()
			}
			if !strings.HasPrefix(rec.Kind, "in.") && rec.Kind != string(coup.EvAlert) {
				continue
			}
			if first.IsZero() {
				first = rec.At
			}
			fmt.Fprintf(&b, "  coup %d %+8.1fms %s %.60s\n", rec.Coup, float64(rec.At.Sub(first).Microseconds())/1000, rec.Kind, rec.Body)
		}
	}
	return b.String()
}

// ------------------------------------------------------------- the page

// watchDemoConnection counts, from the page's first connection on, the broker
// connections it loses and its MQTT keepalive pings.
func watchDemoConnection(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	pg.WaitFor("the page's MQTT client", `window.tableDisplay && window.tableDisplay.client`, `document.getElementById('conn').dataset.state`)
	pg.Eval(`(() => { const c = window.tableDisplay.client; const w = window.demoWatch = {since: Date.now(), drops: 0, pings: 0, pongs: 0};
		c.on('close', () => { w.drops++; });
		c.on('packetsend', (p) => { if (p.cmd === 'pingreq') w.pings++; });
		c.on('packetreceive', (p) => { if (p.cmd === 'pingresp') w.pongs++; });
		return true; })()`, nil)
}

// checkDemoConnection: the page stayed connected while the shoe was dealt, and
// kept its connection alive. MQTT wants a client with nothing else to send
// to ping within each keepalive, and lets a broker drop one silent for one
// and a half: a page connected longer than a keepalive (and a few seconds
// for its timer) must have had a ping answered.
func checkDemoConnection(t *testing.T, pg *browsertest.Page) {
	t.Helper()
	var w struct {
		Age       float64 `json:"age"`
		Drops     int     `json:"drops"`
		Pings     int     `json:"pings"`
		Pongs     int     `json:"pongs"`
		Keepalive float64 `json:"keepalive"`
	}
	pg.Eval(`({age: (Date.now() - window.demoWatch.since) / 1000, drops: window.demoWatch.drops, pings: window.demoWatch.pings,
		pongs: window.demoWatch.pongs, keepalive: window.tableDisplay.client.options.keepalive})`, &w)
	t.Logf("the page was connected %.1fs: %d connections lost, %d keepalive pings sent, %d answered (keepalive %vs)", w.Age, w.Drops, w.Pings, w.Pongs, w.Keepalive)
	if w.Drops > 0 {
		t.Errorf("the page lost its broker connection %d times in %.1fs while the shoe was dealt", w.Drops, w.Age)
	}
	if w.Keepalive > 0 && w.Age >= w.Keepalive+5 && (w.Pings == 0 || w.Pongs == 0) {
		t.Errorf("in %.1fs the page's MQTT keepalive (%vs) sent %d pings and had %d answered: a broker drops a client silent for 1.5 keepalives", w.Age, w.Keepalive, w.Pings, w.Pongs)
	}
}

var sideColour = map[coup.Side]string{coup.SideBanker: "red", coup.SidePlayer: "blue", coup.SideTie: "green"}

// checkDemoTable: the table is live, nothing is suspended, and the shoe's
// progress is the table's.
func checkDemoTable(t *testing.T, pg *browsertest.Page, view coup.View, coups int) {
	t.Helper()
	var st struct {
		State, Conn, Shoe string
		Suspended         bool
	}
	pg.Eval(`({State: document.getElementById('table-state').textContent, Conn: document.getElementById('conn').dataset.state,
		Shoe: document.getElementById('shoe-no').textContent, Suspended: `+browsertest.Visible("banner-suspended")+`})`, &st)
	if st.State != "LIVE" || st.Conn != "online" || st.Shoe != "1" || st.Suspended {
		t.Errorf("after the shoe the page shows %+v, want a live table, connected, shoe 1, no suspension", st)
	}
	for id, want := range map[string]int{"#cards-dealt": view.CardsDealt, "#cards-remaining": view.Remaining} {
		if got := pg.Text(id); got != strconv.Itoa(want) {
			t.Errorf("%s shows %s, the table %d", id, got, want)
		}
	}
	if got, want := pg.Text("#cut-card"), fmt.Sprintf("CUT CARD OUT · LAST COUP %d", coups); got != want {
		t.Errorf("cut card shows %q, want %q", got, want)
	}
	var fill string
	pg.Eval(`document.getElementById('shoe-fill').style.width`, &fill)
	got, err := strconv.ParseFloat(strings.TrimSuffix(fill, "%"), 64)
	if want := 100 * float64(view.CardsDealt) / float64(view.CardsDealt+view.Remaining); err != nil || !strings.HasSuffix(fill, "%") || math.Abs(got-want) > 0.01 {
		t.Errorf("the shoe bar is filled %q, want %.2f%%", fill, want)
	}
}

// checkDemoBeads: one bead per coup, in columns of six, with the result's
// letter and colour and its pair dots.
func checkDemoBeads(t *testing.T, pg *browsertest.Page, results []coup.Result) {
	t.Helper()
	var capacity int
	pg.Eval(`+document.getElementById('road-bead').dataset.capacity`, &capacity)
	if last := (len(results) - 1) / 6; last >= capacity {
		t.Fatalf("the bead plate holds %d columns; the shoe needs %d: the test wants every bead on screen", capacity, last+1)
	}
	type bead struct {
		Coup  int    `json:"coup"`
		Class string `json:"cls"`
		Text  string `json:"text"`
		Col   string `json:"col"`
		Row   string `json:"row"`
		BP    bool   `json:"bp"`
		PP    bool   `json:"pp"`
		BG    string `json:"bg"`
	}
	var cells []bead
	pg.Eval(`Array.from(document.querySelectorAll('#road-bead .cell.bead')).map(e => ({coup: +e.dataset.coup, cls: e.className,
		text: e.firstChild && e.firstChild.nodeType === Node.TEXT_NODE ? e.firstChild.textContent : '', col: e.style.gridColumn, row: e.style.gridRow,
		bp: e.querySelector('.pair.bp') !== null, pp: e.querySelector('.pair.pp') !== null, bg: getComputedStyle(e).backgroundColor}))`, &cells)
	if len(cells) != len(results) {
		t.Fatalf("the bead plate shows %d beads for %d coups", len(cells), len(results))
	}
	letter := map[coup.Side]string{coup.SideBanker: "B", coup.SidePlayer: "P", coup.SideTie: "T"}
	for i, c := range cells {
		r := results[i]
		w := bead{Coup: i + 1, Class: "cell bead " + r.Winner.String(), Text: letter[r.Winner],
			Col: strconv.Itoa(i/6 + 1), Row: strconv.Itoa(i%6 + 1), BP: r.BankerPair, PP: r.PlayerPair}
		if i == len(cells)-1 {
			w.Class += " newest" // the newest result is marked, as boards blink it
		}
		got := c
		got.BG = ""
		if got != w {
			t.Errorf("bead %d: %+v, want %+v", i+1, got, w)
		}
		if browsertest.Colour(c.BG) != sideColour[r.Winner] {
			t.Errorf("bead %d (%s) is drawn %s", i+1, r.Winner, browsertest.Colour(c.BG))
		}
	}
	var dots struct{ BP, PP []string }
	pg.Eval(`({BP: Array.from(document.querySelectorAll('#road-bead .pair.bp')).map(e => getComputedStyle(e).backgroundColor),
		PP: Array.from(document.querySelectorAll('#road-bead .pair.pp')).map(e => getComputedStyle(e).backgroundColor)})`, &dots)
	for _, c := range dots.BP {
		if browsertest.Colour(c) != "red" {
			t.Errorf("a Banker pair dot is %s", browsertest.Colour(c))
		}
	}
	for _, c := range dots.PP {
		if browsertest.Colour(c) != "blue" {
			t.Errorf("a Player pair dot is %s", browsertest.Colour(c))
		}
	}
}

// bigRoadMark is one big road cell as the rules of seed 003 make it: a
// Banker or Player coup, with the ties that followed it (and, on the
// shoe's first cell, the ties before it).
type bigRoadMark struct {
	Coup   int
	Winner coup.Side
	Ties   int
}

func bigRoadOf(results []coup.Result) []bigRoadMark {
	var marks []bigRoadMark
	leading := 0
	for i, r := range results {
		switch {
		case r.Winner != coup.SideTie:
			marks = append(marks, bigRoadMark{Coup: i + 1, Winner: r.Winner})
			if len(marks) == 1 {
				marks[0].Ties = leading
			}
		case len(marks) == 0:
			leading++
		default:
			marks[len(marks)-1].Ties++
		}
	}
	return marks
}

// checkDemoBigRoad: the big road's cells are the shoe's Banker and Player
// coups in order, in their colours, with their ties. Where the screen
// holds fewer columns than the shoe has, the page shows the last ones: the
// cells shown are then the end of the sequence.
func checkDemoBigRoad(t *testing.T, pg *browsertest.Page, results []coup.Result) {
	t.Helper()
	want := bigRoadOf(results)
	type cell struct {
		Coup   int    `json:"coup"`
		Class  string `json:"cls"`
		Ties   int    `json:"ties"`
		Border string `json:"border"`
		Slash  string `json:"slash"`
	}
	var cells []cell
	var offset string
	pg.Eval(`document.getElementById('road-big').dataset.offset`, &offset)
	pg.Eval(`Array.from(document.querySelectorAll('#road-big .cell.bigroad')).map(e => ({coup: +e.dataset.coup, cls: e.className, ties: +e.dataset.ties,
		border: getComputedStyle(e).borderTopColor,
		slash: e.querySelector('.tie-slash') ? getComputedStyle(e.querySelector('.tie-slash')).backgroundColor : ''}))`, &cells)
	slices.SortFunc(cells, func(a, b cell) int { return a.Coup - b.Coup })
	if len(cells) == 0 || len(cells) > len(want) || (offset == "0" && len(cells) != len(want)) {
		t.Fatalf("the big road shows %d cells (from column %s); the shoe makes %d", len(cells), offset, len(want))
	}
	tail := want[len(want)-len(cells):]
	for i, c := range cells {
		w := tail[i]
		class := "cell bigroad " + w.Winner.String()
		if i == len(cells)-1 {
			class += " newest" // sorted by coup: the last is the newest
		}
		if c.Coup != w.Coup || c.Class != class || c.Ties != w.Ties {
			t.Errorf("big road cell of coup %d: %+v, want %+v", c.Coup, c, w)
		}
		if browsertest.Colour(c.Border) != sideColour[w.Winner] {
			t.Errorf("big road cell of coup %d (%s) is drawn %s", c.Coup, w.Winner, browsertest.Colour(c.Border))
		}
		if (w.Ties > 0) != (c.Slash != "") || (c.Slash != "" && browsertest.Colour(c.Slash) != "green") {
			t.Errorf("big road cell of coup %d with %d ties has tie mark %q", c.Coup, w.Ties, c.Slash)
		}
	}
}

// checkDemoStats counts the results and reads the statistics panel.
func checkDemoStats(t *testing.T, pg *browsertest.Page, results []coup.Result) {
	t.Helper()
	count := map[coup.Side]int{}
	var bp, pp, naturals int
	for _, r := range results {
		count[r.Winner]++
		if r.BankerPair {
			bp++
		}
		if r.PlayerPair {
			pp++
		}
		if r.Natural() {
			naturals++
		}
	}
	for side, name := range map[coup.Side]string{coup.SideBanker: "banker", coup.SidePlayer: "player", coup.SideTie: "tie"} {
		if got, want := pg.Text("#stat-"+name+" .stat-count"), strconv.Itoa(count[side]); got != want {
			t.Errorf("%s count shows %s, want %s", name, got, want)
		}
		pct := math.Round(1000*float64(count[side])/float64(len(results))) / 10
		if got, want := pg.Text("#stat-"+name+" .stat-pct"), fmt.Sprintf("%.1f%%", pct); got != want {
			t.Errorf("%s share shows %s, want %s", name, got, want)
		}
		var bg string
		pg.Eval(fmt.Sprintf(`getComputedStyle(document.getElementById('stat-%s')).backgroundColor`, name), &bg)
		if browsertest.Colour(bg) != sideColour[side] {
			t.Errorf("the %s counter is drawn %s", name, browsertest.Colour(bg))
		}
	}
	for sel, want := range map[string]int{"#stat-banker-pairs b": bp, "#stat-player-pairs b": pp, "#stat-naturals b": naturals, "#stat-coups b": len(results)} {
		if got := pg.Text(sel); got != strconv.Itoa(want) {
			t.Errorf("%s shows %s, want %d", sel, got, want)
		}
	}
}

// checkDemoRecall: the pit sees the shoe's last 10 coups, newest first,
// with every card in shoe order, the hands and the result.
func checkDemoRecall(t *testing.T, pg *browsertest.Page, want plannedShoe, recall []coup.CoupRecord) {
	t.Helper()
	n := len(want.coups)
	if len(recall) != coup.RecallDepth || recall[len(recall)-1].Coup != n {
		t.Fatalf("the table's recall holds %d coups, the last %d", len(recall), recall[len(recall)-1].Coup)
	}
	pg.WaitFor("the recall of the last 10 coups", fmt.Sprintf(`document.querySelectorAll('#recall-table tbody tr').length === %d && document.querySelector('#recall-table tbody tr').dataset.coup === '%d'`, coup.RecallDepth, n),
		`[document.querySelectorAll('#recall-table tbody tr').length, document.getElementById('recall-note').textContent]`)
	var pit bool
	pg.Eval(browsertest.Visible("pit")+` && `+browsertest.Visible("pit-recall"), &pit)
	if !pit {
		t.Error("the pit view does not show the pit panels")
	}
	var rows []struct {
		Coup   string   `json:"coup"`
		Label  string   `json:"label"`
		Cards  []string `json:"cards"`
		Red    []bool   `json:"red"`
		Player string   `json:"player"`
		Banker string   `json:"banker"`
		Result string   `json:"result"`
	}
	pg.Eval(`Array.from(document.querySelectorAll('#recall-table tbody tr')).map(tr => ({coup: tr.dataset.coup, label: tr.children[0].textContent,
		cards: Array.from(tr.children[1].querySelectorAll('.c')).map(s => s.textContent),
		red: Array.from(tr.children[1].querySelectorAll('.c')).map(s => s.classList.contains('red')),
		player: tr.children[2].textContent, banker: tr.children[3].textContent, result: tr.children[4].textContent}))`, &rows)
	if len(rows) != coup.RecallDepth {
		t.Fatalf("the recall shows %d rows", len(rows))
	}
	suits := map[byte]string{'S': "♠", 'H': "♥", 'D': "♦", 'C': "♣"}
	face := func(c coup.Card) string {
		s := c.String()
		rank := s[:1]
		if rank == "T" {
			rank = "10"
		}
		return rank + suits[s[1]]
	}
	join := func(cs []coup.Card) string {
		var b strings.Builder
		for _, c := range cs {
			b.WriteString(face(c))
		}
		return b.String()
	}
	for i, row := range rows {
		k := n - 1 - i // newest first
		cards, r := want.coups[k], want.results[k]
		var faces []string
		var red []bool
		for _, c := range cards {
			faces = append(faces, face(c))
			red = append(red, c.Suit == coup.Hearts || c.Suit == coup.Diamonds)
		}
		wantRes := strings.ToUpper(r.Winner.String()) + fmt.Sprintf("P%d B%d", r.PlayerPoint, r.BankerPoint)
		if row.Coup != strconv.Itoa(k+1) || row.Label != fmt.Sprintf("1/%d", k+1) || !slices.Equal(row.Cards, faces) || !slices.Equal(row.Red, red) ||
			row.Player != join(r.Player) || row.Banker != join(r.Banker) || row.Result != wantRes {
			t.Errorf("recall row %d: %+v\nwant coup %d, cards %v (red %v), player %s, banker %s, %s", i, row, k+1, faces, red, join(r.Player), join(r.Banker), wantRes)
		}
	}
}

// httpStatus GETs url with an Authorization header (none if auth is "")
// and returns the status and the basic auth challenge.
func httpStatus(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}
