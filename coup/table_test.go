package coup

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// harness drives a Table the way the controller does: every shoe input gets
// the next shoe sequence number and the harness's clock.
type harness struct {
	t      *testing.T
	tab    *Table
	now    time.Time
	seq    uint32
	inputs []Input
	events []Event
}

var t0 = time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, mod func(*TableConfig)) *harness {
	t.Helper()
	p, err := BuiltinProfile(ProfileVIP)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultTableConfig(p)
	if mod != nil {
		mod(&cfg)
	}
	tab, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, tab: tab, now: t0}
}

func (h *harness) apply(in Input) []Event {
	h.t.Helper()
	in.At = h.now
	h.inputs = append(h.inputs, in)
	evs := h.tab.Apply(in)
	h.events = append(h.events, evs...)
	// Everything the table takes and derives is recorded as JSON: it must
	// encode, and the input must decode to itself.
	data, err := json.Marshal(in)
	if err != nil {
		h.t.Fatalf("input %s does not encode: %v", in, err)
	}
	var back Input
	if err := json.Unmarshal(data, &back); err != nil {
		h.t.Fatalf("input %s does not decode: %v", data, err)
	}
	if again, _ := json.Marshal(back); string(again) != string(data) {
		h.t.Fatalf("input does not round-trip:\n%s\n%s", data, again)
	}
	for _, e := range evs {
		if _, err := json.Marshal(e); err != nil {
			h.t.Fatalf("event %s does not encode: %v", e.Kind, err)
		}
	}
	if _, err := json.Marshal(h.tab.PitView()); err != nil {
		h.t.Fatalf("pit view does not encode: %v", err)
	}
	return evs
}

func (h *harness) shoe(in Input) []Event {
	h.seq++
	in.ShoeSeq = h.seq
	return h.apply(in)
}

func (h *harness) card(s string) []Event {
	h.t.Helper()
	if s == "??" {
		return h.shoe(Input{Kind: InCard, Unreadable: true})
	}
	c, err := ParseCard(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.shoe(Input{Kind: InCard, Card: &c})
}

func (h *harness) cards(list string) []Event {
	h.t.Helper()
	var evs []Event
	for _, s := range strings.Split(list, ",") {
		evs = append(evs, h.card(s)...)
	}
	return evs
}

func (h *harness) btn(b string) []Event { return h.shoe(Input{Kind: InButton, Button: b}) }

// naturalCoup is coup i of a run of four-card coups (Player a natural 9,
// Banker 7) whose ranks and suits vary as a shuffled shoe's would: the
// shuffle check (RulesShoePrint) finds a pattern repeated coup after
// coup, as it should.
func naturalCoup(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 9))
	nines := [][2]string{{"9", "K"}, {"9", "Q"}, {"9", "J"}, {"9", "T"}, {"4", "5"}, {"3", "6"}, {"2", "7"}, {"8", "A"}}
	sevens := [][2]string{{"7", "K"}, {"7", "T"}, {"3", "4"}, {"2", "5"}, {"A", "6"}, {"7", "Q"}}
	p, b := nines[r.IntN(len(nines))], sevens[r.IntN(len(sevens))]
	suit := func() string { return string("SHDC"[r.IntN(4)]) }
	return p[0] + suit() + "," + b[0] + suit() + "," + p[1] + suit() + "," + b[1] + suit()
}

func (h *harness) cmd(c Command) []Event {
	if c.ID == "" {
		c.ID = "cmd-" + c.Action
	}
	if c.By == "" {
		c.By = "pit-boss"
	}
	return h.apply(Input{Kind: InCmd, Command: &c})
}

func (h *harness) tick(d time.Duration) []Event {
	h.now = h.now.Add(d)
	return h.apply(Input{Kind: InTick})
}

func kinds(evs []Event) string {
	ks := make([]string, len(evs))
	for i, e := range evs {
		ks[i] = string(e.Kind)
		if e.Kind == EvAlert {
			ks[i] += ":" + string(e.Alert.Kind)
		}
	}
	return strings.Join(ks, " ")
}

