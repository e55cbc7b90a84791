package coup

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Phase is where a table is in its shoe and coup.
type Phase string

// The phases, in the order a shoe goes through them. Suspension overlays
// any phase.
const (
	PhaseNoShoe        Phase = "no_shoe"
	PhaseBurn          Phase = "burn"
	PhaseBettingOpen   Phase = "betting_open"
	PhaseBettingClosed Phase = "betting_closed"
	PhaseDealing       Phase = "dealing"
	PhaseResult        Phase = "result"
)

// Burn rules: how many cards are burned at shoe start.
const (
	BurnFirstCard = "first_card" // expose the first card, burn its value (tens and faces 10)
	BurnFixed     = "fixed"      // burn Count cards
	BurnNone      = "none"       // no burn
)

// Cut-card rules: what happens once the cut card comes out.
const (
	CutOneMore = "one_more" // finish the coup in progress and deal one more
	CutFinish  = "finish"   // finish the coup in progress
)

// Reveal rules: when the public may see a card.
const (
	RevealButton    = "button"    // when the dealer presses reveal (a squeeze)
	RevealImmediate = "immediate" // as soon as it is dealt (cards dealt face up)
)

// TableConfig is the house procedure around the coup.
type TableConfig struct {
	Profile Profile `json:"profile"`
	// Burn is BurnFirstCard, BurnFixed or BurnNone; BurnCount is the fixed count.
	Burn      string `json:"burn"`
	BurnCount int    `json:"burn_count,omitempty"`
	// BurnDoneByButton waits for the dealer's burn-done button; otherwise the
	// burn ends when the count is reached (shoes without buttons).
	BurnDoneByButton bool   `json:"burn_done_by_button"`
	CutCard          string `json:"cut_card"`
	Reveal           string `json:"reveal"`
	// BettingTime closes betting that long after it opened; 0 leaves it to
	// the dealer's button or the game server.
	BettingTime time.Duration `json:"betting_time"`
	// ResultTime is how long a revealed result stands before the next coup
	// takes bets.
	ResultTime time.Duration `json:"result_time"`
	// Rules is the version of the table's own procedure (not the game's
	// rules, which never change): a trail replays under the version it
	// recorded, so a table that moved to a newer one still verifies its
	// old coups. New tables take CurrentRules.
	Rules int `json:"rules,omitempty"`
}

// Versions of the table's procedure.
const (
	// RulesFirst is the first (a config with no "rules").
	RulesFirst = 0
	// RulesProtect judges each input at its own time against the table's
	// deadlines, raises coup_incomplete when the dealer moves on from a
	// coup the tableau has not finished, lets resume clear a card drawn
	// after a finished coup, and checks each shoe's shuffle.
	RulesProtect = 1
	// Rules 2, the release of issues 31 and 33: several procedures
	// changed together, each named here for the code that tests it.
	//
	// RulesDealerOrder takes the dealer's order over the table's own
	// timers: a NOMOREBETS or a NEWSHOE while the result's hold still runs
	// ends the hold (the next coup opens, and its betting closes; or the
	// shoe ends and the next starts), instead of being ignored. Sentences
	// that come together after a stall, a late start or a restart are
	// then judged as the dealer dealt them, whatever the hold's timer says
	// at their arrival.
	RulesDealerOrder = 2
	// RulesSelfCheckHolds refuses every command that changes the game
	// (void, card, shoe-start, shoe-end, bets-closed, dealer-in and -out,
	// resume) while a failed self-check holds the table: the program or
	// its config is not the certified one, so nothing it would do to the
	// game can be trusted. Before it, a void or a manual card was taken.
	RulesSelfCheckHolds = 2
	// RulesShoePrint checks the shuffle on every card of the shoe
	// (shufflecheck.go: a repeat of any of the last ShoeMemory shoes at
	// any cut or in reverse, cards in new-deck order or riffled too
	// little anywhere) instead of its first 30 (shuffle.go), and
	// suspends the table on a shoe sentence whose sequence number
	// repeats with other content (ReasonSeqReused).
	RulesShoePrint = 2
	// CurrentRules is the version new tables take.
	CurrentRules = 2
)

// DefaultTableConfig is common casino practice for a profile.
func DefaultTableConfig(p Profile) TableConfig {
	return TableConfig{
		Profile:          p,
		Burn:             BurnFirstCard,
		BurnDoneByButton: true,
		CutCard:          CutOneMore,
		Reveal:           RevealButton,
		ResultTime:       3 * time.Second,
		Rules:            CurrentRules,
	}
}

// Validate checks the configuration.
func (c *TableConfig) Validate() error {
	if err := c.Profile.Validate(); err != nil {
		return err
	}
	switch c.Burn {
	case BurnFirstCard, BurnNone:
	case BurnFixed:
		if c.BurnCount < 1 || c.BurnCount > 20 {
			return fmt.Errorf("burn count %d: want 1 to 20", c.BurnCount)
		}
	default:
		return fmt.Errorf("burn rule %q: want %s, %s or %s", c.Burn, BurnFirstCard, BurnFixed, BurnNone)
	}
	if c.CutCard != CutOneMore && c.CutCard != CutFinish {
		return fmt.Errorf("cut card rule %q: want %s or %s", c.CutCard, CutOneMore, CutFinish)
	}
	if c.Reveal != RevealButton && c.Reveal != RevealImmediate {
		return fmt.Errorf("reveal rule %q: want %s or %s", c.Reveal, RevealButton, RevealImmediate)
	}
	if c.BettingTime < 0 || c.ResultTime < 0 {
		return fmt.Errorf("betting and result times must not be negative")
	}
	if c.Rules < RulesFirst || c.Rules > CurrentRules {
		return fmt.Errorf("rules version %d: this build knows %d to %d", c.Rules, RulesFirst, CurrentRules)
	}
	return nil
}

// CoupRecord is one finished (or voided) coup, for recall and voids.
type CoupRecord struct {
	Shoe   int         `json:"shoe"`
	Coup   int         `json:"coup"`
	Cards  []DealtCard `json:"cards"`
	Result *Result     `json:"result,omitempty"`
	Voided bool        `json:"voided,omitempty"`
	// Actions are the supervisor actions taken on it, in order.
	Actions []string `json:"actions,omitempty"`
	// Dealer is the dealer on duty when it finished (or was voided in
	// progress), "" when none was signed in.
	Dealer string `json:"dealer,omitempty"`
	// Strays are the cards drawn during the coup, before it finished,
	// that went to no hand (while suspended, or while betting was open):
	// out of the shoe, and part of what a recall must show.
	Strays []StrayCard `json:"strays,omitempty"`
}

