package controller

// Fault tests of the table controller against real parts (issue 7): the
// controller killed with SIGKILL at many points of a shoe, the shoe silent
// mid-coup, the audit disk full and freed under the running controller, a
// read-only trail at start, and a flood of random bytes on the serial line.
// Each fault ends in the state and with the alert docs/operations.md
// documents, and the trail verifies afterwards. Run them with
//
//	go test -race -run Fault ./cmd/tablectl/
//
// The harness is in faults_helpers_test.go and e2e_helpers_test.go. Some
// need root for mount(2): the disk-full test falls back to the process's
// file size limit without it, the read-only test to chattr +i or, for a
// user other than root, to the file's mode.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/coup"
	"github.com/tablectl/tablectl/display"
	"github.com/tablectl/tablectl/internal/supervisor"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// The controller, run as `tablectl run`, is killed with SIGKILL after 25
// sentences of an eight-coup shoe chosen by a seeded RNG (after the HELO,
// and at least three in each of: the burn, betting open, betting closed,
// mid-coup, a coup complete and not revealed), and started again each time.
// After each restart the trail's rows before the kill are its first rows,
// unchanged, and the table rebuilt from them is the table before the kill.
// At three of the kills the dealer deals the rest of the coup while the
// controller is down and the line loses it: the next sentence shows a
// sequence gap that suspends the table, and the supervisor voids the coup
// over MQTT. At the end the trail verifies, every coup is as dealt (or
// voided), every sentence the line delivered is recorded once, and the
// lost ones are exactly the gaps.
func TestFaultKillNineAcrossShoe(t *testing.T) {
	testenv.Long(t, "a controller killed -9 across a whole shoe (processes; half a minute)")
	needRootToReopenKilled(t)
	t.Parallel()
	const seed = 701
	r := newProcessRig(t, shoesim.Options{Seed: seed, Coups: 8})
	sup := superviseOverMQTT(t, r)
	steps := plannedSentences(r.plan)
	kp := planKills(r.plan, steps, seed, 25, 3, 3)
	kills := kp.kills
	phases := map[string]int{}
	for _, i := range kills {
		phases[phaseAfter(r.plan, steps, i)]++
	}
	if len(kills) != 25 || len(kp.lossy) != 3 || len(phases) != 6 {
		t.Fatalf("%d kill points from %d sentences (by phase %v), %d of them losing cards", len(kills), len(steps), phases, len(kp.lossy))
	}
	t.Logf("kills after sentences %v (by phase %v); cards lost after %v", kills, phases, slices.Sorted(maps.Keys(kp.lossy)))

	starts := 1
	r.start()
	var lost [][]shoesim.Sent
	var last shoesim.Sent // the last sentence dealt
	voided := map[int]bool{}
	for i := 0; i < len(steps); i++ {
		last = r.deal(stepSentence(steps[i]))
		if !slices.Contains(kills, i) {
			continue
		}
		what := fmt.Sprintf("kill %d, after %s (%s)", starts, stepSentence(steps[i]).what, phaseAfter(r.plan, steps, i))
		r.kill()
		before, rows := trailState(t, r.trail, r.tc)
		var gone []shoesim.Sent
		if kp.lossy[i] {
			// Down: the dealer deals the rest of the coup, and the line
			// loses it.
			var b []byte
			for steps[i+1].Event.Button != shoeread.ButtonReveal {
				i++
				s := r.send(stepSentence(steps[i]))
				gone = append(gone, s)
				b = append(b, s.Bytes...)
			}
			if got := drainLine(t, r.link, gone[len(gone)-1].Bytes); !bytes.Equal(got, b) {
				t.Fatalf("%s: the line held %q; the shoe sent %q", what, got, b)
			}
			lost = append(lost, gone)
		}
		body := r.start()
		starts++
		after, now := trailState(t, r.trail, r.tc)
		if len(now) < len(rows) || !sameJSON(now[:len(rows)], rows) {
			t.Fatalf("%s: the trail's %d rows before the kill are not the first of its %d after the restart", what, len(rows), len(now))
		}
		if body["rows_replayed"] != float64(len(rows)) || body["phase"] != string(before.Pit.Phase) || body["suspended"] != before.Pit.Suspended {
			t.Fatalf("%s: the controller came back with %v; the trail held %d rows, phase %s, suspended %v",
				what, body, len(rows), before.Pit.Phase, before.Pit.Suspended)
		}
		if !sameJSON(before, after) {
			t.Fatalf("%s: the table before the kill\n%s\nand after the restart\n%s", what, js(before), js(after))
		}
		if gone == nil {
			continue
		}
		// The REVEAL shows the gap; the supervisor voids the coup.
		i++
		last = r.send(stepSentence(steps[i]))
		r.waitRecorded(last)
		st, _ := trailState(t, r.trail, r.tc)
		n := steps[i].At.Coup
		if al := st.Pit.Alerts; len(al) != 1 || al[0].Kind != coup.AlertSequenceGap || al[0].Needs != coup.NeedsVoid || al[0].Coup != n {
			t.Fatalf("%s: after the REVEAL of coup %d the alerts are %+v; want one sequence_gap needing void", what, n, al)
		}
		r.waitLog("the MQTT connection", "mqtt: connected")
		sup.do(t, supervisor.Request{Action: coup.ActionVoid, Reason: "cards drawn while the controller was down"})
		r.waitNextCoup(last)
		voided[n] = true
	}
	r.stop()

	verifyTrail(t, r.trail, r.pubKey)
	final, _ := trailState(t, r.trail, r.tc)
	if len(final.ShoeCoups) != 8 || final.Pit.Coup != 9 || final.Pit.Phase != coup.PhaseBettingOpen || final.Pit.Suspended {
		t.Fatalf("at the end: %d coups done, the table %s of coup %d, suspended %v", len(final.ShoeCoups), final.Pit.Phase, final.Pit.Coup, final.Pit.Suspended)
	}
	for k, c := range final.ShoeCoups {
		if c.Coup != k+1 || c.Voided != voided[k+1] {
			t.Fatalf("coup %d: %+v; voided %v", k+1, c, voided[k+1])
		}
		if !c.Voided {
			checkCoup(t, fmt.Sprintf("coup %d", k+1), c, r.plan.Shoes[0].Coups[k].Cards)
		}
	}
	checkRecordedOnce(t, r.trail, r.sim.Record(), last.Seq, lost, starts)
}

