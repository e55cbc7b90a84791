package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseCPUTimes(t *testing.T) {
	for _, tc := range []struct {
		name, stat   string
		total, steal uint64
		err          string
	}{
		{name: "kernel 5+", stat: "cpu  100 2 30 400 5 6 7 50 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\n", total: 600, steal: 50},
		{name: "no guest fields", stat: "cpu  100 2 30 400 5 6 7 50\n", total: 600, steal: 50},
		{name: "too few", stat: "cpu  100 2 30 400\n", err: "fields"},
		{name: "not a number", stat: "cpu  100 2 30 400 5 6 7 x\n", err: "invalid syntax"},
		{name: "no cpu line", stat: "intr 1 2 3\n", err: "no cpu line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCPUTimes(strings.NewReader(tc.stat))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got.total != tc.total || got.steal != tc.steal {
				t.Fatalf("got %+v, %v; want total %d steal %d", got, err, tc.total, tc.steal)
			}
		})
	}
	a, b := cpuTimes{total: 1000, steal: 10}, cpuTimes{total: 1400, steal: 110}
	if s := b.stealSince(a); s != 25 {
		t.Errorf("steal since = %v%%, want 25%%", s)
	}
	if s := a.stealSince(a); s != 0 {
		t.Errorf("steal over no time = %v%%, want 0", s)
	}
}

// TestReadCPUTimes reads this machine's /proc/stat where there is one.
func TestReadCPUTimes(t *testing.T) {
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc/stat here (not Linux)")
	}
	a, ok := readCPUTimes()
	if !ok || a.total == 0 || a.steal > a.total {
		t.Fatalf("read %+v, ok %v", a, ok)
	}
}
