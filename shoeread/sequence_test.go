package shoeread

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// hb, cut, hello and gap make events for the sequencer tables: cut is any
// numbered sentence that is not a heartbeat or a HELO.
func hb(seq uint32) Event  { return Event{Kind: KindHeartbeat, Seq: seq} }
func cut(seq uint32) Event { return Event{Kind: KindCutCard, Seq: seq} }
func hello(seq uint32) Event {
	return Event{Kind: KindHello, Seq: seq, Text: "S"}
}
func gap(from, to uint32) Event { return Event{Kind: KindGap, GapFrom: from, GapTo: to} }

func TestSequencer(t *testing.T) {
	const max = math.MaxUint32
	kh := Event{Kind: KindCard, Seq: 7, Card: card(t, "KH"), Raw: "$CARD,7,KH*20"}
	qs := Event{Kind: KindCard, Seq: 7, Card: card(t, "QS"), Raw: "$CARD,7,QS*21"}
	noise := Event{Kind: KindProtocolError, Err: ErrNoise, Rejected: 3, Raw: "abc"}
	dup := Event{Kind: KindProtocolError, Err: ErrDuplicate}
	back := Event{Kind: KindProtocolError, Err: ErrSeqBackwards}
	tests := []struct {
		name   string
		resume uint32
		in     []Event
		want   []Event
		stats  SequenceStats
	}{
		{name: "in order",
			in:   []Event{hello(1), cut(2), cut(3)},
			want: []Event{hello(1), cut(2), cut(3)}, stats: SequenceStats{Restarts: 1}},
		{name: "the first number seen is the baseline",
			in:   []Event{cut(100), cut(101)},
			want: []Event{cut(100), cut(101)}},
		{name: "a jump forward is a gap, reported before the event",
			in:   []Event{cut(1), cut(2), cut(5), cut(6)},
			want: []Event{cut(1), cut(2), gap(3, 4), cut(5), cut(6)}, stats: SequenceStats{Gaps: 1, Missing: 2}},
		{name: "one sentence missing",
			in:   []Event{cut(1), cut(3)},
			want: []Event{cut(1), gap(2, 2), cut(3)}, stats: SequenceStats{Gaps: 1, Missing: 1}},
		{name: "HELO restarts the count",
			in:   []Event{cut(49), cut(50), hello(1), cut(2)},
			want: []Event{cut(49), cut(50), hello(1), cut(2)}, stats: SequenceStats{Restarts: 1}},
		{name: "HELO carrying 3: its first two sentences were missed",
			in:   []Event{cut(50), hello(3), cut(4)},
			want: []Event{cut(50), gap(1, 2), hello(3), cut(4)}, stats: SequenceStats{Restarts: 1, Gaps: 1, Missing: 2}},
		{name: "the count continues from HELO's own number",
			in:   []Event{hello(3), cut(5)},
			want: []Event{gap(1, 2), hello(3), gap(4, 4), cut(5)}, stats: SequenceStats{Restarts: 1, Gaps: 2, Missing: 3}},
		{name: "a duplicate is reported, not delivered twice",
			in: []Event{cut(6), kh, kh, cut(8)},
			want: []Event{cut(6), kh,
				{Kind: KindProtocolError, Err: ErrDuplicate, Raw: kh.Raw}, cut(8)}, stats: SequenceStats{Duplicates: 1}},
		{name: "a number reused with other content is reported, and both are delivered",
			in: []Event{kh, qs, cut(8)},
			want: []Event{kh,
				{Kind: KindProtocolError, Err: ErrSeqReused, Raw: qs.Raw}, qs, cut(8)}, stats: SequenceStats{Reused: 1}},
		{name: "a step back without HELO is reported and the count follows it",
			in:   []Event{cut(9), cut(10), cut(4), cut(5)},
			want: []Event{cut(9), cut(10), back, cut(4), cut(5)}, stats: SequenceStats{Backwards: 1}},
		{name: "after 4294967295 comes 1",
			in:   []Event{cut(max - 1), cut(max), cut(1), cut(2)},
			want: []Event{cut(max - 1), cut(max), cut(1), cut(2)}},
		{name: "a gap across the wrap",
			in:   []Event{cut(max - 2), cut(2)},
			want: []Event{cut(max - 2), gap(max-1, max), gap(1, 1), cut(2)}, stats: SequenceStats{Gaps: 2, Missing: 3}},
		{name: "a gap up to the wrap",
			in:   []Event{cut(max - 2), cut(1)},
			want: []Event{cut(max - 2), gap(max-1, max), cut(1)}, stats: SequenceStats{Gaps: 1, Missing: 2}},
		{name: "half the number space ahead is still a gap",
			in:   []Event{cut(1), cut(2 + max/2)},
			want: []Event{cut(1), gap(2, 1+max/2), cut(2 + max/2)}, stats: SequenceStats{Gaps: 1, Missing: max / 2}},
		{name: "further ahead than half is a step back",
			in:   []Event{cut(1), cut(3 + max/2)},
			want: []Event{cut(1), back, cut(3 + max/2)}, stats: SequenceStats{Backwards: 1}},
		{name: "events with no number pass through",
			in:   []Event{cut(1), noise, {Kind: KindCard, Card: kh.Card}, cut(2)},
			want: []Event{cut(1), noise, {Kind: KindCard, Card: kh.Card}, cut(2)}},

		// Heartbeats carry the last number used and do not advance it.
		{name: "heartbeats repeat the last number, the next sentence follows it",
			in:   []Event{hello(1), hb(1), hb(1), cut(2), hb(2), hb(2), hb(2), cut(3)},
			want: []Event{hello(1), hb(1), hb(1), cut(2), hb(2), hb(2), hb(2), cut(3)}, stats: SequenceStats{Restarts: 1}},
		{name: "a heartbeat ahead reveals the sentences lost before it",
			in:   []Event{cut(41), cut(42), hb(44), hb(44), cut(45)},
			want: []Event{cut(41), cut(42), gap(43, 44), hb(44), hb(44), cut(45)}, stats: SequenceStats{Gaps: 1, Missing: 2}},
		{name: "a heartbeat one ahead: the last sentence was lost",
			in:   []Event{cut(42), hb(43)},
			want: []Event{cut(42), gap(43, 43), hb(43)}, stats: SequenceStats{Gaps: 1, Missing: 1}},
		{name: "the sentence a heartbeat revealed as lost, arriving after it, is a duplicate",
			in:   []Event{cut(42), hb(43), cut(43), cut(44)},
			want: []Event{cut(42), gap(43, 43), hb(43), dup, cut(44)}, stats: SequenceStats{Gaps: 1, Missing: 1, Duplicates: 1}},
		{name: "a heartbeat behind is a step back and the count follows it",
			in:   []Event{cut(9), cut(10), hb(4), cut(5)},
			want: []Event{cut(9), cut(10), back, hb(4), cut(5)}, stats: SequenceStats{Backwards: 1}},
		{name: "a heartbeat is the baseline when it comes first",
			in:   []Event{hb(100), hb(100), cut(101)},
			want: []Event{hb(100), hb(100), cut(101)}},
		{name: "a heartbeat first, then a sentence with its number, is a duplicate",
			in:   []Event{hb(100), cut(100)},
			want: []Event{hb(100), dup}, stats: SequenceStats{Duplicates: 1}},
		{name: "a repeat after a heartbeat is still a duplicate",
			in:   []Event{cut(6), kh, hb(7), kh, cut(8)},
			want: []Event{cut(6), kh, hb(7), {Kind: KindProtocolError, Err: ErrDuplicate, Raw: kh.Raw}, cut(8)}, stats: SequenceStats{Duplicates: 1}},
		{name: "a heartbeat after HELO carries 1",
			in:   []Event{cut(50), hb(50), hello(1), hb(1), cut(2)},
			want: []Event{cut(50), hb(50), hello(1), hb(1), cut(2)}, stats: SequenceStats{Restarts: 1}},
		{name: "heartbeats across the wrap",
			in:   []Event{cut(max), hb(max), cut(1), hb(1)},
			want: []Event{cut(max), hb(max), cut(1), hb(1)}},
		{name: "a heartbeat reveals a gap across the wrap",
			in:   []Event{cut(max - 1), hb(2)},
			want: []Event{cut(max - 1), gap(max, max), gap(1, 2), hb(2)}, stats: SequenceStats{Gaps: 2, Missing: 3}},
		{name: "a heartbeat reveals a gap up to the wrap",
			in:   []Event{cut(max - 2), hb(max)},
			want: []Event{cut(max - 2), gap(max-1, max), hb(max)}, stats: SequenceStats{Gaps: 1, Missing: 2}},
		{name: "a heartbeat further ahead than half is a step back",
			in:   []Event{cut(1), hb(3 + max/2)},
			want: []Event{cut(1), back, hb(3 + max/2)}, stats: SequenceStats{Backwards: 1}},
		{name: "a heartbeat half the number space ahead is a gap",
			in:   []Event{cut(1), hb(2 + max/2)},
			want: []Event{cut(1), gap(2, 2+max/2), hb(2 + max/2)}, stats: SequenceStats{Gaps: 1, Missing: max/2 + 1}},

		// A controller restart: it resumes from the last number it recorded
		// (heartbeats are not recorded).
		{name: "resume: the next number is in order", resume: 10,
			in:   []Event{cut(11)},
			want: []Event{cut(11)}},
		{name: "resume: nothing sent meanwhile, a heartbeat carries the last number", resume: 10,
			in:   []Event{hb(10), hb(10), cut(11)},
			want: []Event{hb(10), hb(10), cut(11)}},
		{name: "resume: sentences sent while down are a gap", resume: 10,
			in:   []Event{cut(14)},
			want: []Event{gap(11, 13), cut(14)}, stats: SequenceStats{Gaps: 1, Missing: 3}},
		{name: "resume: sentences sent while down, then only heartbeats, are a gap", resume: 10,
			in:   []Event{hb(13), hb(13), cut(14)},
			want: []Event{gap(11, 13), hb(13), hb(13), cut(14)}, stats: SequenceStats{Gaps: 1, Missing: 3}},
		{name: "resume: the last recorded number again is a duplicate", resume: 10,
			in:   []Event{cut(10), cut(11)},
			want: []Event{dup, cut(11)}, stats: SequenceStats{Duplicates: 1}},
		{name: "resume: the shoe restarted meanwhile and its HELO was missed", resume: 10,
			in:   []Event{hb(3), cut(4)},
			want: []Event{back, hb(3), cut(4)}, stats: SequenceStats{Backwards: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Sequencer
			if tt.resume != 0 {
				s.Resume(tt.resume)
			}
			var got []Event
			for _, e := range tt.in {
				got = append(got, s.Observe(e)...)
			}
			sameEvents(t, got, tt.want)
			if s.Stats() != tt.stats {
				t.Errorf("stats %+v, want %+v", s.Stats(), tt.stats)
			}
		})
	}
}

