package bench

import (
	"errors"
	"fmt"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// benchDealer plays the simulator's plans straight into a coup.Table on a
// virtual clock, with no port, reader or trail in between: the inputs a
// controller would have recorded, in the order and at the times it would
// have, timer ticks included. It builds large trails fast and feeds the
// odds benchmark.
type benchDealer struct {
	tc    coup.TableConfig
	table *coup.Table
	clock *clock.Fake // the virtual time: rows are stamped by it
	seq   uint32      // the shoe's last sequence number
	seed  uint64
	shoes int // shoes dealt so far
	// cardPace and coupPace are the dealer's virtual pace.
	cardPace, coupPace time.Duration
}

// benchVisit sees one input as the recorder would commit it: in, stamped,
// with the shoe and coup the table stood at before it, and what the table
// derived from it.
type benchVisit func(in coup.Input, shoe, coupN int, derived []coup.Event) error

func newBenchDealer(tc coup.TableConfig, seed uint64, start time.Time) (*benchDealer, error) {
	t, err := coup.NewTable(tc)
	if err != nil {
		return nil, err
	}
	return &benchDealer{tc: tc, table: t, clock: clock.NewFake(start), seed: seed,
		cardPace: shoesim.DefaultCardPace, coupPace: shoesim.DefaultCoupPace}, nil
}

// errBenchStop ends dealing early without an error.
var errBenchStop = errors.New("stop dealing")

// dealShoe deals the next shoe, as one long simulator run would (the shoe
// the simulator shuffles from seed+n-1), starting with the link coming up
// and HELO before the first.
func (d *benchDealer) dealShoe(visit benchVisit) error {
	n := d.shoes + 1
	p, err := shoesim.NewPlan(shoesim.Options{Seed: d.seed + uint64(n-1), Decks: d.tc.Profile.Decks, Shoes: 1,
		CardPace: d.cardPace, CoupPace: d.coupPace, ShoeID: fmt.Sprintf("SIM-%d", d.seed)})
	if err != nil {
		return err
	}
	steps := p.Steps
	if n == 1 {
		if err := d.apply(coup.Input{Kind: coup.InLink, Link: coup.LinkConnected}, visit); err != nil {
			return err
		}
	} else {
		// One plan per shoe keeps memory flat; a long run would not say
		// HELO again, but would wait a betting time between shoes.
		if len(steps) > 0 && steps[0].Op == shoesim.OpSend && steps[0].Event.Kind == shoeread.KindHello {
			steps = steps[1:]
		}
		d.clock.Advance(d.coupPace)
	}
	for _, st := range steps {
		switch st.Op {
		case shoesim.OpPause:
			d.clock.Advance(st.For)
		case shoesim.OpSend:
			d.seq++
			e := st.Event
			e.Seq = d.seq
			in, ok := e.Input(time.Time{})
			if !ok {
				continue
			}
			if err := d.apply(in, visit); err != nil {
				return err
			}
		default:
			return fmt.Errorf("bench dealer: unexpected step %s", st.Op)
		}
	}
	d.shoes++
	return nil
}

// apply feeds the ticks that fall due before in (as RunTimers would), then
// in, all stamped as the recorder stamps them.
func (d *benchDealer) apply(in coup.Input, visit benchVisit) error {
	for {
		dl, ok := d.table.Deadline()
		if !ok || dl.After(d.clock.Now()) {
			break
		}
		if err := d.one(coup.Input{Kind: coup.InTick, At: dl}, visit); err != nil {
			return err
		}
	}
	in.At = d.clock.Now()
	return d.one(in, visit)
}

func (d *benchDealer) one(in coup.Input, visit benchVisit) error {
	in.At = in.At.Round(0).UTC()
	shoe, coupN := d.table.ShoeNumber(), d.table.CoupNumber()
	derived := d.table.Apply(in)
	if visit == nil {
		return nil
	}
	return visit(in, shoe, coupN, derived)
}

// benchRows are the rows the recorder writes for one input: the input,
// then each event derived from it (audit's inputEvent and tableEvents).
// Should they drift apart, rebuilding the trail finds differences and the
// start-up benchmark fails rather than measuring a trail the controller
// would refuse.
func benchRows(dst []audit.Event, in coup.Input, shoe, coupN int, derived []coup.Event) []audit.Event {
	dst = append(dst, audit.Event{Kind: string(in.Kind), Shoe: int64(shoe), Coup: int64(coupN), Body: in})
	for _, e := range derived {
		dst = append(dst, audit.Event{Kind: string(e.Kind), Shoe: int64(e.Shoe), Coup: int64(e.Coup), Body: e})
	}
	return dst
}
