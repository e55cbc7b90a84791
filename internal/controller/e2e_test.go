package controller

// End-to-end tests of the table controller through the real serial path:
// the shoe simulator deals on a pseudo-terminal, the controller reads it
// through the simulator's symlink with device.Link, decodes it with the v1
// driver and its Sequencer, and the Recorder applies it to the table and
// commits it to a real trail. Every misdeal ends in its documented alert
// with the table suspended, and only the right supervisor action clears it;
// every supervisor action is carried out or refused with its reason; and a
// controller killed at any point of a shoe comes back with the same state,
// nothing lost and nothing twice. Run them with
//
//	go test -race -run E2E ./cmd/tablectl/
//
// The harness is in e2e_helpers_test.go.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// The supervisor's commands, as the command channel will hand them to the
// table once their signatures are checked.

func void(n int) coup.Command {
	return coup.Command{Action: coup.ActionVoid, Coup: n, Reason: "misdeal"}
}
func resume() coup.Command { return coup.Command{Action: coup.ActionResume} }
func suspend(why string) coup.Command {
	return coup.Command{Action: coup.ActionSuspend, Reason: why}
}
func enter(c *coup.Card) coup.Command { return coup.Command{Action: coup.ActionCard, Card: c} }
func betsClosed(n int) coup.Command {
	return coup.Command{Action: coup.ActionBetsClosed, Coup: n, By: "game-server"}
}

