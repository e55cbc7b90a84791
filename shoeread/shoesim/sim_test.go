package shoesim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/shoeread"
)

// allFaults is one of every fault, spread over a shoe's first coups.
func allFaults(t *testing.T) []Fault {
	t.Helper()
	var out []Fault
	for _, spec := range []string{
		"noise@2:40", "badsum@2.2", "drop@3.1:2", "unreadable@4.2", "extra@4",
		"early@5", "impossible@6.1", "silence@7.2:3s", "unplug@8:2s", "noise@8.1:9", "badsum@9.1", "drop@10",
		"status@2.4:SENSOR,reader 2 dirty, clean it", "status@6:LID_OPEN",
	} {
		f, err := ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	return out
}

// What the Sim puts on the line decodes, through the real drivers, to
// exactly what its record says it sent, faults and all; fed in small
// chunks, as a serial port delivers them.
func TestSimDecodesBack(t *testing.T) {
	for _, protocol := range []string{ProtocolV1, ProtocolBeetek} {
		for _, paced := range []bool{false, true} {
			for _, faults := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/paced=%v/faults=%v", protocol, paced, faults), func(t *testing.T) {
					o := Options{Protocol: protocol, Seed: 9, Shoes: 2}
					if paced {
						o.CardPace, o.CoupPace = time.Second, 4*time.Second
					}
					if faults {
						o.Faults = allFaults(t)
						if protocol == ProtocolV1 {
							o.Faults = append(o.Faults, Fault{Kind: FaultShortBurn, Shoe: 2})
						}
					}
					sim, line := runMem(t, o)
					d := newDecoder(t, protocol)
					b := line.buf.Bytes()
					for i := 0; i < len(b); i += 5 {
						d.decode(b[i:min(i+5, len(b))])
					}
					want := expected(sim.Record(), protocol)
					sameEvents(t, d.got, want)
					st := d.r.Stats()
					if !faults && st.RejectedRuns != 0 {
						t.Fatalf("no faults, yet %d runs rejected", st.RejectedRuns)
					}
				})
			}
		}
	}
}

// v1 numbers every sentence from 1 (HELO), lost ones included, with no gap
// the shoe did not make; a heartbeat carries the number of the sentence
// before it and takes none of its own.
func TestSimSequenceNumbers(t *testing.T) {
	sim, _ := runMem(t, Options{Seed: 4, Coups: 10, CardPace: time.Second, CoupPace: 3 * time.Second, Faults: allFaults(t)[:9]})
	var seq uint32
	hb := 0
	for _, s := range sim.Record().Sent {
		if s.Noise {
			continue
		}
		if !s.Heartbeat {
			seq++
		}
		if s.Seq != seq || s.Event.Seq != seq {
			t.Fatalf("sentence %q (heartbeat %v) has seq %d, want %d", s.Bytes, s.Heartbeat, s.Seq, seq)
		}
		if seq == 1 && s.Event.Kind != shoeread.KindHello {
			t.Fatalf("seq 1 is %s, want hello", s.Event.Kind)
		}
		if s.Heartbeat {
			hb++
		}
	}
	if hb == 0 {
		t.Fatal("a paced shoe sent no heartbeat")
	}
}

