package coup

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// A shoe's print is the order its cards came out of it, burn cards
// included: one byte a card, its Card.Index (0-51), and PrintUnread for a
// card the shoe could not read (it matches nothing, and keeps the cards
// after it at their places). The table keeps the prints of its last shoes
// and the floor's witness those of every table's shoes of the last days;
// both look for the shoe being dealt in them with a PrintIndex and a
// RunWatch: a run of consecutive cards that appears, forwards or
// backwards, in an earlier print. A cut moves where a shoe starts, and
// discards picked up in order or in reverse keep their order or reverse
// it: none of them breaks such a run.

// PrintUnread stands in a print for a card the shoe could not read.
const PrintUnread = 0xFF

// MaxPrint is the most cards a print holds: an 8-deck shoe.
const MaxPrint = 8 * CardCount

// ErrPrint: the text is not a shoe's print.
var ErrPrint = errors.New("invalid shoe print")

// PrintCard is c's byte in a print.
func PrintCard(c Card) uint8 {
	if !c.Valid() {
		return PrintUnread
	}
	return uint8(c.Index())
}

// FormatPrint writes a print as card notation, two letters a card ("??"
// where unread), with nothing between: "AS9HTD??KC".
func FormatPrint(p []uint8) string {
	var b strings.Builder
	b.Grow(2 * len(p))
	for _, x := range p {
		if x >= CardCount {
			b.WriteString("??")
			continue
		}
		b.WriteString(CardAt(int(x)).String())
	}
	return b.String()
}

// ParsePrint reads what FormatPrint wrote.
func ParsePrint(s string) ([]uint8, error) {
	if len(s)%2 != 0 || len(s) > 2*MaxPrint {
		return nil, fmt.Errorf("%w: %d characters (want two a card, at most %d cards)", ErrPrint, len(s), MaxPrint)
	}
	p := make([]uint8, len(s)/2)
	for i := range p {
		t := s[2*i : 2*i+2]
		if t == "??" {
			p[i] = PrintUnread
			continue
		}
		c, err := ParseCard(t)
		if err != nil || c.String() != t {
			return nil, fmt.Errorf("%w: card %d %q", ErrPrint, i+1, clip(t))
		}
		p[i] = uint8(c.Index())
	}
	return p, nil
}

// The index keys each print by its runs of printGram cards, at every
// printStride-th place only: any run of MinRepeatRun cards or more holds
// one such key, so no run worth an alarm is missed, and the index is a
// quarter of the size (it is rebuilt at every shoe's start).
const (
	printGram   = 3
	printStride = 4
	// MinRepeatRun is the shortest run a PrintIndex is sure to find.
	MinRepeatRun = printGram + printStride - 1
)

// PrintIndex holds prints and finds the runs of printGram cards in them.
// The table's is built once a shoe and then only read; the floor's grows
// as cards come.
type PrintIndex struct {
	prints [][]uint8
	free   []int // numbers of prints removed, for Add to use again
	// slots is an open-addressing hash table of entries: 1<<63, the key
	// (18 bits), the print (36 bits) and the place in it (9 bits).
	slots   []uint64
	shift   uint // 64 - log2(len(slots))
	entries int
	cards   int
}

// NewPrintIndex returns an empty index.
func NewPrintIndex() *PrintIndex { return &PrintIndex{slots: make([]uint64, 64), shift: 64 - 6} }

// Len is how many prints the index holds; Cards how many cards they hold
// in all (the places a run may match, for the false-alarm bound).
func (x *PrintIndex) Len() int   { return len(x.prints) - len(x.free) }
func (x *PrintIndex) Cards() int { return x.cards }

// Print is print number i (from 0, in the order added). The caller must
// not change it.
func (x *PrintIndex) Print(i int) []uint8 { return x.prints[i] }

// Add adds a print and returns its number. The index keeps p: the caller
// must not change it, though it may append to it with Extend.
func (x *PrintIndex) Add(p []uint8) int {
	var id int
	if n := len(x.free); n > 0 {
		id, x.free = x.free[n-1], x.free[:n-1]
	} else {
		x.prints = append(x.prints, nil)
		id = len(x.prints) - 1
	}
	x.prints[id] = p[:0]
	x.Extend(id, p)
	return id
}