// Every misdeal product.md lists, each caused by the simulated shoe (or, for
// a card while suspended and a card with no shoe, by the dealer carrying on
// after a supervisor's action), ends in its alert with the table suspended,
// refuses the wrong remedy with a reason, and is cleared by the right one.
func TestE2EMisdeals(t *testing.T) {
	t.Run("card while betting open: void", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 401, Coups: 3, Faults: []shoesim.Fault{fault(t, "early@2")}}, tableConfig(t, nil))
		r.deal(reveal(1))
		r.expectLive(coup.PhaseBettingOpen, 2)
		early, cs := r.deal(faulted(shoesim.FaultEarly))
		if !early.Event.Card.Valid() || early.At.Coup != 2 {
			t.Fatalf("the early card: %+v", early)
		}
		al := r.expectSuspendedBy(coup.AlertCardBettingOpen, coup.NeedsVoid)
		if al.Coup != 2 || al.ShoeSeq != early.Seq || !strings.Contains(al.Message, early.Event.Card.String()) {
			t.Fatalf("alert %+v: want coup 2, shoe seq %d, naming %s", al, early.Seq, early.Event.Card)
		}
		if !hasEvent(events(cs), coup.EvSuspended) {
			t.Fatalf("no suspended event: %s", kinds(events(cs)))
		}
		r.refused(resume(), "needs coup 2 voided")
		r.refused(void(9), "coup 9 is not a completed coup of shoe 1")
		evs := r.accepted(void(0))
		if got := kinds(evs); got != "command_accepted coup_voided alert_resolved betting_opened resumed" {
			t.Fatalf("void: %s", got)
		}
		r.expectLive(coup.PhaseBettingOpen, 3)
		r.expectRecall(planned(r.plan, 1), wantCoup{n: 2, voided: true})
		r.expectRemaining(nil) // the early card is out of the shoe
	})

	t.Run("extra card: resume", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 402, Coups: 3, Faults: []shoesim.Fault{fault(t, "extra@2")}}, tableConfig(t, nil))
		r.deal(coupCard(2, lastCard(r.plan, 2)))
		extra, _ := r.deal(faulted(shoesim.FaultExtra))
		if want := r.plan.Shoes[0].Coups[1].Extra; len(want) != 1 || extra.Event.Card != want[0] {
			t.Fatalf("the extra card sent %s, planned %s", extra.Event.Card, coup.FormatCards(want))
		}
		al := r.expectSuspendedBy(coup.AlertExtraCard, coup.NeedsResume)
		if al.Coup != 2 || al.ShoeSeq != extra.Seq {
			t.Fatalf("alert %+v", al)
		}
		if v := r.pit(); v.Phase != coup.PhaseResult || v.Result == nil {
			t.Fatalf("the coup is complete before the extra card: phase %s result %v", v.Phase, v.Result)
		}
		r.refused(enter(&extra.Event.Card), "no card is waiting for manual entry")
		if got := kinds(r.accepted(resume())); got != "command_accepted alert_resolved resumed" {
			t.Fatalf("resume: %s", got)
		}
		r.expectLive(coup.PhaseResult, 2)
		r.deal(reveal(2))
		r.deal(reveal(3))
		r.expectRecall(planned(r.plan, 1), planned(r.plan, 2), planned(r.plan, 3))
		r.expectRemaining(nil)
	})

	t.Run("unreadable card: manual entry", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 403, Coups: 3, Faults: []shoesim.Fault{fault(t, "unreadable@2.3")}}, tableConfig(t, nil))
		bad, _ := r.deal(coupCard(2, 3))
		if !bad.Event.Unreadable || bad.Truth != r.plan.Shoes[0].Coups[1].Cards[2] {
			t.Fatalf("the unreadable card: %+v", bad)
		}
		r.expectSuspendedBy(coup.AlertUnreadableCard, coup.NeedsCard)
		v := r.pit()
		if n := len(v.Player) + len(v.Banker); n != 3 || !v.Player[1].Unreadable || v.Player[1].Card != nil {
			t.Fatalf("pit view of the coup: player %+v banker %+v", v.Player, v.Banker)
		}
		r.refused(resume(), "needs the card entered or the coup voided")
		r.refused(enter(nil), "a manual entry needs a card")
		evs := r.accepted(enter(&bad.Truth))
		if !hasEvent(evs, coup.EvAlertResolved) || !hasEvent(evs, coup.EvResumed) || !hasEvent(evs, coup.EvCardDealt) {
			t.Fatalf("manual entry: %s", kinds(evs))
		}
		if v := r.pit(); v.Player[1].Card == nil || *v.Player[1].Card != bad.Truth || !v.Player[1].Manual {
			t.Fatalf("the entered card in the pit view: %+v", v.Player[1])
		}
		r.deal(reveal(2))
		r.deal(reveal(3))
		r.expectRecall(planned(r.plan, 1), planned(r.plan, 2), planned(r.plan, 3))
		rec := r.ctl.rec.Recall()
		if c := rec[len(rec)-2].Cards[2]; !c.Manual || c.ShoeSeq != bad.Seq {
			t.Fatalf("recall keeps the entered card as %+v; want it marked manual, shoe seq %d", c, bad.Seq)
		}
		r.expectRemaining(map[uint32]bool{bad.Seq: true})
	})

	t.Run("impossible card: void", func(t *testing.T) {
		t.Parallel()
		opts, n := planFault(t, shoesim.Options{Seed: 404, Coups: 8}, shoesim.FaultImpossible, 4)
		opts.Coups = n + 1
		r := newRig(t, opts, tableConfig(t, nil))
		counterfeit := r.plan.Shoes[0].Burn[0]
		bad, _ := r.deal(faulted(shoesim.FaultImpossible))
		if bad.Event.Card != counterfeit || bad.At.Coup != n || bad.At.Card != 4 {
			t.Fatalf("the counterfeit: %+v, want %s at coup %d card 4", bad, counterfeit, n)
		}
		al := r.expectSuspendedBy(coup.AlertImpossibleCard, coup.NeedsCard)
		if al.Coup != n || !strings.Contains(al.Message, counterfeit.String()) {
			t.Fatalf("alert %+v", al)
		}
		r.refused(resume(), "needs the card entered or the coup voided")
		// The card it claims to be cannot be entered: every copy is out.
		r.refused(enter(&counterfeit), coup.ErrNotInShoe.Error())
		if got := kinds(r.accepted(void(0))); got != "command_accepted coup_voided alert_resolved betting_opened resumed" {
			t.Fatalf("void: %s", got)
		}
		r.expectLive(coup.PhaseBettingOpen, n+1)
		// The dealer reveals the voided coup's cards: nothing is hidden now.
		if _, cs := r.deal(reveal(n)); kinds(events(cs)) != "input_ignored" {
			t.Fatalf("REVEAL after the void: %s", kinds(events(cs)))
		}
		r.deal(reveal(n + 1))
		r.expectRecall(planned(r.plan, n-1), wantCoup{n: n, voided: true}, planned(r.plan, n+1))
		r.expectRemaining(nil)
	})

	t.Run("sequence gap: void", func(t *testing.T) {
		t.Parallel()
		opts, n := planFault(t, shoesim.Options{Seed: 405, Coups: 8}, shoesim.FaultDrop, 4)
		opts.Coups = n + 1
		r := newRig(t, opts, tableConfig(t, nil))
		r.deal(reveal(n - 1))
		// The coup's last card is lost on the line; its REVEAL shows the gap.
		_, cs := r.deal(reveal(n))
		var lost []uint32
		for _, s := range r.sim.Record().Sent {
			if s.Dropped {
				lost = append(lost, s.Seq)
			}
		}
		var gaps []coup.Input
		for _, c := range cs {
			if c.Input.Kind == coup.InGap {
				gaps = append(gaps, c.Input)
			}
		}
		if len(lost) != 1 || len(gaps) != 1 || gaps[0].GapFrom != lost[0] || gaps[0].GapTo != lost[0] {
			t.Fatalf("the shoe lost %v; the controller recorded gaps %+v", lost, gaps)
		}
		al := r.expectSuspendedBy(coup.AlertSequenceGap, coup.NeedsVoid)
		if al.Coup != n {
			t.Fatalf("alert %+v", al)
		}
		r.refused(resume(), fmt.Sprintf("needs coup %d voided", n))
		r.accepted(void(0))
		r.expectLive(coup.PhaseBettingOpen, n+1)
		r.deal(reveal(n + 1))
		r.expectRecall(planned(r.plan, n-1), wantCoup{n: n, voided: true}, planned(r.plan, n+1))
		r.expectRemaining(nil) // the lost card is still in the shoe as the table knows it
	})

	t.Run("shoe offline mid-coup: resume once the link is back", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 406, Coups: 2, Faults: []shoesim.Fault{fault(t, "unplug@2.2:1s")}}, tableConfig(t, nil))
		r.deal(coupCard(2, 1))
		cs := r.await("the link going down", func(c audit.Commit) bool {
			return c.Input.Kind == coup.InLink && c.Input.Link != coup.LinkConnected
		})
		if al := alertsRaised(events(cs)); len(al) != 1 || al[0].Kind != coup.AlertShoeOffline {
			t.Fatalf("unplugged mid-coup: %s", kinds(events(cs)))
		}
		r.expectSuspendedBy(coup.AlertShoeOffline, coup.NeedsLink)
		if v := r.pit(); v.Link == coup.LinkConnected {
			t.Fatalf("link %s while unplugged", v.Link)
		}
		r.refused(resume(), "the shoe link is still disconnected")
		r.refused(void(9), "coup 9 is not a completed coup of shoe 1")
		// The cable goes back; the card the dealer drew meanwhile waits in
		// the shoe until the supervisor has resumed.
		r.replug()
		r.await("the link coming back", func(c audit.Commit) bool {
			return c.Input.Kind == coup.InLink && c.Input.Link == coup.LinkConnected
		})
		if got := kinds(r.accepted(resume())); got != "command_accepted alert_resolved resumed" {
			t.Fatalf("resume: %s", got)
		}
		r.expectLive(coup.PhaseDealing, 2)
		r.deal(reveal(2))
		r.expectRecall(planned(r.plan, 1), planned(r.plan, 2))
		r.expectRemaining(nil)
	})

	t.Run("short coup: void", func(t *testing.T) {
		t.Parallel()
		opts, n := shortCoup(t, shoesim.Options{Seed: 408, Coups: 12})
		r := newRig(t, opts, tableConfig(t, nil))
		r.deal(coupCard(n, 4))
		// The dealer reveals with the tableau wanting a fifth card.
		_, cs := r.deal(faulted(shoesim.FaultShort))
		if got := kinds(events(cs)); got != "alert(coup_incomplete) suspended" {
			t.Fatalf("REVEAL on a short coup: %s", got)
		}
		al := r.expectSuspendedBy(coup.AlertCoupIncomplete, coup.NeedsCard)
		if al.Coup != n {
			t.Fatalf("alert %+v", al)
		}
		r.refused(resume(), "needs the card entered or the coup voided")
		if got := kinds(r.accepted(void(0))); got != "command_accepted coup_voided alert_resolved betting_opened resumed" {
			t.Fatalf("void: %s", got)
		}
		r.expectLive(coup.PhaseBettingOpen, n+1)
		r.expectRecall(planned(r.plan, n-1), wantCoup{n: n, voided: true})
	})

	t.Run("wrong burn: resume", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 407, Coups: 2, Faults: []shoesim.Fault{fault(t, "shortburn@1")}}, tableConfig(t, nil))
		_, cs := r.deal(faulted(shoesim.FaultShortBurn))
		burn := r.plan.Shoes[0].Burn
		required := int(burn[0].Rank)
		if burn[0].Rank >= coup.Ten {
			required = 10
		}
		if got := len(burn) - 1; got != required-1 {
			t.Fatalf("the short burn burned %d after %s", got, burn[0])
		}
		al := r.expectSuspendedBy(coup.AlertWrongBurn, coup.NeedsResume)
		if want := fmt.Sprintf("after %d burned cards; %d required", required-1, required); !strings.Contains(al.Message, want) {
			t.Fatalf("alert %q: want it to say %q", al.Message, want)
		}
		if got := kinds(cs[len(cs)-1].Events); got != "burn_done betting_opened alert(wrong_burn) suspended" {
			t.Fatalf("BURNDONE one card early: %s", got)
		}
		r.refused(betsClosed(1), "the table is suspended")
		r.accepted(resume())
		r.expectLive(coup.PhaseBettingOpen, 1)
		r.deal(reveal(1))
		r.deal(reveal(2))
		r.expectRecall(planned(r.plan, 1), planned(r.plan, 2))
		r.expectRemaining(nil)
	})

	t.Run("card while suspended: void, then resume", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 408, Coups: 3}, tableConfig(t, nil))
		k := lastCard(r.plan, 2)
		r.deal(coupCard(2, k-1))
		if got := kinds(r.accepted(suspend("camera check"))); got != "command_accepted suspended" {
			t.Fatalf("suspend: %s", got)
		}
		// The dealer does not see the suspension and draws the last card.
		late, _ := r.deal(coupCard(2, k))
		al := r.expectSuspendedBy(coup.AlertCardSuspended, coup.NeedsVoid)
		if al.ShoeSeq != late.Seq || al.Coup != 2 {
			t.Fatalf("alert %+v", al)
		}
		r.refused(resume(), "needs coup 2 voided")
		evs := r.accepted(void(0))
		if hasEvent(evs, coup.EvResumed) {
			t.Fatalf("the void lifted the supervisor's own suspension: %s", kinds(evs))
		}
		if v := r.pit(); !v.Suspended || len(v.Alerts) != 0 || v.SuspendReason != "camera check" || v.Coup != 3 {
			t.Fatalf("after the void: %+v", v)
		}
		r.accepted(resume())
		r.expectLive(coup.PhaseBettingOpen, 3)
		r.deal(reveal(2))
		r.deal(reveal(3))
		r.expectRecall(planned(r.plan, 1), wantCoup{n: 2, voided: true}, planned(r.plan, 3))
		r.expectRemaining(nil)
	})

	t.Run("card with no shoe: resume", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, shoesim.Options{Seed: 409, Coups: 3}, tableConfig(t, nil))
		r.deal(reveal(2))
		if got := kinds(r.accepted(coup.Command{Action: coup.ActionShoeEnd})); got != "command_accepted coup_voided shoe_ended" {
			t.Fatalf("shoe end: %s", got)
		}
		// The dealer deals on from the shoe that was ended.
		card, cs := r.deal(coupCard(3, 1))
		if got := kinds(events(cs)); got != "input_ignored alert(card_without_coup) suspended" {
			t.Fatalf("NOMOREBETS and a card with no shoe: %s", got)
		}
		al := r.expectSuspendedBy(coup.AlertCardNoCoup, coup.NeedsResume)
		if al.ShoeSeq != card.Seq || al.Coup != 0 {
			t.Fatalf("alert %+v", al)
		}
		r.refused(void(0), "no shoe is in play")
		r.accepted(resume())
		r.expectLive(coup.PhaseNoShoe, 0)
	})
}

