package viewer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/base/netlimit"
	"github.com/tablectl/tablectl/display"
)

//go:embed web
var webFiles embed.FS

// brief is a step as the page's row list shows it.
type brief struct {
	Index  int    `json:"i"`
	Seq    int64  `json:"seq"`
	Time   string `json:"time"`
	Kind   string `json:"kind"`
	Shoe   int    `json:"shoe"`
	Coup   int    `json:"coup"`
	Input  string `json:"input"`
	Events string `json:"events"`
	By     string `json:"by,omitempty"`
	Alert  bool   `json:"alert,omitempty"`
	Diff   bool   `json:"diff,omitempty"`
}

type timelineJSON struct {
	Table  string     `json:"table"`
	Source string     `json:"source"`
	Rows   int64      `json:"rows"`
	Steps  []brief    `json:"steps"`
	Coups  []CoupMark `json:"coups"`
	Diffs  any        `json:"differences"`
}

// Handler serves the viewer of tl; source names the trail on the page.
//
//	/                  the viewer page
//	/timeline.json     every step in brief, where each coup begins, replay's differences
//	/step/{i}          the table at step i (State)
//	/find?coup=S/C     the first step of coup C of shoe S
//	/find?time=T       the first step within T as typed, or the last before it (RFC 3339, or "2006-01-02 15:04:05.000" UTC)
//	/report?coup=S/C   one coup as a printable report for a dispute
//	/web/...           the page's script and style
//
// It only reads tl, and shows every card: Serve puts it behind its
// defences.
func Handler(tl *Timeline, source string) http.Handler {
	tj := timelineJSON{Table: tl.Table, Source: source, Rows: tl.Rows, Steps: make([]brief, 0, len(tl.Steps)), Coups: tl.Coups, Diffs: tl.Diffs}
	if tj.Coups == nil {
		tj.Coups = []CoupMark{}
	}
	for _, s := range tl.Steps {
		b := brief{Index: s.Index, Seq: s.Seq, Time: s.Time, Kind: s.Kind, Shoe: s.Shoe, Coup: s.Coup, Input: s.Input,
			Events: strings.Join(s.Events, "; "), Alert: s.Alert, Diff: len(s.Diffs) > 0}
		if s.Action != nil {
			b.By = s.Action.By
		}
		tj.Steps = append(tj.Steps, b)
	}
	timeline, _ := json.Marshal(tj)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serveFile(w, r, "web/viewer.html", "text/html; charset=utf-8")
	})
	mux.HandleFunc("GET /web/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		ctype := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
		dot := strings.LastIndexByte(name, '.')
		if dot < 0 || ctype[name[dot:]] == "" || name == "viewer.html" || name == "report.html" {
			http.NotFound(w, r)
			return
		}
		if b, ok := display.RoadsAsset(name); ok {
			serveBytes(w, r, b, ctype[name[dot:]])
			return
		}
		serveFile(w, r, "web/"+name, ctype[name[dot:]])
	})
	mux.HandleFunc("GET /timeline.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(timeline)
	})
	mux.HandleFunc("GET /step/{i}", func(w http.ResponseWriter, r *http.Request) {
		i, err := strconv.Atoi(r.PathValue("i"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "step: want a number"})
			return
		}
		s, err := tl.State(i)
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, s)
	})
	mux.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
		i, err := tl.Find(r.URL.Query().Get("coup"), "")
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		rep, err := tl.Report(tl.Steps[i].Shoe, tl.Steps[i].Coup, time.Now())
		if err == nil {
			rep.Source = source
			var page []byte
			if page, err = rep.HTML(); err == nil {
				serveHTML(w, r, page)
				return
			}
		}
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	})
	mux.HandleFunc("GET /find", func(w http.ResponseWriter, r *http.Request) {
		i, err := tl.Find(r.URL.Query().Get("coup"), r.URL.Query().Get("time"))
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"step": i})
	})
	return mux
}

func serveFile(w http.ResponseWriter, r *http.Request, name, ctype string) {
	b, err := webFiles.ReadFile(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if strings.HasSuffix(name, ".html") {
		serveHTML(w, r, b)
		return
	}
	serveBytes(w, r, b, ctype)
}

// serveHTML serves a page with headers that keep it to its own files.
func serveHTML(w http.ResponseWriter, r *http.Request, b []byte) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	serveBytes(w, r, b, "text/html; charset=utf-8")
}

