package logtail

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\npartial", 1, "b\n"},
		{"", 3, ""},
		{"a\n", 0, ""},
	} {
		if got := Lines(tc.in, tc.n); got != tc.want {
			t.Errorf("Lines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestBufferKeepsTheEnd: writers at once, and only the newest Keep bytes
// stay, ending with the last write.
func TestBufferKeepsTheEnd(t *testing.T) {
	for _, keep := range []int{0, 100} {
		b := &Buffer{Keep: keep}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2000 {
					fmt.Fprintf(b, "writer %d line %d\n", g, i)
				}
			}()
		}
		wg.Wait()
		fmt.Fprint(b, "the end\n")
		want := keep
		if keep == 0 {
			want = DefaultKeep
		}
		if got := b.String(); len(got) != want || !strings.HasSuffix(got, "the end\n") {
			t.Errorf("Keep %d: holds %d bytes ending %q; want %d ending with the last write", keep, len(got), got[max(0, len(got)-20):], want)
		}
	}
}