// Every supervisor action, carried out where the state allows it and
// refused with its reason where it does not, on a shoe the simulator deals
// around them.
func TestE2ESupervisorActions(t *testing.T) {
	t.Parallel()
	r := newRig(t, shoesim.Options{Seed: 410, Coups: 4}, tableConfig(t, nil))
	some := r.plan.Shoes[0].Order[0]

	// No shoe yet: the shoe holds its HELO.
	r.refused(void(0), "no shoe is in play")
	r.refused(void(3), "no shoe is in play")
	r.refused(coup.Command{Action: coup.ActionShoeEnd}, "no shoe is in play")
	r.refused(resume(), "the table is not suspended")
	r.refused(enter(&some), "no card is waiting for manual entry")
	r.refused(betsClosed(0), "betting is not open (phase no_shoe)")
	r.refused(coup.Command{Action: "shuffle"}, `unknown action "shuffle"`)

	r.deal(button(0, shoeread.ButtonBurnDone))
	r.expectLive(coup.PhaseBettingOpen, 1)
	r.refused(coup.Command{Action: coup.ActionShoeStart}, "a shoe is in play")

	// The game server closes betting on coup 1; the dealer's button after
	// it changes nothing.
	r.refused(betsClosed(2), "bets-closed for coup 2, but the coup taking bets is 1")
	evs := r.accepted(betsClosed(1))
	if i := slices.IndexFunc(evs, func(e coup.Event) bool { return e.Kind == coup.EvBettingClosed }); i < 0 || evs[i].By != "game-server" {
		t.Fatalf("bets-closed: %s", kinds(evs))
	}
	if _, cs := r.deal(nmb(1)); kinds(events(cs)) != "input_ignored" {
		t.Fatalf("NOMOREBETS after the game server closed betting: %s", kinds(events(cs)))
	}

	// Mid-coup: the cards are hidden from the public until revealed.
	r.deal(coupCard(1, 2))
	pub, pit := r.ctl.rec.View()
	if len(pub.Player) != 1 || !pub.Player[0].Hidden || pub.Player[0].Card != nil || pub.Result != nil {
		t.Fatalf("public view mid-coup shows %+v", pub.Player)
	}
	if pit.Player[0].Card == nil || *pit.Player[0].Card != r.plan.Shoes[0].Coups[0].Cards[0] {
		t.Fatalf("pit view mid-coup shows %+v", pit.Player)
	}
	r.refused(coup.Command{Action: coup.ActionShoeEnd}, "coup 1 has cards dealt: void it or finish it first")
	r.refused(void(7), "coup 7 is not a completed coup of shoe 1")
	r.refused(betsClosed(0), "betting is not open (phase dealing)")
	r.deal(reveal(1))
	r.expectLive(coup.PhaseBettingOpen, 2)

	// Suspend and resume between coups.
	r.accepted(suspend("camera check"))
	r.refused(suspend("again"), "already suspended")
	r.refused(betsClosed(2), "the table is suspended")
	if _, cs := r.deal(nmb(2)); kinds(events(cs)) != "input_ignored" {
		t.Fatalf("NOMOREBETS while suspended: %s", kinds(events(cs)))
	}
	if got := kinds(r.accepted(resume())); got != "command_accepted resumed" {
		t.Fatalf("resume: %s", got)
	}
	r.refused(resume(), "the table is not suspended")
	// The dealer's button went unheeded while suspended: the game server
	// closes betting instead.
	r.accepted(betsClosed(2))

	// Void the coup in progress: complete but not yet revealed.
	r.deal(coupCard(2, lastCard(r.plan, 2)))
	if v := r.pit(); v.Phase != coup.PhaseResult || v.Result == nil {
		t.Fatalf("before the void: phase %s", v.Phase)
	}
	evs = r.accepted(void(0))
	if i := slices.IndexFunc(evs, func(e coup.Event) bool { return e.Kind == coup.EvCoupVoided }); i < 0 ||
		evs[i].Coup != 2 || !slices.Equal(evs[i].Cards, r.plan.Shoes[0].Coups[1].Cards) {
		t.Fatalf("void coup 2: %+v", evs)
	}
	r.expectLive(coup.PhaseBettingOpen, 3)
	r.deal(reveal(2)) // nothing left to reveal
	r.deal(reveal(3))

	// Void a completed coup of the shoe, once.
	evs = r.accepted(void(1))
	if got := kinds(evs); got != "command_accepted coup_voided" {
		t.Fatalf("void coup 1: %s", got)
	}
	r.refused(void(1), "coup 1 is already voided")
	r.refused(void(2), "coup 2 is already voided")
	r.deal(reveal(4))
	want := []wantCoup{planned(r.plan, 1), planned(r.plan, 2), planned(r.plan, 3), planned(r.plan, 4)}
	want[0].voided, want[1].voided = true, true
	r.expectRecall(want...)
	rec := r.ctl.rec.Recall()
	if a := rec[len(rec)-4].Actions; len(a) != 1 || a[0] != "void by supervisor-ann" {
		t.Fatalf("coup 1's actions: %q", a)
	}

	// End the shoe and start the next.
	if got := kinds(r.accepted(coup.Command{Action: coup.ActionShoeEnd})); got != "command_accepted coup_voided shoe_ended" {
		t.Fatalf("shoe end: %s", got)
	}
	r.expectLive(coup.PhaseNoShoe, 0)
	r.refused(void(3), "no shoe is in play")
	if got := kinds(r.accepted(coup.Command{Action: coup.ActionShoeStart})); got != "command_accepted shoe_started" {
		t.Fatalf("shoe start: %s", got)
	}
	if v := r.pit(); v.Phase != coup.PhaseBurn || v.Shoe != 2 || v.Remaining != 6*coup.CardCount {
		t.Fatalf("after shoe start: phase %s shoe %d remaining %d", v.Phase, v.Shoe, v.Remaining)
	}
	r.refused(void(0), "no coup in progress to void")
	r.refused(void(3), "coup 3 is not a completed coup of shoe 2")
}

