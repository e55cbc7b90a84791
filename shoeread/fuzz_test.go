package shoeread

import (
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// Seeds shared by the decode fuzzers, besides testdata/fuzz/<Fuzz...>/.
var v1Seeds = []string{
	"$HELO,1,1,SHOE-0042*18\r\n$CARD,12,KH*14\r\n$HB,2*14\n",
	"$CARD,3,??*27\r\n$CUT,40*6a\r\n$BTN,5,NOMOREBETS*79\r\n",
	"\x00\xff$CARD,1$HB,2*14\r$STAT,9,LID_OPEN,lid, open*00\r\n",
	"$" + strings.Repeat("A", 100) + "\n$HB,4294967296*00\r\n",
}

var beetekSeeds = []string{
	" [Game]<Card:4S>  [Manual Burn Cards]<Card:H10> [Game]<Game> ",
	"<Alarm:E3 Card Not Read> <W0x01> [GameAlarm]<Alarm:E7>",
	"[Game] [Ga\x01me]<Card:4X> <" + strings.Repeat("z", 70) + "> ] >",
}

// checkDecoder runs the properties every driver must have on data: no
// panic, bounded pending input, stats that agree with the events, and the
// same events however the bytes are split.
func checkDecoder(t *testing.T, mk func() Driver, data []byte) []Event {
	d := mk()
	whole := d.Decode(data)
	if p, max := pendingOf(d), maxPending[d.Name()]; p > max {
		t.Fatalf("%d bytes pending, more than %d", p, max)
	}
	checkStats(t, d.Stats(), len(data), whole)
	for _, e := range whole {
		if e.Kind == KindProtocolError && (e.Err == nil || e.Rejected <= 0 || e.Seq != 0) {
			t.Fatalf("protocol error %s: want an Err, a byte count and no seq", fmtEvent(e))
		}
		if len(e.Raw) > 4*rawMax+3 { // every byte escaped, plus "..."
			t.Fatalf("Raw of %d bytes", len(e.Raw))
		}
	}

	// Two pieces, cut everywhere (or at 64 places in a long input).
	step := max(1, len(data)/64)
	for cut := 0; cut <= len(data); cut += step {
		sameEvents(t, decodeSplit(mk(), data, cut), whole)
	}
	// One byte at a time.
	d = mk()
	var bytewise []Event
	for i := range data {
		bytewise = append(bytewise, d.Decode(data[i:i+1])...)
		if p, max := pendingOf(d), maxPending[d.Name()]; p > max {
			t.Fatalf("after byte %d: %d bytes pending, more than %d", i, p, max)
		}
	}
	sameEvents(t, bytewise, whole)
	return whole
}

func FuzzV1Decode(f *testing.F) {
	for _, s := range v1Seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := checkDecoder(t, func() Driver { return NewV1() }, data)
		for _, e := range evs {
			if e.Kind == KindProtocolError {
				continue
			}
			// Whatever the decoder accepts, the encoder writes back the
			// same, up to the checksum's letter case.
			b, err := AppendV1(nil, e)
			if err != nil {
				t.Fatalf("decoded %s from %q but AppendV1 refuses it: %v", fmtEvent(e), e.Raw, err)
			}
			if got := string(b); !strings.EqualFold(got, e.Raw+"\r\n") || got[:len(got)-4] != e.Raw[:len(e.Raw)-2] {
				t.Fatalf("decoded %q, re-encoded %q", e.Raw, got)
			}
		}
		// The sequencer must not panic on whatever numbers arrive either.
		var s Sequencer
		for _, e := range evs {
			for _, o := range s.Observe(e) {
				if o.Kind == KindGap && o.GapFrom > o.GapTo {
					t.Fatalf("gap %d..%d runs backwards", o.GapFrom, o.GapTo)
				}
			}
		}
	})
}

func FuzzV1RoundTrip(f *testing.F) {
	f.Add(uint8(0), uint32(1), uint8(13), uint8(1), false, uint8(0), "", "SHOE-0042")
	f.Add(uint8(1), uint32(12), uint8(13), uint8(1), false, uint8(0), "", "")
	f.Add(uint8(1), uint32(3), uint8(0), uint8(0), true, uint8(0), "", "")
	f.Add(uint8(3), uint32(5), uint8(0), uint8(0), false, uint8(2), "", "")
	f.Add(uint8(4), uint32(9), uint8(0), uint8(0), false, uint8(0), "LID_OPEN", "lid, open")
	f.Add(uint8(5), uint32(4294967295), uint8(0), uint8(0), false, uint8(0), "", "")
	buttons := []Button{ButtonNewShoe, ButtonBurnDone, ButtonNoMoreBets, ButtonReveal}
	f.Fuzz(func(t *testing.T, kind uint8, seq uint32, rank, suit uint8, unreadable bool, button uint8, status, text string) {
		e := Event{Seq: seq}
		switch kind % 6 {
		case 0:
			e.Kind, e.Text = KindHello, text
		case 1:
			e.Kind = KindCard
			if unreadable {
				e.Unreadable = true
			} else {
				e.Card = coup.Card{Rank: coup.Rank(rank), Suit: coup.Suit(suit)}
			}
		case 2:
			e.Kind = KindCutCard
		case 3:
			e.Kind, e.Button = KindButton, buttons[int(button)%len(buttons)]
		case 4:
			e.Kind, e.Status, e.Text = KindStatus, status, text
		case 5:
			e.Kind = KindHeartbeat
		}
		b, err := AppendV1(nil, e)
		if err != nil {
			return // refused: nothing was written to read back
		}
		d := NewV1()
		got := d.Decode(b)
		e.Raw = strings.TrimSuffix(string(b), "\r\n")
		sameEvents(t, got, []Event{e})
		if len(b) > v1MaxSentence {
			t.Fatalf("AppendV1 wrote %d bytes", len(b))
		}
	})
}

func FuzzBeetekDecode(f *testing.F) {
	for _, s := range beetekSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		evs := checkDecoder(t, func() Driver { return NewBeetek() }, data)
		for _, e := range evs {
			if e.Seq != 0 {
				t.Fatalf("%s: Bee-Tek has no sequence numbers", fmtEvent(e))
			}
			if e.Kind == KindProtocolError {
				continue
			}
			// Whatever the decoder accepts, the encoder writes so that it
			// reads back as the same event.
			b, err := AppendBeetek(nil, e)
			if err != nil {
				t.Fatalf("decoded %s from %q but AppendBeetek refuses it: %v", fmtEvent(e), e.Raw, err)
			}
			again := NewBeetek().Decode(b)
			if len(again) != 1 {
				t.Fatalf("re-encoded %q decodes to %s", b, fmtEvents(again))
			}
			again[0].Raw = e.Raw
			sameEvents(t, again, []Event{e})
		}
	})
}
