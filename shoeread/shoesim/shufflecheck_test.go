package shoesim

import (
	"math/rand/v2"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// firstAlarm feeds a shoe's cards to the check and returns at which card
// (from 1) it raised, or 0.
func firstAlarm(c *coup.ShuffleCheck, shoe []coup.Card) int {
	c.NewShoe(8)
	for i, card := range shoe {
		if c.Card(card) != "" {
			return i + 1
		}
	}
	return 0
}

// TestShuffleCheckOnSimulatorShoes: the table's shuffle check (the
// current rules) on the simulator's own shoes: its shuffled shoes dealt
// one after another raise no alarm, and each of its unshuffled modes is
// caught. The full record, on shoes made apart from the simulator and
// the check, over a million shoes, is tablectl-bench shuffle's
// (docs/game-protection.md).
func TestShuffleCheckOnSimulatorShoes(t *testing.T) {
	shoes := 20_000
	if testing.Short() {
		shoes = 1_000
	}
	var c coup.ShuffleCheck
	for seed := range uint64(shoes) {
		order, err := Shuffle(8, seed)
		if err != nil {
			t.Fatal(err)
		}
		if n := firstAlarm(&c, order[:len(order)-DefaultCut]); n > 0 {
			t.Errorf("false alarm: seed %d at card %d", seed, n)
		}
	}

	catch := func(name string, limit int, tries int, shoe func(i int) (prev, this []coup.Card)) {
		t.Helper()
		worst, sum, caught := 0, 0, 0
		for i := range tries {
			var c coup.ShuffleCheck
			prev, this := shoe(i)
			if prev != nil { // the shoe before, dealt to its cut card
				firstAlarm(&c, prev)
			}
			n := firstAlarm(&c, this)
			if n == 0 {
				t.Errorf("%s %d: not caught", name, i)
				continue
			}
			worst, sum, caught = max(worst, n), sum+n, caught+1
		}
		t.Logf("%s: caught in %d of %d shoes, at card %.1f on average, %d at the latest (goal %d)", name, caught, tries, float64(sum)/float64(max(caught, 1)), worst, limit)
		if worst > limit {
			t.Errorf("%s: caught at card %d; the goal is within %d", name, worst, limit)
		}
	}
	const tries = 200
	catch("new-deck order, any starting point", 12, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := prepared(ShuffleNone, 8, uint64(i), 1, nil)
		return nil, o
	})
	catch("one riffle of sorted decks", 30, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := prepared(ShuffleRiffle, 8, uint64(i), 1, nil)
		return nil, o
	})
	for _, mode := range []ShuffleMode{ShuffleRepeat, ShuffleRecut} {
		// A cut at random may put the cards behind the old cut card, which
		// the table never saw, first (up to DefaultCut of them), after a
		// run of seen ones too short to be judged (up to RepeatRunLen-1).
		catch("the shoe before again, "+string(mode), coup.RepeatRunLen-1+DefaultCut+coup.RepeatRunLen, tries, func(i int) ([]coup.Card, []coup.Card) {
			o, _ := Shuffle(8, uint64(i))
			again, _ := prepared(mode, 8, uint64(i), 2, o)
			return o[:len(o)-DefaultCut], again
		})
	}
	catch("the shoe before's dealt cards put back in reverse", coup.RepeatRunLen, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := Shuffle(8, uint64(i))
		dealt := o[:len(o)-rand.New(rand.NewPCG(uint64(i), 1)).IntN(40)-20] // the cards behind the cut card stay out
		back := make([]coup.Card, len(dealt))
		for j, c := range dealt {
			back[len(dealt)-1-j] = c
		}
		return dealt, back
	})
}
