package display_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fitSizes are the screens of layoutSizes and a phone's.
var fitSizes = append(append([]struct {
	name string
	w, h int
}{}, layoutSizes...), struct {
	name string
	w, h int
}{"390x844", 390, 844})

// A coup with both third cards: the widest hands there are.
const fitCoup = `"player":[{"card":"2H"},{"card":"3D"},{"card":"7C"}],"banker":[{"card":"KS"},{"card":"4C"},{"card":"5S"}],
	"player_point":2,"banker_point":9,"result":{"winner":"banker","player_point":2,"banker_point":9,"player_pair":false,"banker_pair":false},
	"cards_dealt":74,"cards_remaining":342,"cut_card_seen":true,"last_coup":71,"dealer":"Mei Lin"`

// fitRoads is a shoe's worth of results on every road.
func fitRoads() string {
	var bead, big, derived []string
	col, row := 0, 0
	last := ""
	for i := range 60 {
		res := []string{"banker", "player", "banker", "banker", "tie", "player", "player"}[i%7]
		bead = append(bead, fmt.Sprintf(`{"coup":%d,"result":%q,"point":%d,"col":%d,"row":%d,"banker_pair":%v}`, i+1, res, i%10, i/6, i%6, i%9 == 0))
		if res == "tie" {
			continue
		}
		if res != last && last != "" {
			col, row = col+1, 0
		} else if last != "" {
			row++
		}
		last = res
		big = append(big, fmt.Sprintf(`{"coup":%d,"result":%q,"col":%d,"row":%d,"ties":%d,"player_pair":%v}`, i+1, res, col, min(row, 5), i%3/2, i%11 == 0))
	}
	for i := range 40 {
		derived = append(derived, fmt.Sprintf(`{"colour":%q,"col":%d,"row":%d}`, []string{"red", "blue"}[i%3/2], i/3, i%3))
	}
	d := strings.Join(derived, ",")
	return fmt.Sprintf(`{"bead_plate":[%s],"grid":{"big_road":[%s],"big_eye_boy":[%s],"small_road":[%s],"cockroach_pig":[%s]},
		"stats":{"coups":60,"banker":{"count":26,"percent":43.3},"player":{"count":26,"percent":43.3},"tie":{"count":8,"percent":13.3}},
		"predict":{"banker":{"big_eye_boy":"red","small_road":"blue","cockroach_pig":"red"},"player":{"big_eye_boy":"blue","small_road":"red","cockroach_pig":"blue"}}}`,
		strings.Join(bead, ","), strings.Join(big, ","), d, d, d)
}

// fitStates are the states a screen must lay out: the result of a coup
// with both third cards, then each banner on top of it.
var fitStates = []struct {
	name, status string
	pit          bool   // a pit-only state
	conn         string // the page's connection as the state has it
	shoe         string // pit/shoe
}{
	{"result", `{"state":"online","table":"t7","phase":"result","shoe":3,"coup":72,"suspended":false}`, false, "", ""},
	{"betting-last-result", `{"state":"online","table":"t7","phase":"betting_open","shoe":3,"coup":73,"suspended":false}`, false, "", ""},
	{"suspended", `{"state":"online","table":"t7","phase":"result","shoe":3,"coup":72,"suspended":true,"suspend_reason":"card_check"}`, false, "", ""},
	{"offline-no-connection", `{"state":"offline","table":"t7"}`, false, "reconnecting", ""},
	{"pit-suspended-advantage-no-connection", `{"state":"online","table":"t7","phase":"result","shoe":3,"coup":72,"suspended":true,"suspend_reason":"card_check"}`, true, "reconnecting",
		`{"shoe":3,"cards_remaining":342,"bets":[{"bet":"tie","p_win":0.1,"p_push":0,"ev":0.021,"advantage":true}]}`},
}

