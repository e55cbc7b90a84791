package audit

// Retention of a directory trail: sealed segments are archived (copied to
// an archive directory, or handed to the operator's command), and only
// archived ones are ever deleted from the box: those older than the days
// kept, and, while the free space is under the floor, the oldest archived
// ones besides. A segment not yet archived is never deleted.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tablectl/tablectl/base/clock"
)

// archivedSuffix marks a segment archived: the file <segment>.archived
// beside it says where it went. Deleting a segment needs it.
const archivedSuffix = ".archived"

// ErrNotArchived refuses to delete a sealed segment that was not archived.
var ErrNotArchived = errors.New("audit segment not archived: it is not deleted")

// Retention is what a directory trail keeps and where sealed segments go.
type Retention struct {
	// ArchiveDir receives a copy of each sealed segment (written to a
	// temporary name, fsynced, verified against the segment, then renamed).
	ArchiveDir string
	// ArchiveCommand, if set, is run with the segment's path as its last
	// argument; exit status 0 is success (the command has stored it). It
	// is tried after ArchiveDir when both are set; both must succeed.
	ArchiveCommand []string
	// CommandTimeout bounds one run of ArchiveCommand; 0 is 10 minutes.
	CommandTimeout time.Duration
	// KeepDays is how many days of sealed segments stay on the box after
	// they are archived (by their seal row's time); 0 keeps them all.
	KeepDays int
	// FloorBytes: while the free space is under it, archived segments are
	// deleted oldest first even within KeepDays. 0: no such deletion.
	FloorBytes uint64
	Clock      clock.Clock
	Logger     *slog.Logger
	// diskSpace reads the free space (tests).
	diskSpace func(path string) (free, total uint64, err error)
}

// SweepReport is what one Sweep did.
type SweepReport struct {
	Archived []string // archived now
	Deleted  []string // deleted from the box
	// Failed are the segments whose archiving failed (they stay, and will
	// be tried again): the pit must hear of it, as the disk then fills.
	Failed map[string]error
}

// Archived reports whether the segment at path was archived.
func Archived(path string) bool {
	_, err := os.Stat(path + archivedSuffix)
	return err == nil
}

