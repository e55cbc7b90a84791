package audit

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// randomEvent fills every field of a coup.Event at random, strange values
// included: strings that need escaping or are not UTF-8, invalid cards,
// sides and ratios, nil and empty lists.
func randomEvent(r *rand.Rand) coup.Event {
	strs := []string{"", "a", "void", "say \"hi\"", "<&>", "tab\there", "\x01\x1f", "é ü \u2028", "\xff\xfe", "back\\slash"}
	str := func() string { return strs[r.IntN(len(strs))] }
	maybe := func() bool { return r.IntN(2) == 0 }
	num := func() int { return []int{0, 1, 7, 80, -3, 1 << 40}[r.IntN(6)] }
	card := func() coup.Card {
		switch r.IntN(8) {
		case 0:
			return coup.Card{}
		case 1:
			return coup.Card{Rank: coup.Rank(r.IntN(20)), Suit: coup.Suit(r.IntN(6))}
		}
		return coup.CardAt(r.IntN(coup.CardCount))
	}
	cards := func() []coup.Card {
		switch r.IntN(4) {
		case 0:
			return nil
		case 1:
			return []coup.Card{}
		}
		cs := make([]coup.Card, 1+r.IntN(3))
		for i := range cs {
			cs[i] = card()
		}
		return cs
	}
	e := coup.Event{Kind: coup.EvCardDealt, Shoe: num(), Coup: num(), Phase: coup.Phase(str()), Position: str(),
		By: str(), Command: str(), Action: str(), Reason: str(), LastCoup: num(), Status: str(), Dealer: str()}
	if maybe() {
		e.Card = &coup.DealtCard{Card: card(), Unreadable: maybe(), Impossible: maybe(), Manual: maybe(), Hidden: maybe(),
			ShoeSeq: uint32(r.IntN(3) * 1000)}
	}
	e.Cards = cards()
	if maybe() {
		e.Result = &coup.Result{Player: cards(), Banker: cards(), PlayerPoint: num(), BankerPoint: num(), Winner: coup.Side(r.IntN(5)),
			PlayerNatural: maybe(), BankerNatural: maybe(), PlayerPair: maybe(), BankerPair: maybe(),
			PlayerPerfectPair: maybe(), BankerPerfectPair: maybe(), Margin: num()}
	}
	if maybe() {
		e.Outcomes = map[coup.Bet]coup.Outcome{}
		for range r.IntN(4) {
			ratios := []coup.Ratio{{}, {Num: 1, Den: 1}, {Num: 19, Den: 20}, {Num: -1, Den: 2}, {Num: 3, Den: 0}}
			e.Outcomes[coup.Bet(str())] = coup.Outcome{Kind: coup.OutcomeKind(r.IntN(5)), Pays: ratios[r.IntN(len(ratios))]}
		}
	}
	if maybe() {
		e.Alert = &coup.Alert{ID: num(), Kind: coup.AlertKind(str()), Shoe: num(), Coup: num(), Message: str(), Needs: str(),
			ShoeSeq: uint32(r.IntN(2) * 77), Dealer: str()}
	}
	if maybe() {
		e.Burn = &coup.BurnState{Required: num(), Burned: num()}
		if maybe() {
			c := card()
			e.Burn.First = &c
		}
	}
	return e
}

