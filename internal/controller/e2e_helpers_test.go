package controller

// The harness of the end-to-end tests (e2e_test.go): the shoe simulator
// writes to a pseudo-terminal through a gate the test holds, the controller
// reads it through the real serial path (device.Link on the simulator's
// symlink, shoeread.Reader, audit.Recorder), and the test watches what the
// controller commits. The truth is always the simulator's own record of what
// it sent and its plan of what it dealt.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/browsertest"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// childEnv makes the test binary act as `tablectl run --config FILE` (see
// TestMain: the same RunFile the command calls), so the restart tests run
// the controller as a process of its own without building a second binary.
const childEnv = "TABLECTL_E2E_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild(os.Args[1:]))
	}
	code := m.Run()
	browsertest.CloseShared() // the demo's and the pit console's browser tests share one
	os.Exit(code)
}

// runChild is `tablectl run --config FILE` as the command runs it, under
// the open-file limit nofileEnv names when it is set (a unit's
// LimitNOFILE).
func runChild(args []string) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if v := os.Getenv(nofileEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "test child: %s=%s: %v\n", nofileEnv, v, err)
			return 2
		}
	}
	if len(args) != 3 || args[0] != "run" || args[1] != "--config" {
		fmt.Fprintf(os.Stderr, "test child: want run --config FILE, got %q\n", args)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := RunFile(ctx, args[2], config.MQTTOverride{}, slog.Default()); err != nil {
		fmt.Fprintf(os.Stderr, "tablectl run: %v\n", err)
		return 1
	}
	return 0
}

// verifyTrail fails the test unless the trail verifies, as `tablectl audit
// verify --pubkey` does: chain, triggers and every checkpoint's signature.
func verifyTrail(t testing.TB, trail, pubKeyFile string) {
	t.Helper()
	if !trailVerifies(t, trail, pubKeyFile) {
		t.FailNow()
	}
}

// trailVerifies reports whether the trail verifies, logging the findings.
func trailVerifies(t testing.TB, trail, pubKeyFile string) bool {
	t.Helper()
	pub, err := audit.LoadPublicKey(pubKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), trail, audit.VerifyOptions{PublicKeys: []ed25519.PublicKey{pub}})
	if err != nil {
		t.Errorf("verify %s: %v", trail, err)
		return false
	}
	if !rep.OK() || !rep.SignaturesChecked {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Errorf("verify %s: signatures checked %v, %d findings:\n%s", trail, rep.SignaturesChecked, len(rep.Findings), b.String())
		return false
	}
	return true
}

// guard bounds every wait: it only turns a hang into a failure. The tests
// synchronise on commits and on the gate, never on time.
const guard = 45 * time.Second

// epoch is the simulator's virtual clock's start.
var epoch = time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)

// ---- the gate ----

// gateOp is one thing the simulator does to its line that the gate can
// hold: write a sentence (or noise), or plug the line back in.
type gateOp struct {
	Replug bool
	Sent   shoesim.Sent // what is written; zero for a replug
}

// shoeGate is the simulator's line with the test's hand on it: every write
// and every replug waits for the test's leave, so the test decides how far
// the shoe deals and can act, and check, between any two sentences. Unplug
// passes straight through (Options.BeforeUnplug orders it).
type shoeGate struct {
	line shoesim.Line
	ctx  context.Context
	sim  *shoesim.Sim // set before the Sim runs

	orders  chan func(gateOp) bool // the test: go on through the first op this accepts
	reached chan gateOp            // the gate: that op is done

	// The simulator's goroutine alone touches these.
	stop        func(gateOp) bool
	next        int          // index in the Sim's record of the next Sent to go on the line
	lastWritten shoesim.Sent // the last sentence that went on the line
}

func newShoeGate(ctx context.Context, line shoesim.Line) *shoeGate {
	return &shoeGate{line: line, ctx: ctx, orders: make(chan func(gateOp) bool), reached: make(chan gateOp, 1)}
}

// Write passes one sentence (or burst of noise) when the test allows it.
func (g *shoeGate) Write(ctx context.Context, b []byte) error {
	sent, err := g.upcoming(b)
	if err != nil {
		return err
	}
	err = g.pass(ctx, gateOp{Sent: sent}, func() error { return g.line.Write(ctx, b) })
	if err == nil {
		g.lastWritten = sent
	}
	return err
}

// Unplug is not held: the simulator's BeforeUnplug hook has already waited
// for the controller to read everything written.
func (g *shoeGate) Unplug() error { return g.line.Unplug() }

// Replug is held like a sentence, so the test can act while the line is out.
func (g *shoeGate) Replug() error {
	return g.pass(g.ctx, gateOp{Replug: true}, g.line.Replug)
}

