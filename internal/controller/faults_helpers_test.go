package controller

// The harness of the fault tests (faults_test.go), on top of the end-to-end
// one (e2e_helpers_test.go): an in-process rig whose trail, silence window
// and link clock the test chooses; a link clock that lets the shoe's
// silence be noticed only when the test says so; small filesystems to fill
// and to make read-only; the controller process given a supervisor over
// Mosquitto; and the table state a trail rebuilds to.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/base/clock"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/config"
	"github.com/tablectl/tablectl/internal/mqtttest"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
	"github.com/tablectl/tablectl/signedcmd"
)

// ---- the in-process rig, configured ----

// faultRig says how newFaultRig differs from newRig.
type faultRig struct {
	// trail is the trail's path; "" puts it in a temporary directory.
	trail string
	// silentAfter is the link's silence window; 0 turns it off, as newRig.
	silentAfter time.Duration
	// clock is the controller's clock; nil is the wall clock.
	clock clock.Clock
	// onWriteFailure hears every input the trail could not take.
	onWriteFailure func(error, coup.View)
	// tampersWithTrail: the test alters the trail itself and checks it, so
	// the cleanup does not verify it.
	tampersWithTrail bool
	// logs wraps the log handler, to count or drop records; nil keeps all.
	logs func(slog.Handler) slog.Handler
	// trailFreeBetweenCommits: Hooks.TrailFreeBetweenCommits.
	trailFreeBetweenCommits bool
}

// newFaultRig is newRig with the trail, the silence window and the link's
// clock chosen by the test. It returns the rig and stop, which stops the
// controller and waits for it (the cleanup calls it too), after which the
// controller's parts may be read without a lock.
func newFaultRig(t *testing.T, opts shoesim.Options, tc coup.TableConfig, fo faultRig) (*rig, func()) {
	t.Helper()
	dir := t.TempDir()
	priv, pub, err := audit.GenerateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fo.trail == "" {
		fo.trail = filepath.Join(dir, "trail.db")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{t: t, ctx: ctx, tc: tc, commits: newCommitLog(), logs: &syncBuffer{},
		trail: fo.trail, pubKey: pub, privKey: priv, simEnded: make(chan struct{})}
	var h slog.Handler = slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})
	if fo.logs != nil {
		h = fo.logs(h)
	}
	log := slog.New(h)

	pty, link := r.openShoe(cancel, dir, opts, log)

	silent := device.Off
	if fo.silentAfter > 0 {
		silent = device.Duration(fo.silentAfter)
	}
	cfg := config.Config{
		TableID: "FAULT-01",
		Shoe: config.ShoeSection{Driver: "v1", Port: device.Config{
			Path: link, Baud: shoesim.DefaultBaud[shoesim.ProtocolV1], SilentAfter: silent,
			BackoffMin: device.Duration(5 * time.Millisecond), BackoffMax: device.Duration(50 * time.Millisecond),
		}.WithDefaults()},
		Audit: config.AuditSection{Path: r.trail, CheckpointKey: priv},
	}
	r.ctl, err = Start(ctx, cfg, tc, log.With("part", "controller"), Hooks{
		OnCommit: r.commits.add, OnWriteFailure: fo.onWriteFailure, Clock: fo.clock, TrailFreeBetweenCommits: fo.trailFreeBetweenCommits,
	})
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
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			awaitStop(t, "the controller", ctlDone, guard, nil)
		})
	}
	t.Cleanup(func() {
		stop()
		if !awaitSim(t, r.simEnded, &r.simErr, guard) {
			return
		}
		pty.Close()
		if !fo.tampersWithTrail {
			r.checkTrail()
		}
		if t.Failed() {
			t.Logf("last log lines:\n%s", r.logs.tail(80))
		}
	})
	return r, stop
}

// ---- a link clock with the silence in the test's hand ----

