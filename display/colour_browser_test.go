package display_test

import (
	"encoding/base64"
	"testing"
)

// contrastJS measures, on the page as drawn, the contrast of every visible
// text against what lies behind it (colours composited up to an opaque
// one; a gradient counts by its worst stop) and of every road mark against
// the road, and whether each road tells banker from player (or red from
// blue) by something else than colour: shape, fill or letter.
const contrastJS = `(() => {
	const parse = (s) => { const m = /rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)/.exec(s); return m ? [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]] : null; };
	const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); };
	const lum = (c) => 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
	const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
	const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
	// backs: the colours that may lie behind an element.
	const backs = (e) => {
		let layers = [];
		for (let n = e; n; n = n.parentElement) {
			const cs = getComputedStyle(n);
			const stops = (cs.backgroundImage.match(/rgba?\([^)]*\)/g) || []).map(parse);
			const bg = parse(cs.backgroundColor);
			if (stops.length > 0 && n.id !== 'roads' && !n.classList.contains('road')) {
				return stops.map((s) => layers.reduceRight((acc, l) => over(l, acc), over(s, bg && bg[3] > 0 ? bg : [10, 15, 26, 1])));
			}
			if (bg && bg[3] > 0) {
				if (bg[3] >= 1) return [layers.reduceRight((acc, l) => over(l, acc), bg)];
				layers.push(bg);
			}
		}
		return [layers.reduceRight((acc, l) => over(l, acc), [10, 15, 26, 1])];
	};
	const shown = (e) => { const b = e.getBoundingClientRect(); const cs = getComputedStyle(e); return b.width > 0 && b.height > 0 && cs.visibility !== 'hidden' && +cs.opacity > 0.5; };
	const name = (e) => e.id ? '#' + e.id : e.tagName.toLowerCase() + '.' + String(e.className).trim().replace(/\s+/g, '.');
	const text = [];
	for (const e of document.querySelectorAll('body *')) {
		if (!shown(e) || e.closest('.card.face') && !e.closest('.badge')) continue;
		const own = Array.from(e.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim() !== '');
		if (!own) continue;
		const fg = parse(getComputedStyle(e).color);
		let worst = 99;
		for (const b of backs(e)) worst = Math.min(worst, ratio(over(fg, b), b));
		text.push({what: name(e) + ' ' + JSON.stringify(e.textContent.trim().slice(0, 24)), ratio: worst});
	}
	// Cards: the suit's colour on the card's face.
	for (const c of document.querySelectorAll('.card.face')) text.push({what: 'card ' + c.dataset.card, ratio: ratio(parse(getComputedStyle(c).color), [255, 255, 255, 1])});
	const road = parse(getComputedStyle(document.querySelector('.road')).backgroundColor);
	const marks = [];
	const mark = (e) => {
		const cs = getComputedStyle(e);
		for (const p of ['backgroundColor', 'borderTopColor']) {
			const c = parse(cs[p]);
			if (c && c[3] > 0.5 && (p === 'backgroundColor' || parseFloat(cs.borderTopWidth) > 0)) return c;
		}
		return null;
	};
	for (const e of document.querySelectorAll('.road .cell.bead, .road .cell.bigroad:not(.tie), .road .mk, .road .tie-slash, .road .pair, .mark-slot .mk:not(.none)')) {
		const c = mark(e);
		if (c) marks.push({what: name(e), ratio: ratio(c, road)});
	}
	// What tells the sides apart without colour: the shape (radius,
	// rotation, outline or fill) and the letter of each kind of cell.
	const shape = (e) => { const cs = getComputedStyle(e); return [cs.borderTopLeftRadius, cs.transform, cs.borderTopStyle, parseFloat(cs.borderTopWidth) > 0, parse(cs.backgroundColor)[3] > 0, e.textContent.trim().replace(/\d/g, '')].join('|'); };
	const kinds = {bead: ['#road-bead .cell.bead.banker', '#road-bead .cell.bead.player'], big: ['#road-big .cell.bigroad.banker', '#road-big .cell.bigroad.player'],
		bigeye: ['#road-bigeye .mk.red', '#road-bigeye .mk.blue'], small: ['#road-small .mk.red', '#road-small .mk.blue'], roach: ['#road-roach .mk.red', '#road-roach .mk.blue'],
		predict: ['#predict-banker .mk.bigeye', '#predict-player .mk.bigeye']};
	const apart = {};
	for (const [k, [a, b]] of Object.entries(kinds)) {
		const ea = document.querySelector(a), eb = document.querySelector(b);
		apart[k] = !!ea && !!eb && shape(ea) !== shape(eb);
		if (ea && eb) apart[k + ' shapes'] = shape(ea) + ' vs ' + shape(eb);
	}
	return {text: text, marks: marks, apart: apart};
})()`

