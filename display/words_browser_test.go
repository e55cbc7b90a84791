package display_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/browsertest"
)

// publicStates are the table's states as the public topics carry them,
// each with the one message the public page must show: the state pill,
// the banner (its title and detail) and the phase line agree, none invites
// bets, and no reason but the fixed list's words ever shows.
var publicStates = []struct {
	name          string
	status, coup  string
	roads         string
	pill, phase   string
	banner        string // the visible banner's id, "" for none
	detailPrefix  string
	mustNotAppear []string
}{
	{"suspended-supervisor", `{"state":"online","table":"t7","phase":"betting_open","shoe":2,"coup":14,"suspended":true,"suspend_reason":"table_check"}`,
		`{"shoe":2,"coup":14,"phase":"betting_open","suspended":true,"suspend_reason":"table_check","player":[],"banker":[]}`, "",
		"SUSPENDED", "NO BETS · GAME PAUSED", "banner-suspended", "TABLE CHECK · ", []string{"PLACE YOUR BETS"}},
	{"suspended-cards", `{"state":"online","table":"t7","phase":"dealing","shoe":2,"coup":14,"suspended":true,"suspend_reason":"card_check"}`,
		`{"shoe":2,"coup":14,"phase":"dealing","suspended":true,"suspend_reason":"card_check","player":[{"card":"2H"},{"card":"9S"}],"banker":[{"card":"KD"},{"unreadable":true}]}`, "",
		"SUSPENDED", "NO BETS · GAME PAUSED", "banner-suspended", "CHECKING THE CARDS · ", []string{"DEALING"}},
	{"suspended-shoe", `{"state":"online","table":"t7","phase":"dealing","shoe":2,"coup":14,"suspended":true,"suspend_reason":"shoe_check"}`,
		`{"shoe":2,"coup":14,"phase":"dealing","suspended":true,"suspend_reason":"shoe_check","player":[{"card":"2H"}],"banker":[]}`, "",
		"SUSPENDED", "NO BETS · GAME PAUSED", "banner-suspended", "CHECKING THE SHOE · ", nil},
	{"self-check-failed", `{"state":"online","table":"t7","phase":"betting_open","shoe":2,"coup":14,"suspended":true,"suspend_reason":"system_check"}`,
		`{"shoe":2,"coup":14,"phase":"betting_open","suspended":true,"suspend_reason":"system_check","player":[],"banker":[]}`, "",
		"SUSPENDED", "NO BETS · GAME PAUSED", "banner-suspended", "TECHNICAL CHECK · ", []string{"PLACE YOUR BETS"}},
	// A controller of before the fixed list published the supervisor's
	// words: the page never echoes a reason it does not know.
	{"suspended-old-controller", `{"state":"online","table":"t7","phase":"betting_open","shoe":2,"coup":14,"suspended":true,"suspend_reason":"suspect dealer"}`,
		`{"shoe":2,"coup":14,"phase":"betting_open","suspended":true,"suspend_reason":"suspect dealer","player":[],"banker":[]}`, "",
		"SUSPENDED", "NO BETS · GAME PAUSED", "banner-suspended", "TABLE CHECK · ", []string{"suspect", "PLACE YOUR BETS"}},
	{"offline", `{"state":"offline","table":"t7"}`,
		`{"shoe":2,"coup":14,"phase":"betting_open","player":[],"banker":[]}`, "",
		"OFFLINE", "NO BETS · TABLE OFFLINE", "banner-offline", "no bets", []string{"PLACE YOUR BETS", "controller"}},
	{"no-shoe", `{"state":"online","table":"t7","phase":"no_shoe","suspended":false}`,
		`{"shoe":0,"coup":0,"phase":"no_shoe","player":[],"banker":[]}`, `{}`,
		"LIVE", "WAITING FOR A NEW SHOE", "", "", []string{"PLACE YOUR BETS", "SHOE OVER"}},
	{"shoe-over", `{"state":"online","table":"t7","phase":"no_shoe","shoe":2,"suspended":false}`,
		`{"shoe":2,"coup":0,"phase":"no_shoe","player":[],"banker":[]}`, `{"bead_plate":[],"grid":{},"stats":{"coups":71}}`,
		"LIVE", "SHOE OVER · WAITING FOR A NEW SHOE", "", "", []string{"PLACE YOUR BETS"}},
	{"betting-countdown", `{"state":"online","table":"t7","phase":"betting_open","shoe":2,"coup":14,"suspended":false}`,
		`{"shoe":2,"coup":14,"phase":"betting_open","player":[],"banker":[],"bets_close_at":"CLOSE"}`, "",
		"LIVE", "PLACE YOUR BETS", "", "", []string{"SUSPENDED"}},
	{"betting-open", `{"state":"online","table":"t7","phase":"betting_open","shoe":2,"coup":14,"suspended":false}`,
		`{"shoe":2,"coup":14,"phase":"betting_open","player":[],"banker":[]}`, "",
		"LIVE", "PLACE YOUR BETS", "", "", []string{"SUSPENDED"}},
}

