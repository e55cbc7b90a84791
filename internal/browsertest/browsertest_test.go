package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/internal/testenv"
)

func TestLaunchFails(t *testing.T) {
	// A "browser" that exits at once: Launch says so rather than waiting.
	fake := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b, err := Launch(fake)
	if err == nil {
		b.Close()
		t.Fatal("Launch of a browser that exits at once succeeded")
	}
	if !strings.Contains(err.Error(), fake) || time.Since(start) > 30*time.Second {
		t.Errorf("Launch of a browser that exits at once: after %v, %v", time.Since(start), err)
	}
	t.Logf("Launch says: %v", err)
}

// testPage is served over HTTP: it changes its text a moment after the
// load, writes a console error, throws in a timer, and answers only with
// the header the test sets.
const testPage = `<!doctype html><p id="x">soon</p><script>
	setTimeout(() => { document.getElementById('x').textContent = 'later'; }, 30);
	console.error('shown to the test');
	setTimeout(() => { throw new Error('boom in a timer'); }, 10);
</script>`

// TestPage drives a real page: it needs Chromium, as the display's browser
// tests do.
func TestPage(t *testing.T) {
	testenv.Long(t, "the browsertest package's test of a real page in Chromium")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test") != "yes" {
			http.Error(w, "no X-Test header", http.StatusForbidden)
			return
		}
		fmt.Fprint(w, testPage)
	}))
	t.Cleanup(srv.Close)

	b := Start(t)
	p := b.Open(t, srv.URL, 640, 480, map[string]string{"X-Test": "yes"})
	p.WaitFor("the text to change", `document.getElementById('x').textContent === 'later'`, "")
	if got := p.Text("#x"); got != "later" {
		t.Errorf("Text(#x) = %q", got)
	}
	if got := p.Text("#nothing"); got != "<missing>" {
		t.Errorf("Text of a missing element = %q", got)
	}
	var size struct{ W, H int }
	if p.Eval(`({W: window.innerWidth, H: window.innerHeight})`, &size); size.W != 640 || size.H != 480 {
		t.Errorf("viewport %+v, want 640x480", size)
	}
	var sum int
	if p.Eval(`Promise.resolve(20 + 22)`, &sum); sum != 42 {
		t.Errorf("awaited promise gave %d", sum)
	}
	var reduced bool
	if p.Eval(`matchMedia('(prefers-reduced-motion: reduce)').matches`, &reduced); !reduced {
		t.Error("the page does not prefer reduced motion")
	}

	// What fails the test, as an error: a failing expression, and a wait
	// that never ends, which says what the page shows.
	ctx, cancel := context.WithTimeout(p.tab, 300*time.Millisecond)
	defer cancel()
	if err := eval(ctx, `nosuchname.x`, nil); err == nil || !strings.Contains(err.Error(), "ReferenceError") {
		t.Errorf("a failing expression gives %v", err)
	}
	err := p.waitFor(ctx, "something that never happens", `false`, `document.getElementById('x').textContent`)
	if err == nil || !strings.Contains(err.Error(), "waiting for something that never happens") || !strings.Contains(err.Error(), `the page shows "later"`) {
		t.Errorf("WaitFor on a false condition: %v", err)
	}

	// The page's console error and uncaught exception reach the test.
	p.WaitFor("the page's problems to arrive", `true`, "")
	testenv.EventuallyErr(t, DefaultTimeout, "the page's console error and uncaught exception", func() error {
		if probs := strings.Join(p.Problems(), "\n"); !strings.Contains(probs, "shown to the test") || !strings.Contains(probs, "boom in a timer") {
			return fmt.Errorf("problems reported: %q; console: %q", probs, p.Console())
		}
		return nil
	})
	if !strings.Contains(strings.Join(p.Console(), "\n"), "shown to the test") {
		t.Errorf("console %q lacks the console error", p.Console())
	}

	for _, full := range []bool{false, true} {
		path := p.SaveScreenshot(t.TempDir(), "page", full)
		png, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("screenshot (full %v): %d bytes, %v", full, len(png), err)
		}
	}
}
