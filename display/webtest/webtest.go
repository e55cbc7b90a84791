// Package webtest runs headless Chromium for tests and drives it over the
// Chrome DevTools protocol: open a page at a viewport size, evaluate
// JavaScript in it, wait until a condition in the page holds, take a
// screenshot. It is the small part of the protocol the web display's tests
// need, over the WebSocket client tablectl already builds with, so the
// tests need Debian's chromium package and nothing else.
//
// Waiting is bounded polling of a condition in the page, never a fixed
// sleep: a loaded machine only makes a test slower, not flaky.
package webtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// EnvChromium names the environment variable that picks the browser binary.
const EnvChromium = "TABLECTL_CHROMIUM"

// ErrNoChromium reports that no Chromium binary was found.
var ErrNoChromium = errors.New("no Chromium found (Debian: apt-get install chromium; or set " + EnvChromium + ")")

// FindChromium returns the browser to run: $TABLECTL_CHROMIUM, else the
// first of chromium, chromium-browser, google-chrome on PATH.
func FindChromium() (string, error) {
	if p := os.Getenv(EnvChromium); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", EnvChromium, p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Flags are the command-line flags every test browser runs with: headless,
// no sandbox (tests run as root in CI), and nothing that reaches out to the
// network on its own.
var Flags = []string{
	"--headless",
	"--no-sandbox",
	"--disable-gpu",
	"--disable-quic",
	"--no-first-run",
	"--no-default-browser-check",
	"--disable-background-networking",
	"--disable-component-update",
	"--disable-sync",
	"--disable-extensions",
	// Every page draws as if in front: a test watches several at once.
	"--disable-renderer-backgrounding",
	"--disable-background-timer-throttling",
	"--disable-backgrounding-occluded-windows",
	"--disable-dev-shm-usage",
	"--disable-features=Translate,MediaRouter,OptimizationHints",
	"--hide-scrollbars",
	"--mute-audio",
	"--password-store=basic",
	"--use-mock-keychain",
}

// Options configure Start.
type Options struct {
	// Path is the browser binary; "" uses FindChromium.
	Path string
	// Logf, when set, gets the browser's stderr lines (t.Logf).
	Logf func(format string, args ...any)
}

// Browser is a running headless Chromium with its own fresh profile.
type Browser struct {
	cmd     *exec.Cmd
	dir     string
	exited  chan struct{}
	waitErr error
	stderr  *tailBuffer
	conn    *conn
	closed  atomic.Bool
}

// Start launches the browser with a fresh profile directory and connects
// to its DevTools endpoint. ctx bounds the start only.
func Start(ctx context.Context, opt Options) (*Browser, error) {
	path := opt.Path
	if path == "" {
		p, err := FindChromium()
		if err != nil {
			return nil, err
		}
		path = p
	}
	dir, err := os.MkdirTemp("", "webtest-chromium-*")
	if err != nil {
		return nil, fmt.Errorf("browser profile directory: %w", err)
	}
	args := append(append([]string{}, Flags...),
		"--user-data-dir="+dir,
		"--remote-debugging-port=0",
		"--remote-debugging-address=127.0.0.1",
		"about:blank",
	)
	cmd := exec.Command(path, args...)
	b := &Browser{cmd: cmd, dir: dir, exited: make(chan struct{}), stderr: &tailBuffer{max: 64 << 10, logf: opt.Logf}}
	cmd.Stdout = b.stderr
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	go func() {
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	wsURL, err := b.devToolsURL(ctx)
	if err != nil {
		b.kill()
		return nil, err
	}
	d := websocket.Dialer{HandshakeTimeout: 20 * time.Second}
	ws, _, err := d.DialContext(ctx, wsURL, nil)
	if err != nil {
		b.kill()
		return nil, fmt.Errorf("connect to the browser's DevTools at %s: %w", wsURL, err)
	}
	ws.SetReadLimit(256 << 20) // screenshots are large
	b.conn = newConn(ws)
	return b, nil
}

// devToolsURL waits for the browser to write DevToolsActivePort (the port it
// picked and the browser target's path) into its profile.
func (b *Browser) devToolsURL(ctx context.Context) (string, error) {
	file := filepath.Join(b.dir, "DevToolsActivePort")
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		data, err := os.ReadFile(file)
		if err == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) == 2 {
				port, err := strconv.Atoi(strings.TrimSpace(lines[0]))
				if err == nil && port > 0 {
					return "ws://127.0.0.1:" + strconv.Itoa(port) + strings.TrimSpace(lines[1]), nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("browser did not open its DevTools port: %w; its output:\n%s", ctx.Err(), b.stderr.String())
		case <-b.exited:
			return "", fmt.Errorf("browser exited before opening its DevTools port (%v); its output:\n%s", b.waitErr, b.stderr.String())
		case <-tick.C:
		}
	}
}

func (b *Browser) kill() {
	b.cmd.Process.Kill()
	<-b.exited
	os.RemoveAll(b.dir)
}

// Close closes the browser and removes its profile.
func (b *Browser) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.conn.call(ctx, "", "Browser.close", nil, nil)
	select {
	case <-b.exited:
	case <-ctx.Done():
		b.cmd.Process.Kill()
		<-b.exited
	}
	b.conn.close()
	return os.RemoveAll(b.dir)
}

