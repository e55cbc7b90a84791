package floor

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/signedcmd"
)

// Defaults of a witness's settings.
const (
	DefaultStream   = "TABLECTL"
	DefaultConsumer = "witness"
	// DefaultStatusStream keeps each table's last status and active
	// alerts (one message a subject), for a floor view started late.
	DefaultStatusStream = "TABLECTL_STATUS"
	// DefaultBatch: a bigger batch is fewer transactions for the same
	// rows (the catch-up bench: 2000 about 15,000 rows/s, 5000 about
	// 16,000 to 19,500, 10000 about 24,000 on this 2-core machine).
	DefaultBatch = 5000
	// DefaultGapGrace is how long rows may be missing below rows witnessed
	// before it is a gap: QoS 1 through a bridge and a cluster reorders
	// little, and a redelivery comes within seconds.
	DefaultGapGrace = 3 * time.Second
	// DefaultResyncEvery is how often a table is asked again to resync a
	// gap it has not filled (the request or its rows may be lost, the
	// table down).
	DefaultResyncEvery = 15 * time.Second
	// DefaultMaxAge is how long the stream keeps a message: the database is
	// the record; the stream need only outlast a witness outage.
	DefaultMaxAge = 7 * 24 * time.Hour
)

// Config is a witness's settings (tablectl-floor witness's flags).
type Config struct {
	// Name names this witness in logs and alerts.
	Name string
	// NATS is the floor broker's URLs, comma-separated.
	NATS        string
	NATSOptions []nats.Option
	// Stream and Consumer name the JetStream stream and the durable
	// consumer every witness shares; Replicas is the stream's (3 on a
	// 3-node cluster; created when the stream is missing).
	Stream, Consumer string
	// Group is the witnesses' group this witness is of (the registry's
	// "group"): it takes only the group's tables' messages, through the
	// group's own consumer (Consumer-Group, filtered to those tables),
	// and judges only them for gaps and silence. Empty: the whole floor.
	Group string
	// StatusStream keeps each table's last status and active alerts
	// (created when missing); the floor view reads it.
	StatusStream string
	Replicas     int
	MaxAge       time.Duration
	Subjects     Subjects
	Store        Store
	Registry     *Registry
	// Key signs the resync requests for gaps as KeyName, a name in every
	// table's keyring allowed to send resync. Without a key, gaps are
	// alerted and not asked for.
	Key     ed25519.PrivateKey
	KeyName string
	// Batch is how many messages are taken and committed at once.
	Batch                 int
	GapGrace, ResyncEvery time.Duration
	Clock                 clock.Clock
	Logger                *slog.Logger
	// OnAlert, if set, is called with each alert this witness stored and
	// published (the floor view, tests).
	OnAlert func(Alert)
	// ShoeKeep is how long the shoe watch keeps each shoe's print
	// (shoewatch.go; DefaultShoeKeep); negative turns it off.
	ShoeKeep time.Duration
}

