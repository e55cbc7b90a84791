package threadprio

import "syscall"

// Nice is the calling thread's nice value.
func Nice() int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		return 0
	}
	return 20 - p // the system call returns 20 - nice
}

// SetNice gives the calling thread (locked to its goroutine) nice n. A
// failure leaves the thread as it was.
func SetNice(n int) { _ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), n) }
