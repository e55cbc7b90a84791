package viewer

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
)

var t0 = time.Date(2026, 11, 22, 20, 0, 1, 0, time.UTC)

// writeTrail records two coups through the recorder, a row every 1.25s:
// the first voided after it completed (signed by anna), the second with
// an unreadable card entered by hand. With differ, a result the rules do
// not derive is appended through the store (the chain stays whole).
func writeTrail(t *testing.T, path string, differ bool) {
	t.Helper()
	ctx := context.Background()
	p, _ := coup.BuiltinProfile(coup.ProfileVIP)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec, err := audit.OpenRecorder(ctx, path, audit.RecorderOptions{Table: "T9", Config: coup.DefaultTableConfig(p),
		Clock: clock.NewStepping(t0, 1250*time.Millisecond), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint32(0)
	submit := func(in coup.Input) {
		if _, err := rec.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	shoe := func(in coup.Input) {
		seq++
		in.ShoeSeq = seq
		submit(in)
	}
	card := func(list string) {
		for _, s := range strings.Split(list, ",") {
			if s == "??" {
				shoe(coup.Input{Kind: coup.InCard, Unreadable: true})
				continue
			}
			c, err := coup.ParseCard(s)
			if err != nil {
				t.Fatal(err)
			}
			shoe(coup.Input{Kind: coup.InCard, Card: &c})
		}
	}
	btn := func(b string) { shoe(coup.Input{Kind: coup.InButton, Button: b}) }
	btn(coup.ButtonNewShoe)
	card("2S,9C,9D")
	btn(coup.ButtonBurnDone)
	btn(coup.ButtonNoMoreBets)
	card("9S,7H,KD,KC")
	btn(coup.ButtonReveal)
	submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "c1", Action: coup.ActionVoid, Coup: 1, By: "anna", KeyID: "0123456789abcdef", Reason: "wrong shoe order"}})
	btn(coup.ButtonNoMoreBets)
	card("6S,6H,??")
	kd := coup.Card{Rank: coup.Seven, Suit: coup.Diamonds}
	submit(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "c2", Action: coup.ActionCard, Card: &kd, By: "anna"}})
	card("KC,5H")
	btn(coup.ButtonReveal)
	rec.Close()
	if !differ {
		return
	}
	st, err := audit.Open(ctx, path, audit.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kh := coup.Card{Rank: coup.King, Suit: coup.Hearts}
	if _, err := st.AppendBatch(ctx, []audit.Event{
		{Kind: string(coup.InCard), Shoe: 1, Coup: 2, Body: coup.Input{Kind: coup.InCard, At: t0.Add(time.Hour), Card: &kh, ShoeSeq: 99}},
		{Kind: string(coup.EvCoupResult), Shoe: 1, Coup: 2, Body: map[string]string{"winner": "banker"}},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path, false)
	tl, err := LoadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Table != "T9" || len(tl.Diffs) != 0 || len(tl.Coups) != 2 || tl.Coups[0].Coup != 1 || tl.Coups[1].Coup != 2 {
		t.Fatalf("table %q, diffs %v, coups %+v", tl.Table, tl.Diffs, tl.Coups)
	}
	// Every input row is a step, with its time to the millisecond.
	r, err := audit.OpenReader(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var inputs []audit.Record
	for rec, err := range r.Events(context.Background(), audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if coup.IsInput(rec.Kind) {
			inputs = append(inputs, rec)
		}
	}
	if len(inputs) != len(tl.Steps) {
		t.Fatalf("%d input rows, %d steps", len(inputs), len(tl.Steps))
	}
	for i, rec := range inputs {
		if s := tl.Steps[i]; s.Seq != rec.Seq || s.Time != rec.At.UTC().Format("2006-01-02 15:04:05.000") {
			t.Errorf("step %d: seq %d time %s; row %d at %s", i, s.Seq, s.Time, rec.Seq, rec.At.Format(time.RFC3339Nano))
		}
	}
	ms := 0
	for _, s := range tl.Steps {
		if !strings.HasSuffix(s.Time, ".000") {
			ms++
		}
	}
	if ms == 0 {
		t.Errorf("rows 1.25s apart all show whole seconds: milliseconds lost")
	}

	// The void: its signer and key, and the roads without the coup.
	var void, alert, manual *Step
	for _, s := range tl.Steps {
		switch {
		case s.Action != nil && s.Action.Action == coup.ActionVoid:
			void = s
		case s.Alert:
			alert = s
		case s.Action != nil && s.Action.Action == coup.ActionCard:
			manual = s
		}
	}
	if void == nil || void.Action.By != "anna" || void.Action.KeyID != "0123456789abcdef" || void.Action.Outcome != "accepted" || void.Action.Reason != "wrong shoe order" {
		t.Fatalf("void step %+v", void)
	}
	before, err := tl.State(void.Index - 1)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := tl.State(void.Index)
	if len(before.Roads.BeadPlate) != 1 || len(after.Roads.BeadPlate) != 0 || len(after.Actions) != 1 {
		t.Errorf("bead plate %d before the void, %d after; actions %+v", len(before.Roads.BeadPlate), len(after.Roads.BeadPlate), after.Actions)
	}
	if alert == nil || manual == nil || alert.Coup != 2 {
		t.Fatalf("alert step %+v, manual card step %+v", alert, manual)
	}
	as, _ := tl.State(alert.Index)
	if !as.View.Suspended || len(as.View.Alerts) != 1 || as.View.Alerts[0].Kind != coup.AlertUnreadableCard {
		t.Errorf("at the alert: suspended %v, alerts %+v", as.View.Suspended, as.View.Alerts)
	}
	// The void came once coup 2 was open (its betting), so coup 2 lists it
	// with the card entered.
	mc, _ := tl.State(manual.Index)
	if n := len(mc.Actions); mc.View.Suspended || n == 0 || mc.Actions[n-1].Card != "7D" || mc.Actions[n-1].By != "anna" {
		t.Errorf("after the manual card: suspended %v, actions %+v", mc.View.Suspended, mc.Actions)
	}
	last, _ := tl.State(len(tl.Steps) - 1)
	if last.View.Result == nil || len(last.Roads.BeadPlate) != 1 || len(last.EV) == 0 || last.Remaining != 416-3-4-5 {
		t.Errorf("at the end: result %+v, bead plate %d, EV %d bets, %d cards left", last.View.Result, len(last.Roads.BeadPlate), len(last.EV), last.Remaining)
	}
	if _, err := tl.State(len(tl.Steps)); err == nil {
		t.Error("a step past the end")
	}

	// Jumps.
	for _, c := range []struct {
		coup, time string
		want       int
	}{
		{"1/2", "", tl.Coups[1].Step},
		{"2", "", tl.Coups[1].Step},
		{"", tl.Steps[5].Time, 5},
		{"", tl.Steps[5].Time[11:], 5},
		{"", tl.Steps[5].At.Add(time.Millisecond).Format(time.RFC3339Nano), 5},
		{"", "2000-01-01 00:00:00.000", 0},
	} {
		if got, err := tl.Find(c.coup, c.time); err != nil || got != c.want {
			t.Errorf("find coup %q time %q: %d, %v; want %d", c.coup, c.time, got, err, c.want)
		}
	}
	for _, c := range [][2]string{{"1/9", ""}, {"x", ""}, {"", "noon"}, {"", ""}} {
		if _, err := tl.Find(c[0], c[1]); err == nil {
			t.Errorf("find %q: no error", c)
		}
	}
}

func TestTimelineDifferences(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path, true)
	tl, err := LoadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Diffs) == 0 {
		t.Fatal("a result the rules do not derive: no difference")
	}
	lastStep := tl.Steps[len(tl.Steps)-1]
	if len(lastStep.Diffs) == 0 || lastStep.Diffs[0].Seq <= lastStep.Seq {
		t.Errorf("the difference is not on the input that derived its rows: %+v at step seq %d", lastStep.Diffs, lastStep.Seq)
	}

	srv := httptest.NewServer(Handler(tl, path))
	defer srv.Close()
	var tj struct {
		Steps []struct {
			Seq  int64 `json:"seq"`
			Diff bool  `json:"diff"`
		} `json:"steps"`
		Diffs []audit.Difference `json:"differences"`
	}
	get(t, srv.URL+"/timeline.json", http.StatusOK, &tj)
	if len(tj.Steps) != len(tl.Steps) || !tj.Steps[len(tj.Steps)-1].Diff || len(tj.Diffs) != len(tl.Diffs) {
		t.Errorf("timeline.json: %d steps, last diff %v, %d differences", len(tj.Steps), tj.Steps[len(tj.Steps)-1].Diff, len(tj.Diffs))
	}
	var st map[string]any
	get(t, srv.URL+"/step/3", http.StatusOK, &st)
	if st["seq"] == nil || st["view"] == nil || st["roads"] == nil {
		t.Errorf("step 3: %v", st)
	}
	var found map[string]int
	get(t, srv.URL+"/find?coup=1/2", http.StatusOK, &found)
	if found["step"] != tl.Coups[1].Step {
		t.Errorf("find coup 1/2: %v", found)
	}
	get(t, srv.URL+"/step/99999", http.StatusNotFound, nil)
	get(t, srv.URL+"/step/x", http.StatusBadRequest, nil)
	get(t, srv.URL+"/find?coup=7/7", http.StatusNotFound, nil)
	get(t, srv.URL+"/web/viewer.html", http.StatusNotFound, nil)
	get(t, srv.URL+"/web/../viewer.go", http.StatusNotFound, nil)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("the page: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}

func get(t *testing.T, url string, code int, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != code {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, code)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
}

func TestServe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path, false)
	tl, err := LoadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	urls := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ServeOptions{Addr: "127.0.0.1:0"}, tl, path, func(u string) { urls <- u }) }()
	var u string
	select {
	case u = <-urls:
	case err := <-done:
		t.Fatal(err)
	}
	var tj struct {
		Table string `json:"table"`
	}
	get(t, u+"timeline.json", http.StatusOK, &tj)
	if tj.Table != "T9" {
		t.Errorf("table %q", tj.Table)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop with its context")
	}
	if err := Serve(context.Background(), ServeOptions{Addr: "256.0.0.1:1"}, tl, path, nil); err == nil {
		t.Error("Serve on a bad address: no error")
	}
}