func (c *Config) defaults() {
	if c.Name == "" {
		c.Name = "witness"
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Consumer == "" {
		c.Consumer = DefaultConsumer
	}
	if c.Group != "" {
		c.Consumer = GroupConsumer(c.Consumer, c.Group)
	}
	if c.StatusStream == "" {
		c.StatusStream = DefaultStatusStream
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.GapGrace <= 0 {
		c.GapGrace = DefaultGapGrace
	}
	if c.ResyncEvery <= 0 {
		c.ResyncEvery = DefaultResyncEvery
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registry == nil {
		c.Registry = &Registry{Heartbeat: DefaultHeartbeat, Tables: map[string]TableEntry{}}
	}
}

// Witness is one running witness.
type Witness struct {
	cfg Config
	nc  *nats.Conn
	js  jetstream.JetStream
	// sm guards stream, cons and pinned: the guard makes them again when
	// they are lost (guard.go).
	sm     sync.Mutex
	stream jetstream.Stream
	cons   jetstream.Consumer
	// pinned: the consumer is pinned to one witness at a time and
	// acknowledged cumulatively (ensureConsumer).
	pinned bool
	log    *slog.Logger

	mu    sync.Mutex
	stats Stats
	// acked is the stream sequence up to which every message is known
	// acknowledged or committed by this witness (pinned consumers only).
	acked uint64
	// ackedAt is when the stream stored the message at acked, if this
	// witness acknowledged it: every message stored before then is in
	// the floor's database, so a table last seen a heartbeat before it
	// was silent in the stream's own time, however far behind the
	// witnesses are.
	ackedAt time.Time
	// caughtUp is when this witness last found nothing waiting in the
	// stream: only then is a table's silence up to now the table's, not
	// the floor's backlog.
	caughtUp time.Time
	// resyncTries is, per table, the hole this witness last asked for and
	// how often: a repeat for the same hole waits twice as long each time
	// (resyncWait), so a table is not asked again and again for rows on
	// their way.
	resyncTries map[string]resyncTry
	// taken is, per table, the seqs of the rows this witness committed
	// lately (held pending or witnessed): a hole's first ask leaves out
	// those at its start (rows held for a checkpoint that the hole keeps
	// from covering them), so the table sends exactly what never came.
	taken map[string]map[int64]bool
	// askedResync hears each resync asked for (a seam for tests).
	askedResync func(table string, from, to int64)
	shoes       *shoeWatch // nil: off
	// dropped counts the messages dropped before judging, by reason.
	dropped map[string]*dropCount
}

func (w *Witness) setCaughtUp() {
	w.mu.Lock()
	w.caughtUp = w.cfg.Clock.Now()
	w.mu.Unlock()
}

// Stats count what a witness did.
type Stats struct {
	Messages, Rows, Checkpoints, Batches, Alerts, Resyncs int64
	// Dropped counts the messages dropped before judging (too big, on no
	// table's subject, of an unregistered table).
	Dropped int64
}

// Stats is what the witness did so far.
func (w *Witness) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// EnsureStream creates the stream that keeps every table's events and
// checkpoints, if it is missing, and returns it.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name string, subjects Subjects, replicas int, maxAge time.Duration) (jetstream.Stream, error) {
	// A cluster just started, or one that lost a node, answers only once
	// it has a JetStream leader: try for a while, each try bounded (a
	// request sent before the cluster has a JetStream leader gets no
	// answer, and would wait out ctx).
	var s jetstream.Stream
	err := retry(ctx, clock.Real, 30, 5*time.Second, time.Second, func(ctx context.Context) error {
		var err error
		s, err = ensureStream(ctx, js, name, subjects, replicas, maxAge)
		return err
	})
	return s, err
}

// StreamConfig is the configuration of the stream of every table's
// events and checkpoints: a message over MaxMessageBytes is refused by
// the broker, never stored.
func StreamConfig(name string, subjects Subjects, replicas int, maxAge time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: subjects.Stream(), Replicas: replicas,
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxAge: maxAge, Discard: jetstream.DiscardOld,
		MaxMsgSize: MaxMessageBytes}
}

func ensureStream(ctx context.Context, js jetstream.JetStream, name string, subjects Subjects, replicas int, maxAge time.Duration) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, name)
	if err == nil {
		// Made by an earlier version, or changed while no witness ran:
		// set back to what the witness relies on (the guard alerts a
		// change while it runs).
		want := StreamConfig(name, subjects, replicas, maxAge)
		if diff := streamDiff(s.CachedInfo().Config, want); diff != "" {
			u, err := js.UpdateStream(ctx, want)
			if err != nil {
				return nil, fmt.Errorf("stream %s is not as the witness makes it (%s): %w", name, diff, err)
			}
			return u, nil
		}
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	s, err = js.CreateStream(ctx, StreamConfig(name, subjects, replicas, maxAge))
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", name, err)
	}
	return s, nil
}

// EnsureStatusStream creates the stream that keeps each table's last
// status and active alerts, if it is missing, and returns it. The tables
// publish both retained; NATS keeps MQTT's retained messages for MQTT
// subscribers only, so the floor keeps its own last value of each.
func EnsureStatusStream(ctx context.Context, js jetstream.JetStream, name string, subjects Subjects, replicas int) (jetstream.Stream, error) {
	cfg := statusStreamConfig(name, subjects, replicas)
	var s jetstream.Stream
	err := retry(ctx, clock.Real, 30, 5*time.Second, time.Second, func(ctx context.Context) error {
		var err error
		// As made already: used as it is (only the admin's login may
		// change a stream on a floor with logins).
		if s, err = js.Stream(ctx, name); err == nil && streamDiff(s.CachedInfo().Config, cfg) == "" {
			return nil
		}
		s, err = js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("status stream %s: %w", name, err)
	}
	return s, nil
}

// statusStreamConfig is the configuration of the status stream.
func statusStreamConfig(name string, subjects Subjects, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: subjects.Status(), Replicas: replicas, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxMsgsPerSubject: 1, MaxMsgSize: MaxMessageBytes, Discard: jetstream.DiscardOld}
}

