package floor

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tablectl/tablectl/command"
	"github.com/tablectl/tablectl/internal/clock"
)

// Defaults of a witness's settings.
const (
	DefaultStream   = "TABLECTL"
	DefaultConsumer = "witness"
	DefaultBatch    = 2000
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

// Config is a witness's settings (tablectl witness's flags).
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
	Replicas         int
	MaxAge           time.Duration
	Subjects         Subjects
	Store            *Store
	Registry         *Registry
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
	cfg  Config
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
	log  *slog.Logger

	mu    sync.Mutex
	stats Stats
	// caughtUp is when this witness last found nothing waiting in the
	// stream: only then is a table's silence the table's, not the
	// floor's backlog.
	caughtUp time.Time
}

func (w *Witness) setCaughtUp() {
	w.mu.Lock()
	w.caughtUp = w.cfg.Clock.Now()
	w.mu.Unlock()
}

// Stats count what a witness did.
type Stats struct {
	Messages, Rows, Checkpoints, Batches, Alerts, Resyncs int64
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
	s, err := js.Stream(ctx, name)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s: %w", name, err)
	}
	s, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects.Stream(), Replicas: replicas,
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxAge: maxAge, Discard: jetstream.DiscardOld})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return js.Stream(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", name, err)
	}
	return s, nil
}

// New connects to the floor broker, makes sure of the stream and the
// shared consumer, and returns the witness, ready to Run.
func New(ctx context.Context, cfg Config) (*Witness, error) {
	cfg.defaults()
	if cfg.Store == nil {
		return nil, errors.New("witness: no database")
	}
	log := cfg.Logger.With("witness", cfg.Name)
	opts := append([]nats.Option{nats.Name("tablectl-witness-" + cfg.Name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond),
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
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy, AckWait: 10 * time.Second, MaxAckPending: 4 * cfg.Batch * 4, MaxRequestBatch: cfg.Batch})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("witness: consumer %s: %w", cfg.Consumer, err)
	}
	return &Witness{cfg: cfg, nc: nc, js: js, cons: cons, log: log}, nil
}

// Close disconnects from the floor broker.
func (w *Witness) Close() { w.nc.Close() }

// Conn is the witness's connection to the floor broker.
func (w *Witness) Conn() *nats.Conn { return w.nc }