// Archive archives one sealed segment as p says and marks it archived.
func (p *Retention) Archive(ctx context.Context, path string) error {
	if p.ArchiveDir == "" && len(p.ArchiveCommand) == 0 {
		return errors.New("audit archive: neither an archive directory nor a command is set")
	}
	var where []string
	if p.ArchiveDir != "" {
		dst, err := archiveCopy(ctx, path, p.ArchiveDir)
		if err != nil {
			return err
		}
		where = append(where, dst)
	}
	if len(p.ArchiveCommand) > 0 {
		timeout := p.CommandTimeout
		if timeout <= 0 {
			timeout = 10 * time.Minute
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		args := append(append([]string{}, p.ArchiveCommand[1:]...), path)
		out, err := exec.CommandContext(cctx, p.ArchiveCommand[0], args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("audit archive command %s %s: %w: %.500s", p.ArchiveCommand[0], path, err, strings.TrimSpace(string(out)))
		}
		where = append(where, "command "+strings.Join(p.ArchiveCommand, " "))
	}
	if err := writeSynced(path+archivedSuffix, []byte(strings.Join(where, "\n")+"\n")); err != nil {
		return fmt.Errorf("audit archive: mark %s archived: %w", path, err)
	}
	return nil
}

// archiveCopy copies a segment into dir as a consistent, self-contained
// SQLite file (VACUUM INTO from a read-only connection), checks the copy
// holds the same chain, and moves it into place. An existing copy that
// verifies the same is kept.
func archiveCopy(ctx context.Context, path, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("audit archive: %w", err)
	}
	// The archive must be another directory: a "copy" onto the segment
	// itself would mark it archived, and retention would then delete the
	// only copy.
	if a, err := os.Stat(dir); err == nil {
		if b, err := os.Stat(filepath.Dir(path)); err == nil && os.SameFile(a, b) {
			return "", fmt.Errorf("audit archive: the archive directory %s is the trail's own", dir)
		}
	}
	dst := filepath.Join(dir, filepath.Base(path))
	src, err := openFileReader(ctx, path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	want, err := src.Head(ctx)
	if err != nil {
		return "", err
	}
	if same(ctx, dst, want) {
		return dst, nil
	}
	tmp := dst + ".tmp"
	os.Remove(tmp)
	if _, err := src.db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return "", fmt.Errorf("audit archive: copy %s: %w", path, err)
	}
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("audit archive: %w", err)
	}
	if !same(ctx, tmp, want) {
		os.Remove(tmp)
		return "", fmt.Errorf("audit archive: the copy of %s does not hold its chain", path)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("audit archive: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return dst, nil
}

// same reports whether the trail file at path verifies cleanly and ends at
// head.
func same(ctx context.Context, path string, head Head) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	rep, err := Verify(ctx, path, VerifyOptions{})
	return err == nil && rep.OK() && rep.Head == head
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// RemoveSegment deletes a sealed segment from the box, refusing
// (ErrNotArchived) one not archived, and the live one.
func (s *Store) RemoveSegment(path string) error {
	if s.seg == nil {
		return errors.New("audit remove segment: not a directory trail")
	}
	if !Archived(path) {
		return fmt.Errorf("%w: %s", ErrNotArchived, path)
	}
	g := s.seg
	g.retire.Lock() // no read of a sealed segment runs now
	defer g.retire.Unlock()
	g.mu.Lock()
	i := -1
	for j, sg := range g.sealed {
		if sg.path == path {
			i = j
		}
	}
	if i < 0 {
		g.mu.Unlock()
		return fmt.Errorf("audit remove segment: %s is not a sealed segment of %s", path, g.dir)
	}
	sg := g.sealed[i]
	g.sealed = append(g.sealed[:i:i], g.sealed[i+1:]...)
	g.mu.Unlock()
	var errs []error
	if sg.r != nil {
		errs = append(errs, sg.r.Close())
	}
	for _, f := range []string{path, path + "-wal", path + "-shm", path + "-lock", path + archivedSuffix} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sealedAt is the time of a segment's last row (its seal).
func sealedAt(ctx context.Context, r *Reader) (time.Time, error) {
	var at string
	if err := r.db.QueryRowContext(ctx, `SELECT at FROM events ORDER BY seq DESC LIMIT 1`).Scan(&at); err != nil {
		return time.Time{}, err
	}
	return parseTime(at)
}

// Sweep archives every sealed segment not yet archived, then deletes the
// archived ones past KeepDays, and, while the free space is under
// FloorBytes, the oldest archived ones besides. Never the live segment,
// never one not archived.
func (p *Retention) Sweep(ctx context.Context, s *Store) SweepReport {
	rep := SweepReport{Failed: map[string]error{}}
	log := p.Logger
	if log == nil {
		log = slog.Default()
	}
	now := clock.Or(p.Clock).Now()
	for _, sg := range s.SealedSegments() {
		if Archived(sg.Path) {
			continue
		}
		if err := p.Archive(ctx, sg.Path); err != nil {
			rep.Failed[sg.Path] = err
			log.Error("audit segment not archived: it stays on the box until it is", "segment", sg.Path, "err", err)
			continue
		}
		rep.Archived = append(rep.Archived, sg.Path)
		log.Info("audit segment archived", "segment", sg.Path)
	}
	space := p.diskSpace
	if space == nil {
		space = DiskSpace
	}
	under := func() bool {
		if p.FloorBytes == 0 {
			return false
		}
		free, _, err := space(filepath.Join(s.seg.dir, "lock"))
		return err == nil && free < p.FloorBytes
	}
	for _, sg := range s.SealedSegments() { // oldest first
		if !Archived(sg.Path) {
			continue
		}
		old := false
		if p.KeepDays > 0 {
			s.seg.retire.RLock()
			if rd := s.segReader(sg.Path); rd != nil {
				at, err := sealedAt(ctx, rd)
				old = err == nil && now.Sub(at) > time.Duration(p.KeepDays)*24*time.Hour
			}
			s.seg.retire.RUnlock()
		}
		if !old && !under() {
			continue
		}
		if err := s.RemoveSegment(sg.Path); err != nil {
			log.Error("audit segment not deleted", "segment", sg.Path, "err", err)
			continue
		}
		rep.Deleted = append(rep.Deleted, sg.Path)
		log.Info("audit segment deleted from the box (archived)", "segment", sg.Path, "past_keep_days", old)
	}
	return rep
}

// segReader is the reader of a sealed segment on the box.
func (s *Store) segReader(path string) *Reader {
	s.seg.mu.RLock()
	defer s.seg.mu.RUnlock()
	for _, sg := range s.seg.sealed {
		if sg.path == path {
			return sg.r
		}
	}
	return nil
}

// KindArchiveFailed records that a sealed segment could not be archived: it
// stays on the box (and is tried again), so the pit must act before the
// disk fills.
const KindArchiveFailed = "ctl.archive_failed"

// ArchiveFailedBody is a KindArchiveFailed row's body.
type ArchiveFailedBody struct {
	Segment string `json:"segment"`
	Error   string `json:"error"`
}
