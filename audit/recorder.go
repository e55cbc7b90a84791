package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
)

// RecorderOptions configure a Recorder.
type RecorderOptions struct {
	// Table is the table id.
	Table string
	// Config is the table configuration; it is recorded (KindConfig) when
	// it differs from the one the trail last recorded.
	Config coup.TableConfig
	// Clock stamps inputs and rows; nil is the system clock.
	Clock clock.Clock
	// Key signs checkpoints; CheckpointEvery is how often (events).
	Key             Signer
	CheckpointEvery int64
	Logger          *slog.Logger
	// OnCommit is called after every commit, in commit order, while the
	// recorder's lock is held: it must not block (queue and return).
	OnCommit func(Commit)
	// OnWriteFailure is called when the trail cannot be written, so the
	// failure can be told by every channel still open. It must not block.
	OnWriteFailure func(err error, v coup.View)
	// ObserveCommit hears how long each commit took (apply, append and
	// fsync) and how many rows it wrote, for the metrics. It must not block.
	ObserveCommit func(d time.Duration, rows int)
	// Version is the running build (internal/buildinfo), recorded in each
	// start row so a row can be traced to the code that wrote it.
	Version string
	// SnapshotEvery is how many rows may pass between two snapshots of the
	// table (KindSnapshot): a start replays at most about that many. 0 is
	// the package's SnapshotEvery; negative writes none.
	SnapshotEvery int64
	// NoHistoryCheck leaves out the background verification of the rows
	// before the snapshot a start used (tests of other things).
	NoHistoryCheck bool
	// NoPrepare leaves each commit to begin its own transaction, so the
	// trail's write lock is free between commits, as it is for a moment
	// after each one (Store.Prepare): for tests that play an insider who
	// writes the live file in that moment.
	NoPrepare bool
	// Segments, when set, makes the trail a directory of sealed segments
	// (OpenDir), cut over as it says; nil keeps the trail one file.
	Segments *SegmentPolicy
	// MoveFrom, with Segments, is a single-file trail that becomes the
	// directory's first segment, sealed, before the start (MoveIntoDir);
	// nothing is done once it has moved.
	MoveFrom string
}

// Commit is what one committed input produced: its rows (the input first,
// then the events derived from it) and the table as it now stands.
type Commit struct {
	Records []Record
	Input   coup.Input
	Events  []coup.Event
	Public  coup.View
	Pit     coup.View
}

// Recorder is the controller's single writer: it owns the table state
// machine and the trail, and applies each input to the table only when the
// input and everything the table derives from it are committed together, so
// nothing is published or acted on that is not recorded first.
type Recorder struct {
	opt   RecorderOptions
	clock clock.Clock
	log   *slog.Logger
	store *Store

	changed chan struct{} // a commit happened: deadlines may have moved

	mu      sync.Mutex
	table   *coup.Table
	lastAt  time.Time // the last input's time: inputs never go back before it
	failing error     // the last write failure, until a write succeeds again
	lost    lostInput // what was not recorded while failing
	snapSeq int64     // the last snapshot row, 0 if none
	start   StartInfo
	seg     *cutState // a directory trail's cut-over; nil for one file

	history historyCheck
}

// StartInfo says how a recorder rebuilt its table.
type StartInfo struct {
	// Snapshot is the snapshot row the table was restored from, 0 for a
	// replay from row 1 (a trail with no snapshot, or a new one).
	Snapshot int64
	// Replayed is how many rows were replayed on top of it.
	Replayed int64
	// Verified is how many rows were verified before dealing: the whole
	// trail, or from the snapshot on.
	Verified int64
	// First is the first row this start wrote (the configuration when it
	// changed, else the start row): publishing begins there.
	First int64
}

// lostInput tallies the inputs a failing trail could not take.
type lostInput struct {
	count          int
	seqFrom, seqTo uint32
}

// ErrTrailDiffers reports a trail whose rows are not what the rules derive
// from its inputs: the controller will not start on it.
var ErrTrailDiffers = errors.New("trail differs from what the rules derive")