// StrayCard is a card drawn during a coup that went to no hand: while the
// table was suspended, or while betting was still open (a misdeal). After
// is how many of the coup's cards had been dealt before it: its place in
// shoe order.
type StrayCard struct {
	DealtCard
	After int `json:"after"`
	// BettingOpen marks the card drawn while betting was open; the others
	// were drawn while the table was suspended.
	BettingOpen bool `json:"betting_open,omitempty"`
}

// RecallDepth is how many coups the table keeps for last-game recall.
const RecallDepth = 10

// Table is the state machine of one baccarat table. It is pure: Apply takes
// an input and returns the events it causes, and the state after any
// sequence of inputs depends on that sequence alone.
type Table struct {
	cfg TableConfig

	phase Phase
	shoe  int // shoe number, from 1
	coup  int // coup number within the shoe, from 1
	comp  Shoe

	burn BurnState

	cards    []DealtCard // the coup in progress, in shoe order
	strays   []StrayCard // cards drawn while suspended during it (recall)
	openedAt time.Time   // when its betting opened: the round's time
	pending  int         // index in cards of a card awaiting manual entry, or -1
	result   *Result
	resultAt time.Time
	final    bool // result complete and revealed

	cutSeen  bool
	lastCoup int // the shoe's last coup once the cut card is out; 0 before

	manualSuspend string // the reason a supervisor gave, "" when none
	alerts        []Alert
	nextAlert     int
	link          string
	lastSeq       uint32

	deadline time.Time // zero when no timer runs

	coups  []CoupRecord // completed and voided coups of the current shoe
	recall []CoupRecord // the last RecallDepth coups across shoes

	shuffle shuffleWatch // the shuffle check's memory under RulesProtect (shuffle.go)
	watch   shoeWatch    // and under RulesShoePrint (shufflecheck.go)

	// dealer is the dealer on duty: signed in by a dealer-in command, ""
	// when none is. Events put against a dealer carry it.
	dealer string
}

// NewTable returns a table with no shoe.
func NewTable(cfg TableConfig) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Table{cfg: cfg, phase: PhaseNoShoe, pending: -1, link: LinkConnected, nextAlert: 1}, nil
}

// Config is the table's configuration.
func (t *Table) Config() TableConfig { return t.cfg }

// Phase is the current phase.
func (t *Table) Phase() Phase { return t.phase }

// BetweenCoups reports whether the table stands between two coups: a coup's
// result is final and the next coup's betting has not opened, or no shoe is
// in play. A trail is cut into segments only then, never inside a coup.
func (t *Table) BetweenCoups() bool {
	return t.phase == PhaseNoShoe || (t.phase == PhaseResult && t.final)
}

// ShoeNumber and CoupNumber say where the table is.
func (t *Table) ShoeNumber() int { return t.shoe }

// CoupNumber is the coup in progress (or the last one, in the result phase).
func (t *Table) CoupNumber() int { return t.coup }

// Suspended reports whether the table refuses cards.
func (t *Table) Suspended() bool { return t.manualSuspend != "" || len(t.alerts) > 0 }

// Alerts are the active alerts.
func (t *Table) Alerts() []Alert { return slices.Clone(t.alerts) }

// Remaining is the composition of the shoe as the table knows it.
func (t *Table) Remaining() Shoe { return t.comp }

// Recall is the last RecallDepth coups, oldest first.
func (t *Table) Recall() []CoupRecord { return slices.Clone(t.recall) }

// ShoeCoups are the finished and voided coups of the current shoe.
func (t *Table) ShoeCoups() []CoupRecord { return slices.Clone(t.coups) }

// LastShoeSeq is the last shoe sequence number the table saw.
func (t *Table) LastShoeSeq() uint32 { return t.lastSeq }

// Deadline is when the table next wants an InTick, if it does.
func (t *Table) Deadline() (time.Time, bool) { return t.deadline, !t.deadline.IsZero() }

// CutCardSeen reports whether the cut card is out, and the shoe's last coup.
func (t *Table) CutCardSeen() (bool, int) { return t.cutSeen, t.lastCoup }

// Cards are the coup in progress's cards as the pit sees them.
func (t *Table) Cards() []DealtCard { return slices.Clone(t.cards) }

// Result is the coup in progress's result once complete.
func (t *Table) Result() *Result { return t.result }

// ResultFinal reports a complete coup whose cards are all revealed.
func (t *Table) ResultFinal() bool { return t.final }

// Link is the shoe link state as last reported.
func (t *Table) Link() string { return t.link }

// Burn is the burn in progress or done for this shoe.
func (t *Table) Burn() BurnState { return t.burn }

// Dealer is the dealer on duty, "" when none is signed in.
func (t *Table) Dealer() string { return t.dealer }

// ManualSuspension is the reason a supervisor suspended the table, if any.
func (t *Table) ManualSuspension() string { return t.manualSuspend }

// Clone returns an independent copy of the table, so a caller can apply an
// input tentatively and keep the original if the input cannot be recorded.
func (t *Table) Clone() *Table {
	c := *t
	c.cfg.Profile.Bets = slices.Clone(t.cfg.Profile.Bets)
	c.alerts = slices.Clone(t.alerts)
	c.cards = slices.Clone(t.cards)
	if t.burn.First != nil {
		f := *t.burn.First
		c.burn.First = &f
	}
	if t.result != nil {
		r := *t.result
		c.result = &r
	}
	// The coups of the shoe are shared, capped at their length: a coup
	// ended appends (and so copies), and a void copies before it writes
	// (applier.void). The recorder clones the table for every commit;
	// copying a shoe's worth of coups each time was most of its work
	// before the trail.
	c.coups = slices.Clip(t.coups)
	c.recall = slices.Clip(t.recall)
	c.strays = slices.Clip(t.strays)
	return &c
}

// cloneRecords copies the records, for a table about to write one in
// place; their cards and actions stay shared, capped at their length, so
// that an append (a void's action) copies instead of writing where
// another table can see it. Nothing writes a recorded card or action in
// place.
func cloneRecords(rs []CoupRecord) []CoupRecord {
	if rs == nil {
		return nil
	}
	out := make([]CoupRecord, len(rs))
	for i, r := range rs {
		r.Cards = slices.Clip(r.Cards)
		r.Actions = slices.Clip(r.Actions)
		out[i] = r
	}
	return out
}

// Reconfigure swaps the table's configuration (a restart with a changed
// config file). The shoe in play keeps its composition; a change of decks
// takes effect with the next shoe.
func (t *Table) Reconfigure(cfg TableConfig) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	t.cfg = cfg
	return nil
}