// New connects to the floor broker, makes sure of the stream and the
// shared consumer, and returns the witness, ready to Run.
func New(ctx context.Context, cfg Config) (*Witness, error) {
	cfg.defaults()
	if cfg.Store == nil {
		return nil, errors.New("witness: no database")
	}
	log := cfg.Logger.With("witness", cfg.Name)
	opts := append([]nats.Option{nats.Name("tablectl-witness-" + cfg.Name), nats.Timeout(ConnectTimeout), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("floor broker lost", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("floor broker back", "url", c.ConnectedUrl()) }),
	}, cfg.NATSOptions...)
	nc, err := nats.Connect(cfg.NATS, opts...)
	if err != nil {
		return nil, fmt.Errorf("witness: floor broker %s: %w", cfg.NATS, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("witness: %w", err)
	}
	s, err := EnsureStream(ctx, js, cfg.Stream, cfg.Subjects, cfg.Replicas, cfg.MaxAge)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("witness: %w", err)
	}
	if _, err := EnsureStatusStream(ctx, js, cfg.StatusStream, cfg.Subjects, cfg.Replicas); err != nil {
		nc.Close()
		return nil, fmt.Errorf("witness: %w", err)
	}
	cons, pinned, err := ensureConsumer(ctx, s, nc.ConnectedServerVersion(), cfg)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("witness: %w", err)
	}
	if !pinned {
		log.Info("the consumer acknowledges each message (nats-server before 2.11, or a consumer made so)", "consumer", cfg.Consumer)
	}
	shoes, err := newShoeWatch(ctx, cfg.Store, cfg.ShoeKeep, cfg.Clock, log, cfg.Name)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("witness: %w", err)
	}
	return &Witness{cfg: cfg, nc: nc, js: js, stream: s, cons: cons, pinned: pinned, log: log, shoes: shoes}, nil
}

// GroupConsumer is the name of a witnesses' group's consumer.
func GroupConsumer(consumer, group string) string { return consumer + "-" + group }

// PriorityGroup is the shared consumer's priority group, in which one
// witness at a time is pinned (nats-server 2.11 or later).
const PriorityGroup = "witness"

// How long the pinned witness may go without asking for messages before
// another is pinned, and how long a message given out may go without its
// acknowledgement before it is given again.
const (
	pinnedTTL = 5 * time.Second
	ackWait   = 10 * time.Second
)

