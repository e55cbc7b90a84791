package audit

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tablectl/tablectl/coup"
)

// crashChildEnv names the trail a re-executed test binary appends to until
// it is killed.
const crashChildEnv = "AUDIT_CRASH_CHILD_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	if path := os.Getenv(snapshotChildEnv); path != "" {
		os.Exit(snapshotChild(path))
	}
	if dir := os.Getenv(segChildEnv); dir != "" {
		os.Exit(segChild(dir))
	}
	os.Exit(m.Run())
}

// crashChild appends events (singly and in batches, with checkpoints) as
// fast as it can and prints each acknowledged seq on stdout, until killed.
func crashChild(path string) int {
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Table: "T1", Key: testKey(), CheckpointEvery: 1, Logger: quietLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 3
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 7))
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		evs := sampleEvents(1 + rng.IntN(3))
		recs, err := s.AppendBatch(ctx, evs)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash child:", err)
			return 4
		}
		// Acknowledge only once the batch is committed.
		fmt.Fprintln(w, recs[len(recs)-1].Seq)
		w.Flush()
	}
}

// TestCrashSafety kills a writing process with SIGKILL at random points,
// then checks that the trail verifies, its seqs are contiguous, and every
// acknowledged event is there; then the next writer carries on the chain.
func TestCrashSafety(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	rng := rand.New(rand.NewPCG(11, 13))
	var acked int64
	for round := 0; round < 8; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 1 + rng.IntN(40)
		sc := bufio.NewScanner(stdout)
		lines := 0
		for lines < killAfter && sc.Scan() {
			seq, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				t.Fatalf("round %d: child said %q", round, sc.Text())
			}
			if seq <= acked {
				t.Fatalf("round %d: child acknowledged seq %d after %d", round, seq, acked)
			}
			acked = seq
			lines++
		}
		if lines < killAfter {
			t.Fatalf("round %d: child stopped after %d acknowledgements: %v", round, lines, sc.Err())
		}
		// Mid-append, most likely: the child never waits between appends.
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait() // "signal: killed" is the point

		rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
		requireClean(t, rep)
		if rep.Head.Seq < acked {
			t.Fatalf("round %d: trail ends at seq %d, but seq %d was acknowledged", round, rep.Head.Seq, acked)
		}
		if rep.Events != rep.Head.Seq {
			t.Fatalf("round %d: %d rows for head seq %d", round, rep.Events, rep.Head.Seq)
		}
		t.Logf("round %d: killed after %d acks; acknowledged %d, trail has %d", round, killAfter, acked, rep.Head.Seq)
		acked = rep.Head.Seq
	}
	// A normal writer picks up where the last killed one stopped.
	s := openAt(t, path, Options{Table: "T1", Key: testKey()})
	r, err := s.Append(ctx, Event{Kind: "shoe_end", Shoe: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != acked+1 {
		t.Fatalf("append after the crashes took seq %d, want %d", r.Seq, acked+1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}}))
}

// snapshotChildEnv names the trail a re-executed test binary records a
// table's play on, with a snapshot in nearly every commit, until killed.
const snapshotChildEnv = "AUDIT_SNAPSHOT_CHILD_DB"

// snapshotChild is the controller's writer: a Recorder that starts on the
// trail (from its newest snapshot), then submits a shoe's inputs, singly
// and in groups, with SnapshotEvery 3 so that most commits carry a
// snapshot row, and prints each acknowledged head.
func snapshotChild(path string) int {
	ctx := context.Background()
	p, _ := coup.BuiltinProfile(coup.ProfileVIP)
	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: coup.DefaultTableConfig(p), Key: testKey(), CheckpointEvery: 1,
		Logger: quietLogger(), SnapshotEvery: 3, NoHistoryCheck: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapshot child:", err)
		return 3
	}
	return dealShoeAcked(ctx, r, "snapshot child")
}

// dealShoeAcked is a kill test's child at work: it plays a new shoe on the
// table r's last run left (ending whatever that was in the middle of
// first), submitting inputs in batches of one to three, and prints each
// acknowledged head, so the parent knows what must survive the kill. It
// returns the child's exit code: 3 the shoe cannot be made, 4 a submit
// failed, 5 the shoe ended before the kill.
func dealShoeAcked(ctx context.Context, r *Recorder, name string) int {
	ins, err := play(rand.New(rand.NewPCG(uint64(os.Getpid()), 3)), 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 3
	}
	pre := []coup.Input{
		{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionVoid, Coup: 0, By: "pit-boss", ID: "v0", Reason: "restart"}},
		{Kind: coup.InLink, Link: coup.LinkConnected},
		{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionResume, By: "pit-boss", ID: "r0", Reason: "restart"}},
		{Kind: coup.InCmd, Command: &coup.Command{Action: coup.ActionShoeEnd, By: "pit-boss", ID: "e0", Reason: "restart"}},
	}
	w := bufio.NewWriter(os.Stdout)
	last := r.LastShoeSeq()
	all := append(pre, ins...)
	for i := 0; i < len(all); {
		n := min(1+i%3, len(all)-i)
		batch := make([]coup.Input, n)
		copy(batch, all[i:i+n])
		for j := range batch {
			batch[j].At = time.Time{} // the recorder stamps them
			if batch[j].ShoeSeq > 0 {
				batch[j].ShoeSeq += last
			}
		}
		if _, err := r.SubmitBatch(ctx, batch); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			return 4
		}
		fmt.Fprintln(w, r.Store().Head().Seq)
		w.Flush()
		i += n
	}
	fmt.Fprintln(os.Stderr, name+": shoe done before the kill")
	return 5
}

// TestKillDuringSnapshot kills (SIGKILL) a recorder that writes a snapshot
// in most commits, at random points, and after each kill finds the trail
// whole: it verifies with the key, every acknowledged row is there, a
// replay from row 1 holds every snapshot to the table its rows build, and
// the next start, from the newest snapshot, deals on.
func TestKillDuringSnapshot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trail.db")
	rng := rand.New(rand.NewPCG(16, 16))
	var acked int64
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), snapshotChildEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 5 + rng.IntN(60)
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
		if lines < killAfter {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("round %d: child stopped after %d acknowledgements: %v", round, lines, sc.Err())
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		rep := mustVerify(t, path, VerifyOptions{PublicKeys: []ed25519.PublicKey{testPub()}})
		requireClean(t, rep)
		if rep.Head.Seq < acked || rep.Events != rep.Head.Seq {
			t.Fatalf("round %d: %d rows, head %d, acknowledged %d", round, rep.Events, rep.Head.Seq, acked)
		}
		rd, err := OpenReader(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		rp, err := Replay(rd.Events(ctx, Query{}), vipConfig(t), ReplayVisitor{})
		if err != nil {
			t.Fatal(err)
		}
		snaps := readAll(t, rd.Events(ctx, Query{Kinds: []string{KindSnapshot}}))
		rd.Close()
		if d := rp.Differences(); len(d) > 0 {
			t.Fatalf("round %d: replay: %d differences, first %+v", round, len(d), d[0])
		}
		t.Logf("round %d: killed after %d commits; trail %d rows, %d snapshots", round, killAfter, rep.Head.Seq, len(snaps))
		acked = rep.Head.Seq
	}
	r, err := OpenRecorder(ctx, path, RecorderOptions{Table: "T1", Config: vipConfig(t), Key: testKey(), CheckpointEvery: 1, Logger: quietLogger()})
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
}
