package controller

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tablectl/tablectl/audit"
	"github.com/tablectl/tablectl/device"
	"github.com/tablectl/tablectl/internal/config"
)

// TestDiskLowRecorded runs the controller with a free-space floor above
// what any disk has: the first reading records a ctl.disk_low row naming
// the free space and the floor.
func TestDiskLowRecorded(t *testing.T) {
	dir := t.TempDir()
	doc := `{"table_id":"DISK-01","profile":"vip","shoe":{"port":{"path":"` + filepath.Join(dir, "no-shoe") + `"}},
		"audit":{"path":"trail.db","free_space_floor_mb":1073741824},"mqtt":{"disabled":true}}`
	cfg, tc, err := config.Parse([]byte(doc), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Shoe.Port.BackoffMin = device.Duration(5 * time.Millisecond)
	// Run until the disk_low row is committed (the first reading comes
	// just after start; a loaded machine may take a while), then stop.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	onCommit := func(c audit.Commit) {
		for _, r := range c.Records {
			if r.Kind == audit.KindDiskLow {
				cancel()
			}
		}
	}
	ctl, err := Start(ctx, cfg, tc, slog.New(slog.NewTextHandler(io.Discard, nil)), Hooks{OnCommit: onCommit})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rd, err := audit.OpenReader(context.Background(), cfg.Audit.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var rows []audit.Record
	for r, err := range rd.Events(context.Background(), audit.Query{Kinds: []string{audit.KindDiskLow, audit.KindDiskOK}}) {
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 1 || rows[0].Kind != audit.KindDiskLow {
		t.Fatalf("disk rows %+v, want one %s", rows, audit.KindDiskLow)
	}
	var b audit.DiskBody
	if err := json.Unmarshal(rows[0].Body, &b); err != nil {
		t.Fatal(err)
	}
	if b.FloorBytes != 1<<50 || b.FreeBytes == 0 || b.FreeBytes > b.TotalBytes || b.Path != cfg.Audit.Path {
		t.Fatalf("body %+v", b)
	}
}