// Output is the tail of the browser's own output, for failure messages.
func (b *Browser) Output() string { return b.stderr.String() }

// Page is one browser tab.
type Page struct {
	b         *Browser
	target    string
	session   string
	mu        sync.Mutex
	problems  []string
	console   []string
	navigated chan string
}

// NewPage opens a blank page, in a window of its own, with a viewport of width x height CSS pixels
// that prefers reduced motion (so screenshots never catch an animation
// half way).
func (b *Browser) NewPage(ctx context.Context, width, height int) (*Page, error) {
	var created struct {
		TargetID string `json:"targetId"`
	}
	if err := b.conn.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "newWindow": true, "width": width, "height": height}, &created); err != nil {
		return nil, err
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.conn.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached); err != nil {
		return nil, err
	}
	p := &Page{b: b, target: created.TargetID, session: attached.SessionID, navigated: make(chan string, 16)}
	b.conn.subscribe(p.session, p.event)
	for _, c := range []struct {
		method string
		params any
	}{
		{"Page.enable", nil},
		{"Runtime.enable", nil},
		{"Network.enable", nil},
		{"Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}},
		{"Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-reduced-motion", "value": "reduce"}}}},
	} {
		if err := p.call(ctx, c.method, c.params, nil); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *Page) call(ctx context.Context, method string, params, result any) error {
	return p.b.conn.call(ctx, p.session, method, params, result)
}

