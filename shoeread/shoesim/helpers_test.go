package shoesim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/shoeread"
)

// memLine is a Line in memory: it keeps every byte written and notes when it
// was unplugged and plugged back, by the clock.
type memLine struct {
	clock   clock.Clock
	buf     bytes.Buffer
	plugged bool
	// plugs notes each Unplug and Replug with the bytes written before it.
	plugs []plugNote
}

type plugNote struct {
	unplug bool
	at     time.Time
	offset int
}

func newMemLine(c clock.Clock) *memLine { return &memLine{clock: c, plugged: true} }

func (l *memLine) Write(ctx context.Context, p []byte) error {
	if !l.plugged {
		return errors.New("memLine: write while unplugged")
	}
	l.buf.Write(p)
	return ctx.Err()
}

func (l *memLine) Unplug() error {
	if !l.plugged {
		return errors.New("memLine: unplugged twice")
	}
	l.plugged = false
	l.plugs = append(l.plugs, plugNote{unplug: true, at: l.clock.Now(), offset: l.buf.Len()})
	return nil
}

func (l *memLine) Replug() error {
	if l.plugged {
		return errors.New("memLine: replugged while plugged")
	}
	l.plugged = true
	l.plugs = append(l.plugs, plugNote{at: l.clock.Now(), offset: l.buf.Len()})
	return nil
}

// epoch is the virtual clocks' start.
var epoch = time.Date(2026, 1, 2, 20, 0, 0, 0, time.UTC)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runMem plays opts into memory on a virtual clock.
func runMem(t *testing.T, opts Options) (*Sim, *memLine) {
	t.Helper()
	clk := clock.NewVirtual(epoch)
	line := newMemLine(clk)
	sim, err := New(opts, line, clk, quietLog())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := sim.Run(context.Background(), false); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sim, line
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code makes now (go test -update rewrites it)\n%s", path, firstDiff(want, got))
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\nwant %s\n got %s", i+1, w, g)
		}
	}
	return ""
}

// render writes an event as the tests compare them. Bee-Tek marks burned
// cards; v1 has no burn marker, so it is left out there.
func render(e shoeread.Event, protocol string) string {
	switch e.Kind {
	case shoeread.KindCard:
		s := fmt.Sprintf("card seq=%d %s", e.Seq, e.Card)
		if e.Unreadable {
			s = fmt.Sprintf("card seq=%d unreadable", e.Seq)
		}
		if e.Burn && protocol == ProtocolBeetek {
			s += " burn"
		}
		return s
	case shoeread.KindButton:
		return fmt.Sprintf("button seq=%d %s", e.Seq, e.Button)
	case shoeread.KindHello:
		return fmt.Sprintf("hello seq=%d %s", e.Seq, e.Text)
	case shoeread.KindStatus:
		return fmt.Sprintf("status seq=%d %s %q", e.Seq, e.Status, e.Text)
	case shoeread.KindGap:
		return fmt.Sprintf("gap %d-%d", e.GapFrom, e.GapTo)
	case shoeread.KindProtocolError:
		return fmt.Sprintf("error %s rejected=%d", shoeread.Reason(e.Err), e.Rejected)
	}
	return fmt.Sprintf("%s seq=%d", e.Kind, e.Seq)
}

// expected is what a controller should decode from what the Sim recorded,
// by the protocol's rules (docs/shoe-protocol.md), not by the decoder's
// code: every sentence that reached the line intact, in order; each burst of
// noise rejected whole; a v1 sentence with a bad checksum rejected, and in
// v1 a gap naming every sentence lost (dropped or rejected) just before the
// next good one, a heartbeat included (it carries the last number sent); a
// garbled Bee-Tek card rejected as a bad card, a dropped one never known.
func expected(rec Record, protocol string) []string {
	var out []string
	var missFrom, missTo uint32
	miss := func(seq uint32) {
		if missFrom == 0 {
			missFrom = seq
		}
		missTo = seq
	}
	for _, s := range rec.Sent {
		switch {
		case s.Noise:
			out = append(out, fmt.Sprintf("error noise rejected=%d", len(s.Bytes)))
		case s.Dropped:
			if protocol == ProtocolV1 {
				miss(s.Seq)
			}
		case s.Corrupt && protocol == ProtocolV1:
			out = append(out, fmt.Sprintf("error checksum rejected=%d", len(s.Bytes)))
			miss(s.Seq)
		case s.Corrupt:
			out = append(out, fmt.Sprintf("error bad_card rejected=%d", len(bytes.TrimSpace(s.Bytes))))
		default:
			if missFrom != 0 {
				out = append(out, fmt.Sprintf("gap %d-%d", missFrom, missTo))
				missFrom = 0
			}
			out = append(out, render(s.Event, protocol))
		}
	}
	return out
}

// decoder decodes a shoe's bytes as the controller does, through a
// shoeread.Reader (the driver and the Sequencer), keeping what it saw.
type decoder struct {
	protocol string
	r        *shoeread.Reader
	events   []shoeread.Event
	got      []string
	bytes    int64
}

func newDecoder(t testing.TB, protocol string) *decoder {
	t.Helper()
	d, err := shoeread.New(protocol)
	if err != nil {
		t.Fatal(err)
	}
	return &decoder{protocol: protocol, r: shoeread.NewReader(d)}
}

func (d *decoder) decode(p []byte) {
	d.bytes += int64(len(p))
	for _, e := range d.r.Decode(p) {
		d.events = append(d.events, e)
		d.got = append(d.got, render(e, d.protocol))
	}
}

// sameEvents reports the first difference between two event lists.
func sameEvents(t *testing.T, got, want []string) {
	t.Helper()
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			lo := max(0, i-3)
			t.Fatalf("event %d of %d decoded, %d expected:\n got %q\nwant %q\n(decoded from %d: %q)", i, len(got), len(want), g, w, lo, got[lo:min(len(got), i+3)])
		}
	}
}
