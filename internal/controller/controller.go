package controller

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/mqttconn"
	"github.com/tablectl/tablectl/base/netlimit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/display/mqttpub"
	"github.com/tablectl/tablectl/internal/buildinfo"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/metrics"
	"github.com/tablectl/tablectl/internal/mqttbroker"
	"github.com/tablectl/tablectl/internal/pkcs11signer"
	"github.com/tablectl/tablectl/internal/smallfile"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/signedcmd"
)

// Controller wires one table: the shoe's port, its protocol reader, the
// recorder that owns the table and the trail, the HTTP endpoints and the
// metrics, and MQTT: the broker (embedded or not), the publisher and the
// signed commands.
type Controller struct {
	cfg config.Config
	// limits are the profile's stake limits, for the table display.
	limits coup.Limits
	log    *slog.Logger
	rec    *audit.Recorder
	link   *device.Link
	// handler is the HTTP endpoints, served on ln when http.listen is set.
	handler http.Handler
	http    *http.Server
	ln      net.Listener
	// budget is the descriptors the clients of every listener share:
	// the open-file limit less what is open at start and a reserve for the
	// trail (netlimit.ClientBudget).
	budget *netlimit.Budget
	// listeners are the held listeners (HTTP, the embedded broker's), for
	// the metrics.
	listeners []*netlimit.Listener
	metrics   *metrics.Metrics

	// readerMu serialises the reader: the link's goroutine decodes, a
	// scrape reads its counters.
	readerMu  sync.Mutex
	reader    *shoeread.Reader
	clock     clock.Clock
	downSince time.Time // the last input recorded before this start
	// backlogMu guards what OnData, OnState and the backlog's timer share.
	backlogMu   sync.Mutex
	rejects     *shoeread.RejectLog
	backlog     *shoeread.Backlog // the shoe's buffer after a start, nil before the port opens
	pendingLink *coup.Input       // the link's coming up, held until the backlog is read
	stopped     <-chan struct{}   // Start's context is done

	broker *mqttbroker.Broker // the embedded broker, nil with one configured
	// pitBroker is the pit's login on the embedded broker (from
	// http.pit_broker_user and its password file, or made at start): the
	// pit view's page gets it behind the pit's HTTP credentials.
	pitBroker display.WebLogin
	conn      *mqttconn.Conn
	pub       *mqttpub.Publisher
	// sealed wakes the retention part when a segment is sealed; nil for a
	// trail in one file.
	sealed   chan struct{}
	commands *signedcmd.Handler
	keys     *signedcmd.Keyring // the supervisors' keys, reloaded when mqtt.keyring changes
	// keyringAuthorities are the public keys a keyring must be signed with
	// (mqtt.keyring_authority); keyWatch reloads the keyring file
	// (keyring.go), and keyringAgain wakes it to record the keys in force
	// again at the head of each new segment and after each snapshot.
	keyringAuthorities []ed25519.PublicKey
	keyWatch           *signedcmd.KeyringWatch
	keyringAgain       chan struct{}
	// retainedClears counts the clears of retained commands sent and not
	// yet come back on cmd (each comes back as an empty message).
	retainedClears atomic.Int64

	webPitPassword string // the demo's generated pit password

	// closeKey releases the checkpoint key (a token's session) once the
	// trail is closed.
	closeKey func() error

	// checker is program self-authentication (selfcheck.go).
	checker *selfChecker
	// dealers is the figures per dealer for the pit view (dealerstats.go),
	// nil until read from the trail.
	dealers atomic.Pointer[dealerStats]
}

// Hooks let callers (the demo, tests, MQTT) see commits.
type Hooks struct {
	OnCommit       func(audit.Commit)
	OnWriteFailure func(error, coup.View)
	// Clock is every part's clock: the shoe link's timers, the trail's
	// stamps, the table's deadlines, command issue times and summaries;
	// nil is the wall clock.
	Clock clock.Clock
	// WebPitPassword is the pit view's password when it comes from the
	// caller (the demo makes one) rather than http.pit_password_file.
	WebPitPassword string
	// TrailFreeBetweenCommits is audit.RecorderOptions.NoPrepare: for
	// tests that write the live trail as an insider between two commits.
	TrailFreeBetweenCommits bool
}

// RunFile is `tablectl run`: it loads the config file at path, puts o over
// its mqtt section, starts the table and runs it until ctx is done.
func RunFile(ctx context.Context, path string, o config.MQTTOverride, log *slog.Logger) error {
	c, tc, err := config.Load(path)
	if err != nil {
		return err
	}
	if err := c.OverrideMQTT(o); err != nil {
		return err
	}
	log = log.With("table", c.TableID)
	if c.MQTT == nil {
		log.Warn("MQTT is off (mqtt.disabled): nothing is published and no command is taken")
	}
	ctl, err := Start(ctx, c, tc, log, Hooks{})
	if err != nil {
		return err
	}
	log.Info("controller running", "version", buildinfo.Get().Short(), "shoe_port", c.Shoe.Port.Path, "driver", c.Shoe.Driver, "trail", c.Audit.Trail(), "http", c.HTTP.Listen,
		"mqtt", ctl.BrokerURL(), "topics", ctl.TopicPrefix())
	return ctl.Run(ctx)
}

