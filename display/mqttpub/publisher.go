package mqttpub

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/base/mqttconn"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/signedcmd"
)

// Trail is the audit trail as the publisher reads it back (*audit.Store).
type Trail interface {
	Head() audit.Head
	Events(ctx context.Context, q audit.Query) iter.Seq2[audit.Record, error]
	LastCheckpoint(ctx context.Context) (audit.Checkpoint, bool, error)
}

// Options configure a Publisher.
type Options struct {
	Table  string
	Topics Topics
	Client mqttconn.Client
	Trail  Trail
	// Config is the table configuration until the trail records one.
	Config coup.TableConfig
	// From is the first row to publish; the rows before it are read only to
	// rebuild the table. 0 starts after the trail's head when Run starts.
	From int64
	// Driver is the shoe driver's name, for status.
	Driver string
	// Queue is how many commits wait for the publisher before it stops
	// taking them and reads them back from the trail instead; 0 is 4096.
	Queue int
	// Window is how many rows may be published and not yet acknowledged;
	// 0 is 256.
	Window int
	// MaxResync caps the rows one resync sends; 0 is 100000.
	MaxResync int64
	Clock     clock.Clock
	Logger    *slog.Logger
	// ObservePublish hears, for each row published from a live commit, how
	// long it took from Commit to the broker's acknowledgement of every
	// message the row called for (PUBACK at QoS 1), for the metrics. Rows
	// read back from the trail (after dropped commits, a reconnect or a
	// failed publish) are not timed. It must not block.
	ObservePublish func(d time.Duration)
}

// Publisher publishes what the recorder commits: see the package comment.
// Feed it with Commit (from audit.RecorderOptions.OnCommit) and run it with
// Run.
type Publisher struct {
	opt Options
	log *slog.Logger
	eng *engine

	queue   chan queued
	behind  atomic.Bool // commits were dropped: read the trail
	wake    chan struct{}
	replies chan signedcmd.Reply

	failMu sync.Mutex
	fail   *failure

	acked   atomic.Int64 // every row up to here is acknowledged by the broker
	over    oversized    // messages not published for their size
	started atomic.Bool  // Run has set acked

	// Run's own state.
	applied  int64 // the last row applied to the table copy
	pending  []group
	inflight int
	fresh    bool            // (re)connected: republish retained state and unacknowledged rows
	dirty    bool            // rows applied since retained state was last published
	errs     int             // publishes failed in a row, for backoff
	conn     <-chan struct{} // the connection state of the last full publish
	// shoeAfter is the row the broker must acknowledge before the shoe is
	// priced and pit/shoe goes out (0: nothing waits); see publishRetained.
	shoeAfter int64
}

// queued is one commit's rows waiting for Run, with when it was committed.
type queued struct {
	recs []audit.Record
	// at is a monotonic reading, for the publish latency only: it never
	// goes into a payload, so the wall clock, not Options.Clock, is right.
	at time.Time
}

type failure struct {
	reason   string
	head     int64
	at       time.Time
	tampered bool // the trail holds rows the controller did not write
}

// group is the messages published for one row; the row is acknowledged
// when all of them are.
type group struct {
	seq  int64
	toks []mqttconn.Token
	at   time.Time // when the row was committed; zero when not timed
}

// errDown reports that the connection went down mid-work.
var errDown = errors.New("mqtt connection down")

// New returns a Publisher. Nothing is published until Run.
func New(opt Options) (*Publisher, error) {
	if opt.Client == nil || opt.Trail == nil {
		return nil, errors.New("mqtt publisher: no client or no trail")
	}
	if err := CheckPrefix(opt.Topics.Prefix); err != nil {
		return nil, err
	}
	if opt.Queue <= 0 {
		opt.Queue = 4096
	}
	if opt.Window <= 0 {
		opt.Window = 256
	}
	if opt.MaxResync <= 0 {
		opt.MaxResync = 100000
	}
	opt.Clock = clock.Or(opt.Clock)
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	eng, err := newEngine(opt.Topics, opt.Table, opt.Driver, "online", opt.Config, opt.Logger)
	if err != nil {
		return nil, err
	}
	return &Publisher{
		opt: opt, log: opt.Logger, eng: eng,
		queue: make(chan queued, opt.Queue), wake: make(chan struct{}, 1), replies: make(chan signedcmd.Reply, 64),
	}, nil
}

