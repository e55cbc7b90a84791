package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/internal/testenv"
	"github.com/tablectl/tablectl/shoeread"
	"github.com/tablectl/tablectl/shoeread/shoesim"
)

// TestE2EKillDuringCutover: the controller, run as `tablectl run`, moves
// its one-file trail into a directory (audit.path and audit.dir), then on the
// directory trail cut at the end of every shoe (audit.segment_every_shoes
// 1), deals short shoes (the cut card early) and is killed with SIGKILL
// just as each shoe's last coup is recorded: a few milliseconds before,
// during or after its cut-over (the shoe ends at that coup's result time,
// and the cut follows in the same commit's wake). After each kill the
// directory verifies with the key across its segments and still holds
// every row read before the kill; the next start continues the chain; at
// the end every shoe begun in a segment was cut at its end, the controller
// has archived every sealed segment, and a replay across the files finds no
// difference.
func TestE2EKillDuringCutover(t *testing.T) {
	testenv.Long(t, "controllers killed during segment cut-overs (processes)")
	needRootToReopenKilled(t)
	t.Parallel()
	const shoes = 5
	r := newProcessRig(t, shoesim.Options{Seed: 1617, Shoes: shoes, Cut: 301})
	dir := filepath.Join(filepath.Dir(r.config), "trail")
	archive := filepath.Join(filepath.Dir(r.config), "archive")
	next := sentence{"the next sentence", func(s shoesim.Sent) bool { return !s.Heartbeat && !s.Noise }}
	// The table starts on a trail in one file (audit.path), deals its
	// first coup, and is stopped; then audit.dir is added: the next start
	// moves the file into the directory as its first segment.
	file := r.trail
	r.start()
	for {
		s := r.send(next)
		r.waitRecorded(s)
		if s.Event.Kind == shoeread.KindButton && s.Event.Button == shoeread.ButtonReveal {
			r.waitNextCoup(s)
			break
		}
	}
	r.stop()
	editConfig(t, r, func(c map[string]any) {
		a := c["audit"].(map[string]any)
		a["dir"] = dir
		a["segment_every_shoes"] = 1
		a["archive_dir"] = archive
	})
	if r.trail != dir {
		t.Fatalf("trail %s, want the directory %s", r.trail, dir)
	}
	rng := rand.New(rand.NewPCG(16, 17))
	r.start()
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the trail file %s was not moved into the directory: %v", file, err)
	}
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
		// comes with it: kill somewhere about there (not synchronisation:
		// a moment drawn at random is the test).
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
	testenv.EventuallyErr(t, guard, fmt.Sprintf("every sealed segment archived (%d files)", shoes+1), func() error {
		files, err := audit.ListSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		state, done := map[string]bool{}, len(files) == shoes+1
		for i, f := range files {
			state[filepath.Base(f)] = audit.Archived(f)
			done = done && (i == len(files)-1 || audit.Archived(f))
		}
		if !done {
			return fmt.Errorf("archived: %v", state)
		}
		return nil
	})
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
		switch json.Unmarshal(rec.Body, &b); {
		case seals == 0 && b.Reason == "moved into segments":
		case seals > 0 && b.Reason == "shoes":
		default:
			t.Errorf("seal row %d: %s", rec.Seq, rec.Body)
		}
		seals++
	}
	// The move's seal, then one a shoe from the second on: the segment
	// after the move opened inside shoe 1, and only whole shoes count.
	if seals != shoes || len(rd.Segments()) != shoes+1 {
		for rec, _ := range rd.Events(ctx, audit.Query{}) {
			if rec.Kind == audit.KindSeal || rec.Kind == "shoe_ended" || rec.Kind == audit.KindStart || rec.Kind == "shoe_started" || rec.Kind == audit.KindSnapshot {
				t.Logf("%d %s shoe %d coup %d %.200s", rec.Seq, rec.Kind, rec.Shoe, rec.Coup, rec.Body)
			}
		}
		t.Fatalf("%d seal rows and %d segments for %d shoes ended: want a cut at each shoe's end", seals, len(rd.Segments()), shoes)
	}
}
