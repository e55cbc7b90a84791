package audit

import (
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/tablectl/tablectl/coup"
)

// appendEventJSON appends the canonical JSON of a derived event, written
// field by field in key order: what CanonicalJSON(e) gives, without
// encoding/json's reflection and the canonicalizing pass after it. Replay
// compares it with the recorded body for every derived event.
//
// It is only a fast path. ok is false for anything it does not write the
// way encoding/json would (an invalid card or side, a bad ratio, invalid
// UTF-8), and the caller then falls back to CanonicalJSON. The recorder
// writes derived events' bodies with it (prepare), so its bytes are the
// trail's: TestEventJSONMatchesCanonicalJSON holds the two together over
// random events and every event of dealt shoes, and
// TestEventJSONKnowsEveryField fails when an event type gains a field it
// does not write. Replay also checks a mismatch with the recorded body
// again through CanonicalJSON before it counts as a difference.
func appendEventJSON(b []byte, e *coup.Event) ([]byte, bool) {
	w := objWriter{b: append(b, '{'), ok: true}
	if e.Action != "" {
		w.str("action", e.Action)
	}
	if a := e.Alert; a != nil {
		w.key("alert")
		aw := objWriter{b: append(w.b, '{'), ok: true}
		aw.int("coup", int64(a.Coup))
		if a.Dealer != "" {
			aw.str("dealer", a.Dealer)
		}
		aw.int("id", int64(a.ID))
		aw.str("kind", string(a.Kind))
		aw.str("message", a.Message)
		aw.str("needs", a.Needs)
		aw.int("shoe", int64(a.Shoe))
		if a.ShoeSeq != 0 {
			aw.int("shoe_seq", int64(a.ShoeSeq))
		}
		w.end(aw)
	}
	if bs := e.Burn; bs != nil {
		w.key("burn")
		bw := objWriter{b: append(w.b, '{'), ok: true}
		bw.int("burned", int64(bs.Burned))
		if bs.First != nil {
			bw.card("first", *bs.First)
		}
		bw.int("required", int64(bs.Required))
		w.end(bw)
	}
	if e.By != "" {
		w.str("by", e.By)
	}
	if d := e.Card; d != nil {
		w.key("card")
		dw := objWriter{b: append(w.b, '{'), ok: true}
		if d.Card != (coup.Card{}) {
			dw.card("card", d.Card)
		}
		if d.Hidden {
			dw.bool("hidden", true)
		}
		if d.Impossible {
			dw.bool("impossible", true)
		}
		if d.Manual {
			dw.bool("manual", true)
		}
		if d.ShoeSeq != 0 {
			dw.int("shoe_seq", int64(d.ShoeSeq))
		}
		if d.Unreadable {
			dw.bool("unreadable", true)
		}
		w.end(dw)
	}
	if len(e.Cards) > 0 {
		w.cards("cards", e.Cards)
	}
	if e.Command != "" {
		w.str("command", e.Command)
	}
	if e.Coup != 0 {
		w.int("coup", int64(e.Coup))
	}
	if e.Dealer != "" {
		w.str("dealer", e.Dealer)
	}
	if e.LastCoup != 0 {
		w.int("last_coup", int64(e.LastCoup))
	}
	if len(e.Outcomes) > 0 {
		w.outcomes("outcomes", e.Outcomes)
	}
	if e.Phase != "" {
		w.str("phase", string(e.Phase))
	}
	if e.Position != "" {
		w.str("position", e.Position)
	}
	if e.Reason != "" {
		w.str("reason", e.Reason)
	}
	if r := e.Result; r != nil {
		w.key("result")
		rw := objWriter{b: append(w.b, '{'), ok: true}
		rw.cards("banker", r.Banker)
		rw.bool("banker_natural", r.BankerNatural)
		rw.bool("banker_pair", r.BankerPair)
		rw.bool("banker_perfect_pair", r.BankerPerfectPair)
		rw.int("banker_point", int64(r.BankerPoint))
		rw.int("margin", int64(r.Margin))
		rw.cards("player", r.Player)
		rw.bool("player_natural", r.PlayerNatural)
		rw.bool("player_pair", r.PlayerPair)
		rw.bool("player_perfect_pair", r.PlayerPerfectPair)
		rw.int("player_point", int64(r.PlayerPoint))
		if r.Winner < coup.SidePlayer || r.Winner > coup.SideTie {
			return b, false
		}
		rw.str("winner", r.Winner.String())
		w.end(rw)
	}
	w.int("shoe", int64(e.Shoe))
	if e.Status != "" {
		w.str("status", e.Status)
	}
	w.b = append(w.b, '}')
	return w.b, w.ok
}

// objWriter writes one object's members, in the order given (which must be
// the keys' byte order).
type objWriter struct {
	b  []byte
	n  int // members written
	ok bool
}

func (w *objWriter) key(k string) {
	if w.n > 0 {
		w.b = append(w.b, ',')
	}
	w.n++
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

// end closes a nested object written by inner and takes its bytes.
func (w *objWriter) end(inner objWriter) {
	w.b = append(inner.b, '}')
	w.ok = w.ok && inner.ok
}

func (w *objWriter) str(k, s string) {
	w.key(k)
	if !utf8.ValidString(s) {
		// encoding/json would write U+FFFD for the bad bytes.
		w.ok = false
	}
	w.b = appendString(w.b, s)
}

func (w *objWriter) int(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *objWriter) bool(k string, v bool) {
	w.key(k)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *objWriter) card(k string, c coup.Card) {
	w.key(k)
	w.cardValue(c)
}

func (w *objWriter) cardValue(c coup.Card) {
	if !c.Valid() {
		w.ok = false // MarshalText refuses it
		return
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, c.String()...)
	w.b = append(w.b, '"')
}

// cards writes a card list; nil is null, as encoding/json writes it.
func (w *objWriter) cards(k string, cs []coup.Card) {
	w.key(k)
	if cs == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '[')
	for i, c := range cs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.cardValue(c)
	}
	w.b = append(w.b, ']')
}

func (w *objWriter) outcomes(k string, m map[coup.Bet]coup.Outcome) {
	w.key(k)
	bets := make([]string, 0, len(m))
	for b := range m {
		bets = append(bets, string(b))
	}
	slices.Sort(bets)
	ow := objWriter{b: append(w.b, '{'), ok: true}
	for _, b := range bets {
		if !utf8.ValidString(b) {
			ow.ok = false
		}
		if ow.n > 0 {
			ow.b = append(ow.b, ',')
		}
		ow.n++
		ow.b = appendString(ow.b, b)
		ow.b = append(ow.b, ':')
		o := m[coup.Bet(b)]
		vw := objWriter{b: append(ow.b, '{'), ok: true}
		vw.str("outcome", o.Kind.String())
		if !o.Pays.IsZero() {
			if o.Pays.Num < 0 || o.Pays.Den <= 0 {
				vw.ok = false // MarshalText refuses it
			}
			vw.str("pays", o.Pays.String())
		}
		ow.end(vw)
	}
	w.end(ow)
}