// Commit queues a commit's rows for publishing. It never blocks: when the
// queue is full the rows are dropped and read back from the trail later.
// Call it from audit.RecorderOptions.OnCommit.
func (p *Publisher) Commit(c audit.Commit) {
	if len(c.Records) == 0 {
		return
	}
	select {
	case p.queue <- queued{recs: c.Records, at: time.Now()}:
	default:
		p.behind.Store(true)
		p.poke()
		return
	}
	// The publisher's goroutine, woken, runs now rather than after the
	// rest of the caller's work on the commit (logs, metrics, the next
	// read), which on a busy machine it would otherwise wait for. Only
	// when the publisher was waiting: a send to a goroutine waiting on
	// the channel hands the commit over directly and leaves the queue
	// empty; a busy publisher finds it queued.
	if len(p.queue) == 0 {
		runtime.Gosched()
	}
}

// WriteFailure reports that the trail cannot be written; status and
// pit/alerts say so until the trail takes a row again. It never blocks.
func (p *Publisher) WriteFailure(err error, _ coup.View) {
	p.failMu.Lock()
	p.fail = &failure{reason: err.Error(), head: p.opt.Trail.Head().Seq, at: p.opt.Clock.Now(), tampered: errors.Is(err, audit.ErrTampered)}
	p.failMu.Unlock()
	p.poke()
}

// Reply publishes a command reply that no trail row carries (the trail
// could not be written). It never blocks; a reply that finds the queue
// full is dropped.
func (p *Publisher) Reply(r signedcmd.Reply) {
	select {
	case p.replies <- r:
		p.poke()
	default:
		p.log.Warn("command reply dropped: too many waiting", "id", r.ID)
	}
}

func (p *Publisher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Acked is the sequence number up to which every row has been acknowledged
// by the broker.
func (p *Publisher) Acked() int64 { return p.acked.Load() }

// Waiting is how many rows the trail holds that the broker has not yet
// acknowledged: committed, and still to be published or in flight. It
// grows while the broker is away and shrinks as it catches up.
func (p *Publisher) Waiting() int64 {
	head := p.opt.Trail.Head().Seq
	var done int64
	switch {
	case p.started.Load():
		done = p.acked.Load()
	case p.opt.From > 0:
		done = p.opt.From - 1
	default:
		// Run has not started: it will begin after the head it finds.
		return 0
	}
	return max(0, head-done)
}

// Run publishes until ctx is done, then publishes what is still queued and
// the offline status, within a couple of seconds.
func (p *Publisher) Run(ctx context.Context) error {
	from := p.opt.From
	if from <= 0 {
		from = p.opt.Trail.Head().Seq + 1
	}
	if err := p.rebuild(ctx, from-1); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	p.applied = from - 1
	p.acked.Store(from - 1)
	p.started.Store(true)
	p.fresh, p.dirty = true, true
	for {
		up, changed := p.opt.Client.Connection()
		if !up {
			p.dropPending()
			p.fresh = true
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
			}
			continue
		}
		if changed != p.conn {
			// The connection changed since the last full publish, perhaps
			// down and up again between two looks: the broker may have lost
			// everything.
			p.fresh = true
		}
		if p.fresh {
			if err := p.reconnected(ctx, changed); err != nil {
				if ctx.Err() != nil {
					return p.stop()
				}
				continue
			}
			p.conn = changed
		}
		if err := p.work(ctx, changed); err != nil {
			if ctx.Err() != nil {
				return p.stop()
			}
			p.pause(ctx, changed, err)
			continue
		}
		select {
		case <-ctx.Done():
			return p.stop()
		case <-changed:
		case q := <-p.queue:
			if err := p.process(ctx, changed, q); err != nil {
				if ctx.Err() != nil {
					return p.stop()
				}
				p.pause(ctx, changed, err)
			}
		case <-p.wake:
		case <-p.frontDone():
			p.advance()
		}
	}
}

// pause waits a little after an error that is not the connection going
// (the trail could not be read), so a lasting fault does not spin.
func (p *Publisher) pause(ctx context.Context, changed <-chan struct{}, err error) {
	if errors.Is(err, errDown) {
		return
	}
	p.errs++
	d := min(time.Duration(1<<min(p.errs, 6))*100*time.Millisecond, 5*time.Second)
	p.log.Warn("mqtt publisher: will try again", "err", err, "in", d)
	t := p.opt.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-changed:
	case <-t.C():
	}
}

