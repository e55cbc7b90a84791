package shoeread

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

func TestBeetekDecode(t *testing.T) {
	fourS := coup.Card{Rank: coup.Four, Suit: coup.Spades}
	tenH := coup.Card{Rank: coup.Ten, Suit: coup.Hearts}
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"card", " [Game]<Card:4S> ",
			[]Event{{Kind: KindCard, Card: fourS, Raw: "[Game]<Card:4S>"}}},
		{"suit first", " [Game]<Card:S4> ",
			[]Event{{Kind: KindCard, Card: fourS, Raw: "[Game]<Card:S4>"}}},
		{"ten as 10", " [Game]<Card:10H> [Game]<Card:H10> [Game]<Card:TH> [Game]<Card:HT> ",
			[]Event{
				{Kind: KindCard, Card: tenH, Raw: "[Game]<Card:10H>"},
				{Kind: KindCard, Card: tenH, Raw: "[Game]<Card:H10>"},
				{Kind: KindCard, Card: tenH, Raw: "[Game]<Card:TH>"},
				{Kind: KindCard, Card: tenH, Raw: "[Game]<Card:HT>"},
			}},
		{"faces and aces, either case", "[Game]<Card:AC>[Game]<Card:kd>[game]<card:Qs>",
			[]Event{
				{Kind: KindCard, Card: coup.Card{Rank: coup.Ace, Suit: coup.Clubs}, Raw: "[Game]<Card:AC>"},
				{Kind: KindCard, Card: coup.Card{Rank: coup.King, Suit: coup.Diamonds}, Raw: "[Game]<Card:kd>"},
				{Kind: KindCard, Card: coup.Card{Rank: coup.Queen, Suit: coup.Spades}, Raw: "[game]<card:Qs>"},
			}},
		{"burn", " [Manual Burn Cards]<Card:9H> ",
			[]Event{{Kind: KindCard, Card: coup.Card{Rank: coup.Nine, Suit: coup.Hearts}, Burn: true, Raw: "[Manual Burn Cards]<Card:9H>"}}},
		{"unreadable", " [Game]<Game> ",
			[]Event{{Kind: KindCard, Unreadable: true, Raw: "[Game]<Game>"}}},
		{"unreadable burn", " [Manual Burn Cards]<Game> ",
			[]Event{{Kind: KindCard, Unreadable: true, Burn: true, Raw: "[Manual Burn Cards]<Game>"}}},
		{"card with no section", "<Card:4S>",
			[]Event{{Kind: KindCard, Card: fourS, Raw: "<Card:4S>"}}},
		{"spaces between section and item", "[Game]  \r\n<Card:4S>",
			[]Event{{Kind: KindCard, Card: fourS, Raw: "[Game]<Card:4S>"}}},
		{"alarm", " [Game]<Alarm:E3 Card Not Read> ",
			[]Event{{Kind: KindStatus, Status: "E3", Text: "Card Not Read", Raw: "[Game]<Alarm:E3 Card Not Read>"}}},
		{"alarm in its own section", " [GameAlarm]<Alarm:E7> ",
			[]Event{{Kind: KindStatus, Status: "E7", Raw: "[GameAlarm]<Alarm:E7>"}}},
		{"alarm alone", "<Alarm:E3 Card Not Read>",
			[]Event{{Kind: KindStatus, Status: "E3", Text: "Card Not Read", Raw: "<Alarm:E3 Card Not Read>"}}},
		{"warning", "<W0x01> <w0X1f>",
			[]Event{{Kind: KindStatus, Status: "W0x01", Raw: "<W0x01>"}, {Kind: KindStatus, Status: "w0X1f", Raw: "<w0X1f>"}}},
		{"CRLF between tokens", "[Game]<Card:4S>\r\n[Game]<Game>\r\n",
			[]Event{{Kind: KindCard, Card: fourS, Raw: "[Game]<Card:4S>"}, {Kind: KindCard, Unreadable: true, Raw: "[Game]<Game>"}}},

		// Rejections.
		{"noise between tokens", "xx\x00 [Game]<Card:4S>",
			[]Event{{Kind: KindProtocolError, Err: ErrNoise, Rejected: 3, Raw: `xx\x00`}, {Kind: KindCard, Card: fourS, Raw: "[Game]<Card:4S>"}}},
		{"noise ends at a space", "ab cd ",
			[]Event{{Kind: KindProtocolError, Err: ErrNoise, Rejected: 2, Raw: "ab"}, {Kind: KindProtocolError, Err: ErrNoise, Rejected: 2, Raw: "cd"}}},
		{"bad card", " [Game]<Card:4X> ",
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 15, Raw: "[Game]<Card:4X>"}}},
		{"card of three letters", "<Card:KHS>",
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 10, Raw: "<Card:KHS>"}}},
		{"empty card", "<Card:>",
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 7, Raw: "<Card:>"}}},
		{"1 is not a rank", "<Card:1S>",
			[]Event{{Kind: KindProtocolError, Err: coup.ErrBadCard, Rejected: 9, Raw: "<Card:1S>"}}},
		{"unknown section", " [Shuffle]<Card:4S> ",
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 18, Raw: "[Shuffle]<Card:4S>"}}},
		{"card in the alarm section", "[GameAlarm]<Card:4S>",
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 20, Raw: "[GameAlarm]<Card:4S>"}}},
		{"unreadable in the alarm section", "[GameAlarm]<Game>",
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 17, Raw: "[GameAlarm]<Game>"}}},
		{"unknown item", " [Game]<Shoe Empty> ",
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 18, Raw: "[Game]<Shoe Empty>"}}},
		{"warning without digits", "<W0x>",
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 5, Raw: "<W0x>"}}},
		{"warning not hex", "<W0x0G>",
			[]Event{{Kind: KindProtocolError, Err: ErrUnknownType, Rejected: 7, Raw: "<W0x0G>"}}},
		{"alarm with no code", "<Alarm: >",
			[]Event{{Kind: KindProtocolError, Err: ErrMalformed, Rejected: 9, Raw: "<Alarm: >"}}},
		{"section with no item", " [Game] [Game]<Game> ",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 7, Raw: "[Game]"}, {Kind: KindCard, Unreadable: true, Raw: "[Game]<Game>"}}},
		{"section then noise", "[Game]x<Game>",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 6, Raw: "[Game]"}, {Kind: KindProtocolError, Err: ErrNoise, Rejected: 1, Raw: "x"}, {Kind: KindCard, Unreadable: true, Raw: "<Game>"}}},
		{"section cut short", "[Ga<Card:4S>",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 3, Raw: "[Ga"}, {Kind: KindCard, Card: fourS, Raw: "<Card:4S>"}}},
		{"item cut short", "[Game]<Ca[Game]<Card:4S>",
			[]Event{{Kind: KindProtocolError, Err: ErrFraming, Rejected: 9, Raw: "[Game]<Ca"}, {Kind: KindCard, Card: fourS, Raw: "[Game]<Card:4S>"}}},
		{"line end inside an item", "[Game]<Card:4\r\nS> <Game>",
			[]Event{{Kind: KindProtocolError, Err: ErrNonPrintable, Rejected: 14, Raw: `[Game]<Card:4\r`}, {Kind: KindProtocolError, Err: ErrNoise, Rejected: 2, Raw: "S>"}, {Kind: KindCard, Unreadable: true, Raw: "<Game>"}}},
		{"control byte in a section", "[Ga\x01me]<Card:4S>",
			[]Event{{Kind: KindProtocolError, Err: ErrNonPrintable, Rejected: 7, Raw: `[Ga\x01me]`}, {Kind: KindCard, Card: fourS, Raw: "<Card:4S>"}}},
		{"item too long", "<Alarm:" + strings.Repeat("x", 70) + "> <Game>",
			[]Event{{Kind: KindProtocolError, Err: ErrOversize, Rejected: 78, Raw: "<Alarm:" + strings.Repeat("x", 70) + ">"}, {Kind: KindCard, Unreadable: true, Raw: "<Game>"}}},
		{"section too long", "[" + strings.Repeat("s", 40) + "]<Game>",
			[]Event{{Kind: KindProtocolError, Err: ErrOversize, Rejected: 42, Raw: "[" + strings.Repeat("s", 40) + "]"}, {Kind: KindCard, Unreadable: true, Raw: "<Game>"}}},
		{"stray closers", "> ] ",
			[]Event{{Kind: KindProtocolError, Err: ErrNoise, Rejected: 1, Raw: ">"}, {Kind: KindProtocolError, Err: ErrNoise, Rejected: 1, Raw: "]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewBeetek()
			got := d.Decode([]byte(tt.in))
			sameEvents(t, got, tt.want)
			checkStats(t, d.Stats(), len(tt.in), got)
		})
	}
}