// fitJS lists what is out of place: a card outside its hand or the
// viewport, a panel outside the viewport, two panels that overlap, or a
// part of a panel drawn outside it.
const fitJS = `(() => {
	const bad = [];
	const r = (e) => e.getBoundingClientRect();
	const shown = (e) => { const b = r(e); return b.width > 0 && b.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
	const inside = (a, b) => a.left >= b.left - 1 && a.top >= b.top - 1 && a.right <= b.right + 1 && a.bottom <= b.bottom + 1;
	const fmt = (b) => Math.round(b.left) + ',' + Math.round(b.top) + '-' + Math.round(b.right) + ',' + Math.round(b.bottom);
	const name = (e) => e.id ? '#' + e.id : e.tagName.toLowerCase() + '.' + String(e.className).trim().replace(/\s+/g, '.');
	const screen = document.getElementById('screen');
	const view = {left: 0, top: 0, right: innerWidth, bottom: document.body.classList.contains('view-pit') ? r(screen).bottom : innerHeight};
	for (const c of document.querySelectorAll('#coup .card')) {
		const hand = c.closest('.hand');
		if (!inside(r(c), r(hand))) bad.push('card ' + c.dataset.card + ' at ' + fmt(r(c)) + ' outside its hand ' + fmt(r(hand)));
		if (!inside(r(c), view)) bad.push('card ' + c.dataset.card + ' at ' + fmt(r(c)) + ' outside the viewport');
	}
	const panels = Array.from(document.querySelectorAll('#top, #banners > .banner, #coup, #stats, #predict, #shoe, #screen .road-box')).filter(shown);
	for (const p of panels) {
		if (!inside(r(p), view)) bad.push(name(p) + ' at ' + fmt(r(p)) + ' outside the screen');
		for (const e of p.querySelectorAll('*')) {
			if (!shown(e) || e.closest('.road') || e.closest('.card')) continue;
			if (!inside(r(e), r(p))) bad.push(name(e) + ' at ' + fmt(r(e)) + ' outside ' + name(p) + ' ' + fmt(r(p)));
		}
	}
	// The parts of a line of text (the header, a hand's name and point, the
	// shoe's counts) never run into each other.
	for (const row of document.querySelectorAll('#top, #top .brand, #top .meta, .phase-line, .hand-head, .shoe-nums, .shoe-head, .stat-row, .stat-minor, .predict-head')) {
		const parts = Array.from(row.children).filter(shown);
		for (let i = 0; i < parts.length; i++) {
			if (!inside(r(parts[i]), r(row))) bad.push(name(parts[i]) + ' at ' + fmt(r(parts[i])) + ' outside ' + name(row) + ' ' + fmt(r(row)));
			for (let j = i + 1; j < parts.length; j++) {
				const a = r(parts[i]), b = r(parts[j]);
				if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) bad.push(name(parts[i]) + ' ' + fmt(a) + ' runs into ' + name(parts[j]) + ' ' + fmt(b));
			}
		}
	}
	for (let i = 0; i < panels.length; i++) {
		for (let j = i + 1; j < panels.length; j++) {
			const a = r(panels[i]), b = r(panels[j]);
			if (panels[i].contains(panels[j]) || panels[j].contains(panels[i])) continue;
			if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) bad.push(name(panels[i]) + ' ' + fmt(a) + ' overlaps ' + name(panels[j]) + ' ' + fmt(b));
		}
	}
	// Legible on a phone: no text under 9 px (a card's corner index
	// aside: its centre says the same, large; and a road's cells, whose
	// shape and colour say what their letter does).
	for (const e of document.querySelectorAll('#screen *')) {
		if (!shown(e) || e.closest('.card') || e.closest('.road') || !Array.from(e.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim() !== '')) continue;
		const px = parseFloat(getComputedStyle(e).fontSize);
		if (px < 9) bad.push(name(e) + ' ' + JSON.stringify(e.textContent.trim().slice(0, 20)) + ' in ' + px.toFixed(1) + ' px text');
	}
	return {bad: bad, cards: document.querySelectorAll('#coup .card').length,
		banners: Array.from(document.querySelectorAll('#banners > .banner')).filter(shown).map((e) => e.id)};
})()`

type fitSeen struct {
	Bad     []string `json:"bad"`
	Cards   int      `json:"cards"`
	Banners []string `json:"banners"`
}

