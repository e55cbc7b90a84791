package shoesim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/shoeread"
)

// Line is where a shoe's bytes go: a pseudo-terminal (PTY), a real serial
// port (Port), or memory in tests.
type Line interface {
	// Write sends p whole or fails; it gives up when ctx is done.
	Write(ctx context.Context, p []byte) error
	// Unplug takes the line away, as pulling the cable does; Replug brings
	// it back.
	Unplug() error
	Replug() error
}

// Sent is one thing the shoe put on the line, or meant to: a sentence
// (dropped ones included) or a burst of noise.
type Sent struct {
	// Seq is the sentence's sequence number (v1; 0 for Bee-Tek and noise);
	// for a heartbeat, the number of the last sentence before it, which the
	// heartbeat repeats rather than taking a new one.
	Seq uint32
	// Event is the sentence as the shoe meant it, Seq included; the zero
	// Event for noise.
	Event shoeread.Event
	// Truth is the card that left the shoe (for an unreadable card, the
	// card it really was).
	Truth coup.Card
	// Bytes are what went on the line: nil for a dropped sentence.
	Bytes   []byte
	Noise   bool
	Dropped bool
	Corrupt bool
	// Heartbeat: sent by the shoe on its own, not by the plan.
	Heartbeat bool
	// Faults are the kinds of the faults that made or altered it.
	Faults []FaultKind
	At     Position
	// Offset is how many bytes the Sim had written before this, so a test
	// can tell which bytes it had read when.
	Offset int64
	// Time is when the shoe sent it (or held it, while unplugged), by the
	// Sim's Clock.
	Time time.Time
}

// Injected is the log of one fault as the Sim applied it.
type Injected struct {
	Fault Fault
	At    Position
	// Seqs are the sequence numbers of the sentences it made or altered
	// (none for noise, silence and unplug, and for Bee-Tek).
	Seqs []uint32
	// Offset is how many bytes had been written when it began.
	Offset int64
	// Time is when it began, by the Sim's Clock.
	Time time.Time
}

// Record is everything a Sim has done, for a test to compare with what the
// controller saw.
type Record struct {
	Sent   []Sent
	Faults []Injected
}

// Sim runs a Plan over a Line: see the package comment. Make one with New
// and call Run once.
type Sim struct {
	plan  *Plan
	line  Line
	clock clock.Clock
	log   *slog.Logger

	seq      uint32    // the last sequence number used; heartbeats carry it
	at       Position  // where the plan is, for heartbeats
	lastSent time.Time // when the line last carried a byte, for heartbeats
	plugged  bool
	replugAt time.Time
	held     [][]byte // output while unplugged
	written  int64

	holding func() bool // HoldWhile's: the dealer waits while it says so
	betting func() bool // WaitForBetting's: betting is open at the table

	mu  sync.Mutex
	rec Record
	// faultIdx maps a fault (by its place in Plan.Faults) to its Injected.
	faultIdx map[*Fault]int
}

// New plans the run opts describe and returns a Sim that will play it on
// line. Its clock paces the dealing, heartbeats, silences and unplugs
// (clock.Real when nil; a virtual clock deals at full speed), log is
// slog.Default() when nil.
func New(opts Options, line Line, clk clock.Clock, log *slog.Logger) (*Sim, error) {
	p, err := NewPlan(opts)
	if err != nil {
		return nil, err
	}
	if line == nil {
		return nil, errors.New("shoesim: no line to send on")
	}
	if log == nil {
		log = slog.Default()
	}
	return &Sim{plan: p, line: line, clock: clock.Or(clk), log: log, plugged: true, faultIdx: map[*Fault]int{}}, nil
}

// Plan is the run the Sim plays.
func (s *Sim) Plan() *Plan { return s.plan }

// Record returns a copy of what the Sim has done so far; it may be called
// while Run runs.
func (s *Sim) Record() Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Record{Sent: slices.Clone(s.rec.Sent), Faults: slices.Clone(s.rec.Faults)}
	for i := range r.Faults {
		r.Faults[i].Seqs = slices.Clone(r.Faults[i].Seqs)
	}
	return r
}

// Run plays the plan: it returns when the last step is on the line (after
// replugging, if it ended unplugged), or with ctx's error. With linger, it
// then stays, as an idle shoe does, sending heartbeats until ctx is done.
func (s *Sim) Run(ctx context.Context, linger bool) error {
	s.lastSent = s.clock.Now()
	for i := range s.plan.Steps {
		if err := s.step(ctx, &s.plan.Steps[i]); err != nil {
			return err
		}
	}
	if !s.plugged {
		if err := s.wait(ctx, s.replugAt.Sub(s.clock.Now()), false); err != nil {
			return err
		}
	}
	s.log.Info("shoe simulator: plan done", "last_seq", s.seq, "bytes", s.written)
	if !linger {
		return nil
	}
	for {
		if err := s.wait(ctx, time.Hour, true); err != nil {
			return err
		}
	}
}

