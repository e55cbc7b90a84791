package display_test

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// TestBrowserOverlay opens the stream overlays (a video mixer's browser
// source) over a coup's result and checks a screenshot taken over no
// background: the picture is transparent where the video must show and
// drawn where the overlay is; every card and panel of it is in place.
func TestBrowserOverlay(t *testing.T) {
	ctx, b := startBrowser(t)
	shots := screenshotDir(t)
	br := embeddedBroker(t)
	f := &feeder{t: t, br: br}
	f.connect()
	t.Cleanup(func() { f.cli.Disconnect(0) })
	prefix := bPrefix + "/public/overlay"
	srv := layoutServer(t, br, nil, prefix)
	coupJSON := `{"shoe":3,"coup":72,"phase":"result","suspended":false,"opened_at":"2026-11-28T21:46:12Z",` + fitCoup + `}`
	for topic, payload := range map[string]string{"public/roads": fitRoads(), "status": fitStates[0].status, "public/coup": coupJSON,
		"public/shoe": `{"shoe":3,"coup":72,"phase":"result","cards_dealt":74,"cards_remaining":342}`} {
		publishRetained(t, f, prefix+"/"+topic, payload)
		t.Cleanup(func() { publishRetained(t, f, prefix+"/"+topic, "") })
	}
	const w, h = 1920, 1080
	for _, tc := range []struct {
		layout      string
		clear, used [2]int // a point the video shows through, one the overlay covers
	}{
		{"lower-third", [2]int{w / 2, h / 3}, [2]int{100, h - 60}},
		{"side-bar", [2]int{w / 3, h / 2}, [2]int{w - 60, h / 2}},
	} {
		pg := b.OpenContext(ctx, t, srv.URL+"/?layout="+tc.layout, w, h, nil)
		waitLoaded(pg)
		pg.WaitFor("the coup on the overlay", `document.querySelectorAll('#coup .card').length === 6 && document.querySelectorAll('#road-big .cell').length > 0`, `document.body.className`)
		var seen fitSeen
		pg.Eval(fitJS, &seen)
		for _, bad := range seen.Bad {
			t.Errorf("%s: %s", tc.layout, bad)
		}
		shot := pg.TransparentScreenshot()
		if err := os.MkdirAll(shots, 0o755); err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(shots, "overlay-"+tc.layout+".png")
		if err := os.WriteFile(name, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", name)
		img, err := png.Decode(bytes.NewReader(shot))
		if err != nil {
			t.Fatal(err)
		}
		if a := alpha(img, tc.clear); a != 0 {
			t.Errorf("%s: alpha %d at %v, where the video must show through", tc.layout, a, tc.clear)
		}
		if a := alpha(img, tc.used); a < 128 {
			t.Errorf("%s: alpha %d at %v, on the overlay", tc.layout, a, tc.used)
		}
		if frac := transparentShare(img); frac < 0.4 || frac > 0.9 {
			t.Errorf("%s: %.0f%% of the picture is transparent, want the video to show through most of it", tc.layout, 100*frac)
		}
		pg.NoProblems()
	}
}

func alpha(img image.Image, p [2]int) uint32 {
	_, _, _, a := img.At(p[0], p[1]).RGBA()
	return a >> 8
}

// transparentShare is the share of the picture's pixels (every tenth in
// each direction) with an alpha of 0.
func transparentShare(img image.Image) float64 {
	r := img.Bounds()
	n, clear := 0, 0
	for y := r.Min.Y; y < r.Max.Y; y += 10 {
		for x := r.Min.X; x < r.Max.X; x += 10 {
			n++
			if _, _, _, a := img.At(x, y).RGBA(); a == 0 {
				clear++
			}
		}
	}
	if n == 0 {
		panic(fmt.Sprint("empty picture ", r))
	}
	return float64(clear) / float64(n)
}
