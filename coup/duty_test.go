package coup

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func dealerIn(name string) Command { return Command{Action: ActionDealerIn, Dealer: name} }

// TestDealerOnRecord: a dealer signs in and out between coups; every coup
// result, void and alert carries the dealer on duty, and a change of
// dealers while a coup is being dealt is refused.
func TestDealerOnRecord(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate })
	h.expect(h.cmd(Command{Action: ActionDealerOut}), "command_refused")
	h.expect(h.cmd(dealerIn("bad name!")), "command_refused")
	h.expect(h.cmd(dealerIn("ann")), "command_accepted dealer_signed_in")
	h.expect(h.cmd(dealerIn("ann")), "command_refused")
	if h.tab.Dealer() != "ann" || h.tab.PitView().Dealer != "ann" || h.tab.PublicView().Dealer != "ann" {
		t.Fatalf("dealer %q, views %q %q", h.tab.Dealer(), h.tab.PitView().Dealer, h.tab.PublicView().Dealer)
	}
	h.open()
	h.card("9S")
	// Mid-coup: no change of dealers.
	h.expect(h.cmd(dealerIn("bob")), "command_refused")
	h.expect(h.cmd(Command{Action: ActionDealerOut}), "command_refused")
	evs := h.cards("7H,KD,KC")
	res := evs[len(evs)-1]
	if res.Kind != EvCoupResult || res.Dealer != "ann" {
		t.Fatalf("result %+v", res)
	}
	h.tick(3 * time.Second)
	// Between coups: bob relieves ann.
	h.expect(h.cmd(dealerIn("bob")), "command_accepted dealer_signed_out dealer_signed_in")
	out := h.events[len(h.events)-2]
	if out.Dealer != "ann" || out.Reason != "relieved by bob" {
		t.Fatalf("sign-out %+v", out)
	}
	h.btn(ButtonNoMoreBets)
	// A card too many after bob's coup: the alert is bob's.
	h.cards("2S,AH,2D,2C,8H")
	evs = h.card("9D")
	if evs[0].Kind != EvAlert || evs[0].Dealer != "bob" || evs[0].Alert.Dealer != "bob" {
		t.Fatalf("alert %+v", evs[0])
	}
	h.cmd(Command{Action: ActionResume})
	h.tick(3 * time.Second)
	// Voiding ann's coup later puts the void against ann, not bob.
	evs = h.cmd(Command{Action: ActionVoid, Coup: 1})
	if v := evs[1]; v.Kind != EvCoupVoided || v.Dealer != "ann" {
		t.Fatalf("void %+v", v)
	}
	rec := h.tab.ShoeCoups()
	if rec[0].Dealer != "ann" || rec[1].Dealer != "bob" {
		t.Fatalf("coups %+v", rec)
	}
	h.expect(h.cmd(Command{Action: ActionDealerOut}), "command_accepted dealer_signed_out")
	if h.tab.Dealer() != "" {
		t.Fatalf("dealer %q after sign-out", h.tab.Dealer())
	}
	// No dealer: events carry none.
	h.btn(ButtonNoMoreBets)
	evs = h.cards("9S,7H,KD,KC")
	if evs[len(evs)-1].Dealer != "" {
		t.Fatalf("result with no dealer: %+v", evs[len(evs)-1])
	}
}

// TestSelfCheckSuspends: a failed self-check raises an alert no supervisor
// can clear (not resume, not a void), cards drawn meanwhile are misdeals,
// an unsigned result does not clear it, and a passing check does.
func TestSelfCheckSuspends(t *testing.T) {
	h := newHarness(t, nil)
	check := func(result string) []Event {
		return h.apply(Input{Kind: InSelfCheck, Check: &SelfCheck{Result: result, Start: true, Detail: "executable differs"}})
	}
	h.expect(check(SelfCheckUnsigned), "self_check")
	h.phase(PhaseNoShoe, false)
	h.expect(check(SelfCheckFailed), "self_check alert:self_check_failed suspended")
	h.expect(check(SelfCheckFailed), "self_check") // one alert, not one per check
	h.expect(h.cmd(Command{Action: ActionResume}), "command_refused")
	h.expect(h.btn(ButtonNewShoe), "shoe_started")
	// The table refuses to deal: the burn card is a misdeal.
	h.expect(h.card("5S"), "alert:card_while_suspended")
	h.expect(h.cmd(Command{Action: ActionVoid}), "command_refused")
	h.expect(check(SelfCheckUnsigned), "self_check")
	if !h.tab.Suspended() {
		t.Fatal("an unsigned check cleared a failed one")
	}
	evs := check(SelfCheckOK)
	if got := kinds(evs); got != "self_check alert_resolved" {
		t.Fatalf("events %s", got)
	}
	// The misdeal's alert still holds the table until a supervisor acts.
	if !h.tab.Suspended() || slices.ContainsFunc(h.tab.Alerts(), func(a Alert) bool { return a.Kind == AlertSelfCheck }) {
		t.Fatalf("alerts %+v", h.tab.Alerts())
	}
	h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
}

