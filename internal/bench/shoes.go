package bench

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"

	"github.com/tablectl/tablectl/coup"
)

// The shoes the shuffle check is measured with, made here and not by the
// simulator or the check: a fair shuffle is Fisher-Yates on ChaCha8
// (math/rand/v2's Shuffle), a riffle is Gilbert-Shannon-Reeds, and the
// new-deck orders, strips and washes are written from their descriptions.
// Every shoe is a pure function of its seed.

// chacha is a ChaCha8 generator seeded by the words given.
func chacha(words ...uint64) *rand.Rand {
	var seed [32]byte
	for i, w := range words[:min(len(words), 4)] {
		binary.LittleEndian.PutUint64(seed[8*i:], w)
	}
	return rand.New(rand.NewChaCha8(seed))
}

// fullDecks is decks decks, each in coup.CardAt order (the order before
// a shuffle does not matter to a fair one).
func fullDecks(decks int) []coup.Card {
	cards := make([]coup.Card, 0, decks*coup.CardCount)
	for range decks {
		for i := range coup.CardCount {
			cards = append(cards, coup.CardAt(i))
		}
	}
	return cards
}

// shuffled is a fair shuffle of decks decks: Fisher-Yates.
func shuffled(r *rand.Rand, decks int) []coup.Card {
	cards := fullDecks(decks)
	r.Shuffle(len(cards), func(i, j int) { cards[i], cards[j] = cards[j], cards[i] })
	return cards
}

// Deck orders of new decks. Every maker sorts each suit by rank; they
// differ in the suits' order and direction.
const (
	orderUS         = iota // the US makers': A-K spades, A-K diamonds, K-A clubs, K-A hearts
	orderAscending         // A-K in every suit: spades, hearts, diamonds, clubs
	orderDescending        // K-A in every suit
	deckOrders
)

var deckOrderNames = [deckOrders]string{"US (AS-KS, AD-KD, KC-AC, KH-AH)", "A-K in every suit", "K-A in every suit"}

// newDeck is one deck in a maker's order.
func newDeck(order int) []coup.Card {
	type run struct {
		suit coup.Suit
		up   bool
	}
	var runs []run
	switch order {
	case orderUS:
		runs = []run{{coup.Spades, true}, {coup.Diamonds, true}, {coup.Clubs, false}, {coup.Hearts, false}}
	case orderAscending:
		runs = []run{{coup.Spades, true}, {coup.Hearts, true}, {coup.Diamonds, true}, {coup.Clubs, true}}
	default:
		runs = []run{{coup.Spades, false}, {coup.Hearts, false}, {coup.Diamonds, false}, {coup.Clubs, false}}
	}
	d := make([]coup.Card, 0, coup.CardCount)
	for _, s := range runs {
		for k := range 13 {
			rank := coup.Rank(k + 1)
			if !s.up {
				rank = coup.Rank(13 - k)
			}
			d = append(d, coup.Card{Rank: rank, Suit: s.suit})
		}
	}
	return d
}

// newDecks is decks new decks one after another.
func newDecks(order, decks int) []coup.Card {
	var cards []coup.Card
	for range decks {
		cards = append(cards, newDeck(order)...)
	}
	return cards
}

// cut moves the first at cards to the bottom.
func cut(cards []coup.Card, at int) []coup.Card {
	at %= len(cards)
	return append(slices.Clone(cards[at:]), cards[:at]...)
}

func reversed(cards []coup.Card) []coup.Card {
	out := slices.Clone(cards)
	slices.Reverse(out)
	return out
}

// riffle is one Gilbert-Shannon-Reeds riffle: a binomial cut, then each
// card falls from a packet with probability its share of the cards left.
func riffle(r *rand.Rand, cards []coup.Card) []coup.Card {
	k := 0
	for range cards {
		k += int(r.Uint64() & 1)
	}
	return riffleTwo(r, cards[:k], cards[k:])
}

// riffleTwo interleaves two packets as a riffle does.
func riffleTwo(r *rand.Rand, a, b []coup.Card) []coup.Card {
	out := make([]coup.Card, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if r.IntN(len(a)+len(b)) < len(a) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// strip is a strip shuffle: packets of 5 to 15 cards taken off the top
// onto a new pile, so the packets come out in reverse order, each in its
// own.
func strip(r *rand.Rand, cards []coup.Card) []coup.Card {
	var packets [][]coup.Card
	for rest := cards; len(rest) > 0; {
		n := min(len(rest), 5+r.IntN(11))
		packets = append(packets, rest[:n])
		rest = rest[n:]
	}
	out := make([]coup.Card, 0, len(cards))
	for i := len(packets) - 1; i >= 0; i-- {
		out = append(out, packets[i]...)
	}
	return out
}

// wash spreads the cards and gathers them again: each card moves from its
// place by a normal amount of sd places.
func wash(r *rand.Rand, cards []coup.Card, sd float64) []coup.Card {
	type placed struct {
		at float64
		c  coup.Card
	}
	ps := make([]placed, len(cards))
	for i, c := range cards {
		ps[i] = placed{float64(i) + sd*r.NormFloat64(), c}
	}
	slices.SortStableFunc(ps, func(a, b placed) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	out := make([]coup.Card, len(cards))
	for i, p := range ps {
		out[i] = p.c
	}
	return out
}

// cutCard is how many cards a shoe holds behind its cut card: 14 to 52.
func cutCard(r *rand.Rand) int { return 14 + r.IntN(39) }