// The restart property the protocol exists for: a controller that records
// every sentence but heartbeats, stopped anywhere in a shoe's stream and
// resumed from the last number it recorded, sees a gap exactly when a
// sentence that is not a heartbeat went out while it was down, and the gap
// names exactly those sentences.
func TestSequencerRestartSeesOnlyWhatWasMissed(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 2000; trial++ {
		// The shoe's stream: HELO, then sentences and heartbeats at random,
		// numbered by the rule written out here.
		stream := []Event{hello(1)}
		var n uint32 = 1
		for len(stream) < 40 {
			if rng.IntN(3) == 0 {
				stream = append(stream, hb(n))
			} else {
				n++
				stream = append(stream, cut(n))
			}
		}
		down := rng.IntN(len(stream) - 1)             // the controller stops after this one
		up := down + 1 + rng.IntN(len(stream)-down-1) // and hears again from this one
		// What it had recorded: every sentence but heartbeats.
		var recorded uint32
		for _, e := range stream[:down+1] {
			if e.Kind != KindHeartbeat {
				recorded = e.Seq
			}
		}
		var missed []uint32 // numbered sentences sent while it was down
		for _, e := range stream[down+1 : up] {
			if e.Kind != KindHeartbeat {
				missed = append(missed, e.Seq)
			}
		}
		var s Sequencer
		s.Resume(recorded)
		var gaps []Event
		for _, e := range stream[up:] {
			for _, o := range s.Observe(e) {
				switch o.Kind {
				case KindGap:
					gaps = append(gaps, o)
				case KindProtocolError:
					t.Fatalf("trial %d: %v", trial, o.Err)
				}
			}
		}
		switch {
		case len(missed) == 0 && len(gaps) != 0:
			t.Fatalf("trial %d: nothing missed (down after %s, up at %s), yet %s", trial, fmtEvent(stream[down]), fmtEvent(stream[up]), fmtEvents(gaps))
		case len(missed) > 0 && (len(gaps) != 1 || gaps[0].GapFrom != missed[0] || gaps[0].GapTo != missed[len(missed)-1]):
			t.Fatalf("trial %d: missed %v, gaps %s", trial, missed, fmtEvents(gaps))
		}
	}
}