// checkRecordedOnce checks the trail against what the shoe sent up to its
// sentence last (the Sim records the one it holds at the gate too): every
// sentence the line delivered is recorded once, none of lost is, each run
// of lost sentences is one recorded gap, and starts starts are recorded.
func checkRecordedOnce(t *testing.T, trail string, rec shoesim.Record, last uint32, lost [][]shoesim.Sent, starts int) {
	t.Helper()
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	recorded := map[uint32]int{}
	var gaps [][2]uint32
	nStarts := 0
	for row, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if row.Kind == audit.KindStart {
			nStarts++
		}
		in, ok := inputOf(row)
		switch {
		case !ok:
		case in.Kind == coup.InGap:
			gaps = append(gaps, [2]uint32{in.GapFrom, in.GapTo})
		case in.ShoeSeq > 0:
			recorded[in.ShoeSeq]++
		}
	}
	isLost := map[uint32]bool{}
	var want [][2]uint32
	for _, run := range lost {
		for _, s := range run {
			isLost[s.Seq] = true
		}
		want = append(want, [2]uint32{run[0].Seq, run[len(run)-1].Seq})
	}
	for _, s := range rec.Sent {
		if !makesInput(s) || s.Seq > last {
			continue
		}
		switch n := recorded[s.Seq]; {
		case isLost[s.Seq] && n > 0:
			t.Errorf("shoe sentence %d was lost on the line, yet the trail records it", s.Seq)
		case !isLost[s.Seq] && n != 1:
			t.Errorf("shoe sentence %d (%s) is recorded %d times", s.Seq, bytes.TrimSpace(s.Bytes), n)
		}
		delete(recorded, s.Seq)
	}
	if len(recorded) > 0 {
		t.Errorf("the trail records shoe sentences the shoe never sent: %v", recorded)
	}
	if !slices.Equal(gaps, want) {
		t.Errorf("gaps recorded %v; the line lost %v", gaps, want)
	}
	if nStarts != starts {
		t.Errorf("%d starts recorded, %d made", nStarts, starts)
	}
}