func (h *harness) expect(evs []Event, want string) {
	h.t.Helper()
	if got := kinds(evs); got != want {
		h.t.Fatalf("events:\n got  %s\n want %s", got, want)
	}
}

func (h *harness) phase(want Phase, suspended bool) {
	h.t.Helper()
	if h.tab.Phase() != want || h.tab.Suspended() != suspended {
		h.t.Fatalf("phase %s suspended %v; want %s %v (alerts %+v)", h.tab.Phase(), h.tab.Suspended(), want, suspended, h.tab.Alerts())
	}
}

// open starts a shoe with the burn "5S" + five cards and closes betting on
// coup 1.
func (h *harness) open() {
	h.t.Helper()
	h.expect(h.btn(ButtonNewShoe), "shoe_started")
	h.expect(h.card("5S"), "burn_card")
	h.cards("2C,3C,4C,6C,7C")
	h.expect(h.btn(ButtonBurnDone), "burn_done betting_opened")
	h.expect(h.btn(ButtonNoMoreBets), "betting_closed")
	h.phase(PhaseBettingClosed, false)
}

func TestCoupLifecycle(t *testing.T) {
	h := newHarness(t, nil)
	h.phase(PhaseNoShoe, false)
	h.open()
	if b := h.tab.Burn(); b.Required != 5 || b.Burned != 5 || b.First.String() != "5S" {
		t.Fatalf("burn %+v", b)
	}
	// Player 9S KD natural against Banker 7H KC: four cards.
	h.expect(h.card("9S"), "card_dealt")
	h.expect(h.card("7H"), "card_dealt")
	h.expect(h.card("KD"), "card_dealt")
	h.expect(h.card("KC"), "card_dealt coup_result")
	h.phase(PhaseResult, false)
	if len(h.tab.Recall()) != 0 {
		t.Fatal("coup recorded before its cards were revealed")
	}
	for _, dc := range h.tab.Cards() {
		if !dc.Hidden {
			t.Fatalf("card %s shown before reveal", dc.Card)
		}
	}
	h.expect(h.btn(ButtonReveal), "cards_revealed")
	h.expect(h.tick(time.Second), "input_ignored")
	h.expect(h.tick(2*time.Second), "betting_opened")
	h.phase(PhaseBettingOpen, false)
	if h.tab.CoupNumber() != 2 {
		t.Fatalf("coup %d", h.tab.CoupNumber())
	}
	rec := h.tab.Recall()
	if len(rec) != 1 || rec[0].Result.Winner != SidePlayer || FormatCards(rec[0].Result.Player) != "9S,KD" {
		t.Fatalf("recall %+v", rec)
	}
	var res Event
	for _, e := range h.events {
		if e.Kind == EvCoupResult {
			res = e
		}
	}
	// What each spot pays is in the result, for every spot of the profile.
	if res.Outcomes[BetPlayer] != (Outcome{Kind: Win, Pays: R(1, 1)}) || res.Outcomes[BetPlayerBonus] != (Outcome{Kind: Win, Pays: R(1, 1)}) ||
		res.Outcomes[BetBanker].Kind != Lose || len(res.Outcomes) != len(h.tab.Config().Profile.Bets) {
		t.Fatalf("outcomes %+v", res.Outcomes)
	}
	if got := h.tab.Remaining().Remaining(); got != 8*52-6-4 {
		t.Fatalf("remaining %d", got)
	}
}