// silenceClock is the link's clock: the wall clock, except that the timer
// of the silence window fires only when the window has passed on the wall
// clock with no byte AND the test has let the shoe fall silent. The gate
// holds the shoe for as long as the test takes between two sentences, which
// on a loaded machine can outlast the window; this keeps those pauses from
// reading as silences, while the silence the test means is a real one.
type silenceClock struct {
	window time.Duration

	mu     sync.Mutex
	open   bool // the test lets silences be noticed
	timers []*silenceTimer
}

func newSilenceClock(window time.Duration) *silenceClock { return &silenceClock{window: window} }

func (c *silenceClock) Now() time.Time { return time.Now() }

func (c *silenceClock) NewTicker(d time.Duration) clock.Ticker { return clock.Real.NewTicker(d) }

func (c *silenceClock) NewTimer(d time.Duration) clock.Timer {
	if d != c.window {
		return clock.Real.NewTimer(d)
	}
	st := &silenceTimer{c: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	c.timers = append(c.timers, st)
	c.mu.Unlock()
	st.Reset(d)
	return st
}

// allow lets the link notice silence (at once, for a window already
// past), or stops it noticing.
func (c *silenceClock) allow(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open = on
	if on {
		for _, st := range c.timers {
			if st.armed && st.due {
				st.fire()
			}
		}
	}
}

// silenceTimer is one silence window's timer (Go 1.23 semantics: after Stop
// or Reset returns, nothing from before is received).
type silenceTimer struct {
	c  *silenceClock
	ch chan time.Time
	// Guarded by c.mu.
	gen   int
	armed bool // running, not yet fired or stopped
	due   bool // the window has passed on the wall clock
	real  *time.Timer
}

func (st *silenceTimer) C() <-chan time.Time { return st.ch }

// fire delivers the tick; c.mu is held.
func (st *silenceTimer) fire() {
	st.armed = false
	select {
	case st.ch <- time.Now():
	default:
	}
}

func (st *silenceTimer) stopLocked() bool {
	was := st.armed
	st.armed, st.due = false, false
	st.gen++
	if st.real != nil {
		st.real.Stop()
	}
	select {
	case <-st.ch:
	default:
	}
	return was
}

func (st *silenceTimer) Stop() bool {
	st.c.mu.Lock()
	defer st.c.mu.Unlock()
	return st.stopLocked()
}

func (st *silenceTimer) Reset(d time.Duration) bool {
	st.c.mu.Lock()
	defer st.c.mu.Unlock()
	was := st.stopLocked()
	st.armed = true
	gen := st.gen
	st.real = time.AfterFunc(d, func() {
		st.c.mu.Lock()
		defer st.c.mu.Unlock()
		if st.gen != gen || !st.armed {
			return
		}
		st.due = true
		if st.c.open {
			st.fire()
		}
	})
	return was
}

// ---- filesystems ----

// mountTmpfs mounts a tmpfs of size bytes on dir, until the test ends. It
// reports why not when this process may not mount.
func mountTmpfs(t *testing.T, dir string, size int64) error {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", dir, err)
	}
	t.Cleanup(func() { unmount(t, dir) })
	return nil
}

// bindReadOnly mounts dir on itself read-only, until undo (or the test's
// end).
func bindReadOnly(t *testing.T, dir string) (undo func(), err error) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind-mount %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		unmount(t, dir)
		return nil, fmt.Errorf("remount %s read-only: %w", dir, err)
	}
	var once sync.Once
	undo = func() { once.Do(func() { unmount(t, dir) }) }
	t.Cleanup(undo)
	return undo, nil
}

func unmount(t *testing.T, dir string) {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		t.Errorf("unmount %s: %v", dir, err)
	}
}

// diskFiller fills the trail's disk and frees it again.
type diskFiller interface {
	fill(t *testing.T)
	free(t *testing.T)
	// cause is what the trail's write error says the failure was.
	cause() error
	String() string
}

// tmpfsFiller fills a small tmpfs with a file of its own: the disk is
// really full, and SQLite meets ENOSPC (SQLITE_FULL).
type tmpfsFiller struct {
	dir    string
	filler string
}

