package audit

import "syscall"

// lowerPriority gives the calling thread (locked to its goroutine) the
// lowest CPU priority, nice 19; Linux keeps a nice value per thread. A
// failure leaves the thread as it was: the check is then merely slower to
// yield.
func lowerPriority() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19) }

// threadNice is the calling thread's nice value.
func threadNice() int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		return 0
	}
	return 20 - p // the system call returns 20 - nice
}

// setThreadNice gives the calling thread (locked to its goroutine) nice n.
func setThreadNice(n int) { _ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), n) }
