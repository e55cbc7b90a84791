package display

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit/stats"
	"github.com/tablectl/tablectl/coup"
)

var webUpdate = flag.Bool("update-web", false, "rewrite the web display golden files in testdata/web/")

// webSource is a controller with two coups in its recall.
type webSource struct{ recs []coup.CoupRecord }

func (s webSource) View() (coup.View, coup.View) {
	v := coup.View{Phase: coup.PhaseBettingOpen, Shoe: 1, Coup: 3, Player: []coup.ViewCard{}, Banker: []coup.ViewCard{}}
	return v, v
}
func (s webSource) Recall() []coup.CoupRecord { return s.recs }
func (s webSource) Failing() error            { return nil }

func webRecall(t *testing.T) []coup.CoupRecord {
	t.Helper()
	var recs []coup.CoupRecord
	for i, deal := range []string{"9S,2H,KD,TC", "4H,4D,7C,3S,8H"} {
		cards, err := coup.ParseCards(deal)
		if err != nil {
			t.Fatal(err)
		}
		r, err := coup.Score(cards)
		if err != nil {
			t.Fatal(err)
		}
		rec := coup.CoupRecord{Shoe: 1, Coup: i + 1, Result: &r}
		for _, c := range cards {
			rec.Cards = append(rec.Cards, coup.DealtCard{Card: c})
		}
		recs = append(recs, rec)
	}
	return recs
}

func webTestConfig(t *testing.T) WebConfig {
	return WebConfig{
		Table:    "t7",
		BrokerWS: "ws://127.0.0.1:9001/mqtt",
		Prefix:   "tablectl/t7",
		Public:   WebLogin{Username: "display", Password: "display-pw"},
		Pit:      WebLogin{Username: "pit-mqtt", Password: "pit-mqtt-secret"},
		PitUser:  "pit", PitPassword: "pit-http-secret",
		Recall: webSource{recs: webRecall(t)},
	}
}