// Remove takes print id out of the index; Add may give its number to
// another print.
func (x *PrintIndex) Remove(id int) {
	p := x.prints[id]
	for j := 0; j+printGram <= len(p); j += printStride {
		if k, ok := gramKey(p[j], p[j+1], p[j+2]); ok {
			x.delete(1<<63 | uint64(k)<<45 | uint64(id)<<9 | uint64(j))
		}
	}
	x.cards -= len(p)
	x.prints[id] = nil
	x.free = append(x.free, id)
}

// Extend appends cards to print id (a shoe still being dealt), at most
// MaxPrint in all.
func (x *PrintIndex) Extend(id int, cards []uint8) {
	p := x.prints[id]
	from := len(p)
	room := MaxPrint - len(p)
	if len(cards) > room {
		cards = cards[:room]
	}
	p = append(p, cards...)
	x.prints[id] = p
	x.cards += len(cards)
	// The keys now complete: places j, j%printStride == 0, whose gram ends
	// at or after from.
	j := max(0, from-printGram+1)
	j = (j + printStride - 1) / printStride * printStride
	for ; j+printGram <= len(p); j += printStride {
		if k, ok := gramKey(p[j], p[j+1], p[j+2]); ok {
			x.insert(1<<63 | uint64(k)<<45 | uint64(id)<<9 | uint64(j))
		}
	}
}

func gramKey(a, b, c uint8) (uint32, bool) {
	if a >= CardCount || b >= CardCount || c >= CardCount {
		return 0, false
	}
	return uint32(a)<<12 | uint32(b)<<6 | uint32(c), true
}

func (x *PrintIndex) home(k uint32) int {
	return int((uint64(k) * 0x9E3779B97F4A7C15) >> x.shift)
}

func (x *PrintIndex) insert(e uint64) {
	if 2*(x.entries+1) > len(x.slots) {
		old := x.slots
		x.slots = make([]uint64, 2*len(old))
		x.shift--
		x.entries = 0
		for _, o := range old {
			if o != 0 {
				x.insert(o)
			}
		}
	}
	mask := len(x.slots) - 1
	i := x.home(uint32(e>>45) & 0x3FFFF)
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = e
	x.entries++
}

