package floortest

import "testing"

func TestTailLines(t *testing.T) {
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
		if got := TailLines(tc.in, tc.n); got != tc.want {
			t.Errorf("TailLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
