package coup

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestCoupIncomplete: the dealer moving on from a coup the tableau has not
// finished is a misdeal, and no later card goes into the short coup.
func TestCoupIncomplete(t *testing.T) {
	for _, b := range []string{ButtonNoMoreBets, ButtonReveal, ButtonNewShoe} {
		t.Run(b, func(t *testing.T) {
			h := newHarness(t, nil)
			h.open()
			h.cards("2H,3H,KD,KS") // Player 2 must draw
			h.phase(PhaseDealing, false)
			h.expect(h.btn(b), "alert:coup_incomplete suspended")
			al := h.tab.Alerts()[0]
			if al.Needs != NeedsCard || !strings.Contains(al.Message, "player_3") && !strings.Contains(al.Message, "Player") {
				t.Logf("alert: %+v", al)
			}
			// The dealer's next card is not Player's third.
			h.expect(h.card("9C"), "alert:card_while_suspended")
			if n := len(h.tab.Cards()); n != 4 {
				t.Fatalf("the short coup holds %d cards; a card after it went in", n)
			}
			h.expect(h.cmd(Command{Action: ActionResume}), "command_refused")
			h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved alert_resolved betting_opened resumed")
		})
	}
	t.Run("the missing card entered", func(t *testing.T) {
		h := newHarness(t, nil)
		h.open()
		h.cards("2H,7H,KD,KS") // Player 2 draws, Banker 7 stands
		h.expect(h.btn(ButtonNoMoreBets), "alert:coup_incomplete suspended")
		c, _ := ParseCard("5D")
		h.expect(h.cmd(Command{Action: ActionCard, Card: &c}), "command_accepted alert_resolved card_dealt resumed coup_result")
		if r := h.tab.Result(); r == nil || r.PlayerPoint != 7 {
			t.Fatalf("result %+v, want Player 7 with the entered 5D", r)
		}
	})
	t.Run("the first rules", func(t *testing.T) {
		h := newHarness(t, func(c *TableConfig) { c.Rules = RulesFirst })
		h.open()
		h.cards("2H,3H,KD,KS")
		h.expect(h.btn(ButtonNoMoreBets), "input_ignored")
		h.expect(h.card("9C"), "card_dealt") // into the old coup, as trails of the first rules recorded
	})
}

// TestStrayCardWhileSuspended is every phase a suspended table can be in
// when the dealer draws a card anyway, and what each action then does: a
// card after a finished coup belongs to no coup (resume clears it and the
// coup stands); only a coup in progress must be voided.
func TestStrayCardWhileSuspended(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness)
		needs string
	}{
		{"betting open", func(h *harness) {
			h.open()
			h.cards("2H,3H,KD,KS,5D,9C") // Player 7, Banker 3 draws... complete
			h.btn(ButtonReveal)
			h.tick(4 * time.Second) // coup 2 takes bets
		}, NeedsResume},
		{"betting closed", func(h *harness) { h.open() }, NeedsVoid},
		{"dealing", func(h *harness) { h.open(); h.cards("2H,3H") }, NeedsVoid},
		{"result, cards hidden", func(h *harness) { h.open(); h.cards("9H,3H,KD,KS") }, NeedsVoid},
		{"result, final", func(h *harness) { h.open(); h.cards("9H,3H,KD,KS"); h.btn(ButtonReveal) }, NeedsResume},
	}
	for _, tc := range tests {
		for _, action := range []string{ActionResume, ActionVoid} {
			t.Run(tc.name+", "+action, func(t *testing.T) {
				h := newHarness(t, nil)
				tc.setup(h)
				phase, coup := h.tab.Phase(), h.tab.CoupNumber()
				recalled := len(h.tab.Recall())
				h.expect(h.cmd(Command{Action: ActionSuspend}), "command_accepted suspended")
				h.expect(h.card("AS"), "alert:card_while_suspended")
				if al := h.tab.Alerts()[0]; al.Needs != tc.needs {
					t.Fatalf("a stray card in %s needs %s, want %s", phase, al.Needs, tc.needs)
				}
				evs := h.cmd(Command{Action: action})
				switch {
				case action == ActionResume && tc.needs == NeedsResume:
					h.expect(evs, "command_accepted alert_resolved resumed")
					if h.tab.Phase() != phase || h.tab.CoupNumber() != coup || len(h.tab.Recall()) != recalled {
						t.Fatalf("resume moved the table from %s coup %d to %s coup %d", phase, coup, h.tab.Phase(), h.tab.CoupNumber())
					}
					if rc := h.tab.Recall(); len(rc) > 0 && rc[len(rc)-1].Voided {
						t.Fatal("the finished coup was voided by a resume")
					}
				case action == ActionResume:
					h.expect(evs, "command_refused")
				case tc.needs == NeedsVoid:
					if got := kinds(evs); !strings.HasPrefix(got, "command_accepted coup_voided alert_resolved") {
						t.Fatalf("void: %s", got)
					}
				default: // void with nothing in progress: refused, resume clears it
					if got := kinds(evs); got != "command_refused" && !strings.HasPrefix(got, "command_accepted coup_voided") {
						t.Fatalf("void: %s", got)
					}
				}
			})
		}
	}
}