// Start verifies the trail and rebuilds the table from it, and
// only then opens the shoe's port.
func Start(ctx context.Context, c config.Config, tc coup.TableConfig, log *slog.Logger, hooks Hooks) (*Controller, error) {
	var key audit.Signer
	closeKey := func() error { return nil }
	if c.Audit.CheckpointKey != "" {
		k, closeK, err := pkcs11signer.Load(c.Audit.CheckpointKey)
		if err != nil {
			return nil, fmt.Errorf("audit.checkpoint_key: %w", err)
		}
		key, closeKey = k, closeK
		logCheckpointKey(log, k)
	}
	if c.Audit.CheckpointEvery != 0 {
		log.Warn("audit.checkpoint_every is no longer used: every commit carries a signed checkpoint of its head", "checkpoint_every", c.Audit.CheckpointEvery)
	}
	m := metrics.New()
	ctl := &Controller{limits: tc.Profile.Limits, cfg: c, log: log, metrics: m, webPitPassword: hooks.WebPitPassword, closeKey: closeKey, checker: newSelfChecker(c),
		keyringAgain: make(chan struct{}, 1)}
	ctl.budget = clientBudget(log)
	// The publisher is made once the trail is open; nothing is committed
	// before then.
	var pub *mqttpub.Publisher
	onCommit := func(cm audit.Commit) {
		// The publisher first: it runs on a goroutine of its own, and
		// the logs, metrics and dealer figures after it are the reader's
		// time (tens of microseconds), not the display's. The hook last,
		// so a test that hears of a commit finds it in the figures.
		if pub != nil {
			pub.Commit(cm)
		}
		for _, r := range cm.Records {
			log.Debug("recorded", "seq", r.Seq, "kind", r.Kind, "shoe", r.Shoe, "coup", r.Coup)
			if r.Kind == audit.KindSnapshot {
				ctl.keyringInForce() // the next segment's head is its snapshot
			}
		}
		logEvents(log, cm)
		m.Commit(cm)
		if d := ctl.dealers.Load(); d != nil {
			d.commit(cm)
		}
		if hooks.OnCommit != nil {
			hooks.OnCommit(cm)
		}
	}
	onFail := func(err error, v coup.View) {
		log.Error("table suspended: the audit trail cannot be written", "err", err)
		m.WriteFailure(err)
		if pub != nil {
			pub.WriteFailure(err, v)
		}
		if hooks.OnWriteFailure != nil {
			hooks.OnWriteFailure(err, v)
		}
	}
	segs, err := c.Audit.Segments()
	if err != nil {
		closeKey()
		return nil, err
	}
	if segs != nil {
		ctl.sealed = make(chan struct{}, 1)
		segs.OnSealed = func(string) {
			select { // the retention part archives it
			case ctl.sealed <- struct{}{}:
			default:
			}
		}
	}
	rec, err := audit.OpenRecorder(ctx, c.Audit.Trail(), audit.RecorderOptions{
		Table: c.TableID, Config: tc, Clock: hooks.Clock, Key: key, CheckpointEvery: 1, SnapshotEvery: c.Audit.SnapshotEvery,
		Logger: log, OnCommit: onCommit, OnWriteFailure: onFail, ObserveCommit: m.ObserveCommit,
		Version: buildinfo.Get().Short(), Segments: segs, MoveFrom: moveFrom(c.Audit), NoPrepare: hooks.TrailFreeBetweenCommits,
	})
	if err != nil {
		closeKey()
		return nil, err
	}
	ctl.rec = rec
	fail := func(err error) (*Controller, error) {
		ctl.closeMQTT()
		rec.Close()
		closeKey()
		return nil, err
	}
	// The figures' history is read once the parts run (Run); rows
	// committed from now on are the figures' too.
	ctl.dealers.Store(newDealerStats(rec.Store().Head().Seq))
	if c.MQTT != nil {
		if pub, err = ctl.startMQTT(ctx, tc, hooks.Clock); err != nil {
			return fail(err)
		}
	}
	drv, err := shoeread.New(c.Shoe.Driver)
	if err != nil {
		return fail(err)
	}
	ctl.reader = shoeread.NewReader(drv)
	ctl.clock, ctl.rejects, ctl.downSince, ctl.stopped = clock.Or(hooks.Clock), shoeread.NewRejectLog(), rec.LastInputAt(), ctx.Done()
	// No play until the start-up self-check is recorded: a failure
	// suspends the table before the shoe's port is opened.
	ctl.selfCheck(true)
	// Sentences the shoe sent while the controller was down show as a gap.
	if last := rec.LastShoeSeq(); last > 0 {
		ctl.reader.Sequencer().Resume(last)
	}
	ctl.link, err = device.NewLink(c.Shoe.Port, device.Options{
		OnData: ctl.onData, OnState: ctl.onState, Logger: log, Clock: hooks.Clock,
	})
	if err != nil {
		return fail(err)
	}
	held, err := ctl.listenHTTP()
	if err != nil {
		return fail(err)
	}
	if err := ctl.watch(); err != nil {
		if held != nil {
			held.Close()
		}
		return fail(err)
	}
	if err := ctl.serveHTTP(held); err != nil {
		return fail(err)
	}
	return ctl, nil
}