// TestMisdeals drives every misdeal product.md lists and checks the alert,
// the suspension, and what clears it.
func TestMisdeals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness)
		cause func(h *harness) []Event
		alert AlertKind
		needs string
		clear func(h *harness)
		after Phase
	}{
		{
			name: "card while betting open", alert: AlertCardBettingOpen, needs: NeedsVoid,
			setup: func(h *harness) { h.open(); h.cards("9S,7H,KD,KC"); h.btn(ButtonReveal); h.tick(3 * time.Second) },
			cause: func(h *harness) []Event { return h.card("AH") },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_refused")
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "card while suspended mid-coup", alert: AlertCardSuspended, needs: NeedsVoid,
			setup: func(h *harness) { h.open(); h.card("9S"); h.cmd(Command{Action: ActionSuspend, Reason: "dispute"}) },
			cause: func(h *harness) []Event { return h.card("7H") },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened")
				h.phase(PhaseBettingOpen, true) // the supervisor's own suspension still holds
				h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "card with no shoe", alert: AlertCardNoCoup, needs: NeedsResume,
			cause: func(h *harness) []Event { return h.card("AH") },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
			},
			after: PhaseNoShoe,
		},
		{
			name: "extra card", alert: AlertExtraCard, needs: NeedsResume,
			setup: func(h *harness) { h.open(); h.cards("9S,7H,KD,KC") },
			cause: func(h *harness) []Event { return h.card("5D") },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
			},
			after: PhaseResult,
		},
		{
			name: "unreadable card, entered by hand", alert: AlertUnreadableCard, needs: NeedsCard,
			setup: func(h *harness) { h.open(); h.cards("9S,7H") },
			cause: func(h *harness) []Event { return h.card("??") },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_refused")
				h.expect(h.cmd(Command{Action: ActionCard, Card: &Card{Rank: King, Suit: Diamonds}}), "command_accepted alert_resolved card_dealt resumed")
				h.expect(h.card("KC"), "card_dealt coup_result")
				if dc := h.tab.Cards()[2]; !dc.Manual || dc.Card.String() != "KD" {
					h.t.Fatalf("manual card %+v", dc)
				}
			},
			after: PhaseResult,
		},
		{
			name: "impossible card", alert: AlertImpossibleCard, needs: NeedsCard,
			setup: func(h *harness) {
				h.open()
				// Eight decks hold eight queens of hearts: deal seven, then the eighth and a ninth.
				for i := 0; i < 7; i++ {
					h.tab.comp.Remove(Card{Rank: Queen, Suit: Hearts})
				}
				h.card("QH")
			},
			cause: func(h *harness) []Event { return h.card("QH") },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "sequence gap mid-coup", alert: AlertSequenceGap, needs: NeedsVoid,
			setup: func(h *harness) { h.open(); h.card("9S") },
			cause: func(h *harness) []Event {
				return h.apply(Input{Kind: InGap, GapFrom: h.seq + 1, GapTo: h.seq + 2})
			},
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "sequence gap between coups", alert: AlertSequenceGap, needs: NeedsResume,
			setup: func(h *harness) { h.open(); h.cards("9S,7H,KD,KC"); h.btn(ButtonReveal); h.tick(3 * time.Second) },
			cause: func(h *harness) []Event { return h.apply(Input{Kind: InGap, GapFrom: 40, GapTo: 40}) },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "shoe offline mid-coup", alert: AlertShoeOffline, needs: NeedsLink,
			setup: func(h *harness) { h.open(); h.card("9S") },
			cause: func(h *harness) []Event {
				return h.apply(Input{Kind: InLink, Link: LinkDisconnected, Reason: "port vanished"})
			},
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_refused")
				h.apply(Input{Kind: InLink, Link: LinkConnected})
				h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
				h.expect(h.cards("7H,KD,KC"), "card_dealt card_dealt card_dealt coup_result")
			},
			after: PhaseResult,
		},
		{
			name: "wrong burn", alert: AlertWrongBurn, needs: NeedsResume,
			setup: func(h *harness) { h.btn(ButtonNewShoe); h.cards("8D,2C,3C") },
			cause: func(h *harness) []Event { return h.btn(ButtonBurnDone) },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_accepted alert_resolved resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			// The dealer reveals a coup the tableau has not finished: Player
			// holds 2 and must draw.
			name: "short coup", alert: AlertCoupIncomplete, needs: NeedsCard,
			setup: func(h *harness) { h.open(); h.cards("2H,3H,KD,KS") },
			cause: func(h *harness) []Event { return h.btn(ButtonReveal) },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionResume}), "command_refused")
				h.expect(h.card("9C"), "alert:card_while_suspended") // the dealer's next card is not Player's third
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved alert_resolved betting_opened resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "sequence number reused mid-coup", alert: AlertSequenceReused, needs: NeedsVoid,
			setup: func(h *harness) { h.open(); h.card("9S") },
			cause: func(h *harness) []Event {
				return h.apply(Input{Kind: InRejected, Rejected: &Rejected{Reason: ReasonSeqReused, Raw: "$CARD,2,9D*3C", Count: 1}})
			},
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened resumed")
			},
			after: PhaseBettingOpen,
		},
		{
			name: "shoe restarted mid-coup", alert: AlertShoeRestarted, needs: NeedsVoid,
			setup: func(h *harness) { h.open(); h.card("9S") },
			cause: func(h *harness) []Event { return h.apply(Input{Kind: InHello, ShoeSeq: 1, Text: "shoe-7"}) },
			clear: func(h *harness) {
				h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened resumed")
			},
			after: PhaseBettingOpen,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if tt.setup != nil {
				tt.setup(h)
			}
			evs := tt.cause(h)
			var al *Alert
			for _, e := range evs {
				if e.Kind == EvAlert {
					al = e.Alert
				}
			}
			if al == nil || al.Kind != tt.alert || al.Needs != tt.needs {
				t.Fatalf("events %s; alert %+v; want %s needing %s", kinds(evs), al, tt.alert, tt.needs)
			}
			if !h.tab.Suspended() {
				t.Fatal("a misdeal left the table live")
			}
			// No card is accepted while suspended: one more is another alert.
			if tt.alert != AlertShoeOffline {
				h.expect(h.tab.Apply(Input{Kind: InTick, At: h.now.Add(time.Hour)}), "input_ignored")
			}
			tt.clear(h)
			h.phase(tt.after, false)
			if len(h.tab.Alerts()) != 0 {
				t.Fatalf("alerts left: %+v", h.tab.Alerts())
			}
		})
	}
}

