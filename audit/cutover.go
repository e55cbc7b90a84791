package audit

// The recorder's cut-over from one sealed segment to the next: when the
// gaming day has ended and the table is between coups.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// SegmentPolicy says when a directory trail cuts over to a new segment:
// at the first moment after the gaming day ends (Cutover, in Location) that
// the table is between coups (coup.Table.BetweenCoups: a coup's result is
// final and the next coup's betting has not opened, or no shoe is in play).
// A cut never falls inside a coup: a table still dealing at the hour is cut
// after that coup's result, and one idle with betting open after the result
// of its next coup.
type SegmentPolicy struct {
	// Cutover is the time of day the gaming day begins (6 h: 06:00).
	Cutover time.Duration
	// Location is the zone Cutover is read in; nil is UTC.
	Location *time.Location
	// EveryShoes, when set, also cuts once this many whole shoes have ended
	// in the live segment, at the end of the last of them (no shoe in play).
	EveryShoes int
	// OnSealed hears of each segment sealed and left behind (the path of
	// its file), for archiving. It is called after the cut, while the
	// recorder's lock is held: it must not block (queue and return).
	OnSealed func(path string)

	// period, when set, replaces the gaming day by periods of this length
	// from the Unix epoch (tests that cut over every few seconds).
	period time.Duration
}

func (p *SegmentPolicy) loc() *time.Location {
	if p.Location == nil {
		return time.UTC
	}
	return p.Location
}

// DayStart is when the gaming day holding t began.
func (p *SegmentPolicy) DayStart(t time.Time) time.Time {
	if p.period > 0 {
		return t.Truncate(p.period)
	}
	lt := t.In(p.loc())
	h, m := int(p.Cutover/time.Hour), int(p.Cutover%time.Hour/time.Minute)
	s := time.Date(lt.Year(), lt.Month(), lt.Day(), h, m, 0, 0, p.loc())
	if lt.Before(s) {
		s = time.Date(lt.Year(), lt.Month(), lt.Day()-1, h, m, 0, 0, p.loc())
	}
	return s
}

// DayEnd is when the gaming day holding t ends: the cut-over is due.
func (p *SegmentPolicy) DayEnd(t time.Time) time.Time {
	s := p.DayStart(t)
	if p.period > 0 {
		return s.Add(p.period)
	}
	h, m := int(p.Cutover/time.Hour), int(p.Cutover%time.Hour/time.Minute)
	return time.Date(s.Year(), s.Month(), s.Day()+1, h, m, 0, 0, p.loc())
}

// DayName names the gaming day holding t, as segment names carry it:
// 20261125 (with the time when days are shorter than a day, in tests).
func (p *SegmentPolicy) DayName(t time.Time) string {
	if p.period > 0 {
		return p.DayStart(t).UTC().Format("20060102T150405")
	}
	return p.DayStart(t).Format("20060102")
}

// cutState is a recorder's segment state; its fields are guarded by the
// recorder's lock.
type cutState struct {
	policy *SegmentPolicy
	day    string    // the live segment's gaming day
	due    time.Time // when it ends
	// shoe is the table's shoe number when the segment opened: the shoes
	// ended since are counted for EveryShoes.
	shoe int
	// pending: the live segment is sealed, or its successor lacks its
	// opening snapshot; nothing else is written until that is done.
	pending bool
	// retryAt: a cut-over put off (ErrCutPutOff) is not tried again
	// before then.
	retryAt time.Time
	// sealed is the segment this run sealed, until the cut is finished
	// (OnSealed is told then), and sealSeq its seal row.
	sealed  string
	sealSeq int64
}

// CutRetry is how long a cut-over that could not make the next segment
// waits before it is tried again (the live segment goes on meanwhile).
const CutRetry = 10 * time.Second

// initCut sets the cut-over from the live segment's first row (now for an
// empty one): a controller that was off at the hour cuts at its first
// moment between coups.
func (r *Recorder) initCut(ctx context.Context) error {
	p := r.opt.Segments
	first := r.clock.Now()
	shoe := 0
	base := r.store.Base()
	for rec, err := range r.store.Events(ctx, Query{From: base.Seq + 1, To: base.Seq + 1}) {
		if err != nil {
			return fmt.Errorf("audit segment %s: %w", r.store.Path(), err)
		}
		first, shoe = rec.At, int(rec.Shoe)
	}
	r.seg = &cutState{policy: p, day: p.DayName(first), due: p.DayEnd(first), shoe: shoe}
	return nil
}

// maybeCut cuts over after a commit when the gaming day has ended and the
// table is between coups. The caller holds r.mu.
func (r *Recorder) maybeCut(ctx context.Context, at time.Time) {
	if r.seg == nil || !r.table.BetweenCoups() || later(r.clock.Now(), at).Before(r.seg.retryAt) {
		return
	}
	switch {
	case !at.Before(r.seg.due):
		r.cutLocked(ctx, "cutover")
	case r.seg.policy.EveryShoes > 0 && r.table.Phase() == coup.PhaseNoShoe && r.table.ShoeNumber()-r.seg.shoe >= r.seg.policy.EveryShoes:
		r.cutLocked(ctx, "shoes")
	}
}