// The shoe falls silent mid-coup, heartbeats and all, for longer than the
// link's 300ms window: the link reads silent and the table is suspended by
// shoe_offline, needing the link. Resume is refused while the link is
// silent; the shoe speaks again (a status report), the link is back, and
// resume is accepted; the coup then deals on as dealt.
func TestFaultShoeSilentMidCoup(t *testing.T) {
	t.Parallel()
	const window = 300 * time.Millisecond
	clock := newSilenceClock(window)
	opts := shoesim.Options{Seed: 702, Coups: 2, Faults: []shoesim.Fault{
		fault(t, "silence@2.3:2s"), fault(t, "status@2.3:READER_RESET,reader_back"),
	}}
	r, _ := newFaultRig(t, opts, tableConfig(t, nil), faultRig{silentAfter: window, clock: clock})
	r.deal(reveal(1))
	sent := time.Now()
	r.deal(coupCard(2, 2))
	r.expectLive(coup.PhaseDealing, 2)

	clock.allow(true)
	cs := r.await("the link going silent", func(c audit.Commit) bool {
		return c.Input.Kind == coup.InLink && c.Input.Link == coup.LinkSilent
	})
	clock.allow(false)
	if quiet := time.Since(sent); quiet < window {
		t.Fatalf("the link read silent %v after the last byte; its window is %v", quiet, window)
	}
	if al := alertsRaised(events(cs)); len(al) != 1 || al[0].Kind != coup.AlertShoeOffline || !strings.Contains(al[0].Message, "silent") {
		t.Fatalf("silent mid-coup: %s %+v", kinds(events(cs)), al)
	}
	al := r.expectSuspendedBy(coup.AlertShoeOffline, coup.NeedsLink)
	if al.Coup != 2 {
		t.Fatalf("alert %+v: want coup 2", al)
	}
	if v := r.pit(); v.Link != coup.LinkSilent || len(v.Player)+len(v.Banker) != 2 {
		t.Fatalf("while silent: link %s, %d cards", v.Link, len(v.Player)+len(v.Banker))
	}
	r.refused(resume(), "the shoe link is still silent")

	// The shoe speaks again: the link is back before its sentence.
	_, cs = r.deal(faulted(shoesim.FaultStatus))
	if got := kinds(events(cs)); got != "shoe_status shoe_status" || cs[0].Input.Kind != coup.InLink || cs[0].Input.Link != coup.LinkConnected {
		t.Fatalf("the shoe speaking again: %s", got)
	}
	r.expectSuspendedBy(coup.AlertShoeOffline, coup.NeedsLink)
	if got := kinds(r.accepted(resume())); got != "command_accepted alert_resolved resumed" {
		t.Fatalf("resume: %s", got)
	}
	r.expectLive(coup.PhaseDealing, 2)
	r.deal(reveal(2))
	r.expectRecall(planned(r.plan, 1), planned(r.plan, 2))
	r.expectRemaining(nil)
}