// TestCommandsRefused checks each supervisor action against states where
// it makes no sense.
func TestCommandsRefused(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(h *harness)
		cmd    Command
		reason string
	}{
		{"resume a live table", nil, Command{Action: ActionResume}, "not suspended"},
		{"void with no shoe", nil, Command{Action: ActionVoid}, "no shoe"},
		{"void an unknown coup", func(h *harness) { h.open() }, Command{Action: ActionVoid, Coup: 7}, "not a completed coup"},
		{"void twice", func(h *harness) {
			h.open()
			h.cards("9S,7H,KD,KC")
			h.btn(ButtonReveal)
			h.tick(3 * time.Second)
			h.cmd(Command{Action: ActionVoid, Coup: 1})
		}, Command{Action: ActionVoid, Coup: 1}, "already voided"},
		{"card with none pending", func(h *harness) { h.open() }, Command{Action: ActionCard, Card: &Card{Rank: Ace, Suit: Spades}}, "no card is waiting"},
		{"shoe-start in a shoe", func(h *harness) { h.open() }, Command{Action: ActionShoeStart}, "end it first"},
		{"shoe-end mid-coup", func(h *harness) { h.open(); h.card("9S") }, Command{Action: ActionShoeEnd}, "void it or finish"},
		{"shoe-end with no shoe", nil, Command{Action: ActionShoeEnd}, "no shoe"},
		{"bets-closed for another coup", func(h *harness) { h.btn(ButtonNewShoe); h.cards("5S,2C,3C,4C,6C,7C"); h.btn(ButtonBurnDone) }, Command{Action: ActionBetsClosed, Coup: 3}, "coup taking bets is 1"},
		{"bets-closed twice", func(h *harness) { h.open() }, Command{Action: ActionBetsClosed}, "betting is not open"},
		{"suspend twice", func(h *harness) { h.cmd(Command{Action: ActionSuspend}) }, Command{Action: ActionSuspend}, "already suspended"},
		{"unknown action", nil, Command{Action: "deal-faster"}, "unknown action"},
		{"resume with a card pending", func(h *harness) { h.open(); h.card("??") }, Command{Action: ActionResume}, "needs the card entered"},
		{"manual card the shoe cannot hold", func(h *harness) {
			h.open()
			for i := 0; i < 8; i++ {
				h.tab.comp.Remove(Card{Rank: Two, Suit: Spades})
			}
			h.card("??")
		}, Command{Action: ActionCard, Card: &Card{Rank: Two, Suit: Spades}}, "card not in shoe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if tt.setup != nil {
				tt.setup(h)
			}
			before, _ := json.Marshal(snapshot(h.tab))
			evs := h.cmd(tt.cmd)
			if len(evs) != 1 || evs[0].Kind != EvCommandRefused || !strings.Contains(evs[0].Reason, tt.reason) {
				t.Fatalf("events %s %+v; want one refusal containing %q", kinds(evs), evs, tt.reason)
			}
			after, _ := json.Marshal(snapshot(h.tab))
			if string(before) != string(after) {
				t.Fatalf("a refused command changed the table:\n%s\n%s", before, after)
			}
		})
	}
}

