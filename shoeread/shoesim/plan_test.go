package shoesim

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/shoeread"
)

// burnOf is the burn rule written out by hand, not computed by the code
// under test: the exposed card's value, tens and faces 10.
var burnOf = map[coup.Rank]int{
	coup.Ace: 1, coup.Two: 2, coup.Three: 3, coup.Four: 4, coup.Five: 5, coup.Six: 6,
	coup.Seven: 7, coup.Eight: 8, coup.Nine: 9, coup.Ten: 10, coup.Jack: 10, coup.Queen: 10, coup.King: 10,
}

func mustPlan(t *testing.T, o Options) *Plan {
	t.Helper()
	p, err := NewPlan(o)
	if err != nil {
		t.Fatalf("NewPlan(%+v): %v", o, err)
	}
	return p
}

// dealtCards is every card the plan sends (true cards, in order) per shoe.
func dealtCards(p *Plan) map[int][]coup.Card {
	out := map[int][]coup.Card{}
	for _, st := range p.Steps {
		if st.Op == OpSend && st.Event.Kind == shoeread.KindCard {
			out[st.At.Shoe] = append(out[st.At.Shoe], st.Truth)
		}
	}
	return out
}

// The dealer's invariants, over many shoes: every coup complete by the
// tableau, the burn as long as the first card says, every card the shoe's
// own in shuffled order, the cut card where it belongs and the coups after
// it as the rule says.
func TestPlanDealsByTheRules(t *testing.T) {
	for _, decks := range []int{6, 8} {
		for _, rule := range []CutRule{CutOneMore, CutFinish} {
			for _, cut := range []int{16, 12, 100} {
				for seed := uint64(0); seed < 25; seed++ {
					name := fmt.Sprintf("decks%d/%s/cut%d/seed%d", decks, rule, cut, seed)
					o := Options{Decks: decks, Seed: seed, Cut: cut, AfterCut: rule, Shoes: 2}
					p := mustPlan(t, o)
					checkPlan(t, name, p)
				}
			}
		}
	}
}

func checkPlan(t *testing.T, name string, p *Plan) {
	t.Helper()
	o := p.Options
	if len(p.Shoes) != o.Shoes {
		t.Fatalf("%s: %d shoes dealt, want %d", name, len(p.Shoes), o.Shoes)
	}
	cards := dealtCards(p)
	for si, sh := range p.Shoes {
		shoe := si + 1
		want, _ := Shuffle(o.Decks, o.Seed+uint64(si))
		if !reflect.DeepEqual(sh.Order, want) {
			t.Fatalf("%s shoe %d: order is not Shuffle(decks, seed+%d)", name, shoe, si)
		}
		// Burn.
		if n := 1 + burnOf[sh.Burn[0].Rank]; len(sh.Burn) != n {
			t.Errorf("%s shoe %d: first card %s, burn of %d cards, want %d", name, shoe, sh.Burn[0], len(sh.Burn), n)
		}
		// Every card came out of the shoe in order: burn, then each coup.
		var flat []coup.Card
		flat = append(flat, sh.Burn...)
		for _, c := range sh.Coups {
			flat = append(flat, c.Cards...)
		}
		if !reflect.DeepEqual(flat, sh.Order[:len(flat)]) {
			t.Fatalf("%s shoe %d: cards dealt are not the shoe's in order", name, shoe)
		}
		if !reflect.DeepEqual(cards[shoe], flat) {
			t.Fatalf("%s shoe %d: card sentences differ from the dealt coups", name, shoe)
		}
		// Every coup complete by the tableau.
		for _, c := range sh.Coups {
			if _, err := coup.Score(c.Cards); err != nil {
				t.Fatalf("%s shoe %d coup %d %s: %v", name, shoe, c.Number, coup.FormatCards(c.Cards), err)
			}
		}
		// The cut card: Cut cards behind it, during the coup it marks,
		// then the coup rule.
		if sh.CutAt != len(sh.Order)-o.Cut {
			t.Errorf("%s shoe %d: cut card after %d cards, want %d", name, shoe, sh.CutAt, len(sh.Order)-o.Cut)
		}
		cutCoup := -1
		seen := len(sh.Burn)
		for i, c := range sh.Coups {
			if seen <= sh.CutAt && sh.CutAt < seen+len(c.Cards) {
				cutCoup = i
			}
			if c.CutCard != (cutCoup == i) {
				t.Errorf("%s shoe %d coup %d: CutCard %v", name, shoe, c.Number, c.CutCard)
			}
			seen += len(c.Cards)
		}
		after := 1
		if o.AfterCut == CutFinish {
			after = 0
		}
		if cutCoup < 0 || len(sh.Coups)-1-cutCoup != after {
			t.Errorf("%s shoe %d: cut card in coup index %d of %d; want %d coup(s) after it", name, shoe, cutCoup, len(sh.Coups), after)
		}
	}
	checkSentenceOrder(t, name, p)
}

