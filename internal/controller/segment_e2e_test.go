package controller

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// TestE2EKillDuringCutover: the controller, run as `tablectl run` on a
// directory trail cut at the end of every shoe (audit.segment_every_shoes
// 1), deals short shoes (the cut card early) and is killed with SIGKILL
// just as each shoe's last coup is recorded: a few milliseconds before,
// during or after its cut-over (the shoe ends at that coup's result time,
// and the cut follows in the same commit's wake). After each kill the
// directory verifies with the key across its segments and still holds
// every row read before the kill; the next start continues the chain; at
// the end every shoe's end was a cut, and a replay across the files finds
// no difference.
func TestE2EKillDuringCutover(t *testing.T) {
	needRootToReopenKilled(t)
	t.Parallel()
	const shoes = 5
	r := newProcessRig(t, shoesim.Options{Seed: 1617, Shoes: shoes, Cut: 301})
	dir := filepath.Join(filepath.Dir(r.config), "trail")
	archive := filepath.Join(filepath.Dir(r.config), "archive")
	editConfig(t, r, func(c map[string]any) {
		a := c["audit"].(map[string]any)
		delete(a, "path")
		a["dir"] = dir
		a["segment_every_shoes"] = 1
		a["archive_dir"] = archive
	})
	if r.trail != dir {
		t.Fatalf("trail %s, want the directory %s", r.trail, dir)
	}
	rng := rand.New(rand.NewPCG(16, 17))
	next := sentence{"the next sentence", func(s shoesim.Sent) bool { return !s.Heartbeat && !s.Noise }}
	r.start()
	kills := 0
	for shoe := 1; shoe <= shoes; shoe++ {
		coups := r.plan.Shoes[shoe-1].Coups
		if len(coups) == 0 {
			t.Fatalf("shoe %d of the plan deals no coup", shoe)
		}
		last := len(coups)
		for {
			s := r.send(next)
			r.waitRecorded(s)
			if s.Event.Kind == shoeread.KindButton && s.Event.Button == shoeread.ButtonReveal && s.At.Shoe == shoe && s.At.Coup == last {
				break
			}
			if s.Event.Kind == shoeread.KindButton && s.Event.Button == shoeread.ButtonReveal {
				r.waitNextCoup(s)
			}
		}
		// The shoe ends at this coup's result time (1 ns), and the cut
		// comes with it: kill somewhere about there.
		time.Sleep(time.Duration(rng.IntN(30_000)) * time.Microsecond)
		seen := r.rows[len(r.rows)-1]
		r.kill()
		kills++
		verifyTrail(t, r.trail, r.pubKey)
		ctx := context.Background()
		rd, err := audit.OpenReader(ctx, r.trail)
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for rec, err := range rd.Events(ctx, audit.Query{From: seen.Seq, To: seen.Seq}) {
			found = err == nil && rec.Hash == seen.Hash
		}
		segs := len(rd.Segments())
		rd.Close()
		if !found {
			t.Fatalf("kill %d: row %d, read before the kill, is not in the trail as it was", kills, seen.Seq)
		}
		t.Logf("kill %d after shoe %d's last reveal: %d segments", kills, shoe, segs)
		r.start()
	}
	// The last shoe's end (and its cut) after the last start.
	r.waitRows("the last shoe's end", func(rows []audit.Record) bool {
		n := 0
		for _, row := range rows {
			if row.Kind == "shoe_ended" {
				n++
			}
		}
		return n >= shoes
	})
	// The controller's retention part archives every sealed segment.
	deadline := time.Now().Add(guard)
	for {
		files, err := audit.ListSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		done := len(files) == shoes+1
		for _, f := range files[:len(files)-1] {
			done = done && audit.Archived(f)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sealed segments not all archived: %v", files)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.stop()
	verifyTrail(t, r.trail, r.pubKey)
	// The archive's copies and the box's live segment are the whole trail.
	copies, err := audit.ListSegments(archive)
	if err != nil || len(copies) != shoes {
		t.Fatalf("archive holds %v (%v), want %d segments", copies, err, shoes)
	}
	files, _ := audit.ListSegments(dir)
	verifyTrail(t, strings.Join(append(copies, files[len(files)-1]), ","), r.pubKey)

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
		t.Fatalf("replay across segments: %d differences, first %+v", len(d), d[0])
	}
	seals := 0
	for rec, err := range rd.Events(ctx, audit.Query{Kinds: []string{audit.KindSeal}}) {
		if err != nil {
			t.Fatal(err)
		}
		var b audit.SealBody
		if err := json.Unmarshal(rec.Body, &b); err != nil || b.Reason != "shoes" {
			t.Errorf("seal row %d: %s", rec.Seq, rec.Body)
		}
		seals++
	}
	if seals != shoes || len(rd.Segments()) != shoes+1 {
		for rec, _ := range rd.Events(ctx, audit.Query{}) {
			if rec.Kind == audit.KindSeal || rec.Kind == "shoe_ended" || rec.Kind == audit.KindStart || rec.Kind == "shoe_started" || rec.Kind == audit.KindSnapshot {
				t.Logf("%d %s shoe %d coup %d %.200s", rec.Seq, rec.Kind, rec.Shoe, rec.Coup, rec.Body)
			}
		}
		t.Fatalf("%d seal rows and %d segments for %d shoes ended: want a cut at each shoe's end", seals, len(rd.Segments()), shoes)
	}
}