// rebuild applies the rows before the first one to publish.
func (p *Publisher) rebuild(ctx context.Context, to int64) error {
	if to < 1 {
		return nil
	}
	n := 0
	p.eng.quiet = true
	defer func() { p.eng.quiet = false }()
	from := int64(1)
	if st, ok := p.opt.Trail.(snapshotter); ok {
		snap, found, err := st.LastSnapshot(ctx, to)
		if err != nil {
			return fmt.Errorf("mqtt publisher: rebuild the table: %w", err)
		}
		if found {
			if err := p.eng.restore(snap); err != nil {
				return fmt.Errorf("mqtt publisher: rebuild the table: %w", err)
			}
			from = snap.Seq + 1
		}
	}
	for rec, err := range audit.Prefetch(p.opt.Trail.Events(ctx, audit.Query{From: from, To: to})) {
		if err != nil {
			return fmt.Errorf("mqtt publisher: rebuild the table: %w", err)
		}
		p.eng.apply(rec)
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	p.log.Info("mqtt publisher: table rebuilt from the trail", "from", from, "rows", n)
	return nil
}

// snapshotter is a trail that finds its newest snapshot row (audit.Store):
// the publisher then rebuilds from it instead of from row 1.
type snapshotter interface {
	LastSnapshot(ctx context.Context, to int64) (audit.Record, bool, error)
}

// reconnected republishes every retained topic and the rows the broker had
// not acknowledged when the connection went.
func (p *Publisher) reconnected(ctx context.Context, changed <-chan struct{}) error {
	if p.errs > 0 {
		// Publishes failed on a live connection: do not spin.
		d := min(time.Duration(1<<min(p.errs, 6))*100*time.Millisecond, 5*time.Second)
		t := p.opt.Clock.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			return errDown
		case <-t.C():
		}
	}
	p.dropPending()
	if c, ok, err := p.opt.Trail.LastCheckpoint(ctx); err != nil {
		p.log.Warn("mqtt publisher: read the last checkpoint", "err", err)
	} else if ok {
		p.eng.setCheckpoint(c)
	}
	p.takeFailure()
	g := group{seq: p.acked.Load()}
	for _, m := range p.eng.retainedMessages(true) {
		g.toks = append(g.toks, p.send(m))
	}
	p.push(g)
	p.dirty = false
	acked := p.acked.Load()
	if acked < p.applied {
		p.log.Info("mqtt publisher: sending again the rows not acknowledged", "from", acked+1, "to", p.applied)
		if err := p.pages(ctx, acked+1, p.applied, func(rec audit.Record) error {
			return p.emit(ctx, changed, rec, time.Time{})
		}); err != nil {
			return err
		}
	}
	p.fresh = false
	return nil
}

// work does what is due besides the queue: direct replies, a write
// failure, catching up after dropped commits, and retained state.
func (p *Publisher) work(ctx context.Context, changed <-chan struct{}) error {
	for more := true; more; {
		select {
		case r := <-p.replies:
			if m, ok := p.eng.msg(TopicCmdReply, 1, false, r); ok {
				p.push(group{seq: p.acked.Load(), toks: []mqttconn.Token{p.send(m)}})
			}
		default:
			more = false
		}
	}
	if p.takeFailure() {
		p.dirty = true
	}
	if p.behind.Load() && len(p.queue) == 0 {
		p.behind.Store(false)
		head := p.opt.Trail.Head().Seq
		if head > p.applied {
			p.log.Info("mqtt publisher: catching up from the trail", "from", p.applied+1, "to", head)
			if err := p.catchUp(ctx, changed, head); err != nil {
				p.behind.Store(true)
				return err
			}
		}
	}
	if p.dirty && len(p.queue) == 0 {
		p.publishRetained()
	}
	if p.shoeAfter > 0 && p.acked.Load() >= p.shoeAfter && len(p.queue) == 0 {
		p.publishShoe()
	}
	return nil
}

func (p *Publisher) takeFailure() bool {
	p.failMu.Lock()
	f := p.fail
	p.fail = nil
	p.failMu.Unlock()
	if f == nil {
		return false
	}
	p.eng.failing(f.reason, f.head, f.at, f.tampered)
	return true
}

// publishRetained sends the retained topics that changed. The table's
// views go out first. Pricing the shoe at the end of a coup (about a
// millisecond of CPU) waits until the broker has acknowledged the rows
// applied so far: run at once, it took a core of a two-core box while the
// coup's last card was on its way through the broker to the displays. It
// waits for those rows only, not for later ones, so a steady flow of rows
// does not hold it back for more than one round trip.
func (p *Publisher) publishRetained() {
	g := group{seq: p.acked.Load()}
	for _, m := range p.eng.viewMessages(false) {
		g.toks = append(g.toks, p.send(m))
	}
	if len(g.toks) > 0 {
		p.push(g)
	}
	p.dirty = false
	if p.eng.pricingDue() && p.acked.Load() < p.applied {
		if p.shoeAfter == 0 {
			p.shoeAfter = p.applied
		}
		return
	}
	p.publishShoe()
}