// applier collects the events of one Apply.
type applier struct {
	t       *Table
	in      Input
	out     []Event
	resumed bool // a resumed event was emitted: one per input
	// openReason, when set, is said by the betting_opened event emitted
	// (endHold).
	openReason string
}

func (a *applier) emit(e Event) {
	e.Shoe = a.t.shoe
	if e.Coup == 0 && e.Kind != EvShoeStarted && e.Kind != EvShoeEnded && a.t.coup > 0 && a.t.phase != PhaseNoShoe && a.t.phase != PhaseBurn {
		e.Coup = a.t.coup
	}
	switch e.Kind {
	case EvCoupResult, EvCoupVoided, EvAlert, EvBettingOpened, EvShoeStarted, EvShoeEnded:
		if e.Dealer == "" {
			e.Dealer = a.t.dealer
		}
	}
	a.out = append(a.out, e)
}

// Apply takes one input and returns the events it causes, in order. It never
// fails: a misdeal is an alert event, a refused command a command_refused
// event, an input that means nothing now an input_ignored event.
func (t *Table) Apply(in Input) []Event {
	a := &applier{t: t, in: in}
	if in.ShoeSeq > 0 && in.Kind != InGap {
		t.lastSeq = in.ShoeSeq
	}
	a.timersFirst()
	switch in.Kind {
	case InCard:
		inShoe := t.phase != PhaseNoShoe
		a.card()
		if inShoe && t.cfg.Rules >= RulesProtect {
			a.watchShuffle()
		}
	case InCut:
		a.cut()
	case InButton:
		a.button()
	case InStatus:
		a.emit(Event{Kind: EvShoeStatus, Status: in.Status, Reason: in.Text})
	case InHello:
		a.hello()
	case InGap:
		a.gap()
	case InLink:
		a.linkChange()
	case InTick:
		a.tick()
	case InCmd:
		a.command()
	case InAuditFailed:
		a.auditFailed()
	case InRejected:
		a.rejected()
	case InSelfCheck:
		a.selfCheck()
	default:
		a.emit(Event{Kind: EvIgnored, Reason: fmt.Sprintf("unknown input %q", in.Kind)})
	}
	return a.out
}

// midCoup reports a coup whose bets are closed and whose cards are coming.
func (t *Table) midCoup() bool {
	return t.phase == PhaseBettingClosed || t.phase == PhaseDealing
}

// raise adds an alert and, if the table was live, suspends it.
func (a *applier) raise(kind AlertKind, needs, msg string) {
	t := a.t
	wasSuspended := t.Suspended()
	al := Alert{ID: t.nextAlert, Kind: kind, Shoe: t.shoe, Coup: t.coup, Message: msg, Needs: needs, ShoeSeq: a.in.ShoeSeq, Dealer: t.dealer}
	if t.phase == PhaseNoShoe || t.phase == PhaseBurn {
		al.Coup = 0
	}
	t.nextAlert++
	t.alerts = append(t.alerts, al)
	a.emit(Event{Kind: EvAlert, Alert: &al})
	if !wasSuspended {
		t.deadline = time.Time{}
		a.emit(Event{Kind: EvSuspended, Phase: t.phase, Reason: string(kind)})
	}
}

// resolve clears the alerts keep says no to, and resumes the table when
// nothing holds it any more.
func (a *applier) resolve(by string, drop func(Alert) bool) {
	t := a.t
	kept := t.alerts[:0]
	var gone []Alert
	for _, al := range t.alerts {
		if drop(al) {
			gone = append(gone, al)
		} else {
			kept = append(kept, al)
		}
	}
	t.alerts = kept
	for _, al := range gone {
		al := al
		a.emit(Event{Kind: EvAlertResolved, Alert: &al, By: by})
	}
}

// resumeIfClear lifts the suspension once no alert or supervisor holds it,
// and restarts the timer of the phase.
func (a *applier) resumeIfClear(wasSuspended bool) {
	t := a.t
	if wasSuspended && !t.Suspended() && !a.resumed {
		a.resumed = true
		a.emit(Event{Kind: EvResumed, Phase: t.phase})
		a.restartTimer()
	}
}

func (a *applier) restartTimer() {
	t := a.t
	t.deadline = time.Time{}
	switch {
	case t.phase == PhaseBettingOpen && t.cfg.BettingTime > 0:
		t.deadline = a.in.At.Add(t.cfg.BettingTime)
	case t.phase == PhaseResult && t.final:
		t.deadline = a.in.At.Add(t.cfg.ResultTime)
	}
}

// ---- cards ----

func (a *applier) card() {
	t, in := a.t, a.in
	dc := DealtCard{Unreadable: in.Unreadable || in.Card == nil, ShoeSeq: in.ShoeSeq}
	if !dc.Unreadable {
		dc.Card = *in.Card
		if !dc.Card.Valid() {
			dc.Unreadable = true
			dc.Card = Card{}
		}
	}
	// Every card that leaves the shoe is out of it, whatever happens next.
	if !dc.Unreadable {
		if err := t.comp.Remove(dc.Card); err != nil {
			dc.Impossible = true
		}
	}
	if t.Suspended() {
		// A card after a finished coup belongs to no coup: resume clears
		// it and the finished coup stands. Only a coup in progress (bets
		// closed, or cards dealt and not final) must be voided.
		needs := NeedsResume
		if t.phase == PhaseBettingClosed || (len(t.cards) > 0 && (!t.final || t.cfg.Rules < RulesProtect)) {
			needs = NeedsVoid
		}
		a.raise(AlertCardSuspended, needs, fmt.Sprintf("%s drawn while the table was suspended", cardName(dc)))
		if t.phase != PhaseNoShoe && t.phase != PhaseBurn && !t.final {
			t.strays = append(t.strays, StrayCard{DealtCard: dc, After: len(t.cards)})
		}
		return
	}
	// A card the shoe itself marks as burned between coups is out of play,
	// not dealt (Bee-Tek's manual burn).
	if in.Burn && (t.phase == PhaseBettingOpen || (t.phase == PhaseResult && t.final)) {
		a.emit(Event{Kind: EvBurnCard, Card: &DealtCard{Card: dc.Card, Unreadable: dc.Unreadable, Impossible: dc.Impossible, Hidden: true, ShoeSeq: dc.ShoeSeq}})
		return
	}
	switch t.phase {
	case PhaseNoShoe:
		a.raise(AlertCardNoCoup, NeedsResume, fmt.Sprintf("%s drawn with no shoe started", cardName(dc)))
	case PhaseBurn:
		a.burnCard(dc)
	case PhaseBettingOpen:
		a.raise(AlertCardBettingOpen, NeedsVoid, fmt.Sprintf("%s drawn while betting was open on coup %d", cardName(dc), t.coup))
		t.strays = append(t.strays, StrayCard{DealtCard: dc, BettingOpen: true})
	case PhaseResult:
		a.raise(AlertExtraCard, NeedsResume, fmt.Sprintf("%s drawn after coup %d was complete", cardName(dc), t.coup))
	case PhaseBettingClosed, PhaseDealing:
		a.deal(dc)
	}
}

