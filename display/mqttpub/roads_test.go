package mqttpub

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
)

// feeder writes rows as the recorder does, the input then the events a
// table of its own derives, into an engine.
type feeder struct {
	t      *testing.T
	e      *engine
	shadow *coup.Table
	seq    int64
}

func newFeeder(t *testing.T, e *engine, cfg coup.TableConfig) *feeder {
	shadow, err := coup.NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &feeder{t: t, e: e, shadow: shadow}
}

func (f *feeder) row(kind string, shoe, coupNo int, v any) {
	body, err := audit.CanonicalJSON(v)
	if err != nil {
		f.t.Fatal(err)
	}
	f.seq++
	f.e.apply(audit.Record{Seq: f.seq, Kind: kind, Shoe: int64(shoe), Coup: int64(coupNo), Body: body})
}

func (f *feeder) feed(ins ...coup.Input) {
	for _, in := range ins {
		shoe, coupNo := f.shadow.ShoeNumber(), f.shadow.CoupNumber()
		evs := f.shadow.Apply(in)
		f.row(string(in.Kind), shoe, coupNo, in)
		for _, ev := range evs {
			f.row(string(ev.Kind), ev.Shoe, ev.Coup, ev)
		}
	}
}

// board records what the roads are told.
type board struct{ calls []string }

func (b *board) Add(n int, r coup.Result) error {
	b.calls = append(b.calls, fmt.Sprintf("add %d %s", n, r.Winner))
	return nil
}
func (b *board) Void(n int) bool {
	b.calls = append(b.calls, fmt.Sprintf("void %d", n))
	return true
}
func (b *board) Reset() { b.calls = append(b.calls, "reset") }

// engineOn is an engine whose roads are b.
func engineOn(t *testing.T, b *board, cfg coup.TableConfig) *engine {
	t.Helper()
	e, err := newEngine(Topics{Prefix: "p"}, tableID, "v1", "online", cfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	e.roads = feedRoads(b, func() any { return slices.Clone(b.calls) }, quiet())
	return e
}

// TestRoads: a coup reaches the roads only once its cards are revealed,
// a voided coup leaves them, a new shoe empties them, and public/roads
// carries the snapshot.
func TestRoads(t *testing.T) {
	b := &board{}
	e := engineOn(t, b, vipConfig(t))
	f := newFeeder(t, e, vipConfig(t))
	f.feed(shoeStart()...)
	c := aCoup()
	f.feed(c[:len(c)-1]...) // complete, not revealed
	if slices.Contains(b.calls, "add 1 banker") {
		t.Fatalf("result on the roads before the reveal: %v", b.calls)
	}
	f.feed(c[len(c)-1])
	f.feed(coup.Input{Kind: coup.InTick, At: deadline(t, f)})
	f.feed(aCoup()...) // coup 2
	f.feed(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "v", Action: coup.ActionVoid, Coup: 2, By: "alice"}})
	f.feed(coup.Input{Kind: coup.InCmd, Command: &coup.Command{ID: "e", Action: coup.ActionShoeEnd, By: "alice"}})
	f.feed(button(coup.ButtonNewShoe))
	want := []string{"reset", "add 1 banker", "add 2 banker", "void 2", "reset"}
	if !slices.Equal(b.calls, want) {
		t.Fatalf("roads told %v, want %v", b.calls, want)
	}
	var got []string
	for _, m := range e.retainedMessages(false) {
		if m.Topic == "p/"+TopicPublicRoads {
			if err := json.Unmarshal(m.Payload, &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("public/roads %v", got)
	}
}

func deadline(t *testing.T, f *feeder) (at time.Time) {
	d, ok := f.shadow.Deadline()
	if !ok {
		t.Fatal("no result timer")
	}
	return d
}

// TestRoadsNoResultTime: with no result time the table opens the next
// coup in the very commit that reveals the last one; the coup still goes
// on the roads.
func TestRoadsNoResultTime(t *testing.T) {
	for _, reveal := range []string{coup.RevealButton, coup.RevealImmediate} {
		cfg := vipConfig(t)
		cfg.ResultTime, cfg.Reveal = 0, reveal
		b := &board{}
		e := engineOn(t, b, cfg)
		f := newFeeder(t, e, cfg)
		f.feed(shoeStart()...)
		f.feed(aCoup()...)
		f.feed(aCoup()...)
		if want := []string{"reset", "add 1 banker", "add 2 banker"}; !slices.Equal(b.calls, want) {
			t.Fatalf("reveal %s: roads told %v, want %v", reveal, b.calls, want)
		}
	}
}
