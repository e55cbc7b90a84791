package shoesim

import (
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/shoeread"
)

// BenchmarkPlan plans a whole 8-deck shoe.
func BenchmarkPlan(b *testing.B) {
	for i := range b.N {
		if _, err := NewPlan(Options{Decks: 8, Seed: uint64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEndToEnd deals whole 8-deck shoes at full speed through the real
// path (simulator, pseudo-terminal, device.Link with go.bug.st/serial,
// driver and Sequencer) and reports the cards per second that arrive
// decoded: from the simulator's first sentence to the controller decoding
// its last byte, with the Link started alongside the simulator.
func BenchmarkEndToEnd(b *testing.B) {
	for _, protocol := range []string{ProtocolV1, ProtocolBeetek} {
		b.Run(protocol, func(b *testing.B) {
			cards, dealt := 0, time.Duration(0)
			for i := range b.N {
				sim, ctl := e2e(b, Options{Protocol: protocol, Decks: 8, Seed: uint64(i)}, clock.Real, device.Off)
				n := 0
				for _, e := range ctl.dec.events {
					if e.Kind == shoeread.KindCard {
						n++
					}
				}
				if want := dealtCount(sim.Plan()); n != want {
					b.Fatalf("%d cards decoded, %d dealt", n, want)
				}
				cards += n
				dealt += ctl.dealt
			}
			b.ReportMetric(float64(cards)/dealt.Seconds(), "cards/s")
		})
	}
}
