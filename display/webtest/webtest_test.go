package webtest

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFindChromiumEnv(t *testing.T) {
	t.Setenv(EnvChromium, filepath.Join(t.TempDir(), "no-such-browser"))
	if _, err := FindChromium(); err == nil || !strings.Contains(err.Error(), EnvChromium) {
		t.Errorf("a missing %s gives %v", EnvChromium, err)
	}
	fake := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvChromium, fake)
	if got, err := FindChromium(); err != nil || got != fake {
		t.Errorf("FindChromium() = %q, %v; want %q", got, err, fake)
	}
}

func TestStartFails(t *testing.T) {
	// A "browser" that exits at once: Start says so rather than waiting.
	fake := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{Path: fake})
	if err == nil || !strings.Contains(err.Error(), "exited before opening its DevTools port") || !strings.Contains(err.Error(), "cannot open display") {
		t.Fatalf("Start with a browser that exits: %v", err)
	}
}

func TestTailBuffer(t *testing.T) {
	var lines []string
	tb := &tailBuffer{max: 8, logf: func(format string, args ...any) {
		lines = append(lines, fmt.Sprintf(format, args...))
	}}
	tb.Write([]byte("one\ntw"))
	tb.Write([]byte("o\nthree"))
	if got := strings.Join(lines, "|"); got != "chromium: one|chromium: two" {
		t.Errorf("lines %q, want one and two (three is not finished)", got)
	}
	if got, want := tb.String(), "wo\nthree"; got != want {
		t.Errorf("tail %q, want the last 8 bytes %q", got, want)
	}
}

// TestPage drives a real page: it needs Chromium, as the display's
// browser tests do.
func TestPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Chromium; not in -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.NewPage(ctx, 640, 480)
	if err != nil {
		t.Fatal(err)
	}
	page := `<!doctype html><p id="x">soon</p><script>
		setTimeout(() => { document.getElementById('x').textContent = 'later'; }, 30);
		console.error('shown to the test');
		setTimeout(() => { throw new Error('boom in a timer'); }, 10);
	</script>`
	if err := p.Navigate(ctx, "data:text/html,"+url.PathEscape(page)); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitFor(ctx, "the text to change", `document.getElementById('x').textContent === 'later'`, ""); err != nil {
		t.Fatal(err)
	}
	var size struct{ W, H int }
	if err := p.Eval(ctx, `({W: window.innerWidth, H: window.innerHeight})`, &size); err != nil || size.W != 640 || size.H != 480 {
		t.Errorf("viewport %+v (%v), want 640x480", size, err)
	}
	var sum int
	if err := p.Eval(ctx, `Promise.resolve(20 + 22)`, &sum); err != nil || sum != 42 {
		t.Errorf("awaited promise gave %d, %v", sum, err)
	}
	if err := p.Eval(ctx, `nosuchname.x`, nil); err == nil || !strings.Contains(err.Error(), "ReferenceError") {
		t.Errorf("a failing expression gives %v", err)
	}

	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = p.WaitFor(wctx, "something that never happens", `false`, `document.getElementById('x').textContent`)
	wcancel()
	if err == nil || !strings.Contains(err.Error(), "waiting for something that never happens") || !strings.Contains(err.Error(), `the page shows "later"`) {
		t.Errorf("WaitFor on a false condition: %v", err)
	}
	// The page's console error and uncaught exception reach the test.
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		probs := strings.Join(p.Problems(), "\n")
		if strings.Contains(probs, "shown to the test") && strings.Contains(probs, "boom in a timer") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("problems reported: %q", probs)
		case <-tick.C:
		}
	}
	png, err := p.Screenshot(ctx)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot: %d bytes, %v", len(png), err)
	}
	if err := p.Close(ctx); err != nil {
		t.Error(err)
	}
}
