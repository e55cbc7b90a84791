package display_test

import (
	"testing"
)

// langJS lists the visible words of the table display left in English:
// every text node whose words are an entry of the page's dictionary, and
// the road titles as shown.
const langJS = `(() => {
	const en = new Set(window.tableI18n.words.map((w) => w[0]));
	const left = [];
	const walk = document.createTreeWalker(document.getElementById('screen'), NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		const e = n.parentElement, b = e.getBoundingClientRect();
		if (b.width === 0 || getComputedStyle(e).visibility === 'hidden' || e.closest('.pit-only')) continue;
		for (const part of n.textContent.split(' \u00b7 ')) if (en.has(part.trim())) left.push(part.trim());
	}
	return {left: left, titles: Array.from(document.querySelectorAll('#screen .road-title')).map((e) => e.textContent),
		lang: document.documentElement.lang, bead: document.querySelector('#road-bead .cell.bead').textContent};
})()`

// TestBrowserLanguages shows the public page in Chinese, simplified and
// traditional: every label, state and road name is in the language, and
// the page still fits.
func TestBrowserLanguages(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := screenshotDir(t)
	br := embeddedBroker(t)
	f := &feeder{t: t, br: br}
	f.connect()
	t.Cleanup(func() { f.cli.Disconnect(0) })
	prefix := bPrefix + "/public/lang"
	srv := layoutServer(t, br, nil, prefix)
	coupJSON := `{"shoe":3,"coup":72,"phase":"result","suspended":false,"opened_at":"2026-11-28T21:46:12Z",` + fitCoup + `}`
	for topic, payload := range map[string]string{"public/roads": fitRoads(), "status": fitStates[0].status, "public/coup": coupJSON,
		"public/shoe": `{"shoe":3,"coup":72,"phase":"result","cards_dealt":74,"cards_remaining":342,"cut_card_seen":true,"last_coup":71}`} {
		publishRetained(t, f, prefix+"/"+topic, payload)
		t.Cleanup(func() { publishRetained(t, f, prefix+"/"+topic, "") })
	}
	for _, tc := range []struct {
		lang   string
		titles [5]string
		bead   string
	}{
		{"zh-Hans", [5]string{"珠盘路", "大路", "大眼仔", "小路", "曱甴路"}, "庄"},
		{"zh-Hant", [5]string{"珠盤路", "大路", "大眼仔", "小路", "曱甴路"}, "莊"},
	} {
		for _, sz := range []struct{ w, h int }{{1920, 1080}, {1080, 1920}} {
			pg := b.OpenContext(ctx, t, srv.URL+"/?lang="+tc.lang, sz.w, sz.h, nil)
			waitLoaded(pg)
			pg.WaitFor("the coup", `document.querySelectorAll('#coup .card').length === 6 && document.querySelectorAll('#road-bead .cell').length > 0`, ``)
			var seen struct {
				Left   []string `json:"left"`
				Titles []string `json:"titles"`
				Lang   string   `json:"lang"`
				Bead   string   `json:"bead"`
			}
			pg.Eval(langJS, &seen)
			if len(seen.Left) > 0 || seen.Lang != tc.lang || seen.Bead != tc.bead {
				t.Errorf("%s %dx%d: left in English %q; page language %q, bead %q", tc.lang, sz.w, sz.h, seen.Left, seen.Lang, seen.Bead)
			}
			for i, want := range tc.titles {
				if i >= len(seen.Titles) || seen.Titles[i] != want {
					t.Errorf("%s: road titles %q, want %q", tc.lang, seen.Titles, tc.titles)
					break
				}
			}
			var fit fitSeen
			pg.Eval(fitJS, &fit)
			for _, bad := range fit.Bad {
				t.Errorf("%s %dx%d: %s", tc.lang, sz.w, sz.h, bad)
			}
			// Drawn, not as the boxes of a missing font (Debian's
			// fonts-wqy-microhei, .ci/packages).
			var drawn bool
			pg.Eval(`(() => { const c = document.createElement('canvas'); c.width = 60; c.height = 60; const x = c.getContext('2d');
				const draw = (ch) => { x.clearRect(0, 0, 60, 60); x.font = '40px ' + getComputedStyle(document.body).fontFamily; x.fillText(ch, 5, 45); return c.toDataURL(); };
				return draw('`+tc.bead+`') !== draw(''); })()`, &drawn)
			if !drawn {
				t.Errorf("%s: %q is drawn as a missing glyph: no CJK font (apt-get install fonts-wqy-microhei)", tc.lang, tc.bead)
			}
			if sz.w == 1920 {
				pg.SaveScreenshot(shots, "public-1920x1080-"+tc.lang, false)
			}
			pg.NoProblems()
		}
	}
}