// listenHTTP listens on http.listen (nil without it), held to its caps and
// the descriptor budget. It comes before the metrics are watched: its
// counts are theirs.
func (ctl *Controller) listenHTTP() (*netlimit.Listener, error) {
	h := &ctl.cfg.HTTP
	if h.Listen == "" {
		return nil, nil
	}
	// A config made in code (the demo, tests) has not been through
	// ParseConfig: its caps get their defaults here.
	if err := config.ConnectionCaps("http", &h.MaxConnections, &h.MaxConnectionsPerClient,
		config.DefaultHTTPMaxConnections, config.DefaultHTTPMaxConnectionsPerClient); err != nil {
		return nil, err
	}
	held, err := netlimit.Listen(h.Listen, "http", netlimit.Limits{Total: h.MaxConnections,
		PerClient: h.MaxConnectionsPerClient, Budget: ctl.budget}, ctl.log.With("part", "http"))
	if err != nil {
		return nil, fmt.Errorf("http.listen %s: %w", h.Listen, err)
	}
	ctl.listeners = append(ctl.listeners, held)
	return held, nil
}

// serveHTTP makes the HTTP server of the endpoints on held (TLS with
// http.cert_file), and lets the web display's own pages open the embedded
// broker's WebSocket. Nothing without a listener.
func (ctl *Controller) serveHTTP(held *netlimit.Listener) error {
	if held == nil {
		return nil
	}
	var ln net.Listener = held
	origins := webOrigins(ln.Addr())
	if ctl.cfg.HTTP.CertFile != "" {
		cert, err := config.LoadHTTPCert(ctl.cfg.HTTP)
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		for i, o := range origins {
			origins[i] = "https://" + strings.TrimPrefix(o, "http://")
		}
	}
	ctl.ln = ln
	// Idle and slow clients are closed (netlimit's timeouts), so none
	// holds a connection, or a descriptor, for long.
	ctl.http = netlimit.Server(ctl.handler)
	if ctl.broker != nil {
		return ctl.broker.AllowOrigins(origins...)
	}
	return nil
}

// clientBudget raises the soft limit on open files to the hard one and
// makes the descriptor budget the listeners' clients share: what the limit
// leaves once the files open now (the trail's segments among them) and
// netlimit.Reserve are set aside, so that no flood of clients takes the
// descriptors the trail's next segment needs.
func clientBudget(log *slog.Logger) *netlimit.Budget {
	limit, err := netlimit.RaiseFileLimit()
	if err != nil {
		log.Warn("the open-file limit is unknown: no descriptor budget for clients", "err", err)
		return nil
	}
	open, err := netlimit.OpenFiles()
	if err != nil {
		log.Warn("open files not counted: no descriptor budget for clients", "err", err)
		return nil
	}
	n, short := netlimit.ClientBudget(limit, open)
	if short {
		log.Warn("the open-file limit is too low to keep the trail's reserve: raise LimitNOFILE", "limit", limit, "open", open,
			"reserve", netlimit.Reserve, "client_budget", n)
	} else {
		log.Info("open-file limit", "limit", limit, "open", open, "reserve", netlimit.Reserve, "client_budget", n)
	}
	return netlimit.NewBudget(n)
}

// watch hands the running parts to the metrics and makes the HTTP
// endpoints, /health and /metrics among them.
func (ctl *Controller) watch() error {
	src := metrics.Sources{Link: ctl.link, Sequence: ctl.sequenceStats, Table: ctl.rec}
	ep := display.Endpoints{ShoeLink: ctl.shoeLinkState, Metrics: ctl.metrics.Handler(), SelfCheck: ctl.checker.state, Version: buildinfo.Get().Short()}
	if ctl.conn != nil {
		src.Broker, src.Backlog = ctl.conn, ctl.pub
		ep.Broker = ctl.brokerState
	}
	for _, l := range ctl.listeners {
		src.Listeners = append(src.Listeners, l)
	}
	if err := ctl.metrics.Watch(src); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	ctl.handler = display.NewHandler(ctl.rec, ep)
	return ctl.mountWeb()
}

// mountWeb serves the web display in front of the endpoints when the table
// publishes over MQTT and a browser can reach the broker's WebSocket.
func (ctl *Controller) mountWeb() error {
	h := ctl.cfg.HTTP
	if ctl.cfg.MQTT == nil {
		return nil
	}
	ws := h.BrowserWS
	if ws == "" && ctl.broker != nil {
		ws = ctl.broker.WSURL()
	}
	if ws == "" {
		ctl.log.Warn("web display off: set http.browser_ws to the broker's WebSocket URL as browsers reach it")
		return nil
	}
	secret := func(flag, path string) (string, error) {
		if path == "" {
			return "", nil
		}
		s, err := smallfile.Secret(path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", flag, err)
		}
		return s, nil
	}
	wc := display.WebConfig{Table: ctl.cfg.TableID, BrokerWS: ws, Prefix: ctl.cfg.MQTT.Prefix, Recall: ctl.rec, DealerStats: ctl.dealers.Load().report, Limits: &ctl.limits,
		Language: h.DisplayLanguage,
		Public:   display.WebLogin{Username: h.DisplayUser}, Pit: display.WebLogin{Username: h.PitBrokerUser}, PitUser: h.PitUser}
	var err error
	if wc.Public.Password, err = secret("http.display_password_file", h.DisplayPasswordFile); err != nil {
		return err
	}
	if wc.Pit.Password, err = secret("http.pit_broker_password_file", h.PitBrokerPasswordFile); err != nil {
		return err
	}
	if ctl.broker != nil {
		wc.Pit = ctl.pitBroker
	}
	if wc.PitPassword, err = secret("http.pit_password_file", h.PitPasswordFile); err != nil {
		return err
	}
	if ctl.webPitPassword != "" {
		wc.PitPassword = ctl.webPitPassword
	}
	web, err := display.WebHandler(wc, ctl.handler)
	if err != nil {
		return fmt.Errorf("web display: %w", err)
	}
	ctl.handler = web
	return nil
}

