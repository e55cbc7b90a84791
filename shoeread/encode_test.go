package shoeread

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

func TestAppendV1(t *testing.T) {
	tests := []struct {
		e    Event
		want string // "" when AppendV1 must refuse
	}{
		{Event{Kind: KindHello, Seq: 1, Text: "SHOE-0042"}, "$HELO,1,1,SHOE-0042*18\r\n"},
		{Event{Kind: KindCard, Seq: 12, Card: coup.Card{Rank: coup.King, Suit: coup.Hearts}}, "$CARD,12,KH*14\r\n"},
		{Event{Kind: KindCard, Seq: 3, Unreadable: true}, "$CARD,3,??*27\r\n"},
		{Event{Kind: KindCutCard, Seq: 40}, "$CUT,40*6A\r\n"},
		{Event{Kind: KindButton, Seq: 5, Button: ButtonNoMoreBets}, "$BTN,5,NOMOREBETS*79\r\n"},
		{Event{Kind: KindHeartbeat, Seq: 2}, "$HB,2*14\r\n"},
		{Event{Kind: KindStatus, Seq: 9, Status: "E-7"}, line("STAT,9,E-7")},
		{Event{Kind: KindStatus, Seq: 9, Status: "LID_OPEN", Text: "a, b"}, line("STAT,9,LID_OPEN,a, b")},

		{Event{Kind: KindHeartbeat}, ""},
		{Event{Kind: KindCard, Seq: 1}, ""},
		{Event{Kind: KindButton, Seq: 1, Button: "shuffle"}, ""},
		{Event{Kind: KindHello, Seq: 1}, ""},
		{Event{Kind: KindHello, Seq: 1, Text: "a,b"}, ""},
		{Event{Kind: KindHello, Seq: 1, Text: "a$b"}, ""},
		{Event{Kind: KindStatus, Seq: 1}, ""},
		{Event{Kind: KindStatus, Seq: 1, Status: "LID OPEN"}, ""},
		{Event{Kind: KindStatus, Seq: 1, Status: "X", Text: "bad*"}, ""},
		{Event{Kind: KindStatus, Seq: 1, Status: "X", Text: "tab\t"}, ""},
		{Event{Kind: KindStatus, Seq: 1, Status: "X", Text: strings.Repeat("a", 68)}, ""},
		{Event{Kind: KindProtocolError, Seq: 1}, ""},
		{Event{Kind: KindGap, Seq: 1}, ""},
	}
	for _, tt := range tests {
		t.Run(fmtEvent(tt.e), func(t *testing.T) {
			got, err := AppendV1([]byte("x"), tt.e)
			if tt.want == "" {
				if err == nil || string(got) != "x" {
					t.Errorf("AppendV1 wrote %q, %v; want a refusal and dst untouched", got, err)
				}
				return
			}
			if err != nil || string(got) != "x"+tt.want {
				t.Errorf("AppendV1 = %q, %v; want %q", got, err, "x"+tt.want)
			}
		})
	}
}

func TestAppendBeetek(t *testing.T) {
	tests := []struct {
		e    Event
		want string
	}{
		{Event{Kind: KindCard, Card: coup.Card{Rank: coup.Four, Suit: coup.Spades}}, " [Game]<Card:4S> "},
		{Event{Kind: KindCard, Card: coup.Card{Rank: coup.Nine, Suit: coup.Hearts}, Burn: true}, " [Manual Burn Cards]<Card:9H> "},
		{Event{Kind: KindCard, Unreadable: true}, " [Game]<Game> "},
		{Event{Kind: KindStatus, Status: "W0x01"}, " <W0x01> "},
		{Event{Kind: KindStatus, Status: "E3", Text: "Card Not Read"}, " [GameAlarm]<Alarm:E3 Card Not Read> "},
		{Event{Kind: KindStatus, Status: "E9"}, " [GameAlarm]<Alarm:E9> "},
		{Event{Kind: KindStatus, Status: "]", Text: "a]b"}, " [GameAlarm]<Alarm:] a]b> "}, // the decoder reads ']' in an item

		{Event{Kind: KindCard}, ""},
		{Event{Kind: KindHeartbeat}, ""},
		{Event{Kind: KindStatus, Status: "W0x01", Text: "x"}, " [GameAlarm]<Alarm:W0x01 x> "},
		{Event{Kind: KindStatus}, ""},
		{Event{Kind: KindStatus, Status: "E 3"}, ""},
		{Event{Kind: KindStatus, Status: "E3", Text: " lead"}, ""},
		{Event{Kind: KindStatus, Status: "E3", Text: "a>b"}, ""},
		{Event{Kind: KindStatus, Status: "E3", Text: "a[b"}, ""},
		{Event{Kind: KindStatus, Status: "E<3"}, ""},
		{Event{Kind: KindStatus, Status: "E3", Text: strings.Repeat("a", 60)}, ""},
	}
	for _, tt := range tests {
		t.Run(fmtEvent(tt.e), func(t *testing.T) {
			got, err := AppendBeetek(nil, tt.e)
			if tt.want == "" {
				if err == nil {
					t.Errorf("AppendBeetek wrote %q; want a refusal", got)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("AppendBeetek = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestEventJSON(t *testing.T) {
	tests := []struct {
		e    Event
		want string
	}{
		{Event{Kind: KindCard, Seq: 12, Card: coup.Card{Rank: coup.King, Suit: coup.Hearts}, Raw: "$CARD,12,KH*14"},
			`{"kind":"card","seq":12,"raw":"$CARD,12,KH*14","card":"KH"}`},
		{Event{Kind: KindCard, Unreadable: true, Burn: true},
			`{"kind":"card","unreadable":true,"burn":true}`},
		{Event{Kind: KindProtocolError, Err: fmt.Errorf("%w: x", ErrChecksum), Rejected: 16},
			`{"kind":"protocol_error","rejected":16,"err":"checksum mismatch: x"}`},
		{Event{Kind: KindGap, GapFrom: 3, GapTo: 4}, `{"kind":"gap","gap_from":3,"gap_to":4}`},
		{Event{Kind: KindButton, Seq: 5, Button: ButtonReveal}, `{"kind":"button","seq":5,"button":"reveal"}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.e)
		if err != nil || string(got) != tt.want {
			t.Errorf("json.Marshal(%s) = %s, %v; want %s", fmtEvent(tt.e), got, err, tt.want)
		}
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("x"), "other"},
		{fmt.Errorf("CARD: %w: x", coup.ErrBadCard), "bad_card"},
		{fmt.Errorf("%w: x", ErrChecksum), "checksum"},
		{fmt.Errorf("HB: %w", ErrBadSeq), "bad_seq"},
		{ErrSeqBackwards, "backwards"},
	}
	for _, tt := range tests {
		if got := Reason(tt.err); got != tt.want {
			t.Errorf("Reason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	for _, name := range Names() {
		d, err := New(name)
		if err != nil || d.Name() != name {
			t.Errorf("New(%q) = %v, %v", name, d, err)
		}
	}
	a, _ := New("v1")
	b, _ := New("v1")
	if a == b {
		t.Error("New must return a fresh driver each time")
	}
	if _, err := New("nmea"); err == nil || !strings.Contains(err.Error(), "beetek, v1") {
		t.Errorf("New(nmea) error %v, want one listing the drivers", err)
	}
}