// HoldWhile makes the dealer wait before each sentence while held says
// so, as a dealer waits while the table is suspended (the shoe keeps its
// heartbeats; it always sends its HELO first), and once let go waits a
// betting time (Options.CoupPace) before going on, so the table has its
// result time and opens betting again. Call it before Run; held is polled
// every HoldPoll.
func (s *Sim) HoldWhile(held func() bool) { s.holding = held }

// HoldPoll is how often a held dealer looks again.
const HoldPoll = 250 * time.Millisecond

// WaitForBetting makes the dealer call "no more bets" only once open says
// the table has betting open, as a dealer watches the table's display
// before closing bets. A controller on a loaded machine may read the shoe
// late; without this the simulated dealer would run ahead of the table and
// make misdeals no dealer made. Call it before Run; open is polled every
// BettingPoll (heartbeats go on meanwhile).
func (s *Sim) WaitForBetting(open func() bool) { s.betting = open }

// BettingPoll is how often a dealer waiting for betting to open looks again.
const BettingPoll = 5 * time.Millisecond

func (s *Sim) step(ctx context.Context, st *Step) error {
	s.at = Position{Shoe: st.At.Shoe, Coup: st.At.Coup}
	switch st.Op {
	case OpSend:
		held := false
		for s.holding != nil && s.seq > 0 && s.holding() { // HELO first: a shoe beats only once started
			held = true
			if err := s.wait(ctx, HoldPoll, true); err != nil {
				return err
			}
		}
		if held {
			// Let go, the dealer gives the table its time again (the result
			// to stand, betting to open) before going on, as after a coup.
			if err := s.wait(ctx, s.plan.Options.CoupPace, true); err != nil {
				return err
			}
		}
		if s.betting != nil && st.Event.Kind == shoeread.KindButton && st.Event.Button == shoeread.ButtonNoMoreBets {
			for !s.betting() {
				if err := s.wait(ctx, BettingPoll, true); err != nil {
					return err
				}
			}
		}
		return s.send(ctx, st)
	case OpPause:
		return s.wait(ctx, st.For, true)
	case OpNoise:
		s.inject(st, nil)
		s.record(Sent{Noise: true, Bytes: st.Noise, Faults: kinds(st.Faults), At: st.At, Offset: s.written, Time: s.clock.Now()})
		return s.output(ctx, st.Noise)
	case OpSilence:
		s.inject(st, nil)
		return s.wait(ctx, st.For, false)
	case OpUnplug:
		s.inject(st, nil)
		return s.unplug(ctx, st.For)
	}
	return fmt.Errorf("shoesim: unknown step %s", st.Op)
}

// send numbers, encodes and sends (or drops) one sentence of the plan.
func (s *Sim) send(ctx context.Context, st *Step) error {
	e := st.Event
	v1 := s.plan.Options.Protocol == ProtocolV1
	if !v1 && e.Kind != shoeread.KindCard && e.Kind != shoeread.KindStatus {
		return nil // Bee-Tek has no such sentence
	}
	if v1 {
		s.seq = nextSeq(s.seq)
		e.Seq = s.seq
	}
	b, err := s.encode(e, st.Corrupt)
	if err != nil {
		return fmt.Errorf("shoesim: %s: %w", st.At, err)
	}
	sent := Sent{Seq: e.Seq, Event: e, Truth: st.Truth, Bytes: b, Dropped: st.Drop, Corrupt: st.Corrupt, Faults: kinds(st.Faults), At: st.At, Offset: s.written, Time: s.clock.Now()}
	if st.Drop {
		sent.Bytes = nil
	}
	s.inject(st, &sent)
	s.record(sent)
	s.log.Debug("shoe sentence", "seq", e.Seq, "kind", e.Kind, "at", st.At.String(), "dropped", st.Drop, "bytes", string(b))
	if st.Drop {
		// The shoe sent it; the wire lost it. Its heartbeat timer restarts
		// all the same.
		s.lastSent = s.clock.Now()
		return nil
	}
	return s.output(ctx, b)
}

// nextSeq counts 1 to 2^32-1 and round again, never 0.
func nextSeq(n uint32) uint32 {
	if n == ^uint32(0) {
		return 1
	}
	return n + 1
}

func (s *Sim) encode(e shoeread.Event, corrupt bool) ([]byte, error) {
	if s.plan.Options.Protocol == ProtocolBeetek {
		b, err := shoeread.AppendBeetek(nil, e)
		if err == nil && corrupt {
			b = garble(b)
		}
		return b, err
	}
	b, err := shoeread.AppendV1(nil, e)
	if err == nil && corrupt {
		b = badChecksum(b)
	}
	return b, err
}

// badChecksum rewrites a v1 sentence's checksum to a wrong one.
func badChecksum(b []byte) []byte {
	i := bytes.LastIndexByte(b, '*')
	if i < 0 || i+3 > len(b) {
		return b
	}
	hi, lo := unhex(b[i+1]), unhex(b[i+2])
	wrong := (hi<<4 | lo) ^ 0x5A
	const digits = "0123456789ABCDEF"
	b[i+1], b[i+2] = digits[wrong>>4], digits[wrong&0xF]
	return b
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return 0
}

