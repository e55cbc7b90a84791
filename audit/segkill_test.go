package audit

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
)

// segChildEnv names the directory trail a re-executed test binary records
// a table's play on, cutting over every few commits, until killed;
// segKillEnv, when set, is "step:n": the child SIGKILLs itself at that step
// of its n-th cut-over.
const (
	segChildEnv = "AUDIT_SEG_CHILD_DIR"
	segKillEnv  = "AUDIT_SEG_CHILD_KILL"
	segStartEnv = "AUDIT_SEG_CHILD_START"
)

// segChild is snapshotChild on a directory trail: a stepping clock that
// starts where the parent says (an hour after the last child's start, so
// each child's rows come after the last one's) and moves 50 ms at every
// reading, with a gaming day of two seconds: a
// cut-over every few commits.
func segChild(dir string) int {
	ctx := context.Background()
	if k := os.Getenv(segKillEnv); k != "" {
		var step string
		var n int
		if _, err := fmt.Sscanf(k, "%s %d", &step, &n); err != nil {
			fmt.Fprintln(os.Stderr, "seg child: kill", k, err)
			return 3
		}
		cutHook = func(s string) {
			if s == step {
				if n--; n == 0 {
					syscall.Kill(os.Getpid(), syscall.SIGKILL)
					select {}
				}
			}
		}
	}
	start, err := strconv.ParseInt(os.Getenv(segStartEnv), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seg child: start:", err)
		return 3
	}
	p, _ := coup.BuiltinProfile(coup.ProfileVIP)
	r, err := OpenRecorder(ctx, dir, RecorderOptions{Table: "T1", Config: coup.DefaultTableConfig(p), Key: testKey(), CheckpointEvery: 1,
		Clock: clock.NewStepping(time.Unix(0, start), 50*time.Millisecond), Logger: quietLogger(), SnapshotEvery: 50, NoHistoryCheck: true,
		Segments: &SegmentPolicy{period: 2 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "seg child:", err)
		return 3
	}
	return dealShoeAcked(ctx, r, "seg child")
}

// TestKillDuringCutover kills (SIGKILL) a recorder on a directory trail
// during its cut-overs: at each step of one (just after the next file is
// made and opened, before the seal row: the next start removes that file,
// which holds no row; just after the seal row is committed, just after the
// next file is made live, just after its opening snapshot), at its first, second or third cut of the run, and at random
// points besides. After each kill the directory verifies with the key
// across every segment, every acknowledged row is there, a replay across
// the files finds no difference, and the next start continues the chain
// (the next child); at the end a start from the newest snapshot deals on
// and its background check of the whole directory passes.
func TestKillDuringCutover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir() + "/trail"
	rng := rand.New(rand.NewPCG(16, 1))
	steps := []string{"prepared", "sealed", "opened", "snapshot", ""}
	rounds := 15
	if testing.Short() {
		rounds = 5
	}
	var acked int64
	for round := 0; round < rounds; round++ {
		step := steps[round%len(steps)]
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		start := time.Date(2026, 11, 25, 5, 0, 0, 0, time.UTC).Add(time.Duration(round) * time.Hour)
		cmd.Env = append(os.Environ(), segChildEnv+"="+dir, fmt.Sprintf("%s=%d", segStartEnv, start.UnixNano()))
		killAfter := 5 + rng.IntN(60)
		if step != "" {
			cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s %d", segKillEnv, step, 1+rng.IntN(3)))
			killAfter = 1 << 30 // it kills itself
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		lines := 0
		for lines < killAfter && sc.Scan() {
			seq, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil || seq <= acked {
				t.Fatalf("round %d: child said %q after %d", round, sc.Text(), acked)
			}
			acked = seq
			lines++
		}
		if step == "" {
			if lines < killAfter {
				t.Fatalf("round %d: child stopped after %d acknowledgements: %v", round, lines, sc.Err())
			}
			cmd.Process.Kill()
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d (%q): child ended %v, not by SIGKILL", round, step, err)
		}

		rep := mustVerify(t, dir, keysOpt())
		requireClean(t, rep)
		if rep.Head.Seq < acked || rep.Events != rep.Head.Seq {
			t.Fatalf("round %d: %d rows, head %d, acknowledged %d", round, rep.Events, rep.Head.Seq, acked)
		}
		rd, err := OpenReader(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{})
		rd.Close()
		if err != nil {
			t.Fatal(err)
		}
		if d := rp.Differences(); len(d) > 0 {
			t.Fatalf("round %d: replay: %d differences, first %+v", round, len(d), d[0])
		}
		files, _ := ListSegments(dir)
		t.Logf("round %d: killed at %q after %d acks; trail %d rows in %d segments", round, step, lines, rep.Head.Seq, len(files))
		acked = rep.Head.Seq
	}
	files, _ := ListSegments(dir)
	if len(files) < rounds {
		t.Fatalf("%d segments after %d rounds: the cut-overs did not happen", len(files), rounds)
	}
	r, err := OpenRecorder(ctx, dir, RecorderOptions{Table: "T1", Config: vipConfig(t), Key: testKey(), CheckpointEvery: 1, Logger: quietLogger(),
		Segments: &SegmentPolicy{period: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Start().Snapshot == 0 {
		t.Errorf("start after the kills: %+v, want it from a snapshot", r.Start())
	}
	if done, err := r.WaitHistoryCheck(ctx); !done || err != nil {
		t.Errorf("history check: %v %v", done, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, dir, keysOpt()))
}
