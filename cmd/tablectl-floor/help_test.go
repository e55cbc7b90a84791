package main

import (
	"sort"
	"testing"

	"github.com/tablectl/tablectl/internal/clitest"
)

// TestConvention: the floor's binary keeps the one command-line convention
// (internal/clitest), and its help lists every command it has.
func TestConvention(t *testing.T) {
	d := clitest.Check(t, "tablectl-floor", run)
	var names, want []string
	for _, c := range d.Commands {
		names = append(names, c.Name())
	}
	want = append(want, app.Names()...)
	sort.Strings(names)
	sort.Strings(want)
	if len(names) != len(want) {
		t.Fatalf("the help lists %v, the binary has %v", names, want)
	}
	for i := range names {
		if names[i] != want[i] {
			t.Fatalf("the help lists %v, the binary has %v", names, want)
		}
	}
}
