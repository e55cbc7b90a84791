package shoesim

import (
	"fmt"
	"math/rand/v2"

	"github.com/tablectl/tablectl/coup"
)

// ShuffleMode says how a simulated shoe is prepared: shuffled (the
// default), or one of the ways a shoe reaches a table unshuffled, to test
// the controller's shuffle check.
type ShuffleMode string

// The shuffle modes.
const (
	// ShuffleRandom is Shuffle: a uniform random order.
	ShuffleRandom ShuffleMode = ""
	// ShuffleNone is new decks one after another, each in the US makers'
	// new-deck order (AS-KS, AD-KD, KC-AC, KH-AH), cut at a point the seed
	// picks.
	ShuffleNone ShuffleMode = "none"
	// ShuffleRiffle is one riffle (Gilbert-Shannon-Reeds) of ShuffleNone's
	// decks, uncut.
	ShuffleRiffle ShuffleMode = "riffle"
	// ShuffleRepeat deals every shoe after the first in the order of the
	// shoe before it: the same shoe put back in without a shuffle.
	ShuffleRepeat ShuffleMode = "repeat"
	// ShuffleRecut deals every shoe after the first in the order of the
	// shoe before it, cut at a place the seed picks: the same shoe put
	// back in and cut, as a dealer would, without a shuffle.
	ShuffleRecut ShuffleMode = "recut"
)

// NewDeckOrder is one deck in the US makers' new-deck order.
func NewDeckOrder() []coup.Card {
	var d []coup.Card
	for _, s := range []struct {
		suit coup.Suit
		up   bool
	}{{coup.Spades, true}, {coup.Diamonds, true}, {coup.Clubs, false}, {coup.Hearts, false}} {
		for r := range 13 {
			rank := coup.Rank(r + 1)
			if !s.up {
				rank = coup.Rank(13 - r)
			}
			d = append(d, coup.Card{Rank: rank, Suit: s.suit})
		}
	}
	return d
}

// sortedShoe is decks new decks one after the other.
func sortedShoe(decks int) []coup.Card {
	var cards []coup.Card
	for range decks {
		cards = append(cards, NewDeckOrder()...)
	}
	return cards
}

// Riffle is one Gilbert-Shannon-Reeds riffle of cards with r: a binomial
// cut, then each card drops from a packet with probability proportional
// to the packet's size.
func Riffle(cards []coup.Card, r *rand.Rand) []coup.Card {
	k := 0
	for range cards {
		if r.IntN(2) == 0 {
			k++
		}
	}
	a, b := cards[:k], cards[k:]
	out := make([]coup.Card, 0, len(cards))
	for len(a) > 0 || len(b) > 0 {
		if r.IntN(len(a)+len(b)) < len(a) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// prepared is the n-th shoe (from 1) as mode prepares it; prev is the
// shoe before, for ShuffleRepeat.
func prepared(mode ShuffleMode, decks int, seed uint64, n int, prev []coup.Card) ([]coup.Card, error) {
	r := rand.New(rand.NewPCG(seed+uint64(n-1), shuffleStream))
	switch mode {
	case ShuffleRandom:
		return Shuffle(decks, seed+uint64(n-1))
	case ShuffleNone:
		cards := sortedShoe(decks)
		cut := r.IntN(len(cards))
		return append(cards[cut:], cards[:cut]...), nil
	case ShuffleRiffle:
		return Riffle(sortedShoe(decks), r), nil
	case ShuffleRepeat, ShuffleRecut:
		if prev == nil {
			return Shuffle(decks, seed+uint64(n-1))
		}
		at := 0
		if mode == ShuffleRecut {
			at = r.IntN(len(prev))
		}
		return append(append([]coup.Card(nil), prev[at:]...), prev[:at]...), nil
	}
	return nil, fmt.Errorf("%w: shuffle %q: want none, riffle, repeat or recut", ErrOptions, clip(string(mode)))
}
