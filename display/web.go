package display

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/tablectl/tablectl/audit/stats"
	"github.com/tablectl/tablectl/coup"
)

// The web display: one page, served from the binary, that is an MQTT client
// over WebSocket. It reads the table only from the broker's topics (retained
// state arrives as soon as it subscribes), so it shows the same thing
// against the embedded broker and against Mosquitto, and it holds no state
// the controller would have to keep. The pit view is the same page with the
// pit's broker login, behind HTTP basic auth.

//go:embed web
var webFiles embed.FS

// WebLogin is a broker username and password a browser uses. Both empty
// connect anonymously (the embedded broker lets anyone read).
type WebLogin struct {
	Username string
	Password string
}

// Recaller is the table's last-game recall (the recorder has it).
type Recaller interface {
	Recall() []coup.CoupRecord
}

// WebConfig configures the web display.
type WebConfig struct {
	// Table is the table's id, shown on the page.
	Table string
	// BrokerWS is the broker's MQTT-over-WebSocket URL as a browser reaches
	// it ("ws://127.0.0.1:9001/mqtt", "wss://table7.example/mqtt"), or a
	// path ("/mqtt") the page takes on its own host and scheme, for a
	// reverse proxy that serves both.
	BrokerWS string
	// Prefix is the table's topic prefix ("tablectl/t1").
	Prefix string
	// Public is the broker login of public displays: the broker's ACL lets
	// it read public/# and status only. The page hands it to anyone.
	Public WebLogin
	// Pit is the broker login of the pit view (reads pit/#). It is only
	// served behind the pit's HTTP credentials.
	Pit WebLogin
	// PitUser and PitPassword guard the pit view with HTTP basic auth. Both
	// empty turn the pit view off.
	PitUser, PitPassword string
	// Recall, when set, serves the last coups with every card to the pit
	// view (behind the pit's credentials).
	Recall Recaller
	// DealerStats, when set, serves the figures per dealer (audit/stats)
	// to the pit view (behind the pit's credentials). An error matching
	// ErrNotReady is a 503 the page retries.
	DealerStats func() (stats.Report, error)
	// Limits, when set, are the profile's stake limits (in minor units),
	// shown on the page as casino boards show them.
	Limits *coup.Limits
	// Language is the language of the public screens that say none
	// (?lang=): "en" (or empty), "zh-Hans", "zh-Hant".
	Language string
}