// ensureConsumer makes the durable consumer every witness shares, or
// updates it in the way it was made. On nats-server 2.11 or later it is
// pinned (one witness at a time takes messages, another takes over when
// it stops asking) and acknowledged cumulatively: one acknowledgement per
// batch instead of one per message, each of which the three nodes
// replicate. Before 2.11 (Debian's 2.9) every message is acknowledged.
// An existing consumer keeps its kind: JetStream cannot change a
// consumer's acknowledgement policy.
func ensureConsumer(ctx context.Context, s jetstream.Stream, version string, cfg Config) (jetstream.Consumer, bool, error) {
	cc := jetstream.ConsumerConfig{Durable: cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: ackWait, MaxAckPending: 4 * cfg.Batch * 4, MaxRequestBatch: cfg.Batch}
	if cfg.Group != "" {
		tables := cfg.Registry.GroupTables(cfg.Group)
		if len(tables) == 0 {
			return nil, false, fmt.Errorf("consumer %s: group %s has no table in the registry", cfg.Consumer, cfg.Group)
		}
		cc.FilterSubjects = cfg.Subjects.TablesStream(tables)
	}
	// A group's consumer is filtered to its tables, so its messages are
	// not a run of the stream's sequences, which the cumulative
	// acknowledgement counts on (ackCommitted): its witnesses acknowledge
	// each message and share the group's messages.
	pinned := serverAtLeast(version, 2, 11) && cfg.Group == ""
	if c, err := s.Consumer(ctx, cfg.Consumer); err == nil {
		pinned = isPinned(c.CachedInfo().Config)
		if !pinned && c.CachedInfo().Config.AckPolicy != jetstream.AckExplicitPolicy {
			return nil, false, fmt.Errorf("consumer %s acknowledges %s without a pinned client: not a witness's consumer", cfg.Consumer, c.CachedInfo().Config.AckPolicy)
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, false, fmt.Errorf("consumer %s: %w", cfg.Consumer, err)
	}
	if pinned {
		cc.AckPolicy = jetstream.AckAllPolicy
		cc.PriorityPolicy = jetstream.PriorityPolicyPinned
		cc.PriorityGroups = []string{PriorityGroup}
		cc.PinnedTTL = pinnedTTL
	}
	// As made already: used as it is (a witness's login may not create
	// or change consumers on a floor with logins; the admin's makes it).
	if c, err := s.Consumer(ctx, cfg.Consumer); err == nil && consumerFits(c.CachedInfo().Config, cc) {
		return c, pinned, nil
	}
	c, err := s.CreateOrUpdateConsumer(ctx, cc)
	if err != nil {
		return nil, false, fmt.Errorf("consumer %s: %w", cfg.Consumer, err)
	}
	if pinned && !isPinned(c.CachedInfo().Config) {
		// A server that does not know priority groups ignores them: a
		// cumulative acknowledgement shared by two witnesses would then
		// acknowledge each other's messages before their commits.
		return nil, false, fmt.Errorf("consumer %s: the floor broker (%s) did not make it pinned; delete it and use nats-server 2.11 or later", cfg.Consumer, version)
	}
	return c, pinned, nil
}

// consumerFits tells whether a consumer made already is as want says.
func consumerFits(have, want jetstream.ConsumerConfig) bool {
	return have.AckPolicy == want.AckPolicy && have.DeliverPolicy == want.DeliverPolicy && have.AckWait == want.AckWait &&
		have.MaxAckPending == want.MaxAckPending && have.MaxRequestBatch == want.MaxRequestBatch &&
		have.PriorityPolicy == want.PriorityPolicy && have.PinnedTTL == want.PinnedTTL && filtersFit(have, want)
}

// filtersFit tells whether a consumer made already takes the subjects
// want does: all of the stream, or exactly a group's tables.
func filtersFit(have, want jetstream.ConsumerConfig) bool {
	return have.FilterSubject == "" && slices.Equal(slices.Sorted(slices.Values(have.FilterSubjects)), slices.Sorted(slices.Values(want.FilterSubjects)))
}

func isPinned(c jetstream.ConsumerConfig) bool {
	return c.AckPolicy == jetstream.AckAllPolicy && c.PriorityPolicy == jetstream.PriorityPolicyPinned &&
		slices.Contains(c.PriorityGroups, PriorityGroup)
}

// serverAtLeast tells whether a nats-server version ("2.15.2") is at
// least major.minor.
func serverAtLeast(version string, major, minor int) bool {
	f := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(f) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(f[0])
	mi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// Close disconnects from the floor broker.
func (w *Witness) Close() { w.nc.Close() }

// Conn is the witness's connection to the floor broker.
func (w *Witness) Conn() *nats.Conn { return w.nc }

// StatusStream is the stream of the tables' last status (View.Run).
func (w *Witness) StatusStream() string { return w.cfg.StatusStream }

// Run takes batches from the stream and commits them, and scans for gaps
// and silence every second, until ctx is done.
func (w *Witness) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.scanLoop(ctx) }()
	defer wg.Wait()
	kick := make(chan struct{}, 1)
	wg.Add(1)
	go func() { defer wg.Done(); w.guardLoop(ctx, kick) }()
	// The next batch is fetched while this one commits.
	batches := make(chan fetched, 1)
	wg.Add(1)
	go func() { defer wg.Done(); w.fetchLoop(ctx, batches, kick) }()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		var fb fetched
		select {
		case <-ctx.Done():
			return nil
		case fb = <-batches:
		}
		if err := w.once(ctx, fb); err != nil {
			if ctx.Err() != nil {
				break
			}
			w.log.Warn("batch not committed; its messages come again", "err", err)
			clock.Sleep(ctx, w.cfg.Clock, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
	return nil
}

// fetched is one fetch's messages, or why there are none.
type fetched struct {
	prepared
	err error
}

// fetchLoop fetches batches until ctx is done.
// A failed fetch kicks the guard, which checks the stream and the
// consumer at once.
func (w *Witness) fetchLoop(ctx context.Context, out chan<- fetched, kick chan<- struct{}) {
	for ctx.Err() == nil {
		var fb fetched
		opts := []jetstream.FetchOpt{jetstream.FetchMaxWait(250 * time.Millisecond)}
		if w.isPinned() {
			opts = append(opts, jetstream.FetchPriorityGroup(PriorityGroup))
		}
		_, cons := w.consumer()
		b, err := cons.Fetch(w.cfg.Batch, opts...)
		if err != nil {
			// Not deliverable now (a node down, the consumer moving): again.
			fb.err = fmt.Errorf("fetch: %w", err)
		} else {
			var msgs []jetstream.Msg
			for m := range b.Messages() {
				msgs = append(msgs, m)
			}
			// A pin that moved to another witness (this one was slow to ask)
			// is not an error: the next fetch asks unpinned.
			if err := b.Error(); len(msgs) == 0 && err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrPinIDMismatch) {
				fb.err = fmt.Errorf("fetch: %w", err)
			}
			fb.prepared = w.prepare(msgs)
		}
		select {
		case out <- fb:
		case <-ctx.Done():
			return
		}
		if fb.err != nil {
			select {
			case kick <- struct{}{}:
			default:
			}
			clock.Sleep(ctx, w.cfg.Clock, 250*time.Millisecond)
		}
	}
}

// once stores one batch and acknowledges it.
func (w *Witness) once(ctx context.Context, fb fetched) error {
	msgs := fb.msgs
	if fb.err != nil {
		return fb.err
	}
	if len(msgs) == 0 {
		// A pinned consumer gives a witness standing by nothing while the
		// pinned one works through a backlog, and a shared one nothing
		// while the others hold what is left: caught up only when the
		// stream has nothing left to deliver and no witness holds a
		// batch it has not acknowledged (rows in another witness's hands
		// are not a table's silence).
		_, cons := w.consumer()
		if info, err := cons.Info(ctx); err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			w.setCaughtUp()
		}
		return nil
	}
	if err := w.commit(ctx, fb.prepared); err != nil {
		return err
	}
	if md, err := msgs[len(msgs)-1].Metadata(); err == nil && md.NumPending == 0 {
		w.setCaughtUp()
	}
	return nil
}

