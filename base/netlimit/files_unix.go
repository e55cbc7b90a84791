//go:build unix

package netlimit

import (
	"os"
	"syscall"
)

// RaiseFileLimit raises the process's soft limit on open files
// (RLIMIT_NOFILE) to its hard limit, and returns the soft limit in force
// after. (Go's runtime does the same at start on Linux; doing it here says
// so in one place and returns the number the budget is made from.)
func RaiseFileLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			r = want
		}
	}
	return r.Cur, nil
}

// OpenFiles counts the descriptors the process has open now.
func OpenFiles() (int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	return len(names) - 1, nil // less the directory itself
}