// A paced v1 shoe is never quiet for longer than its heartbeat interval,
// except when told to be silent or unplugged, and sends heartbeats only
// when it would otherwise be quiet.
func TestSimHeartbeats(t *testing.T) {
	o := Options{Seed: 8, Coups: 12, CardPace: 700 * time.Millisecond, CoupPace: 5 * time.Second, Heartbeat: time.Second,
		Faults: []Fault{{Kind: FaultSilence, Coup: 3, Card: 2, For: 4 * time.Second}, {Kind: FaultUnplug, Coup: 6, For: 3 * time.Second}}}
	sim, line := runMem(t, o)
	rec := sim.Record()
	silence, unplug := rec.Faults[0], rec.Faults[1]
	if silence.Fault.Kind != FaultSilence || unplug.Fault.Kind != FaultUnplug {
		t.Fatalf("faults recorded: %+v", rec.Faults)
	}
	replugged := line.plugs[1].at
	var prev time.Time
	hbs := 0
	for i, s := range rec.Sent {
		if s.Dropped {
			continue
		}
		if i > 0 {
			gap := s.Time.Sub(prev)
			inSilence := prev.Equal(silence.Time) || (!prev.After(silence.Time) && !s.Time.Before(silence.Time.Add(silence.Fault.For)))
			inUnplug := !prev.After(unplug.Time) && !s.Time.Before(unplug.Time)
			if gap > o.Heartbeat && !inSilence && !inUnplug {
				t.Fatalf("quiet for %s before %q", gap, s.Bytes)
			}
			if s.Heartbeat && gap != o.Heartbeat && !s.Time.Equal(replugged) {
				t.Fatalf("heartbeat %d came %s after the last sentence, want %s", s.Seq, gap, o.Heartbeat)
			}
			if s.Heartbeat && s.Time.After(silence.Time) && s.Time.Before(silence.Time.Add(silence.Fault.For)) {
				t.Fatalf("heartbeat %d during the silence", s.Seq)
			}
			if s.Heartbeat && s.Time.After(unplug.Time) && s.Time.Before(replugged) {
				t.Fatalf("heartbeat %d while unplugged", s.Seq)
			}
		}
		if s.Heartbeat {
			hbs++
		}
		prev = s.Time
	}
	if hbs < 12*4 {
		t.Fatalf("%d heartbeats in 12 coups with 5s of betting each, want at least 48", hbs)
	}
	// The silence: nothing at all for its whole length.
	for _, s := range rec.Sent {
		if s.Time.After(silence.Time) && s.Time.Before(silence.Time.Add(silence.Fault.For)) {
			t.Fatalf("%q sent during the silence", s.Bytes)
		}
	}
	// Bee-Tek has no heartbeat.
	sim, _ = runMem(t, Options{Protocol: ProtocolBeetek, Seed: 8, Coups: 3, CardPace: time.Second, CoupPace: 5 * time.Second})
	for _, s := range sim.Record().Sent {
		if s.Heartbeat {
			t.Fatal("Bee-Tek shoe sent a heartbeat")
		}
	}
}