// sequenceStats reads the reader's sequence counters for a scrape.
func (ctl *Controller) sequenceStats() shoeread.SequenceStats {
	ctl.readerMu.Lock()
	defer ctl.readerMu.Unlock()
	return ctl.reader.Sequencer().Stats()
}

// shoeLinkState names the shoe link's state for /health.
func (ctl *Controller) shoeLinkState() string {
	if s := ctl.link.Status().State; s != 0 {
		return s.String()
	}
	return "starting" // the port not yet tried
}

// brokerState names the broker connection's state for /health.
func (ctl *Controller) brokerState() string {
	if up, _ := ctl.conn.Connection(); up {
		return "connected"
	}
	return "disconnected"
}

// submit records one input; failures are already reported by the recorder.
func (ctl *Controller) submit(in coup.Input) {
	if _, err := ctl.rec.Submit(context.Background(), in); err != nil {
		ctl.log.Warn("input not recorded", "input", in.String(), "err", err)
	}
}

func (ctl *Controller) onData(p []byte) {
	ctl.backlogMu.Lock()
	defer ctl.backlogMu.Unlock()
	now := ctl.clock.Now()
	ctl.readerMu.Lock()
	evs := ctl.reader.Decode(p)
	ctl.readerMu.Unlock()
	ctl.metrics.ShoeEvents(evs)
	var times []time.Time
	var ended bool
	if ctl.backlog != nil {
		times, ended = ctl.backlog.Stamp(evs, now)
	}
	var ins []coup.Input
	for i, ev := range evs {
		var in coup.Input
		var ok bool
		if ev.Kind == shoeread.KindProtocolError && !errors.Is(ev.Err, shoeread.ErrSeqBackwards) {
			ctl.log.Warn("shoe protocol error", "reason", shoeread.Reason(ev.Err), "err", ev.Err, "rejected_bytes", ev.Rejected, "raw", ev.Raw)
			in, ok = ctl.rejects.Take(ev, now)
		} else {
			in, ok = ev.Input(time.Time{})
		}
		if ok {
			if times != nil {
				in.At = times[i]
			}
			ins = append(ins, in)
		}
	}
	if sum, ok := ctl.rejects.Summary(now, false); ok {
		if n := len(ins); n > 0 {
			sum.At = ins[n-1].At
		}
		ins = append(ins, sum)
	}
	// The link's coming up goes in once the backlog is read: before this
	// read if it was read live, after it if it was the backlog's last.
	if ended && times == nil {
		ctl.flushLink()
	}
	// Everything one read of the port brought is committed together: one
	// fsync for a burst of sentences (group commit), none applied unless all
	// are recorded.
	if _, err := ctl.rec.SubmitBatch(context.Background(), ins); err != nil {
		ctl.log.Warn("shoe inputs not recorded", "inputs", len(ins), "err", err)
	}
	if ended {
		ctl.flushLink()
		ctl.recordOutage(now)
	}
}

// summariseRejects records the count of rejections beyond the verbatim
// budget once a second, and what is left on the way out (the trail is
// still open: run closes it after its parts stop).
func (ctl *Controller) summariseRejects(ctx context.Context) {
	t := ctl.clock.NewTicker(time.Second)
	defer t.Stop()
	flush := func(force bool) {
		ctl.backlogMu.Lock()
		defer ctl.backlogMu.Unlock()
		if sum, ok := ctl.rejects.Summary(ctl.clock.Now(), force); ok {
			ctl.submit(sum)
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush(true)
			return
		case <-t.C():
			flush(false)
		}
	}
}

// flushLink records the link's coming up held during the backlog.
func (ctl *Controller) flushLink() {
	if in := ctl.pendingLink; in != nil {
		ctl.pendingLink = nil
		ctl.submit(*in)
	}
}

// backlogIdle ends a backlog that never came: the port opened and the shoe
// had nothing buffered (or says nothing at all).
func (ctl *Controller) backlogIdle() {
	ctl.backlogMu.Lock()
	defer ctl.backlogMu.Unlock()
	if ctl.pendingLink == nil {
		return
	}
	ctl.backlog.End()
	ctl.flushLink()
	ctl.recordOutage(ctl.clock.Now())
}

// recordOutage records, once the shoe's buffer is read after a start, how
// long the controller was not reading and how many sentences came late.
func (ctl *Controller) recordOutage(now time.Time) {
	late := ctl.backlog.Late()
	body := map[string]any{"late_sentences": late, "down_since": ctl.downSince.UTC(), "caught_up": now.Round(0).UTC()}
	if _, err := ctl.rec.Record(context.Background(), audit.Event{Kind: KindControllerOutage, Body: body}); err != nil {
		ctl.log.Warn("controller outage not recorded", "err", err)
		return
	}
	ctl.log.Warn("controller outage: the shoe's buffered sentences were judged at the time the shoe sent them",
		"late_sentences", late, "down_since", ctl.downSince)
}