// publishShoe prices the shoe if a coup ended and sends pit/shoe and the
// alerts that go with it.
func (p *Publisher) publishShoe() {
	p.shoeAfter = 0
	g := group{seq: p.acked.Load()}
	for _, m := range p.eng.shoeMessages() {
		g.toks = append(g.toks, p.send(m))
	}
	if len(g.toks) > 0 {
		p.push(g)
	}
}

// process publishes one commit's rows, reading any rows it skipped from
// the trail first.
func (p *Publisher) process(ctx context.Context, changed <-chan struct{}, q queued) error {
	for _, rec := range q.recs {
		if rec.Seq <= p.applied {
			continue // already read from the trail
		}
		if rec.Seq > p.applied+1 {
			if err := p.catchUp(ctx, changed, rec.Seq-1); err != nil {
				p.behind.Store(true)
				return err
			}
		}
		if rec.Seq != p.applied+1 {
			p.behind.Store(true)
			return fmt.Errorf("mqtt publisher: row %d after %d", rec.Seq, p.applied)
		}
		if err := p.handle(ctx, changed, rec, q.at); err != nil {
			p.behind.Store(true)
			return err
		}
	}
	return nil
}

// catchUp reads and publishes the rows after the last applied, up to to.
func (p *Publisher) catchUp(ctx context.Context, changed <-chan struct{}, to int64) error {
	err := p.pages(ctx, p.applied+1, to, func(rec audit.Record) error {
		if rec.Seq != p.applied+1 {
			return fmt.Errorf("mqtt publisher: the trail gave row %d after %d", rec.Seq, p.applied)
		}
		return p.handle(ctx, changed, rec, time.Time{})
	})
	if err == nil {
		// Rows read back carry no checkpoint: take the latest from the trail.
		if c, ok, cerr := p.opt.Trail.LastCheckpoint(ctx); cerr == nil && ok {
			p.eng.setCheckpoint(c)
		}
	}
	return err
}

