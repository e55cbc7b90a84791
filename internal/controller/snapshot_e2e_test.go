package controller

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// The controller, run as `tablectl run`, writes a snapshot of the table in
// nearly every commit (audit.snapshot_every 2) and in every start, and is
// killed with SIGKILL: right after cards are recorded, and at random
// moments of its start, whose commit carries a snapshot (the sentences the
// shoe sends are never in flight then, so none is lost to the kill). Each
// start that completes comes back from the newest snapshot; the trail
// verifies with the key, replays from row 1 with no difference (every
// snapshot the table its rows build), and the table rebuilt is the shoe as
// dealt.
func TestE2EKillDuringSnapshot(t *testing.T) {
	testenv.Long(t, "controllers killed during snapshots (processes)")
	needRootToReopenKilled(t)
	t.Parallel()
	r := newProcessRig(t, shoesim.Options{Seed: 1616, Coups: 4})
	editConfig(t, r, func(c map[string]any) { c["audit"].(map[string]any)["snapshot_every"] = 2 })
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(16, 16))
	kills := 0
	// killStarting starts a controller and kills it after a random while,
	// most likely inside its start (verify, rebuild, the start commit).
	killStarting := func() {
		t.Helper()
		cmd := exec.Command(exe, "run", "--config", r.config)
		cmd.Env = append(os.Environ(), childEnv+"=1")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Not synchronisation: a moment drawn at random is the test.
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		kills++
		verifyTrail(t, r.trail, r.pubKey)
	}
	restart := func() {
		t.Helper()
		r.kill()
		kills++
		for range 3 {
			killStarting()
		}
		body := r.start()
		if snap, _ := body["snapshot"].(float64); snap <= 0 {
			t.Fatalf("start after %d kills: %v, want it from a snapshot", kills, body)
		}
	}
	r.start()
	r.deal(burnCard(2))
	for n := 1; n <= 3; n++ {
		r.deal(nmb(n))
		for k := 1; k <= lastCard(r.plan, n); k++ {
			r.deal(coupCard(n, k))
			if k == 2 {
				restart()
			}
		}
		r.deal(reveal(n))
	}
	r.stop()

	verifyTrail(t, r.trail, r.pubKey)
	ctx := context.Background()
	rd, err := audit.OpenReader(ctx, r.trail)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rp, err := audit.Replay(rd.Events(ctx, audit.Query{}), r.tc, audit.ReplayVisitor{})
	if err != nil {
		t.Fatal(err)
	}
	if d := rp.Differences(); len(d) > 0 {
		t.Fatalf("replay: %d differences, first %+v", len(d), d[0])
	}
	snaps := 0
	for _, err := range rd.Events(ctx, audit.Query{Kinds: []string{audit.KindSnapshot}}) {
		if err != nil {
			t.Fatal(err)
		}
		snaps++
	}
	done := rp.Table().ShoeCoups()
	if len(done) != 3 {
		t.Fatalf("rebuilt: %d coups done, want 3 (%d kills, %d snapshots)", len(done), kills, snaps)
	}
	for i, c := range done {
		checkCoup(t, fmt.Sprintf("rebuilt coup %d", i+1), c, r.plan.Shoes[0].Coups[i].Cards)
	}
	t.Logf("%d kills, %d snapshot rows", kills, snaps)
}
