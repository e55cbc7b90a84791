package bench

import "testing"

func TestNeedsBroker(t *testing.T) {
	cases := []struct {
		only []string
		want bool
	}{
		{nil, true},
		{[]string{"odds"}, false},
		{[]string{"odds", "trail"}, true},
		{[]string{"latency"}, true},
	}
	for _, c := range cases {
		if got := needsBroker(c.only); got != c.want {
			t.Errorf("needsBroker(%v) = %v, want %v", c.only, got, c.want)
		}
	}
}
