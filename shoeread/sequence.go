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
	Reused     uint64 `json:"reused"`     // numbers repeated with other content
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
//   - Each sentence but a heartbeat carries the previous one's number plus
//     one; after 4294967295 comes 1 (0 is never used).
//   - A heartbeat carries the number of the last sentence the shoe sent and
//     does not advance the count, so that a controller which records every
//     sentence but heartbeats can restart without seeing a false gap.
//   - A jump forward is a gap: a KindGap event naming the missing numbers
//     comes before the event that revealed it, which is delivered. A
//     heartbeat carrying a number beyond the last one seen reveals the gap
//     last+1..its number: sentences the shoe sent and the controller never
//     got (the last card of a coup, say, with only heartbeats after it).
//   - HELO restarts the count: it should carry 1, and the sentences after it
//     continue from its number. A HELO carrying n > 1 means the shoe's first
//     n-1 sentences since its restart were missed, and is reported as a gap
//     1..n-1.
//   - The same number twice in a row, other than on a heartbeat, with the
//     same content, is a duplicate: reported as a protocol error
//     (ErrDuplicate) and not delivered again. With other content it is a
//     number reused: reported as a protocol error (ErrSeqReused, which
//     suspends the table) and delivered all the same, since a card it
//     names may have left the shoe: nothing is dropped unseen. When the
//     sentence the number was first on is not known (the count resumed
//     from the trail, or a heartbeat revealed it), the repeat is taken as
//     a duplicate.
//   - Any other step backwards without a HELO (the shoe restarted and its
//     HELO was lost, or it is misbehaving), heartbeats included, is reported
//     as a protocol error (ErrSeqBackwards) and the event is still
//     delivered, since a card the shoe numbered is a card that left it; the
//     count continues from there.
//
// Events without a sequence number (protocol errors, drivers with no
// numbers such as Bee-Tek) pass through untouched. Reports the Sequencer
// makes carry no sequence number and Rejected 0: the driver counted the
// bytes, and they were a valid sentence.
type Sequencer struct {
	last  uint32
	known bool // last is meaningful
	// prev is the sentence numbered last, to describe a duplicate; its Seq
	// is 0 when that sentence was never seen (last came from Resume, or from
	// a heartbeat that revealed a gap).
	prev  Event
	stats SequenceStats
}

// Resume makes last the number of the last sentence already recorded, so
// sentences the shoe sent while the controller was down show as a gap, and
// a heartbeat carrying last (nothing was sent meanwhile) shows none.
func (s *Sequencer) Resume(last uint32) {
	s.last, s.known, s.prev = last, last != 0, Event{}
}

// Last returns the number of the last sentence the shoe is known to have
// sent: the last one delivered, or the one a heartbeat announced; ok is
// false until one has been seen.
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
	if e.Kind == KindHeartbeat {
		return s.heartbeat(out, e)
	}
	if !s.known {
		return s.deliver(out, e)
	}
	want := next(s.last)
	switch {
	case e.Seq == want:
		return s.deliver(out, e)
	case e.Seq == s.last && s.prev.Seq == e.Seq && !sameSentence(s.prev, e):
		s.stats.Reused++
		err := fmt.Errorf("%w: %d again with different content (%q, then %q); both delivered",
			ErrSeqReused, e.Seq, s.prev.Raw, e.Raw)
		out = append(out, Event{Kind: KindProtocolError, Err: err, Raw: e.Raw})
		return s.deliver(out, e)
	case e.Seq == s.last:
		s.stats.Duplicates++
		err := fmt.Errorf("%w: %d again; the repeat was dropped", ErrDuplicate, e.Seq)
		if s.prev.Seq != e.Seq {
			err = fmt.Errorf("%w: %d again (%q), a number the shoe had already used; it was dropped",
				ErrDuplicate, e.Seq, e.Raw)
		}
		return append(out, Event{Kind: KindProtocolError, Err: err, Raw: e.Raw})
	case distance(want, e.Seq) <= seqHalf:
		out = s.gap(out, want, e.Seq-1) // 0 when e.Seq is 1: see gap
		return s.deliver(out, e)
	}
	return s.deliver(s.backwards(out, e), e)
}

// heartbeat checks a heartbeat's number, which is the last one the shoe
// used: the same as last is all well; ahead of it, the sentences between
// were lost; behind it, the count went back. A heartbeat is never a
// duplicate, and it leaves prev alone when it changes nothing, so that a
// repeat of the last sentence after it is still told apart from a
// different one; otherwise the sentence it numbers was never seen.
func (s *Sequencer) heartbeat(out []Event, e Event) []Event {
	switch {
	case s.known && e.Seq == s.last:
		return append(out, e)
	case !s.known:
	case distance(next(s.last), e.Seq) <= seqHalf:
		out = s.gap(out, next(s.last), e.Seq)
	default:
		out = s.backwards(out, e)
	}
	s.last, s.known, s.prev = e.Seq, true, Event{}
	return append(out, e)
}

// backwards reports e's number as a step back without a HELO; the caller
// delivers e all the same, and the count continues from it.
func (s *Sequencer) backwards(out []Event, e Event) []Event {
	s.stats.Backwards++
	return append(out, Event{
		Kind: KindProtocolError,
		Err: fmt.Errorf("%w: from %d to %d without a HELO; the shoe may have restarted unannounced",
			ErrSeqBackwards, s.last, e.Seq),
		Raw: e.Raw,
	})
}

func (s *Sequencer) deliver(out []Event, e Event) []Event {
	s.last, s.known, s.prev = e.Seq, true, e
	return append(out, e)
}

// gap reports the numbers from..to as missing. The range may run across
// the wrap from 4294967295 to 1 (from > to), and is then reported as two
// gaps, or one when to is 0: the numbers up to 4294967295.
func (s *Sequencer) gap(out []Event, from, to uint32) []Event {
	if from > to {
		out = s.gap(out, from, math.MaxUint32)
		if to == 0 { // the gap ended at 4294967295
			return out
		}
		from = 1
	}
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