// Apply stores messages taken from the stream and acknowledges them once
// committed.
func (w *Witness) Apply(ctx context.Context, msgs []jetstream.Msg) error {
	return w.commit(ctx, w.prepare(msgs))
}

// prepared is a batch read and its signatures checked, ready to commit.
type prepared struct {
	msgs []jetstream.Msg
	// seqs are the messages' stream sequences (0: not known).
	seqs      []uint64
	items     []item
	rows, cps int64
}

// prepare reads a batch and checks its checkpoints' signatures: the work
// that needs no database, done while the batch before commits.
func (w *Witness) prepare(msgs []jetstream.Msg) prepared {
	p := prepared{msgs: msgs, items: make([]item, 0, len(msgs)), seqs: make([]uint64, len(msgs))}
	for i, m := range msgs {
		var src string
		if md, err := m.Metadata(); err == nil {
			p.seqs[i] = md.Sequence.Stream
			src = fmt.Sprintf("subject %s, stream seq %d", m.Subject(), md.Sequence.Stream)
		} else {
			src = "subject " + m.Subject()
		}
		it, dropped := w.admit(m.Subject(), m.Data(), src)
		if dropped {
			continue
		}
		if md, err := m.Metadata(); err == nil {
			it.at = md.Timestamp.UTC()
		}
		if it.row != nil {
			p.rows++
		} else if it.cp != nil {
			p.cps++
		}
		p.items = append(p.items, it)
	}
	verifyAll(p.items, w.cfg.Registry)
	return p
}

// admit reads one message, or drops it before any judging: one too big,
// on no table's subject, or of a table not in the registry. Those are
// counted and alerted once an interval (Witness.drop), never stored: an
// invented table id must cost the floor nothing.
func (w *Witness) admit(subject string, data []byte, src string) (item, bool) {
	if len(data) > MaxMessageBytes {
		w.drop(QuarantineOversized, subject, src)
		return item{}, true
	}
	it := w.read(subject, data)
	switch {
	case it.table == "":
		w.drop(QuarantineNoTable, subject, src)
		return item{}, true
	case w.cfg.Registry.Tables[it.table].Keys == nil:
		w.drop(QuarantineUnregistered, subject, src)
		return item{}, true
	}
	it.src = src
	return it, false
}

// DropAlertEvery: one alert per reason a message was dropped before
// judging, per interval, with the count since the last.
const DropAlertEvery = time.Minute

// dropCount is what was dropped for one reason since its last alert.
type dropCount struct {
	n, total int64
	first    string // the first subject since the last alert
	alerted  time.Time
}

// drop counts a message dropped before judging and raises, at most once
// an interval per reason, an alert naming the first source since the
// last: published on floor/alerts and logged, not stored.
func (w *Witness) drop(reason, subject, src string) {
	now := w.cfg.Clock.Now()
	w.mu.Lock()
	if w.dropped == nil {
		w.dropped = map[string]*dropCount{}
	}
	d := w.dropped[reason]
	if d == nil {
		d = &dropCount{}
		w.dropped[reason] = d
	}
	d.n++
	d.total++
	w.stats.Dropped++
	if d.first == "" {
		d.first = src
	}
	var a *Alert
	if now.Sub(d.alerted) >= DropAlertEvery {
		// No table: the floor view keeps no line for an invented id.
		a = &Alert{State: "raised", Kind: AlertUnregistered, Witness: w.cfg.Name, At: now.UTC(),
			Message: fmt.Sprintf("%d message(s) dropped before judging (%s; %d in all), first from %s", d.n, reason, d.total, d.first)}
		if reason == QuarantineOversized || reason == QuarantineNoTable {
			a.Kind = AlertQuarantined
		}
		d.n, d.first, d.alerted = 0, "", now
	}
	w.mu.Unlock()
	if a != nil {
		w.publish([]Alert{*a})
	}
}

