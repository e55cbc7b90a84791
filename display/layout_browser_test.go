package display_test

// TestBrowserLayouts loads the web display at the sizes table screens use
// and checks what a person at each would see: every road on screen with
// its title, the newest big-road column inside the viewport at the end of
// a shoe, derived-road marks legible, no predictions between shoes, the
// suspension banner clear of the hands, a loading state until the table's
// state has arrived, cards on screen from their first frame, the pit's
// extras in the first screen and the pit view opened from a URL with
// credentials. One Chromium serves every page. Screenshots of each layout
// go to $TABLECTL_SCREENSHOTS/layouts (or a temporary folder).

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/browsertest"
)

// layoutSizes are the screens tables use: a 1080p table screen, a 4K one,
// a portrait tower and a dealer's monitor or stream overlay.
var layoutSizes = []struct {
	name string
	w, h int
}{
	{"1920x1080", 1920, 1080},
	{"3840x2160", 3840, 2160},
	{"1080x1920", 1080, 1920},
	{"1280x720", 1280, 720},
}

type rect struct{ L, T, R, B, W, H float64 }

func (r rect) inside(o rect) bool {
	const eps = 0.5
	return r.L >= o.L-eps && r.T >= o.T-eps && r.R <= o.R+eps && r.B <= o.B+eps
}

func (r rect) overlaps(o rect) bool {
	return r.W > 0 && r.H > 0 && o.W > 0 && o.H > 0 && r.L < o.R && o.L < r.R && r.T < o.B && o.T < r.B
}

type roadSeen struct {
	ID         string  `json:"id"`
	Box        rect    `json:"box"`
	Title      rect    `json:"title"`
	TitleText  string  `json:"titleText"`
	TitleShown bool    `json:"titleShown"`
	Cells      int     `json:"cells"`
	Newest     *rect   `json:"newest"`
	NewestCol  int     `json:"newestCol"`
	Offset     int     `json:"offset"`
	Mark       float64 `json:"mark"`
}

type layoutSeen struct {
	VW, VH  float64
	Scroll  float64 `json:"scroll"`
	Roads   []roadSeen
	Side    []rect `json:"side"`
	Predict string `json:"predict"`
	Marks   []string
}

const layoutJS = `(() => {
	const r = (e) => { const b = e.getBoundingClientRect(); return {L: b.left, T: b.top, R: b.right, B: b.bottom, W: b.width, H: b.height}; };
	const roads = ['bead', 'big', 'bigeye', 'small', 'roach'].map((k) => {
		const box = document.getElementById('road-' + k), title = document.getElementById('title-' + k);
		let newest = null;
		for (const c of box.children) if (!newest || +c.style.gridColumn > +newest.style.gridColumn) newest = c;
		const mk = box.querySelector('.mk:not(.none)');
		const ts = getComputedStyle(title);
		return {id: k, box: r(box), title: r(title), titleText: title.textContent.trim(),
			titleShown: ts.visibility === 'visible' && ts.display !== 'none' && +ts.opacity > 0.5,
			cells: box.children.length, newest: newest ? r(newest) : null, newestCol: newest ? +newest.style.gridColumn : 0,
			offset: +box.dataset.offset, mark: mk ? Math.min(mk.getBoundingClientRect().width, mk.getBoundingClientRect().height) : 0};
	});
	return {VW: innerWidth, VH: innerHeight, scroll: document.scrollingElement.scrollHeight, roads: roads,
		side: ['stats', 'predict', 'shoe'].map((id) => r(document.getElementById(id))),
		predict: document.getElementById('predict').dataset.off,
		Marks: Array.from(document.querySelectorAll('#predict .mk')).map((m) => m.dataset.colour)};
})()`