// KindControllerOutage is the row that says, once the shoe's buffer has
// been read after a start, how many sentences came in late.
const KindControllerOutage = "ctl.controller_outage"

func (ctl *Controller) onState(s device.Status) {
	in := coup.Input{Kind: coup.InLink}
	switch s.State {
	case device.Connected:
		in.Link = coup.LinkConnected
	case device.Silent:
		in.Link = coup.LinkSilent
	default:
		in.Link = coup.LinkDisconnected
	}
	if s.Err != nil {
		in.Reason = s.Err.Error()
	}
	// Stopping is not the shoe going away.
	if errors.Is(s.Err, device.ErrStopped) {
		return
	}
	ctl.log.Info("shoe link", "state", s.State, "port", s.Port, "err", s.Err)
	ctl.backlogMu.Lock()
	defer ctl.backlogMu.Unlock()
	if s.State == device.Connected && ctl.backlog == nil {
		// What the shoe sent while no controller read it is in the port's
		// buffer now: it is judged at the times the shoe sent it, and the
		// link's coming up, now, goes in after it.
		ctl.backlog = shoeread.NewBacklog(ctl.downSince, ctl.clock.Now())
		if !ctl.backlog.Done() {
			ctl.pendingLink = &in
			t := ctl.clock.NewTimer(2 * shoeread.BacklogDrained)
			go func() {
				defer t.Stop()
				select {
				case <-t.C():
					ctl.backlogIdle()
				case <-ctl.stopped:
				}
			}()
			return
		}
	}
	ctl.submit(in)
}

// shutdownGrace is how long run waits for its parts to stop once its
// context is done. Each part stops on cancellation in well under a second;
// one that does not is a bug, and the trail is crash-safe, so run gives up
// on a clean close rather than hang a supervisor's restart.
const shutdownGrace = 10 * time.Second

// Run runs the shoe link, the table's timers and the HTTP endpoints until
// ctx is done, then signs a last checkpoint and closes the trail.
func (ctl *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var parts runningParts
	parts.start("shoe link", func() { ctl.link.Run(ctx) })
	parts.start("table timers", func() { ctl.rec.RunTimers(ctx) })
	parts.start("rejection summaries", func() { ctl.summariseRejects(ctx) })
	parts.start("self-checks", func() { ctl.runSelfChecks(ctx) })
	parts.start("disk watch", func() { ctl.watchDisk(ctx) })
	parts.start("dealer figures", func() { ctl.loadDealerStats(ctx) })
	if ctl.sealed != nil {
		parts.start("segment retention", func() { ctl.retainSegments(ctx) })
	}
	if ctl.pub != nil {
		parts.start("mqtt publisher", func() {
			if err := ctl.pub.Run(ctx); err != nil {
				ctl.log.Error("mqtt publisher stopped", "err", err)
			}
		})
		parts.start("command taker", func() { ctl.takeCommands(ctx) })
		if ctl.keyWatch != nil {
			// A keyring the officer signed takes effect without a restart.
			parts.start("keyring watch", func() { ctl.watchKeyring(ctx) })
		}
	}
	if ctl.http != nil {
		parts.start("http", func() {
			if err := ctl.http.Serve(ctl.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ctl.log.Error("http", "err", err)
			}
		})
		go func() {
			<-ctx.Done()
			sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
			defer c()
			ctl.http.Shutdown(sctx)
		}()
	}
	<-ctx.Done()
	if stuck := parts.wait(shutdownGrace); len(stuck) > 0 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		ctl.log.Error("parts of the controller did not stop; leaving without closing the trail (it is crash-safe)",
			"parts", stuck, "grace", shutdownGrace, "goroutines", string(buf))
		return fmt.Errorf("stop: %s did not stop within %s", strings.Join(stuck, ", "), shutdownGrace)
	}
	ctl.closeMQTT()
	err := ctl.rec.Close()
	// The key after the trail: closing the trail signs the last checkpoint.
	if kerr := ctl.closeKey(); kerr != nil {
		ctl.log.Warn("closing the checkpoint key", "err", kerr)
	}
	return err
}

// logCheckpointKey says which key signs checkpoints and, for one in a
// token, warns if the token would let it out.
func logCheckpointKey(log *slog.Logger, k audit.Signer) {
	id := audit.KeyID(audit.SignerPublic(k))
	s, ok := k.(*pkcs11signer.Signer)
	if !ok {
		log.Info("checkpoint key from a PEM file", "key_id", id)
		return
	}
	info := s.Info()
	log.Info("checkpoint key in a PKCS#11 token", "key_id", id, "token", info.Token, "object", info.Object)
	if info.Exportable() {
		log.Warn("the checkpoint key can leave its token (CKA_SENSITIVE false or CKA_EXTRACTABLE true): make a non-exportable one (docs/audit.md)",
			"key_id", id, "sensitive", info.Sensitive, "extractable", info.Extractable)
	}
}

// runningParts are the goroutines run starts, by name, so that a stop
// that hangs says which part hangs.
type runningParts struct {
	mu      sync.Mutex
	running map[string]bool
	wg      sync.WaitGroup
}

