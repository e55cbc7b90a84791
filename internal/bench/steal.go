package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// cpuTimes is the machine's CPU time so far, from /proc/stat's cpu line,
// in clock ticks: all of it, and what the hypervisor gave to others while
// this machine wanted to run (steal). On a shared host, steal is time the
// bench's parts waited for a CPU they could not see; the report gives it
// beside each part's rows, so that a slow run on a busy host reads as one.
type cpuTimes struct{ total, steal uint64 }

// readCPUTimes reads /proc/stat; ok is false where there is none.
func readCPUTimes() (cpuTimes, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	defer f.Close()
	t, err := parseCPUTimes(f)
	return t, err == nil
}

// parseCPUTimes reads the aggregate "cpu" line: user nice system idle
// iowait irq softirq steal guest guest_nice. Guest time is already counted
// in user and nice, so it is left out of the total.
func parseCPUTimes(r io.Reader) (cpuTimes, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %d fields on the cpu line, want at least 8 numbers", len(f)-1)
		}
		var t cpuTimes
		for i, s := range f[1:min(len(f), 9)] {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
			}
			t.total += n
			if i == 7 {
				t.steal = n
			}
		}
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return cpuTimes{}, err
	}
	return cpuTimes{}, fmt.Errorf("/proc/stat: no cpu line")
}

// stealSince is the share of the machine's CPU time since a that was
// stolen, in percent.
func (b cpuTimes) stealSince(a cpuTimes) float64 {
	if b.total <= a.total {
		return 0
	}
	return 100 * float64(b.steal-a.steal) / float64(b.total-a.total)
}
