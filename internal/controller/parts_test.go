package controller

import (
	"slices"
	"testing"
	"time"
)

// TestRunningPartsNamesTheStuck: a stop that hangs must say which part
// hangs, and parts that returned are not named.
func TestRunningPartsNamesTheStuck(t *testing.T) {
	var p runningParts
	release := make(chan struct{})
	defer close(release)
	p.start("quick", func() {})
	p.start("stuck b", func() { <-release })
	p.start("stuck a", func() { <-release })
	if got, want := p.wait(50*time.Millisecond), []string{"stuck a", "stuck b"}; !slices.Equal(got, want) {
		t.Fatalf("stuck parts %q, want %q", got, want)
	}

	var q runningParts
	q.start("one", func() {})
	q.start("two", func() { time.Sleep(time.Millisecond) }) // not synchronisation: a part that takes a moment to return
	if got := q.wait(time.Minute); got != nil {
		t.Fatalf("parts that all returned: %q named stuck", got)
	}
}