// watchShuffle feeds the card to the shuffle check, which suspends the
// table when the shoe looks unshuffled: under RulesShoePrint once per sign
// and shoe, whatever card shows it; before, once per shoe, from its first
// cards.
func (a *applier) watchShuffle() {
	in := a.in
	readable := !in.Unreadable && in.Card != nil && in.Card.Valid()
	var why string
	switch {
	case a.t.cfg.Rules >= RulesShoePrint:
		var c Card
		if readable {
			c = *in.Card
		}
		why = a.t.watch.card(c, readable)
	case readable:
		why = a.t.shuffle.suspect(*in.Card)
	}
	if why != "" {
		a.raise(AlertShuffleSuspect, NeedsResume, "shoe "+fmt.Sprint(a.t.shoe)+" may not have been shuffled: "+why)
	}
}

func cardName(dc DealtCard) string {
	if dc.Unreadable {
		return "an unreadable card"
	}
	return dc.Card.String()
}

func (a *applier) burnCard(dc DealtCard) {
	t := a.t
	first := t.burn.First == nil && t.cfg.Burn == BurnFirstCard && t.burn.Required == 0
	if first {
		if dc.Unreadable || dc.Impossible {
			a.raise(alertKindOf(dc), NeedsCard, fmt.Sprintf("the exposed burn card is %s: enter it to know the burn count", describe(dc)))
			t.cards = append(t.cards[:0], dc)
			t.pending = 0
			return
		}
		a.exposeBurnCard(dc.Card)
	} else {
		t.burn.Burned++
		b := t.burn
		a.emit(Event{Kind: EvBurnCard, Burn: &b, Card: &DealtCard{Card: dc.Card, Unreadable: dc.Unreadable, Hidden: true, ShoeSeq: dc.ShoeSeq}})
	}
	a.burnMaybeDone()
}

// exposeBurnCard sets the burn count from the exposed first card.
func (a *applier) exposeBurnCard(c Card) {
	t := a.t
	first := c
	t.burn.First = &first
	t.burn.Required = burnValue(c)
	b := t.burn
	a.emit(Event{Kind: EvBurnCard, Burn: &b, Card: &DealtCard{Card: c}})
}

// burnValue counts tens and faces as 10, aces as 1.
func burnValue(c Card) int {
	if c.Rank >= Ten {
		return 10
	}
	return int(c.Rank)
}

func (a *applier) burnMaybeDone() {
	t := a.t
	if !t.cfg.BurnDoneByButton && t.burn.First != nil && t.burn.Burned >= t.burn.Required {
		a.finishBurn()
	}
	if !t.cfg.BurnDoneByButton && t.cfg.Burn == BurnFixed && t.burn.Burned >= t.burn.Required {
		a.finishBurn()
	}
}

func (a *applier) finishBurn() {
	t := a.t
	b := t.burn
	a.emit(Event{Kind: EvBurnDone, Burn: &b})
	a.openBetting(1)
}

func (a *applier) openBetting(coup int) {
	t := a.t
	t.phase = PhaseBettingOpen
	t.coup = coup
	t.cards, t.strays = nil, nil
	t.openedAt = a.in.At
	t.pending = -1
	t.result = nil
	t.final = false
	a.emit(Event{Kind: EvBettingOpened, Phase: t.phase, Coup: coup, Reason: a.openReason})
	a.restartTimer()
	if t.Suspended() {
		t.deadline = time.Time{}
	}
}

func alertKindOf(dc DealtCard) AlertKind {
	if dc.Unreadable {
		return AlertUnreadableCard
	}
	return AlertImpossibleCard
}

func describe(dc DealtCard) string {
	if dc.Unreadable {
		return "unreadable"
	}
	return dc.Card.String() + ", which the shoe cannot hold (every copy already seen)"
}

// deal places a card by the tableau.
func (a *applier) deal(dc DealtCard) {
	t := a.t
	pos, err := Next(t.known())
	if err != nil || pos == Complete {
		// Cannot happen: a complete coup moves to the result phase.
		a.raise(AlertExtraCard, NeedsResume, fmt.Sprintf("%s drawn after coup %d was complete", cardName(dc), t.coup))
		return
	}
	dc.Position = pos
	dc.Hidden = t.cfg.Reveal == RevealButton
	t.phase = PhaseDealing
	t.cards = append(t.cards, dc)
	shown := dc
	a.emit(Event{Kind: EvCardDealt, Card: &shown, Position: pos.String(), Phase: t.phase})
	if dc.Unreadable || dc.Impossible {
		t.pending = len(t.cards) - 1
		a.raise(alertKindOf(dc), NeedsCard, fmt.Sprintf("card %d of coup %d (%s) is %s", len(t.cards), t.coup, pos, describe(dc)))
		return
	}
	a.maybeComplete()
}

// known is the coup's cards so far; only valid while none is pending.
func (t *Table) known() []Card {
	cs := make([]Card, len(t.cards))
	for i, dc := range t.cards {
		cs[i] = dc.Card
	}
	return cs
}

func (a *applier) maybeComplete() {
	t := a.t
	if t.pending >= 0 {
		return
	}
	cs := t.known()
	pos, err := Next(cs)
	if err != nil || pos != Complete {
		return
	}
	r, err := Score(cs)
	if err != nil {
		return
	}
	t.result = &r
	t.phase = PhaseResult
	rc := r
	a.emit(Event{Kind: EvCoupResult, Result: &rc, Outcomes: t.outcomes(r), Cards: cs, Phase: t.phase})
	a.maybeFinal()
}

// outcomes is what every spot the profile offers does on r.
func (t *Table) outcomes(r Result) map[Bet]Outcome {
	m := make(map[Bet]Outcome, len(t.cfg.Profile.Bets))
	for _, b := range t.cfg.Profile.Bets {
		m[b] = t.cfg.Profile.Pays.Outcome(b, r)
	}
	return m
}

