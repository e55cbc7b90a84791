package shoeread

import (
	"fmt"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

func TestEventInput(t *testing.T) {
	at := time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC)
	kh := coup.Card{Rank: coup.King, Suit: coup.Hearts}
	tests := []struct {
		name string
		ev   Event
		ok   bool
		want coup.Input
	}{
		{"card", Event{Kind: KindCard, Seq: 7, Card: kh}, true, coup.Input{Kind: coup.InCard, At: at, ShoeSeq: 7, Card: &kh}},
		{"unreadable", Event{Kind: KindCard, Seq: 8, Unreadable: true}, true, coup.Input{Kind: coup.InCard, At: at, ShoeSeq: 8, Unreadable: true}},
		{"burn", Event{Kind: KindCard, Card: kh, Burn: true}, true, coup.Input{Kind: coup.InCard, At: at, Card: &kh, Burn: true}},
		{"cut", Event{Kind: KindCutCard, Seq: 9}, true, coup.Input{Kind: coup.InCut, At: at, ShoeSeq: 9}},
		{"no more bets", Event{Kind: KindButton, Seq: 10, Button: ButtonNoMoreBets}, true, coup.Input{Kind: coup.InButton, At: at, ShoeSeq: 10, Button: coup.ButtonNoMoreBets}},
		{"new shoe", Event{Kind: KindButton, Button: ButtonNewShoe}, true, coup.Input{Kind: coup.InButton, At: at, Button: coup.ButtonNewShoe}},
		{"burn done", Event{Kind: KindButton, Button: ButtonBurnDone}, true, coup.Input{Kind: coup.InButton, At: at, Button: coup.ButtonBurnDone}},
		{"reveal", Event{Kind: KindButton, Button: ButtonReveal}, true, coup.Input{Kind: coup.InButton, At: at, Button: coup.ButtonReveal}},
		{"status", Event{Kind: KindStatus, Seq: 3, Status: "LIDOPEN", Text: "lid"}, true, coup.Input{Kind: coup.InStatus, At: at, ShoeSeq: 3, Status: "LIDOPEN", Text: "lid"}},
		{"hello", Event{Kind: KindHello, Seq: 1, Text: "shoe-9"}, true, coup.Input{Kind: coup.InHello, At: at, ShoeSeq: 1, Text: "shoe-9"}},
		{"gap", Event{Kind: KindGap, GapFrom: 4, GapTo: 6}, true, coup.Input{Kind: coup.InGap, At: at, GapFrom: 4, GapTo: 6}},
		{"backwards", Event{Kind: KindProtocolError, Err: fmt.Errorf("%w: from 9 to 2", ErrSeqBackwards)}, true, coup.Input{Kind: coup.InHello, At: at, Text: "sequence went backwards without a HELO"}},
		{"checksum", Event{Kind: KindProtocolError, Err: ErrChecksum, Rejected: 14}, false, coup.Input{}},
		{"heartbeat", Event{Kind: KindHeartbeat, Seq: 11}, false, coup.Input{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.ev.Input(at)
			if ok != tt.ok || got.String() != tt.want.String() || got.Kind != tt.want.Kind || got.ShoeSeq != tt.want.ShoeSeq ||
				got.Button != tt.want.Button || got.Unreadable != tt.want.Unreadable || got.Burn != tt.want.Burn ||
				got.GapFrom != tt.want.GapFrom || got.GapTo != tt.want.GapTo || got.Status != tt.want.Status || got.Text != tt.want.Text ||
				(got.Card == nil) != (tt.want.Card == nil) || (got.Card != nil && *got.Card != *tt.want.Card) || (ok && !got.At.Equal(at)) {
				t.Fatalf("Input() = %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
