package viewer

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tablectl/tablectl/internal/netlimit"
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
//	/find?time=T       the last step at or before T (RFC 3339, or "2006-01-02 15:04:05.000" UTC)
//	/web/...           the page's script and style
//
// It only reads tl; serve it where surveillance works (it shows every card).
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
		if dot < 0 || ctype[name[dot:]] == "" || name == "viewer.html" {
			http.NotFound(w, r)
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
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	if strings.HasSuffix(name, ".html") {
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; object-src 'none'; frame-ancestors 'none'")
		h.Set("Referrer-Policy", "no-referrer")
	}
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

// Serve serves the viewer of tl on addr until ctx ends; ready, if set, is
// told the page's URL once it listens. The listener is held to
// viewerLimits and the server to netlimit's timeouts, as the controller's.
func Serve(ctx context.Context, addr string, tl *Timeline, source string, ready func(url string)) error {
	ln, err := netlimit.Listen(addr, "viewer", viewerLimits, nil)
	if err != nil {
		return fmt.Errorf("viewer: %w", err)
	}
	srv := netlimit.Server(Handler(tl, source))
	if ready != nil {
		ready("http://" + ln.Addr().String() + "/")
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