// TestInputsJudgedAtTheirTime: a deadline that passed before an input came
// is acted on first, so a burst of late sentences (a restart) makes no
// misdeal that their own timing would not.
func TestInputsJudgedAtTheirTime(t *testing.T) {
	for _, rules := range []int{RulesFirst, RulesProtect} {
		t.Run(fmt.Sprint("rules ", rules), func(t *testing.T) {
			h := newHarness(t, func(c *TableConfig) { c.Rules = rules; c.BettingTime = 15 * time.Second })
			h.open()
			h.cards("9H,3H,KD,KS")
			h.expect(h.btn(ButtonReveal), "cards_revealed") // a natural: the result came with the fourth card
			// No tick came (the controller was down); the dealer's next
			// NOMOREBETS arrives after the result time.
			h.now = h.now.Add(10 * time.Second)
			if rules == RulesFirst {
				h.expect(h.btn(ButtonNoMoreBets), "input_ignored")
				h.expect(h.card("2C"), "alert:extra_card suspended")
				return
			}
			h.expect(h.btn(ButtonNoMoreBets), "betting_opened betting_closed")
			h.expect(h.card("2C"), "card_dealt")
			// The betting time runs out before the next coup's first card:
			// betting closes by the timer first.
			h.cards("9C,4D,KC") // Banker 9: a natural
			h.btn(ButtonReveal)
			h.now = h.now.Add(3*time.Second + 15*time.Second + time.Second)
			h.expect(h.card("6D"), "betting_opened betting_closed card_dealt")
		})
	}
}