// OpenRecorder verifies the trail at path (when it exists), rebuilds the
// table from it, and opens it for writing. A trail that fails verification,
// or whose rows differ from what the rules derive, is refused: the
// controller must not deal on a record it cannot trust.
func OpenRecorder(ctx context.Context, path string, opt RecorderOptions) (*Recorder, error) {
	opt.Clock = clock.Or(opt.Clock)
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.SnapshotEvery == 0 {
		opt.SnapshotEvery = SnapshotEvery
	}
	exists := false
	if opt.Segments != nil {
		if err := probeWritableDir(path); err != nil {
			return nil, err
		}
		if opt.MoveFrom != "" {
			if err := MoveIntoDir(ctx, opt.MoveFrom, path, opt.Segments.DayName(opt.Clock.Now()),
				Options{Table: opt.Table, Clock: opt.Clock, Key: opt.Key, CheckpointEvery: opt.CheckpointEvery, Logger: opt.Logger}); err != nil {
				return nil, err
			}
		}
		segs, err := ListSegments(path)
		if err != nil {
			return nil, err
		}
		exists = len(segs) > 0
	} else {
		if err := probeWritable(path); err != nil {
			return nil, err
		}
		_, err := os.Stat(path)
		exists = err == nil
	}
	var keys []ed25519.PublicKey
	if key, err := checkSigner(opt.Key); err != nil {
		return nil, err
	} else if key != nil {
		keys = []ed25519.PublicKey{SignerPublic(key)}
	}
	var snap *Record
	var verified int64
	if exists {
		rep, s, err := verifyForStart(ctx, path, keys)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", path, err)
		}
		if !rep.OK() {
			if len(rep.Findings) == 0 {
				return nil, fmt.Errorf("verify %s: %s", path, rep.Unverifiable)
			}
			return nil, fmt.Errorf("verify %s: %d findings, first: %s at seq %d: %s", path, len(rep.Findings),
				rep.Findings[0].Kind, rep.Findings[0].Seq, rep.Findings[0].Detail)
		}
		snap, verified = s, rep.Events
	}
	stOpt := Options{Table: opt.Table, Clock: opt.Clock, Key: opt.Key, CheckpointEvery: opt.CheckpointEvery, Logger: opt.Logger}
	var st *Store
	var err error
	if opt.Segments != nil {
		st, err = OpenDir(ctx, path, opt.Segments.DayName(opt.Clock.Now()), stOpt)
	} else {
		st, err = Open(ctx, path, stOpt)
	}
	if err != nil {
		return nil, err
	}
	r := &Recorder{opt: opt, clock: clock.Or(opt.Clock), log: opt.Logger, store: st, changed: make(chan struct{}, 1)}
	r.start.Verified = verified
	if err := r.rebuild(ctx, snap); err != nil {
		st.Close()
		return nil, err
	}
	if opt.Segments != nil {
		// After the rebuild: a segment the last run made but never wrote
		// has its opening snapshot now, whose shoe and time count.
		if err := r.initCut(ctx); err != nil {
			st.Close()
			return nil, err
		}
	}
	if snap != nil && !opt.NoHistoryCheck {
		r.history.start(r, keys, snap.Seq)
	}
	return r, nil
}

// verifyForStart checks what a start needs. With a snapshot in the trail,
// that is the chain from the newest snapshot to the head and the signed
// checkpoint of the head (Reader.VerifyFrom): time that does not grow with
// the history. Without one, the whole trail.
func verifyForStart(ctx context.Context, path string, keys []ed25519.PublicKey) (*Report, *Record, error) {
	rd, err := OpenReader(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	defer rd.Close()
	snap, ok, err := rd.LastSnapshot(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		// The newest checkpoint's signature and the chain (Verify's
		// default), as from a snapshot: a start must not wait for a
		// signature per commit.
		rep, err := rd.Verify(ctx, VerifyOptions{PublicKeys: keys})
		return rep, nil, err
	}
	rep, err := rd.VerifyFrom(ctx, snap.Seq, keys)
	return rep, &snap, err
}

// probeWritable refuses, naming the file, a trail the controller could not
// write: it must not start dealing on a record it cannot extend.
func probeWritable(path string) error {
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: audit trail %s is read-only or cannot be opened for writing: %v", ErrWriteFailed, path, err)
	}
	// SQLite also writes its -wal, -shm and lock files beside the trail.
	return probeWritableDir(filepath.Dir(path))
}

