// Package browsertest runs headless Chromium for tests, through chromedp:
// open a page at a viewport size, evaluate JavaScript in it, wait until a
// condition in the page holds, take screenshots, and collect what the page
// reports about itself (console errors, uncaught exceptions). It is the one
// home of the page checks the web display's browser tests share; the tests
// need Debian's chromium package and nothing else.
//
// Every step of a Page is bounded by a timeout and fails the test with what
// it was doing. Waiting is bounded polling of a condition in the page, never
// a fixed sleep: a loaded machine only makes a test slower, not flaky.
package browsertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tablectl/tablectl/internal/testenv"
)

// ErrNoChromium reports that no Chromium binary was found.
var ErrNoChromium = errors.New("no Chromium found on PATH (chromium, chromium-browser or google-chrome; Debian: apt-get install chromium)")

// FindChromium returns the first of chromium, chromium-browser,
// google-chrome on PATH.
func FindChromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// DefaultTimeout bounds one step of a page (a wait, an evaluation, a
// screenshot) unless Browser.Timeout says otherwise; only a hang reaches it.
const DefaultTimeout = 45 * time.Second

// startTimeout bounds the browser's start.
const startTimeout = time.Minute

// Browser is a running headless Chromium with a fresh profile of its own.
type Browser struct {
	// Timeout bounds each step of the pages opened after it is set.
	Timeout time.Duration

	ctx    context.Context // the browser's chromedp context
	cancel context.CancelFunc
}

// Start launches the browser for the test and closes it when the test ends.
// Without Chromium the test is skipped (failed under testenv.AllEnv).
func Start(t testing.TB) *Browser {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		testenv.Missing(t, "chromium (Debian package chromium)")
	}
	b, err := Launch(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// shared is the one browser of a test binary (Shared).
var shared struct {
	mu  sync.Mutex
	b   *Browser
	err error
}

// Shared returns the test binary's one browser, started by the first test
// that asks, so a package's browser tests pay for one Chromium start: each
// test opens its own tabs, which close when it ends. Without Chromium the
// test is skipped (failed under testenv.AllEnv). The package's TestMain
// calls CloseShared after m.Run. Tests that share it must not run in
// parallel with each other's Timeout settings in mind: Timeout applies to
// the pages opened after it is set.
func Shared(t testing.TB) *Browser {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		testenv.Missing(t, "chromium (Debian package chromium)")
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.b == nil && shared.err == nil {
		shared.b, shared.err = Launch(path)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.b
}

// CloseShared stops the shared browser, if one started, and removes its
// profile.
func CloseShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.b != nil {
		shared.b.Close()
		shared.b = nil
	}
}

// Launch starts the browser at path. Close stops it.
func Launch(path string) (*Browser, error) {
	// chromedp's defaults (headless, no first run, no background work) and
	// what runs as root on a CI machine, with nothing that reaches out to the
	// network on its own. Without a --user-data-dir chromedp makes a fresh
	// temporary one and removes it when the browser stops.
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	b := &Browser{Timeout: DefaultTimeout, ctx: ctx, cancel: func() {
		// Ask the browser to close, then make sure it is gone.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		chromedp.Cancel(cctx)
		cancel()
		cancelBrowser()
		cancelAlloc()
	}}
	// The first run starts the browser and binds it to ctx, so the start is
	// bounded from outside rather than by a timeout on ctx.
	timer := time.AfterFunc(startTimeout, cancelBrowser)
	err := chromedp.Do(ctx)
	if !timer.Stop() {
		err = fmt.Errorf("no answer in %v: %w", startTimeout, err)
	}
	if err != nil {
		cancelBrowser()
		cancelAlloc()
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	return b, nil
}

// Close stops the browser and removes its profile.
func (b *Browser) Close() { b.cancel() }

// Page is one browser tab, opened for a test: each method fails the test,
// saying what it was doing, if its step fails or outlasts Timeout.
type Page struct {
	// Timeout bounds each step.
	Timeout time.Duration

	t    testing.TB
	stop context.Context // ends every step early; its cause explains why
	tab  context.Context // the tab's chromedp context

	mu       sync.Mutex
	console  []string
	problems []string
}

// Open opens url in a new tab with a viewport of width x height CSS pixels,
// sending headers (nil for none) with every request. The tab closes when
// the test ends.
func (b *Browser) Open(t testing.TB, url string, width, height int, headers map[string]string) *Page {
	t.Helper()
	return b.OpenContext(t.Context(), t, url, width, height, headers)
}

// OpenContext is Open with every step of the page ended early when ctx ends;
// a failing step then names ctx's cause (context.WithCancelCause), such as
// the alert that stopped the table under test.
func (b *Browser) OpenContext(ctx context.Context, t testing.TB, url string, width, height int, headers map[string]string) *Page {
	t.Helper()
	tab, closeTab := chromedp.NewContext(b.ctx)
	p := &Page{Timeout: b.Timeout, t: t, stop: ctx, tab: tab}
	stopClose := context.AfterFunc(ctx, closeTab)
	t.Cleanup(func() {
		stopClose()
		closeTab()
	})
	// The tab's first run creates it and binds it to tab, so like the
	// browser's start it is bounded from outside.
	timer := time.AfterFunc(p.Timeout, closeTab)
	err := chromedp.Do(tab,
		// A screenshot never catches an animation half way.
		chromedp.EmulateViewport(int64(width), int64(height)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}})
			return err
		}))
	if !timer.Stop() {
		err = fmt.Errorf("no answer in %v: %w", p.Timeout, err)
	}
	if err != nil {
		p.fail(fmt.Errorf("open a %dx%d page: %w", width, height, err))
	}
	go p.collect(chromedp.Console(tab))
	if headers != nil {
		p.SetHeaders(headers)
	}
	p.Navigate(url)
	return p
}