// snapshot is everything observable about a table, for comparisons.
func snapshot(t *Table) map[string]any {
	return map[string]any{
		"phase": t.Phase(), "shoe": t.ShoeNumber(), "coup": t.CoupNumber(), "suspended": t.Suspended(),
		"alerts": t.Alerts(), "cards": t.Cards(), "result": t.Result(), "recall": t.Recall(),
		"coups": t.ShoeCoups(), "remaining": t.Remaining().Counts(), "burn": t.Burn(), "seq": t.LastShoeSeq(),
		"manual": t.ManualSuspension(), "link": t.Link(), "deadline": t.deadline, "cut": t.cutSeen, "last": t.lastCoup,
	}
}

// dealShoe plays a whole shoe from a shuffled deck the way a dealer following
// the tableau would, with the cut card cutAt cards from the end.
func dealShoe(h *harness, rng *rand.Rand, cutAt int) (dealt int) {
	h.t.Helper()
	deck := make([]Card, 0, 8*52)
	for range 8 {
		for i := range CardCount {
			deck = append(deck, CardAt(i))
		}
	}
	rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
	next := 0
	draw := func() Card { c := deck[next]; next++; return c }
	h.btn(ButtonNewShoe)
	first := draw()
	h.card(first.String())
	for range burnValue(first) {
		h.card(draw().String())
	}
	h.btn(ButtonBurnDone)
	cutPos := len(deck) - cutAt
	cutDone := false
	for h.tab.Phase() != PhaseNoShoe {
		if h.tab.Phase() != PhaseBettingOpen || h.tab.Suspended() {
			h.t.Fatalf("coup %d: phase %s suspended %v alerts %+v", h.tab.CoupNumber(), h.tab.Phase(), h.tab.Suspended(), h.tab.Alerts())
		}
		h.btn(ButtonNoMoreBets)
		var coupCards []Card
		for h.tab.Phase() != PhaseResult {
			if !cutDone && next >= cutPos {
				h.shoe(Input{Kind: InCut})
				cutDone = true
			}
			c := draw()
			coupCards = append(coupCards, c)
			h.card(c.String())
		}
		want, err := Score(coupCards)
		if err != nil {
			h.t.Fatal(err)
		}
		if got := h.tab.Result(); !reflect.DeepEqual(*got, want) {
			h.t.Fatalf("coup %d: result %v, want %v", h.tab.CoupNumber(), got, want)
		}
		h.btn(ButtonReveal)
		h.tick(3 * time.Second)
	}
	return next
}

func TestWholeShoe(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		h := newHarness(t, nil)
		rng := rand.New(rand.NewPCG(seed, 99))
		dealt := dealShoe(h, rng, 16)
		coups := h.tab.ShoeCoups()
		_, last := h.tab.CutCardSeen()
		if len(coups) != last || coups[len(coups)-1].Coup != last {
			t.Fatalf("seed %d: %d coups, last coup by the cut card %d", seed, len(coups), last)
		}
		if got := h.tab.Remaining().Remaining(); got != 8*52-dealt {
			t.Fatalf("seed %d: remaining %d, dealt %d", seed, got, dealt)
		}
		// Determinism: the same inputs on a fresh table give the same events.
		h2 := newHarness(t, nil)
		var evs []Event
		for _, in := range h.inputs {
			evs = append(evs, h2.tab.Apply(in)...)
		}
		a, _ := json.Marshal(h.events)
		b, _ := json.Marshal(evs)
		if string(a) != string(b) || !reflect.DeepEqual(snapshot(h.tab), snapshot(h2.tab)) {
			t.Fatalf("seed %d: replay differs", seed)
		}
	}
}