// commit stores a prepared batch and acknowledges its messages.
func (w *Witness) commit(ctx context.Context, p prepared) error {
	alerts, err := w.cfg.Store.apply(ctx, p.items, w.cfg.Registry, w.cfg.Name, w.cfg.Clock.Now().UTC())
	if err != nil {
		for _, m := range p.msgs {
			m.Nak()
		}
		return err
	}
	alerts = append(alerts, w.shoes.take(ctx, p.items, w.cfg.Store)...)
	w.noteTaken(p.items)
	if w.isPinned() {
		w.ackCommitted(ctx, p)
	} else {
		for _, m := range p.msgs {
			m.Ack()
		}
	}
	w.publish(alerts)
	w.mu.Lock()
	w.stats.Messages += int64(len(p.msgs))
	w.stats.Rows += p.rows
	w.stats.Checkpoints += p.cps
	w.stats.Batches++
	w.mu.Unlock()
	return nil
}

// ackCommitted acknowledges a committed batch of a pinned consumer with
// one cumulative acknowledgement: of the highest message such that every
// message of the stream up to it is either acknowledged already (which,
// every witness acknowledging so, means committed) or in this batch. A
// message above a gap (another witness's messages, not yet committed or
// lost with it; one of this batch's that came again) is left
// unacknowledged: JetStream delivers it again after the ack wait, and it
// is stored once. So no message is acknowledged before it is committed,
// whichever witness holds the pin.
func (w *Witness) ackCommitted(ctx context.Context, p prepared) {
	order := make([]int, len(p.msgs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(p.seqs[a], p.seqs[b]) })
	w.mu.Lock()
	floor := w.acked
	w.mu.Unlock()
	last, upTo := ackRun(p.seqs, order, floor)
	if last < 0 {
		// What this witness knows is behind: another witness acknowledged
		// past it, or it has just started. Ask the broker.
		if f, err := w.ackFloor(ctx); err != nil {
			w.log.Warn("acknowledgement floor not read; the batch comes again after the ack wait", "err", err)
		} else if f > floor {
			floor = f
			last, upTo = ackRun(p.seqs, order, floor)
		}
	}
	var at time.Time
	if last < 0 {
		upTo = floor
	} else if err := p.msgs[last].Ack(); err != nil {
		w.log.Warn("batch not acknowledged; it comes again after the ack wait", "err", err)
		return
	} else if md, err := p.msgs[last].Metadata(); err == nil {
		at = md.Timestamp
	}
	w.mu.Lock()
	if upTo > w.acked && !at.IsZero() {
		w.ackedAt = at
	}
	w.acked = max(w.acked, upTo)
	w.mu.Unlock()
}

// ackRun returns the index of the message that ends the run of stream
// sequences floor+1, floor+2, ... in seqs (taken in order), and that
// sequence; -1 when the batch does not continue floor.
func ackRun(seqs []uint64, order []int, floor uint64) (int, uint64) {
	last := -1
	for _, i := range order {
		s := seqs[i]
		switch {
		case s == 0:
			return last, floor
		case s <= floor:
			// Acknowledged already: this is a redelivery.
		case s == floor+1:
			floor, last = s, i
		default:
			return last, floor
		}
	}
	return last, floor
}

// ackFloor is the stream sequence up to which every message is
// acknowledged or gone from the stream (past its max age).
func (w *Witness) ackFloor(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stream, cons := w.consumer()
	ci, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	si, err := stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	f := ci.AckFloor.Stream
	if si.State.FirstSeq > 0 {
		f = max(f, si.State.FirstSeq-1)
	}
	return f, nil
}

// verifyAll checks every checkpoint's signature, on every core.
func verifyAll(items []item, reg *Registry) {
	var idx []int
	for i := range items {
		if items[i].cp != nil {
			idx = append(idx, i)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(idx))
	var wg sync.WaitGroup
	for k := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := k; j < len(idx); j += workers {
				it := &items[idx[j]]
				if it.cp.Table == it.table {
					it.sig, it.sigDone = reg.verify(it.table, *it.cp), true
				}
			}
		}()
	}
	wg.Wait()
}

