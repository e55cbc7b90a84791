package coup

import (
	"fmt"
	"slices"
)

// The shuffle check of RulesProtect (rules 1; RulesShoePrint's is
// shufflecheck.go), kept so that trails of those rules replay as they
// were recorded. It watches the first cards of every shoe (burn cards
// included: they leave the shoe in its order too) for a shoe that was never
// shuffled. Three statistics, each a count that only grows as cards come,
// so "alarm at any card up to ShuffleWindow" is the same event as "the
// count at ShuffleWindow reaches the threshold", and the false-alarm
// probability is one binomial tail (docs/game-protection.md):
//
//   - sorted: cards that are the same suit as the card before and one rank
//     away. Every maker's new-deck order sorts suits by rank, so an
//     unshuffled shoe scores at 11 of its first 12 cards but one. Under a
//     shuffle p = 24/676 per card; threshold 10 of 29: 3.4e-8.
//   - washed: cards that are the same suit and one rank away from one of
//     the previous four: a single riffle of sorted decks interleaves two
//     sorted runs. p = 4 × 24/676; threshold 16 of 29: 2.9e-7.
//   - repeated: cards equal to the card at the same place (within ±10) in
//     one of the last ShuffleMemory shoes of this table, read forwards
//     from its start or backwards from its end (the discards put back).
//     p = 1/52 per place; threshold 9 of 30, over 21 offsets, 2 directions
//     and 5 shoes: 7.5e-7.
//
// In all about 1.1e-6 per shoe: about one false alarm in 900,000 shoes.
const (
	// ShuffleWindow is how many of a shoe's first cards rules 1 judge.
	ShuffleWindow = 30
	// ShuffleMemory is how many earlier shoes rules 1 compare a new one with.
	ShuffleMemory = 5

	sortedThreshold   = 10
	washedThreshold   = 16
	washedLookBack    = 4
	repeatedThreshold = 9
	repeatedOffsets   = 10
	shoeEndKeep       = ShuffleWindow + repeatedOffsets
)

// shuffleWatch is the table's memory for the shuffle check. It is a value
// with fixed arrays (copied with the Table) and shares prev, whose
// elements are never changed once made.
type shuffleWatch struct {
	head   [ShuffleWindow]Card // this shoe's first cards
	nHead  int
	tail   [shoeEndKeep]Card // this shoe's last cards, a ring
	nTail  int               // cards seen in all
	sorted int               // the statistics so far
	washed int
	// repeats counts, per earlier shoe (newest first), direction and
	// offset, the cards equal to that shoe's card at the same place.
	repeats [ShuffleMemory][2][2*repeatedOffsets + 1]uint8
	raised  bool
	prev    []shoeEnds // the last ShuffleMemory shoes, oldest first
}

// shoeEnds is what the check keeps of an earlier shoe: its first cards,
// and its last cards in reverse (the order they would come out again if
// the discards were put back as they lie).
type shoeEnds struct {
	first, lastReversed []Card
}

// newShoe files the shoe that ended and starts watching a new one.
func (w *shuffleWatch) newShoe() {
	if w.nHead > 0 {
		e := shoeEnds{first: slices.Clone(w.head[:w.nHead])}
		n := min(w.nTail, shoeEndKeep)
		for i := range n {
			e.lastReversed = append(e.lastReversed, w.tail[(w.nTail-1-i)%shoeEndKeep])
		}
		keep := w.prev[max(0, len(w.prev)-ShuffleMemory+1):]
		w.prev = append(slices.Clone(keep), e)
	}
	prev := w.prev
	*w = shuffleWatch{prev: prev}
}

// suspect takes the next card out of the shoe and returns what looks
// unshuffled, once per shoe, or "".
func (w *shuffleWatch) suspect(c Card) string {
	w.tail[w.nTail%shoeEndKeep] = c
	w.nTail++
	if w.nHead >= ShuffleWindow {
		return ""
	}
	i := w.nHead
	w.head[i] = c
	w.nHead++
	if i > 0 && sortedPair(w.head[i-1], c) {
		w.sorted++
	}
	for j := max(0, i-washedLookBack); j < i; j++ {
		if sortedPair(w.head[j], c) {
			w.washed++
			break
		}
	}
	for k := range min(len(w.prev), ShuffleMemory) {
		e := w.prev[len(w.prev)-1-k]
		for dir, y := range [2][]Card{e.first, e.lastReversed} {
			for d := -repeatedOffsets; d <= repeatedOffsets; d++ {
				if j := i + d; j >= 0 && j < len(y) && y[j] == c {
					w.repeats[k][dir][d+repeatedOffsets]++
				}
			}
		}
	}
	if w.raised {
		return ""
	}
	n := i + 1
	var why string
	switch {
	case w.sorted >= sortedThreshold:
		why = fmt.Sprintf("%d of the first %d cards follow the card before in suit and rank, as in a new deck (%d would be 1 shoe in 30 million)", w.sorted, n, sortedThreshold)
	case w.washed >= washedThreshold:
		why = fmt.Sprintf("%d of the first %d cards continue a suit-and-rank run of the 4 cards before, as after one riffle of sorted decks (%d would be 1 shoe in 3 million)", w.washed, n, washedThreshold)
	default:
		why = w.repeated()
	}
	if why != "" {
		w.raised = true
	}
	return why
}

// repeated says which earlier shoe this one repeats, if any.
func (w *shuffleWatch) repeated() string {
	for k := range min(len(w.prev), ShuffleMemory) {
		for dir, name := range [2]string{"in the order it was dealt", "in the reverse of its last cards"} {
			for _, m := range w.repeats[k][dir] {
				if int(m) >= repeatedThreshold {
					return fmt.Sprintf("%d of the first %d cards repeat the shoe %d before this one, %s (%d would be 1 shoe in a million)",
						m, w.nHead, k+1, name, repeatedThreshold)
				}
			}
		}
	}
	return ""
}

// sortedPair reports b following a in a suit sorted by rank.
func sortedPair(a, b Card) bool {
	return a.Suit == b.Suit && (a.Rank == b.Rank+1 || b.Rank == a.Rank+1)
}