// Unplugged, the shoe holds what it deals and sends it, in order, once the
// line is back; the hook sees every byte written before the unplug.
func TestSimUnplugHoldsOutput(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
	}{
		{"paced", Options{Seed: 6, Coups: 5, CardPace: time.Second, CoupPace: 3 * time.Second,
			Faults: []Fault{{Kind: FaultUnplug, Coup: 2, Card: 2, For: 2500 * time.Millisecond}}}},
		{"full speed, to the end", Options{Seed: 6, Coups: 5,
			Faults: []Fault{{Kind: FaultUnplug, Coup: 3, Card: 1, For: time.Minute}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewVirtual(epoch)
			line := newMemLine(clk)
			var hookSaw []int64
			tt.o.BeforeUnplug = func(ctx context.Context, written int64) error {
				if int64(line.buf.Len()) != written {
					t.Errorf("hook told %d bytes written, the line has %d", written, line.buf.Len())
				}
				hookSaw = append(hookSaw, written)
				return nil
			}
			sim, err := New(tt.o, line, clk, quietLog())
			if err != nil {
				t.Fatal(err)
			}
			if err := sim.Run(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			rec := sim.Record()
			f := tt.o.Faults[0]
			if len(line.plugs) != 2 || !line.plugs[0].unplug || line.plugs[1].unplug {
				t.Fatalf("plugs %+v, want one unplug then one replug", line.plugs)
			}
			if d := line.plugs[1].at.Sub(line.plugs[0].at); d != f.For {
				t.Fatalf("unplugged for %s, want %s", d, f.For)
			}
			if len(hookSaw) != 1 || hookSaw[0] != int64(line.plugs[0].offset) {
				t.Fatalf("hook calls %v, want one at %d bytes", hookSaw, line.plugs[0].offset)
			}
			// Nothing is lost: the line carries every sentence.
			var all []byte
			held := 0
			for _, s := range rec.Sent {
				all = append(all, s.Bytes...)
				if s.Time.After(line.plugs[0].at) && s.Time.Before(line.plugs[1].at) || s.Time.Equal(line.plugs[0].at) && s.Offset >= int64(line.plugs[0].offset) {
					held++
				}
			}
			if !bytes.Equal(all, line.buf.Bytes()) {
				t.Fatal("the line does not carry exactly the recorded sentences in order")
			}
			if held == 0 {
				t.Fatal("nothing was dealt while unplugged: the test proves nothing")
			}
		})
	}
}

// With linger, a shoe whose plan is done idles with heartbeats until told
// to stop.
func TestSimLingers(t *testing.T) {
	clk := clock.NewVirtual(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	line := &countingLine{memLine: newMemLine(clk), after: 5, cancel: cancel}
	sim, err := New(Options{Seed: 1, Coups: 1}, line, clk, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	if err := sim.Run(ctx, true); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	rec := sim.Record()
	last := rec.Sent[len(rec.Sent)-1]
	if !last.Heartbeat || clk.Now().Sub(start) < 5*time.Second {
		t.Fatalf("after the plan: last sent %q at %s", last.Bytes, clk.Now().Sub(start))
	}
}

// countingLine cancels its context once it has carried a number of
// heartbeats.
type countingLine struct {
	*memLine
	after  int
	cancel func()
}

func (l *countingLine) Write(ctx context.Context, p []byte) error {
	if bytes.HasPrefix(p, []byte("$HB,")) {
		if l.after--; l.after == 0 {
			l.cancel()
		}
	}
	return l.memLine.Write(ctx, p)
}

// A failing line stops the run with an error saying so.
func TestSimWriteError(t *testing.T) {
	sim, err := New(Options{Seed: 1}, failLine{}, clock.NewVirtual(epoch), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.Run(context.Background(), false); err == nil || !strings.Contains(err.Error(), "write: cable cut") {
		t.Fatalf("Run = %v, want the write error", err)
	}
}

type failLine struct{}

func (failLine) Write(context.Context, []byte) error { return errors.New("cable cut") }
func (failLine) Unplug() error                       { return nil }
func (failLine) Replug() error                       { return nil }

// The whole record of a paced shoe with every fault, pinned: any change to
// what the simulator sends, or when, shows here.
func TestSimGolden(t *testing.T) {
	for _, protocol := range []string{ProtocolV1, ProtocolBeetek} {
		t.Run(protocol, func(t *testing.T) {
			o := Options{Protocol: protocol, Seed: 2026, Coups: 10, CardPace: time.Second, CoupPace: 4 * time.Second, Faults: allFaults(t)}
			if protocol == ProtocolV1 {
				o.Faults = append(o.Faults, Fault{Kind: FaultShortBurn})
			}
			sim, _ := runMem(t, o)
			var b strings.Builder
			rec := sim.Record()
			for _, f := range rec.Faults {
				fmt.Fprintf(&b, "fault %-16s at %-22s +%-6s seqs %v offset %d\n", f.Fault, f.At, f.Time.Sub(epoch), f.Seqs, f.Offset)
			}
			for _, s := range rec.Sent {
				var flags []string
				for _, k := range s.Faults {
					flags = append(flags, string(k))
				}
				if s.Dropped {
					flags = append(flags, "DROPPED")
				}
				fmt.Fprintf(&b, "+%-6s %-22s %q %s\n", s.Time.Sub(epoch), s.At, s.Bytes, strings.Join(flags, ","))
			}
			golden(t, "sim_"+protocol+".golden", []byte(b.String()))
		})
	}
}

// A v1 shoe's heartbeats carry the last number it used, so when the last
// sentences before a quiet spell are lost (here a coup's last card and its
// REVEAL), the first heartbeat after them reveals the gap, naming them,
// rather than the next coup's first sentence seconds later.
func TestSimHeartbeatRevealsLoss(t *testing.T) {
	o := Options{Seed: 17, Coups: 3, CardPace: time.Second, CoupPace: 4 * time.Second}
	n := len(mustPlan(t, o).Shoes[0].Coups[1].Cards)
	o.Faults = []Fault{{Kind: FaultDrop, Coup: 2, Card: n, N: 2}}
	sim, line := runMem(t, o)
	d := newDecoder(t, ProtocolV1)
	d.decode(line.buf.Bytes())
	rec := sim.Record()
	sameEvents(t, d.got, expected(rec, ProtocolV1))

	lost := rec.Faults[0].Seqs
	if len(lost) != 2 {
		t.Fatalf("dropped %v, want 2 sentences", lost)
	}
	for i, e := range d.events {
		if e.Kind != shoeread.KindGap {
			continue
		}
		if e.GapFrom != lost[0] || e.GapTo != lost[1] {
			t.Fatalf("gap %d-%d, want %d-%d", e.GapFrom, e.GapTo, lost[0], lost[1])
		}
		if next := d.events[i+1]; next.Kind != shoeread.KindHeartbeat || next.Seq != lost[1] {
			t.Fatalf("the gap is revealed by %s, want a heartbeat carrying %d", render(next, ProtocolV1), lost[1])
		}
		return
	}
	t.Fatal("no gap reported")
}

// The controller's restart, against the simulator's real output: a
// controller that records every sentence but heartbeats stops reading
// before sentence i and a new one, resumed from the last number recorded,
// starts reading at sentence j. It sees a gap if and only if a sentence
// other than a heartbeat went out in between, and the gap names exactly
// those.
func TestSimControllerRestart(t *testing.T) {
	sim, line := runMem(t, Options{Seed: 19, Coups: 4, CardPace: time.Second, CoupPace: 4 * time.Second})
	all := line.buf.Bytes()
	sent := sim.Record().Sent
	restarts, quiet := 0, 0
	for i := 1; i < len(sent); i++ {
		// What the first controller recorded before it stopped.
		first := newDecoder(t, ProtocolV1)
		first.decode(all[:sent[i].Offset])
		var recorded uint32
		for _, e := range first.events {
			if e.Seq != 0 && e.Kind != shoeread.KindHeartbeat {
				recorded = e.Seq
			}
		}
		for j := i + 1; j < len(sent) && j <= i+12; j++ {
			var missed []uint32
			for _, s := range sent[i:j] {
				if !s.Heartbeat {
					missed = append(missed, s.Seq)
				}
			}
			second := newDecoder(t, ProtocolV1)
			second.r.Sequencer().Resume(recorded)
			second.decode(all[sent[j].Offset:])
			var gaps []string
			for _, e := range second.events {
				switch e.Kind {
				case shoeread.KindGap:
					gaps = append(gaps, render(e, ProtocolV1))
				case shoeread.KindProtocolError:
					t.Fatalf("down from %q to %q: %v", sent[i].Bytes, sent[j].Bytes, e.Err)
				}
			}
			var want []string
			if len(missed) > 0 {
				want = []string{fmt.Sprintf("gap %d-%d", missed[0], missed[len(missed)-1])}
			} else {
				quiet++
			}
			if fmt.Sprint(gaps) != fmt.Sprint(want) {
				t.Fatalf("down from %q to %q (recorded up to %d): gaps %v, want %v", sent[i].Bytes, sent[j].Bytes, recorded, gaps, want)
			}
			restarts++
		}
	}
	if quiet == 0 || quiet == restarts {
		t.Fatalf("%d restarts, %d with nothing missed: the run must have both kinds", restarts, quiet)
	}
}

// TestHoldWhile: a held dealer sends nothing but heartbeats, then deals
// the whole plan once let go.
func TestHoldWhile(t *testing.T) {
	opts := Options{Seed: 3, Coups: 2}
	free, _ := runMem(t, opts)
	clk := clock.NewVirtual(epoch)
	line := newMemLine(clk)
	sim, err := New(opts, line, clk, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	polls := 0
	sim.HoldWhile(func() bool {
		polls++
		return polls <= 40 // ten seconds of holding, after the HELO
	})
	if err := sim.Run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	var sent, heartbeats int
	var first, second time.Time
	for _, s := range sim.Record().Sent {
		if s.Heartbeat {
			if sent == 1 {
				heartbeats++
			}
			continue
		}
		switch sent {
		case 0:
			first = s.Time
		case 1:
			second = s.Time
		}
		sent++
	}
	if want := len(free.Record().Sent) - countHeartbeats(free.Record().Sent); sent != want {
		t.Fatalf("a held dealer sent %d sentences; the plan has %d", sent, want)
	}
	if held := second.Sub(first); heartbeats < 9 || held < 10*time.Second {
		t.Fatalf("%d heartbeats in %s between HELO and the next sentence; want the shoe beating through 10s of holding", heartbeats, held)
	}
}

// TestWaitForBetting: the dealer calls "no more bets" only once the table
// says betting is open, and deals everything else without asking.
func TestWaitForBetting(t *testing.T) {
	opts := Options{Seed: 3, Coups: 3}
	free, _ := runMem(t, opts)
	clk := clock.NewVirtual(epoch)
	line := newMemLine(clk)
	sim, err := New(opts, line, clk, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	var asked, openAt int
	sim.WaitForBetting(func() bool {
		asked++
		if asked%50 == 0 { // a quarter of a second of the table showing the result
			openAt++
			return true
		}
		return false
	})
	if err := sim.Run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	var nmb int
	var last time.Time
	for _, s := range sim.Record().Sent {
		if s.Heartbeat {
			continue
		}
		last = s.Time
		if s.Event.Kind == shoeread.KindButton && s.Event.Button == shoeread.ButtonNoMoreBets {
			nmb++
		}
	}
	if nmb != 3 || openAt != 3 || asked != 150 {
		t.Fatalf("%d no-more-bets calls, betting asked %d times, open %d times; want 3 calls, each after 50 asks", nmb, asked, openAt)
	}
	freeSent := free.Record().Sent
	if want := len(freeSent) - countHeartbeats(freeSent); len(sim.Record().Sent)-countHeartbeats(sim.Record().Sent) != want {
		t.Fatalf("the waiting dealer sent a different plan")
	}
	if d := last.Sub(freeSent[len(freeSent)-1].Time); d < 3*49*BettingPoll {
		t.Fatalf("the dealer who waited finished only %s later; want at least three waits of 49 polls", d)
	}
}

func countHeartbeats(ss []Sent) int {
	n := 0
	for _, s := range ss {
		if s.Heartbeat {
			n++
		}
	}
	return n
}