// maybeFinal makes a complete, fully revealed result final: the coup is
// recorded, and the result stands for ResultTime before the next coup.
func (a *applier) maybeFinal() {
	t := a.t
	if t.result == nil || t.final {
		return
	}
	for _, dc := range t.cards {
		if dc.Hidden {
			return
		}
	}
	t.final = true
	t.record(CoupRecord{Shoe: t.shoe, Coup: t.coup, Cards: slices.Clone(t.cards), Result: t.result, Dealer: t.dealer, Strays: slices.Clone(t.strays)})
	if t.cfg.ResultTime == 0 {
		a.nextCoup()
		return
	}
	if !t.Suspended() {
		t.deadline = a.in.At.Add(t.cfg.ResultTime)
	}
}

func (t *Table) record(rec CoupRecord) {
	t.coups = append(t.coups, rec)
	t.recall = append(t.recall, rec)
	if len(t.recall) > RecallDepth {
		t.recall = slices.Clone(t.recall[len(t.recall)-RecallDepth:])
	}
}

// nextCoup opens betting on the next coup, or ends the shoe after its last.
func (a *applier) nextCoup() {
	t := a.t
	if t.cutSeen && t.coup >= t.lastCoup {
		a.endShoe("the cut card's last coup is over")
		return
	}
	a.openBetting(t.coup + 1)
}

func (a *applier) endShoe(reason string) {
	t := a.t
	// A coup taking bets (or closed, no card yet) never happens: say so,
	// so that its bets are returned.
	if (t.phase == PhaseBettingOpen || t.phase == PhaseBettingClosed) && len(t.cards) == 0 && t.coup > 0 {
		a.emit(Event{Kind: EvCoupVoided, Coup: t.coup, Reason: "the shoe ended before the coup was dealt: its bets are returned"})
	}
	t.phase = PhaseNoShoe
	t.cards, t.strays = nil, nil
	t.pending = -1
	t.result = nil
	t.final = false
	t.deadline = time.Time{}
	a.emit(Event{Kind: EvShoeEnded, Phase: t.phase, Reason: reason, Coup: t.coup})
	// A shoe that looked unshuffled is out of play now.
	if slices.ContainsFunc(t.alerts, func(al Alert) bool { return al.Kind == AlertShuffleSuspect }) {
		wasSuspended := t.Suspended()
		a.resolve("shoe end", func(al Alert) bool { return al.Kind == AlertShuffleSuspect })
		a.resumeIfClear(wasSuspended)
	}
}

// ---- shoe events ----

func (a *applier) cut() {
	t := a.t
	if t.phase == PhaseNoShoe || t.cutSeen {
		a.emit(Event{Kind: EvIgnored, Reason: "cut card with no shoe in play or already seen"})
		return
	}
	t.cutSeen = true
	// The coup in progress is the current one unless its result is final
	// (then it is over and the next is "in progress" only once bets open).
	inProgress := t.coup
	if t.phase == PhaseBurn {
		inProgress = 0
	} else if t.phase == PhaseResult && t.final {
		inProgress = t.coup + 1
	}
	t.lastCoup = inProgress
	if t.cfg.CutCard == CutOneMore {
		t.lastCoup++
	}
	if t.lastCoup < 1 {
		t.lastCoup = 1
	}
	a.emit(Event{Kind: EvCutCard, LastCoup: t.lastCoup})
}

func (a *applier) button() {
	t := a.t
	b := a.in.Button
	// The dealer moving on (no more bets for the next coup, reveal, a new
	// shoe) while the tableau still wants a card: the coup is short, and
	// no later card may be placed into it.
	if t.cfg.Rules >= RulesProtect && t.phase == PhaseDealing && t.pending < 0 && !t.Suspended() &&
		(b == ButtonNoMoreBets || b == ButtonReveal || b == ButtonNewShoe) {
		want := "another card"
		if pos, err := Next(t.known()); err == nil && pos != Complete {
			want = "the " + pos.String() + " card"
		}
		a.raise(AlertCoupIncomplete, NeedsCard, fmt.Sprintf("the dealer pressed %s with coup %d holding %d cards; the tableau wants %s", b, t.coup, len(t.cards), want))
		return
	}
	switch b {
	case ButtonNewShoe:
		a.startShoe("button")
	case ButtonBurnDone:
		if t.phase != PhaseBurn {
			a.emit(Event{Kind: EvIgnored, Reason: "burn done outside the burn"})
			return
		}
		if t.Suspended() {
			a.emit(Event{Kind: EvIgnored, Reason: "burn done while suspended"})
			return
		}
		if t.burn.Burned != t.burn.Required || t.pending >= 0 || (t.cfg.Burn == BurnFirstCard && t.burn.First == nil) {
			msg := fmt.Sprintf("burn done after %d burned cards; %d required", t.burn.Burned, t.burn.Required)
			a.finishBurn()
			a.raise(AlertWrongBurn, NeedsResume, msg)
			return
		}
		a.finishBurn()
	case ButtonNoMoreBets:
		a.closeBetting("button")
	case ButtonReveal:
		a.reveal()
	default:
		a.emit(Event{Kind: EvIgnored, Reason: fmt.Sprintf("unknown button %q", clip(b))})
	}
}

func (a *applier) closeBetting(by string) bool {
	t := a.t
	if t.phase != PhaseBettingOpen {
		a.emit(Event{Kind: EvIgnored, Reason: fmt.Sprintf("no more bets in phase %s", t.phase)})
		return false
	}
	if t.Suspended() {
		a.emit(Event{Kind: EvIgnored, Reason: "no more bets while suspended"})
		return false
	}
	t.phase = PhaseBettingClosed
	t.deadline = time.Time{}
	a.emit(Event{Kind: EvBettingClosed, Phase: t.phase, By: by})
	return true
}

func (a *applier) reveal() {
	t := a.t
	// A suspended coup may yet be voided: the public sees nothing of it.
	if t.Suspended() {
		a.emit(Event{Kind: EvIgnored, Reason: "reveal while suspended"})
		return
	}
	var shown []Card
	for i := range t.cards {
		if t.cards[i].Hidden && !t.cards[i].Unreadable {
			t.cards[i].Hidden = false
			shown = append(shown, t.cards[i].Card)
		}
	}
	if len(shown) == 0 {
		a.emit(Event{Kind: EvIgnored, Reason: "reveal with no hidden card"})
		return
	}
	a.emit(Event{Kind: EvCardsRevealed, Cards: shown})
	a.maybeFinal()
}