func TestSequencerDuplicateSaysWhatDiffered(t *testing.T) {
	var s Sequencer
	s.Observe(Event{Kind: KindCard, Seq: 7, Card: card(t, "KH"), Raw: "$CARD,7,KH*20"})
	got := s.Observe(Event{Kind: KindCard, Seq: 7, Card: card(t, "QS"), Raw: "$CARD,7,QS*21"})
	if len(got) != 2 || !errors.Is(got[0].Err, ErrSeqReused) || !strings.Contains(got[0].Err.Error(), "different content") ||
		!strings.Contains(got[0].Err.Error(), "$CARD,7,QS*21") || got[1].Card != card(t, "QS") {
		t.Errorf("got %v", got)
	}
	// The same again: now a duplicate of the second.
	if got := s.Observe(Event{Kind: KindCard, Seq: 7, Card: card(t, "QS"), Raw: "$CARD,7,QS*21"}); len(got) != 1 || !errors.Is(got[0].Err, ErrDuplicate) {
		t.Errorf("the second sentence again: %v", got)
	}
	// A number known only from a heartbeat or a restart: nothing to
	// compare with, so the error says the number was used already.
	s.Observe(Event{Kind: KindHeartbeat, Seq: 8, Raw: "$HB,8*1E"})
	got = s.Observe(Event{Kind: KindCard, Seq: 8, Card: card(t, "QS"), Raw: "$CARD,8,QS*2E"})
	if len(got) != 1 || !strings.Contains(got[0].Err.Error(), "already used") ||
		strings.Contains(got[0].Err.Error(), "different content") {
		t.Errorf("got %v", got[0].Err)
	}
}