func TestBrowserLayouts(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := filepath.Join(screenshotDir(t), "layouts")
	br := embeddedBroker(t)
	f := newFeeder(t, br)
	f.sync()
	srv := layoutServer(t, br, f, bPrefix)

	// The loading state: a table whose state has not (all) arrived shows
	// LOADING, not an empty table.
	loadingTable(ctx, t, b, br, shots)

	// A page that animates (no reduced motion) shows each card from its
	// first frame.
	moving := b.OpenContext(ctx, t, srv.URL+"/", 1280, 720, nil)
	moving.ReducedMotion(false)
	waitLoaded(moving)

	d := newDealer(21)
	d.startShoe(t, f)
	var results []coup.Result
	for f.table.Phase() != coup.PhaseNoShoe {
		n := f.table.CoupNumber()
		if n == 1 {
			_, r := d.dealCoup(t, f, func(i int, c coup.Card) bool {
				if i != 0 {
					return false
				}
				f.deal(cardInput(c))
				moving.WaitFor("the first card", `document.querySelector('#player-cards .slot') !== null`, `document.getElementById('player-cards').innerHTML`)
				var op []string
				moving.Eval(`Array.from(document.querySelectorAll('#player-cards .slot, #player-cards .card')).map(e => getComputedStyle(e).opacity)`, &op)
				for _, o := range op {
					if o != "1" {
						t.Errorf("a card just dealt has opacity %s (animations must not hide it): %v", o, op)
					}
				}
				return true
			})
			results = append(results, r)
			d.finish(f)
			continue
		}
		_, r := d.dealCoup(t, f, nil)
		results = append(results, r)
		d.finish(f)
	}
	t.Logf("shoe of %d coups dealt", len(results))
	moving.NoProblems()

	// The end of the shoe, at every size: public and pit.
	auth := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(bPitUser+":"+bPitPass))}
	_, rd, _ := f.snapshot()
	lastBig := 0
	for _, c := range rd.Grid.BigRoad {
		lastBig = max(lastBig, c.Col+1)
	}
	pages := map[string]*browsertest.Page{}
	for _, sz := range layoutSizes {
		pg := b.OpenContext(ctx, t, srv.URL+"/", sz.w, sz.h, nil)
		pages[sz.name] = pg
		waitLoaded(pg)
		pg.WaitFor("the whole shoe on the bead plate", fmt.Sprintf(`document.querySelectorAll('#road-big .cell').length > 0 && +document.getElementById('stat-coups').querySelector('b').textContent === %d`, len(results)), `document.getElementById('stat-coups').textContent`)
		checkLayout(t, pg, sz.name, lastBig)
		pg.SaveScreenshot(shots, "public-"+sz.name+"-shoe-over", false)
	}
	pit := b.OpenContext(ctx, t, srv.URL+"/pit", 1920, 1080, auth)
	waitLoaded(pit)
	checkLayout(t, pit, "pit 1920x1080", lastBig)
	// A portrait tower in the pit: the table fills the first screen, the
	// pit's panels follow it.
	pitTall := b.OpenContext(ctx, t, srv.URL+"/pit", 1080, 1920, auth)
	waitLoaded(pitTall)
	checkLayout(t, pitTall, "pit 1080x1920", lastBig)
	var below []float64
	pitTall.Eval(`['pit-console', 'pit-alerts', 'pit-ev', 'pit-recall'].map((id) => document.getElementById(id).getBoundingClientRect().top)`, &below)
	for i, top := range below {
		if top < 1920-1 {
			t.Errorf("pit 1080x1920: pit panel %d at %.0f, over the table's first screen", i, top)
		}
	}
	pitTall.SaveScreenshot(shots, "pit-1080x1920-shoe-over", true)

	// A new shoe; a card the shoe cannot read suspends the table with the
	// coup's cards on it.
	d2 := newDealer(22)
	d2.startShoe(t, f)
	f.button(coup.ButtonNoMoreBets)
	for range 3 {
		f.deal(cardInput(d2.draw()))
	}
	f.shoeIn(coup.Input{Kind: coup.InCard, Unreadable: true})
	for _, sz := range layoutSizes {
		pg := pages[sz.name]
		pg.WaitFor("the SUSPENDED banner", browsertest.Visible("banner-suspended")+` && document.querySelectorAll('#banker-cards .card').length === 2`, `document.getElementById('banner-suspended').textContent`)
		checkBanner(t, pg, sz.name)
		pg.SaveScreenshot(shots, "public-"+sz.name+"-suspended", false)
	}

	// The pit view opened as a kiosk opens it, credentials in the URL, at
	// 1920x1000: the console, the alerts (with what clears them), the EV
	// and the recall are all in the first screen.
	u, err := url.Parse(srv.URL + "/pit")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(bPitUser, bPitPass)
	kiosk := b.OpenContext(ctx, t, u.String(), 1920, 1000, nil)
	waitLoaded(kiosk)
	kiosk.WaitFor("the alert with the actions that clear it", `document.querySelector('#alert-list li.suspends .pc-clears button[data-action="card"]') !== null && document.querySelector('#alert-list li.suspends .pc-clears button[data-action="void"]') !== null`,
		`document.getElementById('alert-list').innerText`)
	kiosk.WaitFor("the pit's banner to summarise", `document.getElementById('suspend-count').textContent === '1 ALERT' && document.getElementById('suspend-reason').textContent.includes('needs card')`,
		`document.getElementById('banner-suspended').innerText`)
	checkBanner(t, kiosk, "pit 1920x1000")
	kiosk.WaitFor("the recall, fetched with the page's credentials", `document.getElementById('recall-note').hidden && document.querySelectorAll('#recall-table tbody tr').length === 10`,
		`document.getElementById('pit-recall').innerText`)
	var heads []struct {
		ID  string  `json:"id"`
		Top float64 `json:"top"`
		Bot float64 `json:"bot"`
	}
	kiosk.Eval(`['pit-console', 'pit-alerts', 'pit-ev', 'pit-recall'].map((id) => { const h = document.querySelector('#' + id + ' h3').getBoundingClientRect(); return {id: id, top: h.top, bot: h.bottom}; })`, &heads)
	for _, h := range heads {
		if h.Top < 0 || h.Bot > 1000 {
			t.Errorf("pit 1920x1000: %s's heading at %.0f-%.0f, outside the first screen", h.ID, h.Top, h.Bot)
		}
	}
	kiosk.SaveScreenshot(shots, "pit-1920x1000-kiosk-url", false)
	kiosk.NoProblems()
	for name, pg := range pages {
		if pr := pg.Problems(); len(pr) > 0 {
			t.Errorf("%s: the page reported problems: %v", name, pr)
		}
	}
	pit.NoProblems()
}

