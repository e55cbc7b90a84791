package controller

import (
	"context"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// retentionEvery is how often the retention part looks at the sealed
// segments besides when one is sealed: an archive that failed is tried
// again, and segments past audit.keep_days go.
const retentionEvery = time.Hour

// retainSegments archives each sealed segment of a directory trail and
// deletes the archived ones past audit.keep_days, or the oldest archived
// while the free space is under the floor (never one not archived). An
// archive that fails is logged and recorded (ctl.archive_failed, which the
// pit sees as an alert): the segment stays, and the disk fills, which the
// disk watch's floor tells the pit in time.
func (ctl *Controller) retainSegments(ctx context.Context) {
	a := ctl.cfg.Audit
	if a.ArchiveDir == "" && len(a.ArchiveCommand) == 0 {
		return // nothing to archive to: every segment stays on the box
	}
	floor := ctl.floorBytes()
	if floor == 0 {
		if _, total, err := audit.DiskSpace(ctl.diskPath()); err == nil {
			floor = audit.DefaultFloor(total)
		}
	}
	p := &audit.Retention{ArchiveDir: a.ArchiveDir, ArchiveCommand: a.ArchiveCommand, KeepDays: a.KeepDays, FloorBytes: floor,
		Clock: ctl.clock, Logger: ctl.log.With("part", "retention")}
	// Nothing is deleted while the start's background check of the
	// history reads the segments.
	if _, err := ctl.rec.WaitHistoryCheck(ctx); ctx.Err() != nil {
		return
	} else if err != nil {
		ctl.log.Warn("segment retention: the history check failed; nothing is archived or deleted", "err", err)
		return
	}
	failed := map[string]bool{}
	sweep := func() {
		rep := p.Sweep(ctx, ctl.rec.Store())
		for path, err := range rep.Failed {
			if failed[path] {
				continue // recorded once until it succeeds
			}
			failed[path] = true
			ev := audit.Event{Kind: audit.KindArchiveFailed, Body: audit.ArchiveFailedBody{Segment: path, Error: err.Error()}}
			if _, err := ctl.rec.Record(ctx, ev); err != nil {
				ctl.log.Warn("archive failure not recorded", "err", err)
			}
		}
		for _, path := range rep.Archived {
			delete(failed, path)
		}
	}
	sweep()
	t := ctl.clock.NewTicker(retentionEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ctl.sealed:
			sweep()
		case <-t.C():
			sweep()
		}
	}
}
