package coup

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkShuffleCheck is the check's cost per card: fair 8-deck shoes
// dealt one after another through one ShuffleCheck, each against the
// ShoeMemory before it.
func BenchmarkShuffleCheck(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	shoes := make([][]Card, 64)
	for i := range shoes {
		d := make([]Card, 0, MaxPrint)
		for range 8 {
			for k := range CardCount {
				d = append(d, CardAt(k))
			}
		}
		r.Shuffle(len(d), func(i, j int) { d[i], d[j] = d[j], d[i] })
		shoes[i] = d[:len(d)-16]
	}
	var c ShuffleCheck
	cards := 0
	b.ResetTimer()
	for i := range b.N {
		c.NewShoe(8)
		for _, card := range shoes[i%len(shoes)] {
			c.Card(card)
		}
		cards += len(shoes[i%len(shoes)])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(cards), "ns/card")
}
