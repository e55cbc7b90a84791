package controller

import (
	"context"
	"path/filepath"
	"time"

	"github.com/tablectl/tablectl/audit"
)

// diskCheckEvery is how often the free space under the trail is read: at
// about 47 MB a day, a minute is far inside any floor.
const diskCheckEvery = time.Minute

// watchDisk records a ctl.disk_low row (which the publisher turns into a
// pit alert) when the free space under the trail falls below the floor,
// and ctl.disk_ok once it is back: the pit hears of a filling disk days
// before writes fail, not when the table stops.
func (ctl *Controller) watchDisk(ctx context.Context) {
	w := audit.DiskWatch{Path: ctl.cfg.Audit.Trail(), Floor: ctl.floorBytes()}
	check := func() {
		free, total, err := audit.DiskSpace(ctl.diskPath())
		if err != nil {
			ctl.log.Warn("free space under the trail not read", "err", err)
			return
		}
		if ev, ok := w.Check(free, total); ok {
			b := ev.Body.(audit.DiskBody)
			ctl.log.Warn("free space under the trail", "row", ev.Kind, "free_bytes", b.FreeBytes, "floor_bytes", b.FloorBytes, "days_left", b.DaysLeft)
			if _, err := ctl.rec.Record(ctx, ev); err != nil {
				ctl.log.Warn("disk row not recorded", "kind", ev.Kind, "err", err)
			}
		}
	}
	check()
	t := ctl.clock.NewTicker(diskCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			check()
		}
	}
}

// diskPath is a file on the trail's file system, for DiskSpace (which reads
// the file system of its folder).
func (ctl *Controller) diskPath() string {
	if ctl.cfg.Audit.Dir != "" {
		return filepath.Join(ctl.cfg.Audit.Dir, "lock")
	}
	return ctl.cfg.Audit.Path
}

// floorBytes is audit.free_space_floor_mb; 0 is DiskWatch's default.
func (ctl *Controller) floorBytes() uint64 {
	return uint64(max(0, ctl.cfg.Audit.FreeSpaceFloorMB)) << 20
}
