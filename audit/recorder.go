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

	"github.com/tablectl/tablectl/internal/clock"

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
	if err := probeWritable(path); err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		vo := VerifyOptions{}
		if key, err := checkSigner(opt.Key); err != nil {
			return nil, err
		} else if key != nil {
			vo.PublicKeys = []ed25519.PublicKey{SignerPublic(key)}
		}
		rep, err := Verify(ctx, path, vo)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", path, err)
		}
		if !rep.OK() {
			return nil, fmt.Errorf("verify %s: %d findings, first: %s at seq %d: %s", path, len(rep.Findings),
				rep.Findings[0].Kind, rep.Findings[0].Seq, rep.Findings[0].Detail)
		}
	}
	st, err := Open(ctx, path, Options{Table: opt.Table, Clock: opt.Clock, Key: opt.Key, CheckpointEvery: opt.CheckpointEvery, Logger: opt.Logger})
	if err != nil {
		return nil, err
	}
	r := &Recorder{opt: opt, clock: clock.Or(opt.Clock), log: opt.Logger, store: st, changed: make(chan struct{}, 1)}
	if err := r.rebuild(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return r, nil
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
	dir := filepath.Dir(path)
	probe, err := os.CreateTemp(dir, ".tablectl-probe-*")
	if err != nil {
		return fmt.Errorf("%w: audit trail %s: its directory %s is read-only or not writable: %v", ErrWriteFailed, path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// rebuild replays the whole trail into a table and records the
// configuration and this start.
func (r *Recorder) rebuild(ctx context.Context) error {
	var lastCfg json.RawMessage
	rp, err := Replay(r.store.Events(ctx, Query{}), r.opt.Config, ReplayVisitor{
		Input: func(_ Record, in coup.Input, _ []coup.Event, _ *coup.Table) { r.lastAt = in.At },
		Other: func(rec Record) {
			if rec.Kind == KindConfig {
				lastCfg = rec.Body
			}
		},
	})
	if err != nil {
		return fmt.Errorf("rebuild from %s: %w", r.store.Path(), err)
	}
	if d := rp.Differences(); len(d) > 0 {
		return fmt.Errorf("%w: %d rows, first at seq %d (%s): %s", ErrTrailDiffers, len(d), d[0].Seq, d[0].Kind, d[0].Detail)
	}
	r.table = rp.Table()
	var events []Event
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
	events = append(events, Event{Kind: KindStart, Shoe: int64(r.table.ShoeNumber()), Body: start})
	if _, err := r.store.AppendBatch(ctx, events); err != nil {
		return fmt.Errorf("record the start: %w", err)
	}
	r.log.Info("trail rebuilt", "path", r.store.Path(), "rows", rp.Rows(), "shoe", r.table.ShoeNumber(),
		"coup", r.table.CoupNumber(), "phase", r.table.Phase(), "suspended", r.table.Suspended())
	return nil
}

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
	recs, err := r.store.AppendBatch(ctx, evs)
	if err != nil {
		return nil, err
	}
	if r.opt.ObserveCommit != nil {
		r.opt.ObserveCommit(time.Since(start), len(recs))
	}
	r.table = next
	r.lastAt = ins[len(ins)-1].At
	select {
	case r.changed <- struct{}{}:
	default:
	}
	for i := range cs {
		cs[i].Records = recs[bounds[i]:bounds[i+1]]
		if r.opt.OnCommit != nil {
			r.opt.OnCommit(cs[i])
		}
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

// Close signs a last checkpoint and closes the trail.
func (r *Recorder) Close() error {
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
