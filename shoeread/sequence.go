package shoeread

import (
	"fmt"
	"math"
)

// SequenceStats count what a Sequencer has seen go wrong.
type SequenceStats struct {
	Gaps       uint64 `json:"gaps"`       // gap events reported
	Missing    uint64 `json:"missing"`    // sequence numbers in those gaps
	Duplicates uint64 `json:"duplicates"` // sentences dropped as repeats
	Backwards  uint64 `json:"backwards"`  // jumps back without a HELO
	Restarts   uint64 `json:"restarts"`   // HELOs seen
}

// Sequencer checks the shoe's sequence numbers, so that a sentence lost to
// noise, to an unplugged cable or to a controller restart is reported rather
// than silently missed. The zero Sequencer is ready: it takes the first
// number it sees as its starting point (call Resume first to continue from
// a number already recorded).
//
// The rules, as docs/shoe-protocol.md states them for the shoe:
//   - Each sentence carries the previous one's number plus one; after
//     4294967295 comes 1 (0 is never used).
//   - A jump forward is a gap: a KindGap event naming the missing numbers
//     comes before the event that revealed it, which is delivered.
//   - HELO restarts the count: it should carry 1, and the sentences after it
//     continue from its number. A HELO carrying n > 1 means the shoe's first
//     n-1 sentences since its restart were missed, and is reported as a gap
//     1..n-1.
//   - The same number twice in a row is a duplicate: reported as a protocol
//     error (ErrDuplicate) and not delivered again.
//   - Any other step backwards without a HELO (the shoe restarted and its
//     HELO was lost, or it is misbehaving) is reported as a protocol error
//     (ErrSeqBackwards) and the event is still delivered, since a card the
//     shoe numbered is a card that left it; the count continues from there.
//
// Events without a sequence number (protocol errors, drivers with no
// numbers such as Bee-Tek) pass through untouched. Reports the Sequencer
// makes carry no sequence number and Rejected 0: the driver counted the
// bytes, and they were a valid sentence.
type Sequencer struct {
	last  uint32
	known bool  // last is meaningful
	prev  Event // the last event delivered, to describe a duplicate
	stats SequenceStats
}

// Resume makes last the number of the last sentence already recorded, so
// sentences the shoe sent while the controller was down show as a gap.
func (s *Sequencer) Resume(last uint32) {
	s.last, s.known, s.prev = last, last != 0, Event{}
}

// Last returns the number of the last sentence delivered; ok is false until
// one has been.
func (s *Sequencer) Last() (seq uint32, ok bool) { return s.last, s.known }

// Stats counts the anomalies seen so far.
func (s *Sequencer) Stats() SequenceStats { return s.stats }

// Observe checks e's sequence number and returns what to deliver in its
// place: e alone, or reports followed by e, or a report alone.
func (s *Sequencer) Observe(e Event) []Event { return s.observe(nil, e) }

// seqHalf is half the sequence space: a number within half of it ahead of the
// expected one is a jump forward, beyond that a step back.
const seqHalf = math.MaxUint32 / 2

func (s *Sequencer) observe(out []Event, e Event) []Event {
	if e.Seq == 0 {
		return append(out, e)
	}
	if e.Kind == KindHello {
		s.stats.Restarts++
		if e.Seq != 1 {
			out = s.gap(out, 1, e.Seq-1)
		}
		return s.deliver(out, e)
	}
	if !s.known {
		return s.deliver(out, e)
	}
	want := next(s.last)
	switch {
	case e.Seq == want:
		return s.deliver(out, e)
	case e.Seq == s.last:
		s.stats.Duplicates++
		err := fmt.Errorf("%w: %d again; the repeat was dropped", ErrDuplicate, e.Seq)
		if s.prev.Seq == e.Seq && !sameSentence(s.prev, e) {
			err = fmt.Errorf("%w: %d again with different content (%q, then %q); the second was dropped",
				ErrDuplicate, e.Seq, s.prev.Raw, e.Raw)
		}
		return append(out, Event{Kind: KindProtocolError, Err: err, Raw: e.Raw})
	case distance(want, e.Seq) <= seqHalf:
		if e.Seq > want {
			out = s.gap(out, want, e.Seq-1)
		} else { // the gap spans the wrap from 4294967295 to 1
			out = s.gap(out, want, math.MaxUint32)
			if e.Seq > 1 {
				out = s.gap(out, 1, e.Seq-1)
			}
		}
		return s.deliver(out, e)
	}
	s.stats.Backwards++
	out = append(out, Event{
		Kind: KindProtocolError,
		Err: fmt.Errorf("%w: from %d to %d without a HELO; the shoe may have restarted unannounced",
			ErrSeqBackwards, s.last, e.Seq),
		Raw: e.Raw,
	})
	return s.deliver(out, e)
}

func (s *Sequencer) deliver(out []Event, e Event) []Event {
	s.last, s.known, s.prev = e.Seq, true, e
	return append(out, e)
}

func (s *Sequencer) gap(out []Event, from, to uint32) []Event {
	s.stats.Gaps++
	s.stats.Missing += uint64(to-from) + 1
	return append(out, Event{Kind: KindGap, GapFrom: from, GapTo: to})
}

// next is the number after n: n+1, and 1 after 4294967295.
func next(n uint32) uint32 {
	if n == math.MaxUint32 {
		return 1
	}
	return n + 1
}

// distance counts the steps forward from a to b on the ring 1..4294967295.
func distance(a, b uint32) uint32 {
	if b >= a {
		return b - a
	}
	return math.MaxUint32 - a + b // a..MaxUint32, then 1..b
}

// sameSentence reports whether two events with one sequence number say the
// same thing (Raw may differ only in the checksum's letter case).
func sameSentence(a, b Event) bool {
	return a.Kind == b.Kind && a.Card == b.Card && a.Unreadable == b.Unreadable &&
		a.Burn == b.Burn && a.Button == b.Button && a.Status == b.Status && a.Text == b.Text
}

// Reader is a Driver with a Sequencer behind it: bytes in, events out with
// gaps, duplicates and jumps back in the shoe's numbering already reported.
// It is what the controller reads a shoe through.
type Reader struct {
	d   Driver
	seq Sequencer
}

// NewReader reads the shoe through d.
func NewReader(d Driver) *Reader { return &Reader{d: d} }

// Name is the driver's name.
func (r *Reader) Name() string { return r.d.Name() }

// Guarantees are the driver's.
func (r *Reader) Guarantees() Guarantees { return r.d.Guarantees() }

// Stats are the driver's; Sequencer().Stats() has the sequence anomalies.
func (r *Reader) Stats() Stats { return r.d.Stats() }

// Sequencer is the reader's sequence checker, to Resume it after a restart.
func (r *Reader) Sequencer() *Sequencer { return &r.seq }

// Decode decodes p and checks the sequence of what it completes.
func (r *Reader) Decode(p []byte) []Event {
	evs := r.d.Decode(p)
	if len(evs) == 0 {
		return nil
	}
	out := make([]Event, 0, len(evs))
	for _, e := range evs {
		out = r.seq.observe(out, e)
	}
	return out
}