// The audit trail's disk fills up mid-coup under the running controller:
// each card the shoe sends meanwhile is refused (nothing of it reaches the
// table or the trail) and reported, /health answers 503, and the failure's
// view of the table is suspended. Once space is freed, the next input
// records the outage first: an audit_write_failed alert that names the
// sentences not recorded and needs the coup voided. The supervisor voids
// it, the game goes on, and the trail verifies (the rig's cleanup).
//
// The disk is a 2 MiB tmpfs filled by a file, when this process may mount
// one (root with CAP_SYS_ADMIN); otherwise the process's file size limit
// stands in for it, and the test then runs alone.
func TestFaultAuditDiskFull(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	trail := filepath.Join(disk, "trail.db")
	var filler diskFiller
	err := errors.New("TABLECTL_FAULTS_NO_MOUNT is set")
	if os.Getenv("TABLECTL_FAULTS_NO_MOUNT") == "" {
		err = mountTmpfs(t, disk, 2<<20)
	}
	if err == nil {
		filler = &tmpfsFiller{dir: disk}
		t.Parallel()
	} else {
		filler = &fsizeFiller{wal: trail + "-wal"}
		t.Logf("no tmpfs (%v)", err)
	}
	t.Logf("the disk fills up by %s", filler)

	type failure struct {
		err  error
		view coup.View
	}
	failures := make(chan failure, 32)
	r, _ := newFaultRig(t, shoesim.Options{Seed: 703, Coups: 3}, tableConfig(t, nil), faultRig{trail: trail,
		onWriteFailure: func(err error, v coup.View) {
			select {
			case failures <- failure{err, v}:
			default: // must not block; the test counts far fewer
			}
		}})
	r.deal(reveal(1))
	r.deal(coupCard(2, 2))
	before := r.pit()
	head := r.ctl.rec.Store().Head()

	filler.fill(t)
	var lost []shoesim.Sent
	for k := 3; k <= lastCard(r.plan, 2); k++ {
		to := coupCard(2, k)
		op := r.gate.release(t, r.simEnded, &r.simErr, to.what, func(op gateOp) bool { return !op.Replug && to.is(op.Sent) })
		lost = append(lost, op.Sent)
		var f failure
		select {
		case f = <-failures:
		case <-time.After(guard):
			t.Fatalf("%s sent on a full disk: no write failure reported", to.what)
		}
		if k == 3 {
			t.Logf("%s on a full disk: %v", to.what, f.err)
		}
		if !errors.Is(f.err, audit.ErrWriteFailed) || !errors.Is(f.err, filler.cause()) {
			t.Fatalf("%s on a full disk: %v; want %v", to.what, f.err, filler.cause())
		}
		if !f.view.Suspended || f.view.SuspendReason != "audit trail cannot be written" {
			t.Fatalf("the failure's view: suspended %v (%q)", f.view.Suspended, f.view.SuspendReason)
		}
		if got := r.pit(); !sameJSON(got, before) {
			t.Fatalf("%s on a full disk changed the table:\nbefore %s\nafter  %s", to.what, js(before), js(got))
		}
		if got := r.ctl.rec.Store().Head(); got != head {
			t.Fatalf("%s on a full disk moved the trail's head from %+v to %+v", to.what, head, got)
		}
	}
	if err := r.ctl.rec.Failing(); !errors.Is(err, filler.cause()) {
		t.Fatalf("Failing() = %v", err)
	}
	w := httptest.NewRecorder()
	display.Handler(r.ctl.rec).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/health", nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "audit_write_failed") {
		t.Fatalf("/health on a full disk: %d %s", w.Code, w.Body.String())
	}

	filler.free(t)
	// The next input, the dealer's REVEAL, finds the trail writable: the
	// outage goes in first.
	_, cs := r.deal(reveal(2))
	if len(cs) != 2 || cs[0].Input.Kind != coup.InAuditFailed {
		t.Fatalf("after space was freed: %d commits (%s)", len(cs), kinds(events(cs)))
	}
	in := cs[0].Input
	if in.GapFrom != lost[0].Seq || in.GapTo != lost[len(lost)-1].Seq ||
		!strings.Contains(in.Text, fmt.Sprintf("(%d inputs lost)", len(lost))) || !strings.Contains(in.Text, filler.cause().Error()) {
		t.Fatalf("the outage recorded as %+v; the cards lost were %d to %d", in, lost[0].Seq, lost[len(lost)-1].Seq)
	}
	if got := kinds(cs[0].Events); got != "alert(audit_write_failed) suspended" {
		t.Fatalf("the outage: %s", got)
	}
	if hasEvent(cs[1].Events, coup.EvCardsRevealed) || hasEvent(cs[1].Events, coup.EvCoupResult) {
		t.Fatalf("REVEAL while suspended: %s", kinds(cs[1].Events))
	}
	al := r.expectSuspendedBy(coup.AlertAuditFailed, coup.NeedsVoid)
	if want := fmt.Sprintf("shoe sentences %d to %d were not recorded", lost[0].Seq, lost[len(lost)-1].Seq); al.Coup != 2 || !strings.Contains(al.Message, want) {
		t.Fatalf("alert %+v: want coup 2 and %q", al, want)
	}
	if err := r.ctl.rec.Failing(); err != nil {
		t.Fatalf("Failing() = %v after the outage was recorded", err)
	}
	r.refused(resume(), "needs coup 2 voided")
	if got := kinds(r.accepted(void(0))); got != "command_accepted coup_voided alert_resolved betting_opened resumed" {
		t.Fatalf("void: %s", got)
	}
	r.expectLive(coup.PhaseBettingOpen, 3)
	r.deal(reveal(3))
	r.expectRecall(planned(r.plan, 1), wantCoup{n: 2, voided: true}, planned(r.plan, 3))
	rc := r.ctl.rec.Recall()
	if v := rc[len(rc)-2]; len(v.Cards) != 2 {
		t.Fatalf("voided coup 2 holds %d cards; only 2 were accepted", len(v.Cards))
	}
	// The table counts out of the shoe exactly the cards it recorded: the
	// ones refused are still in it, as far as it knows.
	isLost := map[uint32]bool{}
	for _, s := range lost {
		isLost[s.Seq] = true
	}
	out, total := map[coup.Card]int{}, 0
	for _, x := range r.sim.Record().Sent {
		if x.Event.Kind == shoeread.KindCard && makesInput(x) && !isLost[x.Seq] {
			out[x.Truth]++
			total++
		}
	}
	remain := r.ctl.rec.Remaining()
	if got, want := remain.Remaining(), r.plan.Options.Decks*coup.CardCount-total; got != want {
		t.Errorf("the table counts %d cards left; it recorded %d of %d", got, total, r.plan.Options.Decks*coup.CardCount)
	}
	for _, s := range lost {
		if got, want := remain.Count(s.Truth), r.plan.Options.Decks-out[s.Truth]; got != want {
			t.Errorf("the table counts %d of %s left; want %d (%d recorded)", got, s.Truth, want, out[s.Truth])
		}
	}
	for _, c := range r.commits.since(0) {
		if c.Input.ShoeSeq >= lost[0].Seq && c.Input.ShoeSeq <= lost[len(lost)-1].Seq && c.Input.Kind != coup.InAuditFailed {
			t.Errorf("shoe sentence %d, sent while the disk was full, is in the trail: %+v", c.Input.ShoeSeq, c.Input)
		}
	}
}