// A whole shoe to its cut card under two house procedures: every coup is
// recorded as dealt, with the right result, cards stay hidden from the
// public until revealed (or not, when dealt face up), and the shoe ends
// after the coup the cut card rule says.
func TestE2EHouseProcedures(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mod    func(*coup.TableConfig)
		faults []string // that must not stop the game
	}{
		{"burn done by button, reveal by button", nil, []string{"noise@2:64", "status@3.2:LID_OPEN,lid opened", "noise@4.3:9"}},
		{"burn ends at its count, cards face up", func(tc *coup.TableConfig) {
			tc.BurnDoneByButton = false
			tc.Reveal = coup.RevealImmediate
		}, nil},
		{"betting closed by the table's timer", func(tc *coup.TableConfig) {
			tc.BettingTime = time.Millisecond
		}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tc := tableConfig(t, tt.mod)
			// 270 cards behind the cut card: it comes out some forty
			// cards in, after a few coups.
			var faults []shoesim.Fault
			for _, f := range tt.faults {
				faults = append(faults, fault(t, f))
			}
			r := newRig(t, shoesim.Options{Seed: 411, Cut: 270, Faults: faults}, tc)
			coups := r.plan.Shoes[0].Coups
			if len(coups) < 4 || len(coups) > 14 {
				t.Fatalf("the plan deals %d coups", len(coups))
			}
			_, cs := r.deal(button(0, shoeread.ButtonBurnDone))
			if got := kinds(events(cs))[strings.LastIndex(kinds(events(cs)), " ")+1:]; tc.BurnDoneByButton != (got == "betting_opened") {
				t.Fatalf("BURNDONE with burn done by button %v: ... %s", tc.BurnDoneByButton, got)
			}
			var cutAt int
			for n := 1; n <= len(coups); n++ {
				if coups[n-1].CutCard {
					cutAt = n
				}
				if tc.BettingTime > 0 {
					// The timer closes betting before the dealer's button,
					// which then changes nothing.
					r.await(fmt.Sprintf("the timer closing betting on coup %d", n), func(c audit.Commit) bool {
						return c.Input.Kind == coup.InTick && slices.ContainsFunc(c.Events, func(e coup.Event) bool {
							return e.Kind == coup.EvBettingClosed && e.By == "timer" && e.Coup == n
						})
					})
					if _, cs := r.deal(nmb(n)); kinds(events(cs)) != "input_ignored" {
						t.Fatalf("NOMOREBETS after the timer: %s", kinds(events(cs)))
					}
				}
				r.deal(coupCard(n, 2))
				pub, _ := r.ctl.rec.View()
				if faceUp := pub.Player[0].Card != nil; faceUp != (tc.Reveal == coup.RevealImmediate) || pub.Coup != n {
					t.Fatalf("coup %d: public view shows %+v", n, pub.Player)
				}
				r.deal(reveal(n))
				r.expectRecall(planned(r.plan, n))
			}
			v := r.pit()
			if cutAt == 0 || len(coups) != cutAt+1 || v.Phase != coup.PhaseNoShoe || !v.CutCardSeen || v.LastCoup != cutAt+1 {
				t.Fatalf("the cut card came out in coup %d of %d; the table: phase %s, cut card %v, last coup %d",
					cutAt, len(coups), v.Phase, v.CutCardSeen, v.LastCoup)
			}
			r.expectRemaining(nil)
			// Line noise loses nothing and a status report is recorded for
			// the pit: neither stops the game.
			all := events(r.commits.since(0))
			if al := alertsRaised(all); len(al) > 0 {
				t.Fatalf("alerts on a clean shoe: %+v", al)
			}
			for _, f := range faults {
				if f.Kind == shoesim.FaultStatus && !slices.ContainsFunc(all, func(e coup.Event) bool {
					return e.Kind == coup.EvShoeStatus && e.Status == f.Status && e.Reason == f.Text
				}) {
					t.Fatalf("status %s %q not recorded", f.Status, f.Text)
				}
			}
		})
	}
}