// Run takes batches from the stream and commits them, and scans for gaps
// and silence every second, until ctx is done.
func (w *Witness) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.scanLoop(ctx) }()
	defer wg.Wait()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if err := w.once(ctx); err != nil {
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

// once takes one batch, stores it and acknowledges it.
func (w *Witness) once(ctx context.Context) error {
	b, err := w.cons.Fetch(w.cfg.Batch, jetstream.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		// Not deliverable now (a node down, the consumer moving): again.
		return fmt.Errorf("fetch: %w", err)
	}
	var msgs []jetstream.Msg
	for m := range b.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("fetch: %w", err)
		}
		w.setCaughtUp()
		return nil
	}
	if err := w.Apply(ctx, msgs); err != nil {
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
	items := make([]item, 0, len(msgs))
	var rows, cps int64
	for _, m := range msgs {
		it := w.read(m.Subject(), m.Data())
		if md, err := m.Metadata(); err == nil {
			it.at = md.Timestamp.UTC()
		}
		if it.row != nil {
			rows++
		} else if it.cp != nil {
			cps++
		}
		if it.table != "" {
			items = append(items, it)
		} else {
			w.log.Warn("message on no table's subject", "subject", m.Subject(), "err", it.bad)
		}
	}
	alerts, err := w.cfg.Store.apply(ctx, items, w.cfg.Registry, w.cfg.Name, w.cfg.Clock.Now().UTC())
	if err != nil {
		for _, m := range msgs {
			m.Nak()
		}
		return err
	}
	for _, m := range msgs {
		m.Ack()
	}
	w.publish(alerts)
	w.mu.Lock()
	w.stats.Messages += int64(len(msgs))
	w.stats.Rows += rows
	w.stats.Checkpoints += cps
	w.stats.Batches++
	w.mu.Unlock()
	return nil
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
		if err := w.nc.Publish(AlertsSubject, b); err != nil {
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
	rows, err := s.pool.Query(ctx, s.sql(`SELECT table_id, contig, max_seq, hole_since, last_seen, resync_asked, silent FROM S.tables`))
	if err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	type line struct {
		table             string
		contig, max       int64
		hole, seen, asked *time.Time
		silent            bool
	}
	var lines []line
	for rows.Next() {
		var l line
		if err := rows.Scan(&l.table, &l.contig, &l.max, &l.hole, &l.seen, &l.asked, &l.silent); err != nil {
			rows.Close()
			return fmt.Errorf("floor database: %w", err)
		}
		lines = append(lines, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("floor database: %w", err)
	}
	w.mu.Lock()
	current := now.Sub(w.caughtUp) < 2*time.Second
	w.mu.Unlock()
	var alerts []Alert
	for _, l := range lines {
		switch {
		case l.contig < l.max && l.hole != nil && now.Sub(*l.hole) >= w.cfg.GapGrace && (l.asked == nil || now.Sub(*l.asked) >= w.cfg.ResyncEvery):
			// One witness asks: the one whose update wins.
			var from int64
			err := s.pool.QueryRow(ctx, s.sql(`UPDATE S.tables SET resync_asked = $2 WHERE table_id = $1 AND contig < max_seq
				AND (resync_asked IS NULL OR resync_asked <= $3) RETURNING contig + 1`), l.table, now, now.Add(-w.cfg.ResyncEvery)).Scan(&from)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return fmt.Errorf("floor database: %w", err)
			}
			var upTo int64
			if err := s.pool.QueryRow(ctx, s.sql(`SELECT coalesce(min(seq), $3) FROM S.rows WHERE table_id = $1 AND seq > $2`), l.table, from, l.max+1).Scan(&upTo); err != nil {
				return fmt.Errorf("floor database: %w", err)
			}
			a, err := w.raise(ctx, l.table, AlertGap, strconv.FormatInt(from, 10), from,
				fmt.Sprintf("rows %d to %d of %s missing below row %d witnessed; asked the table to resync from %d", from, upTo-1, l.table, upTo, from))
			if err != nil {
				return err
			}
			alerts = append(alerts, a...)
			w.resync(l.table, from)
		case l.contig >= l.max:
			// Gaps filled: resolve them.
			a, err := w.resolve(ctx, l.table, AlertGap, now)
			if err != nil {
				return err
			}
			alerts = append(alerts, a...)
		}
		if current && l.seen != nil && !l.silent && now.Sub(*l.seen) > w.cfg.Registry.heartbeat(l.table) {
			tag, err := s.pool.Exec(ctx, s.sql(`UPDATE S.tables SET silent = true WHERE table_id = $1 AND NOT silent AND last_seen = $2`), l.table, *l.seen)
			if err != nil {
				return fmt.Errorf("floor database: %w", err)
			}
			if tag.RowsAffected() == 1 {
				a, err := w.raise(ctx, l.table, AlertSilent, strconv.FormatInt(l.seen.UnixNano(), 10), l.max,
					fmt.Sprintf("nothing from %s since %s (heartbeat %s)", l.table, l.seen.Format(time.RFC3339), w.cfg.Registry.heartbeat(l.table)))
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

func (w *Witness) raise(ctx context.Context, table, kind, key string, seq int64, msg string) ([]Alert, error) {
	s := w.cfg.Store
	a := Alert{State: "raised", Table: table, Kind: kind, Seq: seq, Message: msg, Tamper: Tamper(kind), Witness: w.cfg.Name, At: w.cfg.Clock.Now().UTC()}
	err := s.pool.QueryRow(ctx, s.sql(`INSERT INTO S.alerts (table_id, kind, key, seq, message, tamper, witness, raised_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
		ON CONFLICT (table_id, kind, key) DO NOTHING RETURNING id`), table, kind, key, seq, msg, a.Tamper, a.Witness, a.At).Scan(&a.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("floor database: alert: %w", err)
	}
	return []Alert{a}, nil
}

func (w *Witness) resolve(ctx context.Context, table, kind string, now time.Time) ([]Alert, error) {
	s := w.cfg.Store
	rows, err := s.pool.Query(ctx, s.sql(`UPDATE S.alerts SET resolved_at = $3 WHERE table_id = $1 AND kind = $2 AND resolved_at IS NULL RETURNING id, seq, message`), table, kind, now)
	if err != nil {
		return nil, fmt.Errorf("floor database: %w", err)
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		a := Alert{State: "resolved", Table: table, Kind: kind, Witness: w.cfg.Name, At: now, Tamper: Tamper(kind)}
		if err := rows.Scan(&a.ID, &a.Seq, &a.Message); err != nil {
			return nil, fmt.Errorf("floor database: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// resync asks table, over its signed command path, to send its rows again
// from seq from.
func (w *Witness) resync(table string, from int64) {
	if w.cfg.Key == nil {
		return
	}
	c := command.Command{Table: table, ID: command.NewID(), Action: command.ActionResync, Supervisor: w.cfg.KeyName,
		IssuedAt: command.FormatTime(w.cfg.Clock.Now()), From: from, Reason: "floor witness " + w.cfg.Name + ": gap"}
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
