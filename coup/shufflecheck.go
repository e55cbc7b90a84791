package coup

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// The shuffle check of RulesShoePrint watches every card of every shoe
// (burn cards included: they leave the shoe in its order too) for two
// signs of a shoe that was not shuffled, or not enough
// (docs/game-protection.md gives the reasoning and the measured figures):
//
//   - repeated: a run of RepeatRunLen cards in a row that one of the
//     table's last ShoeMemory shoes dealt in the same order, or in the
//     reverse order, at any place (a PrintIndex and a RunWatch): a shoe
//     re-used at any cut, its discards put back in order or in reverse,
//     its undealt cards on top or below. Bound: RepeatFalseAlarm, under
//     2e-7 a shoe.
//   - ordered: cards that continue the order of new decks (every maker
//     sorts each suit by rank, up or down), in one of eight statistics
//     (orderModels): continuing the card before (new-deck order), or the
//     last card of one of 2, 4, 8 or 16 interleaved piles (1 to 4
//     riffles), or sharing the suit of the last 8 or 24 cards (washes,
//     strips) or the rank of the last 6 (decks sorted by rank). Each is a
//     CUSUM of the log-likelihood ratio of "with probability 1/2 the card
//     continues the order" against a fair shuffle, where the fair chance
//     of each card is exact: what is left of it in the shoe over the
//     cards left. Under a fair shuffle the ratio's product from any card
//     on is a martingale of mean 1, so it reaches 2^h from a given card
//     with probability at most 2^-h (Ville), and an alarm anywhere in the
//     shoe, for any of the eight, at most 8 × MaxPrint × 2^-h: h is set
//     so that this is 2e-7. The logarithms are integers rounded down
//     (fixedlog.go): the bound holds, and replay is the same on every
//     machine.
//
// In all under 4e-7 a shoe: one false alarm in more than 2.5 million
// shoes, whatever the shoes before were. Each sign raises its alarm at
// most once a shoe.

const (
	// ShoeMemory is how many of the table's earlier shoes each shoe is
	// compared with.
	ShoeMemory = 24
	// RepeatRunLen is the run of cards repeating an earlier shoe that
	// raises the alarm: the shortest whose RepeatFalseAlarm against
	// ShoeMemory full 8-deck shoes is under repeatAlpha
	// (TestFalseAlarmBudgets).
	RepeatRunLen = 8
	repeatAlpha  = 2e-7
	// orderAlphaInverse is one over the ordered sign's false-alarm budget
	// a shoe.
	orderAlphaInverse = 5_000_000
)

// orderModel is one of the ordered sign's statistics. With piles, a card
// continues (one rank up or down, same suit) the last card of one of that
// many piles, the piles' last cards kept in the order they were last
// continued. With suits (or ranks), its suit (rank) is drawn as often as
// among the last that many cards dealt, the card itself as a fair shuffle
// would within that suit (rank).
type orderModel struct{ piles, suits, ranks int }

var orderModels = [...]orderModel{{piles: 1}, {piles: 2}, {piles: 4}, {piles: 8}, {piles: 16}, {suits: 8}, {suits: 24}, {ranks: 6}}

const (
	orderModelCount = len(orderModels)
	maxPiles        = 16
)

// orderThreshold is h, in units of 1/65536 bit: the score at which
// orderModelCount × MaxPrint × 2^-h is the ordered sign's budget.
var orderThreshold = log2Ceil(uint64(orderModelCount) * MaxPrint * orderAlphaInverse)

// missLLR is a card that continues nothing: the ratio is 1/2.
var missLLR = log2Ratio(1, 2)

// The signs, as raised bits.
const (
	raisedOrder  = 1
	raisedRepeat = 2
)

// shoeWatch is the table's memory for the check. It is a value with fixed
// arrays (copied with the Table) and shares mem, which is never changed
// once made.
type shoeWatch struct {
	decks uint8  // the shoe's decks; 0 before the first shoe under these rules
	n     uint16 // cards of this shoe printed
	print [MaxPrint]uint8
	// counts and left are what the shoe still holds, as the cards seen
	// say: a fair shuffle's chance of each card.
	counts [CardCount]uint8
	left   uint16
	// heads are each pile model's piles' last cards, the pile continued
	// last first; PrintUnread where there is none yet.
	heads [orderModelCount][maxPiles]uint8
	// dirs count, per model and suit, the cards that continued a pile
	// up and down in rank: the direction each suit runs in.
	dirs  [orderModelCount][4][2]uint8
	score [orderModelCount]int32
	start [orderModelCount]uint16 // the card where each score last left 0
	runs  RunWatch
	// raised holds the signs already raised this shoe.
	raised uint8
	mem    *shoeMemory
}

