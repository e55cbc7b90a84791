package coup

import (
	"errors"
	"fmt"
)

// ErrNotInShoe reports a card the shoe cannot hold: every copy of it has
// already been seen.
var ErrNotInShoe = errors.New("card not in shoe")

// ErrDecks reports an unsupported number of decks.
var ErrDecks = errors.New("unsupported number of decks")

// Shoe is the composition of what remains in a shoe: how many of each of the
// 52 distinct cards are left. The zero Shoe is empty.
type Shoe struct {
	decks  int
	counts [CardCount]uint16
	total  int
}

// ValidDecks reports whether n decks is a shoe the rules know: 6 (seeds 000,
// 001, 002, 004) or 8 (seed 003).
func ValidDecks(n int) bool { return n == 6 || n == 8 }

// NewShoe returns a full shoe of n decks (6 or 8).
func NewShoe(decks int) (Shoe, error) {
	if !ValidDecks(decks) {
		return Shoe{}, fmt.Errorf("%w: %d (want 6 or 8)", ErrDecks, decks)
	}
	s := Shoe{decks: decks, total: decks * CardCount}
	for i := range s.counts {
		s.counts[i] = uint16(decks)
	}
	return s, nil
}

// Decks is the number of decks the shoe was made of.
func (s Shoe) Decks() int { return s.decks }

// Remaining is the number of cards left.
func (s Shoe) Remaining() int { return s.total }

// Count is how many copies of c are left.
func (s Shoe) Count(c Card) int {
	if !c.Valid() {
		return 0
	}
	return int(s.counts[c.Index()])
}

// Counts is the remaining count of each card, indexed by Card.Index.
func (s Shoe) Counts() [CardCount]uint16 { return s.counts }

// Remove takes one c out of the shoe, or reports ErrNotInShoe when none is left.
func (s *Shoe) Remove(c Card) error {
	if !c.Valid() {
		return fmt.Errorf("%w: %v", ErrBadCard, c)
	}
	i := c.Index()
	if s.counts[i] == 0 {
		return fmt.Errorf("%w: %s (all %d copies already seen)", ErrNotInShoe, c, s.decks)
	}
	s.counts[i]--
	s.total--
	return nil
}

// RemoveAll removes every card in order; on error the shoe is unchanged.
func (s *Shoe) RemoveAll(cards []Card) error {
	t := *s
	for i, c := range cards {
		if err := t.Remove(c); err != nil {
			return fmt.Errorf("card %d: %w", i+1, err)
		}
	}
	*s = t
	return nil
}