// checkSentenceOrder walks the steps as a controller would: HELO first,
// each shoe NEWSHOE, burn, BURNDONE, then NOMOREBETS, the coup's cards (the
// CUT sentence just before the card it precedes), REVEAL.
func checkSentenceOrder(t *testing.T, name string, p *Plan) {
	t.Helper()
	var got []string
	for _, st := range p.Steps {
		if st.Op != OpSend {
			continue
		}
		switch e := st.Event; e.Kind {
		case shoeread.KindHello:
			got = append(got, "HELO")
		case shoeread.KindButton:
			got = append(got, string(e.Button))
		case shoeread.KindCutCard:
			got = append(got, "CUT")
		case shoeread.KindCard:
			if st.At.Burn {
				got = append(got, "burn")
			} else {
				got = append(got, "card")
			}
		}
	}
	var want []string
	want = append(want, "HELO")
	for _, sh := range p.Shoes {
		drawn := 0
		draw := func(kind string) {
			if drawn == sh.CutAt {
				want = append(want, "CUT")
			}
			drawn++
			want = append(want, kind)
		}
		want = append(want, string(shoeread.ButtonNewShoe))
		for range sh.Burn {
			draw("burn")
		}
		want = append(want, string(shoeread.ButtonBurnDone))
		for _, c := range sh.Coups {
			want = append(want, string(shoeread.ButtonNoMoreBets))
			for range c.Cards {
				draw("card")
			}
			want = append(want, string(shoeread.ButtonReveal))
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: sentence order\n got %v\nwant %v", name, got, want)
	}
}

func TestPlanSameSeedSameShoe(t *testing.T) {
	o := Options{Seed: 42, Shoes: 2, CardPace: 1e9, Faults: []Fault{{Kind: FaultNoise, Coup: 3}, {Kind: FaultImpossible, Shoe: 2, Coup: 2, Card: 1}}}
	a, b := mustPlan(t, o), mustPlan(t, o)
	if !reflect.DeepEqual(a.Steps, b.Steps) || !reflect.DeepEqual(a.Shoes, b.Shoes) {
		t.Fatal("two plans from the same options differ")
	}
	o.Seed = 43
	c := mustPlan(t, o)
	if reflect.DeepEqual(a.Shoes[0].Order, c.Shoes[0].Order) {
		t.Fatal("seeds 42 and 43 shuffle the same shoe")
	}
	// Shoe 2 of seed 42 is shoe 1 of seed 43 (noise and stacking aside).
	p42 := mustPlan(t, Options{Seed: 42, Shoes: 2})
	p43 := mustPlan(t, Options{Seed: 43})
	if !reflect.DeepEqual(p42.Shoes[1].Order, p43.Shoes[0].Order) {
		t.Fatal("shoe 2 of seed 42 is not shoe 1 of seed 43")
	}
}

func TestPlanCoupsLimit(t *testing.T) {
	p := mustPlan(t, Options{Seed: 3, Coups: 4, Shoes: 3})
	if len(p.Shoes) != 1 || len(p.Shoes[0].Coups) != 4 || p.Shoes[0].CutAt != -1 {
		t.Fatalf("Coups 4: got %d shoes, %d coups, cut at %d; want 1, 4, -1", len(p.Shoes), len(p.Shoes[0].Coups), p.Shoes[0].CutAt)
	}
	last := p.Steps[len(p.Steps)-1]
	if last.Op != OpSend || last.Event.Button != shoeread.ButtonReveal {
		t.Fatalf("the run ends with %+v, want REVEAL", last)
	}
}

func TestPlanPace(t *testing.T) {
	p := mustPlan(t, Options{Seed: 5, Shoes: 2, CardPace: 1e9, CoupPace: 7e9})
	// Before every sentence but HELO comes one pause: the betting time
	// before NOMOREBETS, the card pace before everything else.
	for i, st := range p.Steps {
		if st.Op != OpSend || i <= 1 { // HELO, then at once NEWSHOE
			continue
		}
		prev := p.Steps[i-1]
		if st.Event.Kind == shoeread.KindCutCard {
			continue // comes out with the card after it
		}
		want := p.Options.CardPace
		if st.Event.Button == shoeread.ButtonNoMoreBets || st.Event.Button == shoeread.ButtonNewShoe {
			want = p.Options.CoupPace
		}
		if prev.Op == OpSend && prev.Event.Kind == shoeread.KindCutCard {
			prev = p.Steps[i-2]
		}
		if prev.Op != OpPause || prev.For != want {
			t.Fatalf("step %d (%s at %s) follows %+v, want a pause of %s", i, st.Event.Kind, st.At, prev, want)
		}
	}
	if n := len(mustPlan(t, Options{Seed: 5, Coups: 2}).Steps); n >= len(p.Steps) {
		t.Fatalf("full speed plan has %d steps, paced %d: want no pauses", n, len(p.Steps))
	}
	for _, st := range mustPlan(t, Options{Seed: 5, Coups: 2}).Steps {
		if st.Op == OpPause {
			t.Fatal("full speed plan pauses")
		}
	}
}

// findCard returns the index of the card step at shoe 1 coup c card k.
func findCard(t *testing.T, p *Plan, c, k int) int {
	t.Helper()
	for i, st := range p.Steps {
		if st.Op == OpSend && st.Event.Kind == shoeread.KindCard && !st.At.Burn && st.At.Coup == c && st.At.Card == k {
			return i
		}
	}
	t.Fatalf("no card %d in coup %d", k, c)
	return -1
}

// findButton returns the index of button b in shoe 1 coup c.
func findButton(t *testing.T, p *Plan, c int, b shoeread.Button) int {
	t.Helper()
	for i, st := range p.Steps {
		if st.Op == OpSend && st.Event.Kind == shoeread.KindButton && st.At.Coup == c && st.Event.Button == b {
			return i
		}
	}
	t.Fatalf("no %s in coup %d", b, c)
	return -1
}

func hasFault(st Step, k FaultKind) bool {
	for _, f := range st.Faults {
		if f.Kind == k {
			return true
		}
	}
	return false
}

// Each fault lands where it was asked for, and only there.
func TestPlanFaultsWhereAsked(t *testing.T) {
	const seed = 11
	base := mustPlan(t, Options{Seed: seed})
	coup3 := base.Shoes[0].Coups[2]
	tests := []struct {
		spec  string
		check func(t *testing.T, p *Plan)
	}{
		{"noise@3:40", func(t *testing.T, p *Plan) {
			i := findButton(t, p, 3, shoeread.ButtonNoMoreBets)
			st := p.Steps[i-1]
			if st.Op != OpNoise || len(st.Noise) != 40 || !hasFault(st, FaultNoise) {
				t.Fatalf("before NOMOREBETS of coup 3: %+v, want 40 bytes of noise", st)
			}
			for _, c := range st.Noise {
				if c == '$' || c == '\r' || c == '\n' {
					t.Fatalf("v1 noise holds %q: it could frame or end a sentence", c)
				}
			}
		}},
		{"noise@3.2", func(t *testing.T, p *Plan) {
			st := p.Steps[findCard(t, p, 3, 2)-1]
			if st.Op != OpNoise || len(st.Noise) != DefaultNoiseBytes {
				t.Fatalf("before card 2: %+v, want %d bytes of noise", st, DefaultNoiseBytes)
			}
		}},
		{"badsum@3.2", func(t *testing.T, p *Plan) {
			st := p.Steps[findCard(t, p, 3, 2)]
			if !st.Corrupt || st.Drop || !hasFault(st, FaultBadSum) {
				t.Fatalf("card 2: %+v, want corrupt", st)
			}
		}},
		{"badsum@3", func(t *testing.T, p *Plan) {
			if st := p.Steps[findButton(t, p, 3, shoeread.ButtonNoMoreBets)]; !st.Corrupt {
				t.Fatalf("NOMOREBETS: %+v, want corrupt", st)
			}
		}},
		{"drop@3.1:2", func(t *testing.T, p *Plan) {
			i := findCard(t, p, 3, 1)
			for j, st := range p.Steps[i-1 : i+3] {
				if want := j == 1 || j == 2; st.Drop != want || hasFault(st, FaultDrop) != want {
					t.Fatalf("step %d: drop %v, want %v", i-1+j, st.Drop, want)
				}
			}
		}},
		{"unreadable@3.2", func(t *testing.T, p *Plan) {
			st := p.Steps[findCard(t, p, 3, 2)]
			if !st.Event.Unreadable || st.Truth != coup3.Cards[1] || st.Event.Card.Valid() {
				t.Fatalf("card 2: %+v, want unreadable, truly %s", st, coup3.Cards[1])
			}
			if !reflect.DeepEqual(p.Shoes[0].Coups[2].Cards, coup3.Cards) {
				t.Fatal("an unreadable card changed the coup")
			}
		}},
		{"extra@3", func(t *testing.T, p *Plan) {
			i := findButton(t, p, 3, shoeread.ButtonReveal)
			st := p.Steps[i-1]
			n := len(coup3.Cards)
			if st.Event.Kind != shoeread.KindCard || !hasFault(st, FaultExtra) || st.At.Card != n+1 {
				t.Fatalf("before REVEAL: %+v, want the extra card %d", st, n+1)
			}
			got := p.Shoes[0].Coups[2]
			if !reflect.DeepEqual(got.Cards, coup3.Cards) || len(got.Extra) != 1 || got.Extra[0] != st.Event.Card {
				t.Fatalf("coup 3: %v extra %v", got.Cards, got.Extra)
			}
			if _, err := coup.Next(append(got.Cards, got.Extra...)); !errors.Is(err, coup.ErrExtraCard) {
				t.Fatalf("the extra card is one the tableau allows: %v", err)
			}
		}},
		{"early@3", func(t *testing.T, p *Plan) {
			i := findButton(t, p, 3, shoeread.ButtonNoMoreBets)
			j := findCard(t, p, 3, 1)
			if j > i || !hasFault(p.Steps[j], FaultEarly) || p.Steps[j].Event.Card != coup3.Cards[0] {
				t.Fatalf("card 1 at step %d, NOMOREBETS at %d: want the card first", j, i)
			}
			if !reflect.DeepEqual(p.Shoes[0].Coups[2].Cards, coup3.Cards) {
				t.Fatal("an early card changed the coup")
			}
		}},
		{"impossible@3.1", func(t *testing.T, p *Plan) {
			sh := p.Shoes[0]
			x := sh.Burn[0]
			if x.Rank < coup.Ten {
				t.Fatalf("stacked shoe exposes %s, want a ten-valued card", x)
			}
			copies := 0
			for _, c := range sh.Burn {
				if c == x {
					copies++
				}
			}
			if copies != p.Options.Decks {
				t.Fatalf("burn %v holds %d copies of %s, want all %d", sh.Burn, copies, x, p.Options.Decks)
			}
			st := p.Steps[findCard(t, p, 3, 1)]
			if st.Event.Card != x || !hasFault(st, FaultImpossible) {
				t.Fatalf("coup 3 card 1: %+v, want the counterfeit %s", st, x)
			}
			// The controller's check: more of x than the decks hold.
			s, _ := coup.NewShoe(p.Options.Decks)
			var err error
			for _, c := range dealtCards(p)[1] {
				if err = s.Remove(c); err != nil {
					break
				}
			}
			if !errors.Is(err, coup.ErrNotInShoe) {
				t.Fatalf("dealing the plan's cards into a shoe: %v, want ErrNotInShoe", err)
			}
		}},
		{"silence@3.2:3s", func(t *testing.T, p *Plan) {
			st := p.Steps[findCard(t, p, 3, 2)-1]
			if st.Op != OpSilence || st.For != 3e9 {
				t.Fatalf("before card 2: %+v, want 3s of silence", st)
			}
		}},
		{"unplug@3:1s", func(t *testing.T, p *Plan) {
			st := p.Steps[findButton(t, p, 3, shoeread.ButtonNoMoreBets)-1]
			if st.Op != OpUnplug || st.For != 1e9 {
				t.Fatalf("before NOMOREBETS: %+v, want a 1s unplug", st)
			}
		}},
		{"shortburn@1", func(t *testing.T, p *Plan) {
			sh, full := p.Shoes[0], base.Shoes[0]
			if want := burnOf[full.Burn[0].Rank]; len(sh.Burn) != want {
				t.Fatalf("burn %s: %d cards, want %d (the exposed %s, then one fewer than its value)",
					coup.FormatCards(sh.Burn), len(sh.Burn), want, full.Burn[0])
			}
			if !reflect.DeepEqual(sh.Burn, full.Burn[:len(full.Burn)-1]) {
				t.Fatalf("burn %s, want the full burn %s without its last card", coup.FormatCards(sh.Burn), coup.FormatCards(full.Burn))
			}
			// The card the dealer failed to burn is the first of coup 1.
			if c := sh.Coups[0].Cards[0]; c != full.Burn[len(full.Burn)-1] {
				t.Fatalf("coup 1 starts with %s, want the unburned %s", c, full.Burn[len(full.Burn)-1])
			}
			var done *Step
			for i, st := range p.Steps {
				if st.Op == OpSend && st.Event.Button == shoeread.ButtonBurnDone {
					done = &p.Steps[i]
					if prev := p.Steps[i-1]; prev.Event.Kind != shoeread.KindCard || !prev.At.Burn || prev.At.Card != len(sh.Burn) {
						t.Fatalf("BURNDONE follows %+v, want burn card %d", prev, len(sh.Burn))
					}
					break
				}
			}
			if done == nil || !hasFault(*done, FaultShortBurn) {
				t.Fatalf("BURNDONE %+v: want it marked shortburn", done)
			}
		}},
		{"status@3.2:SENSOR,reader 2 dirty", func(t *testing.T, p *Plan) {
			st := p.Steps[findCard(t, p, 3, 2)-1]
			want := shoeread.Event{Kind: shoeread.KindStatus, Status: "SENSOR", Text: "reader 2 dirty"}
			if st.Op != OpSend || st.Event != want || !hasFault(st, FaultStatus) || st.At.Coup != 3 || st.At.Card != 2 {
				t.Fatalf("before card 2: %+v, want %+v", st, want)
			}
			if !reflect.DeepEqual(p.Shoes[0].Coups[2].Cards, coup3.Cards) {
				t.Fatal("a status report changed the coup")
			}
		}},
		{"status@3:LID_OPEN", func(t *testing.T, p *Plan) {
			st := p.Steps[findButton(t, p, 3, shoeread.ButtonNoMoreBets)-1]
			want := shoeread.Event{Kind: shoeread.KindStatus, Status: "LID_OPEN", Text: DefaultStatusText}
			if st.Op != OpSend || st.Event != want || st.At.Card != 0 {
				t.Fatalf("before NOMOREBETS: %+v, want %+v", st, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			f, err := ParseFault(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			p := mustPlan(t, Options{Seed: seed, Faults: []Fault{f}})
			tt.check(t, p)
			// Nothing else carries a fault.
			n := 0
			for _, st := range p.Steps {
				if len(st.Faults) > 0 {
					n++
				}
			}
			want := 1
			if f.Kind == FaultDrop {
				want = f.N
			}
			if n != want {
				t.Fatalf("%d steps carry a fault, want %d", n, want)
			}
		})
	}
}

func TestPlanNoiseBeetek(t *testing.T) {
	p := mustPlan(t, Options{Seed: 2, Protocol: ProtocolBeetek, Faults: []Fault{{Kind: FaultNoise, Coup: 1, N: MaxNoiseBytes}}})
	for _, st := range p.Steps {
		for _, c := range st.Noise {
			switch c {
			case '<', '>', '[', ']', ' ', '\t', '\r', '\n':
				t.Fatalf("Bee-Tek noise holds %q", c)
			}
		}
	}
}

func TestPlanRefuses(t *testing.T) {
	tests := []struct {
		name string
		o    Options
	}{
		{"protocol", Options{Protocol: "nmea"}},
		{"decks", Options{Decks: 7}},
		{"cut too small for one more", Options{Cut: 11}},
		{"cut too small to finish", Options{Cut: 5, AfterCut: CutFinish}},
		{"cut in the burn", Options{Cut: 6*52 - 10}},
		{"negative coups", Options{Coups: -1}},
		{"negative pace", Options{CardPace: -1}},
		{"shoe id", Options{ShoeID: "A,B"}},
		{"fault shoe", Options{Faults: []Fault{{Kind: FaultNoise, Shoe: 2, Coup: 1}}}},
		{"fault kind", Options{Faults: []Fault{{Kind: "smoke", Coup: 1}}}},
		{"two impossible", Options{Faults: []Fault{{Kind: FaultImpossible, Coup: 1, Card: 1}, {Kind: FaultImpossible, Coup: 2, Card: 1}}}},
		{"never reached coup", Options{Faults: []Fault{{Kind: FaultNoise, Coup: 500}}}},
		{"never reached card", Options{Coups: 1, Faults: []Fault{{Kind: FaultUnreadable, Coup: 1, Card: 6}}}},
		{"beyond coups", Options{Coups: 2, Faults: []Fault{{Kind: FaultExtra, Coup: 3}}}},
		{"beetek badsum on a button", Options{Protocol: ProtocolBeetek, Faults: []Fault{{Kind: FaultBadSum, Coup: 3}}}},
		{"beetek short burn", Options{Protocol: ProtocolBeetek, Faults: []Fault{{Kind: FaultShortBurn}}}},
		{"two short burns in a shoe", Options{Shoes: 2, Faults: []Fault{{Kind: FaultShortBurn, Shoe: 2}, {Kind: FaultShortBurn, Shoe: 2}}}},
		{"short burn beyond the shoes", Options{Faults: []Fault{{Kind: FaultShortBurn, Shoe: 2}}}},
		{"short burn with a coup", Options{Faults: []Fault{{Kind: FaultShortBurn, Coup: 1}}}},
		{"short burn never reached", Options{Shoes: 2, Coups: 3, Faults: []Fault{{Kind: FaultShortBurn, Shoe: 2}}}},
		{"status code", Options{Faults: []Fault{{Kind: FaultStatus, Coup: 1, Status: "LID OPEN"}}}},
		{"status with no code", Options{Faults: []Fault{{Kind: FaultStatus, Coup: 1}}}},
		{"status text", Options{Faults: []Fault{{Kind: FaultStatus, Coup: 1, Status: "X", Text: "a*b"}}}},
		{"code on another fault", Options{Faults: []Fault{{Kind: FaultNoise, Coup: 1, Status: "X"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewPlan(tt.o); !errors.Is(err, ErrOptions) {
				t.Fatalf("NewPlan: %v, want ErrOptions", err)
			}
		})
	}
}

// A Bee-Tek plan holds only what a Bee-Tek shoe sends: cards, burned ones
// marked; the same cards as the v1 plan of the same seed.
func TestPlanBeetekSendsCardsOnly(t *testing.T) {
	o := Options{Protocol: ProtocolBeetek, Seed: 12, Faults: []Fault{{Kind: FaultDrop, Coup: 2, N: 2}}}
	p := mustPlan(t, o)
	burns := 0
	for _, st := range p.Steps {
		if st.Op == OpSend && st.Event.Kind != shoeread.KindCard {
			t.Fatalf("Bee-Tek plan sends %s", st.Event.Kind)
		}
		if st.Event.Burn {
			burns++
		}
	}
	if burns != len(p.Shoes[0].Burn) {
		t.Fatalf("%d cards marked burned, the burn had %d", burns, len(p.Shoes[0].Burn))
	}
	// drop@2 starts at NOMOREBETS, which Bee-Tek does not send: it loses
	// the coup's first two cards.
	for k := 1; k <= 2; k++ {
		if st := p.Steps[findCard(t, p, 2, k)]; !st.Drop {
			t.Fatalf("coup 2 card %d not dropped", k)
		}
	}
	o.Protocol = ProtocolV1
	if !reflect.DeepEqual(dealtCards(p), dealtCards(mustPlan(t, o))) {
		t.Fatal("Bee-Tek and v1 plans of one seed deal different cards")
	}
}

// Faults combine: the early card can be spoiled like any other, and a
// counterfeit can be unreadable.
func TestPlanFaultsCombine(t *testing.T) {
	p := mustPlan(t, Options{Seed: 11, Faults: []Fault{
		{Kind: FaultEarly, Coup: 3}, {Kind: FaultBadSum, Coup: 3, Card: 1},
		{Kind: FaultImpossible, Coup: 4, Card: 2}, {Kind: FaultUnreadable, Coup: 4, Card: 2},
	}})
	early := p.Steps[findCard(t, p, 3, 1)]
	if !early.Corrupt || !hasFault(early, FaultEarly) || findCard(t, p, 3, 1) > findButton(t, p, 3, shoeread.ButtonNoMoreBets) {
		t.Fatalf("early card %+v: want it corrupt and before NOMOREBETS", early)
	}
	fake := p.Steps[findCard(t, p, 4, 2)]
	if !fake.Event.Unreadable || fake.Truth != p.Shoes[0].Burn[0] || !hasFault(fake, FaultImpossible) {
		t.Fatalf("counterfeit %+v: want unreadable, truly %s", fake, p.Shoes[0].Burn[0])
	}
}

// A short burn, over many shoes: one card fewer burned than the exposed
// card says, in either shoe of a run, and the rest of the shoe dealt by the
// rules from the card the dealer failed to burn.
func TestPlanShortBurn(t *testing.T) {
	for seed := uint64(0); seed < 25; seed++ {
		for shoe := 1; shoe <= 2; shoe++ {
			p := mustPlan(t, Options{Seed: seed, Shoes: 2, Faults: []Fault{{Kind: FaultShortBurn, Shoe: shoe}}})
			for si, sh := range p.Shoes {
				want := 1 + burnOf[sh.Burn[0].Rank]
				if si+1 == shoe {
					want--
				}
				if len(sh.Burn) != want {
					t.Fatalf("seed %d shortburn@%d: shoe %d burned %d cards after %s, want %d", seed, shoe, si+1, len(sh.Burn)-1, sh.Burn[0], want-1)
				}
				var flat []coup.Card
				flat = append(flat, sh.Burn...)
				for _, c := range sh.Coups {
					if _, err := coup.Score(c.Cards); err != nil {
						t.Fatalf("seed %d shoe %d coup %d: %v", seed, si+1, c.Number, err)
					}
					flat = append(flat, c.Cards...)
				}
				if !reflect.DeepEqual(flat, sh.Order[:len(flat)]) {
					t.Fatalf("seed %d shoe %d: cards dealt are not the shoe's in order", seed, si+1)
				}
			}
			checkSentenceOrder(t, fmt.Sprintf("seed %d shortburn@%d", seed, shoe), p)
		}
	}
}

// Several shoes in one run: each starts with NEWSHOE after the last REVEAL
// of the one before, with betting time between, and the v1 count runs on
// across them (HELO only at power-up).
func TestPlanShoesOneAfterAnother(t *testing.T) {
	p := mustPlan(t, Options{Seed: 21, Shoes: 3, CardPace: 1e9, CoupPace: 5e9})
	if len(p.Shoes) != 3 {
		t.Fatalf("%d shoes dealt, want 3", len(p.Shoes))
	}
	var sends []Step
	hellos := 0
	for i, st := range p.Steps {
		if st.Op != OpSend {
			continue
		}
		if st.Event.Kind == shoeread.KindHello {
			hellos++
		}
		if st.Event.Button == shoeread.ButtonNewShoe && st.At.Shoe > 1 {
			prev := sends[len(sends)-1]
			if prev.Event.Button != shoeread.ButtonReveal || prev.At.Shoe != st.At.Shoe-1 {
				t.Fatalf("NEWSHOE of shoe %d follows %+v, want shoe %d's last REVEAL", st.At.Shoe, prev.Event, st.At.Shoe-1)
			}
			if pause := p.Steps[i-1]; pause.Op != OpPause || pause.For != p.Options.CoupPace {
				t.Fatalf("NEWSHOE of shoe %d follows %+v, want the betting time", st.At.Shoe, pause)
			}
		}
		sends = append(sends, st)
	}
	if hellos != 1 {
		t.Fatalf("%d HELOs, want 1 (at power-up)", hellos)
	}
	checkSentenceOrder(t, "3 shoes", p)
}
