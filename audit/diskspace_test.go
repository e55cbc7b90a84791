package audit

import (
	"path/filepath"
	"testing"
)

func TestDiskWatch(t *testing.T) {
	const gib = 1 << 30
	w := DiskWatch{Path: "/var/lib/tablectl/trail.db", Floor: 2 * gib}
	for _, tt := range []struct {
		free uint64
		want string
	}{
		{10 * gib, ""},
		{3 * gib, ""},
		{2*gib - 1, KindDiskLow},
		{gib, ""},            // still low: said once
		{2*gib + gib/20, ""}, // above the floor, not by 10%
		{2*gib + gib/5 + 1, KindDiskOK},
		{3 * gib, ""},
		{gib, KindDiskLow},
	} {
		ev, ok := w.Check(tt.free, 32*gib)
		if got := map[bool]string{true: ev.Kind}[ok]; got != tt.want {
			t.Fatalf("free %d: row %q, want %q", tt.free, got, tt.want)
		}
		if ok {
			b := ev.Body.(DiskBody)
			if b.FreeBytes != tt.free || b.FloorBytes != 2*gib || b.DaysLeft != float64(tt.free)/BytesPerDay {
				t.Fatalf("body %+v", b)
			}
		}
	}
	// The default floor: 10% of a small disk, 2 GiB of a large one.
	if f := DefaultFloor(16 * gib); f != 16*gib/10 {
		t.Errorf("16 GiB disk: floor %d", f)
	}
	if f := DefaultFloor(256 * gib); f != 2*gib {
		t.Errorf("256 GiB disk: floor %d", f)
	}
}

func TestDiskSpace(t *testing.T) {
	free, total, err := DiskSpace(filepath.Join(t.TempDir(), "trail.db"))
	if err != nil || total == 0 || free > total {
		t.Fatalf("free %d of %d: %v", free, total, err)
	}
}
