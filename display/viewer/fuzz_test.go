package viewer

import (
	"testing"
	"time"
)

// FuzzFind: a coup or a time typed on the page finds a step or says why
// not, never panics or answers a step outside the trail.
func FuzzFind(f *testing.F) {
	tl := &Timeline{Steps: []*Step{{Index: 0, At: t0}, {Index: 1, At: t0.Add(time.Second)}}, Coups: []CoupMark{{Shoe: 1, Coup: 1, Step: 1}}}
	f.Add("1/1", "")
	f.Add("", "20:00:01.500")
	f.Add("", "2026-11-22T20:00:02Z")
	f.Add("x/", "")
	f.Fuzz(func(t *testing.T, coupText, timeText string) {
		i, err := tl.Find(coupText, timeText)
		if err == nil && (i < 0 || i >= len(tl.Steps)) {
			t.Fatalf("find %q %q: step %d of %d", coupText, timeText, i, len(tl.Steps))
		}
	})
}