// TestBrowserFit lays out a coup with both third cards at every size, in
// every state and with every banner, public and pit, and checks that every
// card lies inside its hand and the viewport, that every panel is on the
// screen with all of its parts inside it, and that no two panels overlap.
func TestBrowserFit(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := screenshotDir(t)
	br := embeddedBroker(t)
	f := &feeder{t: t, br: br}
	f.connect()
	t.Cleanup(func() { f.cli.Disconnect(0) })
	prefix := bPrefix + "/public/fit"
	srv := layoutServer(t, br, nil, prefix)
	pub := func(topic, payload string) {
		publishRetained(t, f, prefix+"/"+topic, payload)
		t.Cleanup(func() { publishRetained(t, f, prefix+"/"+topic, "") })
	}
	pub("public/roads", fitRoads())
	pub("public/shoe", `{"shoe":3,"coup":72,"phase":"result","cards_dealt":74,"cards_remaining":342,"cut_card_seen":true,"last_coup":71}`)
	auth := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(bPitUser+":"+bPitPass))}
	for _, view := range []string{"public", "pit"} {
		for _, sz := range fitSizes {
			path := "/"
			var hdr map[string]string
			if view == "pit" {
				path, hdr = "/pit", auth
			}
			pg := b.OpenContext(ctx, t, srv.URL+path, sz.w, sz.h, hdr)
			for _, st := range fitStates {
				if st.pit && view != "pit" {
					continue
				}
				suspended := strings.Contains(st.status, `"suspended":true`)
				coupJSON := fmt.Sprintf(`{"shoe":3,"coup":72,"phase":"result","suspended":%v,"opened_at":"2026-11-28T21:46:12.5Z",%s}`, suspended, fitCoup)
				if strings.Contains(st.status, "betting_open") {
					// The next coup's betting, the last result held, the
					// betting time running.
					coupJSON = fmt.Sprintf(`{"shoe":3,"coup":73,"phase":"betting_open","suspended":false,"player":[],"banker":[],"opened_at":"2026-11-28T21:46:40Z",
						"bets_close_at":%q,"last":{"coup":72,"player":["2H","3D","7C"],"banker":["KS","4C","5S"],"result":{"winner":"banker","player_point":2,"banker_point":9}},"dealer":"Mei Lin"}`,
						time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
				}
				pub("status", st.status)
				pub("public/coup", coupJSON)
				pub("pit/coup", coupJSON)
				pub("pit/alerts/active", `{"alerts":[]}`)
				pub("pit/shoe", st.shoe)
				name := fmt.Sprintf("%s %s %s", view, sz.name, st.name)
				// The page holds what was published (not the state before).
				pg.WaitFor(name+": the state", `JSON.stringify(window.tableDisplay.state.status) === JSON.stringify(`+st.status+`) && JSON.stringify(window.tableDisplay.state.coup) === JSON.stringify(`+coupJSON+`)`,
					`JSON.stringify([window.tableDisplay.state.status, window.tableDisplay.state.coup])`)
				pg.WaitFor(name, `document.body.dataset.loading === 'false' && document.querySelectorAll('#coup .card').length === 6 && document.getElementById('table-state').dataset.state === '`+
					map[bool]string{true: "suspended", false: map[bool]string{true: "offline", false: "live"}[strings.Contains(st.status, "offline")]}[suspended]+`'`,
					`[document.body.dataset.loading, document.getElementById('table-state').dataset.state, document.querySelectorAll('#coup .card').length]`)
				if st.conn != "" {
					pg.Eval(`(() => { window.tableDisplay.state.conn = '`+st.conn+`'; window.tableDisplay.schedule(); return true; })()`, nil)
				}
				pg.WaitFor("the page drawn", `(window.tableDisplay.state.conn === 'online') === `+fmt.Sprint(st.conn == "")+` && `+
					`document.getElementById('phase').textContent !== ''`, `window.tableDisplay.state.conn`)
				pg.WaitFor("the state's banners", settledJS, `document.body.dataset.rendered`)
				var seen fitSeen
				pg.Eval(fitJS, &seen)
				for _, bad := range seen.Bad {
					t.Errorf("%s (banners %v): %s", name, seen.Banners, bad)
				}
				pg.SaveScreenshot(shots, fmt.Sprintf("fit-%s-%s-%s", view, sz.name, st.name), false)
				if st.conn != "" {
					pg.Eval(`(() => { window.tableDisplay.state.conn = 'online'; window.tableDisplay.schedule(); return true; })()`, nil)
				}
			}
			pg.NoProblems()
		}
	}
}

// settledJS holds once two draws have passed with nothing left to draw.
const settledJS = `(() => { const n = +document.body.dataset.rendered; if (window.__fitSeen === n) return true; window.__fitSeen = n; return false; })()`