// TestRecallWhileSuspended: the last 10 coups stay recallable while any
// alert holds the table, and the recall is the same as before the alert.
func TestRecallWhileSuspended(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate; c.ResultTime = 0 })
	h.open()
	for i := 0; i < 12; i++ {
		if i > 0 {
			h.btn(ButtonNoMoreBets)
		}
		h.cards(naturalCoup(i))
	}
	before := h.tab.Recall()
	for _, suspend := range []func(){
		func() { h.card("2H") }, // card while betting open
		func() { h.apply(Input{Kind: InSelfCheck, Check: &SelfCheck{Result: SelfCheckFailed}}) },
		func() { h.apply(Input{Kind: InLink, Link: LinkDisconnected}) },
		func() { h.cmd(Command{Action: ActionSuspend, ID: "s2"}) },
	} {
		suspend()
		if !h.tab.Suspended() {
			t.Fatal("not suspended")
		}
		rec := h.tab.Recall()
		if len(rec) != RecallDepth || rec[RecallDepth-1].Coup != 12 || !slices.EqualFunc(rec, before, func(a, b CoupRecord) bool {
			return a.Coup == b.Coup && len(a.Cards) == len(b.Cards) && a.Result.Winner == b.Result.Winner && a.Result.Margin == b.Result.Margin
		}) {
			t.Fatalf("recall while suspended: %d coups", len(rec))
		}
	}
}

// TestRecallStrays: a card drawn while the table is suspended during a
// coup is in no hand, and the coup's record keeps it in its place in shoe
// order, whether the coup is then voided or dealt on; a snapshot keeps it.
func TestRecallStrays(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []string // the coup's cards before the suspension (after open, bets are closed)
		after  func(h *harness)
		voided bool
	}{
		{"mid-coup, voided", []string{"2H", "3D"}, func(h *harness) { h.cmd(Command{Action: ActionVoid, ID: "v1"}) }, true},
		{"betting open, resumed, dealt", []string{"2H", "3D", "4C", "5S"}, func(h *harness) {
			h.cmd(Command{Action: ActionResume, ID: "r1"})
			h.btn(ButtonNoMoreBets)
			h.cards("2H,3D,4C,5S")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate; c.ResultTime = 0 })
			h.open()
			for _, c := range tc.before {
				h.card(c)
			}
			after := len(tc.before)
			if h.tab.Phase() == PhaseBettingOpen {
				after = 0 // the coup dealt; the next takes bets
			}
			h.cmd(Command{Action: ActionSuspend, ID: "s1", Reason: "camera"})
			h.card("9S") // drawn while suspended: in no hand
			snap, err := h.tab.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			back, err := RestoreSnapshot(snap)
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := back.Snapshot(); string(again) != string(snap) || !strings.Contains(string(snap), "strays") {
				t.Fatalf("the stray does not survive a snapshot")
			}
			tc.after(h)
			rec := h.tab.Recall()
			if len(rec) == 0 {
				t.Fatal("no record")
			}
			r := rec[len(rec)-1]
			if r.Voided != tc.voided || len(r.Strays) != 1 || r.Strays[0].Card.String() != "9S" || r.Strays[0].After != after {
				t.Fatalf("record %+v: want the 9S after the coup's card %d", r, after)
			}
			for _, dc := range r.Cards {
				if dc.Card.String() == "9S" {
					t.Fatalf("the stray is in a hand: %+v", r.Cards)
				}
			}
		})
	}
}

// TestBoardView: while betting is open the public view says when the
// betting time closes it (none while suspended), and keeps the last
// coup's result up until the next coup's first card.
func TestBoardView(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate; c.ResultTime = 0; c.BettingTime = 15 * time.Second })
	h.open() // betting closed by the button on coup 1
	if v := h.tab.PublicView(); !v.BetsCloseAt.IsZero() || v.Last != nil {
		t.Fatalf("betting closed on coup 1: closes at %v, last %+v", v.BetsCloseAt, v.Last)
	}
	h.cards(naturalCoup(1))
	v := h.tab.PublicView()
	if v.Phase != PhaseBettingOpen || !v.BetsCloseAt.Equal(h.now.Add(15*time.Second)) {
		t.Fatalf("coup 2 betting: phase %s, closes at %v", v.Phase, v.BetsCloseAt)
	}
	if v.Last == nil || v.Last.Coup != 1 || len(v.Last.Player) != 2 || v.Last.Result.Winner != SidePlayer {
		t.Fatalf("the last result while betting: %+v", v.Last)
	}
	h.cmd(Command{Action: ActionSuspend, ID: "s"})
	if v := h.tab.PublicView(); !v.BetsCloseAt.IsZero() {
		t.Errorf("suspended, betting closes at %v", v.BetsCloseAt)
	}
	h.cmd(Command{Action: ActionResume, ID: "r"})
	h.btn(ButtonNoMoreBets)
	if v := h.tab.PublicView(); v.Last == nil || !v.BetsCloseAt.IsZero() {
		t.Errorf("bets closed, no card: last %+v, closes at %v", v.Last, v.BetsCloseAt)
	}
	h.card("2H")
	if v := h.tab.PublicView(); v.Last != nil {
		t.Errorf("a card dealt, the last result still up: %+v", v.Last)
	}
}

// TestRecallMisdealCard: the card drawn while betting was open (a
// misdeal) is in no hand, and the voided coup's record keeps it, marked.
func TestRecallMisdealCard(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate; c.ResultTime = 0 })
	h.open()
	h.cards("2H,3D,4C,5S") // coup 1; betting opens on coup 2
	h.card("9S")
	h.cmd(Command{Action: ActionVoid, ID: "v"})
	rec := h.tab.Recall()
	r := rec[len(rec)-1]
	if r.Coup != 2 || !r.Voided || len(r.Strays) != 1 || !r.Strays[0].BettingOpen || r.Strays[0].Card.String() != "9S" {
		t.Fatalf("the misdealt coup's record: %+v", r)
	}
}