func (f *tmpfsFiller) String() string { return "a 2 MiB tmpfs filled by a file" }
func (f *tmpfsFiller) cause() error   { return audit.ErrDiskFull }

func (f *tmpfsFiller) fill(t *testing.T) {
	t.Helper()
	f.filler = filepath.Join(f.dir, "filler")
	fh, err := os.Create(f.filler)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		w, err := fh.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatalf("filling %s: %v", f.dir, err)
		}
		if n > 64<<20 {
			t.Fatalf("wrote %d bytes to %s and it is not full", n, f.dir)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(f.dir, &st); err != nil || st.Bavail != 0 {
		t.Fatalf("after %d bytes %s has %d blocks free (%v)", n, f.dir, st.Bavail, err)
	}
}

func (f *tmpfsFiller) free(t *testing.T) {
	t.Helper()
	if err := os.Remove(f.filler); err != nil {
		t.Fatal(err)
	}
}

// fsizeFiller is the fallback where this process may not mount: the
// process's file size limit (RLIMIT_FSIZE) is lowered to the size the
// trail's log has, so its next append fails as on a full disk (a short
// write, then EFBIG, which SQLite reports as an I/O error), and raised
// again. The limit binds the whole process: the test must not run beside
// others.
type fsizeFiller struct {
	wal  string
	prev unix.Rlimit
}

func (f *fsizeFiller) String() string {
	return "the file size limit (RLIMIT_FSIZE) at the trail's size"
}
func (f *fsizeFiller) cause() error { return audit.ErrIO }

func (f *fsizeFiller) fill(t *testing.T) {
	t.Helper()
	fi, err := os.Stat(f.wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &f.prev); err != nil {
		t.Fatal(err)
	}
	lim := f.prev
	lim.Cur = uint64(fi.Size())
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_FSIZE, &f.prev) })
}

func (f *fsizeFiller) free(t *testing.T) {
	t.Helper()
	if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &f.prev); err != nil {
		t.Fatal(err)
	}
}

// ---- the table a trail rebuilds to ----

// tableState is everything the table holds that a restart must keep.
type tableState struct {
	Pit       coup.View
	Counts    [coup.CardCount]uint16
	LastSeq   uint32
	Deadline  time.Time
	Recall    []coup.CoupRecord
	ShoeCoups []coup.CoupRecord
}

// trailState replays the whole trail at path and returns the table it
// rebuilds to, and its rows.
func trailState(t *testing.T, path string, tc coup.TableConfig) (tableState, []audit.Record) {
	t.Helper()
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var rows []audit.Record
	for row, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
	}
	rp, err := audit.Replay(recordsOf(rows), tc, audit.ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("replay of %s: %d differences, first %+v", path, len(d), d[0])
	}
	tab := rp.Table()
	dl, _ := tab.Deadline()
	return tableState{Pit: tab.PitView(), Counts: tab.Remaining().Counts(), LastSeq: tab.LastShoeSeq(), Deadline: dl,
		Recall: tab.Recall(), ShoeCoups: tab.ShoeCoups()}, rows
}

// ---- the controller process, supervised ----

// pitSupervisor sends signed commands to a controller process over Mosquitto,
// as `tablectl void` and the like do.
type pitSupervisor struct {
	url, table, prefix, key string
}

// superviseOverMQTT turns MQTT on in the process rig's config: Mosquitto,
// a prefix and client id of the test's own, and a keyring holding the
// supervisor's key.
func superviseOverMQTT(t *testing.T, r *processRig) pitSupervisor {
	t.Helper()
	url := mqtttest.Shared(t)
	keys := t.TempDir()
	priv, _, entry, err := signedcmd.GenerateKey(keys, "ann")
	if err != nil {
		t.Fatal(err)
	}
	keyring := filepath.Join(filepath.Dir(r.config), "supervisors.json")
	_, authority := writeSignedKeyring(t, keyring, entry)
	s := pitSupervisor{url: url, prefix: mqtttest.Prefix(t), key: priv}
	editConfig(t, r, func(doc map[string]any) {
		s.table = doc["table_id"].(string)
		doc["mqtt"] = map[string]any{"broker": url, "prefix": s.prefix, "client_id": mqtttest.ClientID(t, "tablectl"), "keyring": keyring, "keyring_authority": authority}
	})
	return s
}