func TestCutCardRules(t *testing.T) {
	for _, tt := range []struct {
		rule string
		want int // coups in the shoe when the cut card comes out during coup 2
	}{{CutOneMore, 3}, {CutFinish, 2}} {
		h := newHarness(t, func(c *TableConfig) { c.CutCard = tt.rule; c.ResultTime = 0; c.Reveal = RevealImmediate })
		h.open()
		h.cards("9S,7H,KD,KC")
		h.btn(ButtonNoMoreBets)
		h.card("9D")
		h.shoe(Input{Kind: InCut})
		h.cards("7D,KS,KH")
		for h.tab.Phase() != PhaseNoShoe {
			h.btn(ButtonNoMoreBets)
			h.cards("9C,7C,TS,TH")
		}
		if n := len(h.tab.ShoeCoups()); n != tt.want {
			t.Errorf("%s: %d coups, want %d", tt.rule, n, tt.want)
		}
	}
}

func TestBettingTimerAndGameServer(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.BettingTime = 15 * time.Second; c.Reveal = RevealImmediate })
	h.btn(ButtonNewShoe)
	h.cards("KS,AC,7D,3H,9C,5S,2D,8H,4C,6S,QD")
	h.expect(h.btn(ButtonBurnDone), "burn_done betting_opened")
	if d, ok := h.tab.Deadline(); !ok || !d.Equal(h.now.Add(15*time.Second)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	h.expect(h.tick(14*time.Second), "input_ignored")
	h.expect(h.tick(time.Second), "betting_closed")
	h.expect(h.cards("9S,7H,KD,KC"), "card_dealt card_dealt card_dealt card_dealt coup_result")
	h.expect(h.tick(3*time.Second), "betting_opened")
	// Suspension stops the timer; resume starts it afresh.
	h.cmd(Command{Action: ActionSuspend})
	h.expect(h.tick(time.Minute), "input_ignored")
	h.cmd(Command{Action: ActionResume})
	h.expect(h.tick(14*time.Second), "input_ignored")
	// The game server closes betting for the coup taking bets.
	h.expect(h.cmd(Command{Action: ActionBetsClosed, Coup: 2, By: "game-server"}), "command_accepted betting_closed")
}

// twoCoupsDealt is a table, its cards revealed at once, that has dealt
// and ended coups 1 and 2.
func twoCoupsDealt(t *testing.T) *harness {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate })
	h.open()
	h.cards("9S,7H,KD,KC")
	h.tick(3 * time.Second)
	h.btn(ButtonNoMoreBets)
	h.cards("2S,AH,2D,2C,8H")
	h.tick(3 * time.Second)
	return h
}

func TestVoidCompletedCoup(t *testing.T) {
	h := twoCoupsDealt(t)
	h.expect(h.cmd(Command{Action: ActionVoid, Coup: 1, Reason: "wrong shoe"}), "command_accepted coup_voided")
	coups := h.tab.ShoeCoups()
	if !coups[0].Voided || coups[1].Voided {
		t.Fatalf("coups %+v", coups)
	}
	if rec := h.tab.Recall(); !rec[0].Voided || !slices.Contains(rec[0].Actions, "void by pit-boss") {
		t.Fatalf("recall %+v", rec)
	}
	h.phase(PhaseBettingOpen, false)
}

func TestRecallDepth(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate; c.ResultTime = 0 })
	h.open()
	for i := 0; i < 15; i++ {
		if i > 0 {
			h.btn(ButtonNoMoreBets)
		}
		h.cards(naturalCoup(i))
	}
	rec := h.tab.Recall()
	if len(rec) != RecallDepth || rec[0].Coup != 6 || rec[RecallDepth-1].Coup != 15 {
		t.Fatalf("recall holds coups %d..%d (%d)", rec[0].Coup, rec[len(rec)-1].Coup, len(rec))
	}
}