func webServer(t *testing.T, cfg WebConfig) *httptest.Server {
	t.Helper()
	h, err := WebHandler(cfg, Handler(webSource{recs: webRecall(t)}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

type webResp struct {
	code   int
	header http.Header
	body   string
}

func webGet(t *testing.T, url, user, pass string, hdr ...string) webResp {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" || pass != "" {
		req.SetBasicAuth(user, pass)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return webResp{resp.StatusCode, resp.Header, string(b)}
}

func TestWebConfigRefused(t *testing.T) {
	base := webTestConfig(t)
	for _, tc := range []struct {
		name string
		mod  func(*WebConfig)
		want string
	}{
		{"no broker", func(c *WebConfig) { c.BrokerWS = "" }, "broker WebSocket URL is empty"},
		{"tcp broker", func(c *WebConfig) { c.BrokerWS = "tcp://127.0.0.1:1883" }, "scheme must be ws or wss"},
		{"no host", func(c *WebConfig) { c.BrokerWS = "ws:///mqtt" }, "has no host"},
		{"credentials in URL", func(c *WebConfig) { c.BrokerWS = "ws://u:p@127.0.0.1:9001/mqtt" }, "not in the URL"},
		{"unparsable", func(c *WebConfig) { c.BrokerWS = "ws://[::1" }, "broker WebSocket URL"},
		{"no prefix", func(c *WebConfig) { c.Prefix = "" }, "topic prefix is empty"},
		{"wildcard prefix", func(c *WebConfig) { c.Prefix = "tablectl/+" }, "no wildcards"},
		{"hash prefix", func(c *WebConfig) { c.Prefix = "tablectl/#" }, "no wildcards"},
		{"empty level", func(c *WebConfig) { c.Prefix = "tablectl//t7" }, "empty levels"},
		{"trailing slash", func(c *WebConfig) { c.Prefix = "tablectl/t7/" }, "empty levels"},
		{"system topic", func(c *WebConfig) { c.Prefix = "$SYS/t7" }, "leading $"},
		{"pit user only", func(c *WebConfig) { c.PitPassword = "" }, "both a user and a password"},
		{"pit password only", func(c *WebConfig) { c.PitUser = "" }, "both a user and a password"},
		{"colon in pit user", func(c *WebConfig) { c.PitUser = "pit:boss" }, "must not contain ':'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mod(&cfg)
			_, err := WebHandler(cfg, nil)
			if !errors.Is(err, ErrWebConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrWebConfig saying %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{"ws://127.0.0.1:9001/mqtt", "wss://table7.example/mqtt", "/mqtt"} {
		cfg := base
		cfg.BrokerWS = ok
		if _, err := WebHandler(cfg, nil); err != nil {
			t.Errorf("BrokerWS %q refused: %v", ok, err)
		}
	}
}

func TestWebPublicPage(t *testing.T) {
	cfg := webTestConfig(t)
	srv := webServer(t, cfg)

	r := webGet(t, srv.URL+"/", "", "")
	if r.code != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / = %d %s", r.code, r.header.Get("Content-Type"))
	}
	if !strings.Contains(r.body, `data-view="public"`) || !strings.Contains(r.body, `data-config="display.json"`) {
		t.Errorf("public page does not name its view and settings:\n%s", r.body[:min(len(r.body), 800)])
	}
	csp := r.header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "connect-src 'self' ws: wss:", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	// Every script and stylesheet the page names is served, versioned by
	// its content, with the right type.
	refs := regexp.MustCompile(`(?:src|href)="(web/[^"?]+)\?v=([0-9a-f]{16})"`).FindAllStringSubmatch(r.body, -1)
	if len(refs) != 6 {
		t.Fatalf("page names %d versioned assets, want 6 (the roads' style and script, the languages, style, mqtt.js, app): %v", len(refs), refs)
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	for _, ref := range refs {
		a := webGet(t, srv.URL+"/"+ref[1]+"?v="+ref[2], "", "")
		if a.code != http.StatusOK {
			t.Errorf("GET %s = %d", ref[1], a.code)
			continue
		}
		if got, want := a.header.Get("Content-Type"), types[filepath.Ext(ref[1])]; got != want {
			t.Errorf("%s: Content-Type %q, want %q", ref[1], got, want)
		}
		sum := sha256.Sum256([]byte(a.body))
		if hex.EncodeToString(sum[:8]) != ref[2] {
			t.Errorf("%s: version %s is not the hash of what is served", ref[1], ref[2])
		}
		etag := a.header.Get("ETag")
		if c := webGet(t, srv.URL+"/"+ref[1], "", "", "If-None-Match", etag); c.code != http.StatusNotModified {
			t.Errorf("%s with If-None-Match %s = %d, want 304", ref[1], etag, c.code)
		}
	}
	if r := webGet(t, srv.URL+"/web/nothing.js", "", ""); r.code != http.StatusNotFound {
		t.Errorf("GET /web/nothing.js = %d, want 404", r.code)
	}
	if r := webGet(t, srv.URL+"/web/index.html", "", ""); r.code != http.StatusNotFound {
		t.Errorf("the page template is served raw at /web/index.html (%d)", r.code)
	}

	// The public settings carry the public login, never the pit's.
	s := webGet(t, srv.URL+"/display.json", "", "")
	if s.code != http.StatusOK {
		t.Fatalf("GET /display.json = %d", s.code)
	}
	for _, secret := range []string{cfg.Pit.Username, cfg.Pit.Password, cfg.PitPassword} {
		if strings.Contains(s.body, secret) {
			t.Errorf("public settings reveal %q:\n%s", secret, s.body)
		}
	}
	webGolden(t, "settings_public.json", s.body)

	// The controller's own endpoints still answer through the web handler.
	if h := webGet(t, srv.URL+"/health", "", ""); h.code != http.StatusOK || !strings.Contains(h.body, `"ok"`) {
		t.Errorf("GET /health through the web handler = %d %s", h.code, h.body)
	}
	if h := webGet(t, srv.URL+"/state", "", ""); h.code != http.StatusOK || !strings.Contains(h.body, `"betting_open"`) {
		t.Errorf("GET /state through the web handler = %d %s", h.code, h.body)
	}
}

func TestWebPitAuth(t *testing.T) {
	cfg := webTestConfig(t)
	srv := webServer(t, cfg)
	guarded := []string{"/pit", "/pit/", "/pit/display.json", "/pit/recall", "/recall"}
	for _, p := range guarded {
		for _, cred := range []struct{ name, user, pass string }{
			{"none", "", ""},
			{"wrong password", cfg.PitUser, "pit-http-secreT"},
			{"password prefix", cfg.PitUser, "pit-http-secre"},
			{"password longer", cfg.PitUser, cfg.PitPassword + "x"},
			{"wrong user", "pitt", cfg.PitPassword},
			{"swapped", cfg.PitPassword, cfg.PitUser},
		} {
			r := webGet(t, srv.URL+p, cred.user, cred.pass)
			if r.code != http.StatusUnauthorized {
				t.Errorf("GET %s with %s credentials = %d, want 401", p, cred.name, r.code)
				continue
			}
			if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, `Basic realm="tablectl pit"`) {
				t.Errorf("GET %s: WWW-Authenticate %q", p, got)
			}
			if strings.Contains(r.body, cfg.Pit.Password) || strings.Contains(r.body, "9S") {
				t.Errorf("GET %s without credentials leaks: %s", p, r.body)
			}
		}
	}

	r := webGet(t, srv.URL+"/pit", cfg.PitUser, cfg.PitPassword)
	if r.code != http.StatusOK || !strings.Contains(r.body, `data-view="pit"`) || !strings.Contains(r.body, `data-config="pit/display.json"`) {
		t.Fatalf("GET /pit with credentials = %d:\n%s", r.code, r.body[:min(len(r.body), 600)])
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("pit page Cache-Control %q, want no-store", cc)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("pit page may be framed: %q", csp)
	}
	s := webGet(t, srv.URL+"/pit/display.json", cfg.PitUser, cfg.PitPassword)
	if s.code != http.StatusOK {
		t.Fatalf("GET /pit/display.json = %d", s.code)
	}
	webGolden(t, "settings_pit.json", s.body)

	rc := webGet(t, srv.URL+"/pit/recall", cfg.PitUser, cfg.PitPassword)
	var got []RecallCoup
	if err := json.Unmarshal([]byte(rc.body), &got); err != nil || rc.code != http.StatusOK {
		t.Fatalf("GET /pit/recall = %d %v: %s", rc.code, err, rc.body)
	}
	if len(got) != 2 || strings.Join(got[0].Cards, ",") != "9S,2H,KD,TC" || strings.Join(got[1].Cards, ",") != "4H,4D,7C,3S,8H" {
		t.Errorf("recall = %+v", got)
	}
	if r := webGet(t, srv.URL+"/recall", cfg.PitUser, cfg.PitPassword); r.code != http.StatusOK || !strings.Contains(r.body, "4H") {
		t.Errorf("GET /recall with pit credentials = %d %s", r.code, r.body)
	}
}

func TestWebPitOff(t *testing.T) {
	cfg := webTestConfig(t)
	cfg.PitUser, cfg.PitPassword, cfg.Recall = "", "", nil
	srv := webServer(t, cfg)
	for _, p := range []string{"/pit", "/pit/display.json", "/pit/recall"} {
		if r := webGet(t, srv.URL+p, "pit", "anything"); r.code != http.StatusNotFound || !strings.Contains(r.body, "pit view is off") {
			t.Errorf("GET %s with the pit view off = %d %q", p, r.code, r.body)
		}
	}
	// Without pit credentials /recall is what display.Handler makes it
	// (for a controller serving loopback only).
	if r := webGet(t, srv.URL+"/recall", "", ""); r.code != http.StatusOK {
		t.Errorf("GET /recall with the pit view off = %d", r.code)
	}
}

func TestWebPitNoRecall(t *testing.T) {
	cfg := webTestConfig(t)
	cfg.Recall = nil
	srv := webServer(t, cfg)
	s := webGet(t, srv.URL+"/pit/display.json", cfg.PitUser, cfg.PitPassword)
	if strings.Contains(s.body, `"recall"`) {
		t.Errorf("settings offer a recall that is not there: %s", s.body)
	}
	if r := webGet(t, srv.URL+"/pit/recall", cfg.PitUser, cfg.PitPassword); r.code != http.StatusNotFound {
		t.Errorf("GET /pit/recall without a recall = %d", r.code)
	}
}

func TestWebNoNext(t *testing.T) {
	h, err := WebHandler(webTestConfig(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/health", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /health with no next = %d, want 404", rec.Code)
	}
}

func TestWebClientIDPrefix(t *testing.T) {
	for _, tc := range []struct{ table, view, want string }{
		{"t7", "public", "td-t7-"},
		{"t7", "pit", "td-pit-t7-"},
		{"Baccarat Salon/3 ☘", "public", "td-BaccaratSal-"},
		{"Baccarat Salon/3 ☘", "pit", "td-pit-Baccara-"},
		{"table_7-b", "public", "td-table7b-"},
		{"", "public", "td--"},
	} {
		got := clientIDPrefix(tc.table, tc.view)
		if got != tc.want {
			t.Errorf("clientIDPrefix(%q, %q) = %q, want %q", tc.table, tc.view, got, tc.want)
		}
		// The page adds 8 hex digits; MQTT 3.1.1 brokers must take 23
		// characters of [0-9a-zA-Z] (and all take '-').
		if n := len(got) + 8; n > 23 {
			t.Errorf("client id for %q is %d characters", tc.table, n)
		}
	}
}

// TestWebVendoredMQTT keeps vendor/README.md true: the bundle served is the
// one whose hash it records, and its licence ships with it.
func TestWebVendoredMQTT(t *testing.T) {
	readme, err := webFiles.ReadFile("web/vendor/README.md")
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := webFiles.ReadFile("web/vendor/mqtt.min.js")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bundle)
	if !bytes.Contains(readme, []byte("| mqtt.min.js | "+hex.EncodeToString(sum[:])+" |")) {
		t.Errorf("vendor/mqtt.min.js (sha256 %x) is not the file vendor/README.md records", sum)
	}
	lic, err := webFiles.ReadFile("web/vendor/LICENSE.md")
	if err != nil || !bytes.Contains(lic, []byte("MIT License")) {
		t.Errorf("vendor/LICENSE.md missing or not MIT: %v", err)
	}
}

func webGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "web", name)
	if *webUpdate {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update-web writes it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -update-web to accept a deliberate change)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestWebPitDealerStats(t *testing.T) {
	cfg := webTestConfig(t)
	cfg.DealerStats = func() (stats.Report, error) {
		return stats.Report{By: stats.ByDealer, Rows: []stats.Row{{Key: "ann", Coups: 3, CoupsPerHour: 15}}, Total: stats.Row{Key: "total", Coups: 3}}, nil
	}
	srv := webServer(t, cfg)
	if r := webGet(t, srv.URL+"/pit/stats", "", ""); r.code != http.StatusUnauthorized || strings.Contains(r.body, "ann") {
		t.Errorf("GET /pit/stats without credentials = %d %s", r.code, r.body)
	}
	s := webGet(t, srv.URL+"/pit/display.json", cfg.PitUser, cfg.PitPassword)
	if !strings.Contains(s.body, `"dealer_stats": "pit/stats"`) {
		t.Errorf("settings do not offer the dealer figures: %s", s.body)
	}
	r := webGet(t, srv.URL+"/pit/stats", cfg.PitUser, cfg.PitPassword)
	var got stats.Report
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.code != http.StatusOK || len(got.Rows) != 1 || got.Rows[0].Key != "ann" || got.Rows[0].CoupsPerHour != 15 {
		t.Fatalf("GET /pit/stats = %d %v: %s", r.code, err, r.body)
	}
	cfg.DealerStats = func() (stats.Report, error) { return stats.Report{}, errors.New("row 7: broken") }
	srv = webServer(t, cfg)
	if r := webGet(t, srv.URL+"/pit/stats", cfg.PitUser, cfg.PitPassword); r.code != http.StatusInternalServerError || !strings.Contains(r.body, "broken") {
		t.Errorf("GET /pit/stats failing = %d %s", r.code, r.body)
	}
	// Just after a start the figures are still read from the trail: the
	// page is told to come back.
	cfg.DealerStats = func() (stats.Report, error) {
		return stats.Report{}, fmt.Errorf("%w: reading 9 rows", ErrNotReady)
	}
	srv = webServer(t, cfg)
	if r := webGet(t, srv.URL+"/pit/stats", cfg.PitUser, cfg.PitPassword); r.code != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "reading 9 rows") {
		t.Errorf("GET /pit/stats not ready = %d %v %s", r.code, r.header, r.body)
	}
	cfg.DealerStats = nil
	srv = webServer(t, cfg)
	if r := webGet(t, srv.URL+"/pit/stats", cfg.PitUser, cfg.PitPassword); r.code != http.StatusNotFound {
		t.Errorf("GET /pit/stats with none = %d", r.code)
	}
}