// probeWritableDir refuses a directory the controller could not write its
// trail's files into, creating it if it does not exist.
func probeWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("%w: audit trail directory %s cannot be made: %v", ErrWriteFailed, dir, err)
	}
	probe, err := os.CreateTemp(dir, ".tablectl-probe-*")
	if err != nil {
		return fmt.Errorf("%w: audit trail directory %s is read-only or not writable: %v", ErrWriteFailed, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// rebuild restores the table from the snapshot (nil: a new table) and
// replays the rows after it, then records the configuration and this start.
func (r *Recorder) rebuild(ctx context.Context, snap *Record) error {
	var lastCfg json.RawMessage
	v := ReplayVisitor{
		Input: func(_ Record, in coup.Input, _ []coup.Event, _ *coup.Table) { r.lastAt = in.At },
		Other: func(rec Record) {
			if rec.Kind == KindConfig {
				lastCfg = rec.Body
			}
		},
	}
	var rp *Replayer
	var err error
	from := int64(1)
	if snap != nil {
		if rp, err = NewReplayerFrom(*snap, v); err != nil {
			return fmt.Errorf("rebuild from %s: %w", r.store.Path(), err)
		}
		r.lastAt, r.snapSeq, from = rp.lastAt, snap.Seq, snap.Seq+1
		if lastCfg, err = CanonicalJSON(rp.Table().Config()); err != nil {
			return fmt.Errorf("rebuild from %s: %w", r.store.Path(), err)
		}
	} else if rp, err = NewReplayer(r.opt.Config, v); err != nil {
		return err
	}
	for rec, err := range Prefetch(r.store.Events(ctx, Query{From: from})) {
		if err != nil {
			return fmt.Errorf("rebuild from %s: %w", r.store.Path(), err)
		}
		rp.Row(rec)
		if rec.Kind == KindSnapshot {
			r.snapSeq = rec.Seq
		}
	}
	rp.Finish()
	if d := rp.Differences(); len(d) > 0 {
		return fmt.Errorf("%w: %d rows, first at seq %d (%s): %s", ErrTrailDiffers, len(d), d[0].Seq, d[0].Kind, d[0].Detail)
	}
	r.table = rp.Table()
	r.start.Replayed = rp.Rows()
	if snap != nil {
		r.start.Snapshot = snap.Seq
	}
	var events []Event
	opening := r.opt.Segments != nil && r.store.Empty() && r.store.Base().Seq > 0
	if opening {
		// A segment whose opening snapshot the last run did not write:
		// it comes first, so the segment replays alone.
		ev, err := SnapshotEvent(r.table, r.lastAt)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	if lastCfg == nil || !sameConfig(lastCfg, r.opt.Config) {
		if err := r.table.Reconfigure(r.opt.Config); err != nil {
			return err
		}
		events = append(events, Event{Kind: KindConfig, Body: r.opt.Config})
	}
	start := map[string]any{
		"table": r.store.Table(), "rows_replayed": rp.Rows(), "phase": r.table.Phase(), "suspended": r.table.Suspended(),
	}
	if r.opt.Version != "" {
		start["version"] = r.opt.Version
	}
	if snap != nil {
		start["snapshot"] = snap.Seq
	}
	events = append(events, Event{Kind: KindStart, Shoe: int64(r.table.ShoeNumber()), Body: start})
	if r.opt.SnapshotEvery > 0 && rp.Rows() >= min(r.opt.SnapshotEvery, 1000) && !opening {
		// The next start replays from here.
		ev, err := SnapshotEvent(r.table, r.lastAt)
		if err != nil {
			return err
		}
		events = append(events, ev)
	}
	recs, err := r.store.AppendBatch(ctx, events)
	if err != nil {
		return fmt.Errorf("record the start: %w", err)
	}
	if last := recs[len(recs)-1]; last.Kind == KindSnapshot {
		r.snapSeq = last.Seq
	}
	if opening {
		r.snapSeq = recs[0].Seq
	}
	r.start.First = recs[0].Seq
	r.log.Info("trail rebuilt", "path", r.store.Path(), "snapshot", r.start.Snapshot, "rows_replayed", rp.Rows(), "rows_verified", r.start.Verified,
		"shoe", r.table.ShoeNumber(), "coup", r.table.CoupNumber(), "phase", r.table.Phase(), "suspended", r.table.Suspended())
	return nil
}

// Start says how the table was rebuilt.
func (r *Recorder) Start() StartInfo { return r.start }

// sameConfig compares a recorded configuration with the one in force.
func sameConfig(recorded json.RawMessage, cfg coup.TableConfig) bool {
	var old coup.TableConfig
	if err := json.Unmarshal(recorded, &old); err != nil {
		return false
	}
	// Compare through JSON, as recorded.
	a, err1 := CanonicalJSON(old)
	b, err2 := CanonicalJSON(cfg)
	return err1 == nil && err2 == nil && reflect.DeepEqual(a, b)
}

// Submit stamps an input (when its At is zero), applies it to a copy of the
// table, and commits the input and everything derived from it in one
// transaction; only then does the table take the new state and OnCommit
// hear of it. When the trail cannot be written the table keeps its state,
// the failure is reported through OnWriteFailure, and the error wraps
// ErrWriteFailed: the input is not accepted. Once a write succeeds again,
// an InAuditFailed input recording the outage (and the shoe sentences lost
// to it) goes in first, which suspends the table.
func (r *Recorder) Submit(ctx context.Context, in coup.Input) (Commit, error) {
	cs, err := r.SubmitBatch(ctx, []coup.Input{in})
	if err != nil {
		return Commit{}, err
	}
	return cs[0], nil
}

// SubmitBatch is Submit for several inputs that arrived together (the
// sentences of one read of the shoe's port): they are applied in order and
// committed in ONE transaction, one fsync for all (group commit), and
// OnCommit hears of each in turn. The write-ahead rule is the same: nothing
// of the batch is applied or published unless all of it is recorded; if
// the trail fails, all of it is refused.
func (r *Recorder) SubmitBatch(ctx context.Context, ins []coup.Input) ([]Commit, error) {
	if len(ins) == 0 {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range ins {
		if ins[i].At.IsZero() {
			ins[i].At = r.clock.Now()
		}
		// Wall time only, in UTC: what is recorded is what replay will see.
		// Never before the input recorded last: an estimated time (a
		// backlog read after a restart) or a clock stepped back would
		// otherwise run the trail's times backwards.
		ins[i].At = ins[i].At.Round(0).UTC()
		last := r.lastAt
		if i > 0 {
			last = ins[i-1].At
		}
		if ins[i].At.Before(last) {
			ins[i].At = last
		}
	}
	if r.failing != nil {
		if err := r.recordOutage(ctx, ins[0].At); err != nil {
			for _, in := range ins {
				r.lose(in)
			}
			return nil, err
		}
	}
	cs, err := r.commit(ctx, ins)
	if err != nil {
		r.fail(err)
		for _, in := range ins {
			r.lose(in)
		}
		return nil, err
	}
	return cs, nil
}

// commit applies ins to a copy of the table and commits them in one
// transaction; the table moves on only when the commit succeeded.
func (r *Recorder) commit(ctx context.Context, ins []coup.Input) ([]Commit, error) {
	start := time.Now()
	if r.seg != nil && r.seg.pending {
		if err := r.finishCut(ctx); err != nil {
			return nil, err
		}
	}
	next := r.table.Clone()
	var evs []Event
	cs := make([]Commit, len(ins))
	bounds := make([]int, len(ins)+1)
	for i, in := range ins {
		evs = append(evs, inputEvent(in, next))
		derived := next.Apply(in)
		evs = append(evs, tableEvents(derived)...)
		bounds[i+1] = len(evs)
		cs[i] = Commit{Input: in, Events: derived, Public: next.PublicView(), Pit: next.PitView()}
	}
	snap := false
	if every := r.opt.SnapshotEvery; every > 0 && r.store.Head().Seq+int64(len(evs))-r.snapSeq >= every {
		// Rarely (every SnapshotEvery rows): the table as this commit
		// leaves it, in the same transaction, after the commit's rows.
		if ev, err := SnapshotEvent(next, ins[len(ins)-1].At); err != nil {
			r.log.Error("table snapshot does not encode; carrying on without", "err", err)
		} else {
			evs = append(evs, ev)
			bounds[len(ins)] = len(evs)
			snap = true
		}
	}
	recs, err := r.store.AppendBatch(ctx, evs)
	if err != nil {
		return nil, err
	}
	if snap {
		r.snapSeq = recs[len(recs)-1].Seq
	}
	took := time.Since(start)
	r.table = next
	r.lastAt = ins[len(ins)-1].At
	// The commit's hook first (it hands the rows to the publisher); the
	// metrics and the timers' wake-up are not the display's time.
	for i := range cs {
		cs[i].Records = recs[bounds[i]:bounds[i+1]]
		if r.opt.OnCommit != nil {
			r.opt.OnCommit(cs[i])
		}
	}
	if r.opt.ObserveCommit != nil {
		r.opt.ObserveCommit(took, len(recs))
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
	r.maybeCut(ctx, r.lastAt)
	// The next commit's BEGIN and head check, now that this one is
	// handed on: a card's commit is then its inserts and COMMIT.
	if !r.opt.NoPrepare {
		r.store.Prepare()
	}
	return cs, nil
}

// recordOutage records that the trail could not be written, once it can be
// again.
func (r *Recorder) recordOutage(ctx context.Context, at time.Time) error {
	in := coup.Input{Kind: coup.InAuditFailed, At: at, Text: fmt.Sprintf("%v (%d inputs lost)", r.failing, r.lost.count),
		GapFrom: r.lost.seqFrom, GapTo: r.lost.seqTo}
	if _, err := r.commit(ctx, []coup.Input{in}); err != nil {
		r.fail(err)
		return err
	}
	r.log.Warn("audit trail writable again; outage recorded", "lost_inputs", r.lost.count)
	r.failing, r.lost = nil, lostInput{}
	return nil
}

func (r *Recorder) fail(err error) {
	first := r.failing == nil
	r.failing = err
	select { // RunTimers retries the trail from now on
	case r.changed <- struct{}{}:
	default:
	}
	tampered := errors.Is(err, ErrTampered)
	if first && !tampered { // the store logged the tampering itself, naming the rows
		r.log.Error("audit trail cannot be written: the table is suspended until it can", "err", err)
	}
	if r.opt.OnWriteFailure != nil {
		v := r.table.PitView()
		v.Suspended = true
		v.SuspendReason = "audit trail cannot be written"
		if tampered {
			v.SuspendReason = "audit trail tampered"
		}
		r.opt.OnWriteFailure(err, v)
	}
}

func (r *Recorder) lose(in coup.Input) {
	r.lost.count++
	if in.ShoeSeq > 0 {
		if r.lost.seqFrom == 0 || in.ShoeSeq < r.lost.seqFrom {
			r.lost.seqFrom = in.ShoeSeq
		}
		if in.ShoeSeq > r.lost.seqTo {
			r.lost.seqTo = in.ShoeSeq
		}
	}
}

// Failing reports the write failure holding the trail, if any.
func (r *Recorder) Failing() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failing
}

// View returns the public and pit views of the table.
func (r *Recorder) View() (public, pit coup.View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.PublicView(), r.table.PitView()
}

// Recall is the last coups with every card (last-game recall).
func (r *Recorder) Recall() []coup.CoupRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Recall()
}

// Remaining is the shoe's composition as the table knows it.
func (r *Recorder) Remaining() coup.Shoe {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Remaining()
}

// LastInputAt is when the last input recorded came (rebuilt from the trail
// at start): after a restart, what the shoe sent since waited in its
// buffer.
func (r *Recorder) LastInputAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastAt
}

// LastShoeSeq is the last shoe sequence number recorded, for the reader's
// sequence check after a restart.
func (r *Recorder) LastShoeSeq() uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.LastShoeSeq()
}

// Deadline is when the table next wants a tick.
func (r *Recorder) Deadline() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.table.Deadline()
}

