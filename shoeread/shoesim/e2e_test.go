package shoesim

// End-to-end tests of the real serial path: the simulator writes to a
// pseudo-terminal, the controller's device.Link opens it with
// go.bug.st/serial through the simulator's symlink (reopening it when it is
// unplugged), and the shoeread driver and Sequencer decode what arrives.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/shoeread"
)

// e2eTimeout only guards against a hang; the tests wait on events.
const e2eTimeout = 2 * time.Minute

// controller is the reading side: a device.Link on the simulator's link
// path feeding a decoder.
type controller struct {
	link *device.Link

	mu     sync.Mutex
	dec    *decoder
	states []device.State
	// dealt is how long the shoe took from its first sentence to the
	// controller decoding its last byte.
	dealt    time.Duration
	progress chan struct{} // pulsed after each delivery
	done     chan error
}

func startController(t testing.TB, ctx context.Context, path, protocol string, silentAfter device.Duration) *controller {
	t.Helper()
	c := &controller{dec: newDecoder(t, protocol), progress: make(chan struct{}, 1), done: make(chan error, 1)}
	cfg := device.Config{
		Path:        path,
		Baud:        DefaultBaud[protocol],
		SilentAfter: silentAfter,
		BackoffMin:  device.Duration(10 * time.Millisecond),
		BackoffMax:  device.Duration(100 * time.Millisecond),
	}
	link, err := device.NewLink(cfg, device.Options{
		OnData: func(p []byte) {
			c.mu.Lock()
			c.dec.decode(p)
			c.mu.Unlock()
			c.pulse()
		},
		OnState: func(st device.Status) {
			c.mu.Lock()
			c.states = append(c.states, st.State)
			c.mu.Unlock()
		},
		Logger: quietLog(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.link = link
	go func() { c.done <- link.Run(ctx) }()
	return c
}

func (c *controller) pulse() {
	select {
	case c.progress <- struct{}{}:
	default:
	}
}

// waitBytes returns once n bytes have been decoded, or with ctx's error.
func (c *controller) waitBytes(ctx context.Context, n int64) error {
	for {
		c.mu.Lock()
		got := c.dec.bytes
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller read %d of %d bytes: %w", got, n, ctx.Err())
		case <-c.progress:
		}
	}
}

// e2e runs opts through a pseudo-terminal into a controller and returns
// once the controller has read every byte the simulator wrote and its Link
// has stopped.
func e2e(t testing.TB, opts Options, clk clock.Clock, silentAfter device.Duration) (*Sim, *controller) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	path := filepath.Join(t.TempDir(), "shoe")
	line, err := OpenPTY(path)
	if err != nil {
		t.Fatal(err)
	}
	defer line.Close()

	linkCtx, stopLink := context.WithCancel(ctx)
	ctl := startController(t, linkCtx, path, opts.Protocol, silentAfter)
	var linkErr error
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopLink()
			linkErr = <-ctl.done
		}
	}
	defer stop()
	// Unplug only once the controller has read everything: then an unplug
	// loses nothing but the line, which is what the test is about.
	opts.BeforeUnplug = ctl.waitBytes
	sim, err := New(opts, line, clk, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := sim.Run(ctx, false); err != nil {
		t.Fatalf("simulator: %v", err)
	}
	var total int64
	for _, s := range sim.Record().Sent {
		total += int64(len(s.Bytes))
	}
	if err := ctl.waitBytes(ctx, total); err != nil {
		t.Fatal(err)
	}
	ctl.dealt = time.Since(start)
	stop()
	if !errors.Is(linkErr, context.Canceled) {
		t.Fatalf("link: %v", linkErr)
	}
	return sim, ctl
}