// shoeMemory is the table's last ShoeMemory shoes' prints, oldest first,
// their numbers in the index, and the index.
type shoeMemory struct {
	prints [][]uint8
	ids    []int
	index  *PrintIndex
}

// remember returns the memory with ps added (the oldest dropped past
// ShoeMemory). With reuse, m itself is changed: only for a memory nothing
// else shares. Without, the new memory's index numbers its prints oldest
// first from 0 (a snapshot's runs name prints by that number).
func (m *shoeMemory) remember(ps [][]uint8, reuse bool) *shoeMemory {
	if m == nil || m.index == nil {
		m = &shoeMemory{}
		reuse = false
	}
	if !reuse {
		prints := slices.Clone(m.prints)
		for _, p := range ps {
			prints = append(prints, slices.Clone(p))
		}
		n := &shoeMemory{prints: prints[max(0, len(prints)-ShoeMemory):], index: NewPrintIndex()}
		for _, p := range n.prints {
			n.ids = append(n.ids, n.index.Add(p))
		}
		return n
	}
	for _, p := range ps {
		var buf []uint8
		if len(m.prints) >= ShoeMemory {
			buf = m.prints[0][:0]
			m.index.Remove(m.ids[0])
			m.prints, m.ids = m.prints[1:], m.ids[1:]
		}
		buf = append(buf, p...)
		m.prints = append(m.prints, buf)
		m.ids = append(m.ids, m.index.Add(buf))
	}
	return m
}

// newShoe files the shoe that ended and starts watching a new one.
func (w *shoeWatch) newShoe(decks int, reuse bool) {
	mem := w.mem
	if w.n > 0 {
		mem = mem.remember([][]uint8{w.print[:w.n]}, reuse)
	}
	*w = shoeWatch{decks: uint8(decks), left: uint16(decks * CardCount), mem: mem}
	for i := range w.counts {
		w.counts[i] = uint8(decks)
	}
	for k := range w.heads {
		for i := range w.heads[k] {
			w.heads[k][i] = PrintUnread
		}
	}
}

// card takes the next card out of the shoe (ok false: unread) and returns
// what looks unshuffled, once a sign a shoe, or "".
func (w *shoeWatch) card(c Card, ok bool) string {
	if w.decks == 0 || int(w.n) >= MaxPrint {
		return ""
	}
	x := uint8(PrintUnread)
	if ok && c.Valid() {
		x = PrintCard(c)
	}
	w.print[w.n] = x
	w.n++
	var why []string
	// A card the shoe holds no more of (a misread, a counterfeit) has no
	// fair chance to judge it by.
	if x != PrintUnread && w.counts[x] > 0 {
		if s := w.order(x); s != "" {
			why = append(why, s)
		}
		w.counts[x]--
		w.left--
	}
	if w.mem != nil {
		if r := w.runs.Card(w.mem.index, w.print[:w.n], -1); r.Len >= RepeatRunLen && w.raised&raisedRepeat == 0 {
			w.raised |= raisedRepeat
			why = append(why, w.repeatWhy(r))
		}
	}
	if len(why) == 0 {
		return ""
	}
	if len(why) == 2 {
		return why[0] + "; and " + why[1]
	}
	return why[0]
}

// The cards one rank below and above x, of its suit (PrintUnread at the
// ends): a pile whose head is below continues up with x.
func rankBelow(x uint8) uint8 {
	if x < 4 {
		return PrintUnread
	}
	return x - 4
}

func rankAbove(x uint8) uint8 {
	if x >= CardCount-4 {
		return PrintUnread
	}
	return x + 4
}