func (p *runningParts) start(name string, f func()) {
	p.mu.Lock()
	if p.running == nil {
		p.running = make(map[string]bool)
	}
	p.running[name] = true
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			delete(p.running, name)
			p.mu.Unlock()
		}()
		f()
	}()
}

// wait waits up to grace for every part to return and names those that
// did not, sorted.
func (p *runningParts) wait(grace time.Duration) []string {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.running))
}

// Flag names that choose the embedded broker's addresses, for errors.
const (
	flagMQTTListen   = "--mqtt-listen (mqtt.listen in the config file)"
	flagMQTTWSListen = "--mqtt-ws-listen (mqtt.ws_listen in the config file)"
)

// startMQTT starts the embedded broker when none is configured, connects,
// and makes the publisher and the command handler. The recorder is open.
func (ctl *Controller) startMQTT(ctx context.Context, tc coup.TableConfig, clk clock.Clock) (*mqttpub.Publisher, error) {
	m := ctl.cfg.MQTT
	log := ctl.log.With("part", "mqtt")
	topics := mqttpub.Topics{Prefix: m.Prefix}
	url, user, pass := m.Broker, m.Username, ""
	if m.PasswordFile != "" {
		var err error
		if pass, err = smallfile.Secret(m.PasswordFile); err != nil {
			return nil, fmt.Errorf("mqtt.password_file: %w", err)
		}
	}
	keys, err := ctl.openKeyring(ctx)
	if err != nil {
		return nil, err
	}
	if keys.Len() == 0 {
		log.Warn("no supervisor keys (mqtt.keyring): every command will be refused")
	}
	ver, err := signedcmd.NewVerifier(signedcmd.VerifierOptions{Table: ctl.cfg.TableID, Keys: keys,
		Window: time.Duration(m.CommandWindow), Clock: clk})
	if err != nil {
		return nil, err
	}
	if n, err := ver.Restore(ctx, ctl.rec.Store()); err != nil {
		return nil, fmt.Errorf("read recent command ids from the trail: %w", err)
	} else if n > 0 {
		log.Info("command ids remembered from the trail", "ids", n)
	}
	screen, err := signedcmd.NewScreen(ctl.cfg.TableID, keys)
	if err != nil {
		return nil, err
	}
	ctl.keys = keys
	if m.Keyring != "" {
		ctl.keyWatch = ctl.newKeyringWatch(keys)
	}
	// The handler exists before the broker and the connection, which
	// count and screen commands from the first message on; its Replier,
	// the publisher, comes after.
	ctl.commands = &signedcmd.Handler{Verifier: ver, Recorder: ctl.rec, Clock: clk, Logger: log,
		Observe: func(o signedcmd.Outcome) {
			ctl.metrics.Command(o.Result, o.Code, o.Summarised)
			if o.Screened {
				ctl.metrics.CommandScreened(o.Code)
			}
		}}
	if url == "" {
		// The embedded broker: only the controller, with a password made
		// now, writes anything but commands.
		user, pass = "tablectl", newSecret()
		ws := m.WSListen
		if ws == "off" {
			ws = ""
		}
		access, err := ctl.embeddedAccess(topics)
		if err != nil {
			return nil, err
		}
		if err := config.ConnectionCaps("mqtt", &m.MaxConnections, &m.MaxConnectionsPerClient,
			config.DefaultMQTTMaxConnections, config.DefaultMQTTMaxConnectionsPerClient); err != nil {
			return nil, err
		}
		b, err := mqttbroker.Start(mqttbroker.Options{TCP: m.Listen, WS: ws, TCPFlag: flagMQTTListen, WSFlag: flagMQTTWSListen,
			Writer: user, WriterPassword: pass, WriterClientID: m.ClientID, Logins: access.logins, Anonymous: access.public,
			WSOrigins: m.WSOrigins, Logger: log, ClientLimit: clientLimit(m), Clock: clk,
			OnLimited: func(_, _ string, size int) { ctl.commands.Lost(signedcmd.CodeRateLimited, size) },
			Limits:    netlimit.Limits{Total: m.MaxConnections, PerClient: m.MaxConnectionsPerClient, Budget: ctl.budget},
			// A command left retained on cmd would be delivered again to
			// every later subscriber: refused, and counted.
			NoRetain:        []string{topics.Topic(mqttpub.TopicCmd)},
			OnRetainRefused: func(_, _ string, size int) { ctl.commands.Lost(signedcmd.CodeRetained, size) }})
		if err != nil {
			return nil, err
		}
		ctl.broker = b
		ctl.listeners = append(ctl.listeners, b.Listeners()...)
		url = b.URL()
		log.Info("embedded MQTT broker listening", "tcp", b.URL(), "ws", b.WSURL())
	}
	var tlsCfg *tls.Config
	if m.CAFile != "" || m.CertFile != "" || strings.HasPrefix(url, "ssl://") || strings.HasPrefix(url, "tls://") ||
		strings.HasPrefix(url, "mqtts://") || strings.HasPrefix(url, "wss://") {
		t, err := mqttconn.TLSConfig(m.CAFile, m.CertFile, m.KeyFile)
		if err != nil {
			return nil, err
		}
		tlsCfg = t
	}
	conn, err := mqttconn.Dial(mqttconn.ConnOptions{
		Broker: url, ClientID: m.ClientID, Username: user, Password: pass, TLS: tlsCfg,
		WillTopic: topics.Topic(mqttpub.TopicStatus), WillPayload: mqttpub.Offline(ctl.cfg.TableID),
		Subscribe: []string{topics.Topic(mqttpub.TopicCmd)}, MaxPayload: signedcmd.MaxBytes, Logger: log,
		Sort:          sortCommand(ctl.commands, screen, &ctl.retainedClears),
		PriorityInbox: commandInbox, Inbox: refusalInbox,
		Lost:     func(_ mqttconn.Lane, size int) { ctl.commands.Lost(signedcmd.CodeQueueFull, size) },
		Retained: ctl.retainedCommand,
	})
	if err != nil {
		return nil, err
	}
	ctl.conn = conn

	pub, err := mqttpub.New(mqttpub.Options{
		Table: ctl.cfg.TableID, Topics: topics, Client: conn, Trail: ctl.rec.Store(), Config: tc,
		From: ctl.rec.Start().First, Driver: ctl.cfg.Shoe.Driver, Queue: m.Queue, Clock: clk,
		Logger:         log,
		ObservePublish: ctl.metrics.ObservePublish,
	})
	if err != nil {
		return nil, err
	}
	ctl.pub = pub
	ctl.commands.Replier = pub
	return pub, nil
}