// Everything the simulator sends arrives, decoded, in order: nothing lost,
// nothing invented, for a whole shoe at full speed and for coups at a fast
// pace with heartbeats.
func TestEndToEndWholeShoe(t *testing.T) {
	for _, protocol := range []string{ProtocolV1, ProtocolBeetek} {
		t.Run(protocol+"/full speed", func(t *testing.T) {
			sim, ctl := e2e(t, Options{Protocol: protocol, Seed: 31, Decks: 8}, clock.Real, device.Off)
			rec := sim.Record()
			sameEvents(t, ctl.dec.got, expected(rec, protocol))
			cards := 0
			for _, e := range ctl.dec.events {
				if e.Kind == shoeread.KindCard {
					cards++
				}
			}
			if want := dealtCount(sim.Plan()); cards != want {
				t.Fatalf("%d cards decoded, %d dealt", cards, want)
			}
			if st := ctl.dec.r.Stats(); st.RejectedRuns != 0 {
				t.Fatalf("clean line, yet %+v", st)
			}
		})
		t.Run(protocol+"/paced", func(t *testing.T) {
			o := Options{Protocol: protocol, Seed: 32, Coups: 8, CardPace: 2 * time.Millisecond, CoupPace: 25 * time.Millisecond, Heartbeat: 5 * time.Millisecond}
			sim, ctl := e2e(t, o, clock.Real, device.Off)
			rec := sim.Record()
			sameEvents(t, ctl.dec.got, expected(rec, protocol))
			hb := 0
			for _, s := range rec.Sent {
				if s.Heartbeat {
					hb++
				}
			}
			if protocol == ProtocolV1 && hb == 0 {
				t.Fatal("no heartbeat went through: the paced run proves nothing more than the full speed one")
			}
		})
	}
}

// dealtCount is how many cards a plan deals, burn and extra cards included.
func dealtCount(p *Plan) int {
	n := 0
	for _, sh := range p.Shoes {
		n += len(sh.Burn)
		for _, c := range sh.Coups {
			n += len(c.Cards) + len(c.Extra)
		}
	}
	return n
}

// Unplugged mid-stream, twice mid-coup and once between coups, the
// pseudo-terminal vanishes and comes back under another name; the
// controller follows the symlink, and not a card is lost or invented.
func TestEndToEndUnplugReplug(t *testing.T) {
	for _, protocol := range []string{ProtocolV1, ProtocolBeetek} {
		t.Run(protocol, func(t *testing.T) {
			var faults []Fault
			for _, spec := range []string{"unplug@3.2:150ms", "unplug@6:100ms", "unplug@9.4:120ms"} {
				f, err := ParseFault(spec)
				if err != nil {
					t.Fatal(err)
				}
				faults = append(faults, f)
			}
			// A short pace keeps the unplugs apart: each is over before
			// the next is due.
			o := Options{Protocol: protocol, Seed: 33, Coups: 12, CardPace: 5 * time.Millisecond, CoupPace: 100 * time.Millisecond, Faults: faults}
			sim, ctl := e2e(t, o, clock.Real, device.Off)
			rec := sim.Record()
			sameEvents(t, ctl.dec.got, expected(rec, protocol))
			cards := 0
			for _, e := range ctl.dec.events {
				if e.Kind == shoeread.KindCard {
					cards++
				}
			}
			if want := dealtCount(sim.Plan()); cards != want {
				t.Fatalf("%d cards decoded, %d dealt", cards, want)
			}
			if len(rec.Faults) != 3 {
				t.Fatalf("faults recorded: %+v", rec.Faults)
			}
			// The controller really lost the line and reopened it each time.
			st := ctl.link.Stats()
			if st.Opens < 4 || st.Disconnects < 3 {
				t.Fatalf("link stats %+v: want at least 4 opens and 3 disconnects", st)
			}
			if seq := ctl.dec.r.Sequencer().Stats(); seq.Gaps != 0 {
				t.Fatalf("sequence anomalies across the unplugs: %+v", seq)
			}
		})
	}
}