// A trail that cannot be written at start: `tablectl run` exits non-zero
// with an error naming the file, and leaves it as it was; once writable
// again the controller starts on it and the trail verifies.
//
// As root, the trail's directory is bind-mounted on itself read-only (file
// modes do not stop root); without mount(2), the file is made immutable
// (chattr +i). For another user, the file's mode is 0444.
func TestFaultReadOnlyTrailAtStart(t *testing.T) {
	t.Parallel()
	r := newProcessRig(t, shoesim.Options{Seed: 704, Coups: 1})
	r.start()
	r.deal(button(0, shoeread.ButtonBurnDone))
	r.stop()
	sum := fileSum(t, r.trail)

	how, undo := makeReadOnly(t, r.trail)
	t.Logf("read-only by %s", how)
	code, out := runFailing(t, "run", "--config", r.config)
	t.Logf("tablectl run on a read-only trail: exit %d: %s", code, out)
	// (The test's name in the path says read-only too: leave the path out.)
	low := strings.ToLower(strings.ReplaceAll(out, filepath.Dir(r.trail), "DIR"))
	if code == 0 || !strings.Contains(out, r.trail) || !strings.Contains(low, "read-only") && !strings.Contains(low, "readonly") {
		t.Errorf("tablectl run on a read-only trail: exit %d, output %q; want a non-zero exit and an error naming %s and saying it is read-only", code, out, r.trail)
	}
	if got := fileSum(t, r.trail); got != sum {
		t.Fatalf("the read-only trail changed")
	}
	undo()

	r.start()
	last := r.deal(nmb(1))
	r.stop()
	verifyTrail(t, r.trail, r.pubKey)
	checkRecordedOnce(t, r.trail, r.sim.Record(), last.Seq, nil, 2)
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// fsImmutable is FS_IMMUTABLE_FL (linux/fs.h): chattr +i.
const fsImmutable = 0x10

// makeReadOnly makes the trail unwritable to a controller started now, and
// returns how, and how to undo it.
func makeReadOnly(t *testing.T, trail string) (string, func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(trail, 0o444); err != nil {
			t.Fatal(err)
		}
		return "mode 0444", func() { os.Chmod(trail, 0o644) }
	}
	dir := filepath.Dir(trail)
	mountErr := errors.New("TABLECTL_FAULTS_NO_MOUNT is set")
	var undo func()
	if os.Getenv("TABLECTL_FAULTS_NO_MOUNT") == "" {
		undo, mountErr = bindReadOnly(t, dir)
	}
	if mountErr == nil {
		return "a read-only bind mount of " + dir, undo
	}
	f, err := os.Open(trail)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsImmutable))
	}
	if err != nil {
		t.Fatalf("cannot make %s read-only to root: no mount (%v), no chattr +i (%v)", trail, mountErr, err)
	}
	undo = func() {
		f, err := os.Open(trail)
		if err == nil {
			err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
			f.Close()
		}
		if err != nil {
			t.Errorf("chattr -i %s: %v", trail, err)
		}
	}
	t.Cleanup(undo)
	return "chattr +i", undo
}

