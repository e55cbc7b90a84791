package shoeread

import (
	"errors"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// Input turns a shoe event into the table's input, stamped at. Events the
// table has no use for (heartbeats, protocol errors: they are counted and
// logged by the reader) return false.
func (e Event) Input(at time.Time) (coup.Input, bool) {
	in := coup.Input{At: at, ShoeSeq: e.Seq}
	switch e.Kind {
	case KindCard:
		in.Kind, in.Burn = coup.InCard, e.Burn
		if e.Unreadable || !e.Card.Valid() {
			in.Unreadable = true
		} else {
			c := e.Card
			in.Card = &c
		}
	case KindCutCard:
		in.Kind = coup.InCut
	case KindButton:
		in.Kind = coup.InButton
		switch e.Button {
		case ButtonNewShoe:
			in.Button = coup.ButtonNewShoe
		case ButtonBurnDone:
			in.Button = coup.ButtonBurnDone
		case ButtonNoMoreBets:
			in.Button = coup.ButtonNoMoreBets
		case ButtonReveal:
			in.Button = coup.ButtonReveal
		default:
			in.Button = string(e.Button)
		}
	case KindStatus:
		in.Kind, in.Status, in.Text = coup.InStatus, e.Status, e.Text
	case KindHello:
		in.Kind, in.Text = coup.InHello, e.Text
	case KindGap:
		in.Kind, in.GapFrom, in.GapTo = coup.InGap, e.GapFrom, e.GapTo
		in.ShoeSeq = 0
	case KindProtocolError:
		// A step back without a HELO means the shoe restarted unannounced:
		// the table treats it as a restart. Other protocol errors are
		// counted and logged by the reader, not played.
		if !errors.Is(e.Err, ErrSeqBackwards) {
			return coup.Input{}, false
		}
		in.Kind, in.Text = coup.InHello, "sequence went backwards without a HELO"
	default:
		return coup.Input{}, false
	}
	return in, true
}
