package shoesim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/shoeread"
)

// The protocols a Sim speaks, by their shoeread driver names.
const (
	ProtocolV1     = "v1"
	ProtocolBeetek = "beetek"
)

// CutRule is what the dealer does once the cut card has come out.
type CutRule uint8

// The cut card rules. The zero value is the default.
const (
	// CutOneMore finishes the coup in progress and deals one more.
	CutOneMore CutRule = iota
	// CutFinish finishes the coup in progress only.
	CutFinish
)

// String names the rule as the CLI flag takes it.
func (r CutRule) String() string {
	if r == CutFinish {
		return "finish"
	}
	return "one-more"
}

// ParseCutRule reads "one-more" or "finish".
func ParseCutRule(s string) (CutRule, error) {
	switch s {
	case "one-more":
		return CutOneMore, nil
	case "finish":
		return CutFinish, nil
	}
	return 0, fmt.Errorf("cut card rule %q: want one-more or finish", clip(s))
}

// Defaults for Options.
const (
	DefaultDecks     = 6
	DefaultCut       = 16
	DefaultHeartbeat = time.Second
	// DefaultCardPace and DefaultCoupPace are a human dealer's pace, what
	// `tablectl shoe-sim` uses unless told otherwise. The zero Options
	// deal at full speed.
	DefaultCardPace = time.Second
	DefaultCoupPace = 5 * time.Second
)

// Options say what shoe to simulate and how. The zero value is a 6-deck v1
// shoe from seed 0, dealt at full speed to its cut card.
type Options struct {
	// Protocol is "v1" (default) or "beetek". Bee-Tek sends cards and
	// alarms only: no HELO, buttons, cut card or heartbeats, and burned
	// cards as "Manual Burn Cards".
	Protocol string
	// Decks is 6 (default) or 8.
	Decks int
	// Seed decides the order of the cards (see Shuffle) and the noise.
	Seed uint64
	// Shuffle is how each shoe is prepared; the default is shuffled.
	Shuffle ShuffleMode
	// Shoes is how many shoes to deal, one after another (default 1): each
	// starts with NEWSHOE and its burn, after the betting time (CoupPace)
	// that follows the last coup of the shoe before.
	Shoes int
	// Coups, when not 0, stops the run after that many coups in all, even
	// before a cut card.
	Coups int
	// Cut is how many cards are behind the cut card (default 16).
	Cut int
	// AfterCut is the cut card rule (default: one more coup).
	AfterCut CutRule
	// CardPace is the wait before each card and button within the burn and
	// a coup; CoupPace is the betting time before each coup. 0 is full
	// speed.
	CardPace, CoupPace time.Duration
	// Heartbeat is the longest a v1 line stays idle before the shoe sends
	// HB (default 1s, as docs/shoe-protocol.md asks).
	Heartbeat time.Duration
	// ShoeID is the id HELO announces (default "SIM-<seed>").
	ShoeID string
	// Faults are the faults to inject.
	Faults []Fault
	// BeforeUnplug, if set, is called before each unplug, once every byte
	// so far is written to the line (written counts them, noise included,
	// since the Sim started). A reader that returns once it has read that
	// many makes the unplug lossless; otherwise bytes still in the kernel's
	// buffer are lost with the pseudo-terminal, as bytes on a pulled cable
	// are.
	BeforeUnplug func(ctx context.Context, written int64) error
}