// clientLimit is the embedded broker's limit on each client's commands
// (none when the burst is negative).
func clientLimit(m *config.MQTTSection) mqttbroker.Rate {
	if m.ClientCommandBurst < 0 {
		return mqttbroker.Rate{}
	}
	return mqttbroker.Rate{Burst: m.ClientCommandBurst, Every: time.Duration(m.ClientCommandEvery)}
}

// sortCommand is the connection's Sort for cmd: the screen's first look,
// in paho's handler. A command that may be a known supervisor's for this
// table waits in the priority lane; one the screen refuses is dropped,
// counted in the refusal summary, unless the refusal limit still grants it
// a row and a reply of its own: then it waits in the inbox, holding the
// token (takeCommands).
func sortCommand(h *signedcmd.Handler, screen *signedcmd.Screen, clears *atomic.Int64) func(string, []byte) mqttconn.Lane {
	return func(_ string, payload []byte) mqttconn.Lane {
		if len(payload) == 0 && takeOne(clears) {
			return mqttconn.LaneNone // the controller's own clear of a retained command, come back
		}
		code := screen.Check(payload, len(payload))
		switch {
		case code == "":
			return mqttconn.LanePriority
		case h.Screened(code, len(payload)):
			return mqttconn.LaneInbox
		}
		return mqttconn.LaneNone
	}
}

// retainedCommand is the connection's Retained for cmd: a command the
// broker kept (a client published it retained) and now delivers again. It
// is not a command sent now: it is dropped (counted as CodeRetained in the
// refusal summary) and cleared at the broker with an empty retained
// message, so no later subscriber gets it. The embedded broker refuses a
// retained command outright; Mosquitto cannot (its ACL does not govern the
// retain flag), so this is how the shipped setup neutralises one. Called
// in paho's handler: it never blocks.
func (ctl *Controller) retainedCommand(topic string, size int) {
	ctl.commands.Lost(signedcmd.CodeRetained, size)
	if size == 0 {
		return // a clear, delivered as retained by a broker that keeps none
	}
	ctl.log.Warn("a command left retained on cmd by a client: ignored, and cleared at the broker", "topic", topic, "bytes", size)
	ctl.retainedClears.Add(1)
	go func() {
		tok := ctl.conn.Publish(topic, 1, true, nil)
		select {
		case <-tok.Done():
			if err := tok.Error(); err != nil {
				ctl.log.Warn("clearing the retained command at the broker", "topic", topic, "err", err)
			}
		case <-time.After(10 * time.Second):
			ctl.log.Warn("clearing the retained command at the broker: no acknowledgement", "topic", topic)
		}
	}()
}

