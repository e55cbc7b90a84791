package coup

import (
	"strings"
	"testing"
)

// TestSelfCheckHoldsGameCommands: while a failed self-check holds the
// table, every command that changes the game is refused with the reason
// (void of the coup in progress or of a finished one, a manual card,
// shoe start and end, bets closed, dealer sign-in and out, resume), each
// from a state where it would otherwise be taken; suspend, which only adds
// a hold, is still taken.
func TestSelfCheckHoldsGameCommands(t *testing.T) {
	fail := Input{Kind: InSelfCheck, Check: &SelfCheck{Result: SelfCheckFailed, Detail: "executable differs"}}
	for _, tc := range []struct {
		name  string
		setup func(h *harness)
		cmd   Command
		want  string // the events of the command
	}{
		{"void in progress", func(h *harness) { h.open(); h.cards("9S,7H") }, Command{Action: ActionVoid}, "command_refused"},
		{"void finished", func(h *harness) { h.open(); h.cards("9S,7H,KD,KC"); h.btn(ButtonReveal) }, Command{Action: ActionVoid, Coup: 1}, "command_refused"},
		{"card", func(h *harness) { h.open(); h.cards("9S,7H,??") }, Command{Action: ActionCard, Card: mustCard(t, "KD")}, "command_refused"},
		{"shoe-start", func(h *harness) {}, Command{Action: ActionShoeStart}, "command_refused"},
		{"shoe-end", func(h *harness) { h.open(); h.cards("9S,7H,KD,KC"); h.btn(ButtonReveal) }, Command{Action: ActionShoeEnd}, "command_refused"},
		{"bets-closed", func(h *harness) { h.open(); h.cards("9S,7H,KD,KC"); h.btn(ButtonReveal); h.tick(h.tab.cfg.ResultTime) }, Command{Action: ActionBetsClosed}, "command_refused"},
		{"dealer-in", func(h *harness) {}, Command{Action: ActionDealerIn, Dealer: "d-1"}, "command_refused"},
		{"dealer-out", func(h *harness) { h.cmd(Command{Action: ActionDealerIn, Dealer: "d-1"}) }, Command{Action: ActionDealerOut}, "command_refused"},
		{"resume", func(h *harness) {}, Command{Action: ActionResume}, "command_refused"},
		{"suspend", func(h *harness) {}, Command{Action: ActionSuspend, Reason: "look at the box"}, "command_accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			tc.setup(h)
			h.apply(fail)
			if !h.tab.Suspended() {
				t.Fatal("a failed self-check did not suspend the table")
			}
			evs := h.cmd(tc.cmd)
			h.expect(evs, tc.want)
			if tc.want == "command_refused" && !strings.Contains(evs[0].Reason, "self-check") {
				t.Fatalf("refused without the reason: %q", evs[0].Reason)
			}
		})
	}
}

func mustCard(t *testing.T, s string) *Card {
	t.Helper()
	c, err := ParseCard(s)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestSelfCheckHoldsByRules: a trail recorded under an earlier procedure
// replays as it was dealt: before RulesSelfCheckHolds, a void of the coup
// in progress was taken while a failed self-check held the table.
func TestSelfCheckHoldsByRules(t *testing.T) {
	fail := Input{Kind: InSelfCheck, Check: &SelfCheck{Result: SelfCheckFailed, Detail: "executable differs"}}
	for _, tc := range []struct {
		rules int
		want  string
	}{
		{RulesFirst, "command_accepted coup_voided betting_opened"},
		{RulesProtect, "command_accepted coup_voided betting_opened"},
		{RulesSelfCheckHolds, "command_refused"},
	} {
		h := newHarness(t, func(c *TableConfig) { c.Rules = tc.rules })
		h.open()
		h.cards("9S,7H")
		h.apply(fail)
		h.expect(h.cmd(Command{Action: ActionVoid}), tc.want)
	}
}