func (a *applier) startShoe(by string) {
	t := a.t
	if t.phase != PhaseNoShoe {
		if len(t.cards) > 0 || t.phase == PhaseBurn || t.phase == PhaseBettingClosed {
			a.emit(Event{Kind: EvIgnored, Reason: fmt.Sprintf("new shoe during %s of coup %d: void or finish it first", t.phase, t.coup)})
			return
		}
		a.endShoe("a new shoe was loaded")
	}
	comp, err := NewShoe(t.cfg.Profile.Decks)
	if err != nil {
		a.emit(Event{Kind: EvIgnored, Reason: err.Error()})
		return
	}
	t.shoe++
	t.coup = 0
	t.comp = comp
	if t.cfg.Rules >= RulesShoePrint {
		t.watch.newShoe(t.cfg.Profile.Decks, false)
	} else {
		t.shuffle.newShoe()
	}
	t.cutSeen, t.lastCoup = false, 0
	t.coups = nil
	t.cards, t.pending = nil, -1
	t.burn = BurnState{}
	t.phase = PhaseBurn
	a.emit(Event{Kind: EvShoeStarted, Phase: t.phase, By: by})
	switch t.cfg.Burn {
	case BurnNone:
		a.finishBurn()
	case BurnFixed:
		t.burn.Required = t.cfg.BurnCount
	}
}

func (a *applier) hello() {
	t := a.t
	if t.midCoup() {
		a.raise(AlertShoeRestarted, NeedsVoid, fmt.Sprintf("the shoe restarted during coup %d", t.coup))
		return
	}
	a.emit(Event{Kind: EvShoeStatus, Status: "hello", Reason: a.in.Text})
}

func (a *applier) gap() {
	t, in := a.t, a.in
	if in.GapTo > t.lastSeq {
		t.lastSeq = in.GapTo
	}
	needs := NeedsResume
	if t.midCoup() || (t.phase == PhaseResult && !t.final) {
		needs = NeedsVoid
	}
	a.raise(AlertSequenceGap, needs, fmt.Sprintf("shoe sentences %d to %d were missed: cards may have been drawn unseen", in.GapFrom, in.GapTo))
}

func (a *applier) linkChange() {
	t, in := a.t, a.in
	prev := t.link
	t.link = in.Link
	a.emit(Event{Kind: EvShoeStatus, Status: "link_" + in.Link, Reason: in.Reason})
	switch {
	case in.Link != LinkConnected && prev == LinkConnected && (t.midCoup() || t.phase == PhaseBurn):
		a.raise(AlertShoeOffline, NeedsLink, fmt.Sprintf("the shoe went %s mid-coup: %s", in.Link, in.Reason))
	}
}

// rejected: what the driver could not take is only recorded (a lost card
// shows as a sequence gap), except a shoe speaking another protocol
// version, whose sentences cannot be trusted at all, and (RulesShoePrint)
// a sentence reusing the number of the one before with other content:
// one of the two is not what the shoe sent, or the shoe misnumbers, and
// the card may be in play either way.
func (a *applier) rejected() {
	r := a.in.Rejected
	if r == nil {
		return
	}
	needs := NeedsResume
	if a.t.midCoup() || (a.t.phase == PhaseResult && !a.t.final) {
		needs = NeedsVoid
	}
	switch {
	case r.Reason == ReasonVersion:
		if a.t.midCoup() {
			needs = NeedsVoid
		} else {
			needs = NeedsResume
		}
		a.raise(AlertShoeProtocol, needs, "the shoe announced a protocol version the configured driver does not speak ("+r.Raw+"): configure the driver that matches the shoe")
	case r.Reason == ReasonSeqReused && a.t.cfg.Rules >= RulesShoePrint:
		a.raise(AlertSequenceReused, needs, "a shoe sentence reused the sequence number of the one before with other content ("+r.Raw+"): count the cards on the table against the display")
	}
}

func (a *applier) auditFailed() {
	t, in := a.t, a.in
	if in.GapTo > t.lastSeq {
		t.lastSeq = in.GapTo
	}
	needs := NeedsResume
	if t.midCoup() || t.phase == PhaseBurn || (t.phase == PhaseResult && !t.final) {
		needs = NeedsVoid
	}
	msg := "the audit trail could not be written: " + in.Text
	if in.GapTo > 0 {
		msg += fmt.Sprintf("; shoe sentences %d to %d were not recorded", in.GapFrom, in.GapTo)
	}
	a.raise(AlertAuditFailed, needs, msg)
}

func (a *applier) tick() {
	t := a.t
	if t.deadline.IsZero() || a.in.At.Before(t.deadline) || t.Suspended() {
		a.emit(Event{Kind: EvIgnored, Reason: "no deadline passed"})
		return
	}
	a.dueTick(a.in.At) // as the first rules had it: the tick's own time
}

// timersFirst acts, before the input, on what the table's timers owe it.
// A deadline that passed before this input came is acted on first, as its
// tick would have been: inputs are judged at their own time, not at
// whatever moment the timer got round to it (after a restart, a burst of
// sentences the shoe sent while the controller was down comes in with
// their times spread by the heartbeats between them). A self-check is the
// controller's, not the game's: it moves no deadline. And from
// RulesDealerOrder, the dealer moving on (NOMOREBETS, NEWSHOE) ends the
// result's hold, whatever its timer says.
func (a *applier) timersFirst() {
	t, in := a.t, a.in
	switch {
	case t.cfg.Rules >= RulesProtect && in.Kind != InTick && in.Kind != InSelfCheck && !t.deadline.IsZero() && !in.At.Before(t.deadline) && !t.Suspended():
		a.dueTick(t.deadline)
	case t.cfg.Rules >= RulesDealerOrder && in.Kind == InButton && (in.Button == ButtonNoMoreBets || in.Button == ButtonNewShoe) && t.holding():
		a.endHold()
	}
}

// holding reports the result's hold running: a final result stands, its
// time not yet over, the table live.
func (t *Table) holding() bool {
	return t.phase == PhaseResult && t.final && !t.deadline.IsZero() && !t.Suspended()
}

// endHold ends the result's hold at the input's time: the dealer has moved
// on (RulesDealerOrder). The next coup's betting opens now, saying why, for
// the input to act on: the dealer's NOMOREBETS closes it, a NEWSHOE ends
// the shoe (the coup never dealt, its bets returned) and starts the next;
// after the cut card's last coup the shoe ends now.
func (a *applier) endHold() {
	a.openReason = "the dealer's " + strings.ReplaceAll(a.in.Button, "_", " ") + " ended the result's hold"
	a.dueTick(a.in.At)
	a.openReason = ""
}

// dueTick acts on the deadline that fell due at at: betting closes, or the
// result gives way to the next coup (whose betting time starts at at).
func (a *applier) dueTick(at time.Time) {
	t := a.t
	t.deadline = time.Time{}
	in := a.in
	a.in.At = at
	defer func() { a.in = in }()
	switch {
	case t.phase == PhaseBettingOpen:
		a.closeBetting("timer")
	case t.phase == PhaseResult && t.final:
		a.nextCoup()
	}
	// Betting that opened at at may itself be over by the input's time.
	if d := t.deadline; in.Kind != InTick && !d.IsZero() && !in.At.Before(d) && t.phase == PhaseBettingOpen {
		t.deadline = time.Time{}
		a.in.At = d
		a.closeBetting("timer")
	}
}