// Every fault the simulator injects reaches the controller as the protocol
// says it must: noise and bad checksums rejected and counted, dropped
// sentences a v1 gap exactly where they were dropped, the card faults as
// cards the rules can catch, a status report as a status, and (v1) a short
// burn as one card fewer between NEWSHOE and BURNDONE than the exposed card
// calls for.
func TestEndToEndFaults(t *testing.T) {
	for _, protocol := range []string{ProtocolV1, ProtocolBeetek} {
		t.Run(protocol, func(t *testing.T) {
			specs := []string{
				"noise@2:40", "badsum@2.2", "drop@3.1:2", "unreadable@4.2", "extra@4", "early@5",
				"status@5.2:LID_OPEN,lid opened", "impossible@6.1", "silence@7.2:1500ms", "noise@8.1:9", "badsum@9.1", "drop@10",
			}
			if protocol == ProtocolV1 {
				specs = append(specs, "shortburn@1")
			}
			var faults []Fault
			for _, spec := range specs {
				f, err := ParseFault(spec)
				if err != nil {
					t.Fatal(err)
				}
				faults = append(faults, f)
			}
			silentAfter := device.Off
			if protocol == ProtocolV1 {
				silentAfter = device.Duration(200 * time.Millisecond)
			}
			o := Options{Protocol: protocol, Seed: 34, Coups: 12, Faults: faults}
			sim, ctl := e2e(t, o, clock.Real, silentAfter)
			rec := sim.Record()
			sameEvents(t, ctl.dec.got, expected(rec, protocol))
			byKind := map[FaultKind][]Injected{}
			for _, f := range rec.Faults {
				byKind[f.Fault.Kind] = append(byKind[f.Fault.Kind], f)
			}
			if len(rec.Faults) != len(specs) {
				t.Fatalf("%d faults recorded, %d asked", len(rec.Faults), len(specs))
			}

			// Noise and garbled sentences: rejected, every byte counted.
			var runs, rejected uint64
			for _, s := range rec.Sent {
				switch {
				case s.Noise:
					runs, rejected = runs+1, rejected+uint64(len(s.Bytes))
				case s.Corrupt:
					n := len(s.Bytes)
					if protocol == ProtocolBeetek {
						n -= 2 // the spaces around a token are not part of it
					}
					runs, rejected = runs+1, rejected+uint64(n)
				}
			}
			if st := ctl.dec.r.Stats(); st.RejectedRuns != runs || st.RejectedBytes != rejected {
				t.Fatalf("driver stats %+v: want %d runs, %d bytes rejected", st, runs, rejected)
			}

			checkCardFaults(t, protocol, sim, ctl.dec.events, byKind)

			// The status report arrives as sent, once.
			var statuses []string
			for _, e := range ctl.dec.events {
				if e.Kind == shoeread.KindStatus {
					statuses = append(statuses, e.Status+": "+e.Text)
				}
			}
			if fmt.Sprint(statuses) != "[LID_OPEN: lid opened]" {
				t.Fatalf("statuses decoded %q, want the one injected", statuses)
			}

			if protocol == ProtocolV1 {
				// Gaps: one for each run of lost sentences, naming them.
				var gaps []string
				for _, e := range ctl.dec.events {
					if e.Kind == shoeread.KindGap {
						gaps = append(gaps, fmt.Sprintf("%d-%d", e.GapFrom, e.GapTo))
					}
				}
				bs1, drop1, bs2, drop2 := byKind[FaultBadSum][0].Seqs, byKind[FaultDrop][0].Seqs, byKind[FaultBadSum][1].Seqs, byKind[FaultDrop][1].Seqs
				want := []string{
					fmt.Sprintf("%d-%d", bs1[0], bs1[0]),
					fmt.Sprintf("%d-%d", drop1[0], drop1[1]),
					fmt.Sprintf("%d-%d", bs2[0], bs2[0]),
					fmt.Sprintf("%d-%d", drop2[0], drop2[0]),
				}
				if fmt.Sprint(gaps) != fmt.Sprint(want) {
					t.Fatalf("gaps %v, want %v", gaps, want)
				}
				// Silence: the Link said so, and came back.
				if st := ctl.link.Stats(); st.Silences == 0 {
					t.Fatalf("a 1.5s silence with a 200ms window: link stats %+v", st)
				}
				ctl.mu.Lock()
				states := fmt.Sprint(ctl.states)
				ctl.mu.Unlock()
				if !containsSeq(ctl.states, device.Silent, device.Connected) {
					t.Fatalf("link states %s: want silent then connected", states)
				}
				// The short burn: the cards between NEWSHOE and BURNDONE are
				// the exposed card and one fewer than its value.
				var burn []coup.Card
				inBurn := false
				for _, e := range ctl.dec.events {
					switch {
					case e.Kind == shoeread.KindButton && e.Button == shoeread.ButtonNewShoe:
						inBurn = true
					case e.Kind == shoeread.KindButton && e.Button == shoeread.ButtonBurnDone:
						inBurn = false
					case e.Kind == shoeread.KindCard && inBurn:
						burn = append(burn, e.Card)
					}
				}
				if len(burn) == 0 || len(burn)-1 != burnOf[burn[0].Rank]-1 {
					t.Fatalf("burn decoded %s: want the exposed card and one fewer than its value", coup.FormatCards(burn))
				}
			}
		})
	}
}

