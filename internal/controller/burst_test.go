package controller

// A burst is judged as the dealer dealt it (issue 31): sentences that
// arrive together, after a late start, a stall or a restart, are applied in
// the shoe's order with the phases they were dealt in, whatever the table's
// own timers (the result's hold) say at their arrival.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// burstRig is a shoe on a pseudo-terminal dealing at full speed, whatever
// reads it, and controllers started on its line one after another.
type burstRig struct {
	t                  *testing.T
	ctx                context.Context
	link, trail        string
	priv, pub          string
	tc                 coup.TableConfig
	sim                *shoesim.Sim
	plan               *shoesim.Plan
	line               *heldLine
	simDone            chan struct{}
	simErr             error
	commits            *commitLog
	logs               *syncBuffer
	stopCtl            func()
	controllersStarted int
}

// newBurstRig makes the shoe, opts dealt at full speed on a virtual clock,
// and the table's procedure as the shipped config has it: the result
// stands three seconds, the dealer closes betting. The shoe does not deal
// until start is called.
func newBurstRig(t *testing.T, opts shoesim.Options) *burstRig {
	t.Helper()
	dir := t.TempDir()
	priv, pub, err := audit.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := coup.BuiltinProfile(coup.ProfileClassic)
	if err != nil {
		t.Fatal(err)
	}
	tc := coup.DefaultTableConfig(p)
	if tc.ResultTime < 3*time.Second || tc.BettingTime != 0 || tc.Rules != coup.CurrentRules {
		t.Fatalf("the default procedure changed: %+v", tc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &burstRig{t: t, ctx: ctx, link: filepath.Join(dir, "shoe"), trail: filepath.Join(dir, "trail.db"), priv: priv, pub: pub, tc: tc,
		simDone: make(chan struct{}), commits: newCommitLog(), logs: &syncBuffer{}}
	pty, err := shoesim.OpenPTY(r.link)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.line = &heldLine{Line: pty, release: make(chan struct{})}
	r.sim, err = shoesim.New(opts, r.line, clock.NewVirtual(epoch), slog.New(slog.NewTextHandler(r.logs, nil)).With("part", "shoe"))
	if err != nil {
		cancel()
		pty.Close()
		t.Fatal(err)
	}
	r.plan = r.sim.Plan()
	t.Cleanup(func() {
		if r.stopCtl != nil {
			r.stopCtl()
		}
		cancel()
		awaitSim(t, r.simDone, &r.simErr, guard)
		pty.Close()
		if t.Failed() {
			t.Logf("last log lines:\n%s", r.logs.tail(80))
		}
	})
	return r
}

// deal lets the shoe deal its whole plan, at full speed: into the
// pseudo-terminal's buffer while nothing reads it, where it waits.
func (r *burstRig) deal() {
	go func() {
		r.simErr = r.sim.Run(r.ctx, false)
		close(r.simDone)
	}()
}

// start starts a controller on the trail (a fresh one the first time) and
// the shoe's line.
func (r *burstRig) start() {
	r.t.Helper()
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := config.Config{
		TableID: "BURST-01",
		Shoe: config.ShoeSection{Driver: "v1", Port: device.Config{
			Path: r.link, Baud: shoesim.DefaultBaud[shoesim.ProtocolV1], SilentAfter: device.Off,
			BackoffMin: device.Duration(5 * time.Millisecond), BackoffMax: device.Duration(50 * time.Millisecond),
		}.WithDefaults()},
		Audit: config.AuditSection{Path: r.trail, CheckpointKey: r.priv},
	}
	ctx, cancel := context.WithCancel(r.ctx)
	ctl, err := Start(ctx, cfg, r.tc, log.With("part", "controller"), Hooks{OnCommit: r.commits.add})
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	r.controllersStarted++
	done := make(chan error, 1)
	go func() { done <- ctl.Run(ctx) }()
	r.stopCtl = func() {
		cancel()
		awaitStop(r.t, fmt.Sprintf("controller %d", r.controllersStarted), done, guard, nil)
		r.stopCtl = nil
	}
}

// awaitRecorded waits until the controller has recorded the shoe's
// sentence seq.
func (r *burstRig) awaitRecorded(seq uint32) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, guard)
	defer cancel()
	if _, err := r.commits.await(ctx, 0, func(c audit.Commit) bool { return c.Input.ShoeSeq == seq && c.Input.Kind != coup.InGap }); err != nil {
		r.t.Fatalf("waiting for shoe sentence %d to be recorded: %v", seq, err)
	}
}

// lastInput is the last sentence the shoe sent that the controller records
// as an input.
func (r *burstRig) lastInput() shoesim.Sent {
	r.t.Helper()
	sent := r.sim.Record().Sent
	for i := len(sent) - 1; i >= 0; i-- {
		if makesInput(sent[i]) {
			return sent[i]
		}
	}
	r.t.Fatal("the shoe sent nothing")
	return shoesim.Sent{}
}