// editConfig rewrites the process rig's config file.
func editConfig(t *testing.T, r *processRig, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(r.config)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	if b, err = json.MarshalIndent(doc, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c, tc, err := config.Parse(b, filepath.Dir(r.config))
	if err != nil {
		t.Fatalf("edited config: %v", err)
	}
	r.trail, r.tc = c.Audit.Trail(), tc
}

// do sends one command and returns the table's reply; it fails the test
// unless the command was accepted.
func (s pitSupervisor) do(t *testing.T, r supervisor.Request) signedcmd.Reply {
	t.Helper()
	rep, err := sendAs(t, supervisor.Options{Broker: s.url, Table: s.table, Prefix: s.prefix, Timeout: 30 * time.Second}, s.key, r)
	if err != nil || rep.Result != signedcmd.Accepted {
		t.Fatalf("%s: %v; reply %+v", r.Action, err, rep)
	}
	return rep
}

// waitLog waits until the running controller process logs a line holding
// every one of parts.
func (r *processRig) waitLog(what string, parts ...string) {
	r.t.Helper()
	l := r.ctl.out
	testenv.EventuallyWoken(r.t, guard, what, r.wake, func() error {
		l.mu.Lock()
		found := slices.ContainsFunc(l.lines, func(line string) bool {
			return !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) })
		})
		l.mu.Unlock()
		if found {
			return nil
		}
		r.exited(what)
		return fmt.Errorf("not logged\n%s", l.tail(30))
	})
}

// ---- the shoe's plan, sentence by sentence ----

// plannedSentences are the plan's sentences in the order the shoe sends
// them.
func plannedSentences(p *shoesim.Plan) []shoesim.Step {
	var out []shoesim.Step
	for _, st := range p.Steps {
		if st.Op == shoesim.OpSend {
			out = append(out, st)
		}
	}
	return out
}

// stepSentence is the sentence a plan step sends.
func stepSentence(st shoesim.Step) sentence {
	what := st.At.String() + " " + st.Event.Kind.String()
	if st.Event.Button != "" {
		what += " " + string(st.Event.Button)
	}
	return sentence{what, func(s shoesim.Sent) bool {
		return s.At == st.At && s.Event.Kind == st.Event.Kind && s.Event.Button == st.Event.Button
	}}
}

// phaseAfter names where the table stands once step i of the plan's
// sentences is dealt (with the dealer waiting for the result's time).
func phaseAfter(p *shoesim.Plan, steps []shoesim.Step, i int) string {
	st := steps[i]
	switch {
	case st.Event.Kind == shoeread.KindHello:
		return "no shoe"
	case st.At.Burn || st.Event.Button == shoeread.ButtonNewShoe:
		return "burn"
	case st.Event.Button == shoeread.ButtonBurnDone || st.Event.Button == shoeread.ButtonReveal:
		return "betting"
	case st.Event.Button == shoeread.ButtonNoMoreBets:
		return "bets closed"
	case st.Event.Kind == shoeread.KindCard && st.At.Card == len(p.Shoes[st.At.Shoe-1].Coups[st.At.Coup-1].Cards):
		return "result"
	}
	return "mid-coup"
}

// killPlan says where the controller is killed: after the plan's
// sentences kills; at those in lossy the dealer deals the rest of the coup
// while it is down, and the line loses it.
type killPlan struct {
	kills []int
	lossy map[int]bool
}