// delete removes entry e, moving the entries after it in its probe run
// back so that no run is broken (linear probing's deletion).
func (x *PrintIndex) delete(e uint64) {
	mask := len(x.slots) - 1
	i := x.home(uint32(e>>45) & 0x3FFFF)
	for x.slots[i] != e {
		if x.slots[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	x.entries--
	for j := (i + 1) & mask; x.slots[j] != 0; j = (j + 1) & mask {
		h := x.home(uint32(x.slots[j]>>45) & 0x3FFFF)
		// The entry at j may move to i unless its home lies cyclically
		// in (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = 0
}

// A Run is a stretch of the shoe being dealt that repeats an earlier print.
type Run struct {
	// Print is the earlier print's number in the index.
	Print int
	// Len is how many cards in a row match; From is the shoe's place
	// (from 0) of the run's first card, At the print's place of the card
	// it matched.
	Len, From, At int
	// Backwards: the shoe deals the print's cards in reverse (its
	// discards put back as they lay).
	Backwards bool
}

// maxRuns bounds the runs a RunWatch follows at once; a shuffled shoe
// follows none for more than a card or two.
const maxRuns = 8

// RunWatch follows the runs of one shoe being dealt through the prints of
// an index, card by card: each card extends the runs it continues and
// drops the others, and a run of printGram cards found in the index
// starts a new one. It is a value (the table copies it with itself).
type RunWatch struct {
	runs [maxRuns]activeRun
	n    int
}

// activeRun is one run being followed.
type activeRun struct {
	print int32
	next  int16 // the print's place of the card the run wants next
	len   int16
	from  int16 // the shoe's place of the run's first card
	at    int16 // the print's place of the run's first card
	back  bool
}

// Card takes the shoe's card at place len(shoe)-1 (shoe is every card of
// this shoe so far, PrintUnread where unread) and returns the longest run
// of an earlier print that ends at it. Print self (the shoe's own, in a
// floor's index; -1 for none) is not looked in.
func (w *RunWatch) Card(x *PrintIndex, shoe []uint8, self int) Run {
	i := len(shoe) - 1
	if i < 0 {
		return Run{}
	}
	c := shoe[i]
	k := 0
	for _, r := range w.runs[:w.n] {
		if r.print < 0 || int(r.print) >= len(x.prints) {
			continue
		}
		p := x.prints[r.print]
		if r.next < 0 || int(r.next) >= len(p) {
			continue // the print ends
		}
		switch {
		case c == PrintUnread: // the run goes on past it, a card no longer
		case p[r.next] == c:
			r.len++
		default:
			continue
		}
		if r.back {
			r.next--
		} else {
			r.next++
		}
		w.runs[k] = r
		k++
	}
	w.n = k
	if i >= printGram-1 {
		a, b := shoe[i-2], shoe[i-1]
		if key, ok := gramKey(a, b, c); ok {
			rev, _ := gramKey(c, b, a)
			w.find(x, shoe, self, key, false)
			w.find(x, shoe, self, rev, true)
		}
	}
	var best Run
	for _, r := range w.runs[:w.n] {
		if int(r.len) > best.Len {
			best = Run{Print: int(r.print), Len: int(r.len), From: int(r.from), At: int(r.at), Backwards: r.back}
		}
	}
	return best
}

// find starts the runs whose last printGram cards the index holds under
// key: forwards, the print's cards j, j+1, j+2 are the shoe's last three;
// backwards, j+2, j+1, j.
func (w *RunWatch) find(x *PrintIndex, shoe []uint8, self int, key uint32, back bool) {
	if len(x.slots) == 0 {
		return
	}
	i := len(shoe) - 1
	mask := len(x.slots) - 1
	for s := x.home(key); x.slots[s] != 0; s = (s + 1) & mask {
		e := x.slots[s]
		if uint32(e>>45)&0x3FFFF != key {
			continue
		}
		pr, j := int(e>>9)&(1<<36-1), int(e&511)
		if pr == self || pr >= len(x.prints) {
			continue
		}
		p := x.prints[pr]
		r := activeRun{print: int32(pr), back: back}
		// How far back the run reaches: the shoe's cards before these
		// three against the print's before (forwards) or after them,
		// unread cards passed over and not counted.
		span, matched := 0, 0
		for i-3-span >= 0 {
			q := j - 1 - span
			if back {
				q = j + 3 + span
			}
			c := shoe[i-3-span]
			if q < 0 || q >= len(p) || c != PrintUnread && c != p[q] {
				break
			}
			span++
			if c != PrintUnread {
				matched++
			}
		}
		for span > 0 && shoe[i-2-span] == PrintUnread {
			span-- // a run starts with a card
		}
		if back {
			r.next, r.at = int16(j-1), int16(j+2+span)
		} else {
			r.next, r.at = int16(j+3), int16(j-span)
		}
		r.len, r.from = int16(printGram+matched), int16(i-2-span)
		w.add(r)
	}
}

// add follows r, unless it follows that run already; when full, in place
// of the shortest.
func (w *RunWatch) add(r activeRun) {
	short := 0
	for k, o := range w.runs[:w.n] {
		if o.print == r.print && o.back == r.back && o.next == r.next {
			return
		}
		if o.len < w.runs[short].len {
			short = k
		}
	}
	if w.n < maxRuns {
		w.runs[w.n] = r
		w.n++
		return
	}
	if r.len > w.runs[short].len {
		w.runs[short] = r
	}
}

// The false-alarm bound of a repeat. A fairly shuffled shoe is as likely
// to hold any given sequence of L cards at any of its places, and the
// chance is at most (d/(52d-L+1))^L for a shoe of d decks (every card of
// the sequence at its most likely: all d copies still in). An alarm at a
// run of L cards matching any of W places of earlier prints, forwards or
// backwards, starting at any of the shoe's n-L+1 places, is then at most
//
//	(n-L+1) × 2W × (d/(52d-L+1))^L
//
// whatever the earlier shoes were. The bound takes the worse of 6 and 8
// decks and n = MaxPrint.

// RepeatFalseAlarm is that bound for a run of runLen cards against
// printed cards of earlier prints.
func RepeatFalseAlarm(runLen, printed int) float64 {
	l := float64(runLen)
	p := 0.0
	for _, d := range []float64{6, 8} {
		p = max(p, math.Pow(d/(52*d-l+1), l))
	}
	return float64(MaxPrint-runLen+1) * 2 * float64(printed) * p
}

// RepeatRun is the shortest run (at least MinRepeatRun) whose
// RepeatFalseAlarm against printed cards is at most alpha.
func RepeatRun(printed int, alpha float64) int {
	l := MinRepeatRun
	for RepeatFalseAlarm(l, printed) > alpha && l < MaxPrint {
		l++
	}
	return l
}