func (g *shoeGate) pass(ctx context.Context, op gateOp, do func() error) error {
	if g.stop == nil {
		select {
		case g.stop = <-g.orders:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := do(); err != nil {
		return err
	}
	if g.stop(op) {
		g.stop = nil
		g.reached <- op
	}
	return nil
}

// upcoming is the Sent whose bytes the simulator is writing: the Sim writes
// what it records, in the order it records it (held output included), so
// it is the next recorded Sent that has bytes.
func (g *shoeGate) upcoming(b []byte) (shoesim.Sent, error) {
	rec := g.sim.Record()
	for ; g.next < len(rec.Sent); g.next++ {
		s := rec.Sent[g.next]
		if s.Bytes == nil {
			continue // dropped: numbered, never on the line
		}
		g.next++
		if !bytes.Equal(s.Bytes, b) {
			return s, fmt.Errorf("e2e gate: the simulator writes %q, its record says %q next", b, s.Bytes)
		}
		return s, nil
	}
	return shoesim.Sent{}, fmt.Errorf("e2e gate: the simulator writes %q, which it has not recorded", b)
}

// release lets the simulator go on until it has done the first op stop
// accepts, and returns that op. It fails the test if the simulator ends its
// run first.
func (g *shoeGate) release(t testing.TB, simEnded <-chan struct{}, simErr *error, what string, stop func(gateOp) bool) gateOp {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	select {
	case g.orders <- stop:
	case <-simEnded:
		t.Fatalf("the shoe ended its run (%v) before %s", *simErr, what)
	case <-timer.C:
		t.Fatalf("the shoe never asked to go on (waiting to send %s)", what)
	}
	select {
	case op := <-g.reached:
		return op
	case <-simEnded:
		// Its last sentence may be the one asked for.
		select {
		case op := <-g.reached:
			return op
		default:
		}
		t.Fatalf("the shoe ended its run (%v) before %s", *simErr, what)
	case <-timer.C:
		t.Fatalf("the shoe never sent %s", what)
	}
	return gateOp{}
}

// ---- what to stop at ----

// sentence says which sentence of the simulator's a test means.
type sentence struct {
	what string
	is   func(shoesim.Sent) bool
}

func coupCard(coupN, k int) sentence {
	return sentence{fmt.Sprintf("card %d of coup %d", k, coupN), func(s shoesim.Sent) bool {
		return s.Event.Kind == shoeread.KindCard && !s.At.Burn && s.At.Shoe == 1 && s.At.Coup == coupN && s.At.Card == k
	}}
}

func burnCard(k int) sentence {
	return sentence{fmt.Sprintf("burn card %d", k), func(s shoesim.Sent) bool {
		return s.Event.Kind == shoeread.KindCard && s.At.Burn && s.At.Shoe == 1 && s.At.Card == k
	}}
}

// button is a dealer button; coupN is 0 for the shoe's NEWSHOE and BURNDONE.
func button(coupN int, b shoeread.Button) sentence {
	return sentence{fmt.Sprintf("%s of coup %d", b, coupN), func(s shoesim.Sent) bool {
		return s.Event.Kind == shoeread.KindButton && s.Event.Button == b && s.At.Shoe == 1 && s.At.Coup == coupN
	}}
}

func nmb(coupN int) sentence    { return button(coupN, shoeread.ButtonNoMoreBets) }
func reveal(coupN int) sentence { return button(coupN, shoeread.ButtonReveal) }

func faulted(k shoesim.FaultKind) sentence {
	return sentence{fmt.Sprintf("the %s sentence", k), func(s shoesim.Sent) bool {
		return slices.Contains(s.Faults, k)
	}}
}

// heartbeat is any heartbeat the shoe sends in the pause before coupN: the
// next one, when the gate is released to it.
func heartbeat(coupN int) sentence {
	return sentence{fmt.Sprintf("a heartbeat before coup %d", coupN), func(s shoesim.Sent) bool {
		return s.Heartbeat && s.At.Shoe == 1 && s.At.Coup == coupN
	}}
}

// lastCard is how many cards the plan deals in coup n of shoe 1.
func lastCard(p *shoesim.Plan, n int) int { return len(p.Shoes[0].Coups[n-1].Cards) }

// makesInput reports whether the controller records a sentence as an input.
func makesInput(s shoesim.Sent) bool {
	return !s.Noise && !s.Dropped && !s.Corrupt && !s.Heartbeat
}

// ---- commits ----

// commitLog keeps every commit the controller makes, in order, for the test
// (and the simulator's unplug hook) to wait on. OnCommit must not block: add
// only appends, and wakes every waiter by closing the channel they hold.
type commitLog struct {
	mu      sync.Mutex
	list    []audit.Commit
	changed chan struct{} // closed, and replaced, at each commit
}

func newCommitLog() *commitLog { return &commitLog{changed: make(chan struct{})} }

func (l *commitLog) add(c audit.Commit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, c)
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *commitLog) since(i int) []audit.Commit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list[min(i, len(l.list)):])
}

