package shoesim

import (
	"math/rand/v2"
	"testing"

	"github.com/tablectl/tablectl/coup"
)

// firstAlarm feeds a shoe's cards to the check and returns at which card
// (from 1) it raised, or 0.
func firstAlarm(c *coup.ShuffleCheck, shoe []coup.Card) int {
	c.NewShoe()
	for i, card := range shoe[:coup.ShuffleWindow] {
		if c.Card(card) != "" {
			return i + 1
		}
	}
	return 0
}

// TestShuffleCheckFigures measures the shuffle check with the simulator's
// own shoes: false alarms over shuffled shoes dealt one after another, and
// how soon each unshuffled kind is caught. The figures go in the log
// (go test -run TestShuffleCheckFigures -v ./shoeread/shoesim); the goals
// of docs/game-protection.md are asserted.
func TestShuffleCheckFigures(t *testing.T) {
	shoes := 100_000
	if testing.Short() {
		shoes = 10_000
	}
	var c coup.ShuffleCheck
	alarms := 0
	for seed := range uint64(shoes) {
		order, err := Shuffle(8, seed)
		if err != nil {
			t.Fatal(err)
		}
		if n := firstAlarm(&c, order); n > 0 {
			alarms++
			t.Logf("false alarm: seed %d at card %d", seed, n)
		}
	}
	t.Logf("shuffled: %d false alarms in %d 8-deck shoes dealt one after another", alarms, shoes)
	if alarms > shoes/100_000 {
		t.Errorf("%d false alarms in %d shuffled shoes; the goal is at most 1 in 100,000", alarms, shoes)
	}

	catch := func(name string, limit int, tries int, shoe func(i int) (prev, this []coup.Card)) {
		t.Helper()
		worst, sum, caught := 0, 0, 0
		for i := range tries {
			var c coup.ShuffleCheck
			prev, this := shoe(i)
			if prev != nil { // every card of the shoe before, dealt
				c.NewShoe()
				for _, card := range prev {
					c.Card(card)
				}
			}
			n := firstAlarm(&c, this)
			if n == 0 {
				t.Errorf("%s %d: not caught in the first %d cards", name, i, coup.ShuffleWindow)
				continue
			}
			worst, sum, caught = max(worst, n), sum+n, caught+1
		}
		t.Logf("%s: caught in %d of %d shoes, at card %.1f on average, %d at the latest (goal %d)", name, caught, tries, float64(sum)/float64(max(caught, 1)), worst, limit)
		if worst > limit {
			t.Errorf("%s: caught at card %d; the goal is within %d", name, worst, limit)
		}
	}
	const tries = 1000
	catch("new-deck order, any starting point", 12, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := prepared(ShuffleNone, 8, uint64(i), 1, nil)
		return nil, o
	})
	catch("the previous shoe again", 12, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := Shuffle(8, uint64(i))
		return o, o
	})
	catch("one riffle of sorted decks", 30, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := prepared(ShuffleRiffle, 8, uint64(i), 1, nil)
		return nil, o
	})
	catch("new decks in reverse order", 12, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := prepared(ShuffleNone, 6, uint64(i), 1, nil)
		for l, r := 0, len(o)-1; l < r; l, r = l+1, r-1 {
			o[l], o[r] = o[r], o[l]
		}
		return nil, o
	})
	catch("the previous shoe's discards put back", 12, tries, func(i int) ([]coup.Card, []coup.Card) {
		o, _ := Shuffle(8, uint64(i))
		dealt := o[:len(o)-rand.New(rand.NewPCG(uint64(i), 1)).IntN(40)-20] // the cards behind the cut card stay out
		back := make([]coup.Card, len(dealt))
		for j, c := range dealt {
			back[len(dealt)-1-j] = c
		}
		return dealt, back
	})
}

// BenchmarkShuffleCheck is the check's cost per card over a shoe's first
// cards (it looks no further).
func BenchmarkShuffleCheck(b *testing.B) {
	var c coup.ShuffleCheck
	shoes := make([][]coup.Card, 8)
	for i := range shoes {
		shoes[i], _ = Shuffle(8, uint64(i))
	}
	b.ResetTimer()
	for i := range b.N {
		firstAlarm(&c, shoes[i%len(shoes)])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*coup.ShuffleWindow), "ns/card")
}