// pages reads rows from..to from the trail a page at a time, so no read
// holds one snapshot of the file for long.
func (p *Publisher) pages(ctx context.Context, from, to int64, f func(audit.Record) error) error {
	const page = 1024
	for lo := from; lo <= to; lo += page {
		hi := min(lo+page-1, to)
		for rec, err := range p.opt.Trail.Events(ctx, audit.Query{From: lo, To: hi}) {
			if err != nil {
				return err
			}
			if err := f(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// handle applies one new row and publishes what it calls for; at is when
// it was committed (zero for a row read back from the trail). The row's
// event depends on the row alone: it goes out first, and the table copy
// takes the row while the broker has it.
func (p *Publisher) handle(ctx context.Context, changed <-chan struct{}, rec audit.Record, at time.Time) error {
	first := p.send(p.eng.eventMessage(rec))
	if !at.IsZero() && len(p.queue) == 0 {
		// The newest commit's row: it goes from paho's goroutines to the
		// connection's writer now; the table copy's work (tens of
		// microseconds) comes after. Rows with more behind them are
		// gathered into fewer writes instead.
		runtime.Gosched()
	}
	p.eng.apply(rec)
	p.applied = rec.Seq
	p.dirty = true
	return p.emitAfter(ctx, changed, rec, at, first)
}

// emit publishes a row's event, its alert and reply, and carries out a
// resync it records; at times the row's publish (zero: untimed).
func (p *Publisher) emit(ctx context.Context, changed <-chan struct{}, rec audit.Record, at time.Time) error {
	return p.emitAfter(ctx, changed, rec, at, p.send(p.eng.eventMessage(rec)))
}

// emitAfter is emit once the row's event is sent (its token first).
func (p *Publisher) emitAfter(ctx context.Context, changed <-chan struct{}, rec audit.Record, at time.Time, first mqttconn.Token) error {
	toks := []mqttconn.Token{first}
	for _, m := range p.eng.rowMessages(rec) {
		toks = append(toks, p.send(m))
	}
	if b, ok := resyncOf(rec); ok {
		reply, err := p.resync(ctx, changed, rec, b)
		if err != nil {
			return err
		}
		if m, ok := p.eng.msg(TopicCmdReply, 1, false, reply); ok {
			toks = append(toks, p.send(m))
		}
	}
	p.push(group{seq: rec.Seq, toks: toks, at: at})
	return p.waitWindow(ctx, changed)
}

// resync sends the rows a resync command asks for again, on pit/events,
// and returns the reply to send after them. The resync row counts as
// acknowledged only once the rows and the reply are, so a resync cut short
// by a lost connection is done again.
func (p *Publisher) resync(ctx context.Context, changed <-chan struct{}, rec audit.Record, b signedcmd.AcceptedBody) (signedcmd.Reply, error) {
	from, to := b.From, rec.Seq-1
	if b.To > 0 && b.To < to {
		to = b.To // the asker's hole ends there: exactly the rows it lacks
	}
	r := signedcmd.Reply{ID: b.ID, Action: b.Action, By: b.By, Result: signedcmd.Accepted, Seq: rec.Seq, At: rec.At, From: from}
	switch {
	case from > to:
		r.Reason = fmt.Sprintf("nothing to send: the trail held rows up to %d", to)
	case to-from+1 > p.opt.MaxResync:
		to = from + p.opt.MaxResync - 1
		r.Reason = fmt.Sprintf("capped at %d rows: ask again from %d", p.opt.MaxResync, to+1)
	}
	if from <= to {
		r.To = to
		err := p.pages(ctx, from, to, func(old audit.Record) error {
			// Acknowledging these moves the mark no further than the row
			// before the resync.
			p.push(group{seq: rec.Seq - 1, toks: []mqttconn.Token{p.send(p.eng.eventMessage(old))}})
			return p.waitWindow(ctx, changed)
		})
		if err != nil {
			return r, err
		}
	}
	p.log.Info("resync sent", "id", b.ID, "by", b.By, "from", from, "to", r.To)
	return r, nil
}

func (p *Publisher) send(m Message) mqttconn.Token {
	if !p.bounded(m) {
		return doneToken{}
	}
	return p.opt.Client.Publish(m.Topic, m.QoS, m.Retained, m.Payload)
}

func (p *Publisher) push(g group) {
	p.pending = append(p.pending, g)
	p.inflight += len(g.toks)
}

func (p *Publisher) dropPending() {
	if len(p.pending) > 0 {
		p.fresh = true
	}
	p.pending, p.inflight = nil, 0
}

// frontDone is the channel of the oldest publish not yet acknowledged.
func (p *Publisher) frontDone() <-chan struct{} {
	for _, g := range p.pending {
		if len(g.toks) > 0 {
			return g.toks[0].Done()
		}
	}
	return nil
}

// advance moves the acknowledged mark over every row whose messages are
// all acknowledged, in order. A failed publish means the broker may not
// have it: everything from the first unacknowledged row is sent again.
func (p *Publisher) advance() {
	for len(p.pending) > 0 {
		g := &p.pending[0]
		for len(g.toks) > 0 {
			select {
			case <-g.toks[0].Done():
			default:
				return
			}
			if err := g.toks[0].Error(); err != nil {
				p.errs++
				p.log.Warn("mqtt publish failed; sending again from the last acknowledged row", "after", p.acked.Load(), "err", err)
				p.dropPending()
				p.fresh = true
				return
			}
			g.toks = g.toks[1:]
			p.inflight--
		}
		if g.seq > p.acked.Load() {
			p.acked.Store(g.seq)
		}
		if !g.at.IsZero() && p.opt.ObservePublish != nil {
			p.opt.ObservePublish(time.Since(g.at))
		}
		p.errs = 0
		p.pending = p.pending[1:]
	}
}

// waitWindow waits while too many publishes are unacknowledged.
func (p *Publisher) waitWindow(ctx context.Context, changed <-chan struct{}) error {
	for p.inflight > p.opt.Window {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
			return errDown
		case <-p.frontDone():
			p.advance()
			if p.fresh {
				return errDown
			}
		}
	}
	return nil
}

// stop publishes what is queued and the offline status, for up to two
// seconds, on the way out.
func (p *Publisher) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	up, changed := p.opt.Client.Connection()
	if !up || p.fresh {
		return nil
	}
	for more := true; more; {
		select {
		case q := <-p.queue:
			if p.process(ctx, changed, q) != nil {
				return nil
			}
		default:
			more = false
		}
	}
	if p.dirty {
		p.publishRetained()
	}
	if p.shoeAfter > 0 {
		p.publishShoe()
	}
	p.push(group{seq: p.acked.Load(), toks: []mqttconn.Token{p.send(Message{Topic: p.opt.Topics.Topic(TopicStatus), QoS: 1, Retained: true, Payload: offline(p.opt.Table)})}})
	for len(p.pending) > 0 && !p.fresh {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			return nil
		case <-p.frontDone():
			p.advance()
		}
	}
	return nil
}

// Offline is the status payload of the last will: give it to ConnOptions.
func Offline(table string) []byte { return offline(table) }