// TestFindTypedPrecision: a time is read to the precision it was typed to,
// so the time a row shows (to the millisecond) lands on that row, though
// the trail keeps microseconds.
func TestFindTypedPrecision(t *testing.T) {
	day := time.Date(2026, 11, 22, 21, 0, 4, 0, time.UTC)
	tl := &Timeline{}
	for i, us := range []int{122900, 123456, 123789, 1000001} { // 21:00:04.122900...
		tl.Steps = append(tl.Steps, &Step{Index: i, At: day.Add(time.Duration(us) * time.Microsecond)})
	}
	for _, c := range []struct {
		time string
		want int
	}{
		{"21:00:04.123", 2}, // the last row of that millisecond
		{"2026-11-22 21:00:04.123", 2},
		{"21:00:04.123456", 1},
		{"21:00:04.123789", 2},
		{"21:00:04.1229", 0},
		{"21:00:04", 2},
		{"21:00:05.000", 3},
		{"21:00:04.5", 2},
		{"2026-11-22T21:00:04.122Z", 0},
		{"2026-11-22T21:00:04.122900Z", 0},
		{"20:00:00", 0},
	} {
		if got, err := tl.Find("", c.time); err != nil || got != c.want {
			t.Errorf("find %q: step %d, %v; want %d", c.time, got, err, c.want)
		}
	}
}

// TestReport: a coup's printable report holds every row of the coup to the
// microsecond, its cards, result and actions with their signers.
func TestReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path, false)
	tl, err := LoadFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	c := tl.Coups[0]
	rep, err := tl.Report(c.Shoe, c.Coup, time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	page, err := rep.HTML()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range tl.Steps {
		if s.Shoe == c.Shoe && s.Coup == c.Coup {
			n++
			if !strings.Contains(string(page), s.TimeMicro) {
				t.Errorf("the report lacks row %d's time %s", s.Seq, s.TimeMicro)
			}
		}
	}
	if len(rep.Rows) != n || n == 0 || len(rep.Player) < 2 || len(rep.Banker) < 2 || rep.Result == "" {
		t.Errorf("report of coup %d/%d: %d rows of %d, player %v, banker %v, result %q", c.Shoe, c.Coup, len(rep.Rows), n, rep.Player, rep.Banker, rep.Result)
	}
	if _, err := tl.Report(9, 99, time.Now()); err == nil {
		t.Error("a report of a coup not in the trail")
	}
}