// TestDealerEndsTheHold: the dealer's NOMOREBETS while the result's hold
// still runs (a burst of sentences read together after a stall or a late
// start, at one time) is judged in the dealer's order from RulesDealerOrder
// on: the hold ends, the next coup opens and closes, and its cards are
// dealt; the rules before ignored it and made the next card a misdeal no
// dealer made. A NEWSHOE in the hold ends the shoe and starts the next (it
// was ignored, and the burn's first card became an extra card). A card in
// the hold with no NOMOREBETS before it stays an extra card, and a
// suspended table's hold is not ended.
func TestDealerEndsTheHold(t *testing.T) {
	for _, rules := range []int{RulesFirst, RulesProtect, RulesDealerOrder} {
		t.Run(fmt.Sprint("rules ", rules), func(t *testing.T) {
			h := newHarness(t, func(c *TableConfig) { c.Rules = rules })
			h.open()
			h.cards("9H,3H,KD,KS")
			h.expect(h.btn(ButtonReveal), "cards_revealed")
			// The same instant: the burst.
			if rules < RulesDealerOrder {
				h.expect(h.btn(ButtonNoMoreBets), "input_ignored")
				h.expect(h.card("2C"), "alert:extra_card suspended")
				return
			}
			evs := h.btn(ButtonNoMoreBets)
			h.expect(evs, "betting_opened betting_closed")
			if evs[0].Coup != 2 || evs[0].Reason != "the dealer's no more bets ended the result's hold" || evs[1].By != "button" {
				t.Fatalf("the hold ended as %+v", evs)
			}
			if _, ok := h.tab.Deadline(); ok {
				t.Fatal("a deadline left running after the hold ended")
			}
			h.expect(h.cards("9C,4D,KC,9D"), "card_dealt card_dealt card_dealt card_dealt coup_result") // a natural
			h.expect(h.btn(ButtonReveal), "cards_revealed")
			// A NEWSHOE in the hold: the next coup never dealt (its bets
			// returned), the shoe ends, the next starts.
			evs = h.btn(ButtonNewShoe)
			h.expect(evs, "betting_opened coup_voided shoe_ended shoe_started")
			if evs[0].Reason != "the dealer's new shoe ended the result's hold" {
				t.Fatalf("the hold ended as %+v", evs[0])
			}
			h.expect(h.card("AH"), "burn_card") // burn one
			h.expect(h.card("2D"), "burn_card")
			h.expect(h.btn(ButtonBurnDone), "burn_done betting_opened")
			h.expect(h.btn(ButtonNoMoreBets), "betting_closed")
			h.expect(h.cards("8C,7D,QH,JD"), "card_dealt card_dealt card_dealt card_dealt coup_result")
			h.expect(h.btn(ButtonReveal), "cards_revealed")
			// A card in the hold with no NOMOREBETS: an extra card, as ever.
			h.expect(h.card("4S"), "alert:extra_card suspended")
			// Suspended: the hold is not running, and NOMOREBETS opens nothing.
			h.expect(h.btn(ButtonNoMoreBets), "input_ignored")
		})
	}
}

// TestShuffleSuspect: a shoe dealt in new-deck order is caught within its
// first 12 cards, under both versions of the check; resume, or the shoe's
// end, clears it.
func TestShuffleSuspect(t *testing.T) {
	deck := "AS,2S,3S,4S,5S,6S,7S,8S,9S,TS,JS,QS,KS,AD,2D,3D,4D,5D,6D,7D,8D,9D,TD,JD,QD,KD"
	for _, rules := range []int{RulesProtect, RulesShoePrint} {
		for _, clear := range []string{ActionResume, ActionShoeEnd} {
			t.Run(fmt.Sprintf("rules %d, %s", rules, clear), func(t *testing.T) {
				h := newHarness(t, func(c *TableConfig) { c.Rules = rules })
				h.btn(ButtonNewShoe)
				var at int
				for i, c := range strings.Split(deck, ",") {
					if evs := h.card(c); strings.Contains(kinds(evs), "alert:shuffle_suspect") {
						at = i + 1
						break
					}
					if i == 1 {
						h.btn(ButtonBurnDone) // AS exposed, one burned
						h.btn(ButtonNoMoreBets)
					}
				}
				if at == 0 || at > 12 {
					t.Fatalf("a new-deck shoe caught at card %d; want within 12", at)
				}
				al := h.tab.Alerts()[len(h.tab.Alerts())-1]
				if al.Kind != AlertShuffleSuspect || al.Needs != NeedsResume {
					t.Fatalf("alert %+v", al)
				}
				switch clear {
				case ActionResume:
					h.cmd(Command{Action: ActionVoid})
					if h.tab.Suspended() {
						h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
					}
				case ActionShoeEnd:
					h.cmd(Command{Action: ActionVoid})
					h.cmd(Command{Action: ActionShoeEnd})
				}
				if len(h.tab.Alerts()) != 0 {
					t.Fatalf("alerts left: %+v", h.tab.Alerts())
				}
			})
		}
	}
}