func TestBeetekSplitAnywhere(t *testing.T) {
	in := []byte(" [Game]<Card:4S>  [Manual Burn Cards]<Card:9H> zz [Game]<Game> <W0x01> [Game]<Alarm:E3 Card Not Read> " +
		"[Shuffle]<x> [Game] <Card:S10> [Ga\x00me]<Card:kd> <" + strings.Repeat("y", 80) + "> [Game]<Card:Q")
	whole := NewBeetek().Decode(in)
	if len(whole) < 10 {
		t.Fatalf("stream decoded to only %s", fmtEvents(whole))
	}
	for cut := 0; cut <= len(in); cut++ {
		sameEvents(t, decodeSplit(NewBeetek(), in, cut), whole)
	}
	d := NewBeetek()
	var bytewise []Event
	for i := range in {
		bytewise = append(bytewise, d.Decode(in[i:i+1])...)
	}
	sameEvents(t, bytewise, whole)
}

func TestBeetekFloodStaysBounded(t *testing.T) {
	d := NewBeetek()
	var got []Event
	for i := 0; i < 10000; i++ {
		got = append(got, d.Decode([]byte("<"+strings.Repeat("z", 99)))...)
		if p := d.pending(); p > maxPending["beetek"] {
			t.Fatalf("%d pending, more than %d", p, maxPending["beetek"])
		}
	}
	got = append(got, d.Decode(bytes.Repeat([]byte{'q'}, 5000))...)
	got = append(got, d.Decode([]byte(" <Game>"))...)
	var total int
	for _, e := range got[:len(got)-1] {
		if e.Kind != KindProtocolError || e.Rejected > maxRejectRun {
			t.Fatalf("%s: want a protocol error of at most %d bytes", fmtEvent(e), maxRejectRun)
		}
		total += e.Rejected
	}
	if total != 10000*100+5000 {
		t.Errorf("rejected %d bytes, want %d", total, 10000*100+5000)
	}
	if last := got[len(got)-1]; last.Kind != KindCard || !last.Unreadable {
		t.Errorf("after the flood: %s, want the unreadable card", fmtEvent(last))
	}
	if st := d.Stats(); st.RejectedBytes != uint64(total) || st.Sentences != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestBeetekResyncProperty puts random noise that holds no token start
// between random cards: every card must come out, in order.
func TestBeetekResyncProperty(t *testing.T) {
	r := newRand(2)
	for round := 0; round < 200; round++ {
		var in []byte
		var want []Event
		for i := 0; i < 20; i++ {
			e := Event{Kind: KindCard, Burn: r.IntN(8) == 0}
			if r.IntN(10) == 0 {
				e.Unreadable = true
			} else {
				e.Card = coup.CardAt(r.IntN(coup.CardCount))
			}
			b, err := AppendBeetek(nil, e)
			if err != nil {
				t.Fatal(err)
			}
			e.Raw = strings.TrimSpace(string(b))
			want = append(want, e)
			in = append(in, b...)
			if r.IntN(3) == 0 {
				noise := bytes.Map(func(c rune) rune {
					if c == '[' || c == '<' {
						return 'x'
					}
					return c
				}, randomNoise(r))
				in = append(in, noise...)
				in = append(in, ' ')
			}
		}
		var good []Event
		for _, e := range NewBeetek().Decode(in) {
			if e.Kind != KindProtocolError {
				good = append(good, e)
			}
		}
		sameEvents(t, good, want)
	}
}

func TestBeetekGuarantees(t *testing.T) {
	d := NewBeetek()
	if g := d.Guarantees(); g != (Guarantees{}) {
		t.Errorf("guarantees %+v, want none", g)
	}
	for _, e := range d.Decode([]byte(" [Game]<Card:4S> <W0x01> ")) {
		if e.Seq != 0 {
			t.Errorf("%s: Bee-Tek has no sequence numbers", fmtEvent(e))
		}
	}
}

func TestBeetekNoiseIsNotACard(t *testing.T) {
	// Noise bytes that happen to spell a token are the risk a protocol with
	// no checksum runs; anything short of a whole token must never be a card.
	for _, in := range []string{"Card:4S>", "[Game]Card:4S>", "[Game]<Card:4S", "Game]<Card4S>"} {
		for _, e := range NewBeetek().Decode([]byte(in + " ")) {
			if e.Kind == KindCard {
				t.Errorf("%q decoded to %s", in, fmtEvent(e))
			}
		}
	}
	if errs := NewBeetek().Decode([]byte("<Card:4S")); len(errs) != 0 {
		t.Errorf("an unfinished token must wait, got %s", fmtEvents(errs))
	}
}

func BenchmarkBeetekDecode(b *testing.B) {
	var in []byte
	for i := 0; i < 1000; i++ {
		in, _ = AppendBeetek(in, Event{Kind: KindCard, Card: coup.CardAt(i % coup.CardCount)})
	}
	d := NewBeetek()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if evs := d.Decode(in); len(evs) != 1000 {
			b.Fatalf("%d events", len(evs))
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "cards/s")
}
