package shoeread

import (
	"time"

	"github.com/tablectl/tablectl/coup"
)

// Rejections are recorded in the audit trail, each with its bytes, up to a
// budget, so line noise cannot turn into a row per byte: RejectBurst
// verbatim, then one a second; beyond that they are counted by reason and
// recorded as one summary a second. A version mismatch and a sequence
// number reused are always recorded verbatim: they suspend the table.
const (
	RejectBurst = 16
	rejectEvery = time.Second
)

// RejectLog decides which protocol errors become trail rows. It is not
// safe for concurrent use; the controller calls it from the port's one
// reader goroutine.
type RejectLog struct {
	tokens float64
	last   time.Time
	sum    *coup.Rejected // counted since sum.Since, not yet recorded
}

// NewRejectLog returns a RejectLog with a full budget.
func NewRejectLog() *RejectLog { return &RejectLog{tokens: RejectBurst} }

// Take returns the input recording e (a KindProtocolError other than a
// step back, which Input turns into a restart), or false when e is
// counted into the next summary.
func (l *RejectLog) Take(e Event, now time.Time) (coup.Input, bool) {
	reason := Reason(e.Err)
	l.refill(now)
	if l.tokens >= 1 || reason == coup.ReasonVersion || reason == coup.ReasonSeqReused {
		l.tokens = max(0, l.tokens-1)
		return coup.Input{Kind: coup.InRejected, ShoeSeq: 0, Rejected: &coup.Rejected{
			Reason: reason, Raw: e.Raw, Bytes: e.Rejected, Count: 1}}, true
	}
	if l.sum == nil {
		l.sum = &coup.Rejected{Reasons: map[string]int{}, Since: now.Round(0).UTC()}
	}
	l.sum.Count++
	l.sum.Bytes += e.Rejected
	l.sum.Reasons[reason]++
	return coup.Input{}, false
}

// Summary returns the summary of what was counted, once its second is
// over (or at once with force), and starts a new one.
func (l *RejectLog) Summary(now time.Time, force bool) (coup.Input, bool) {
	if l.sum == nil || (!force && now.Sub(l.sum.Since) < rejectEvery) {
		return coup.Input{}, false
	}
	s := l.sum
	l.sum = nil
	return coup.Input{Kind: coup.InRejected, Rejected: s}, true
}

func (l *RejectLog) refill(now time.Time) {
	if !l.last.IsZero() && now.After(l.last) {
		l.tokens = min(RejectBurst, l.tokens+float64(now.Sub(l.last))/float64(rejectEvery))
	}
	l.last = now
}