func TestSequencerLast(t *testing.T) {
	var s Sequencer
	if _, ok := s.Last(); ok {
		t.Error("a fresh sequencer knows no last number")
	}
	s.Observe(cut(41))
	s.Observe(Event{Kind: KindProtocolError, Err: ErrNoise})
	if n, ok := s.Last(); !ok || n != 41 {
		t.Errorf("Last() = %d, %v; want 41, true", n, ok)
	}
	// A heartbeat announcing a later number moves Last: the shoe used it.
	s.Observe(hb(43))
	if n, ok := s.Last(); !ok || n != 43 {
		t.Errorf("after a heartbeat carrying 43, Last() = %d, %v; want 43, true", n, ok)
	}
	s.Resume(0)
	if _, ok := s.Last(); ok {
		t.Error("Resume(0) means nothing recorded")
	}
}

func TestReaderReportsDroppedSentences(t *testing.T) {
	r := NewReader(NewV1())
	in := line("HELO,1,1,S") + line("CARD,2,KH") + "$CARD,3,9S*00\r\n" + line("CARD,4,QD")
	got := r.Decode([]byte(in))
	want := []Event{
		{Kind: KindHello, Seq: 1, Text: "S", Raw: raw(line("HELO,1,1,S"))},
		{Kind: KindCard, Seq: 2, Card: card(t, "KH"), Raw: raw(line("CARD,2,KH"))},
		{Kind: KindProtocolError, Err: ErrChecksum, Rejected: 15, Raw: "$CARD,3,9S*00"},
		gap(3, 3),
		{Kind: KindCard, Seq: 4, Card: card(t, "QD"), Raw: raw(line("CARD,4,QD"))},
	}
	sameEvents(t, got, want)
	if r.Name() != "v1" || !r.Guarantees().Sequenced || r.Stats().RejectedRuns != 1 {
		t.Errorf("reader passes through name %q, guarantees %+v, stats %+v", r.Name(), r.Guarantees(), r.Stats())
	}
	if n, _ := r.Sequencer().Last(); n != 4 {
		t.Errorf("last %d, want 4", n)
	}
	if evs := r.Decode(nil); evs != nil {
		t.Errorf("nothing in, %v out", evs)
	}
}

func TestReaderPassesBeetekThrough(t *testing.T) {
	r := NewReader(NewBeetek())
	got := r.Decode([]byte(" [Game]<Card:4S>  [Game]<Card:4S> "))
	if len(got) != 2 || got[0].Kind != KindCard || got[1].Kind != KindCard {
		t.Errorf("two identical Bee-Tek cards are two cards, got %s", fmtEvents(got))
	}
	if r.Guarantees() != (Guarantees{}) {
		t.Errorf("guarantees %+v", r.Guarantees())
	}
}

var _ Driver = (*Reader)(nil)