// webSettings is what the page fetches to learn where and as whom to
// connect (display.json, pit/display.json).
type webSettings struct {
	Table    string `json:"table"`
	View     string `json:"view"` // "public" or "pit"
	BrokerWS string `json:"broker_ws"`
	Prefix   string `json:"prefix"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// ClientID is the start of the page's MQTT client id; the page adds
	// random characters so that two screens never take each other's session.
	ClientID string `json:"client_id_prefix"`
	// Recall is where the pit view fetches the last coups ("" when none).
	Recall string `json:"recall,omitempty"`
	// DealerStats is where it fetches the figures per dealer ("" when none).
	DealerStats string `json:"dealer_stats,omitempty"`
	// Limits are the table's stake limits in minor units, when known.
	Limits *webLimits `json:"limits,omitempty"`
	// Language is the public screen's ("en", "zh-Hans", "zh-Hant"); a
	// screen's ?lang= comes first.
	Language string `json:"language,omitempty"`
}

// webLimits is what the page shows of the profile's limits: the table's
// minimum and maximum per player and coup, and each spot's own maximum.
type webLimits struct {
	Min    int64              `json:"min"`
	Max    int64              `json:"max,omitempty"`
	PerBet map[coup.Bet]int64 `json:"per_bet,omitempty"`
}

// webAsset is one embedded file, ready to serve.
type webAsset struct {
	body  []byte
	ctype string
	etag  string
}

// Paths of the web display, relative so that the page also works mounted
// under a path (http.StripPrefix).
const (
	webPublicConfig = "display.json"
	webPitConfig    = "pit/display.json"
	webPitRecall    = "pit/recall"
	webPitStats     = "pit/stats"
	webPitRealm     = "tablectl pit"
)

// ErrWebConfig reports a web display configuration that cannot work.
var ErrWebConfig = errors.New("web display configuration")

// RoadsAsset returns one of the files that draw the roads ("roads.js",
// "roads.css"): the surveillance viewer serves the table display's own, so
// the two draw the roads alike.
func RoadsAsset(name string) ([]byte, bool) {
	if name != "roads.js" && name != "roads.css" {
		return nil, false
	}
	b, err := webFiles.ReadFile("web/" + name)
	return b, err == nil
}

// ErrNotReady says figures are still being read (the dealer figures read
// the trail's history in the background at start): the caller answers
// 503 and asks the page to come back.
var ErrNotReady = errors.New("not ready yet")

// WebHandler serves the web display, and hands every other request to next
// (the controller's read-only endpoints, display.Handler; nil answers 404):
//
//	/                   the table display
//	/pit                the pit view (HTTP basic auth)
//	/display.json       where the public page connects, and as whom
//	/pit/display.json   the same for the pit view (HTTP basic auth)
//	/pit/recall         the last 10 coups with every card (HTTP basic auth)
//	/pit/stats          the figures per dealer, audit/stats (HTTP basic auth)
//	/web/...            the page's scripts, styles and the vendored mqtt.js
//
// With pit credentials configured, next's /recall (every card as read) is
// behind them too.
func WebHandler(cfg WebConfig, next http.Handler) (http.Handler, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if next == nil {
		next = http.NotFoundHandler()
	}
	assets, err := loadWebAssets()
	if err != nil {
		return nil, err
	}
	page, err := webPage(assets)
	if err != nil {
		return nil, err
	}
	public, err := page("public", webPublicConfig)
	if err != nil {
		return nil, err
	}
	pit, err := page("pit", webPitConfig)
	if err != nil {
		return nil, err
	}
	w := &web{cfg: cfg, assets: assets}

	mux := http.NewServeMux()
	mux.Handle("GET /{$}", htmlHandler(public, false))
	mux.Handle("GET /display.json", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, http.StatusOK, w.settings("public"))
	}))
	mux.Handle("GET /web/{file...}", http.HandlerFunc(w.serveAsset))
	if cfg.pitEnabled() {
		mux.Handle("GET /pit", w.pitAuth(htmlHandler(pit, true)))
		mux.Handle("GET /pit/{$}", w.pitAuth(htmlHandler(pit, true)))
		mux.Handle("GET /pit/display.json", w.pitAuth(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			writeJSON(rw, http.StatusOK, w.settings("pit"))
		})))
		mux.Handle("GET /pit/recall", w.pitAuth(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if cfg.Recall == nil {
				writeJSON(rw, http.StatusNotFound, map[string]string{"error": "no recall on this controller"})
				return
			}
			writeJSON(rw, http.StatusOK, RecallOf(cfg.Recall.Recall()))
		})))
		mux.Handle("GET /pit/stats", w.pitAuth(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if cfg.DealerStats == nil {
				writeJSON(rw, http.StatusNotFound, map[string]string{"error": "no dealer statistics on this controller"})
				return
			}
			rep, err := cfg.DealerStats()
			if errors.Is(err, ErrNotReady) {
				rw.Header().Set("Retry-After", "5")
				writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
				return
			}
			if err != nil {
				writeJSON(rw, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(rw, http.StatusOK, rep)
		})))
		mux.Handle("/recall", w.pitAuth(next))
	} else {
		off := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			http.Error(rw, "the pit view is off: no pit credentials are configured", http.StatusNotFound)
		})
		mux.Handle("/pit", off)
		mux.Handle("/pit/", off)
	}
	mux.Handle("/", next)
	return mux, nil
}

func (c *WebConfig) pitEnabled() bool { return c.PitUser != "" || c.PitPassword != "" }

func (c *WebConfig) check() error {
	var errs []error
	if c.BrokerWS == "" {
		errs = append(errs, errors.New("broker WebSocket URL is empty"))
	} else if !strings.HasPrefix(c.BrokerWS, "/") {
		u, err := url.Parse(c.BrokerWS)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("broker WebSocket URL: %w", err))
		case u.Scheme != "ws" && u.Scheme != "wss":
			errs = append(errs, fmt.Errorf("broker WebSocket URL %q: scheme must be ws or wss (or give a path like /mqtt)", c.BrokerWS))
		case u.Host == "":
			errs = append(errs, fmt.Errorf("broker WebSocket URL %q has no host", c.BrokerWS))
		case u.User != nil:
			errs = append(errs, fmt.Errorf("broker WebSocket URL %q: give credentials as logins, not in the URL", u.Redacted()))
		}
	}
	switch {
	case c.Prefix == "":
		errs = append(errs, errors.New("topic prefix is empty"))
	case strings.ContainsAny(c.Prefix, "+#\x00") || strings.HasPrefix(c.Prefix, "$") ||
		strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") || strings.Contains(c.Prefix, "//"):
		errs = append(errs, fmt.Errorf("topic prefix %q: no wildcards, NUL, leading $ or empty levels", c.Prefix))
	}
	if c.pitEnabled() && (c.PitUser == "" || c.PitPassword == "") {
		errs = append(errs, errors.New("pit view needs both a user and a password"))
	}
	if c.PitUser != "" && strings.Contains(c.PitUser, ":") {
		errs = append(errs, errors.New("pit user must not contain ':' (HTTP basic auth)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrWebConfig, err)
	}
	return nil
}

type web struct {
	cfg    WebConfig
	assets map[string]webAsset
}

func (w *web) settings(view string) webSettings {
	s := webSettings{
		Table: w.cfg.Table, View: view, BrokerWS: w.cfg.BrokerWS, Prefix: w.cfg.Prefix,
		ClientID: clientIDPrefix(w.cfg.Table, view),
	}
	login := w.cfg.Public
	if view == "pit" {
		login = w.cfg.Pit
		if w.cfg.Recall != nil {
			s.Recall = webPitRecall
		}
		if w.cfg.DealerStats != nil {
			s.DealerStats = webPitStats
		}
	}
	s.Username, s.Password = login.Username, login.Password
	s.Language = w.cfg.Language
	if l := w.cfg.Limits; l != nil {
		s.Limits = &webLimits{Min: l.MinTotal, Max: l.MaxTotal, PerBet: l.PerBet}
	}
	return s
}

// clientIDPrefix keeps MQTT client ids short and plain: MQTT 3.1.1 only
// promises 23 characters of [0-9a-zA-Z], and the page adds 8 random hex
// digits, so the prefix is at most 15.
func clientIDPrefix(table, view string) string {
	var b strings.Builder
	b.WriteString("td-")
	if view == "pit" {
		b.WriteString("pit-")
	}
	for _, r := range table {
		if b.Len() >= 14 {
			break
		}
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		}
	}
	b.WriteByte('-')
	return b.String()
}

// pitAuth lets through requests with the pit's credentials. Both the user
// and the password are compared in constant time, as hashes, so that
// neither their contents nor their lengths show in the timing.
func (w *web) pitAuth(h http.Handler) http.Handler {
	wantUser := sha256.Sum256([]byte(w.cfg.PitUser))
	wantPass := sha256.Sum256([]byte(w.cfg.PitPassword))
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		gotUser := sha256.Sum256([]byte(user))
		gotPass := sha256.Sum256([]byte(pass))
		userOK := subtle.ConstantTimeCompare(gotUser[:], wantUser[:])
		passOK := subtle.ConstantTimeCompare(gotPass[:], wantPass[:])
		if !ok || userOK&passOK != 1 {
			rw.Header().Set("WWW-Authenticate", `Basic realm="`+webPitRealm+`", charset="UTF-8"`)
			rw.Header().Set("Cache-Control", "no-store")
			http.Error(rw, "the pit view needs the pit's credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(rw, r)
	})
}

// htmlHandler serves a rendered page with headers that keep it to its own
// scripts: the page builds its DOM from broker data with textContent only,
// and the policy makes sure nothing else runs.
func htmlHandler(body []byte, pit bool) http.Handler {
	// worker-src blob: is mqtt.js's keepalive timer, a worker it makes from
	// a blob URL: without it the page never pings and the broker drops it
	// every 1.5 keepalives.
	csp := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self' ws: wss:; worker-src 'self' blob:; base-uri 'none'; form-action 'none'; object-src 'none'"
	if pit {
		csp += "; frame-ancestors 'none'"
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		h := rw.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if pit {
			h.Set("Cache-Control", "no-store")
		}
		rw.Write(body)
	})
}

func (w *web) serveAsset(rw http.ResponseWriter, r *http.Request) {
	a, ok := w.assets[r.PathValue("file")]
	if !ok {
		http.NotFound(rw, r)
		return
	}
	h := rw.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", a.etag)
	// The page names assets with their hash (?v=), so a screen that runs for
	// weeks picks up a new build on reload; "no-cache" still revalidates.
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(rw, r, "", time.Time{}, bytes.NewReader(a.body))
}

// loadWebAssets reads every embedded file under web/ except the page
// template, keyed by its path below web/.
func loadWebAssets() (map[string]webAsset, error) {
	assets := map[string]webAsset{}
	err := fs.WalkDir(webFiles, "web", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := webFiles.ReadFile(p)
		if err != nil {
			return err
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) {
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".md", ".txt", "":
			ctype = "text/plain; charset=utf-8"
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		assets[strings.TrimPrefix(p, "web/")] = webAsset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web display assets: %w", err)
	}
	return assets, nil
}

// webPage returns a renderer of index.html for a view: the view and where
// its settings are, and the assets named with their hashes.
func webPage(assets map[string]webAsset) (func(view, config string) ([]byte, error), error) {
	src, ok := assets["index.html"]
	if !ok {
		return nil, errors.New("web display assets: index.html missing")
	}
	tpl, err := template.New("index.html").Parse(string(src.body))
	if err != nil {
		return nil, fmt.Errorf("web display page: %w", err)
	}
	delete(assets, "index.html")
	versioned := func(name string) (string, error) {
		a, ok := assets[name]
		if !ok {
			return "", fmt.Errorf("web display assets: %s missing", name)
		}
		return "web/" + name + "?v=" + strings.Trim(a.etag, `"`), nil
	}
	names := map[string]string{}
	for _, n := range []string{"app.js", "pit.js", "roads.js", "roads.css", "i18n.js", "style.css", "vendor/mqtt.min.js"} {
		v, err := versioned(n)
		if err != nil {
			return nil, err
		}
		names[n] = v
	}
	return func(view, config string) ([]byte, error) {
		var b bytes.Buffer
		data := map[string]string{
			"View": view, "Config": config,
			"AppJS": names["app.js"], "StyleCSS": names["style.css"], "MQTTJS": names["vendor/mqtt.min.js"],
			"RoadsJS": names["roads.js"], "RoadsCSS": names["roads.css"], "I18nJS": names["i18n.js"],
		}
		if view == "pit" {
			// Only the pit view signs commands.
			data["PitJS"] = names["pit.js"]
		}
		err := tpl.Execute(&b, data)
		if err != nil {
			return nil, fmt.Errorf("web display page: %w", err)
		}
		return b.Bytes(), nil
	}, nil
}