// event keeps what the page reports about itself: uncaught exceptions and
// console messages.
func (p *Page) event(method string, params json.RawMessage) {
	switch method {
	case "Runtime.exceptionThrown":
		var e struct {
			ExceptionDetails struct {
				Text      string `json:"text"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		json.Unmarshal(params, &e)
		p.mu.Lock()
		p.problems = append(p.problems, "exception: "+e.ExceptionDetails.Text+" "+e.ExceptionDetails.Exception.Description)
		p.mu.Unlock()
	case "Runtime.consoleAPICalled":
		var e struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		json.Unmarshal(params, &e)
		var parts []string
		for _, a := range e.Args {
			if a.Value != nil {
				parts = append(parts, fmt.Sprint(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		line := e.Type + ": " + strings.Join(parts, " ")
		p.mu.Lock()
		p.console = append(p.console, line)
		if e.Type == "error" || e.Type == "assert" {
			p.problems = append(p.problems, "console "+line)
		}
		p.mu.Unlock()
	case "Page.loadEventFired":
		select {
		case p.navigated <- method:
		default:
		}
	}
}

// Problems are the page's uncaught exceptions and console errors so far.
func (p *Page) Problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.problems...)
}

// Console is everything the page logged so far.
func (p *Page) Console() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// SetHeaders sends these HTTP headers with every request of the page
// (an Authorization header for basic auth, say).
func (p *Page) SetHeaders(ctx context.Context, h map[string]string) error {
	return p.call(ctx, "Network.setExtraHTTPHeaders", map[string]any{"headers": h}, nil)
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	for len(p.navigated) > 0 {
		<-p.navigated
	}
	var res struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.call(ctx, "Page.navigate", map[string]any{"url": url}, &res); err != nil {
		return err
	}
	if res.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, res.ErrorText)
	}
	select {
	case <-p.navigated:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("navigate to %s: no load event: %w", url, ctx.Err())
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting it when it
// is a promise) and decodes its JSON value into out (which may be nil).
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Type        string          `json:"type"`
			Value       json.RawMessage `json:"value"`
			Description string          `json:"description"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res)
	if err != nil {
		return err
	}
	if d := res.ExceptionDetails; d != nil {
		return fmt.Errorf("javascript: %s %s (in %s)", d.Text, d.Exception.Description, clip(expr))
	}
	if out == nil {
		return nil
	}
	if len(res.Result.Value) == 0 {
		return fmt.Errorf("javascript gave %s, not a JSON value (in %s)", res.Result.Type, clip(expr))
	}
	if err := json.Unmarshal(res.Result.Value, out); err != nil {
		return fmt.Errorf("javascript value %s: %w", clip(string(res.Result.Value)), err)
	}
	return nil
}

// PollInterval is how often WaitFor asks the page again.
const PollInterval = 40 * time.Millisecond

// WaitFor polls the JavaScript expression cond until it is truthy, or ctx
// ends. The error says what was awaited (what) and what describe, a
// JavaScript expression, gave at the end ("" leaves it out).
func (p *Page) WaitFor(ctx context.Context, what, cond, describe string) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	var lastErr error
	for {
		var ok bool
		lastErr = p.Eval(ctx, "!!("+cond+")", &ok)
		if lastErr == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("waiting for %s: %v", what, ctx.Err())
			if lastErr != nil && ctx.Err() == nil {
				msg += fmt.Sprintf(" (last error: %v)", lastErr)
			}
			if describe != "" {
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				var got any
				if err := p.Eval(sctx, describe, &got); err == nil {
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

// Screenshot takes a PNG of the viewport.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var res struct {
		Data string `json:"data"`
	}
	if err := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": false}, &res); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return png, nil
}

// FullScreenshot takes a PNG of the whole page, beyond the viewport.
func (p *Page) FullScreenshot(ctx context.Context) ([]byte, error) {
	var m struct {
		CSSContentSize struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := p.call(ctx, "Page.getLayoutMetrics", nil, &m); err != nil {
		return nil, err
	}
	var res struct {
		Data string `json:"data"`
	}
	clipRect := map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": m.CSSContentSize.Height, "scale": 1}
	if err := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true, "clip": clipRect}, &res); err != nil {
		return nil, err
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	return png, nil
}

// Close closes the tab.
func (p *Page) Close(ctx context.Context) error {
	p.b.conn.unsubscribe(p.session)
	return p.b.conn.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": p.target}, nil)
}

// conn is one DevTools WebSocket: calls matched to replies by id, events
// handed to the page (session) they belong to.
type conn struct {
	ws      *websocket.Conn
	writeMu sync.Mutex
	nextID  atomic.Int64

	mu      sync.Mutex
	pending map[int64]chan reply
	pages   map[string]func(method string, params json.RawMessage)
	err     error
	done    chan struct{}
}

type reply struct {
	Result json.RawMessage
	Err    error
}

func newConn(ws *websocket.Conn) *conn {
	c := &conn{ws: ws, pending: map[int64]chan reply{}, pages: map[string]func(string, json.RawMessage){}, done: make(chan struct{})}
	go c.read()
	return c
}

func (c *conn) read() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("DevTools connection: %w", err)
			for id, ch := range c.pending {
				ch <- reply{Err: c.err}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		var m struct {
			ID        int64           `json:"id"`
			Method    string          `json:"method"`
			Params    json.RawMessage `json:"params"`
			Result    json.RawMessage `json:"result"`
			SessionID string          `json:"sessionId"`
			Error     *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    string `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			continue
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				r := reply{Result: m.Result}
				if m.Error != nil {
					r.Err = fmt.Errorf("DevTools error %d: %s %s", m.Error.Code, m.Error.Message, m.Error.Data)
				}
				ch <- r
			}
			c.mu.Unlock()
			continue
		}
		h := c.pages[m.SessionID]
		c.mu.Unlock()
		if h != nil && m.Method != "" {
			h(m.Method, m.Params)
		}
	}
}

func (c *conn) subscribe(session string, h func(string, json.RawMessage)) {
	c.mu.Lock()
	c.pages[session] = h
	c.mu.Unlock()
}

func (c *conn) unsubscribe(session string) {
	c.mu.Lock()
	delete(c.pages, session)
	c.mu.Unlock()
}

func (c *conn) call(ctx context.Context, session, method string, params, result any) error {
	id := c.nextID.Add(1)
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, c.err)
	}
	c.pending[id] = ch
	c.mu.Unlock()
	c.writeMu.Lock()
	err = c.ws.WriteMessage(websocket.TextMessage, data)
	c.writeMu.Unlock()
	if err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Err != nil {
			return fmt.Errorf("%s: %w", method, r.Err)
		}
		if result != nil && len(r.Result) > 0 {
			if err := json.Unmarshal(r.Result, result); err != nil {
				return fmt.Errorf("%s: reply: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

func (c *conn) close() {
	c.ws.Close()
	<-c.done
}

// tailBuffer keeps the last max bytes the browser wrote, and passes whole
// lines to logf.
type tailBuffer struct {
	mu   sync.Mutex
	buf  []byte
	max  int
	line bytes.Buffer
	logf func(string, ...any)
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	if t.logf != nil {
		t.line.Write(p)
		rest := t.line.Bytes()
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			t.logf("chromium: %s", rest[:i])
			rest = rest[i+1:]
		}
		left := append([]byte(nil), rest...)
		t.line.Reset()
		t.line.Write(left)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