// ---- commands ----

func (a *applier) refuse(c *Command, format string, args ...any) {
	a.emit(Event{Kind: EvCommandRefused, Command: c.ID, Action: c.Action, By: c.By, Reason: fmt.Sprintf(format, args...)})
}

func (a *applier) accepted(c *Command) {
	a.emit(Event{Kind: EvCommandDone, Command: c.ID, Action: c.Action, By: c.By, Reason: c.Reason})
}

func (a *applier) command() {
	t := a.t
	c := a.in.Command
	if c == nil {
		a.emit(Event{Kind: EvIgnored, Reason: "command input without a command"})
		return
	}
	if t.cfg.Rules >= RulesSelfCheckHolds && c.Action != ActionSuspend {
		// A suspension only adds a hold; anything else would change the
		// game on a program that failed its check.
		if i := slices.IndexFunc(t.alerts, func(al Alert) bool { return al.Kind == AlertSelfCheck }); i >= 0 {
			al := t.alerts[i]
			a.refuse(c, "alert %d (%s): the controller failed its self-check (%s); no command changes the game until a self-check passes: restart it from the certified build", al.ID, al.Kind, al.Message)
			return
		}
	}
	switch c.Action {
	case ActionSuspend:
		if t.manualSuspend != "" {
			a.refuse(c, "the table is already suspended by a supervisor")
			return
		}
		reason := c.Reason
		if reason == "" {
			reason = "suspended by " + c.By
		}
		wasSuspended := t.Suspended()
		t.manualSuspend = reason
		a.accepted(c)
		if !wasSuspended {
			t.deadline = time.Time{}
			a.emit(Event{Kind: EvSuspended, Phase: t.phase, Reason: reason, By: c.By})
		}
	case ActionResume:
		a.resume(c)
	case ActionVoid:
		a.void(c)
	case ActionCard:
		a.manualCard(c)
	case ActionShoeStart:
		if t.phase != PhaseNoShoe {
			a.refuse(c, "a shoe is in play (shoe %d, %s): end it first", t.shoe, t.phase)
			return
		}
		a.accepted(c)
		a.startShoe(c.By)
	case ActionShoeEnd:
		if t.phase == PhaseNoShoe {
			a.refuse(c, "no shoe is in play")
			return
		}
		if len(t.cards) > 0 && !t.final {
			a.refuse(c, "coup %d has cards dealt: void it or finish it first", t.coup)
			return
		}
		a.accepted(c)
		a.endShoe("ended by " + c.By)
	case ActionDealerIn, ActionDealerOut:
		a.dealerDuty(c)
	case ActionBetsClosed:
		if c.Coup != 0 && (c.Coup != t.coup || t.phase == PhaseNoShoe || t.phase == PhaseBurn) {
			a.refuse(c, "bets-closed for coup %d, but the coup taking bets is %d", c.Coup, t.coup)
			return
		}
		if t.phase != PhaseBettingOpen {
			a.refuse(c, "betting is not open (phase %s)", t.phase)
			return
		}
		if t.Suspended() {
			a.refuse(c, "the table is suspended")
			return
		}
		a.accepted(c)
		a.closeBetting(c.By)
	default:
		a.refuse(c, "unknown action %q", clip(c.Action))
	}
}

func (a *applier) resume(c *Command) {
	t := a.t
	if !t.Suspended() {
		a.refuse(c, "the table is not suspended")
		return
	}
	for _, al := range t.alerts {
		switch al.Needs {
		case NeedsVoid:
			a.refuse(c, "alert %d (%s) needs coup %d voided first", al.ID, al.Kind, al.Coup)
			return
		case NeedsCard:
			a.refuse(c, "alert %d (%s) needs the card entered or the coup voided", al.ID, al.Kind)
			return
		case NeedsLink:
			if t.link != LinkConnected {
				a.refuse(c, "alert %d (%s): the shoe link is still %s", al.ID, al.Kind, t.link)
				return
			}
		case NeedsSelfCheck:
			a.refuse(c, "alert %d (%s) needs a passing self-check: restart the controller from the certified build", al.ID, al.Kind)
			return
		}
	}
	a.accepted(c)
	t.manualSuspend = ""
	a.resolve(c.By, func(Alert) bool { return true })
	a.resumeIfClear(true)
}

func (a *applier) void(c *Command) {
	t := a.t
	if t.phase == PhaseNoShoe {
		a.refuse(c, "no shoe is in play")
		return
	}
	target := c.Coup
	inProgress := t.coup > 0 && !t.final && t.phase != PhaseBurn
	if target == 0 {
		if !inProgress {
			a.refuse(c, "no coup in progress to void (name a completed coup to void it)")
			return
		}
		target = t.coup
	}
	wasSuspended := t.Suspended()
	if inProgress && target == t.coup {
		a.accepted(c)
		cs := make([]Card, 0, len(t.cards))
		for _, dc := range t.cards {
			if !dc.Unreadable {
				cs = append(cs, dc.Card)
			}
		}
		t.record(CoupRecord{Shoe: t.shoe, Coup: t.coup, Cards: slices.Clone(t.cards), Result: t.result, Voided: true, Actions: []string{"void by " + c.By}, Dealer: t.dealer,
			Strays: slices.Clone(t.strays)})
		a.emit(Event{Kind: EvCoupVoided, Coup: target, Cards: cs, By: c.By, Reason: c.Reason})
		coup := t.coup
		a.resolve(c.By, func(al Alert) bool {
			switch al.Needs {
			case NeedsLink:
				return t.link == LinkConnected
			case NeedsSelfCheck:
				return false
			}
			return al.Coup == coup || al.Needs == NeedsVoid || al.Needs == NeedsCard
		})
		if t.cutSeen && t.coup >= t.lastCoup {
			a.endShoe("the cut card's last coup was voided")
		} else {
			a.openBetting(t.coup + 1)
		}
		a.resumeIfClear(wasSuspended)
		return
	}
	i := slices.IndexFunc(t.coups, func(r CoupRecord) bool { return r.Coup == target })
	if i < 0 {
		a.refuse(c, "coup %d is not a completed coup of shoe %d", target, t.shoe)
		return
	}
	if t.coups[i].Voided {
		a.refuse(c, "coup %d is already voided", target)
		return
	}
	a.accepted(c)
	// The records may be shared with a clone (see Clone): copy, then write.
	t.coups, t.recall = cloneRecords(t.coups), cloneRecords(t.recall)
	t.coups[i].Voided = true
	t.coups[i].Actions = append(t.coups[i].Actions, "void by "+c.By)
	for j := range t.recall {
		if t.recall[j].Shoe == t.shoe && t.recall[j].Coup == target {
			t.recall[j].Voided = true
			t.recall[j].Actions = slices.Clone(t.coups[i].Actions)
		}
	}
	var cs []Card
	for _, dc := range t.coups[i].Cards {
		cs = append(cs, dc.Card)
	}
	// The void is put against the dealer who dealt the coup.
	a.emit(Event{Kind: EvCoupVoided, Coup: target, Cards: cs, By: c.By, Reason: c.Reason, Dealer: t.coups[i].Dealer})
	a.resolve(c.By, func(al Alert) bool {
		return al.Coup == target && al.Needs != NeedsLink && al.Needs != NeedsSelfCheck
	})
	a.resumeIfClear(wasSuspended)
}

