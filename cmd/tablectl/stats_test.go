package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tablectl/tablectl/audit/stats"
)

// The stats command on writeTrail's trail: two coups and no dealer signed
// in, the first voided after its result (one coup, one void), the second
// with a manual card.
func TestStatsCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.db")
	writeTrail(t, path)
	var out bytes.Buffer
	if err := runStats([]string{"--db", path, "--json"}, &out); err != nil {
		t.Fatal(err)
	}
	var rep stats.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.By != stats.ByDealer || len(rep.Rows) != 1 || rep.Rows[0].Key != stats.NoDealer || rep.Rows[0].Coups != 2 || rep.Rows[0].Voids != 1 || rep.Total.VoidsPer100 != 50 {
		t.Fatalf("%s", out.String())
	}
	out.Reset()
	if err := runStats([]string{"--db", path, "--by", "shoe", "--csv"}, &out); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "shoe,coups,") || !strings.HasPrefix(lines[1], "1,2,") {
		t.Fatalf("csv:\n%s", out.String())
	}
	out.Reset()
	if err := runStats([]string{"--db", path, "--by", "shift", "--tz", "Local"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "SHIFT") || !strings.Contains(out.String(), "total") {
		t.Fatalf("text:\n%s", out.String())
	}
	for _, args := range [][]string{
		{},
		{"--db", path, "--json", "--csv"},
		{"--db", path, "--by", "table"},
		{"--db", path, "--shifts", "6am"},
		{"--db", path, "--tz", "Mars/Olympus"},
		{"--db", filepath.Join(t.TempDir(), "none.db")},
	} {
		if err := runStats(args, &out); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
