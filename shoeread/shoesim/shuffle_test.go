package shoesim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// The order of a seed's shoe is pinned by a golden file: a change to
// Shuffle, or to math/rand/v2's PCG, would silently reshuffle every
// recorded demo and test.
func TestShuffleGolden(t *testing.T) {
	var b strings.Builder
	for _, decks := range []int{6, 8} {
		for _, seed := range []uint64{0, 1, 42, 1 << 63} {
			cards, err := Shuffle(decks, seed)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "decks=%d seed=%d\n%s\n", decks, seed, coup.FormatCards(cards))
		}
	}
	golden(t, "shuffle.golden", []byte(b.String()))
}

// A shuffled shoe holds exactly its decks' cards.
func TestShuffleIsAPermutation(t *testing.T) {
	for _, decks := range []int{6, 8} {
		for seed := uint64(0); seed < 50; seed++ {
			cards, err := Shuffle(decks, seed)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := coup.NewShoe(decks)
			if err := s.RemoveAll(cards); err != nil || s.Remaining() != 0 {
				t.Fatalf("decks %d seed %d: %v, %d left", decks, seed, err, s.Remaining())
			}
		}
	}
	a, _ := Shuffle(6, 7)
	b, _ := Shuffle(6, 7)
	c, _ := Shuffle(6, 8)
	if !reflect.DeepEqual(a, b) || reflect.DeepEqual(a, c) {
		t.Fatal("Shuffle is not a function of its seed")
	}
	if _, err := Shuffle(4, 1); !errors.Is(err, coup.ErrDecks) {
		t.Fatalf("Shuffle(4 decks): %v, want ErrDecks", err)
	}
}

// Every position is reachable by every card: over many seeds, the first
// card of a 6-deck shoe is each of the 52 cards about equally often.
func TestShuffleSpreads(t *testing.T) {
	const n = 52 * 200
	var counts [coup.CardCount]int
	for seed := range uint64(n) {
		cards, _ := Shuffle(6, seed)
		counts[cards[0].Index()]++
	}
	for i, c := range counts {
		// Mean 200, sd about 14: 120 and 280 are over 5 sd away.
		if c < 120 || c > 280 {
			t.Errorf("%s first in %d of %d shoes, want about 200", coup.CardAt(i), c, n)
		}
	}
}

func TestUniformInRange(t *testing.T) {
	r := rand.NewPCG(1, 2)
	for _, n := range []uint64{1, 2, 3, 7, 416, 1<<63 + 1} {
		for range 1000 {
			if x := uniform(r, n); x >= n {
				t.Fatalf("uniform(%d) = %d", n, x)
			}
		}
	}
}