// serveBytes serves a file of the page: the viewer's own, or the table
// display's road renderer (display.RoadsAsset).
func serveBytes(w http.ResponseWriter, r *http.Request, b []byte, ctype string) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// viewerLimits cap the viewer's connections: a few surveillance
// officers' browsers, each a handful of connections.
var viewerLimits = netlimit.Limits{Total: 64, PerClient: 16}

// DefaultUser is the viewer's HTTP basic-auth user when none is given.
const DefaultUser = "surveillance"

// ServeOptions say where and how the viewer is served. It shows every card
// (hole cards included) and every signed command, so it defends itself as
// the controller's pit view does: on loopback by default, and off loopback
// only behind a password and TLS.
type ServeOptions struct {
	// Addr is host:port; without a host ("":8090") it is 127.0.0.1.
	Addr string
	// User and Password, when Password is set, guard every page and
	// endpoint with HTTP basic auth (User defaults to DefaultUser).
	User, Password string
	// CertFile and KeyFile (PEM) serve it over TLS.
	CertFile, KeyFile string
}

// ErrExposed refuses to serve the viewer off loopback without both a
// password and TLS: anyone on the network would read every card and every
// signed command, or the password, in the clear.
var ErrExposed = errors.New("the viewer shows every card and signed command: off loopback it needs a password and TLS")

// listen opens the listener opt names, on loopback when no host is given,
// and refuses (ErrExposed) an address off loopback without a password and
// TLS: it is judged by the address bound, so a name that resolves off
// loopback is refused too.
func listen(opt ServeOptions) (net.Listener, string, error) {
	addr := opt.Addr
	if host, port, err := net.SplitHostPort(addr); err == nil && host == "" {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var ln net.Listener
	ln, err := netlimit.Listen(addr, "viewer", viewerLimits, nil)
	if err != nil {
		return nil, "", fmt.Errorf("viewer: %w", err)
	}
	ta, _ := ln.Addr().(*net.TCPAddr)
	if ta == nil || !ta.IP.IsLoopback() {
		var missing []string
		if opt.Password == "" {
			missing = append(missing, "no password (tablectl replay --http-password-file)")
		}
		if opt.CertFile == "" || opt.KeyFile == "" {
			missing = append(missing, "no TLS (--http-cert-file and --http-key-file)")
		}
		if len(missing) > 0 {
			ln.Close()
			return nil, "", fmt.Errorf("viewer: %s is off loopback with %s: %w; serve it on 127.0.0.1, or give both",
				opt.Addr, strings.Join(missing, " and "), ErrExposed)
		}
	}
	scheme := "http"
	if opt.CertFile != "" || opt.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(opt.CertFile, opt.KeyFile)
		if err != nil {
			ln.Close()
			return nil, "", fmt.Errorf("viewer: TLS certificate: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	return ln, scheme + "://" + ln.Addr().String() + "/", nil
}

// basicAuth lets through requests with the viewer's credentials. The user
// and the password are compared in constant time, as hashes, so that
// neither their contents nor their lengths show in the timing.
func basicAuth(user, password string, h http.Handler) http.Handler {
	if user == "" {
		user = DefaultUser
	}
	wantUser, wantPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
		if subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="tablectl surveillance viewer", charset="UTF-8"`)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "the surveillance viewer needs its credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Serve serves the viewer of tl as opt says until ctx ends; ready, if set,
// is told the page's URL once it listens. It refuses (ErrExposed) to serve
// off loopback without a password and TLS.
func Serve(ctx context.Context, opt ServeOptions, tl *Timeline, source string, ready func(url string)) error {
	ln, url, err := listen(opt)
	if err != nil {
		return err
	}
	h := Handler(tl, source)
	if opt.Password != "" {
		h = basicAuth(opt.User, opt.Password, h)
	}
	// netlimit's timeouts, as the controller's, and 16 KiB of headers:
	// the viewer's requests are a few short ones.
	srv := netlimit.Server(h)
	srv.MaxHeaderBytes = 16 << 10
	if ready != nil {
		ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("viewer: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("viewer: shut down: %w", err)
	}
	return nil
}