// takeOut takes a manual entry's card out of the shoe's composition, or
// refuses the command when there is no card or the shoe cannot hold it.
func (a *applier) takeOut(c *Command) bool {
	if c.Card == nil || !c.Card.Valid() {
		a.refuse(c, "a manual entry needs a card")
		return false
	}
	if err := a.t.comp.Remove(*c.Card); err != nil {
		a.refuse(c, "%v", err)
		return false
	}
	return true
}

// shortCard places a supervisor's card where the tableau wanted the card
// a coup_incomplete alert is about.
func (a *applier) shortCard(c *Command) {
	t := a.t
	pos, err := Next(t.known())
	if err != nil || pos == Complete {
		a.refuse(c, "coup %d wants no card", t.coup)
		return
	}
	if !a.takeOut(c) {
		return
	}
	wasSuspended := t.Suspended()
	a.accepted(c)
	dc := DealtCard{Card: *c.Card, Manual: true, Position: pos}
	t.cards = append(t.cards, dc)
	a.resolve(c.By, func(al Alert) bool { return al.Kind == AlertCoupIncomplete })
	a.emit(Event{Kind: EvCardDealt, Card: &dc, Position: pos.String(), Phase: t.phase})
	a.resumeIfClear(wasSuspended)
	a.maybeComplete()
}

func (a *applier) manualCard(c *Command) {
	t := a.t
	short := t.pending < 0 && t.phase == PhaseDealing &&
		slices.ContainsFunc(t.alerts, func(al Alert) bool { return al.Kind == AlertCoupIncomplete })
	if t.pending < 0 && !short {
		a.refuse(c, "no card is waiting for manual entry")
		return
	}
	if short {
		a.shortCard(c)
		return
	}
	if !a.takeOut(c) {
		return
	}
	wasSuspended := t.Suspended()
	a.accepted(c)
	i := t.pending
	t.pending = -1
	dc := &t.cards[i]
	dc.Card, dc.Unreadable, dc.Impossible, dc.Manual = *c.Card, false, false, true
	a.resolve(c.By, func(al Alert) bool { return al.Needs == NeedsCard })
	if t.phase == PhaseBurn {
		t.cards = nil
		a.exposeBurnCard(*c.Card)
		a.resumeIfClear(wasSuspended)
		a.burnMaybeDone()
		return
	}
	shown := *dc
	a.emit(Event{Kind: EvCardDealt, Card: &shown, Position: dc.Position.String(), Phase: t.phase})
	a.resumeIfClear(wasSuspended)
	a.maybeComplete()
}

// ---- the dealer on record ----

// dealing reports a coup whose cards are being dealt: bets closed, or
// cards out and the result not final. A dealer does not change then.
func (t *Table) dealing() bool {
	return t.midCoup() || (t.phase == PhaseResult && !t.final)
}

func (a *applier) dealerDuty(c *Command) {
	t := a.t
	if t.dealing() {
		a.refuse(c, "coup %d is being dealt: change dealers once it is over", t.coup)
		return
	}
	if c.Action == ActionDealerOut {
		if t.dealer == "" {
			a.refuse(c, "no dealer is signed in")
			return
		}
		a.accepted(c)
		a.emit(Event{Kind: EvDealerOut, Dealer: t.dealer, By: c.By})
		t.dealer = ""
		return
	}
	if !ValidStaffName(c.Dealer) {
		a.refuse(c, "dealer %q: want 1 to 64 bytes of A-Z a-z 0-9 . _ @ -", clip(c.Dealer))
		return
	}
	if c.Dealer == t.dealer {
		a.refuse(c, "dealer %s is already signed in", c.Dealer)
		return
	}
	a.accepted(c)
	if t.dealer != "" {
		a.emit(Event{Kind: EvDealerOut, Dealer: t.dealer, By: c.By, Reason: "relieved by " + c.Dealer})
	}
	t.dealer = c.Dealer
	a.emit(Event{Kind: EvDealerIn, Dealer: t.dealer, By: c.By})
}

// ValidStaffName says whether s is a person's name as the trail keeps it:
// a dealer's or a supervisor's badge or staff id, 1 to 64 of A-Z a-z 0-9
// . _ @ -. The signed commands (package command) hold their supervisors
// and dealers to it too.
func ValidStaffName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '@' || c == '-') {
			return false
		}
	}
	return true
}

// ---- self-authentication ----

// selfCheck takes the controller's check of its own program and
// configuration. A failure raises an alert that only a passing check
// clears; an unsigned development build is recorded and deals on.
func (a *applier) selfCheck() {
	t, c := a.t, a.in.Check
	if c == nil {
		a.emit(Event{Kind: EvIgnored, Reason: "self-check input without a result"})
		return
	}
	a.emit(Event{Kind: EvSelfCheck, Status: c.Result, Reason: c.Detail})
	held := slices.ContainsFunc(t.alerts, func(al Alert) bool { return al.Kind == AlertSelfCheck })
	switch c.Result {
	case SelfCheckOK:
		if held {
			wasSuspended := t.Suspended()
			a.resolve("self-check", func(al Alert) bool { return al.Kind == AlertSelfCheck })
			a.resumeIfClear(wasSuspended)
		}
	case SelfCheckUnsigned:
		// Deals on, unless a failed check holds the table: an unsigned
		// build does not clear a signed build's failure.
	default:
		if !held {
			msg := "the controller's program or configuration does not match its signed manifest"
			if c.Detail != "" {
				msg += ": " + c.Detail
			}
			a.raise(AlertSelfCheck, NeedsSelfCheck, msg)
		}
	}
}
