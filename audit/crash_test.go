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
)

// crashChildEnv names the trail a re-executed test binary appends to until
// it is killed.
const crashChildEnv = "AUDIT_CRASH_CHILD_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
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