type contrastSeen struct {
	Text []struct {
		What  string
		Ratio float64
	} `json:"text"`
	Marks []struct {
		What  string
		Ratio float64
	} `json:"marks"`
	Apart map[string]any `json:"apart"`
}

// TestBrowserColourBlind reads the public page and the pit view at 1920x1080
// with a shoe on every road: every text has a contrast of at least 4.5:1
// with what lies behind it, every road mark 3:1 with the road, and in every
// road (and the predictions) the two sides differ in shape, fill or letter,
// not in colour only.
func TestBrowserColourBlind(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := screenshotDir(t)
	br := embeddedBroker(t)
	f := &feeder{t: t, br: br}
	f.connect()
	t.Cleanup(func() { f.cli.Disconnect(0) })
	prefix := bPrefix + "/public/colour"
	srv := layoutServer(t, br, nil, prefix)
	coupJSON := `{"shoe":3,"coup":72,"phase":"result","suspended":false,` + fitCoup + `}`
	for topic, payload := range map[string]string{"public/roads": fitRoads(), "status": fitStates[0].status, "public/coup": coupJSON, "pit/coup": coupJSON,
		"public/shoe": `{"shoe":3,"coup":72,"phase":"result","cards_dealt":74,"cards_remaining":342}`, "pit/alerts/active": `{"alerts":[]}`} {
		publishRetained(t, f, prefix+"/"+topic, payload)
		t.Cleanup(func() { publishRetained(t, f, prefix+"/"+topic, "") })
	}
	auth := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(bPitUser+":"+bPitPass))}
	for _, view := range []struct {
		name, path string
		hdr        map[string]string
	}{{"public", "/", nil}, {"pit", "/pit", auth}} {
		pg := b.OpenContext(ctx, t, srv.URL+view.path, 1920, 1080, view.hdr)
		waitLoaded(pg)
		pg.WaitFor("the roads", `document.querySelectorAll('#road-roach .mk').length > 0 && document.querySelectorAll('#coup .card').length === 6`, `document.querySelectorAll('#road-roach .mk').length`)
		var seen contrastSeen
		pg.Eval(contrastJS, &seen)
		if len(seen.Text) < 30 || len(seen.Marks) < 100 {
			t.Fatalf("%s: only %d texts and %d marks measured", view.name, len(seen.Text), len(seen.Marks))
		}
		for _, x := range seen.Text {
			if x.Ratio < 4.5 {
				t.Errorf("%s: text %s has a contrast of %.2f:1, want at least 4.5:1", view.name, x.What, x.Ratio)
			}
		}
		worst := map[string]float64{}
		for _, x := range seen.Marks {
			if w, ok := worst[x.What]; !ok || x.Ratio < w {
				worst[x.What] = x.Ratio
			}
		}
		for what, r := range worst {
			if r < 3 {
				t.Errorf("%s: road mark %s has a contrast of %.2f:1 with the road, want at least 3:1", view.name, what, r)
			}
		}
		for _, k := range []string{"bead", "big", "bigeye", "small", "roach", "predict"} {
			if apart, _ := seen.Apart[k].(bool); !apart {
				t.Errorf("%s: in %s the two sides differ only in colour (%v)", view.name, k, seen.Apart[k+" shapes"])
			}
		}
		pg.SaveScreenshot(shots, view.name+"-1920x1080-roads", false)
		pg.NoProblems()
	}
}
