package archtest

import (
	"strings"
	"testing"
)

// TestCheckCatches holds check to the rule on a small table: each case
// breaks it one way and must be named; the clean module passes.
func TestCheckCatches(t *testing.T) {
	table := map[string]row{
		"coup":              {pkg: "coup", stage: "base"},
		"base/clock":        {pkg: "base/clock", stage: "base"},
		"device":            {pkg: "device", stage: "device", may: []string{"base/clock"}},
		"shoeread":          {pkg: "shoeread", stage: "shoeread", may: []string{"coup"}},
		"audit":             {pkg: "audit", stage: "audit", may: []string{"coup"}},
		"display":           {pkg: "display", stage: "display", may: []string{"audit", "coup"}},
		"internal/metrics":  {pkg: "internal/metrics", stage: "beside", may: []string{"audit"}},
		"internal/mqtttest": {pkg: "internal/mqtttest", stage: "tests"},
		"cmd/tablectl":      {pkg: "cmd/tablectl", stage: "tool", may: []string{"display"}},
	}
	clean := func() map[string]pkgInfo {
		m := map[string]pkgInfo{}
		for p, r := range table {
			m[p] = pkgInfo{imports: r.may}
		}
		return m
	}
	if errs := check(table, clean()); len(errs) != 0 {
		t.Fatalf("the clean module: %v", errs)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]pkgInfo)
		want string
	}{
		{"a later stage", func(m map[string]pkgInfo) { m["shoeread"] = pkgInfo{imports: []string{"audit", "coup"}} }, "audit (stage audit) comes after shoeread"},
		{"coup imports ours", func(m map[string]pkgInfo) { m["coup"] = pkgInfo{imports: []string{"device"}} }, "coup imports no package of ours"},
		{"flow imports beside", func(m map[string]pkgInfo) { m["audit"] = pkgInfo{imports: []string{"coup", "internal/metrics"}} }, "stands beside the flow"},
		{"code imports a test helper", func(m map[string]pkgInfo) {
			m["display"] = pkgInfo{imports: []string{"audit", "coup", "internal/mqtttest"}}
		}, "for tests only"},
		{"a command imported", func(m map[string]pkgInfo) {
			m["internal/metrics"] = pkgInfo{imports: []string{"audit", "cmd/tablectl"}}
		}, "nothing imports a command"},
		{"a test of a later stage", func(m map[string]pkgInfo) {
			m["device"] = pkgInfo{imports: []string{"base/clock"}, testImports: []string{"display"}}
		}, "the tests of device import display"},
		{"an import the row lacks", func(m map[string]pkgInfo) { m["display"] = pkgInfo{imports: []string{"audit", "coup", "shoeread"}} }, "display imports shoeread, which docs/architecture.md"},
		{"a row that says too much", func(m map[string]pkgInfo) { m["display"] = pkgInfo{imports: []string{"coup"}} }, "is said to import audit, and does not"},
		{"a package not in the table", func(m map[string]pkgInfo) { m["floor"] = pkgInfo{} }, "package floor is not in"},
		{"a row with no package", func(m map[string]pkgInfo) { delete(m, "internal/metrics") }, "internal/metrics is not a package"},
	} {
		m := clean()
		tc.edit(m)
		errs := check(table, m)
		if !strings.Contains(strings.Join(errs, "\n"), tc.want) {
			t.Errorf("%s: errors %q, want one saying %q", tc.name, errs, tc.want)
		}
	}
	// A row that breaks the rule is caught even when the code agrees.
	bad := map[string]row{}
	for p, r := range table {
		bad[p] = r
	}
	bad["device"] = row{pkg: "device", stage: "device", may: []string{"audit", "base/clock"}}
	m := clean()
	m["device"] = pkgInfo{imports: []string{"audit", "base/clock"}}
	if errs := check(bad, m); !strings.Contains(strings.Join(errs, "\n"), "device may not import audit") {
		t.Errorf("a row allowing a later stage: %q", errs)
	}
}