func TestNoBurnAndAutoBurn(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Burn = BurnNone })
	h.expect(h.btn(ButtonNewShoe), "shoe_started burn_done betting_opened")
	h = newHarness(t, func(c *TableConfig) { c.BurnDoneByButton = false })
	h.btn(ButtonNewShoe)
	h.expect(h.cards("3D,KC,KD,KH"), "burn_card burn_card burn_card burn_card burn_done betting_opened")
	h = newHarness(t, func(c *TableConfig) { c.Burn = BurnFixed; c.BurnCount = 2; c.BurnDoneByButton = false })
	h.btn(ButtonNewShoe)
	h.expect(h.cards("3D,KC"), "burn_card burn_card burn_done betting_opened")
	// An unreadable exposed card: the burn count is unknown until entered.
	h = newHarness(t, nil)
	h.btn(ButtonNewShoe)
	h.expect(h.card("??"), "alert:unreadable_card suspended")
	h.expect(h.cmd(Command{Action: ActionCard, Card: &Card{Rank: Two, Suit: Hearts}}), "command_accepted alert_resolved burn_card resumed")
	h.cards("KC,KD")
	h.expect(h.btn(ButtonBurnDone), "burn_done betting_opened")
}

func TestShoeMarkedBurnBetweenCoups(t *testing.T) {
	h := newHarness(t, nil)
	h.open()
	h.cards("9S,7H,KD,KC")
	h.btn(ButtonReveal)
	h.tick(3 * time.Second)
	c := Card{Rank: Two, Suit: Clubs}
	h.expect(h.shoe(Input{Kind: InCard, Card: &c, Burn: true}), "burn_card")
	h.phase(PhaseBettingOpen, false)
	// Mid-coup, a card is a card whatever the shoe calls it.
	h.btn(ButtonNoMoreBets)
	h.expect(h.shoe(Input{Kind: InCard, Card: &c, Burn: true}), "card_dealt")
}

func TestShoeEndedBeforeCoupDealt(t *testing.T) {
	h := newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate })
	h.open()
	h.cards("9S,7H,KD,KC")
	h.tick(3 * time.Second)
	// Coup 2 takes bets, then the supervisor ends the shoe: its bets go back.
	evs := h.cmd(Command{Action: ActionShoeEnd})
	h.expect(evs, "command_accepted coup_voided shoe_ended")
	if evs[1].Coup != 2 {
		t.Fatalf("voided coup %d", evs[1].Coup)
	}
	// A completed coup's shoe ending after it voids nothing.
	h = newHarness(t, func(c *TableConfig) { c.Reveal = RevealImmediate; c.CutCard = CutFinish })
	h.open()
	h.shoe(Input{Kind: InCut})
	h.expect(h.cards("9S,7H,KD,KC"), "card_dealt card_dealt card_dealt card_dealt coup_result")
	h.expect(h.tick(3*time.Second), "shoe_ended")
}

func TestRevealWhileSuspended(t *testing.T) {
	h := newHarness(t, nil)
	h.open()
	h.cards("9S,7H,KD")
	h.cmd(Command{Action: ActionSuspend})
	h.expect(h.btn(ButtonReveal), "input_ignored")
	if v := h.tab.PublicView(); v.Player[0].Card != nil {
		t.Fatal("a suspended coup's card was shown to the public")
	}
}