// read parses one message.
func (w *Witness) read(subject string, data []byte) item {
	table, kind, err := w.cfg.Subjects.Parse(subject)
	if err != nil {
		return item{bad: err.Error()}
	}
	switch kind {
	case KindEvents:
		r, err := ParseRow(table, data)
		if err != nil {
			return item{table: table, bad: err.Error()}
		}
		return item{table: table, row: &r}
	case KindCheckpoint:
		c, err := ParseCheckpoint(table, data)
		if err != nil {
			return item{table: table, bad: err.Error()}
		}
		return item{table: table, cp: &c}
	}
	return item{table: table, bad: "subject " + subject + " is not kept by the witness"}
}

// publish puts alerts on floor/alerts.
func (w *Witness) publish(alerts []Alert) {
	for _, a := range alerts {
		if a.State == "raised" {
			w.log.Warn("floor alert", "table", a.Table, "kind", a.Kind, "seq", a.Seq, "message", a.Message)
		}
		b, _ := json.Marshal(a)
		if w.nc == nil {
			// A witness made without a broker (a test of the scan).
		} else if err := w.nc.Publish(AlertsSubject, b); err != nil {
			w.log.Warn("floor alert not published", "err", err)
		}
		if w.cfg.OnAlert != nil {
			w.cfg.OnAlert(a)
		}
	}
	if len(alerts) > 0 {
		w.mu.Lock()
		w.stats.Alerts += int64(len(alerts))
		w.mu.Unlock()
	}
}

func (w *Witness) scanLoop(ctx context.Context) {
	t := w.cfg.Clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := w.Scan(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("gap and silence scan", "err", err)
		}
	}
}

// Scan looks once for gaps (asking the table to resync) and for tables
// silent past their heartbeat, and resolves the gaps filled since.
func (w *Witness) Scan(ctx context.Context) error {
	s := w.cfg.Store
	now := w.cfg.Clock.Now().UTC()
	lines, err := s.lines(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	current := now.Sub(w.caughtUp) < 2*time.Second
	streamAt := w.ackedAt
	w.mu.Unlock()
	// silence is how long a table last seen at seen has said nothing, as
	// far as the floor can know: up to now when the witness is caught up;
	// while it works through a backlog, up to the stream time below which
	// every message is in the database (a table whose rows wait in the
	// backlog is never found silent; that time stands still while a dead
	// witness's messages wait out the ack wait); else not at all.
	silence := func(seen time.Time) (time.Duration, string) {
		switch {
		case current:
			return now.Sub(seen), ""
		case !streamAt.IsZero():
			return streamAt.Sub(seen), fmt.Sprintf("; judged in the floor stream's time, every message before %s witnessed", streamAt.UTC().Format(time.RFC3339))
		}
		return 0, ""
	}
	var alerts []Alert
	for _, l := range lines {
		if !w.cfg.Registry.inGroup(l.table, w.cfg.Group) {
			continue // another group's witnesses judge it
		}
		w.pruneTaken(l.table, l.contig)
		wait := w.resyncWait(l.table, l.contig+1)
		switch {
		case l.contig < l.max && l.hole != nil && now.Sub(*l.hole) >= w.cfg.GapGrace && (l.asked == nil || now.Sub(*l.asked) >= wait):
			from, upTo, ok, err := s.claimResync(ctx, l.table, now, now.Add(-wait))
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			ask := w.resyncFrom(l.table, from, upTo)
			a, err := w.raise(ctx, l.table, AlertGap, strconv.FormatInt(from, 10), from,
				fmt.Sprintf("rows %d to %d of %s missing below row %d witnessed; asked the table to resync from %d", from, upTo-1, l.table, upTo, ask))
			if err != nil {
				return err
			}
			alerts = append(alerts, a...)
			w.resync(l.table, ask, upTo-1)
			w.noteResync(l.table, l.contig+1)
		case l.contig >= l.max:
			// Gaps filled: resolve them.
			a, err := w.resolve(ctx, l.table, AlertGap, now)
			if err != nil {
				return err
			}
			alerts = append(alerts, a...)
		}
		if l.seen == nil || l.silent {
			continue
		}
		if quiet, how := silence(*l.seen); quiet > w.cfg.Registry.heartbeat(l.table) {
			marked, err := s.markSilent(ctx, l.table, *l.seen)
			if err != nil {
				return err
			}
			if marked {
				a, err := w.raise(ctx, l.table, AlertSilent, strconv.FormatInt(l.seen.UnixNano(), 10), l.max,
					fmt.Sprintf("nothing from %s since %s (heartbeat %s%s)", l.table, l.seen.Format(time.RFC3339), w.cfg.Registry.heartbeat(l.table), how))
				if err != nil {
					return err
				}
				alerts = append(alerts, a...)
			}
		}
	}
	w.publish(alerts)
	return nil
}

func (w *Witness) raise(ctx context.Context, table string, kind AlertKind, key string, seq int64, msg string) ([]Alert, error) {
	a := Alert{State: "raised", Table: table, Kind: kind, Seq: seq, Message: msg, Tamper: Tamper(kind), Witness: w.cfg.Name, At: w.cfg.Clock.Now().UTC(), key: key}
	a, stored, err := w.cfg.Store.raise(ctx, a)
	if err != nil || !stored {
		return nil, err
	}
	return []Alert{a}, nil
}

func (w *Witness) resolve(ctx context.Context, table string, kind AlertKind, now time.Time) ([]Alert, error) {
	out, err := w.cfg.Store.resolve(ctx, table, kind, now)
	for i := range out {
		out[i].Witness = w.cfg.Name
	}
	return out, err
}

// resync asks table, over its signed command path, to send its rows again
// from seq from to seq to: the hole, not the rows after it, which the
// witness holds.
func (w *Witness) resync(table string, from, to int64) {
	if w.askedResync != nil {
		w.askedResync(table, from, to)
	}
	if w.cfg.Key == nil {
		return
	}
	c := signedcmd.Command{Table: table, ID: signedcmd.NewID(), Action: signedcmd.ActionResync, Supervisor: w.cfg.KeyName,
		IssuedAt: signedcmd.FormatTime(w.cfg.Clock.Now()), From: from, To: to, Reason: "floor witness " + w.cfg.Name + ": gap"}
	if err := c.Sign(w.cfg.Key); err != nil {
		w.log.Error("resync not signed", "table", table, "err", err)
		return
	}
	b, err := c.Marshal()
	if err != nil {
		w.log.Error("resync not encoded", "table", table, "err", err)
		return
	}
	if err := w.nc.Publish(w.cfg.Subjects.Command(table), b); err != nil {
		w.log.Warn("resync not sent", "table", table, "err", err)
		return
	}
	w.log.Info("asked for a resync", "table", table, "from", from)
	w.mu.Lock()
	w.stats.Resyncs++
	w.mu.Unlock()
}

// maxTaken bounds the seqs kept per table in Witness.taken, which the
// scan prunes to those above the table's witnessed rows: far more than a
// hole's rows held pending (a table signs a checkpoint every row or two).
const maxTaken = 1024

// noteTaken keeps the seqs of the committed batch's rows, per table.
func (w *Witness) noteTaken(items []item) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.taken == nil {
		w.taken = map[string]map[int64]bool{}
	}
	for _, it := range items {
		if it.row == nil {
			continue
		}
		seqs := w.taken[it.table]
		if seqs == nil || len(seqs) >= maxTaken {
			seqs = map[int64]bool{}
			w.taken[it.table] = seqs
		}
		seqs[it.row.Seq] = true
	}
}

