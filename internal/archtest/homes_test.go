package archtest

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// homes is where each stage's packages live: the folder says the layer, so
// a reader knows from an import path alone whether the flow may use it.
var homes = map[string][]string{
	"base":     {"base/", "coup"},
	"device":   {"device"},
	"shoeread": {"shoeread"},
	"audit":    {"audit"},
	"command":  {"signedcmd"},
	"display":  {"display"},
	"floor":    {"floor"},
	"beside":   {"internal/"},
	"tests":    {"internal/"},
	"tool":     {"cmd/"},
}

// TestHomesByLayer holds every package of the table to its stage's home:
// internal/ holds only what stands beside the flow and test helpers, base/
// what every stage shares, and a stage's packages (and what only that
// stage uses, under its internal/) live in its folder.
func TestHomesByLayer(t *testing.T) {
	table := readTable(t, filepath.Join(root(t), "docs", "architecture.md"))
	for _, err := range checkHomes(table) {
		t.Error(err)
	}
}

func checkHomes(table map[string]row) []string {
	var errs []string
	for _, p := range slices.Sorted(maps.Keys(table)) {
		r := table[p]
		if !inHome(p, homes[r.stage]) {
			errs = append(errs, fmt.Sprintf("docs/architecture.md:%d: %s is stage %s, whose packages live under %v", r.line, p, r.stage, homes[r.stage]))
		}
	}
	return errs
}

func inHome(pkg string, prefixes []string) bool {
	for _, h := range prefixes {
		if strings.HasSuffix(h, "/") && strings.HasPrefix(pkg, h) || pkg == h || strings.HasPrefix(pkg, h+"/") {
			return true
		}
	}
	return false
}

func TestHomesCatch(t *testing.T) {
	cases := []struct {
		r    row
		want bool // caught
	}{
		{row{pkg: "internal/clock", stage: "base"}, true},
		{row{pkg: "base/clock", stage: "base"}, false},
		{row{pkg: "coup/roads", stage: "base"}, false},
		{row{pkg: "audit/internal/edfast", stage: "audit"}, false},
		{row{pkg: "internal/edfast", stage: "audit"}, true},
		{row{pkg: "display/mqttpub", stage: "display"}, false},
		{row{pkg: "internal/controller", stage: "beside"}, false},
		{row{pkg: "floor", stage: "beside"}, true},
		{row{pkg: "auditx", stage: "audit"}, true},
		{row{pkg: "cmd/tablectl", stage: "tool"}, false},
	}
	for _, c := range cases {
		got := len(checkHomes(map[string]row{c.r.pkg: c.r})) > 0
		if got != c.want {
			t.Errorf("%s at stage %s: caught %v, want %v", c.r.pkg, c.r.stage, got, c.want)
		}
	}
}

func TestOwnInternal(t *testing.T) {
	cases := []struct {
		pkg, q string
		want   bool
	}{
		{"audit", "audit/internal/edfast", true},
		{"audit/stats", "audit/internal/edfast", true},
		{"display", "audit/internal/edfast", false},
		{"auditx", "audit/internal/edfast", false},
		{"audit", "base/clock", false},
	}
	for _, c := range cases {
		if got := ownInternal(c.pkg, c.q); got != c.want {
			t.Errorf("ownInternal(%q, %q) = %v, want %v", c.pkg, c.q, got, c.want)
		}
	}
}
