package audit

import "syscall"

// lowerPriority gives the calling thread (locked to its goroutine) the
// lowest CPU priority, nice 19; Linux keeps a nice value per thread. A
// failure leaves the thread as it was: the check is then merely slower to
// yield.
func lowerPriority() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19) }