// layoutServer serves the web display of the feeder's table.
func layoutServer(t *testing.T, br *testBroker, f *feeder, prefix string) *httptest.Server {
	t.Helper()
	var rec display.Recaller
	var src display.Source = emptySource{}
	if f != nil {
		rec, src = f, f
	}
	p, err := coup.BuiltinProfile(coup.ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	h, err := display.WebHandler(display.WebConfig{
		Table: bTable, BrokerWS: br.ws, Prefix: prefix, Public: br.public, Pit: br.pit,
		PitUser: bPitUser, PitPassword: bPitPass, Recall: rec, Limits: &p.Limits,
	}, display.Handler(src))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if br.allowOrigin != nil {
		br.allowOrigin(srv.URL)
	}
	return srv
}

type emptySource struct{}

func (emptySource) View() (coup.View, coup.View) { return coup.View{}, coup.View{} }
func (emptySource) Recall() []coup.CoupRecord    { return nil }
func (emptySource) Failing() error               { return nil }

func waitLoaded(pg *browsertest.Page) {
	pg.WaitFor("the table's state", `document.body.dataset.loading === 'false' && document.getElementById('conn').dataset.state === 'online'`,
		`[document.body.dataset.loading, document.getElementById('conn').dataset.state, document.getElementById('loading-detail').textContent]`)
}

// loadingTable shows a table whose state comes in parts: the page says
// LOADING and shows no table until all of it is there.
func loadingTable(ctx context.Context, t *testing.T, b *browsertest.Browser, br *testBroker, shots string) {
	t.Helper()
	// Under public/, which the embedded broker lets a public page read.
	const prefix = bPrefix + "/public/loading"
	srv := layoutServer(t, br, nil, prefix)
	pg := b.OpenContext(ctx, t, srv.URL+"/", 1920, 1080, nil)
	pg.WaitFor("the page to connect", `document.getElementById('conn').dataset.state === 'online'`, `document.getElementById('conn').dataset.state`)
	f := &feeder{t: t, br: br, cli: nil}
	f.connect()
	defer f.cli.Disconnect(0)
	pubTo := func(topic, payload string) {
		tok := f.cli.Publish(prefix+"/"+topic, 1, true, []byte(payload))
		if !tok.WaitTimeout(bWait) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	// Only the status so far: connected, but the table is not known yet.
	pubTo("status", `{"state":"online","table":"t7","phase":"betting_open","shoe":3,"coup":41,"suspended":false}`)
	pg.WaitFor("the status to arrive", `window.tableDisplay.state.status !== null`, ``)
	var seen struct {
		Loading string
		Banner  bool
		Live    string
		Pill    string
	}
	pg.Eval(`({Loading: document.body.dataset.loading, Banner: `+browsertest.Visible("banner-loading")+`,
		Live: getComputedStyle(document.getElementById('live')).visibility, Pill: document.getElementById('table-state').textContent})`, &seen)
	if seen.Loading != "true" || !seen.Banner || seen.Live != "hidden" || seen.Pill != "LOADING" {
		t.Errorf("with only the status: loading %s, banner %v, table %s, pill %q; want the loading state and no table", seen.Loading, seen.Banner, seen.Live, seen.Pill)
	}
	pg.SaveScreenshot(shots, "public-1920x1080-loading", false)
	pubTo("public/coup", `{"shoe":3,"coup":41,"phase":"betting_open","player":[],"banker":[]}`)
	pubTo("public/shoe", `{"shoe":3,"coup":41,"phase":"betting_open","cards_dealt":300,"cards_remaining":116}`)
	pubTo("public/roads", `{"bead_plate":[],"grid":{},"stats":{"coups":40}}`)
	pg.WaitFor("the table once its state is there", `document.body.dataset.loading === 'false' && !(`+browsertest.Visible("banner-loading")+`) && document.getElementById('shoe-no').textContent === '3' && document.getElementById('table-state').textContent === 'LIVE'`,
		`[document.body.dataset.loading, document.getElementById('shoe-no').textContent]`)
	for _, topic := range []string{"status", "public/coup", "public/shoe", "public/roads"} {
		pubTo(topic, "")
	}
	pg.NoProblems()
}

func checkLayout(t *testing.T, pg *browsertest.Page, name string, lastBig int) {
	t.Helper()
	var l layoutSeen
	pg.Eval(layoutJS, &l)
	view := rect{0, 0, l.VW, l.VH, l.VW, l.VH}
	for _, r := range l.Roads {
		if !r.Box.inside(view) || r.Box.W < 50 || r.Box.H < 40 {
			t.Errorf("%s: road %s at %+v, not wholly in the %vx%v viewport", name, r.ID, r.Box, l.VW, l.VH)
		}
		if !r.TitleShown || r.TitleText == "" || !r.Title.inside(view) || r.Title.B > r.Box.T+1 || r.Title.H < 8 {
			t.Errorf("%s: road %s's title %q (shown %v) at %+v, box at %+v: want a visible title above the road", name, r.ID, r.TitleText, r.TitleShown, r.Title, r.Box)
		}
		if r.Cells == 0 || r.Newest == nil {
			t.Errorf("%s: road %s shows nothing at the end of the shoe", name, r.ID)
			continue
		}
		if !r.Newest.inside(r.Box) || !r.Newest.inside(view) {
			t.Errorf("%s: road %s's newest column at %+v, outside the road %+v or the viewport", name, r.ID, *r.Newest, r.Box)
		}
	}
	if big := l.Roads[1]; big.Offset+big.NewestCol != lastBig {
		t.Errorf("%s: the big road shows up to column %d, the shoe's newest is %d", name, big.Offset+big.NewestCol, lastBig)
	}
	// Legible from 3 m: a derived road's mark is at least 16 px on a 1080p
	// screen (and as large in proportion on the others).
	minMark := 16 * min(l.VW, l.VH) / 1080
	for _, r := range l.Roads[2:] {
		if r.Mark < minMark {
			t.Errorf("%s: %s marks are %.1f px, want at least %.1f", name, r.ID, r.Mark, minMark)
		}
	}
	for i, s := range l.Side {
		if !s.inside(view) || s.W < 100 || s.H < 40 {
			t.Errorf("%s: side panel %d at %+v: not laid out on screen", name, i, s)
		}
	}
	if l.Predict != "true" || strings.ReplaceAll(strings.Join(l.Marks, ""), "none", "") != "" {
		t.Errorf("%s: predictions between shoes: off %q, marks %v", name, l.Predict, l.Marks)
	}
	if !strings.HasPrefix(name, "pit") && l.Scroll > l.VH+1 {
		t.Errorf("%s: the public page is %.0f px tall in a %.0f px viewport", name, l.Scroll, l.VH)
	}
}

// checkBanner: the suspension banner lies clear of every card, hand name
// and point, and the cards are wholly on screen.
func checkBanner(t *testing.T, pg *browsertest.Page, name string) {
	t.Helper()
	var s struct {
		Banner rect
		Coup   rect
		Parts  []rect
		Names  []string
		Roads  []rect
		VW, VH float64
	}
	pg.Eval(`(() => {
		const r = (e) => { const b = e.getBoundingClientRect(); return {L: b.left, T: b.top, R: b.right, B: b.bottom, W: b.width, H: b.height}; };
		const parts = Array.from(document.querySelectorAll('#coup .card, #coup .hand-name, #coup .point, #coup .phase'));
		return {Banner: r(document.getElementById('banners')), Coup: r(document.getElementById('coup')), Parts: parts.map(r),
			Roads: Array.from(document.querySelectorAll('#screen .road-box')).map(r),
			Names: parts.map((e) => e.className), VW: innerWidth, VH: innerHeight};
	})()`, &s)
	if len(s.Parts) < 6 {
		t.Fatalf("%s: only %d parts of the hands on the page: %v", name, len(s.Parts), s.Names)
	}
	view := rect{0, 0, s.VW, s.VH, s.VW, s.VH}
	for i, r := range s.Roads {
		if !r.inside(view) {
			t.Errorf("%s: with the banner, road %d at %+v leaves the %vx%v viewport", name, i, r, s.VW, s.VH)
		}
	}
	for i, p := range s.Parts {
		if p.overlaps(s.Banner) {
			t.Errorf("%s: the banner %+v lies over %s %+v", name, s.Banner, s.Names[i], p)
		}
		if strings.Contains(s.Names[i], "card") && (!p.inside(s.Coup) || !p.inside(view)) {
			t.Errorf("%s: %s at %+v is cut off (table %+v, viewport %vx%v)", name, s.Names[i], p, s.Coup, s.VW, s.VH)
		}
	}
}