// collect keeps what the page writes to its console, and as problems its
// console errors and assertions and its uncaught exceptions. Entries of the
// browser's own log (a refused WebSocket while a test stops the broker,
// say) are kept with the console but are not the page's problems.
func (p *Page) collect(msgs iter.Seq2[chromedp.ConsoleMessage, error]) {
	for m, err := range msgs {
		if err != nil {
			return
		}
		line := m.String()
		if m.Source != "" {
			line = "browser " + m.Source + " " + line
		}
		p.mu.Lock()
		p.console = append(p.console, line)
		if m.Source == "" && (m.IsException() || m.Type == chromedp.ConsoleError || m.Type == "assert") {
			p.problems = append(p.problems, "console "+line)
		}
		p.mu.Unlock()
	}
}

// Problems are the page's uncaught exceptions and console errors so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Console is everything the page (and the browser about it) logged so far.
func (p *Page) Console() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// NoProblems fails the test (without stopping it) if the page reported
// problems.
func (p *Page) NoProblems() {
	p.t.Helper()
	if pr := p.Problems(); len(pr) > 0 {
		p.t.Errorf("the page reported problems:\n%s", strings.Join(pr, "\n"))
	}
}

// fail ends the test with err, and with what ended the page's context if
// that was a cause of its own (an alert on the table, say).
func (p *Page) fail(err error) {
	p.t.Helper()
	if cause := context.Cause(p.stop); cause != nil && !errors.Is(cause, p.stop.Err()) {
		p.t.Fatalf("%v: %v", cause, err)
	}
	p.t.Fatal(err)
}

// run runs one step, bounded by Timeout, and fails the test if it fails.
func (p *Page) run(step func(ctx context.Context) error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, p.Timeout)
	defer cancel()
	if err := step(ctx); err != nil {
		p.fail(err)
	}
}

// SetHeaders sends these HTTP headers with every request of the page (an
// Authorization header for basic auth, say).
func (p *Page) SetHeaders(h map[string]string) {
	p.t.Helper()
	hs := network.Headers{}
	for k, v := range h {
		hs[k] = v
	}
	p.run(func(ctx context.Context) error {
		if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: hs})
			return err
		})); err != nil {
			return fmt.Errorf("set the page's HTTP headers: %w", err)
		}
		return nil
	})
}

// ReducedMotion says whether the page prefers reduced motion (pages open
// with it on, so screenshots never catch an animation half way); off, the
// page animates as a screen at a table does.
func (p *Page) ReducedMotion(on bool) {
	p.t.Helper()
	v := "no-preference"
	if on {
		v = "reduce"
	}
	p.run(func(ctx context.Context) error {
		return chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: v}}})
			return err
		}))
	})
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(url string) {
	p.t.Helper()
	p.run(func(ctx context.Context) error {
		if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
			return fmt.Errorf("navigate to %s: %w", url, err)
		}
		return nil
	})
}

// Eval evaluates a JavaScript expression in the page (awaiting it when it
// is a promise) and decodes its JSON value into out (which may be nil).
func (p *Page) Eval(expr string, out any) {
	p.t.Helper()
	p.run(func(ctx context.Context) error { return eval(ctx, expr, out) })
}