// check finds in the commits every coup of the plan, in order, with its
// cards and result, and no alert and no ignored sentence of the shoe; then
// verifies and replays the trail.
func (r *burstRig) check() {
	r.t.Helper()
	var results []coup.Event
	for _, c := range r.commits.since(0) {
		for _, e := range c.Events {
			switch {
			case e.Kind == coup.EvAlert:
				r.t.Errorf("alert %s: %s (shoe sentence %d)", e.Alert.Kind, e.Alert.Message, c.Input.ShoeSeq)
			case e.Kind == coup.EvIgnored && c.Input.ShoeSeq > 0:
				r.t.Errorf("shoe sentence %d (%s) ignored: %s", c.Input.ShoeSeq, c.Input, e.Reason)
			case e.Kind == coup.EvCoupResult:
				results = append(results, e)
			}
		}
	}
	type dealt struct {
		shoe, coup int
		cards      []coup.Card
	}
	var want []dealt
	for s, sh := range r.plan.Shoes {
		for c, cp := range sh.Coups {
			want = append(want, dealt{s + 1, c + 1, cp.Cards})
		}
	}
	if len(results) != len(want) {
		r.t.Fatalf("%d coups recorded, the shoe dealt %d", len(results), len(want))
	}
	for i, e := range results {
		w := want[i]
		if e.Shoe != w.shoe || e.Coup != w.coup || !slices.Equal(e.Cards, w.cards) {
			r.t.Fatalf("shoe %d coup %d recorded as shoe %d coup %d %s; the shoe dealt %s", w.shoe, w.coup, e.Shoe, e.Coup, coup.FormatCards(e.Cards), coup.FormatCards(w.cards))
		}
		checkCoup(r.t, fmt.Sprintf("shoe %d coup %d", w.shoe, w.coup), coup.CoupRecord{Cards: dealtCards(e.Cards), Result: e.Result}, w.cards)
	}
	if r.stopCtl != nil {
		r.stopCtl()
	}
	(&rig{t: r.t, trail: r.trail, pubKey: r.pub, tc: r.tc}).checkTrail()
}

func dealtCards(cs []coup.Card) []coup.DealtCard {
	out := make([]coup.DealtCard, len(cs))
	for i, c := range cs {
		out[i] = coup.DealtCard{Card: c}
	}
	return out
}

// TestBurstWholeShoeLateStart: two whole shoes' sentences, dealt while no
// controller read them, reach a fresh controller in one burst (the floor
// demo's controller started seconds after its shoe). Every coup is
// recorded as dealt and nothing is misplaced: each NOMOREBETS, and the
// second shoe's NEWSHOE, read while the last coup's result still stood by
// the table's clock, ends that result's hold (the rules before ignored them
// and made the next card an extra_card at coup 1).
func TestBurstWholeShoeLateStart(t *testing.T) {
	r := newBurstRig(t, shoesim.Options{Seed: 3108, Shoes: 2})
	r.deal()
	// The shoe deals into the line's buffer until it is full, then waits.
	testenv.Eventually(t, guard, "the shoe to fill the line's buffer", func() bool { return len(r.sim.Record().Sent) > 40 })
	r.start()
	<-r.simDone
	last := r.lastInput()
	r.awaitRecorded(last.Seq)
	t.Logf("%d sentences of two shoes, %d and %d coups, in one burst", last.Seq, len(r.plan.Shoes[0].Coups), len(r.plan.Shoes[1].Coups))
	r.check()
}

// TestBurstAfterRestart: the controller stops between coups mid-shoe; the
// shoe deals on, its sentences kept in the line's buffer, and the next
// start reads them in one burst (the backlog: no heartbeat between them,
// so all are judged at the time the controller last recorded). The coups
// dealt meanwhile are recorded as dealt, with no alert.
func TestBurstAfterRestart(t *testing.T) {
	r := newBurstRig(t, shoesim.Options{Seed: 3109, Coups: 12})
	r.line.holdAt = 4 // the fourth NOMOREBETS waits
	r.start()
	r.deal()
	testenv.Eventually(t, guard, "the shoe to reach coup 4", r.line.held)
	// Everything before it recorded (the shoe records the held one as sent
	// before it writes it), the controller stops; the shoe deals on.
	r.awaitRecorded(r.lastInput().Seq - 1)
	r.stopCtl()
	close(r.line.release)
	<-r.simDone
	r.start()
	last := r.lastInput()
	r.awaitRecorded(last.Seq)
	r.plan.Shoes = r.plan.Shoes[:1]
	r.plan.Shoes[0].Coups = r.plan.Shoes[0].Coups[:12]
	r.check()
}

// heldLine is the shoe's line, holding the holdAt-th NOMOREBETS (0: none)
// until release is closed.
type heldLine struct {
	shoesim.Line
	holdAt  int
	release chan struct{}

	mu      sync.Mutex
	nmb     int
	holding bool
}

func (l *heldLine) Write(ctx context.Context, p []byte) error {
	if bytes.Contains(p, []byte(",NOMOREBETS*")) {
		l.mu.Lock()
		l.nmb++
		hold := l.nmb == l.holdAt
		l.holding = hold
		l.mu.Unlock()
		if hold {
			select {
			case <-l.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return l.Line.Write(ctx, p)
}

// held reports the line holding its NOMOREBETS.
func (l *heldLine) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holding
}