// order scores card x in every model and moves its piles; it returns why
// the shoe looks ordered the first time a score reaches the threshold.
func (w *shoeWatch) order(x uint8) string {
	rem, left := uint64(w.counts[x]), uint64(w.left)
	below, above, suit := rankBelow(x), rankAbove(x), x&3
	var why string
	for k, m := range orderModels {
		// Where x continues something: up from the card below it, down
		// from the card above it.
		d := &w.dirs[k][suit]
		a, b := uint64(d[0]), uint64(d[1])
		var nUp, nDown uint64
		llr := missLLR
		if m.piles > 0 {
			h := &w.heads[k]
			lo, hi := binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:])
			if below != PrintUnread {
				nUp = uint64(bits.OnesCount64(bytesEqual(lo, below)) + bits.OnesCount64(bytesEqual(hi, below)))
			}
			if above != PrintUnread {
				nDown = uint64(bits.OnesCount64(bytesEqual(lo, above)) + bits.OnesCount64(bytesEqual(hi, above)))
			}
			if nUp+nDown > 0 {
				// 1/2 + 1/2 × Q(x)/P(x): Q puts 1/piles on what each pile
				// continues into, split up and down by the suit's
				// direction so far ((1+a)/(2+a+b) up); P is the fair
				// chance, rem/left.
				sz := uint64(m.piles)
				llr = w.llr(k, (2+a+b)*sz*rem+((1+a)*nUp+(1+b)*nDown)*left, 2*(2+a+b)*sz*rem)
			}
		} else {
			// Q(x) is the share of x's suit (rank) among the last cards,
			// times x's share of what is left of that suit (rank): Q/P is
			// the share over what is left of the suit (rank) in the shoe.
			last := int(w.n) - 1 // x is print[last]
			var size, seen, kin uint64
			if m.suits > 0 {
				size = uint64(m.suits)
				seen = countSuit(w.print[max(0, last-m.suits):last], suit)
				for r := suit; r < CardCount; r += 4 {
					kin += uint64(w.counts[r])
				}
			} else {
				size = uint64(m.ranks)
				rank := x &^ 3
				seen = countRank(w.print[max(0, last-m.ranks):last], x>>2)
				for c := rank; c < rank+4; c++ {
					kin += uint64(w.counts[c])
				}
			}
			if seen > 0 {
				llr = w.llr(k, size*kin+seen*left, 2*size*kin)
			}
		}
		score := int64(w.score[k])
		if score == 0 && llr > 0 {
			w.start[k] = w.n
		}
		score = min(max(0, score+llr), 1<<30)
		w.score[k] = int32(score)
		if score >= orderThreshold && w.raised&raisedOrder == 0 {
			w.raised |= raisedOrder
			why = w.orderWhy(k)
		}
		if m.piles > 0 {
			up := nUp > 0 && (nDown == 0 || (1+a)*nUp >= (1+b)*nDown)
			switch {
			case up:
				d[0] = min(d[0], 254) + 1
			case nDown > 0:
				d[1] = min(d[1], 254) + 1
			}
			// The pile x continues (the one continued last, of those)
			// takes x as its head and goes first; a card that continues
			// none starts a pile in place of the one left longest.
			h := &w.heads[k]
			at := m.piles - 1
			switch {
			case up:
				at = firstByte(h[:m.piles], below)
			case nDown > 0:
				at = firstByte(h[:m.piles], above)
			}
			toFront(h, at, x)
		}
	}
	return why
}

// llr is log2(num/den) for model k's score, or 0 when that score is 0 and
// stays so (the logarithm is most of the check's cost).
func (w *shoeWatch) llr(k int, num, den uint64) int64 {
	if w.score[k] == 0 && num <= den {
		return 0
	}
	return log2Ratio(num, den)
}

// bytesEqual has the high bit set of each byte of v that is b.
func bytesEqual(v uint64, b uint8) uint64 {
	v ^= 0x0101010101010101 * uint64(b)
	return ^((v&0x7F7F7F7F7F7F7F7F + 0x7F7F7F7F7F7F7F7F) | v | 0x7F7F7F7F7F7F7F7F)
}

// countSuit is how many cards of p are of suit s (PrintUnread is none).
func countSuit(p []uint8, s uint8) uint64 {
	n := 0
	for len(p) >= 8 {
		v := binary.LittleEndian.Uint64(p)
		n += bits.OnesCount64(bytesEqual(v&0x0303030303030303, s) &^ bytesEqual(v, PrintUnread))
		p = p[8:]
	}
	for _, c := range p {
		if c != PrintUnread && c&3 == s {
			n++
		}
	}
	return uint64(n)
}

// countRank is how many cards of p are of rank index r (Card.Index/4;
// PrintUnread's is 63, none).
func countRank(p []uint8, r uint8) uint64 {
	n := 0
	for len(p) >= 8 {
		n += bits.OnesCount64(bytesEqual(binary.LittleEndian.Uint64(p)>>2&0x3F3F3F3F3F3F3F3F, r))
		p = p[8:]
	}
	for _, c := range p {
		if c>>2 == r {
			n++
		}
	}
	return uint64(n)
}

