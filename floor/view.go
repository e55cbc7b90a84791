package floor

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/display/mqttpub"
)

//go:embed view.html
var viewHTML []byte

// TableView is one table as the floor view shows it.
type TableView struct {
	Table string `json:"table"`
	// Status is the table's own status topic, as last received.
	Status *mqttpub.Status `json:"status,omitempty"`
	// Alerts are the table's active alerts (pit/alerts/active), advantage
	// alerts among them.
	Alerts []mqttpub.Alert `json:"alerts"`
	// Floor are the floor's own unresolved alerts for the table.
	Floor []Alert `json:"floor_alerts"`
	// Witnessed is how far the floor holds the table's trail without a
	// hole, MaxSeq the highest row witnessed.
	Witnessed int64 `json:"witnessed"`
	MaxSeq    int64 `json:"max_seq"`
	// CoupsPerHour counts coup results witnessed in the last hour.
	CoupsPerHour int64 `json:"coups_per_hour"`
	// CheckpointAt is when the last witnessed checkpoint was signed.
	CheckpointAt *time.Time `json:"checkpoint_at,omitempty"`
	LastSeen     *time.Time `json:"last_seen,omitempty"`
	// PitView is the table's own pit view (the registry's pit_view).
	PitView string `json:"pit_view,omitempty"`
	// Updated is when this entry last changed, by the floor view's clock.
	Updated time.Time `json:"updated"`
}

// View is the floor view: every table at a glance, from the tables' own
// status and active alerts (live, from the floor broker) and from the
// witnessed database (pace, how far witnessed, the floor's alerts). It
// serves a web page, a JSON snapshot and a stream of changes
// (server-sent events).
type View struct {
	store Store
	reg   *Registry
	subj  Subjects
	clk   clock.Clock
	log   *slog.Logger

	mu     sync.Mutex
	tables map[string]*TableView
	subs   map[chan []byte]bool
}

// NewView makes a floor view over store; Run feeds it.
func NewView(store Store, reg *Registry, subj Subjects, clk clock.Clock, log *slog.Logger) *View {
	if clk == nil {
		clk = clock.Real
	}
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		reg = &Registry{Tables: map[string]TableEntry{}}
	}
	v := &View{store: store, reg: reg, subj: subj, clk: clk, log: log, tables: map[string]*TableView{}, subs: map[chan []byte]bool{}}
	for id, e := range reg.Tables {
		v.tables[id] = &TableView{Table: id, PitView: e.PitView, Alerts: []mqttpub.Alert{}, Floor: []Alert{}}
	}
	return v
}