// await returns the index of the first commit from index from on that pred
// accepts, waiting for it.
func (l *commitLog) await(ctx context.Context, from int, pred func(audit.Commit) bool) (int, error) {
	for {
		l.mu.Lock()
		n, changed := len(l.list), l.changed
		for i := from; i < n; i++ {
			if pred(l.list[i]) {
				l.mu.Unlock()
				return i, nil
			}
		}
		l.mu.Unlock()
		from = n
		select {
		case <-changed:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
}

// events lists the events of commits, in order.
func events(cs []audit.Commit) []coup.Event {
	var out []coup.Event
	for _, c := range cs {
		out = append(out, c.Events...)
	}
	return out
}

// kinds renders events as their kinds, for messages and comparisons.
func kinds(evs []coup.Event) string {
	ks := make([]string, len(evs))
	for i, e := range evs {
		ks[i] = string(e.Kind)
		if e.Kind == coup.EvAlert && e.Alert != nil {
			ks[i] += "(" + string(e.Alert.Kind) + ")"
		}
	}
	return strings.Join(ks, " ")
}

// alertsRaised are the alerts among events.
func alertsRaised(evs []coup.Event) []coup.Alert {
	var out []coup.Alert
	for _, e := range evs {
		if e.Kind == coup.EvAlert && e.Alert != nil {
			out = append(out, *e.Alert)
		}
	}
	return out
}

func hasEvent(evs []coup.Event, k coup.EventKind) bool {
	return slices.ContainsFunc(evs, func(e coup.Event) bool { return e.Kind == k })
}

// ---- the in-process rig ----

// rig is one table: a simulated shoe on a pseudo-terminal behind a gate, and
// the controller (startController, run) reading it, in this process.
type rig struct {
	t       *testing.T
	ctx     context.Context
	sim     *shoesim.Sim
	plan    *shoesim.Plan
	gate    *shoeGate
	ctl     *Controller
	tc      coup.TableConfig
	commits *commitLog
	cursor  int          // commits the test has looked at
	last    shoesim.Sent // the last sentence the test let through
	logs    *syncBuffer
	trail   string
	pubKey  string
	privKey string
	pty     *shoesim.PTY // the shoe's side of the line, for bytes the simulator would not send

	simEnded chan struct{}
	simErr   error
}

// newRig starts a shoe dealing opts (held at its first sentence) and a
// controller for a table configured tc.
func newRig(t *testing.T, opts shoesim.Options, tc coup.TableConfig) *rig {
	t.Helper()
	dir := t.TempDir()
	keyDir := t.TempDir() // the key is kept off the trail's disk, as in production
	priv, pub, err := audit.GenerateKey(keyDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{t: t, ctx: ctx, tc: tc, commits: newCommitLog(), logs: &syncBuffer{},
		trail: filepath.Join(dir, "trail.db"), pubKey: pub, simEnded: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	pty, link := r.openShoe(cancel, dir, opts, log)
	r.pty = pty

	cfg := config.Config{
		TableID: "E2E-01",
		Shoe: config.ShoeSection{Driver: "v1", Port: device.Config{
			Path: link, Baud: shoesim.DefaultBaud[shoesim.ProtocolV1],
			// The gate holds the shoe for as long as the test takes to act,
			// with no heartbeat: silence is not what these tests are about.
			SilentAfter: device.Off,
			BackoffMin:  device.Duration(5 * time.Millisecond), BackoffMax: device.Duration(50 * time.Millisecond),
		}.WithDefaults()},
		Audit: config.AuditSection{Path: r.trail, CheckpointKey: priv},
	}
	r.ctl, err = Start(ctx, cfg, tc, log.With("part", "controller"), Hooks{OnCommit: r.commits.add})
	if err != nil {
		cancel()
		pty.Close()
		t.Fatalf("startController: %v", err)
	}
	ctlDone := make(chan error, 1)
	go func() { ctlDone <- r.ctl.Run(ctx) }()
	go func() {
		r.simErr = r.sim.Run(ctx, false)
		close(r.simEnded)
	}()
	t.Cleanup(func() {
		cancel()
		awaitStop(t, "the controller", ctlDone, guard, nil)
		if !awaitSim(t, r.simEnded, &r.simErr, guard) {
			return
		}
		pty.Close()
		r.checkTrail()
		if t.Failed() {
			t.Logf("last log lines:\n%s", r.logs.tail(80))
		}
	})
	return r
}

// beforeUnplug runs on the simulator's goroutine before it pulls the cable:
// it waits for the controller to have recorded everything written, so the
// unplug loses nothing but the line.
func (r *rig) beforeUnplug(ctx context.Context, _ int64) error {
	s := r.gate.lastWritten
	if !makesInput(s) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	_, err := r.commits.await(ctx, 0, func(c audit.Commit) bool { return c.Input.ShoeSeq == s.Seq && c.Input.Kind != coup.InGap })
	return err
}

// deal lets the shoe send through the sentence to, waits until the
// controller has recorded it, and returns what the controller committed
// since the test last looked.
func (r *rig) deal(to sentence) (shoesim.Sent, []audit.Commit) {
	r.t.Helper()
	op := r.gate.release(r.t, r.simEnded, &r.simErr, to.what, func(op gateOp) bool { return !op.Replug && to.is(op.Sent) })
	r.last = op.Sent
	if !makesInput(op.Sent) {
		return op.Sent, nil
	}
	cs := r.await(to.what+" recorded", func(c audit.Commit) bool {
		return c.Input.ShoeSeq == op.Sent.Seq && c.Input.Kind != coup.InGap
	})
	return op.Sent, cs
}

// replug lets the shoe plug its line back in (and no further).
func (r *rig) replug() {
	r.t.Helper()
	r.gate.release(r.t, r.simEnded, &r.simErr, "the replug", func(op gateOp) bool { return op.Replug })
}

// await waits for a commit pred accepts and returns the commits since the
// test last looked, that one included.
func (r *rig) await(what string, pred func(audit.Commit) bool) []audit.Commit {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(r.ctx, guard)
	defer cancel()
	i, err := r.commits.await(ctx, r.cursor, pred)
	if err != nil {
		r.t.Fatalf("waiting for %s: %v; committed since: %s", what, err, kinds(events(r.commits.since(r.cursor))))
	}
	cs := r.commits.since(r.cursor)[:i-r.cursor+1]
	r.cursor = i + 1
	return cs
}

// cmd submits a supervisor's command as the command channel will, and
// returns its commit.
func (r *rig) cmd(c coup.Command) audit.Commit {
	r.t.Helper()
	if c.ID == "" {
		c.ID = fmt.Sprintf("cmd-%s-%d", c.Action, len(r.commits.since(0)))
	}
	if c.By == "" {
		c.By = "supervisor-ann"
	}
	var cm audit.Commit
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cm, err = r.ctl.rec.Submit(r.ctx, coup.Input{Kind: coup.InCmd, Command: &c})
	}()
	select {
	case <-done:
	case <-time.After(guard):
		r.t.Fatalf("the controller did not take the %s command", c.Action)
	}
	if err != nil {
		r.t.Fatalf("submit %s: %v", c.Action, err)
	}
	// Move past it, so the next deal shows only what follows.
	if i, err := r.commits.await(r.ctx, r.cursor, func(x audit.Commit) bool {
		return len(x.Records) > 0 && x.Records[0].Seq == cm.Records[0].Seq
	}); err == nil {
		r.cursor = i + 1
	}
	return cm
}

// accepted checks that a command was carried out, and returns its events.
func (r *rig) accepted(c coup.Command) []coup.Event {
	r.t.Helper()
	cm := r.cmd(c)
	if len(cm.Events) == 0 || cm.Events[0].Kind != coup.EvCommandDone {
		r.t.Fatalf("%s %+v: want it accepted, got %s %+v", c.Action, c, kinds(cm.Events), cm.Events)
	}
	return cm.Events
}

// refused checks that a command was refused with a reason saying why, and
// changed nothing.
func (r *rig) refused(c coup.Command, why string) {
	r.t.Helper()
	_, before := r.ctl.rec.View()
	cm := r.cmd(c)
	if len(cm.Events) != 1 || cm.Events[0].Kind != coup.EvCommandRefused {
		r.t.Fatalf("%s %+v: want it refused (%s), got %s %+v", c.Action, c, why, kinds(cm.Events), cm.Events)
	}
	if !strings.Contains(cm.Events[0].Reason, why) {
		r.t.Fatalf("%s refused because %q; want a reason saying %q", c.Action, cm.Events[0].Reason, why)
	}
	if _, after := r.ctl.rec.View(); !sameJSON(before, after) {
		r.t.Fatalf("refused %s changed the table:\nbefore %s\nafter  %s", c.Action, js(before), js(after))
	}
}

// pit is the pit's view of the table.
func (r *rig) pit() coup.View {
	_, p := r.ctl.rec.View()
	return p
}

// expectSuspendedBy checks the table is suspended by exactly one alert of
// kind, needing needs, and returns it.
func (r *rig) expectSuspendedBy(kind coup.AlertKind, needs string) coup.Alert {
	r.t.Helper()
	v := r.pit()
	if !v.Suspended || len(v.Alerts) != 1 || v.Alerts[0].Kind != kind || v.Alerts[0].Needs != needs {
		r.t.Fatalf("want the table suspended by one %s alert needing %s; pit view: suspended=%v alerts=%+v",
			kind, needs, v.Suspended, v.Alerts)
	}
	return v.Alerts[0]
}

// expectLive checks the table is live in phase at coup n.
func (r *rig) expectLive(phase coup.Phase, n int) {
	r.t.Helper()
	v := r.pit()
	if v.Suspended || len(v.Alerts) > 0 || v.Phase != phase || v.Coup != n {
		r.t.Fatalf("want a live table in %s of coup %d; pit view: phase=%s coup=%d suspended=%v (%q) alerts=%+v",
			phase, n, v.Phase, v.Coup, v.Suspended, v.SuspendReason, v.Alerts)
	}
}

// wantCoup is a coup the recall must hold: its number at the table, the
// cards the shoe dealt in it (nil when a misdeal voided it: then they are
// not compared), and whether it was voided.
type wantCoup struct {
	n      int
	cards  []coup.Card
	voided bool
}

// planned is coup n of the plan's shoe 1, as the table should number it.
func planned(p *shoesim.Plan, n int) wantCoup {
	return wantCoup{n: n, cards: p.Shoes[0].Coups[n-1].Cards}
}

// expectRecall checks the last coups of the controller's last-game recall
// against the shoe: their numbers, voids, cards and results.
func (r *rig) expectRecall(want ...wantCoup) {
	r.t.Helper()
	recall := r.ctl.rec.Recall()
	if len(recall) < len(want) {
		r.t.Fatalf("recall has %d coups, want at least %d", len(recall), len(want))
	}
	recall = recall[len(recall)-len(want):]
	for i, w := range want {
		got := recall[i]
		if got.Shoe != 1 || got.Coup != w.n || got.Voided != w.voided {
			r.t.Fatalf("recall %d: shoe %d coup %d voided=%v; want coup %d voided=%v", i, got.Shoe, got.Coup, got.Voided, w.n, w.voided)
		}
		if w.cards != nil {
			checkCoup(r.t, fmt.Sprintf("coup %d", w.n), got, w.cards)
		}
	}
}

// expectRemaining checks the table's count of the shoe against every card
// the shoe sent so far: a card read is out of the shoe whatever became of
// it, an unreadable one once entered by hand (entered), a counterfeit never.
func (r *rig) expectRemaining(entered map[uint32]bool) {
	r.t.Helper()
	left := map[coup.Card]int{}
	total := r.plan.Options.Decks * coup.CardCount
	for i := range coup.CardCount {
		left[coup.CardAt(i)] = r.plan.Options.Decks
	}
	for _, s := range r.sim.Record().Sent {
		if s.Event.Kind != shoeread.KindCard || !makesInput(s) || s.Seq > r.last.Seq ||
			slices.Contains(s.Faults, shoesim.FaultImpossible) || (s.Event.Unreadable && !entered[s.Seq]) {
			continue
		}
		left[s.Truth]--
		total--
	}
	got := r.ctl.rec.Remaining()
	if got.Remaining() != total {
		r.t.Errorf("the table counts %d cards left in the shoe; the shoe has %d", got.Remaining(), total)
	}
	for c, n := range left {
		if got.Count(c) != n {
			r.t.Errorf("the table counts %d of %s left; the shoe has %d", got.Count(c), c, n)
		}
	}
}

// checkTrail verifies the trail the test leaves and replays it: the chain
// and its signed checkpoints hold, and the rules derive every recorded row.
func (r *rig) checkTrail() {
	t := r.t
	ctx := context.Background()
	if !trailVerifies(t, r.trail, r.pubKey) {
		t.Error("the trail does not verify")
	}
	rd, err := audit.OpenReader(ctx, r.trail)
	if err != nil {
		t.Errorf("open trail: %v", err)
		return
	}
	defer rd.Close()
	rp, err := audit.Replay(rd.Events(ctx, audit.Query{}), r.tc, audit.ReplayVisitor{})
	if err != nil {
		t.Errorf("replay: %v", err)
		return
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Errorf("replay: %d differences, first %+v", len(d), d[0])
	}
}

// ---- the truth ----

// checkCoup compares a coup the controller recorded with the cards the
// shoe dealt, and its result with the rules worked out here.
func checkCoup(t testing.TB, what string, got coup.CoupRecord, cards []coup.Card) {
	t.Helper()
	var dealt []coup.Card
	for _, dc := range got.Cards {
		dealt = append(dealt, dc.Card)
	}
	if !slices.Equal(dealt, cards) {
		t.Fatalf("%s: the controller recorded %s, the shoe dealt %s", what, coup.FormatCards(dealt), coup.FormatCards(cards))
	}
	want := truthResult(t, cards)
	if got.Result == nil {
		t.Fatalf("%s: no result recorded", what)
	}
	g := got.Result
	if !slices.Equal(g.Player, want.player) || !slices.Equal(g.Banker, want.banker) ||
		g.PlayerPoint != want.pp || g.BankerPoint != want.bp || g.Winner != want.winner {
		t.Fatalf("%s %s: recorded Player %s (%d) Banker %s (%d) %s; the rules say Player %s (%d) Banker %s (%d) %s",
			what, coup.FormatCards(cards), coup.FormatCards(g.Player), g.PlayerPoint, coup.FormatCards(g.Banker), g.BankerPoint, g.Winner,
			coup.FormatCards(want.player), want.pp, coup.FormatCards(want.banker), want.bp, want.winner)
	}
}

type truth struct {
	player, banker []coup.Card
	pp, bp         int
	winner         coup.Side
}

// truthResult works out a coup's hands, points and winner from its cards in
// the order they left the shoe, by rules.md, independently of coup.Score:
// Player, Banker, Player, Banker; no more on a natural; then the Player's
// third card if Player's point is 0 to 5, and whatever card remains is the
// Banker's. (Whether the Banker draws is the shoe's business: its card
// count says.)
func truthResult(t testing.TB, cards []coup.Card) truth {
	t.Helper()
	point := func(cs []coup.Card) int {
		n := 0
		for _, c := range cs {
			if c.Rank < coup.Ten {
				n += int(c.Rank)
			}
		}
		return n % 10
	}
	if len(cards) < 4 || len(cards) > 6 {
		t.Fatalf("a coup of %d cards: %s", len(cards), coup.FormatCards(cards))
	}
	tr := truth{player: []coup.Card{cards[0], cards[2]}, banker: []coup.Card{cards[1], cards[3]}}
	rest := cards[4:]
	natural := point(tr.player) >= 8 || point(tr.banker) >= 8
	if natural && len(rest) > 0 {
		t.Fatalf("a natural with more than four cards: %s", coup.FormatCards(cards))
	}
	if len(rest) > 0 && point(tr.player) <= 5 {
		tr.player, rest = append(tr.player, rest[0]), rest[1:]
	}
	tr.banker = append(tr.banker, rest...)
	tr.pp, tr.bp = point(tr.player), point(tr.banker)
	switch {
	case tr.pp > tr.bp:
		tr.winner = coup.SidePlayer
	case tr.bp > tr.pp:
		tr.winner = coup.SideBanker
	default:
		tr.winner = coup.SideTie
	}
	return tr
}

// ---- configuration ----

// tableConfig is the house procedure the in-process tests use: the classic
// profile, the first card exposed and its value burned, burn done by button,
// reveal by button, and (since the simulated dealer does not wait) the next
// coup taking bets as soon as a result is revealed.
func tableConfig(t testing.TB, mod func(*coup.TableConfig)) coup.TableConfig {
	t.Helper()
	p, err := coup.BuiltinProfile(coup.ProfileClassic)
	if err != nil {
		t.Fatal(err)
	}
	tc := coup.DefaultTableConfig(p)
	tc.ResultTime = 0
	if mod != nil {
		mod(&tc)
	}
	if err := tc.Validate(); err != nil {
		t.Fatal(err)
	}
	return tc
}

// fault parses a fault as `tablectl shoe-sim --fault` does.
func fault(t testing.TB, spec string) shoesim.Fault {
	t.Helper()
	f, err := shoesim.ParseFault(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// planFault finds the first coup from coup 2 on where a fault of kind at
// card k leaves that card the coup's last, as a dealer's misdeal at the
// last card; the tests then deal on after the coup is voided without the
// rest of the coup in the way.
func planFault(t testing.TB, opts shoesim.Options, kind shoesim.FaultKind, k int) (shoesim.Options, int) {
	t.Helper()
	for n := 2; n < 12; n++ {
		o := opts
		o.Faults = append(slices.Clone(opts.Faults), fault(t, fmt.Sprintf("%s@%d.%d", kind, n, k)))
		p, err := shoesim.NewPlan(o)
		if err == nil && lastCard(p, n) == k {
			return o, n
		}
	}
	t.Fatalf("seed %d has no coup with %s at its last card %d", opts.Seed, kind, k)
	return opts, 0
}

func sameJSON(a, b any) bool { return js(a) == js(b) }

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// syncBuffer is a log sink the controller's goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimRight(b.buf.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// ---- the controller as a process ----

// child is one `tablectl run --config FILE` process.
type child struct {
	cmd  *exec.Cmd
	out  *childLog
	done chan error
}

// childLog takes a child's stderr: it keeps the lines, notes a data race,
// and wakes whoever waits on the trail at each line.
type childLog struct {
	mu    sync.Mutex
	lines []string
	part  []byte
	race  bool
	wake  chan struct{}
}

func (l *childLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		line := string(l.part[:i])
		l.part = l.part[i+1:]
		l.lines = append(l.lines, line)
		if strings.Contains(line, "DATA RACE") {
			l.race = true
		}
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *childLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines[max(0, len(l.lines)-n):], "\n")
}

// processRig runs the controller as a process of its own on a gated
// simulator in this one, and watches the process's trail.
type processRig struct {
	t        *testing.T
	ctx      context.Context
	config   string
	link     string
	trail    string
	pubKey   string
	tc       coup.TableConfig
	sim      *shoesim.Sim
	simClock *clock.Fake // the simulated dealer's virtual time
	plan     *shoesim.Plan
	gate     *shoeGate
	simEnded chan struct{}
	simErr   error
	wake     chan struct{}
	logs     []*childLog // one per process started
	ctl      *child      // the process running, if any
	rows     []audit.Record
	// exe is the program start runs; empty is this test binary.
	exe string
}

// configTemplate is the controller's config file for the process tests.
const configTemplate = "testdata/e2e/controller.json.tmpl"

func newProcessRig(t *testing.T, opts shoesim.Options) *processRig {
	t.Helper()
	return newProcessRigResult(t, opts, "1ns")
}

// newProcessRigResult is newProcessRig with the table's result time.
func newProcessRigResult(t *testing.T, opts shoesim.Options, resultTime string) *processRig {
	t.Helper()
	dir := t.TempDir()
	priv, pub, err := audit.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &processRig{t: t, ctx: ctx, link: filepath.Join(dir, "shoe"), trail: filepath.Join(dir, "trail.db"),
		pubKey: pub, simEnded: make(chan struct{}), wake: make(chan struct{}, 1)}
	r.config = filepath.Join(dir, "controller.json")
	tmpl, err := template.ParseFiles(configTemplate)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var doc bytes.Buffer
	if err := tmpl.Execute(&doc, map[string]string{"Port": js(r.link), "Key": js(priv), "ResultTime": js(resultTime)}); err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := os.WriteFile(r.config, doc.Bytes(), 0o644); err != nil {
		cancel()
		t.Fatal(err)
	}
	c, tc, err := config.Parse(doc.Bytes(), dir)
	if err != nil || c.Audit.Path != r.trail {
		cancel()
		t.Fatalf("%s: %v (trail %q)", configTemplate, err, c.Audit.Path)
	}
	r.tc = tc

	pty, err := shoesim.OpenPTY(r.link)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.gate = newShoeGate(ctx, pty)
	logs := &syncBuffer{}
	r.simClock = clock.NewVirtual(epoch)
	r.sim, err = shoesim.New(opts, r.gate, r.simClock, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		cancel()
		pty.Close()
		t.Fatal(err)
	}
	r.gate.sim = r.sim
	r.plan = r.sim.Plan()
	go func() {
		r.simErr = r.sim.Run(ctx, false)
		close(r.simEnded)
	}()
	t.Cleanup(func() {
		if r.ctl != nil {
			r.ctl.cmd.Process.Signal(syscall.SIGKILL)
			<-r.ctl.done
		}
		cancel()
		<-r.simEnded
		pty.Close()
		for i, l := range r.logs {
			if l.race {
				t.Errorf("controller process %d: the race detector found a data race:\n%s", i+1, l.tail(60))
			}
		}
		if t.Failed() && len(r.logs) > 0 {
			t.Logf("last lines of controller process %d:\n%s", len(r.logs), r.logs[len(r.logs)-1].tail(60))
		}
	})
	return r
}

// start runs `tablectl run --config FILE` and waits until it has rebuilt
// the table from the trail, recorded its start and opened the shoe's port.
// It returns the start row's body.
func (r *processRig) start() map[string]any {
	r.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		r.t.Fatal(err)
	}
	if r.exe != "" {
		exe = r.exe
	}
	l := &childLog{wake: r.wake}
	cmd := exec.Command(exe, "run", "--config", r.config)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout = io.Discard
	cmd.Stderr = l
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	c := &child{cmd: cmd, out: l, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait() }()
	r.ctl = c
	r.logs = append(r.logs, l)
	from := len(r.rows)
	var body map[string]any
	r.waitRows(fmt.Sprintf("controller process %d to start", len(r.logs)), func(rows []audit.Record) bool {
		started := -1
		for i := from; i < len(rows); i++ {
			if rows[i].Kind == audit.KindStart {
				started = i
			}
		}
		if started < 0 {
			return false
		}
		for _, row := range rows[started+1:] {
			if in, ok := inputOf(row); ok && in.Kind == coup.InLink && in.Link == coup.LinkConnected {
				json.Unmarshal(rows[started].Body, &body)
				return true
			}
		}
		return false
	})
	return body
}

// kill ends the controller with SIGKILL: no goodbye, no last checkpoint.
func (r *processRig) kill() {
	r.t.Helper()
	r.ctl.cmd.Process.Signal(syscall.SIGKILL)
	err := <-r.ctl.done
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		r.t.Fatalf("controller process %d: %v, want killed by SIGKILL", len(r.logs), err)
	}
	r.ctl = nil
}

// stop ends the controller as an operator does, with SIGTERM: it must sign
// its last checkpoint, close the trail and exit 0.
func (r *processRig) stop() {
	r.t.Helper()
	r.ctl.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.ctl.done:
		if err != nil {
			r.t.Fatalf("controller process %d on SIGTERM: %v\n%s", len(r.logs), err, r.ctl.out.tail(30))
		}
	case <-time.After(guard):
		r.t.Fatalf("controller process %d ignored SIGTERM", len(r.logs))
	}
	r.ctl = nil
}

// send lets the shoe send through the sentence to (held back from nobody:
// the controller may be down) and returns it.
func (r *processRig) send(to sentence) shoesim.Sent {
	r.t.Helper()
	op := r.gate.release(r.t, r.simEnded, &r.simErr, to.what, func(op gateOp) bool { return !op.Replug && to.is(op.Sent) })
	return op.Sent
}

// deal sends through the sentence to and waits until the controller has
// recorded it; after a REVEAL, also until the result time has passed and
// the next coup takes bets (or the shoe ended), as a dealer waits.
func (r *processRig) deal(to sentence) shoesim.Sent {
	r.t.Helper()
	s := r.send(to)
	r.waitRecorded(s)
	if s.Event.Kind == shoeread.KindButton && s.Event.Button == shoeread.ButtonReveal {
		r.waitNextCoup(s)
	}
	return s
}

// waitNextCoup waits until, after the REVEAL rev, the next coup takes bets
// (or the shoe ends): the result time has passed.
func (r *processRig) waitNextCoup(rev shoesim.Sent) {
	r.t.Helper()
	r.waitRows(fmt.Sprintf("the next coup to take bets after shoe sentence %d", rev.Seq), func(rows []audit.Record) bool {
		after := false
		for _, row := range rows {
			if in, ok := inputOf(row); ok && in.ShoeSeq == rev.Seq && in.Kind != coup.InGap {
				after = true
			}
			if after && (row.Kind == string(coup.EvBettingOpened) || row.Kind == string(coup.EvShoeEnded)) {
				return true
			}
		}
		return false
	})
}

// waitRecorded waits until the trail holds the input s made.
func (r *processRig) waitRecorded(s shoesim.Sent) {
	r.t.Helper()
	r.waitRows(fmt.Sprintf("shoe sentence %d (%s) recorded", s.Seq, bytes.TrimSpace(s.Bytes)), func(rows []audit.Record) bool {
		for i := len(rows) - 1; i >= 0; i-- {
			if in, ok := inputOf(rows[i]); ok && in.ShoeSeq == s.Seq && in.Kind != coup.InGap {
				return true
			}
		}
		return false
	})
}

// waitRows rereads the trail until done accepts its rows. It rereads at
// each line the controller logs (it logs every row it records), and
// between times in case it logs less; the trail, not the log, is what
// counts.
func (r *processRig) waitRows(what string, done func([]audit.Record) bool) {
	r.t.Helper()
	testenv.EventuallyWoken(r.t, guard, what, r.wake, func() error {
		r.readTrail()
		if done(r.rows) {
			return nil
		}
		r.exited(what)
		return fmt.Errorf("not in the trail's %d rows", len(r.rows))
	})
}

// exited fails the test if the controller process has exited while the
// test waited for what.
func (r *processRig) exited(what string) {
	r.t.Helper()
	if r.ctl == nil {
		return
	}
	select {
	case err := <-r.ctl.done:
		r.t.Fatalf("waiting for %s: controller process %d exited: %v\n%s", what, len(r.logs), err, r.logs[len(r.logs)-1].tail(30))
	default:
	}
}

// readTrail reads the rows the controller has added since the last read.
// A trail not yet created, or caught mid-creation, reads as no new rows.
func (r *processRig) readTrail() {
	ctx, cancel := context.WithTimeout(r.ctx, guard)
	defer cancel()
	rd, err := audit.OpenReader(ctx, r.trail)
	if err != nil {
		return
	}
	defer rd.Close()
	var from int64 = 1
	if n := len(r.rows); n > 0 {
		from = r.rows[n-1].Seq + 1
	}
	for rec, err := range rd.Events(ctx, audit.Query{From: from}) {
		if err != nil {
			return
		}
		r.rows = append(r.rows, rec)
	}
}

// drainLine reads off the line what the shoe sent while nobody listened, up
// to and including the bytes last: a serial line keeps nothing for a port
// nobody has open, but a pseudo-terminal does, so the test plays the line
// and loses them. It returns what it read.
func drainLine(t testing.TB, link string, last []byte) []byte {
	t.Helper()
	f, err := os.OpenFile(link, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open the shoe's line to lose what it holds: %v", err)
	}
	defer f.Close()
	f.SetReadDeadline(time.Now().Add(guard))
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.HasSuffix(got, last) {
		n, err := f.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("reading the shoe's line: %v (read %q)", err, got)
		}
	}
	return got
}