// garble spoils a Bee-Tek card the way noise on an unchecksummed line
// does: the byte before its closing '>' becomes '#', naming no card.
func garble(b []byte) []byte {
	if i := bytes.LastIndexByte(b, '>'); i > 0 {
		b[i-1] = '#'
	}
	return b
}

// output puts b on the line, or holds it while unplugged.
func (s *Sim) output(ctx context.Context, b []byte) error {
	if !s.plugged {
		s.held = append(s.held, b)
		return nil
	}
	if err := s.line.Write(ctx, b); err != nil {
		return fmt.Errorf("shoesim: write: %w", err)
	}
	s.written += int64(len(b))
	s.lastSent = s.clock.Now()
	return nil
}

// wait lets d pass. With heartbeats, a v1 shoe sends HB whenever the line
// has been idle for the heartbeat interval; without (a silence), it sends
// nothing. It replugs the line when an unplug is over.
func (s *Sim) wait(ctx context.Context, d time.Duration, heartbeats bool) error {
	heartbeats = heartbeats && s.plan.Options.Protocol == ProtocolV1
	end := s.clock.Now().Add(d)
	for {
		now := s.clock.Now()
		if !s.plugged && !now.Before(s.replugAt) {
			if err := s.replug(ctx); err != nil {
				return err
			}
		}
		// A heartbeat due just as the wait ends gives way to whatever the
		// shoe sends next; if that is another wait, it goes out first thing.
		if !now.Before(end) {
			return ctx.Err()
		}
		if heartbeats && s.plugged && now.Sub(s.lastSent) >= s.plan.Options.Heartbeat {
			if err := s.heartbeat(ctx); err != nil {
				return err
			}
			continue
		}
		wake := end
		if heartbeats && s.plugged {
			if hb := s.lastSent.Add(s.plan.Options.Heartbeat); hb.Before(wake) {
				wake = hb
			}
		}
		if !s.plugged && s.replugAt.Before(wake) {
			wake = s.replugAt
		}
		if err := clock.Sleep(ctx, s.clock, wake.Sub(now)); err != nil {
			return err
		}
	}
}

// heartbeat sends HB carrying the last sequence number used, without
// taking a new one (docs/shoe-protocol.md, section 5): a controller that
// records every sentence but heartbeats then sees no gap when it restarts
// while nothing is dealt.
func (s *Sim) heartbeat(ctx context.Context) error {
	e := shoeread.Event{Kind: shoeread.KindHeartbeat, Seq: s.seq}
	b, err := shoeread.AppendV1(nil, e)
	if err != nil {
		return fmt.Errorf("shoesim: heartbeat: %w", err)
	}
	s.record(Sent{Seq: e.Seq, Event: e, Bytes: b, Heartbeat: true, At: s.at, Offset: s.written, Time: s.clock.Now()})
	return s.output(ctx, b)
}

// unplug pulls the cable for d. What the shoe sends meanwhile is held and
// goes out when the line is back.
func (s *Sim) unplug(ctx context.Context, d time.Duration) error {
	if !s.plugged {
		s.replugAt = s.replugAt.Add(d) // pulled again while out: stays out longer
		return nil
	}
	if hook := s.plan.Options.BeforeUnplug; hook != nil {
		if err := hook(ctx, s.written); err != nil {
			return fmt.Errorf("shoesim: before unplug: %w", err)
		}
	}
	if err := s.line.Unplug(); err != nil {
		return fmt.Errorf("shoesim: unplug: %w", err)
	}
	s.plugged = false
	s.replugAt = s.clock.Now().Add(d)
	s.log.Info("shoe unplugged", "for", d)
	return nil
}

func (s *Sim) replug(ctx context.Context) error {
	if err := s.line.Replug(); err != nil {
		return fmt.Errorf("shoesim: replug: %w", err)
	}
	s.plugged = true
	held := s.held
	s.held = nil
	attrs := []any{"held", len(held)}
	if p, ok := s.line.(interface{ Path() string }); ok {
		attrs = append(attrs, "device", p.Path())
	}
	s.log.Info("shoe plugged back in", attrs...)
	for _, b := range held {
		if err := s.output(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// inject logs each fault of st the first time a step carries it, and
// notes the sentence it altered.
func (s *Sim) inject(st *Step, sent *Sent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range st.Faults {
		i, seen := s.faultIdx[f]
		if !seen {
			i = len(s.rec.Faults)
			s.faultIdx[f] = i
			s.rec.Faults = append(s.rec.Faults, Injected{Fault: *f, At: st.At, Offset: s.written, Time: s.clock.Now()})
			s.log.Info("shoe fault injected", "fault", f.String(), "at", st.At.String())
		}
		if sent != nil && sent.Seq != 0 {
			s.rec.Faults[i].Seqs = append(s.rec.Faults[i].Seqs, sent.Seq)
		}
	}
}

func (s *Sim) record(sent Sent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.Sent = append(s.rec.Sent, sent)
}

func kinds(fs []*Fault) []FaultKind {
	if len(fs) == 0 {
		return nil
	}
	out := make([]FaultKind, len(fs))
	for i, f := range fs {
		out[i] = f.Kind
	}
	return out
}
