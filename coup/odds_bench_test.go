package coup

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAnalyze times the exact analysis that runs after every coup; the
// goal is under 10 ms on one core for any composition. Run with
//
//	go test ./coup/ -run '^$' -bench Analyze -benchmem
func BenchmarkAnalyze(b *testing.B) {
	fresh := func(decks int) Shoe {
		s, err := NewShoe(decks)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	// depleted is an 8-deck shoe with a fixed random 300 cards gone, as
	// late in a shoe.
	depleted := fresh(8)
	rng := rand.New(rand.NewPCG(1, 2))
	for depleted.Remaining() > 8*CardCount-300 {
		_ = depleted.Remove(CardAt(rng.IntN(CardCount))) // none left: draw again
	}
	cases := []struct {
		name    string
		shoe    Shoe
		profile string
	}{
		{"fresh8/classic", fresh(8), ProfileClassic},
		{"fresh8/vip", fresh(8), ProfileVIP},
		{"fresh6/no-commission", fresh(6), ProfileNoCommission},
		{"depleted8/vip", depleted, ProfileVIP},
	}
	for _, c := range cases {
		p, err := BuiltinProfile(c.profile)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Analyze(&c.shoe, &p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