func eval(ctx context.Context, expr string, out any) error {
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return fmt.Errorf("javascript %s: %w", clip(expr), err)
	}
	if out == nil {
		return nil
	}
	if len(raw) == 0 {
		return fmt.Errorf("javascript %s gave no JSON value", clip(expr))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("javascript value %s: %w", clip(string(raw)), err)
	}
	return nil
}

// Text is the trimmed text of the first element matching the CSS selector,
// or "<missing>" when there is none.
func (p *Page) Text(selector string) string {
	p.t.Helper()
	var s string
	p.Eval(fmt.Sprintf(`(document.querySelector(%q) || {textContent: "<missing>"}).textContent.trim()`, selector), &s)
	return s
}

// PollInterval is how often WaitFor asks the page again.
const PollInterval = 40 * time.Millisecond

// WaitFor polls the JavaScript expression cond until it is truthy. Past
// Timeout it fails the test saying what was awaited (what) and what
// describe, a JavaScript expression, gave at the end ("" leaves it out).
func (p *Page) WaitFor(what, cond, describe string) {
	p.t.Helper()
	p.run(func(ctx context.Context) error { return p.waitFor(ctx, what, cond, describe) })
}

func (p *Page) waitFor(ctx context.Context, what, cond, describe string) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	for {
		var ok bool
		lastErr := eval(ctx, "!!("+cond+")", &ok)
		if lastErr == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("waiting for %s: %v", what, ctx.Err())
			if lastErr != nil && !errors.Is(lastErr, ctx.Err()) {
				msg += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			if describe != "" {
				// The step's context is over: ask with a short one of the tab's.
				sctx, cancel := context.WithTimeout(p.tab, 5*time.Second)
				var got any
				if err := eval(sctx, describe, &got); err == nil {
					b, _ := json.Marshal(got)
					msg += "; the page shows " + clip(string(b))
				}
				cancel()
			}
			if pr := p.Problems(); len(pr) > 0 {
				msg += "; page problems: " + strings.Join(pr, " | ")
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}

// Screenshot is a PNG of the viewport.
func (p *Page) Screenshot() []byte {
	p.t.Helper()
	var png []byte
	p.run(func(ctx context.Context) (err error) {
		if png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot()); err != nil {
			return fmt.Errorf("screenshot: %w", err)
		}
		return nil
	})
	return png
}

// TransparentScreenshot is a PNG of the viewport over no background: what
// the page leaves transparent (an overlay for a video mixer's browser
// source) has an alpha of 0.
func (p *Page) TransparentScreenshot() []byte {
	p.t.Helper()
	var png []byte
	p.run(func(ctx context.Context) (err error) {
		png, err = chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
			// An alpha of exactly 0 is left out of the request (and so read
			// as 1): the least above it rounds to 0 in the PNG.
			clear := cdp.RGBA{A: 1e-6}
			if _, err := cdp.Call(ctx, t, emulation.SetDefaultBackgroundColorOverride, emulation.SetDefaultBackgroundColorOverrideParams{Color: &clear}); err != nil {
				return nil, err
			}
			defer cdp.Call(ctx, t, emulation.SetDefaultBackgroundColorOverride, emulation.SetDefaultBackgroundColorOverrideParams{})
			r, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng})
			return r.Data, err
		})
		if err != nil {
			return fmt.Errorf("transparent screenshot: %w", err)
		}
		return nil
	})
	return png
}

// FullScreenshot is a PNG of the whole page, beyond the viewport.
func (p *Page) FullScreenshot() []byte {
	p.t.Helper()
	var png []byte
	p.run(func(ctx context.Context) (err error) {
		png, err = chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]byte, error) {
			m, err := cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
			if err != nil {
				return nil, err
			}
			all := page.Viewport{Width: m.CSSContentSize.Width, Height: m.CSSContentSize.Height, Scale: 1}
			r, err := cdp.Call(ctx, t, page.CaptureScreenshot, page.CaptureScreenshotParams{
				Format: page.CaptureScreenshotFormatPng, CaptureBeyondViewport: ptr(true), Clip: &all})
			return r.Data, err
		})
		if err != nil {
			return fmt.Errorf("full screenshot: %w", err)
		}
		return nil
	})
	return png
}

// SaveScreenshot writes a screenshot (of the whole page if full) to
// dir/name.png, making dir if need be, logs where, and returns the path.
func (p *Page) SaveScreenshot(dir, name string, full bool) string {
	p.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	png := p.Screenshot
	if full {
		png = p.FullScreenshot
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png(), 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s", path)
	return path
}

func ptr[T any](v T) *T { return &v }

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