// Five MiB of random bytes (every value, '$' and line ends included) go
// down the real serial line between the sentences of a six-coup shoe.
// Nothing panics; the controller deals every real sentence, and the coups
// are as dealt with no alert; the reader read every byte and counts the
// rejected ones, all of them noise, and the controller reports each
// rejected byte; the trail holds no row for noise; and the live heap does
// not grow with the flood.
//
// Not parallel: it measures the heap, which only its own controller may
// fill.
func TestFaultSerialFlood(t *testing.T) {
	testenv.Long(t, "line noise flooding the serial line for a coup")
	var perr protocolErrors
	r, stop := newFaultRig(t, shoesim.Options{Seed: 705, Coups: 6}, tableConfig(t, nil), faultRig{logs: perr.wrap})
	steps := plannedSentences(r.plan)
	const flood = 5 << 20
	per := flood / len(steps)
	rng := rand.NewChaCha8([32]byte{'f', 'l', 'o', 'o', 'd'})
	chunk := make([]byte, 16<<10)
	var noise, lineEnds, sentBytes int64
	liveHeap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var early, peak uint64
	var last shoesim.Sent
	for i, st := range steps {
		for left := per; left > 0; {
			b := chunk[:min(left, len(chunk))]
			rng.Read(b)
			for _, c := range b {
				if c == '\r' || c == '\n' {
					lineEnds++
				}
			}
			if err := r.gate.line.Write(r.ctx, b); err != nil {
				t.Fatalf("writing noise: %v", err)
			}
			noise += int64(len(b))
			left -= len(b)
		}
		s, _ := r.deal(stepSentence(st))
		sentBytes += int64(len(s.Bytes))
		last = s
		// Everything before the sentence has been read and decoded.
		switch h := liveHeap(); {
		case i == len(steps)/5:
			early = h
		case i > len(steps)/5:
			peak = max(peak, h)
		}
	}
	t.Logf("%d bytes of noise and %d of %d sentences; live heap %d KiB after a fifth of the flood, at most %d KiB after",
		noise, sentBytes, len(steps), early>>10, peak>>10)
	// A reader that kept a fraction of the flood would grow by megabytes.
	if peak > early+2<<20 {
		t.Errorf("the live heap grew from %d KiB to %d KiB during the flood", early>>10, peak>>10)
	}
	var want []wantCoup
	for n := 1; n <= 6; n++ {
		want = append(want, planned(r.plan, n))
	}
	r.expectRecall(want...)
	if v := r.pit(); v.Suspended || len(v.Alerts) > 0 {
		t.Fatalf("after the flood: suspended %v, alerts %+v", v.Suspended, v.Alerts)
	}
	r.expectRemaining(nil)

	stop()
	st := r.ctl.reader.Stats()
	runs, reported := perr.totals()
	t.Logf("reader: %+v; the controller reported %d rejected runs, %d bytes", st, runs, reported)
	if st.Bytes != uint64(noise+sentBytes) || st.Sentences != uint64(len(steps)) {
		t.Errorf("the reader read %d bytes and %d sentences; the line carried %d bytes and %d sentences", st.Bytes, st.Sentences, noise+sentBytes, len(steps))
	}
	// Every byte of noise is rejected, bar line ends the reader finds
	// between sentences, which are harmless.
	if st.RejectedBytes > uint64(noise) || st.RejectedBytes < uint64(noise-lineEnds) {
		t.Errorf("the reader rejected %d bytes; the noise was %d bytes, %d of them line ends", st.RejectedBytes, noise, lineEnds)
	}
	if uint64(runs) != st.RejectedRuns || uint64(reported) != st.RejectedBytes {
		t.Errorf("the controller reported %d rejected runs of %d bytes; the reader counted %d of %d", runs, reported, st.RejectedRuns, st.RejectedBytes)
	}

	// The trail: the start-up self-check, the link's connection, each sentence once, and what they
	// made; the rejected noise, the first RejectBurst runs one by one and
	// the rest summarised, at most one summary a second; nothing else.
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, r.trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var inputs, verbatim, summaries, summarised, selfChecks int
	var firstRejected, lastRejected time.Time
	for row, err := range rd.Events(ctx, audit.Query{}) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(row.Kind, "ctl.") && row.Kind != audit.KindStart && row.Kind != audit.KindConfig {
			t.Errorf("row %d: %s %s", row.Seq, row.Kind, row.Body)
		}
		in, ok := inputOf(row)
		if !ok {
			continue
		}
		if in.Kind == coup.InRejected {
			if firstRejected.IsZero() {
				firstRejected = in.At
			}
			lastRejected = in.At
			if in.Rejected.Count == 1 {
				verbatim++
			} else {
				summaries++
				summarised += in.Rejected.Count
			}
			continue
		}
		if in.Kind == coup.InSelfCheck {
			selfChecks++
			continue
		}
		inputs++
		if in.Kind == coup.InLink {
			continue
		}
		if i := int(in.ShoeSeq) - 1; i < 0 || i >= len(steps) || in.Kind == coup.InGap {
			t.Errorf("row %d: input %s from no sentence the shoe sent: %s", row.Seq, in.Kind, row.Body)
		}
	}
	if selfChecks != 1 {
		t.Errorf("the trail has %d self-checks; want the start-up one", selfChecks)
	}
	if inputs != len(steps)+1 {
		t.Errorf("the trail has %d inputs; the shoe sent %d sentences and the link connected once", inputs, len(steps))
	}
	t.Logf("rejected runs in the trail: %d one by one, %d in %d summaries", verbatim, summarised, summaries)
	if verbatim+summarised != runs {
		t.Errorf("the trail accounts for %d rejected runs (%d one by one, %d summarised); the reader rejected %d", verbatim+summarised, verbatim, summarised, runs)
	}
	// One verbatim and one summary a second at most, after the burst,
	// however long a busy machine takes to read the flood.
	secs := int(lastRejected.Sub(firstRejected)/time.Second) + 2
	if verbatim < shoeread.RejectBurst || verbatim > shoeread.RejectBurst+secs || summaries > secs {
		t.Errorf("%d rejected runs recorded one by one and %d summaries for a flood read in %s; want %d, then one of each a second",
			verbatim, summaries, lastRejected.Sub(firstRejected), shoeread.RejectBurst)
	}
	checkRecordedOnce(t, r.trail, r.sim.Record(), last.Seq, nil, 1)
}