// planKills picks n of the plan's sentences to kill the controller after,
// from a seeded RNG: nLossy of them mid-coup in coups of their own, the
// rest with at least least after each phase, none among the sentences a
// lossy kill loses.
func planKills(p *shoesim.Plan, steps []shoesim.Step, seed uint64, n, nLossy, least int) killPlan {
	rng := rand.New(rand.NewPCG(seed, 0))
	kp := killPlan{lossy: map[int]bool{}}
	taken := map[int]bool{len(steps) - 1: true}
	for _, c := range rng.Perm(len(p.Shoes[0].Coups)) {
		if len(kp.lossy) == nLossy {
			break
		}
		var cand []int
		for i, st := range steps {
			if ph := phaseAfter(p, steps, i); st.At.Coup == c+1 && (ph == "bets closed" || ph == "mid-coup") {
				cand = append(cand, i)
			}
		}
		if len(cand) == 0 {
			continue
		}
		i := cand[rng.IntN(len(cand))]
		kp.lossy[i] = true
		kp.kills = append(kp.kills, i)
		// The lost cards and the REVEAL that shows them gone.
		for j := i; j < len(steps) && !taken[j]; j++ {
			taken[j] = true
			if steps[j].Event.Button == shoeread.ButtonReveal {
				break
			}
		}
	}
	byPhase := map[string][]int{}
	for i := range steps {
		if !taken[i] {
			ph := phaseAfter(p, steps, i)
			byPhase[ph] = append(byPhase[ph], i)
		}
	}
	var rest []int
	for _, ph := range slices.Sorted(maps.Keys(byPhase)) {
		is := byPhase[ph]
		rng.Shuffle(len(is), func(a, b int) { is[a], is[b] = is[b], is[a] })
		k := min(least, len(is))
		kp.kills = append(kp.kills, is[:k]...)
		rest = append(rest, is[k:]...)
	}
	rng.Shuffle(len(rest), func(a, b int) { rest[a], rest[b] = rest[b], rest[a] })
	kp.kills = append(kp.kills, rest[:max(0, min(len(rest), n-len(kp.kills)))]...)
	slices.Sort(kp.kills)
	return kp
}

// ---- counting what the controller logs ----

// protocolErrors counts the controller's "shoe protocol error" records and
// the bytes they say were rejected, and keeps them out of the log buffer:
// a flood makes tens of thousands.
type protocolErrors struct {
	mu       sync.Mutex
	count    int
	rejected int64
}

// wrap is a faultRig.logs that counts into p.
func (p *protocolErrors) wrap(h slog.Handler) slog.Handler { return &countingHandler{p: p, h: h} }

func (p *protocolErrors) totals() (int, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count, p.rejected
}

// countingHandler passes every record to h but protocol errors, which it
// counts into p; loggers derived from it count into the same p.
type countingHandler struct {
	p *protocolErrors
	h slog.Handler
}

func (c *countingHandler) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }

func (c *countingHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Message != "shoe protocol error" {
		return c.h.Handle(ctx, rec)
	}
	var n int64
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "rejected_bytes" {
			n = a.Value.Int64()
		}
		return true
	})
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.count++
	c.p.rejected += n
	return nil
}

func (c *countingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &countingHandler{p: c.p, h: c.h.WithAttrs(as)}
}

func (c *countingHandler) WithGroup(g string) slog.Handler {
	return &countingHandler{p: c.p, h: c.h.WithGroup(g)}
}

// ---- a child that is expected to fail ----

// runFailing runs `tablectl ARGS` as a process and returns its exit code
// and what it wrote.
func runFailing(t *testing.T, args ...string) (int, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(guard):
		cmd.Process.Kill()
		<-done
		t.Fatalf("tablectl %s did not exit:\n%s", strings.Join(args, " "), out.String())
	}
	code := 0
	if err != nil {
		var ee interface{ ExitCode() int }
		if !errors.As(err, &ee) {
			t.Fatalf("tablectl %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, out.String()
}

// recordsOf gives rows as the trail's readers do, with no error.
func recordsOf(rows []audit.Record) iter.Seq2[audit.Record, error] {
	return func(yield func(audit.Record, error) bool) {
		for _, row := range rows {
			if !yield(row, nil) {
				return
			}
		}
	}
}
