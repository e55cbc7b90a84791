package display_test

// TestBrowserViewer is the surveillance viewer (tablectl replay --serve)
// in headless Chromium, stepping through a shoe recorded by the audit
// recorder: a row every 137 ms, a coup voided by a signed supervisor
// command, an unreadable card entered by hand. What the page shows is
// checked against the trail itself (read with audit's reader and replayed
// coup by coup with audit.ReplayCoups), never against what the viewer
// computed.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display/viewer"
)

// pacedTable is the recorder with time moving on 137 ms at each input
// from the shoe, so rows carry milliseconds. The recorder stamps rows
// with its clock, which follows.
type pacedTable struct {
	*recorderTable
	clk *clock.Fake
}

func (p pacedTable) deal(in coup.Input) {
	p.mu.Lock()
	p.now = p.now.Add(137 * time.Millisecond)
	p.clk.Set(p.now)
	p.mu.Unlock()
	p.recorderTable.deal(in)
}

func (p pacedTable) pause(d time.Duration) {
	p.mu.Lock()
	p.clk.Set(p.now.Add(d))
	p.mu.Unlock()
	p.recorderTable.pause(d)
}

func TestBrowserViewer(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := filepath.Join(screenshotDir(t), "viewer")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	trail := filepath.Join(t.TempDir(), "trail.db")
	start := time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC)
	// The recorder stamps a command with its clock: the test's time.
	clk := clock.NewFake(start)
	rec, err := audit.OpenRecorder(ctx, trail, audit.RecorderOptions{Table: bTable, Config: coup.DefaultTableConfig(p), Logger: quiet, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rt := &recorderTable{t: t, ctx: ctx, rec: rec, now: start}
	command := func(c coup.Command) { rt.submit(coup.Input{Kind: coup.InCmd, Command: &c}) }
	tb := pacedTable{rt, clk}
	d := newDealer(41)
	d.startShoe(t, tb)
	for coupNo := 1; tb.pitView().Phase != coup.PhaseNoShoe && coupNo <= 12; coupNo++ {
		if coupNo == 5 {
			d.dealCoup(t, tb, func(i int, c coup.Card) bool {
				if i != 2 {
					return false
				}
				tb.deal(coup.Input{Kind: coup.InCard, Unreadable: true})
				command(coup.Command{ID: "m5", Action: coup.ActionCard, Card: &c, By: "ann", KeyID: "a1b2c3d4e5f60718", Reason: "read from the card"})
				return true
			})
		} else {
			d.dealCoup(t, tb, nil)
		}
		d.finish(tb)
		if coupNo == 3 {
			command(coup.Command{ID: "v3", Action: coup.ActionVoid, Coup: 3, By: "ann", KeyID: "a1b2c3d4e5f60718", Reason: "card exposed"})
		}
	}
	rec.Close()

	// The truth, from the trail: every input row's time, and each coup's
	// cards as dealt.
	r, err := audit.OpenReader(ctx, trail)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	times := map[int64]string{}
	for rec, err := range r.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if coup.IsInput(rec.Kind) {
			times[rec.Seq] = rec.At.UTC().Format("2006-01-02 15:04:05.000")
		}
	}
	coups, _, err := audit.ReplayCoups(r.Events(ctx, audit.Query{}), audit.DefaultReplayConfig())
	if err != nil {
		t.Fatal(err)
	}

	tl, err := viewer.LoadFile(ctx, trail)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(viewer.Handler(tl, trail))
	t.Cleanup(srv.Close)
	pg := b.OpenContext(ctx, t, srv.URL+"/", 1920, 1080, nil)
	pg.WaitFor("the trail's first row", `window.viewer !== undefined && document.body.dataset.step === '0' && document.getElementById('now-seq').textContent !== '–'`,
		`document.getElementById('jump-error').textContent`)

	// Every row, its time to the millisecond.
	var rows [][2]string
	pg.Eval(`Array.from(document.querySelectorAll('#rows tbody tr')).map((tr) => [tr.cells[1].textContent, tr.cells[0].textContent])`, &rows)
	if len(rows) != len(times) {
		t.Fatalf("the page lists %d rows, the trail has %d inputs", len(rows), len(times))
	}
	ms := 0
	for _, row := range rows {
		var seq int64
		fmt.Sscan(row[0], &seq)
		if times[seq] != row[1] {
			t.Errorf("row %d shows %q, recorded at %q", seq, row[1], times[seq])
		}
		if !strings.HasSuffix(row[1], "000") {
			ms++
		}
	}
	if ms == 0 {
		t.Error("no row shows milliseconds")
	}

	// Coup by coup: COUP ⏭ goes to each coup's first row; ROW ▶ through
	// coup 2 shows its cards as they came.
	nowCoup := func() string { return pg.Text("#now-coup") }
	step := func() int {
		var s int
		pg.Eval(`+document.body.dataset.step`, &s)
		return s
	}
	for want := 1; want <= 2; want++ {
		before := step()
		pg.Eval(`document.getElementById('btn-next-coup').click()`, nil)
		pg.WaitFor(fmt.Sprintf("coup %d's first row", want), fmt.Sprintf(`+document.body.dataset.step > %d && document.getElementById('now-coup').textContent === '1 · %d'`, before, want), `document.getElementById('now-coup').textContent`)
	}
	var c2 *audit.ReplayedCoup
	for _, c := range coups {
		if c.Shoe == 1 && c.Coup == 2 {
			c2 = c
		}
	}
	if c2 == nil || c2.Result == nil {
		t.Fatal("coup 2 is not in the trail")
	}
	for nowCoup() == "1 · 2" && pg.Text("#result") == "" {
		s := step()
		pg.Eval(`document.getElementById('btn-next').click()`, nil)
		pg.WaitFor("the next row", fmt.Sprintf(`+document.body.dataset.step === %d`, s+1), ``)
		var shown []string
		pg.Eval(`Array.from(document.querySelectorAll('#hand-player .c[data-card], #hand-banker .c[data-card]')).map((e) => e.dataset.card)`, &shown)
		for _, c := range shown {
			if !slices.Contains(c2.Cards, c) {
				t.Errorf("coup 2 shows %s; it was dealt %v", c, c2.Cards)
			}
		}
	}
	var hands [2][]string
	pg.Eval(`[Array.from(document.querySelectorAll('#hand-player .c')).map((e) => e.dataset.card), Array.from(document.querySelectorAll('#hand-banker .c')).map((e) => e.dataset.card)]`, &hands)
	if !slices.Equal(hands[0], cardStrings(c2.Result.Player)) || !slices.Equal(hands[1], cardStrings(c2.Result.Banker)) {
		t.Errorf("coup 2's result shows Player %v Banker %v; the trail says %v %v", hands[0], hands[1], c2.Result.Player, c2.Result.Banker)
	}
	pg.SaveScreenshot(shots, "viewer-coup-2", false)

	// Jump to coup 5: the unreadable card's alert, then the card ann
	// entered, with her key.
	pg.Eval(`document.getElementById('jump-coup').value = '1/5'; document.getElementById('jump-coup-go').click()`, nil)
	pg.WaitFor("coup 5", `document.getElementById('now-coup').textContent === '1 · 5'`, `[document.getElementById('now-coup').textContent, document.getElementById('jump-error').textContent]`)
	for i := 0; i < 12 && !strings.Contains(pg.Text("#alerts"), "UNREADABLE"); i++ {
		s := step()
		pg.Eval(`document.getElementById('btn-next').click()`, nil)
		pg.WaitFor("the next row", fmt.Sprintf(`+document.body.dataset.step === %d`, s+1), ``)
	}
	if !strings.Contains(pg.Text("#alerts"), "UNREADABLE CARD") || pg.Text("#now-suspended") != "SUSPENDED" {
		t.Errorf("at coup 5's unreadable card: alerts %q, %q", pg.Text("#alerts"), pg.Text("#now-suspended"))
	}
	pg.SaveScreenshot(shots, "viewer-alert", false)
	s := step()
	pg.Eval(`document.getElementById('btn-next').click()`, nil)
	pg.WaitFor("ann's card", fmt.Sprintf(`+document.body.dataset.step === %d && document.getElementById('actions').textContent.includes('signed by ann (key a1b2c3d4e5f60718)')`, s+1), `document.getElementById('actions').textContent`)

	// Jump to a time: the void of coup 3, recorded after its result.
	var void *viewer.Step
	for _, st := range tl.Steps {
		if st.Action != nil && st.Action.Action == coup.ActionVoid {
			void = st
		}
	}
	if void == nil {
		t.Fatal("no void in the timeline")
	}
	pg.Eval(fmt.Sprintf(`document.getElementById('jump-time').value = %q; document.getElementById('jump-time-go').click()`, times[void.Seq][11:]), nil)
	pg.WaitFor("the void's row", fmt.Sprintf(`document.getElementById('now-seq').textContent === '%d'`, void.Seq), `[document.getElementById('now-seq').textContent, document.getElementById('jump-error').textContent]`)
	if a := pg.Text("#actions"); !strings.Contains(a, "void coup 3") || !strings.Contains(a, "signed by ann") || !strings.Contains(a, "card exposed") {
		t.Errorf("the void's actions: %q", a)
	}
	var beads []string
	pg.Eval(`Array.from(document.querySelectorAll('#road-bead .cell')).map((e) => e.dataset.coup)`, &beads)
	if slices.Contains(beads, "3") || !slices.Contains(beads, "2") {
		t.Errorf("the bead plate after the void holds coups %v", beads)
	}
	var evRows int
	pg.Eval(`document.querySelectorAll('#ev-table tbody tr').length`, &evRows)
	if evRows < 3 {
		t.Errorf("EV at the void: %d bets", evRows)
	}
	// The roads are drawn by the table display's own renderer; the row's
	// time shows as stored, with the local time, and the dealer; the coup
	// prints as a report.
	var vr struct {
		Shared         bool
		Big, Mk        int
		UTC, Local     string
		Dealer, Report string
	}
	pg.Eval(`({Shared: typeof window.tableRoads === 'object', Big: document.querySelectorAll('#road-big .cell.bigroad').length,
		Mk: document.querySelectorAll('#road-bigeye .mk.bigeye, #road-small .mk.small, #road-roach .mk.roach').length,
		UTC: document.getElementById('now-time').textContent, Local: document.getElementById('now-local').textContent,
		Dealer: document.getElementById('now-dealer').textContent, Report: document.getElementById('btn-report').href})`, &vr)
	if !vr.Shared || vr.Big == 0 || vr.UTC != void.TimeMicro || !strings.Contains(vr.Local, "UTC+") && !strings.Contains(vr.Local, "UTC−") || vr.Dealer == "" || !strings.Contains(vr.Report, "report?coup=") {
		t.Errorf("the viewer at the void: %+v (row stored at %s)", vr, void.TimeMicro)
	}
	resp, err := http.Get(vr.Report)
	if err != nil {
		t.Fatal(err)
	}
	report, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(report), "signed by ann") || !strings.Contains(string(report), void.TimeMicro) {
		t.Errorf("the coup report: HTTP %d\n%s", resp.StatusCode, report)
	}
	pg.SaveScreenshot(shots, "viewer-void", false)

	// Play: the rows go by on their own, and stop when asked.
	s = step()
	pg.Eval(`document.getElementById('speed').value = '60'; document.getElementById('btn-play').click()`, nil)
	pg.WaitFor("play to move on", fmt.Sprintf(`+document.body.dataset.step >= %d`, s+5), `document.body.dataset.step`)
	pg.Eval(`document.getElementById('btn-play').click()`, nil)
	pg.WaitFor("pause", `document.body.dataset.playing === 'false'`, ``)
	pg.NoProblems()
}

func cardStrings(cs []coup.Card) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}