// pruneTaken lets go of table's seqs taken at or below contig: witnessed.
func (w *Witness) pruneTaken(table string, contig int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.taken[table] {
		if s <= contig {
			delete(w.taken[table], s)
		}
	}
}

// resyncFrom is where a resync of table's hole from..upTo-1 starts: on
// the first ask, past the rows at its start this witness took (held
// pending: they came, a checkpoint over them cannot chain through the
// hole); a repeat asks for the whole hole, in case what came was not the
// table's row.
func (w *Witness) resyncFrom(table string, from, upTo int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	seqs := w.taken[table]
	if t, ok := w.resyncTries[table]; ok && t.from == from && t.tries > 0 {
		return from
	}
	start := from
	for start < upTo-1 && seqs[start] {
		start++
	}
	return start
}

// resyncTry is a hole asked for: where it starts, and how often.
type resyncTry struct {
	from  int64
	tries int
}

// maxResyncDoublings caps the backoff: ResyncEvery times 16 (4 minutes by
// default) between asks for one hole.
const maxResyncDoublings = 4

// resyncWait is how long after the last ask to ask table again for the
// hole from: ResyncEvery after the first ask, doubled after each further
// ask for the same hole; a new hole starts again from ResyncEvery.
func (w *Witness) resyncWait(table string, from int64) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.resyncTries[table]
	if !ok || t.from != from || t.tries < 1 {
		return w.cfg.ResyncEvery
	}
	return w.cfg.ResyncEvery << min(t.tries-1, maxResyncDoublings)
}

// noteResync counts an ask for table's hole from.
func (w *Witness) noteResync(table string, from int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resyncTries == nil {
		w.resyncTries = map[string]resyncTry{}
	}
	t := w.resyncTries[table]
	if t.from != from {
		t = resyncTry{from: from}
	}
	t.tries++
	w.resyncTries[table] = t
}