// Run follows the tables' status and alerts on nc and refreshes from the
// database every poll, until ctx is done. The tables' status and active
// alerts come from the status stream (statusStream, EnsureStatusStream),
// its last message of each table first: a view started after a table
// last said its status shows it at once, not at the table's next change.
// Without the stream it follows them live only.
func (v *View) Run(ctx context.Context, nc *nats.Conn, statusStream string, poll time.Duration) error {
	var subs []*nats.Subscription
	subjects := []string{AlertsSubject}
	if cc, err := v.followStatus(ctx, nc, statusStream); err != nil {
		v.log.Warn("floor view: no status stream; the tables' status shows at their next change", "stream", statusStream, "err", err)
		subjects = append(subjects, v.subj.Status()...)
	} else {
		defer cc.Stop()
	}
	for _, s := range subjects {
		sub, err := nc.Subscribe(s, func(m *nats.Msg) { v.take(m.Subject, m.Data) })
		if err != nil {
			return fmt.Errorf("floor view: subscribe %s: %w", s, err)
		}
		subs = append(subs, sub)
	}
	defer func() {
		for _, s := range subs {
			s.Unsubscribe()
		}
	}()
	t := v.clk.NewTicker(poll)
	defer t.Stop()
	for {
		if err := v.refresh(ctx); err != nil && ctx.Err() == nil {
			v.log.Warn("floor view: database", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// followStatus follows the status stream from each subject's last message.
func (v *View) followStatus(ctx context.Context, nc *nats.Conn, stream string) (jetstream.ConsumeContext, error) {
	if stream == "" {
		return nil, errors.New("none named")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	// A cluster that has just started or lost a node answers once it has
	// a JetStream leader: try for a while, each try bounded.
	for try := 0; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := js.OrderedConsumer(tctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: v.subj.Status(), DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy})
		var cc jetstream.ConsumeContext
		if err == nil {
			cc, err = cons.Consume(func(m jetstream.Msg) { v.take(m.Subject(), m.Data()) })
		}
		cancel()
		if err == nil || try == 5 || ctx.Err() != nil {
			return cc, err
		}
		clock.Sleep(ctx, v.clk, time.Second)
	}
}

// take is a message from the floor broker.
func (v *View) take(subject string, data []byte) {
	if subject == AlertsSubject {
		var a Alert
		if json.Unmarshal(data, &a) != nil || checkTable(a.Table) != nil {
			return
		}
		v.update(a.Table, func(tv *TableView) {
			tv.Floor = slices.DeleteFunc(tv.Floor, func(o Alert) bool { return o.ID == a.ID })
			if a.State == "raised" {
				tv.Floor = append(tv.Floor, a)
			}
		})
		return
	}
	table, kind, err := v.subj.Parse(subject)
	if err != nil || len(data) > MaxMessageBytes {
		return
	}
	if len(v.reg.Tables) > 0 && v.reg.Tables[table].Keys == nil {
		return // not the floor's: invented ids make no lines
	}
	switch kind {
	case KindStatus:
		var s mqttpub.Status
		if json.Unmarshal(data, &s) != nil {
			return
		}
		v.update(table, func(tv *TableView) { tv.Status = &s })
	case KindAlerts:
		var a struct {
			Alerts []mqttpub.Alert `json:"alerts"`
		}
		if json.Unmarshal(data, &a) != nil {
			return
		}
		if a.Alerts == nil {
			a.Alerts = []mqttpub.Alert{}
		}
		v.update(table, func(tv *TableView) { tv.Alerts = a.Alerts })
	}
}

// update changes a table's entry and sends it to every follower.
func (v *View) update(table string, f func(*TableView)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	tv := v.tables[table]
	if tv == nil {
		if len(v.tables) >= 10000 {
			return // a flood of made-up table ids
		}
		tv = &TableView{Table: table, Alerts: []mqttpub.Alert{}, Floor: []Alert{}}
		v.tables[table] = tv
	}
	before, _ := json.Marshal(tv)
	f(tv)
	if after, _ := json.Marshal(tv); string(before) == string(after) {
		return
	}
	tv.Updated = v.clk.Now().UTC()
	after, _ := json.Marshal(tv)
	for ch := range v.subs {
		select {
		case ch <- after:
		default: // a slow follower resyncs from the snapshot
		}
	}
}

// refresh reads what the database knows of every table.
func (v *View) refresh(ctx context.Context) error {
	lines, err := v.store.viewLines(ctx, v.clk.Now().Add(-time.Hour))
	if err != nil {
		return err
	}
	all, err := v.store.openAlerts(ctx)
	if err != nil {
		return err
	}
	open := map[string][]Alert{}
	for _, a := range all {
		if len(open[a.Table]) < 50 {
			open[a.Table] = append(open[a.Table], a)
		}
	}
	for _, l := range lines {
		v.update(l.table, func(tv *TableView) {
			tv.Witnessed, tv.MaxSeq, tv.LastSeen, tv.CheckpointAt, tv.CoupsPerHour = l.contig, l.max, l.seen, l.cp, l.coups
			tv.Floor = open[l.table]
			if tv.Floor == nil {
				tv.Floor = []Alert{}
			}
		})
	}
	return nil
}

// Snapshot is every table, by id.
func (v *View) Snapshot() []TableView {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]TableView, 0, len(v.tables))
	for _, tv := range v.tables {
		out = append(out, *tv)
	}
	slices.SortFunc(out, func(a, b TableView) int {
		if a.Table < b.Table {
			return -1
		}
		if a.Table > b.Table {
			return 1
		}
		return 0
	})
	return out
}

// Login is the floor view's HTTP basic-auth credentials: the floor view
// shows every table's alerts, so it is not for anyone on the network.
type Login struct{ User, Password string }

// Guard lets through requests with l's credentials and answers 401 to
// others. The user and the password are compared in constant time, as
// hashes, so neither their contents nor their lengths show in the timing
// (as the pit view's).
func (l Login) Guard(h http.Handler) http.Handler {
	wantUser, wantPass := sha256.Sum256([]byte(l.User)), sha256.Sum256([]byte(l.Password))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		gotUser, gotPass := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
		if !ok || l.User == "" || l.Password == "" ||
			subtle.ConstantTimeCompare(gotUser[:], wantUser[:])&subtle.ConstantTimeCompare(gotPass[:], wantPass[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="tablectl floor", charset="UTF-8"`)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "the floor view needs the floor's credentials", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeHTTP serves the page (/), the snapshot (/floor.json) and the
// changes (/floor/events: server-sent events, one table's entry each).
func (v *View) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/", "/index.html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'")
		w.Write(viewHTML)
	case "/floor.json":
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"tables": v.Snapshot()})
	case "/floor/events":
		v.serveEvents(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (v *View) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	ch := make(chan []byte, 1024)
	v.mu.Lock()
	v.subs[ch] = true
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		delete(v.subs, ch)
		v.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	snap, _ := json.Marshal(map[string]any{"tables": v.Snapshot()})
	fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", snap)
	fl.Flush()
	ping := v.clk.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case b := <-ch:
			fmt.Fprintf(w, "event: table\ndata: %s\n\n", b)
			fl.Flush()
		case <-ping.C():
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		}
	}
}
