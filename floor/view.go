package floor

import (
	"cmp"
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
	tables map[string]*tableRaw
	subs   map[*follower]bool
	// floor are the open alerts of the floor itself (no table: a stream
	// lost, the witnesses stalled), by witness and kind.
	floor map[string]Alert
}

// follower is a page following the floor: the tables changed since it
// last wrote, and a nudge. A burst of changes to one table is one event,
// and a page that reads slowly holds a set of table ids, not a queue.
type follower struct {
	dirty map[string]bool // under View.mu
	wake  chan struct{}
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
	v := &View{store: store, reg: reg, subj: subj, clk: clk, log: log, tables: map[string]*tableRaw{}, subs: map[*follower]bool{}, floor: map[string]Alert{}}
	for id := range reg.Tables {
		v.tables[id] = newTableRaw()
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
		if len(data) > MaxMessageBytes || json.Unmarshal(data, &a) != nil {
			return
		}
		if a.Table == "" {
			v.floorAlert(a)
			return
		}
		if checkTable(a.Table) != nil {
			return
		}
		v.update(a.Table, func(r *tableRaw) {
			delete(r.floor, a.ID)
			if a.State == "raised" {
				addFloorAlert(r.floor, a)
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
		v.update(table, func(r *tableRaw) {
			if !s.Suspended {
				r.hold = nil
			}
			r.status = &s
		})
	case KindAlerts:
		var a mqttpub.ActiveAlerts
		if json.Unmarshal(data, &a) != nil {
			return
		}
		now := v.clk.Now()
		v.update(table, func(r *tableRaw) { r.takeActive(a, now) })
	}
}

// floorAlert takes an alert of the floor itself: the page shows it above
// the tables until resolved.
func (v *View) floorAlert(a Alert) {
	key := clip(a.Witness, maxName) + "/" + clip(string(a.Kind), maxName)
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case a.State == "resolved":
		delete(v.floor, key)
	case a.State == "raised" && (len(v.floor) < 32 || v.floor[key].State != ""):
		a.Message = clip(a.Message, maxWords)
		v.floor[key] = a
	default:
		return
	}
	for f := range v.subs {
		f.dirty[""] = true // the floor's own
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// floorAlerts are the floor's own open alerts, oldest first; under mu.
func (v *View) floorAlerts() []FloorAlert {
	out := []FloorAlert{}
	for _, a := range v.floor {
		out = append(out, FloorAlert{Kind: string(a.Kind), Words: words(kindWords, string(a.Kind)), Witness: a.Witness, Message: a.Message, At: a.At})
	}
	slices.SortFunc(out, func(a, b FloorAlert) int { return a.At.Compare(b.At) })
	return out
}

// FloorAlert is an alert of the floor itself, as the floor view shows it.
type FloorAlert struct {
	Kind    string    `json:"kind"`
	Words   string    `json:"words"`
	Witness string    `json:"witness"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// addFloorAlert keeps a among a table's open floor alerts, the newest
// maxTableSeen of them.
func addFloorAlert(m map[int64]Alert, a Alert) {
	if len(m) >= maxTableSeen {
		oldest := a.ID
		for id := range m {
			oldest = min(oldest, id)
		}
		if oldest == a.ID {
			return
		}
		delete(m, oldest)
	}
	m[a.ID] = a
}

// update changes a table's entry and sends it to every follower when
// what the page shows changed.
func (v *View) update(table string, f func(*tableRaw)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := v.tables[table]
	if r == nil {
		if len(v.tables) >= 10000 {
			return // a flood of made-up table ids
		}
		r = newTableRaw()
		v.tables[table] = r
	}
	f(r)
	tv := r.summary(table, v.reg.Tables[table].PitView)
	same, _ := json.Marshal(tv)
	if string(same) == string(r.sent) {
		return
	}
	r.sent = same
	tv.Updated = v.clk.Now().UTC()
	r.entry = entryBytes(&tv)
	r.view = tv
	for f := range v.subs {
		f.dirty[table] = true
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// entryBytes is tv encoded within MaxEntryBytes: the bounds of the
// summary keep it well under; should they not, the last kinds go.
func entryBytes(tv *TableView) []byte {
	for {
		b, _ := json.Marshal(tv)
		if len(b) <= MaxEntryBytes || len(tv.Alerts) == 0 {
			return b
		}
		tv.Alerts, tv.MoreKinds = tv.Alerts[:len(tv.Alerts)-1], tv.MoreKinds+1
	}
}

// refresh reads what the database knows of every table: how far
// witnessed, the pace over RateWindow, the floor's open alerts, and for a
// suspended table, its suspension as the rows tell it.
func (v *View) refresh(ctx context.Context) error {
	lines, err := v.store.viewLines(ctx, v.clk.Now().Add(-RateWindow))
	if err != nil {
		return err
	}
	all, err := v.store.openAlerts(ctx)
	if err != nil {
		return err
	}
	open := map[string]map[int64]Alert{}
	for _, a := range all {
		if open[a.Table] == nil {
			open[a.Table] = map[int64]Alert{}
		}
		addFloorAlert(open[a.Table], a)
	}
	holds := v.readHolds(ctx, lines)
	for _, l := range lines {
		v.update(l.table, func(r *tableRaw) {
			r.line = l
			r.floor = open[l.table]
			if r.floor == nil {
				r.floor = map[int64]Alert{}
			}
			if h, ok := holds[l.table]; ok {
				r.hold, r.holdMax = &h, l.max
			}
		})
	}
	return nil
}

// readHolds reads the suspension of each suspended table whose witnessed
// rows moved since it was last read.
func (v *View) readHolds(ctx context.Context, lines []viewLine) map[string]suspensionRows {
	sr, ok := v.store.(suspensionReader)
	if !ok {
		return nil
	}
	var due []string
	v.mu.Lock()
	for _, l := range lines {
		if r := v.tables[l.table]; r != nil && r.status != nil && r.status.Suspended && (r.hold == nil || r.holdMax != l.max) {
			due = append(due, l.table)
		}
	}
	v.mu.Unlock()
	out := map[string]suspensionRows{}
	for _, table := range due {
		h, err := sr.lastSuspension(ctx, table)
		if err != nil {
			v.log.Warn("floor view: a table's suspension", "table", table, "err", err)
			continue
		}
		out[table] = h
	}
	return out
}

// Snapshot is every table, by id.
func (v *View) Snapshot() []TableView {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]TableView, 0, len(v.tables))
	for id, r := range v.tables {
		if r.sent == nil {
			r.view = r.summary(id, v.reg.Tables[id].PitView)
		}
		out = append(out, r.view)
	}
	slices.SortFunc(out, func(a, b TableView) int { return cmp.Compare(a.Table, b.Table) })
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
		tables := v.Snapshot()
		v.mu.Lock()
		fa := v.floorAlerts()
		v.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"tables": tables, "floor": fa})
	case "/floor/events":
		v.serveEvents(w, r)
	default:
		http.NotFound(w, r)
	}
}

// maxFollowers bounds the pages following the floor at once.
const maxFollowers = 64

func (v *View) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	f := &follower{dirty: map[string]bool{}, wake: make(chan struct{}, 1)}
	v.mu.Lock()
	if len(v.subs) >= maxFollowers {
		v.mu.Unlock()
		http.Error(w, "too many pages follow the floor", http.StatusServiceUnavailable)
		return
	}
	v.subs[f] = true
	v.mu.Unlock()
	defer func() {
		v.mu.Lock()
		delete(v.subs, f)
		v.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	tables := v.Snapshot()
	v.mu.Lock()
	fa := v.floorAlerts()
	v.mu.Unlock()
	snap, _ := json.Marshal(map[string]any{"tables": tables, "floor": fa})
	fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", snap)
	fl.Flush()
	ping := v.clk.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-f.wake:
			floor, tables := v.changed(f)
			if floor != nil {
				fmt.Fprintf(w, "event: floor\ndata: %s\n\n", floor)
			}
			for _, b := range tables {
				fmt.Fprintf(w, "event: table\ndata: %s\n\n", b)
			}
			fl.Flush()
		case <-ping.C():
			fmt.Fprint(w, ": ping\n\n")
			fl.Flush()
		}
	}
}

// changed is the floor's own alerts if they changed, and the entry of
// every table changed, since f last wrote.
func (v *View) changed(f *follower) (floor []byte, tables [][]byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	tables = make([][]byte, 0, len(f.dirty))
	for id := range f.dirty {
		if id == "" {
			floor, _ = json.Marshal(map[string]any{"floor": v.floorAlerts()})
		} else if r := v.tables[id]; r != nil && r.entry != nil {
			tables = append(tables, r.entry)
		}
	}
	clear(f.dirty)
	return floor, tables
}
