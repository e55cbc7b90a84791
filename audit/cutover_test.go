package audit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"

	"github.com/tablectl/tablectl/coup"
)

// openCutRecorder is a recorder on the directory trail dir that cuts every
// segPeriod of its inputs' times, each commit beginning its own
// transaction (NoPrepare), so a test may turn the writer's connection
// read-only between two commits.
func openCutRecorder(t *testing.T, dir string, sealed *[]string) *Recorder {
	t.Helper()
	r, err := OpenRecorder(context.Background(), dir, RecorderOptions{
		Table: "T1", Config: vipConfig(t), Clock: clock.NewStepping(time.Date(2025, 3, 14, 15, 0, 0, 0, time.UTC), time.Millisecond),
		Key: testKey(), CheckpointEvery: 1, Logger: quietLogger(), Segments: segPolicy(sealed), NoPrepare: true, NoHistoryCheck: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCutOverPutOffWithoutDescriptors: the process has no file descriptor
// to spare when the gaming day ends (clients took them all, as in issue
// 31): the next segment cannot be made, so nothing is sealed, the live
// segment takes every input as before (none is lost, the table is not
// suspended), no file is left behind, and once descriptors are back the
// cut happens, CutRetry later at most.
//
// It lowers its own soft RLIMIT_NOFILE for the outage, so it does not run
// in parallel, and puts the limit back before it returns.
func TestCutOverPutOffWithoutDescriptors(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	var sealed []string
	r := openCutRecorder(t, dir, &sealed)
	defer r.Close()
	ins := playInputs(t, rand.New(rand.NewPCG(31, 1)), 1)
	i := 0
	for ; i < len(ins) && len(sealed) < 1; i++ {
		if _, err := r.Submit(ctx, ins[i]); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := ListSegments(dir)
	if len(sealed) != 1 || len(files) != 2 {
		t.Fatalf("%d sealed, %d files: no first cut", len(sealed), len(files))
	}

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	none := old
	none.Cur = uint64(openFiles(t))
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &none); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	// Two gaming days of play without a descriptor to spare.
	live := r.Store().Path()
	until := ins[i].At.Add(2 * segPeriod)
	recorded := 0
	for ; i < len(ins) && ins[i].At.Before(until); i++ {
		if _, err := r.Submit(ctx, ins[i]); err != nil {
			restore()
			t.Fatalf("input %d (%s) without descriptors: %v", i, ins[i], err)
		}
		recorded++
	}
	restore()
	if err := r.Failing(); err != nil {
		t.Fatalf("the trail failed: %v", err)
	}
	if r.Store().Path() != live || len(sealed) != 1 {
		t.Fatalf("without descriptors the trail moved from %s to %s (%d sealed)", live, r.Store().Path(), len(sealed))
	}
	if now, _ := ListSegments(dir); len(now) != 2 {
		t.Fatalf("files left behind by the cut-overs put off: %v", now)
	}
	_, pit := r.View()
	if pit.Suspended {
		t.Fatalf("the table was suspended: %+v", pit.Alerts)
	}
	t.Logf("%d inputs recorded in the live segment while its cut-over was put off", recorded)
	// Descriptors back: the cut comes at the next chance after CutRetry.
	for ; i < len(ins) && len(sealed) < 2; i++ {
		if _, err := r.Submit(ctx, ins[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(sealed) != 2 {
		t.Fatal("no cut-over once descriptors were back")
	}
	head := r.Store().Head()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir, keysOpt())
	requireClean(t, rep)
	if rep.Head != head || rep.Events != head.Seq {
		t.Fatalf("verify: head %+v, %d rows; want %+v", rep.Head, rep.Events, head)
	}
}

// openFiles counts the test process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	var n int
	ents, err := filepath.Glob("/proc/self/fd/*")
	if err != nil || len(ents) == 0 {
		t.Fatalf("/proc/self/fd: %v", err)
	}
	n = len(ents)
	return n
}

// TestDiskFailsAtCutover: the disk fails (the writer's connection turned
// read-only, as a file system remounted read-only makes it) at the
// cut-over itself: before the seal row is written ("prepared": the next
// segment is open, the seal cannot go in), or once the next segment is
// live and its opening snapshot cannot go in ("opened"). The trail truly
// cannot write: the table is suspended, every input meanwhile is refused
// and, once the disk is back, the outage row names them (how many, and the
// shoe sentences) and raises audit_write_failed; the cut-over is finished,
// and the trail verifies across its segments with no row missing.
func TestDiskFailsAtCutover(t *testing.T) {
	for _, step := range []string{"prepared", "opened"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "trail")
			var sealed []string
			r := openCutRecorder(t, dir, &sealed)
			defer r.Close()
			readOnly := func(on bool) {
				if _, err := r.store.w.ExecContext(ctx, fmt.Sprintf("PRAGMA query_only = %v", on)); err != nil {
					t.Fatal(err)
				}
			}
			struck := false
			cutHook = func(s string) {
				if s == step && !struck {
					struck = true
					readOnly(true)
				}
			}
			defer func() { cutHook = func(string) {} }()
			ins := playInputs(t, rand.New(rand.NewPCG(31, 2)), 1)
			i := 0
			for ; i < len(ins) && !struck; i++ {
				if _, err := r.Submit(ctx, ins[i]); err != nil {
					t.Fatalf("input %d before the cut-over: %v", i, err)
				}
			}
			if !struck {
				t.Fatal("no cut-over reached", step)
			}
			if r.Failing() == nil {
				t.Fatalf("the disk failed at %q and the trail does not say so", step)
			}
			if _, pit := r.View(); !pit.Suspended && r.Failing() == nil {
				t.Fatal("not suspended")
			}
			var lost []coup.Input
			for ; i < len(ins) && len(lost) < 6; i++ {
				_, err := r.Submit(ctx, ins[i])
				if !errors.Is(err, ErrWriteFailed) || !errors.Is(err, ErrReadOnly) {
					t.Fatalf("input %d on a failed disk: %v", i, err)
				}
				lost = append(lost, ins[i])
			}
			readOnly(false)
			if !r.RetryTrail(ctx) {
				t.Fatalf("the trail does not take writes once the disk is back: %v", r.Failing())
			}
			_, pit := r.View()
			var al *coup.Alert
			for k := range pit.Alerts {
				if pit.Alerts[k].Kind == coup.AlertAuditFailed {
					al = &pit.Alerts[k]
				}
			}
			if !pit.Suspended || al == nil {
				t.Fatalf("after the outage: suspended %v, alerts %+v", pit.Suspended, pit.Alerts)
			}
			var from, to uint32
			for _, in := range lost {
				if in.ShoeSeq > 0 && (from == 0 || in.ShoeSeq < from) {
					from = in.ShoeSeq
				}
				to = max(to, in.ShoeSeq)
			}
			for _, want := range []string{fmt.Sprintf("(%d inputs lost)", len(lost)), fmt.Sprintf("shoe sentences %d to %d were not recorded", from, to)} {
				if !strings.Contains(al.Message, want) {
					t.Errorf("the alert %q does not say %q", al.Message, want)
				}
			}
			t.Logf("disk failed at %q: %s", step, al.Message)
			// Play on (a supervisor's resume aside): the cut-over is
			// finished at the next moment between coups.
			for ; i < len(ins) && len(sealed) < 1; i++ {
				if _, err := r.Submit(ctx, ins[i]); err != nil {
					t.Fatalf("input %d once the disk was back: %v", i, err)
				}
			}
			head := r.Store().Head()
			files, _ := ListSegments(dir)
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if len(files) != 2 || len(sealed) != 1 {
				t.Fatalf("%d files, %d sealed: want the cut-over finished", len(files), len(sealed))
			}
			rep := mustVerify(t, dir, keysOpt())
			requireClean(t, rep)
			if rep.Head != head || rep.Events != head.Seq {
				t.Fatalf("verify: head %+v, %d rows; want %+v", rep.Head, rep.Events, head)
			}
			// None of the refused inputs is in the trail.
			rd, err := OpenReader(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			for _, rec := range readAll(t, rd.Events(ctx, Query{})) {
				if !strings.HasPrefix(rec.Kind, "in.") || rec.Kind == string(coup.InAuditFailed) {
					continue
				}
				for _, in := range lost {
					if in.ShoeSeq > 0 && strings.Contains(string(rec.Body), fmt.Sprintf(`"shoe_seq":%d,`, in.ShoeSeq)) ||
						in.ShoeSeq > 0 && strings.Contains(string(rec.Body), fmt.Sprintf(`"shoe_seq":%d}`, in.ShoeSeq)) {
						t.Errorf("row %d holds shoe sentence %d, refused on the failed disk", rec.Seq, in.ShoeSeq)
					}
				}
			}
		})
	}
}