func containsSeq(states []device.State, a, b device.State) bool {
	for i := 0; i+1 < len(states); i++ {
		if states[i] == a && states[i+1] == b {
			return true
		}
	}
	return false
}

// checkCardFaults checks that the card faults arrive as cards the rules
// catch: the unreadable card as unreadable, the impossible card as the one
// the shoe's composition refuses, and (v1, which has buttons) the extra card
// past the tableau and the early card before NOMOREBETS.
func checkCardFaults(t *testing.T, protocol string, sim *Sim, events []shoeread.Event, byKind map[FaultKind][]Injected) {
	t.Helper()
	// Find each faulted card among the decoded cards by its place among the
	// sentences the controller received.
	rec := sim.Record()
	var delivered []Sent
	for _, s := range rec.Sent {
		if s.Event.Kind == shoeread.KindCard && !s.Dropped && !s.Corrupt {
			delivered = append(delivered, s)
		}
	}
	var cards []shoeread.Event
	for _, e := range events {
		if e.Kind == shoeread.KindCard {
			cards = append(cards, e)
		}
	}
	if len(cards) != len(delivered) {
		t.Fatalf("%d cards decoded, %d delivered", len(cards), len(delivered))
	}
	index := func(k FaultKind) int {
		for i, s := range delivered {
			for _, fk := range s.Faults {
				if fk == k {
					return i
				}
			}
		}
		t.Fatalf("no delivered card carries %s", k)
		return -1
	}
	if i := index(FaultUnreadable); !cards[i].Unreadable {
		t.Fatalf("the unreadable card decoded as %+v", cards[i])
	}
	// The composition: the first card the shoe cannot hold is the
	// counterfeit.
	shoe, _ := coup.NewShoe(sim.Plan().Options.Decks)
	refused := -1
	for i, e := range cards {
		if e.Unreadable {
			continue
		}
		if err := shoe.Remove(e.Card); errors.Is(err, coup.ErrNotInShoe) {
			refused = i
			break
		}
	}
	if want := index(FaultImpossible); refused != want {
		t.Fatalf("the shoe first refuses card %d, the counterfeit is card %d", refused, want)
	}
	if protocol != ProtocolV1 {
		return // Bee-Tek has no buttons: extra and early cards look like any other
	}
	early, extra := byKind[FaultEarly][0].Seqs[0], byKind[FaultExtra][0].Seqs[0]
	var coupCards []coup.Card
	open := true // betting open: after REVEAL or BURNDONE, until NOMOREBETS
	for _, e := range events {
		switch {
		case e.Kind == shoeread.KindButton && e.Button == shoeread.ButtonNoMoreBets:
			open = false
		case e.Kind == shoeread.KindButton && (e.Button == shoeread.ButtonReveal || e.Button == shoeread.ButtonBurnDone):
			open, coupCards = true, coupCards[:0]
		case e.Kind == shoeread.KindCard && e.Seq == early:
			if !open {
				t.Fatalf("the early card %d came after NOMOREBETS", early)
			}
		case e.Kind == shoeread.KindCard && e.Seq == extra:
			if _, err := coup.Next(append(coupCards, e.Card)); !errors.Is(err, coup.ErrExtraCard) {
				t.Fatalf("the extra card %d after %s: the tableau says %v", extra, coup.FormatCards(coupCards), err)
			}
		case e.Kind == shoeread.KindCard && !open:
			coupCards = append(coupCards, e.Card)
		}
	}
}