// withDefaults fills in the zero fields that have defaults.
func (o Options) withDefaults() Options {
	if o.Protocol == "" {
		o.Protocol = ProtocolV1
	}
	if o.Decks == 0 {
		o.Decks = DefaultDecks
	}
	if o.Shoes == 0 {
		o.Shoes = 1
	}
	if o.Cut == 0 {
		o.Cut = DefaultCut
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.ShoeID == "" {
		o.ShoeID = fmt.Sprintf("SIM-%d", o.Seed)
	}
	faults := make([]Fault, len(o.Faults))
	for i, f := range o.Faults {
		faults[i] = f.withDefaults()
	}
	o.Faults = faults
	return o
}

// ErrOptions reports Options a Sim cannot run.
var ErrOptions = errors.New("bad shoe simulator options")

func (o Options) check() error {
	total := o.Decks * coup.CardCount
	// The cut card must come out after the longest burn (11 cards) and
	// leave enough cards behind it to finish the coups the rule deals.
	minCut := maxCoupCards
	if o.AfterCut == CutOneMore {
		minCut = 2 * maxCoupCards
	}
	maxCut := total - 1 - 10
	switch {
	case o.Protocol != ProtocolV1 && o.Protocol != ProtocolBeetek:
		return fmt.Errorf("%w: protocol %q: want v1 or beetek", ErrOptions, clip(o.Protocol))
	case !coup.ValidDecks(o.Decks):
		return fmt.Errorf("%w: %w: %d (want 6 or 8)", ErrOptions, coup.ErrDecks, o.Decks)
	case o.Shoes < 1 || o.Coups < 0:
		return fmt.Errorf("%w: shoes %d, coups %d", ErrOptions, o.Shoes, o.Coups)
	case o.Cut < minCut || o.Cut > maxCut:
		return fmt.Errorf("%w: cut card %d cards from the end: want %d to %d", ErrOptions, o.Cut, minCut, maxCut)
	case o.AfterCut != CutOneMore && o.AfterCut != CutFinish:
		return fmt.Errorf("%w: cut card rule %d", ErrOptions, o.AfterCut)
	case o.CardPace < 0 || o.CoupPace < 0 || o.Heartbeat < 0:
		return fmt.Errorf("%w: negative pace or heartbeat", ErrOptions)
	case o.Shuffle != ShuffleRandom && o.Shuffle != ShuffleNone && o.Shuffle != ShuffleRiffle && o.Shuffle != ShuffleRepeat && o.Shuffle != ShuffleRecut:
		return fmt.Errorf("%w: shuffle %q: want none, riffle, repeat or recut", ErrOptions, clip(string(o.Shuffle)))
	}
	if _, err := shoeread.AppendV1(nil, shoeread.Event{Kind: shoeread.KindHello, Seq: 1, Text: o.ShoeID}); err != nil {
		return fmt.Errorf("%w: shoe id: %w", ErrOptions, err)
	}
	return o.checkFaults()
}

// checkFaults checks the faults against the run: each names a shoe the run
// deals, each fits the protocol, and one of a kind per shoe where the
// simulator can stage only one.
func (o Options) checkFaults() error {
	impossible, shortBurn := map[int]bool{}, map[int]bool{}
	for _, f := range o.Faults {
		if err := f.check(); err != nil {
			return fmt.Errorf("%w: fault %s: %w", ErrOptions, f, err)
		}
		if f.Shoe > o.Shoes {
			return fmt.Errorf("%w: fault %s: the run deals %d shoe(s)", ErrOptions, f, o.Shoes)
		}
		if f.Kind == FaultBadSum && f.Card == 0 && o.Protocol == ProtocolBeetek {
			return fmt.Errorf("%w: fault %s: Bee-Tek sends no NOMOREBETS to spoil: name a card", ErrOptions, f)
		}
		if f.Kind == FaultImpossible {
			if impossible[f.Shoe] {
				return fmt.Errorf("%w: fault %s: one impossible card per shoe", ErrOptions, f)
			}
			impossible[f.Shoe] = true
		}
		if f.Kind == FaultShortBurn {
			if o.Protocol == ProtocolBeetek {
				return fmt.Errorf("%w: fault %s: Bee-Tek has no BURNDONE button to press early", ErrOptions, f)
			}
			if shortBurn[f.Shoe] {
				return fmt.Errorf("%w: fault %s: one short burn per shoe", ErrOptions, f)
			}
			shortBurn[f.Shoe] = true
		}
	}
	return nil
}

// Op is what a Step does.
type Op uint8

// The steps of a Plan.
const (
	OpSend    Op = iota + 1 // send Event as one sentence
	OpPause                 // the dealer takes For; the shoe may send heartbeats
	OpNoise                 // send Noise, line noise between sentences
	OpSilence               // the shoe sends nothing at all for For
	OpUnplug                // the line is unplugged for For; output is held
)

func (o Op) String() string {
	switch o {
	case OpSend:
		return "send"
	case OpPause:
		return "pause"
	case OpNoise:
		return "noise"
	case OpSilence:
		return "silence"
	case OpUnplug:
		return "unplug"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Position is where in the run a step happens.
type Position struct {
	Shoe int `json:"shoe"` // from 1
	// Coup is from 1; 0 before the shoe's first coup (its start and burn).
	Coup int `json:"coup"`
	// Card is the coup's card (from 1) or the burn's (from 1: the exposed
	// card); 0 for buttons and everything between cards.
	Card int  `json:"card,omitempty"`
	Burn bool `json:"burn,omitempty"`
}

func (p Position) String() string {
	switch {
	case p.Burn:
		return fmt.Sprintf("shoe %d burn card %d", p.Shoe, p.Card)
	case p.Card > 0:
		return fmt.Sprintf("shoe %d coup %d card %d", p.Shoe, p.Coup, p.Card)
	case p.Coup > 0:
		return fmt.Sprintf("shoe %d coup %d", p.Shoe, p.Coup)
	}
	return fmt.Sprintf("shoe %d", p.Shoe)
}

// Step is one thing the shoe does. Sentences carry no sequence number yet:
// the Sim numbers them as it sends them (dropped ones included), and its
// heartbeats repeat the last number rather than taking one.
type Step struct {
	Op    Op
	Event shoeread.Event // OpSend
	For   time.Duration  // OpPause, OpSilence, OpUnplug
	Noise []byte         // OpNoise
	// Drop: the sentence is numbered but never reaches the line.
	Drop bool
	// Corrupt: the sentence goes out with a wrong checksum (v1) or its card
	// garbled (Bee-Tek).
	Corrupt bool
	// Faults are the faults this step is or that alter it; they point
	// into Plan.Faults.
	Faults []*Fault
	At     Position
	// Truth is the card that physically left the shoe, for a card sent
	// unreadable (and equal to Event.Card otherwise).
	Truth coup.Card
}

// DealtCoup is one coup as dealt.
type DealtCoup struct {
	Number int
	// Cards are the coup's cards in the order the tableau placed them, as
	// they physically left the shoe (an unreadable card is here as it
	// truly was; an impossible card is the counterfeit).
	Cards []coup.Card
	// Extra is a card drawn beyond the tableau (FaultExtra), if any.
	Extra []coup.Card
	// CutCard: the cut card came out during this coup.
	CutCard bool
	// Short: the dealer moved on before the tableau was done (FaultShort).
	Short bool
}

// DealtShoe is one shoe as dealt.
type DealtShoe struct {
	// Order is the shoe as shuffled (and stacked, for FaultImpossible).
	Order []coup.Card
	// Burn is the exposed card then the cards burned.
	Burn []coup.Card
	// Coups are the coups dealt, in order.
	Coups []DealtCoup
	// CutAt is how many cards had left the shoe when the cut card came
	// out; -1 when the run stopped before it.
	CutAt int
}

// Plan is a run of the simulator worked out in advance: every step, and the
// shoes and coups they deal.
type Plan struct {
	Options Options // with defaults filled in
	Steps   []Step
	Shoes   []DealtShoe
	Faults  []Fault // the faults, as Steps point to them
}

// NewPlan shuffles and deals the run Options describe. It is pure: the same
// Options give the same Plan. A fault at a place the run never reaches (a
// coup after the shoe ended, a fourth card in a coup of four) is an error.
//
// FaultImpossible stacks the shoe: every copy of the first ten-valued card
// in the shuffled order is moved to the top, so the first card exposed is
// that card and its other copies are among the ten burned. At the fault's
// place one more copy, a counterfeit, is drawn: more of that card than the
// decks hold. It is an extra physical card: the shoe's own cards are not
// displaced.
func NewPlan(opts Options) (*Plan, error) {
	o := opts.withDefaults()
	if err := o.check(); err != nil {
		return nil, err
	}
	p := &Plan{Options: o, Faults: o.Faults}
	b := &builder{
		plan:    p,
		o:       o,
		applied: make([]bool, len(p.Faults)),
		noise:   rand.New(rand.NewPCG(o.Seed, noiseStream)),
	}
	b.send(shoeread.Event{Kind: shoeread.KindHello, Text: o.ShoeID})
	for shoe := 1; shoe <= o.Shoes && !b.done(); shoe++ {
		if shoe > 1 {
			b.pause(o.CoupPace)
		}
		if err := b.dealShoe(shoe); err != nil {
			return nil, err
		}
	}
	for i, ok := range b.applied {
		if !ok {
			return nil, fmt.Errorf("%w: fault %s: the run never reaches %s", ErrOptions, &p.Faults[i], b.reach(p.Faults[i]))
		}
	}
	return p, nil
}

// builder deals a Plan.
type builder struct {
	plan    *Plan
	o       Options
	applied []bool
	noise   *rand.Rand
	coups   int // coups dealt in the run

	// The shoe being dealt.
	shoe    *DealtShoe
	at      Position
	order   []coup.Card
	next    int  // index of the next card in order
	cutSeen bool // the cut card has come out
	drop    int  // sentences still to drop
	dropBy  *Fault
}

func (b *builder) done() bool { return b.o.Coups > 0 && b.coups >= b.o.Coups }

func (b *builder) reach(f Fault) string {
	return Position{Shoe: f.Shoe, Coup: f.Coup, Card: f.Card}.String()
}

func (b *builder) dealShoe(n int) error {
	var prev []coup.Card
	if len(b.plan.Shoes) > 0 {
		prev = b.plan.Shoes[len(b.plan.Shoes)-1].Order
	}
	order, err := prepared(b.o.Shuffle, b.o.Decks, b.o.Seed, n, prev)
	if err != nil {
		return err
	}
	for i := range b.plan.Faults {
		if f := &b.plan.Faults[i]; f.Kind == FaultImpossible && f.Shoe == n {
			order = stack(order)
		}
	}
	b.plan.Shoes = append(b.plan.Shoes, DealtShoe{Order: order, CutAt: -1})
	b.shoe = &b.plan.Shoes[len(b.plan.Shoes)-1]
	b.order, b.next, b.cutSeen = order, 0, false
	b.at = Position{Shoe: n}

	b.send(shoeread.Event{Kind: shoeread.KindButton, Button: shoeread.ButtonNewShoe})
	// The burn: the first card exposed, then as many burned as its value;
	// one fewer when the dealer presses BURNDONE early (FaultShortBurn).
	short := b.fault(FaultShortBurn, 0)
	b.at.Burn = true
	for burn := 1; len(b.shoe.Burn) < burn; {
		b.pause(b.o.CardPace)
		b.at.Card = len(b.shoe.Burn) + 1
		c, err := b.draw()
		if err != nil {
			return err
		}
		if len(b.shoe.Burn) == 0 {
			burn = 1 + burnCount(c)
			if short != nil {
				burn--
			}
		}
		b.shoe.Burn = append(b.shoe.Burn, c)
		b.send(shoeread.Event{Kind: shoeread.KindCard, Card: c, Burn: true})
	}
	b.at.Burn, b.at.Card = false, 0
	b.pause(b.o.CardPace)
	var marks []*Fault
	if short != nil {
		marks = append(marks, short)
	}
	b.send(shoeread.Event{Kind: shoeread.KindButton, Button: shoeread.ButtonBurnDone}, marks...)

	after := -1 // coups still to deal once the cut card is out; -1 before it
	for coupN := 1; !b.done() && after != 0; coupN++ {
		if err := b.dealCoup(coupN); err != nil {
			return err
		}
		b.coups++
		switch {
		case after > 0:
			after--
		case after < 0 && b.cutSeen:
			after = 0
			if b.o.AfterCut == CutOneMore {
				after = 1
			}
		}
	}
	return nil
}

// dealCoup deals one coup: betting time, NOMOREBETS, the tableau's cards,
// REVEAL, with the faults asked for at each place.
func (b *builder) dealCoup(n int) error {
	b.at = Position{Shoe: b.at.Shoe, Coup: n}
	b.shoe.Coups = append(b.shoe.Coups, DealtCoup{Number: n})
	dc := &b.shoe.Coups[len(b.shoe.Coups)-1]
	cutBefore := b.cutSeen
	defer func() { dc.CutCard = !cutBefore && b.cutSeen }()

	b.pause(b.o.CoupPace)
	if f := b.fault(FaultEarly, 0); f != nil {
		if err := b.card(dc, f); err != nil {
			return err
		}
		b.pause(b.o.CardPace)
	}
	b.between(0)
	b.send(shoeread.Event{Kind: shoeread.KindButton, Button: shoeread.ButtonNoMoreBets}, b.alter(0)...)
	for {
		pos, err := coup.Next(dc.Cards)
		if err != nil {
			return fmt.Errorf("shoe %d coup %d: %w", b.at.Shoe, n, err)
		}
		if pos == coup.Complete {
			break
		}
		if f := b.fault(FaultShort, len(dc.Cards)+1); f != nil {
			// The dealer moves on a card short: the card stays in the shoe.
			b.pause(b.o.CardPace)
			b.send(shoeread.Event{Kind: shoeread.KindButton, Button: shoeread.ButtonReveal}, f)
			dc.Short = true
			return nil
		}
		b.pause(b.o.CardPace)
		if err := b.card(dc); err != nil {
			return err
		}
	}
	if f := b.fault(FaultExtra, 0); f != nil {
		b.pause(b.o.CardPace)
		b.at.Card = len(dc.Cards) + 1
		c, err := b.draw()
		if err != nil {
			return err
		}
		dc.Extra = append(dc.Extra, c)
		b.send(shoeread.Event{Kind: shoeread.KindCard, Card: c}, f)
		b.at.Card = 0
	}
	b.pause(b.o.CardPace)
	b.send(shoeread.Event{Kind: shoeread.KindButton, Button: shoeread.ButtonReveal})
	return nil
}

// card deals the coup's next card, with the faults asked for at it and
// those in marks.
func (b *builder) card(dc *DealtCoup, marks ...*Fault) error {
	k := len(dc.Cards) + 1
	b.between(k)
	b.at.Card = k
	defer func() { b.at.Card = 0 }()
	faults := append(b.alter(k), marks...)
	var c coup.Card
	if f := b.fault(FaultImpossible, k); f != nil {
		c = b.shoe.Burn[0] // its every copy came out in the burn: see stack
		faults = append(faults, f)
	} else {
		var err error
		if c, err = b.draw(); err != nil {
			return err
		}
	}
	dc.Cards = append(dc.Cards, c)
	e := shoeread.Event{Kind: shoeread.KindCard, Card: c}
	if f := b.fault(FaultUnreadable, k); f != nil {
		e = shoeread.Event{Kind: shoeread.KindCard, Unreadable: true}
		faults = append(faults, f)
	}
	b.send(e, faults...)
	if n := len(b.plan.Steps); n > 0 && b.plan.Steps[n-1].Op == OpSend {
		b.plan.Steps[n-1].Truth = c
	}
	return nil
}

// between adds the faults that happen on the line before card k of the
// coup (k 0: before NOMOREBETS): noise, silence, unplug, and the status
// reports the shoe sends there.
func (b *builder) between(k int) {
	at := b.at
	at.Card = k
	for i := range b.plan.Faults {
		f := &b.plan.Faults[i]
		if b.applied[i] || !b.here(f, k) {
			continue
		}
		switch f.Kind {
		case FaultNoise:
			b.applied[i] = true
			b.plan.Steps = append(b.plan.Steps, Step{Op: OpNoise, Noise: b.noiseBytes(f.N), Faults: []*Fault{f}, At: at})
		case FaultSilence:
			b.applied[i] = true
			b.plan.Steps = append(b.plan.Steps, Step{Op: OpSilence, For: f.For, Faults: []*Fault{f}, At: at})
		case FaultUnplug:
			b.applied[i] = true
			b.plan.Steps = append(b.plan.Steps, Step{Op: OpUnplug, For: f.For, Faults: []*Fault{f}, At: at})
		case FaultStatus:
			b.applied[i] = true
			card := b.at.Card
			b.at.Card = k
			b.send(shoeread.Event{Kind: shoeread.KindStatus, Status: f.Status, Text: f.Text}, f)
			b.at.Card = card
		}
	}
}

// alter starts the faults that alter the sentence at card k (0: the
// NOMOREBETS button) and those after it: badsum and drop. It returns the
// badsum fault to mark the sentence with, if any (send marks drops).
func (b *builder) alter(k int) []*Fault {
	if f := b.fault(FaultDrop, k); f != nil {
		b.drop, b.dropBy = f.N, f
	}
	if f := b.fault(FaultBadSum, k); f != nil {
		return []*Fault{f}
	}
	return nil
}

// fault returns the fault of kind at card k of the current coup, marking
// it applied, or nil.
func (b *builder) fault(kind FaultKind, k int) *Fault {
	for i := range b.plan.Faults {
		f := &b.plan.Faults[i]
		if !b.applied[i] && f.Kind == kind && b.here(f, k) {
			b.applied[i] = true
			return f
		}
	}
	return nil
}

func (b *builder) here(f *Fault, k int) bool {
	return f.Shoe == b.at.Shoe && f.Coup == b.at.Coup && f.Card == k
}

// draw takes the next card out of the shoe; the cut card comes out first
// when only Cut cards remain behind it.
func (b *builder) draw() (coup.Card, error) {
	if !b.cutSeen && len(b.order)-b.next == b.o.Cut {
		b.cutSeen = true
		b.shoe.CutAt = b.next
		card := b.at.Card
		b.at.Card = 0
		b.send(shoeread.Event{Kind: shoeread.KindCutCard})
		b.at.Card = card
	}
	if b.next >= len(b.order) {
		return coup.Card{}, fmt.Errorf("%w: %s: the shoe ran out of cards (raise the cut card)", ErrOptions, b.at)
	}
	c := b.order[b.next]
	b.next++
	return c, nil
}

// send adds a sentence, marked with the faults that make or alter it.
// Bee-Tek sends cards and alarms only: its plan has no other sentence, so
// that its dropped sentences are cards (or a status fault's alarm).
func (b *builder) send(e shoeread.Event, faults ...*Fault) {
	if b.o.Protocol == ProtocolBeetek && e.Kind != shoeread.KindCard && e.Kind != shoeread.KindStatus {
		return
	}
	st := Step{Op: OpSend, Event: e, Faults: faults, At: b.at, Truth: e.Card}
	for _, f := range faults {
		if f.Kind == FaultBadSum {
			st.Corrupt = true
		}
	}
	if b.drop > 0 {
		b.drop--
		st.Drop = true
		st.Faults = append(st.Faults, b.dropBy)
	}
	b.plan.Steps = append(b.plan.Steps, st)
}

func (b *builder) pause(d time.Duration) {
	if d > 0 {
		b.plan.Steps = append(b.plan.Steps, Step{Op: OpPause, For: d, At: b.at})
	}
}

// noiseBytes returns n random bytes that never start a frame, so noise
// garbles the line between sentences and never swallows one ('$' in v1;
// the brackets in Bee-Tek) and leaves no line end or space a driver would
// skip as harmless: every byte of it must be rejected.
func (b *builder) noiseBytes(n int) []byte {
	out := make([]byte, 0, n)
	for len(out) < n {
		c := byte(b.noise.Uint32())
		switch c {
		case '\r', '\n':
			continue
		case '$':
			if b.o.Protocol == ProtocolV1 {
				continue
			}
		case ' ', '\t', '<', '>', '[', ']':
			if b.o.Protocol == ProtocolBeetek {
				continue
			}
		}
		out = append(out, c)
	}
	return out
}

// stack moves every copy of the first ten-valued card to the top of the
// shoe, keeping the rest in order (see NewPlan, FaultImpossible).
func stack(order []coup.Card) []coup.Card {
	var x coup.Card
	for _, c := range order {
		if c.Rank >= coup.Ten {
			x = c
			break
		}
	}
	out := make([]coup.Card, 0, len(order))
	for _, c := range order {
		if c == x {
			out = append(out, c)
		}
	}
	for _, c := range order {
		if c != x {
			out = append(out, c)
		}
	}
	return out
}