// inputOf decodes an input row.
func inputOf(rec audit.Record) (coup.Input, bool) {
	if !coup.IsInput(rec.Kind) {
		return coup.Input{}, false
	}
	var in coup.Input
	if err := json.Unmarshal(rec.Body, &in); err != nil {
		return coup.Input{}, false
	}
	return in, true
}

// openShoe puts the simulator on a pseudo-terminal at dir/shoe behind the
// rig's gate, and returns the terminal and the link the controller opens.
func (r *rig) openShoe(cancel context.CancelFunc, dir string, opts shoesim.Options, log *slog.Logger) (*shoesim.PTY, string) {
	r.t.Helper()
	link := filepath.Join(dir, "shoe")
	pty, err := shoesim.OpenPTY(link)
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	r.gate = newShoeGate(r.ctx, pty)
	opts.BeforeUnplug = r.beforeUnplug
	r.sim, err = shoesim.New(opts, r.gate, clock.NewVirtual(epoch), log.With("part", "shoe"))
	if err != nil {
		cancel()
		pty.Close()
		r.t.Fatal(err)
	}
	r.gate.sim = r.sim
	r.plan = r.sim.Plan()
	return pty, link
}

// awaitSim waits up to guard for the shoe simulator's goroutine, whose
// context is cancelled, to close ended, and reports whether it did. A
// simulator error other than the cancellation fails the test, but the
// simulator has still stopped.
func awaitSim(t testing.TB, ended <-chan struct{}, simErr *error, guard time.Duration) bool {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(guard):
		t.Errorf("the shoe simulator did not stop")
		return false
	}
	if *simErr != nil && !errors.Is(*simErr, context.Canceled) {
		t.Errorf("shoe simulator: %v", *simErr)
	}
	return true
}

// awaitStop waits up to guard for what, which the caller has just
// cancelled, to return on done. An error fails the test, with logs when
// given; a stop that hangs fails it with every goroutine's stack, to say
// what it was stuck on. It reports whether what stopped cleanly.
func awaitStop(t testing.TB, what string, done <-chan error, guard time.Duration, logs func() string) bool {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			return true
		}
		if logs != nil {
			t.Errorf("%s: %v\n%s", what, err, logs())
		} else {
			t.Errorf("%s: %v", what, err)
		}
	case <-time.After(guard):
		buf := make([]byte, 1<<20)
		t.Errorf("%s did not stop within %s\n%s", what, guard, buf[:runtime.Stack(buf, true)])
	}
	return false
}