// Record appends a row that is not a table input (KindRejected and the
// like), committed like any other.
func (r *Recorder) Record(ctx context.Context, e Event) (Record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seg != nil && r.seg.pending {
		if err := r.finishCut(ctx); err != nil {
			return Record{}, err
		}
	}
	recs, err := r.store.AppendBatch(ctx, []Event{e})
	if err != nil {
		r.fail(err)
		return Record{}, err
	}
	if r.opt.OnCommit != nil {
		r.opt.OnCommit(Commit{Records: recs, Public: r.table.PublicView(), Pit: r.table.PitView()})
	}
	return recs[0], nil
}

// Store is the trail, for reads (resync, recall, export).
func (r *Recorder) Store() *Store { return r.store }

// Close stops the history check, signs a last checkpoint and closes the
// trail.
func (r *Recorder) Close() error {
	r.history.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.store.Close()
}

// RunTimers feeds the table a tick whenever a deadline it set passes
// (betting time, result time), until ctx is done. It waits on the
// recorder's clock.
func (r *Recorder) RunTimers(ctx context.Context) error {
	fire := r.clock.NewTimer(time.Hour)
	fire.Stop()
	retry := r.clock.NewTicker(OutageRetry)
	defer func() { fire.Stop(); retry.Stop() }()
	var cutC <-chan time.Time
	if p := r.opt.Segments; p != nil {
		// A table left idle between coups at the hour is cut within a
		// minute of it, not at its next coup.
		every := time.Minute
		if p.period > 0 {
			every = min(every, p.period/4)
		}
		cut := r.clock.NewTicker(every)
		defer cut.Stop()
		cutC = cut.C()
	}
	for {
		deadline, ok := r.Deadline()
		fireC, retryC := (<-chan time.Time)(nil), (<-chan time.Time)(nil)
		if ok {
			fire.Reset(max(0, deadline.Sub(r.clock.Now())))
			fireC = fire.C()
		} else {
			fire.Stop()
		}
		if r.Failing() != nil {
			retryC = retry.C()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.changed:
		case <-retryC:
			r.RetryTrail(ctx)
		case <-cutC:
			r.CutIfDue(ctx)
		case <-fireC:
			// A timer may fire a hair early by the clock: the tick is
			// stamped no earlier than the deadline it is for.
			at := r.clock.Now()
			if at.Before(deadline) {
				at = deadline
			}
			if _, err := r.Submit(ctx, coup.Input{Kind: coup.InTick, At: at}); err != nil {
				r.log.Warn("tick not recorded", "err", err)
			}
		}
	}
}

// OutageRetry is how often RunTimers tries a trail that could not be
// written, so the outage is recorded (and the table alerted) as soon as the
// trail takes writes again, not only when the next input comes.
const OutageRetry = time.Second

// RetryTrail records the outage now if the trail failed and can be written
// again; it reports whether the trail is writable.
func (r *Recorder) RetryTrail(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing == nil {
		return true
	}
	return r.recordOutage(ctx, r.clock.Now().Round(0).UTC()) == nil
}