var publicBanners = []string{"banner-loading", "banner-suspended", "banner-offline", "banner-conn"}

// TestBrowserPublicWords shows the public page each state of the table
// and reads what a player sees.
func TestBrowserPublicWords(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := screenshotDir(t)
	br := embeddedBroker(t)
	f := &feeder{t: t, br: br}
	f.connect()
	t.Cleanup(func() { f.cli.Disconnect(0) })
	for _, st := range publicStates {
		t.Run(st.name, func(t *testing.T) {
			// Under public/, which the embedded broker lets a public page read.
			prefix := bPrefix + "/public/words-" + st.name
			srv := layoutServer(t, br, nil, prefix)
			roadsJSON := st.roads
			if roadsJSON == "" {
				roadsJSON = `{"bead_plate":[],"grid":{},"stats":{"coups":13}}`
			}
			// The betting time closes betting 20 s from now.
			coupJSON := strings.Replace(st.coup, "CLOSE", time.Now().Add(20*time.Second).UTC().Format(time.RFC3339Nano), 1)
			for topic, payload := range map[string]string{"status": st.status, "public/coup": coupJSON,
				"public/shoe": `{"shoe":2,"coup":14,"cards_dealt":180,"cards_remaining":236}`, "public/roads": roadsJSON} {
				publishRetained(t, f, prefix+"/"+topic, payload)
				t.Cleanup(func() { publishRetained(t, f, prefix+"/"+topic, "") })
			}
			pg := b.OpenContext(ctx, t, srv.URL+"/", 1280, 720, nil)
			pg.WaitFor("the state's message", `document.body.dataset.loading === 'false' && document.getElementById('table-state').textContent === '`+st.pill+`'`,
				`[document.body.dataset.loading, document.getElementById('table-state').textContent, document.getElementById('phase').textContent]`)
			checkWords(t, pg, st.phase, st.banner, st.detailPrefix, st.mustNotAppear)
			var count struct {
				Shown bool
				Left  int
			}
			pg.Eval(`({Shown: `+browsertest.Visible("countdown")+`, Left: +document.getElementById('countdown').textContent})`, &count)
			if wantCount := strings.Contains(st.coup, "CLOSE"); count.Shown != wantCount || wantCount && (count.Left < 1 || count.Left > 20) {
				t.Errorf("countdown shown %v with %d s left; want it shown (1-20 s) only with a betting time", count.Shown, count.Left)
			}
			// The VIP profile's limits (minor units), as boards show them.
			if got, want := pg.Text("#limits"), "LIMITS 0.10 – 5,000 · P/B ≤ 2,500 · TIE ≤ 625"; got != want {
				t.Errorf("limits %q, want %q", got, want)
			}
			pg.SaveScreenshot(shots, "state-1280x720-"+st.name, false)
			pg.NoProblems()
		})
	}
}

func publishRetained(t *testing.T, f *feeder, topic, payload string) {
	t.Helper()
	tok := f.cli.Publish(topic, 1, true, []byte(payload))
	if !tok.WaitTimeout(bWait) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", topic, tok.Error())
	}
}

// checkWords: the phase line, one banner (or none) with its detail, and
// none of the words that would be wrong in the state.
func checkWords(t *testing.T, pg *browsertest.Page, phase, banner, detailPrefix string, not []string) {
	t.Helper()
	pg.WaitFor("the phase line", `document.getElementById('phase').textContent === '`+phase+`'`, `document.getElementById('phase').textContent`)
	for _, id := range publicBanners {
		var shown bool
		pg.Eval(browsertest.Visible(id), &shown)
		if shown != (id == banner) {
			t.Errorf("banner %s shown %v, want the state's banner %q only", id, shown, banner)
		}
	}
	if banner != "" {
		var detail string
		pg.Eval(`document.querySelector('#`+banner+` .banner-detail').textContent`, &detail)
		if !strings.HasPrefix(detail, detailPrefix) {
			t.Errorf("banner %s says %q, want it to start %q", banner, detail, detailPrefix)
		}
	}
	var txt string
	pg.Eval(`document.body.innerText`, &txt)
	for _, w := range not {
		if strings.Contains(txt, w) {
			t.Errorf("the page says %q:\n%s", w, txt)
		}
	}
}