// CutIfDue cuts over now if the gaming day has ended and the table is
// between coups (RunTimers asks every minute, for a table left idle). It
// reports whether it cut.
func (r *Recorder) CutIfDue(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seg == nil || r.failing != nil || r.clock.Now().Before(r.seg.due) || r.clock.Now().Before(r.seg.retryAt) || !r.table.BetweenCoups() {
		return false
	}
	return r.cutLocked(ctx, "cutover") == nil
}

// Cut seals the live segment and opens the next now, if the table is
// between coups (tablectl's tests and the bench; the recorder cuts by
// itself at the end of the gaming day).
func (r *Recorder) Cut(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seg == nil {
		return fmt.Errorf("audit cut: the trail is one file, not a directory of segments")
	}
	if !r.table.BetweenCoups() {
		return fmt.Errorf("audit cut: the table is in a coup (%s)", r.table.Phase())
	}
	return r.cutLocked(ctx, "cutover")
}

// cutLocked seals the live segment (its seal row and a signed checkpoint of
// it, one transaction) and opens the next with a snapshot of the table.
// The next segment is made and opened before the seal is written
// (Store.CutOver): if it cannot be (no descriptor, no room for a file),
// nothing is sealed, the live segment goes on, and the cut is tried again
// CutRetry later; no input is lost to it. A failure once the seal is
// written is a trail write failure: the table is suspended until the next
// segment is open. The caller holds r.mu.
func (r *Recorder) cutLocked(ctx context.Context, reason string) error {
	st := r.store
	sealed := st.Path()
	now := r.clock.Now()
	if r.lastAt.After(now) {
		now = r.lastAt // the inputs' own times, when they came stamped
	}
	rec, wrote, err := st.CutOver(ctx, SealBody{Segment: filepath.Base(sealed), FirstSeq: st.Base().Seq + 1, Day: r.seg.day, Reason: reason},
		r.seg.policy.DayName(now))
	if !wrote {
		if err == nil {
			err = errors.New("audit cut-over: nothing sealed")
		}
		r.seg.retryAt = now.Add(CutRetry)
		if !errors.Is(err, ErrCutPutOff) {
			r.fail(err)
			return err
		}
		r.log.Warn("audit cut-over put off: the next segment could not be made; the live one goes on", "err", err, "retry_in", CutRetry)
		return err
	}
	r.seg.retryAt = time.Time{}
	r.seg.pending, r.seg.sealed, r.seg.sealSeq = true, sealed, rec.Seq
	r.notify([]Record{rec})
	if err != nil {
		// Sealed, and the next segment not open: nothing is written until
		// it is (finishCut, at the next commit or retry).
		r.fail(err)
		return err
	}
	return r.finishCut(ctx)
}

// finishCut opens the segment after a sealed one and writes its opening
// snapshot, whichever of the two is left to do (after a failure, or a
// start that found the live segment sealed). The caller holds r.mu.
func (r *Recorder) finishCut(ctx context.Context) error {
	now := r.clock.Now()
	if r.lastAt.After(now) {
		now = r.lastAt // the inputs' own times, when they came stamped
	}
	if r.store.Sealed() {
		if err := r.store.NextSegment(ctx, r.seg.policy.DayName(now)); err != nil {
			r.fail(err)
			return err
		}
		cutHook("opened")
	}
	if r.store.Empty() {
		ev, err := SnapshotEvent(r.table, r.lastAt)
		if err != nil {
			return err
		}
		recs, err := r.store.AppendBatch(ctx, []Event{ev})
		if err != nil {
			r.fail(err)
			return err
		}
		r.snapSeq = recs[0].Seq
		r.notify(recs)
		cutHook("snapshot")
	}
	r.seg.pending = false
	r.seg.day, r.seg.due, r.seg.shoe = r.seg.policy.DayName(now), r.seg.policy.DayEnd(now), r.table.ShoeNumber()
	if sealed := r.seg.sealed; sealed != "" {
		// Told once the cut is whole, even when it was finished later.
		r.seg.sealed = ""
		r.log.Info("audit segment sealed; the next one is open", "sealed", sealed, "seal_seq", r.seg.sealSeq, "next", r.store.Path(), "day", r.seg.day)
		if p := r.seg.policy; p.OnSealed != nil {
			p.OnSealed(sealed)
		}
	}
	return nil
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// notify tells OnCommit of rows that are not the table's inputs.
func (r *Recorder) notify(recs []Record) {
	if r.opt.OnCommit != nil {
		r.opt.OnCommit(Commit{Records: recs, Public: r.table.PublicView(), Pit: r.table.PitView()})
	}
}

// cutHook hears each step of a cut-over: the kill tests stop the process
// there.
var cutHook = func(step string) {}