// shoeCards are the cards of the table's shoe n as its inputs gave them.
func shoeCards(h *harness, n int) []Card {
	var out []Card
	shoe := 0
	for _, in := range h.inputs {
		switch {
		case in.Kind == InButton && in.Button == ButtonNewShoe:
			shoe++
		case in.Kind == InCard && shoe == n && in.Card != nil:
			out = append(out, *in.Card)
		}
	}
	return out
}

// TestShuffleSuspectRepeatAnyCut: the table deals a shoe, then the same
// cards cut 100 on (rules 2): the eighth card raises shuffle_suspect,
// naming the shoe before and where. Under rules 1, which compare only
// the first 30 cards at their own places, nothing is raised.
func TestShuffleSuspectRepeatAnyCut(t *testing.T) {
	for _, rules := range []int{RulesProtect, RulesShoePrint} {
		t.Run(fmt.Sprint("rules ", rules), func(t *testing.T) {
			h := newHarness(t, func(c *TableConfig) { c.Rules = rules })
			dealShoe(h, rand.New(rand.NewPCG(5, 5)), 16)
			prev := shoeCards(h, 1)
			h.btn(ButtonNewShoe)
			at, why := 0, ""
			for i, c := range append(prev[100:], prev[:100]...)[:60] {
				for _, e := range h.shoe(Input{Kind: InCard, Card: &c}) {
					if e.Kind == EvAlert && e.Alert.Kind == AlertShuffleSuspect && at == 0 {
						at, why = i+1, e.Alert.Message
					}
				}
			}
			if rules == RulesProtect {
				if at != 0 {
					t.Fatalf("rules 1 raised at card %d: %s", at, why)
				}
				return
			}
			if at != RepeatRunLen || !strings.Contains(why, "shoe 2 may not have been shuffled: cards 1 to 8 repeat 8 cards in a row of the shoe before this one, its cards 101 to 108 in the same order") {
				t.Fatalf("alarm at card %d (want %d): %s", at, RepeatRunLen, why)
			}
		})
	}
}

// TestSequenceReused: a shoe sentence reusing the number of the one
// before with other content suspends the table (rules 2): mid-coup the
// coup must be voided, between coups a resume clears it.
func TestSequenceReused(t *testing.T) {
	reused := Input{Kind: InRejected, Rejected: &Rejected{Reason: ReasonSeqReused, Raw: "$CARD,7,9D*3C", Count: 1}}
	for _, tc := range []struct {
		name  string
		rules int
		setup func(h *harness)
		want  string
		needs string
	}{
		{"mid-coup", RulesShoePrint, func(h *harness) { h.open(); h.card("2H") }, "alert:sequence_reused suspended", NeedsVoid},
		{"between coups", RulesShoePrint, func(h *harness) { h.open(); h.cards("9H,3H,KD,KS"); h.btn(ButtonReveal) }, "alert:sequence_reused suspended", NeedsResume},
		{"rules 1", RulesProtect, func(h *harness) { h.open(); h.card("2H") }, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *TableConfig) { c.Rules = tc.rules })
			tc.setup(h)
			h.expect(h.apply(reused), tc.want)
			if tc.needs == "" {
				return
			}
			al := h.tab.Alerts()[0]
			if al.Needs != tc.needs || !strings.Contains(al.Message, "$CARD,7,9D*3C") {
				t.Fatalf("alert %+v", al)
			}
			// The card the sentence named comes next (the reader delivers
			// it): a card while suspended, out of the shoe.
			before := h.tab.Remaining().Count(Card{Rank: Nine, Suit: Diamonds})
			h.expect(h.card("9D"), "alert:card_while_suspended")
			if h.tab.Remaining().Count(Card{Rank: Nine, Suit: Diamonds}) != before-1 {
				t.Fatal("the card is not out of the shoe")
			}
		})
	}
}
