package shoeread

import (
	"math"
	"strings"
	"testing"
)

// hb and cd make numbered events for the sequencer tables.
func hb(seq uint32) Event { return Event{Kind: KindHeartbeat, Seq: seq} }
func hello(seq uint32) Event {
	return Event{Kind: KindHello, Seq: seq, Text: "S"}
}
func gap(from, to uint32) Event { return Event{Kind: KindGap, GapFrom: from, GapTo: to} }

func TestSequencer(t *testing.T) {
	const max = math.MaxUint32
	kh := Event{Kind: KindCard, Seq: 7, Card: card(t, "KH"), Raw: "$CARD,7,KH*20"}
	qs := Event{Kind: KindCard, Seq: 7, Card: card(t, "QS"), Raw: "$CARD,7,QS*21"}
	noise := Event{Kind: KindProtocolError, Err: ErrNoise, Rejected: 3, Raw: "abc"}
	tests := []struct {
		name   string
		resume uint32
		in     []Event
		want   []Event
		stats  SequenceStats
	}{
		{name: "in order",
			in:   []Event{hello(1), hb(2), hb(3)},
			want: []Event{hello(1), hb(2), hb(3)}, stats: SequenceStats{Restarts: 1}},
		{name: "the first number seen is the baseline",
			in:   []Event{hb(100), hb(101)},
			want: []Event{hb(100), hb(101)}},
		{name: "a jump forward is a gap, reported before the event",
			in:   []Event{hb(1), hb(2), hb(5), hb(6)},
			want: []Event{hb(1), hb(2), gap(3, 4), hb(5), hb(6)}, stats: SequenceStats{Gaps: 1, Missing: 2}},
		{name: "one sentence missing",
			in:   []Event{hb(1), hb(3)},
			want: []Event{hb(1), gap(2, 2), hb(3)}, stats: SequenceStats{Gaps: 1, Missing: 1}},
		{name: "HELO restarts the count",
			in:   []Event{hb(49), hb(50), hello(1), hb(2)},
			want: []Event{hb(49), hb(50), hello(1), hb(2)}, stats: SequenceStats{Restarts: 1}},
		{name: "HELO carrying 3: its first two sentences were missed",
			in:   []Event{hb(50), hello(3), hb(4)},
			want: []Event{hb(50), gap(1, 2), hello(3), hb(4)}, stats: SequenceStats{Restarts: 1, Gaps: 1, Missing: 2}},
		{name: "the count continues from HELO's own number",
			in:   []Event{hello(3), hb(5)},
			want: []Event{gap(1, 2), hello(3), gap(4, 4), hb(5)}, stats: SequenceStats{Restarts: 1, Gaps: 2, Missing: 3}},
		{name: "a duplicate is reported, not delivered twice",
			in: []Event{hb(6), kh, kh, hb(8)},
			want: []Event{hb(6), kh,
				{Kind: KindProtocolError, Err: ErrDuplicate, Raw: kh.Raw}, hb(8)}, stats: SequenceStats{Duplicates: 1}},
		{name: "a duplicate number with other content is reported too",
			in: []Event{kh, qs, hb(8)},
			want: []Event{kh,
				{Kind: KindProtocolError, Err: ErrDuplicate, Raw: qs.Raw}, hb(8)}, stats: SequenceStats{Duplicates: 1}},
		{name: "a step back without HELO is reported and the count follows it",
			in: []Event{hb(9), hb(10), hb(4), hb(5)},
			want: []Event{hb(9), hb(10),
				{Kind: KindProtocolError, Err: ErrSeqBackwards}, hb(4), hb(5)}, stats: SequenceStats{Backwards: 1}},
		{name: "after 4294967295 comes 1",
			in:   []Event{hb(max - 1), hb(max), hb(1), hb(2)},
			want: []Event{hb(max - 1), hb(max), hb(1), hb(2)}},
		{name: "a gap across the wrap",
			in:   []Event{hb(max - 2), hb(2)},
			want: []Event{hb(max - 2), gap(max-1, max), gap(1, 1), hb(2)}, stats: SequenceStats{Gaps: 2, Missing: 3}},
		{name: "a gap up to the wrap",
			in:   []Event{hb(max - 2), hb(1)},
			want: []Event{hb(max - 2), gap(max-1, max), hb(1)}, stats: SequenceStats{Gaps: 1, Missing: 2}},
		{name: "half the number space ahead is still a gap",
			in:   []Event{hb(1), hb(2 + max/2)},
			want: []Event{hb(1), gap(2, 1+max/2), hb(2 + max/2)}, stats: SequenceStats{Gaps: 1, Missing: max / 2}},
		{name: "further ahead than half is a step back",
			in: []Event{hb(1), hb(3 + max/2)},
			want: []Event{hb(1),
				{Kind: KindProtocolError, Err: ErrSeqBackwards}, hb(3 + max/2)}, stats: SequenceStats{Backwards: 1}},
		{name: "events with no number pass through",
			in:   []Event{hb(1), noise, {Kind: KindCard, Card: kh.Card}, hb(2)},
			want: []Event{hb(1), noise, {Kind: KindCard, Card: kh.Card}, hb(2)}},
		{name: "resume: the next number is in order", resume: 10,
			in:   []Event{hb(11)},
			want: []Event{hb(11)}},
		{name: "resume: sentences sent while down are a gap", resume: 10,
			in:   []Event{hb(14)},
			want: []Event{gap(11, 13), hb(14)}, stats: SequenceStats{Gaps: 1, Missing: 3}},
		{name: "resume: the last recorded number again is a duplicate", resume: 10,
			in:   []Event{hb(10), hb(11)},
			want: []Event{{Kind: KindProtocolError, Err: ErrDuplicate}, hb(11)}, stats: SequenceStats{Duplicates: 1}},
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

func TestSequencerDuplicateSaysWhatDiffered(t *testing.T) {
	var s Sequencer
	s.Observe(Event{Kind: KindCard, Seq: 7, Card: card(t, "KH"), Raw: "$CARD,7,KH*20"})
	got := s.Observe(Event{Kind: KindCard, Seq: 7, Card: card(t, "QS"), Raw: "$CARD,7,QS*21"})
	if len(got) != 1 || !strings.Contains(got[0].Err.Error(), "different content") ||
		!strings.Contains(got[0].Err.Error(), "$CARD,7,QS*21") {
		t.Errorf("got %v", got[0].Err)
	}
}

func TestSequencerLast(t *testing.T) {
	var s Sequencer
	if _, ok := s.Last(); ok {
		t.Error("a fresh sequencer knows no last number")
	}
	s.Observe(hb(41))
	s.Observe(Event{Kind: KindProtocolError, Err: ErrNoise})
	if n, ok := s.Last(); !ok || n != 41 {
		t.Errorf("Last() = %d, %v; want 41, true", n, ok)
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