func TestTableConfigValidate(t *testing.T) {
	p, _ := BuiltinProfile(ProfileClassic)
	for _, mod := range []func(*TableConfig){
		func(c *TableConfig) { c.Burn = "sometimes" },
		func(c *TableConfig) { c.Burn = BurnFixed; c.BurnCount = 0 },
		func(c *TableConfig) { c.CutCard = "never" },
		func(c *TableConfig) { c.Reveal = "later" },
		func(c *TableConfig) { c.BettingTime = -time.Second },
		func(c *TableConfig) { c.Profile.Decks = 7 },
	} {
		cfg := DefaultTableConfig(p)
		mod(&cfg)
		if _, err := NewTable(cfg); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestViews(t *testing.T) {
	h := newHarness(t, nil)
	h.open()
	h.cards("9S,7H,KD")
	pub, pit := h.tab.PublicView(), h.tab.PitView()
	if len(pub.Player) != 2 || pub.Player[0].Card != nil || !pub.Player[0].Hidden || pub.PlayerPoint != 0 {
		t.Fatalf("public view shows a hidden card: %+v", pub.Player)
	}
	if pit.Player[0].Card == nil || pit.Player[0].Card.String() != "9S" || pit.PlayerPoint != 9 || pit.BankerPoint != 7 {
		t.Fatalf("pit view %+v", pit)
	}
	h.card("KC")
	if h.tab.PublicView().Result != nil || h.tab.PitView().Result == nil {
		t.Fatal("result shown to the public before the reveal, or hidden from the pit")
	}
	h.btn(ButtonReveal)
	pub = h.tab.PublicView()
	if pub.Result == nil || pub.Result.Winner != SidePlayer || pub.PlayerPoint != 9 || pub.Outcomes[BetPlayer].Kind != Win {
		t.Fatalf("public view after reveal %+v", pub)
	}
	if pub.CardsDealt != 10 || pub.Remaining != 8*52-10 {
		t.Fatalf("shoe progress %d dealt, %d left", pub.CardsDealt, pub.Remaining)
	}
	if pub.Alerts != nil {
		t.Fatal("alerts on the public view")
	}
}

func TestCloneIsIndependent(t *testing.T) {
	h := newHarness(t, nil)
	h.open()
	h.cards("9S,7H,KD")
	before, _ := json.Marshal(snapshot(h.tab))
	c := h.tab.Clone()
	c.Apply(Input{Kind: InCard, At: h.now, Card: &Card{Rank: King, Suit: Clubs}})
	c.Apply(Input{Kind: InButton, At: h.now, Button: ButtonReveal})
	c.Apply(Input{Kind: InCmd, At: h.now, Command: &Command{ID: "x", Action: ActionSuspend}})
	after, _ := json.Marshal(snapshot(h.tab))
	if string(before) != string(after) {
		t.Fatalf("applying to a clone changed the original:\n%s\n%s", before, after)
	}
	if c.Phase() != PhaseResult || !c.Suspended() {
		t.Fatalf("clone did not take the inputs: %s", c.Phase())
	}
}

// TestCloneVoidsApart voids the same completed coup on a table and on its
// clone: the clone shares the records' cards and actions (see Clone), so
// each must still see only its own void.
func TestCloneVoidsApart(t *testing.T) {
	h := twoCoupsDealt(t)
	c := h.tab.Clone()
	c.Apply(Input{Kind: InCmd, At: h.now, Command: &Command{ID: "a", Action: ActionVoid, Coup: 1, By: "alice", Reason: "clone"}})
	h.expect(h.cmd(Command{Action: ActionVoid, Coup: 1, Reason: "original"}), "command_accepted coup_voided")
	for _, tc := range []struct {
		name      string
		tab       *Table
		want, not string
	}{{"clone", c, "void by alice", "void by pit-boss"}, {"original", h.tab, "void by pit-boss", "void by alice"}} {
		for name, recs := range map[string][]CoupRecord{"shoe": tc.tab.ShoeCoups(), "recall": tc.tab.Recall()} {
			a := recs[0].Actions
			if !recs[0].Voided || !slices.Contains(a, tc.want) || slices.Contains(a, tc.not) {
				t.Errorf("%s's %s record of coup 1: voided %v, actions %q; want %q only", tc.name, name, recs[0].Voided, a, tc.want)
			}
			if recs[1].Voided || len(recs[1].Actions) != 0 {
				t.Errorf("%s's %s record of coup 2: %+v", tc.name, name, recs[1])
			}
		}
	}
}

func TestAuditFailed(t *testing.T) {
	h := newHarness(t, nil)
	h.open()
	h.card("9S")
	evs := h.apply(Input{Kind: InAuditFailed, Text: "disk full", GapFrom: 12, GapTo: 13})
	h.expect(evs, "alert:audit_write_failed suspended")
	if evs[0].Alert.Needs != NeedsVoid || !strings.Contains(evs[0].Alert.Message, "12 to 13") {
		t.Fatalf("alert %+v", evs[0].Alert)
	}
	h.expect(h.cmd(Command{Action: ActionVoid}), "command_accepted coup_voided alert_resolved betting_opened resumed")
}