// The controller, run as `tablectl run --config FILE`, is killed with
// SIGKILL at points across a shoe (in the burn, with betting closed, mid-
// coup, with a coup complete but not revealed, just as a result is revealed,
// between coups) and started again each time, the shoe holding still while
// it is down; lastly the dealer draws cards while it is down and the line
// loses them. The trail verifies, the state rebuilt from it is the shoe as
// dealt, no shoe sentence is recorded twice, none is missing but the ones
// lost while it was down, and those show as a sequence gap.
func TestE2ERestartMidCoup(t *testing.T) {
	testenv.Long(t, "a controller killed and restarted mid-coup (processes)")
	needRootToReopenKilled(t)
	t.Parallel()
	r := newProcessRig(t, shoesim.Options{Seed: 412, Coups: 6})
	starts := 0
	restartAs := func(suspended bool, phases ...coup.Phase) {
		t.Helper()
		body := r.start()
		starts++
		got := coup.Phase(fmt.Sprint(body["phase"]))
		if !slices.Contains(phases, got) || body["suspended"] != suspended {
			t.Fatalf("controller process %d came back %v suspended=%v; want one of %v, suspended=%v",
				len(r.logs), got, body["suspended"], phases, suspended)
		}
	}
	restart := func(phases ...coup.Phase) { t.Helper(); restartAs(false, phases...) }

	restart(coup.PhaseNoShoe)
	r.deal(burnCard(2))
	r.kill()
	restart(coup.PhaseBurn)
	r.deal(nmb(1))
	r.kill()
	restart(coup.PhaseBettingClosed)
	r.deal(reveal(1))
	r.deal(coupCard(2, 2))
	r.kill()
	restart(coup.PhaseDealing)
	r.deal(reveal(2))
	r.deal(coupCard(3, lastCard(r.plan, 3)))
	r.kill()
	restart(coup.PhaseResult)
	r.deal(reveal(3))
	r.deal(coupCard(4, lastCard(r.plan, 4)))
	// Killed as the result is revealed: the next coup may or may not have
	// opened; either way it opens once the controller is back.
	rev := r.send(reveal(4))
	r.waitRecorded(rev)
	r.kill()
	restart(coup.PhaseResult, coup.PhaseBettingOpen)
	r.waitNextCoup(rev)
	r.deal(reveal(5))
	r.kill()
	restart(coup.PhaseBettingOpen)
	r.deal(coupCard(6, 2))
	r.kill()
	// Down: the dealer draws the rest of coup 6 and the line loses it.
	var lost []shoesim.Sent
	var lostBytes []byte
	for k := 3; k <= lastCard(r.plan, 6); k++ {
		s := r.send(coupCard(6, k))
		lost = append(lost, s)
		lostBytes = append(lostBytes, s.Bytes...)
	}
	if got := drainLine(t, r.link, lost[len(lost)-1].Bytes); !bytes.Equal(got, lostBytes) {
		t.Fatalf("the line held %q while the controller was down; the shoe sent %q", got, lostBytes)
	}
	restart(coup.PhaseDealing)
	r.waitRecorded(r.send(reveal(6))) // and the gap it reveals stops the table
	// The suspension survives a restart.
	r.kill()
	restartAs(true, coup.PhaseDealing)
	r.stop()

	// The trail verifies, its signed checkpoints included, the last one
	// signed at shutdown over the head.
	verifyTrail(t, r.trail, r.pubKey)
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, r.trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	head, err := rd.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp, ok, err := rd.LastCheckpoint(ctx); err != nil || !ok || cp.Seq != head.Seq {
		t.Fatalf("last checkpoint %+v (%v, %v); head %d", cp, ok, err, head.Seq)
	}

	// The state rebuilt from the trail is the shoe as dealt.
	rp, err := audit.Replay(rd.Events(ctx, audit.Query{}), r.tc, audit.ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("replay: %d differences, first %+v", len(d), d[0])
	}
	tab := rp.Table()
	done := tab.ShoeCoups()
	if len(done) != 5 {
		t.Fatalf("rebuilt: %d coups done, want 5", len(done))
	}
	for i, c := range done {
		if c.Coup != i+1 || c.Voided {
			t.Fatalf("rebuilt coup %d: %+v", i+1, c)
		}
		checkCoup(t, fmt.Sprintf("rebuilt coup %d", i+1), c, r.plan.Shoes[0].Coups[i].Cards)
	}
	var inPlay []coup.Card
	for _, dc := range tab.Cards() {
		inPlay = append(inPlay, dc.Card)
	}
	if tab.CoupNumber() != 6 || tab.Phase() != coup.PhaseDealing || !slices.Equal(inPlay, r.plan.Shoes[0].Coups[5].Cards[:2]) {
		t.Fatalf("rebuilt coup %d in %s with %s; the controller saw %s of coup 6", tab.CoupNumber(), tab.Phase(),
			coup.FormatCards(inPlay), coup.FormatCards(r.plan.Shoes[0].Coups[5].Cards[:2]))
	}
	if al := tab.Alerts(); !tab.Suspended() || len(al) != 1 || al[0].Kind != coup.AlertSequenceGap || al[0].Needs != coup.NeedsVoid {
		t.Fatalf("rebuilt alerts %+v", al)
	}

	// Each shoe sentence is recorded once; none is missing but the ones the
	// line lost while the controller was down, and those are the gap.
	recorded := map[uint32]int{}
	var gaps []coup.Input
	starts2 := 0
	for rec, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == audit.KindStart {
			starts2++
		}
		in, ok := inputOf(rec)
		switch {
		case !ok:
		case in.Kind == coup.InGap:
			gaps = append(gaps, in)
		case in.ShoeSeq > 0:
			recorded[in.ShoeSeq]++
		}
	}
	for seq, n := range recorded {
		if n > 1 {
			t.Errorf("shoe sentence %d recorded %d times", seq, n)
		}
	}
	isLost := map[uint32]bool{}
	for _, s := range lost {
		isLost[s.Seq] = true
	}
	for _, s := range r.sim.Record().Sent {
		if !makesInput(s) {
			continue
		}
		if got := recorded[s.Seq]; got == 0 && !isLost[s.Seq] {
			t.Errorf("shoe sentence %d (%s) is not in the trail", s.Seq, bytes.TrimSpace(s.Bytes))
		} else if got > 0 && isLost[s.Seq] {
			t.Errorf("shoe sentence %d was lost on the line, yet it is in the trail", s.Seq)
		}
		delete(recorded, s.Seq)
	}
	if len(recorded) > 0 {
		t.Errorf("the trail records shoe sentences the shoe never sent: %v", recorded)
	}
	if len(gaps) != 1 || gaps[0].GapFrom != lost[0].Seq || gaps[0].GapTo != lost[len(lost)-1].Seq {
		t.Errorf("gaps recorded %+v; the line lost sentences %d to %d", gaps, lost[0].Seq, lost[len(lost)-1].Seq)
	}
	if starts2 != starts {
		t.Errorf("%d starts recorded, %d made", starts2, starts)
	}
}