// toFront takes the byte at place at out of h and puts x first, the bytes
// before at moving back one place.
func toFront(h *[maxPiles]uint8, at int, x uint8) {
	lo, hi := binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:])
	if at < 8 {
		upto := uint64(1)<<(8*(at+1)) - 1 // bytes 0..at (all of them when at is 7)
		lo = lo&^upto | (lo<<8)&upto | uint64(x)
	} else {
		upto := uint64(1)<<(8*(at-7)) - 1
		hi = hi&^upto | (hi<<8|lo>>56)&upto
		lo = lo<<8 | uint64(x)
	}
	binary.LittleEndian.PutUint64(h[:8], lo)
	binary.LittleEndian.PutUint64(h[8:], hi)
}

// firstByte is the first place of b in p (one is there).
func firstByte(p []uint8, b uint8) int {
	for i, c := range p {
		if c == b {
			return i
		}
	}
	return len(p) - 1
}

func (w *shoeWatch) orderWhy(k int) string {
	like := "one after another in suit and rank, as in a new deck"
	if m := orderModels[k]; m.suits > 0 {
		like = fmt.Sprintf("in suits far more often the suit of the %d cards before them than in a shuffled shoe, as in new decks washed or stripped too little", m.suits)
	} else if m.ranks > 0 {
		like = fmt.Sprintf("in ranks far more often the rank of the %d cards before them than in a shuffled shoe, as in decks sorted by rank", m.ranks)
	} else if p := orderModels[k].piles; p > 1 {
		riffles := 0
		for ; p > 1; p /= 2 {
			riffles++
		}
		times := "once"
		if riffles > 1 {
			times = fmt.Sprintf("%d times", riffles)
		}
		like = fmt.Sprintf("in suit and rank along %d interleaved piles, as in new decks riffled %s", orderModels[k].piles, times)
	}
	return fmt.Sprintf("cards %d to %d come %s (a shuffled shoe does so less than once in 5 million shoes)", w.start[k], w.n, like)
}

func (w *shoeWatch) repeatWhy(r Run) string {
	before := len(w.mem.ids) - slices.Index(w.mem.ids, r.Print)
	span := int(w.n) - r.From // the run's cards, unread ones too
	first, last := r.At+1, r.At+span
	how := "in the same order"
	if r.Backwards {
		last = r.At - span + 2
		how = "in reverse order (its discards put back as they lay)"
	}
	shoe := "the shoe before this one"
	if before > 1 {
		shoe = fmt.Sprintf("the shoe %d before this one", before)
	}
	return fmt.Sprintf("cards %d to %d repeat %d cards in a row of %s, its cards %d to %d %s (a shuffled shoe does so less than once in 5 million shoes)",
		r.From+1, w.n, r.Len, shoe, first, last, how)
}

// ShuffleCheck is the table's shuffle check (the current rules) on its
// own, for measuring it and for tools: NewShoe before each shoe, then
// Card for each card out of the shoe in order. Unlike the table's, its
// memory is its own, and reused from shoe to shoe.
type ShuffleCheck struct {
	w       shoeWatch
	pending [][]uint8
}

// NewShoe files the shoe dealt (and any remembered since) and starts a
// new one of decks decks (6 or 8).
func (c *ShuffleCheck) NewShoe(decks int) error {
	if !ValidDecks(decks) {
		return fmt.Errorf("shuffle check: %w: %d", ErrDecks, decks)
	}
	if c.w.n > 0 {
		c.pending = append(c.pending, c.w.print[:c.w.n])
		c.w.n = 0
	}
	if len(c.pending) > 0 {
		c.w.mem = c.w.mem.remember(c.pending, true)
	}
	c.pending = c.pending[:0]
	c.w.newShoe(decks, true)
	return nil
}

// Remember files a shoe dealt elsewhere, in the order its cards came out,
// without judging it: it is compared with the shoes after the next
// NewShoe.
func (c *ShuffleCheck) Remember(cards []Card) {
	p := make([]uint8, min(len(cards), MaxPrint))
	for i := range p {
		p[i] = PrintCard(cards[i])
	}
	c.pending = append(c.pending, p)
}

// Card takes the next card out of the shoe; it returns why the shoe looks
// unshuffled the first time a sign says so, else "".
func (c *ShuffleCheck) Card(card Card) string { return c.w.card(card, true) }

// Unread takes a card the shoe could not read.
func (c *ShuffleCheck) Unread() string { return c.w.card(Card{}, false) }

// Seen is how many cards of this shoe the check has taken.
func (c *ShuffleCheck) Seen() int { return int(c.w.n) }