// TestEventJSONMatchesCanonicalJSON: wherever the fast writer says it
// wrote an event, it wrote CanonicalJSON's bytes. It may give up (ok
// false) only where encoding/json itself refuses or rewrites the value.
func TestEventJSONMatchesCanonicalJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 13))
	fast := 0
	for i := range 50000 {
		e := randomEvent(r)
		got, ok := appendEventJSON(nil, &e)
		want, err := CanonicalJSON(e)
		if !ok {
			continue
		}
		fast++
		if err != nil {
			t.Fatalf("event %d %+v: written as %s, but CanonicalJSON refuses it: %v", i, e, got, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %d %+v:\n fast      %s\n canonical %s", i, e, got, want)
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d of 50000 random events took the fast path", fast)
	}
}

// TestEventJSONTakesEveryTableEvent: every event a table derives from a
// shoe dealt with faults, voids and commands takes the fast path and
// matches, so replay is fast on real trails, not only correct.
func TestEventJSONTakesEveryTableEvent(t *testing.T) {
	tb, err := coup.NewTable(vipConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ins := shoeScript(t)
	card := func(s string) coup.Input {
		c, err := coup.ParseCard(s)
		if err != nil {
			t.Fatal(err)
		}
		return coup.Input{Kind: coup.InCard, Card: &c}
	}
	cmd := func(action string, c *coup.Card) coup.Input {
		return coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "c-" + action, Action: action, By: "alice", Reason: "test \"quoted\"", Card: c}}
	}
	ins = append(ins,
		card("9H"), // a card too many: an alert
		cmd(coup.ActionResume, nil),
		coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets},
		card("2H"), coup.Input{Kind: coup.InCard, Unreadable: true}, // unreadable: an alert needing a card
		cmd(coup.ActionVoid, nil),
		cmd(coup.ActionSuspend, nil), cmd(coup.ActionResume, nil),
		coup.Input{Kind: coup.InButton, Button: coup.ButtonNoMoreBets},
		card("AS"), card("AD"), card("KH"), card("KD"),
		coup.Input{Kind: coup.InButton, Button: coup.ButtonReveal},
		cmd(coup.ActionShoeEnd, nil),
	)
	// The same again with a dealer on duty: events carry the dealer.
	dealerIn := cmd(coup.ActionDealerIn, nil)
	dealerIn.Command.Dealer = "dealer-7"
	ins = append(ins, dealerIn, cmd(coup.ActionShoeStart, nil), card("9H"), cmd(coup.ActionDealerOut, nil))
	n := 0
	for _, in := range ins {
		if in.Kind == coup.InButton && in.Button == coup.ButtonNoMoreBets {
			if d, ok := tb.Deadline(); ok {
				for _, e := range tb.Apply(coup.Input{Kind: coup.InTick, At: d}) {
					n += checkFast(t, e)
				}
			}
		}
		for _, e := range tb.Apply(in) {
			n += checkFast(t, e)
		}
	}
	if n < 20 {
		t.Fatalf("only %d events derived", n)
	}
}

func checkFast(t *testing.T, e coup.Event) int {
	t.Helper()
	got, ok := appendEventJSON(nil, &e)
	want, err := CanonicalJSON(e)
	if err != nil {
		t.Fatalf("%s: %v", e.Kind, err)
	}
	if !ok || !bytes.Equal(got, want) {
		t.Fatalf("%s: fast path %v\n fast      %s\n canonical %s", e.Kind, ok, got, want)
	}
	return 1
}

func BenchmarkEventJSON(b *testing.B) {
	res := coup.Result{Player: []coup.Card{coup.CardAt(3), coup.CardAt(40)}, Banker: []coup.Card{coup.CardAt(7), coup.CardAt(11), coup.CardAt(30)},
		PlayerPoint: 3, BankerPoint: 7, Winner: coup.SideBanker, Margin: 4}
	e := coup.Event{Kind: coup.EvCoupResult, Shoe: 3, Coup: 41, Result: &res,
		Outcomes: map[coup.Bet]coup.Outcome{coup.BetBanker: {Kind: coup.Win, Pays: coup.Ratio{Num: 19, Den: 20}}, coup.BetPlayer: {Kind: coup.Lose}}}
	b.Run("fast", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = appendEventJSON(buf[:0], &e)
		}
	})
	b.Run("encoder", func(b *testing.B) {
		enc := newCanonEncoder()
		for b.Loop() {
			if _, err := enc.encode(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestEventJSONKnowsEveryField fails when a field is added to an event's
// types: appendEventJSON and randomEvent must learn it, or the recorder
// would write bodies without it.
func TestEventJSONKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields int
	}{{coup.Event{}, 18}, {coup.Alert{}, 8}, {coup.DealtCard{}, 7}, {coup.BurnState{}, 3}, {coup.Result{}, 12}, {coup.Outcome{}, 2}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.fields {
			t.Errorf("%T has %d fields, appendEventJSON knows %d: teach it (and randomEvent) the new ones", c.v, n, c.fields)
		}
	}
}
