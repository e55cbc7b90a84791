package signedcmd

import (
	"maps"
	"time"
)

// KindRefusals records refused commands that got no row of their own: once
// refusals come faster than RefusalLimit allows, they are counted and
// summarised in one row per RefusalLimit.Summary, so a flood of junk on cmd
// cannot flood the trail. Its body is a RefusalsBody.
const KindRefusals = "ctl.command_refusals"

// RefusalsBody is the body of a KindRefusals row.
type RefusalsBody struct {
	// Count is how many commands were refused without a row of their own.
	Count int64 `json:"count"`
	// Bytes is their total size on the wire.
	Bytes int64 `json:"bytes"`
	// Codes counts them by refusal code.
	Codes map[string]int64 `json:"codes"`
	// From and To are when the first and the last of them arrived.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// RefusalLimit bounds the trail rows that refused commands write. Refusals
// spend tokens from a bucket that holds Burst and gains one every Every; a
// refusal that finds a token gets its own ctl.command_rejected row and its
// reply, as always. One that finds none is counted in a RefusalsBody that
// is written as one KindRefusals row Summary after the first of them, and
// gets no reply. Accepted commands take no token and are never summarised.
//
// So the trail grows by at most Burst + t/Every + t/Summary + 1 rows of
// refusals over t, whatever arrives on cmd.
type RefusalLimit struct {
	// Burst is how many refusals in a row get their own row; 0 is
	// DefaultRefusalBurst.
	Burst int
	// Every is how often the bucket gains a token; 0 is DefaultRefusalEvery.
	Every time.Duration
	// Summary is how long refusals without a row are gathered before their
	// summary is written; 0 is DefaultRefusalSummary.
	Summary time.Duration
}

// Defaults of RefusalLimit: ten refusals in a row, then one a second, which
// is more than supervisors mistyping ever send; the rest summarised every
// ten seconds.
const (
	DefaultRefusalBurst   = 10
	DefaultRefusalEvery   = time.Second
	DefaultRefusalSummary = 10 * time.Second
)

func (l RefusalLimit) withDefaults() RefusalLimit {
	if l.Burst <= 0 {
		l.Burst = DefaultRefusalBurst
	}
	if l.Every <= 0 {
		l.Every = DefaultRefusalEvery
	}
	if l.Summary <= 0 {
		l.Summary = DefaultRefusalSummary
	}
	return l
}

// refusalBucket is the token bucket and the summary being gathered. The
// Handler's mutex guards it.
type refusalBucket struct {
	started bool
	tokens  float64
	last    time.Time
	pending RefusalsBody // Count 0: nothing gathered
	// retry is the earliest the summary may be tried again after the trail
	// refused it, so a storm during an outage is not a write per refusal.
	retry time.Time
}

// take reports whether a refusal at now may have its own row, spending a
// token if so.
func (b *refusalBucket) take(l RefusalLimit, now time.Time) bool {
	if !b.started {
		b.started, b.tokens, b.last = true, float64(l.Burst), now
	}
	// A clock stepped back gives no tokens, and does not take any.
	if now.After(b.last) {
		b.tokens = min(float64(l.Burst), b.tokens+float64(now.Sub(b.last))/float64(l.Every))
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}

// gather counts a refusal without a row of its own; it reports whether it
// is the first of a new summary.
func (b *refusalBucket) gather(code string, size int, now time.Time) bool {
	p := &b.pending
	first := p.Count == 0
	if first {
		*p = RefusalsBody{Codes: map[string]int64{}, From: now}
	}
	p.Count++
	p.Bytes += int64(size)
	p.Codes[code]++
	if now.After(p.To) {
		p.To = now
	}
	return first
}

// due is when the summary being gathered must be written.
func (b *refusalBucket) due(l RefusalLimit) (time.Time, bool) {
	if b.pending.Count == 0 {
		return time.Time{}, false
	}
	due := b.pending.From.Add(l.Summary)
	if b.retry.After(due) {
		due = b.retry
	}
	return due, true
}

// takeSummary hands over the summary gathered and starts a new one.
func (b *refusalBucket) takeSummary() RefusalsBody {
	p := b.pending
	b.pending = RefusalsBody{}
	return p
}

// putBack merges a summary that could not be written at now into the one
// being gathered, so that none of its refusals go uncounted; it is tried
// again a Summary later.
func (b *refusalBucket) putBack(l RefusalLimit, old RefusalsBody, now time.Time) {
	b.retry = now.Add(l.Summary)
	p := &b.pending
	if p.Count == 0 {
		*p = old
		return
	}
	p.Count += old.Count
	p.Bytes += old.Bytes
	merged := maps.Clone(old.Codes)
	for code, n := range p.Codes {
		merged[code] += n
	}
	p.Codes = merged
	if old.From.Before(p.From) {
		p.From = old.From
	}
	if old.To.After(p.To) {
		p.To = old.To
	}
}