// A controller killed while the shoe only beats, and down while the line
// loses the shoe's heartbeats, comes back without a sequence gap: no card
// was drawn, so the table must not stop.
func TestE2ERestartHeartbeatsNoGap(t *testing.T) {
	needRootToReopenKilled(t)
	t.Parallel()
	// Three seconds of betting before each coup: the shoe beats twice in it.
	r := newProcessRig(t, shoesim.Options{Seed: 413, Coups: 2, CoupPace: 3 * time.Second, Heartbeat: time.Second})
	r.start()
	r.deal(reveal(1))
	hb1 := r.send(heartbeat(2))
	r.kill()
	hb2 := r.send(heartbeat(2))
	if got := drainLine(t, r.link, hb2.Bytes); !bytes.HasSuffix(append(slices.Clone(hb1.Bytes), hb2.Bytes...), got) {
		t.Fatalf("the line held %q; the shoe sent %q then %q", got, hb1.Bytes, hb2.Bytes)
	}
	r.start()
	r.deal(nmb(2))
	r.deal(reveal(2))
	r.stop()
	for _, row := range r.rows {
		if in, ok := inputOf(row); ok && in.Kind == coup.InGap {
			t.Fatalf("the controller recorded a gap %d-%d though the shoe only beat while it was down (heartbeats %d and %d)",
				in.GapFrom, in.GapTo, hb1.Seq, hb2.Seq)
		}
		if row.Kind == string(coup.EvAlert) {
			t.Fatalf("alert after a restart with only heartbeats missed: %s", row.Body)
		}
	}
}

// needRootToReopenKilled: a controller killed with SIGKILL never clears the
// exclusive mode (TIOCEXCL) go.bug.st/serial sets on its port. A real
// serial port is released when its last opener dies; a pseudo-terminal
// whose master the simulator keeps open is not, and only root may open it
// again.
func needRootToReopenKilled(t *testing.T) {
	t.Helper()
	testenv.Root(t, "to reopen the pseudo-terminal a killed controller left in exclusive mode (TIOCEXCL)")
}
