package audit

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/base/clock"
)

// segmentedTrail plays a shoe on a directory trail and returns the open
// recorder (several sealed segments behind it).
func segmentedTrail(t *testing.T) (*Recorder, string) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "trail")
	r := openSegRecorder(t, dir, nil, nil)
	for _, in := range playInputs(t, rand.New(rand.NewPCG(8, 2)), 1) {
		if _, err := r.Submit(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(r.Store().SealedSegments()); n < 3 {
		t.Fatalf("%d sealed segments, want 3 or more", n)
	}
	return r, dir
}

// TestRetentionRefusesUnarchived: a segment whose archiving failed (the
// operator's command exits 1) is never deleted, not past the days kept nor
// with the disk under its floor; the live segment never is.
func TestRetentionRefusesUnarchived(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	r, _ := segmentedTrail(t)
	defer r.Close()
	st := r.Store()
	segs := st.SealedSegments()
	if err := st.RemoveSegment(segs[0].Path); !errors.Is(err, ErrNotArchived) {
		t.Fatalf("RemoveSegment of an unarchived segment: %v, want ErrNotArchived", err)
	}
	p := &Retention{ArchiveCommand: []string{"sh", "-c", "echo no room on the archive >&2; exit 1", "archive"}, KeepDays: 1, FloorBytes: 1 << 40,
		Clock: fixedClock(time.Now().Add(365 * 24 * time.Hour)), Logger: quietLogger(),
		diskSpace: func(string) (uint64, uint64, error) { return 0, 1 << 30, nil }}
	rep := p.Sweep(ctx, st)
	if len(rep.Deleted) != 0 || len(rep.Archived) != 0 || len(rep.Failed) != len(segs) {
		t.Fatalf("sweep with a failing archive: %+v", rep)
	}
	for _, sg := range segs {
		if _, err := os.Stat(sg.Path); err != nil {
			t.Fatalf("segment %s gone: %v", sg.Path, err)
		}
	}
	if err := st.RemoveSegment(st.Path()); err == nil {
		t.Fatal("the live segment was removed")
	}
}

// TestRetentionArchivesThenDeletes: sealed segments are copied to the
// archive directory (each copy verifies and ends where the segment does)
// and handed to the operator's command; those past the days kept are then
// deleted from the box, and what stays (a directory whose first segment
// starts past row 1) still verifies, replays and starts the table.
func TestRetentionArchivesThenDeletes(t *testing.T) {
	// Alongside the other tests that wait on the disk's fsync, not after
	// them: most of its time is those waits (go test -short's slowest package).
	t.Parallel()
	ctx := context.Background()
	r, dir := segmentedTrail(t)
	st := r.Store()
	segs := st.SealedSegments()
	archive := filepath.Join(t.TempDir(), "archive")
	handed := filepath.Join(t.TempDir(), "handed")
	p := &Retention{ArchiveDir: archive, ArchiveCommand: []string{"sh", "-c", `echo "$1" >> ` + handed, "archive"}, Logger: quietLogger()}
	rep := p.Sweep(ctx, st)
	if len(rep.Archived) != len(segs) || len(rep.Deleted) != 0 || len(rep.Failed) != 0 {
		t.Fatalf("first sweep: %+v", rep)
	}
	for _, sg := range segs {
		cp := filepath.Join(archive, filepath.Base(sg.Path))
		vr := mustVerify(t, cp, keysOpt())
		requireClean(t, vr)
		if vr.Head != sg.Head {
			t.Fatalf("archived %s ends at %+v, the segment at %+v", cp, vr.Head, sg.Head)
		}
	}
	if b, err := os.ReadFile(handed); err != nil || len(b) == 0 {
		t.Fatalf("the command was not run: %q %v", b, err)
	}
	// A year on, keeping 30 days: every sealed segment goes.
	p.KeepDays = 30
	p.Clock = fixedClock(time.Now().Add(365 * 24 * time.Hour))
	rep = p.Sweep(ctx, st)
	if len(rep.Deleted) != len(segs) {
		t.Fatalf("second sweep deleted %d of %d: %+v", len(rep.Deleted), len(segs), rep)
	}
	files, _ := ListSegments(dir)
	if len(files) != 1 || files[0] != st.Path() {
		t.Fatalf("left on the box: %v", files)
	}
	// The table deals on; the box's trail and the archive together verify.
	head := st.Head()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	requireClean(t, mustVerify(t, dir, keysOpt()))
	r = openSegRecorder(t, dir, nil, nil)
	if done, err := r.WaitHistoryCheck(ctx); !done || err != nil {
		t.Fatalf("history check of the trimmed directory: %v %v", done, err)
	}
	r.Close()
	all, _ := ListSegments(archive)
	all = append(all, files...)
	rd, err := OpenTrail(ctx, all...)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	whole, err := rd.Verify(ctx, keysOpt())
	if err != nil {
		t.Fatal(err)
	}
	requireClean(t, whole)
	if whole.Events < head.Seq {
		t.Fatalf("archive + box: %d rows, head was %d", whole.Events, head.Seq)
	}
}

func fixedClock(t time.Time) *clock.Fake { return clock.NewFake(t) }

// TestArchiveNotOntoItself: an archive directory that is the trail's own is
// refused: the segment would be marked archived without a second copy, and
// retention would then delete the only one.
func TestArchiveNotOntoItself(t *testing.T) {
	r, dir := segmentedTrail(t)
	defer r.Close()
	seg := r.Store().SealedSegments()[0].Path
	p := &Retention{ArchiveDir: dir, Logger: quietLogger()}
	if err := p.Archive(context.Background(), seg); err == nil || Archived(seg) {
		t.Fatalf("archive into the trail's own directory: %v, archived %v", err, Archived(seg))
	}
}