// takeOne takes one from n if it holds any, and reports whether it did.
func takeOne(n *atomic.Int64) bool {
	for {
		v := n.Load()
		if v <= 0 {
			return false
		}
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
}

// newSecret is a fresh random password.
func newSecret() string {
	var secret [16]byte
	rand.Read(secret[:])
	return hex.EncodeToString(secret[:])
}

// embeddedLogins is who may do what on the embedded broker.
type embeddedLogins struct {
	logins []mqttbroker.Login
	public mqttbroker.Access
}

// embeddedAccess is the embedded broker's access, as deploy/mosquitto/acl
// grants it on Mosquitto: a client without a login (a public display)
// reads status and public/#, where no card shows before its reveal; the
// pit login reads everything and sends commands; the display login, if
// configured, reads what the public does. The pit login is
// http.pit_broker_user with its password file, or "pit" with a password
// made now that only the pit view's page is given.
func (ctl *Controller) embeddedAccess(topics mqttpub.Topics) (embeddedLogins, error) {
	h := ctl.cfg.HTTP
	public := mqttbroker.Access{Read: PublicTopics(topics)}
	pit := display.WebLogin{Username: h.PitBrokerUser}
	if pit.Username == "" {
		pit.Username = "pit"
	}
	if h.PitBrokerPasswordFile != "" {
		p, err := smallfile.Secret(h.PitBrokerPasswordFile)
		if err != nil {
			return embeddedLogins{}, fmt.Errorf("http.pit_broker_password_file: %w", err)
		}
		pit.Password = p
	} else {
		pit.Password = newSecret()
	}
	ctl.pitBroker = pit
	logins := []mqttbroker.Login{{Username: pit.Username, Password: pit.Password, Access: mqttbroker.Access{
		Read: []string{topics.Prefix + "/#"}, Write: []string{topics.Topic(mqttpub.TopicCmd)}}}}
	if h.DisplayUser != "" && h.DisplayPasswordFile != "" {
		p, err := smallfile.Secret(h.DisplayPasswordFile)
		if err != nil {
			return embeddedLogins{}, fmt.Errorf("http.display_password_file: %w", err)
		}
		logins = append(logins, mqttbroker.Login{Username: h.DisplayUser, Password: p, Access: public})
	}
	return embeddedLogins{logins: logins, public: public}, nil
}

// PublicTopics are the topics a public display reads (docs/mqtt.md): the
// only ones a client without a login may read on the embedded broker. No
// card shows on them before its reveal.
func PublicTopics(topics mqttpub.Topics) []string {
	return []string{topics.Topic(mqttpub.TopicStatus), topics.Prefix + "/public/#"}
}

// webOrigins are the web display's own origins, as a browser on this
// machine names them: the listen address, and for a loopback or
// any-address listener the loopback names too. Other names (a LAN
// address, a reverse proxy) go in mqtt.ws_origins.
func webOrigins(addr net.Addr) []string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := fmt.Sprint(ta.Port)
	var out []string
	if !ta.IP.IsUnspecified() {
		out = append(out, "http://"+net.JoinHostPort(ta.IP.String(), port))
	}
	if ta.IP.IsLoopback() || ta.IP.IsUnspecified() {
		for _, h := range []string{"127.0.0.1", "localhost", "::1"} {
			out = append(out, "http://"+net.JoinHostPort(h, port))
		}
	}
	return slices.Compact(out)
}

// commandInbox is how many commands that passed the screen may wait for
// the handler before more are dropped (and counted): enough to ride out the
// fsyncs of a burst of refusals during a flood without dropping a real
// command, at most 2 MiB of payloads (each is cut at
// signedcmd.MaxBytes+1). Junk the screen refuses never waits here.
const commandInbox = 256

// refusalInbox is how many commands the screen refused may wait for their
// row and reply: only those the refusal limit grants a token come this far
// (a burst of ten, then one a second).
const refusalInbox = 32

// takeCommands hands the commands that arrive on cmd to the handler, one
// at a time and in order, and writes each summary of refusals beyond the
// limit when it falls due, the last on the way out (the trail is still
// open: run closes it after this returns).
func (ctl *Controller) takeCommands(ctx context.Context) {
	defer ctl.commands.Flush(context.WithoutCancel(ctx))
	for {
		// Commands that passed the screen first.
		select {
		case <-ctx.Done():
			return
		case m := <-ctl.conn.Priority():
			ctl.commands.HandleMessage(ctx, signedcmd.Message{Payload: m.Payload, Size: m.Size})
			continue
		default:
		}
		// Nothing known waits: junk's turn, or a summary's.
		select {
		case <-ctx.Done():
			return
		case m := <-ctl.conn.Priority():
			ctl.commands.HandleMessage(ctx, signedcmd.Message{Payload: m.Payload, Size: m.Size})
		case m := <-ctl.conn.Messages():
			// The screen refused it and took a token for its own row.
			ctl.commands.HandleMessage(ctx, signedcmd.Message{Payload: m.Payload, Size: m.Size, Token: true})
		case <-ctl.commands.SummaryTimer():
			ctl.commands.Flush(ctx)
		case <-ctl.commands.Gathered():
			// A summary began in paho's handler: arm its timer.
		}
	}
}

// closeMQTT disconnects and stops the embedded broker, if they run.
func (ctl *Controller) closeMQTT() {
	if ctl.conn != nil {
		ctl.conn.Close(500 * time.Millisecond)
	}
	if ctl.broker != nil {
		ctl.broker.Close()
	}
}

// Recorder is the table's recorder: its trail, its table, its failures.
func (ctl *Controller) Recorder() *audit.Recorder { return ctl.rec }

// Publisher is the MQTT publisher (nil without MQTT).
func (ctl *Controller) Publisher() *mqttpub.Publisher { return ctl.pub }

// Link is the shoe's serial link.
func (ctl *Controller) Link() *device.Link { return ctl.link }

// BrokerURL is where the table publishes ("" without MQTT).
func (ctl *Controller) BrokerURL() string {
	switch {
	case ctl.broker != nil:
		return ctl.broker.URL()
	case ctl.cfg.MQTT != nil:
		return ctl.cfg.MQTT.Broker
	}
	return ""
}

// TopicPrefix is the table's topic prefix ("" without MQTT).
func (ctl *Controller) TopicPrefix() string {
	if ctl.cfg.MQTT == nil {
		return ""
	}
	return ctl.cfg.MQTT.Prefix
}

// moveFrom is the single-file trail to move into the directory of segments
// (audit.path with audit.dir), or "".
func moveFrom(a config.AuditSection) string {
	if a.Dir == "" {
		return ""
	}
	return a.Path
}
