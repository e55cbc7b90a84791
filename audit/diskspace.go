package audit

// Rows the controller writes about the disk the trail is on.
const (
	// KindDiskLow records that the free space under the trail fell below
	// the floor: the pit is warned while there is still room to act
	// (move the trail off the box, make room), not once writes fail.
	KindDiskLow = "ctl.disk_low"
	// KindDiskOK records that the free space is back above the floor.
	KindDiskOK = "ctl.disk_ok"
)

// DiskBody is the body of KindDiskLow and KindDiskOK rows.
type DiskBody struct {
	Path       string `json:"path"`
	FreeBytes  uint64 `json:"free_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	FloorBytes uint64 `json:"floor_bytes"`
	// DaysLeft is the free space over BytesPerDay: how long the table can
	// go on at a full day's play.
	DaysLeft float64 `json:"days_left"`
}

// BytesPerDay is what a table writes to its trail in a day of 24 hours'
// play at the simulator's pace (docs/audit.md, "Disk").
const BytesPerDay = 47 << 20

// DefaultFloor is the free-space floor when none is configured: 10% of the
// file system, at most 2 GiB (about 40 days of play).
func DefaultFloor(total uint64) uint64 { return min(total/10, 2<<30) }

// DiskWatch turns free-space readings into rows: a KindDiskLow row when the
// free space falls below the floor, a KindDiskOK row when it is back above
// the floor plus 10% (so a reading that wavers about the floor does not
// write a row each time).
type DiskWatch struct {
	Path  string
	Floor uint64 // 0: DefaultFloor of the file system
	low   bool
}

// Check takes one reading; it returns the row to record, if one is due.
func (w *DiskWatch) Check(free, total uint64) (Event, bool) {
	floor := w.Floor
	if floor == 0 {
		floor = DefaultFloor(total)
	}
	body := DiskBody{Path: w.Path, FreeBytes: free, TotalBytes: total, FloorBytes: floor, DaysLeft: float64(free) / BytesPerDay}
	switch {
	case !w.low && free < floor:
		w.low = true
		return Event{Kind: KindDiskLow, Body: body}, true
	case w.low && free > floor+floor/10:
		w.low = false
		return Event{Kind: KindDiskOK, Body: body}, true
	}
	return Event{}, false
}
