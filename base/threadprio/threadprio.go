// Package threadprio sets the CPU priority of the calling OS thread
// alone. Linux keeps a nice value per thread, so a goroutine locked to its
// thread can read years of history at nice 19 (the background verify, the
// dealer figures) while the card's path keeps the process's priority.
// Elsewhere these do nothing: the work is then merely slower to yield.
package threadprio

import "runtime"

// Lowest gives the calling goroutine a thread of its own at nice 19. The
// thread is never handed back (no UnlockOSThread): its priority dies
// with it.
func Lowest() {
	runtime.LockOSThread()
	SetNice(19)
}

// Same gives the calling goroutine's thread nice n, the value a caller
// read with Nice, so that the goroutines a low-priority caller starts run
// at its priority. A thread changed is never handed back.
func Same(n int) {
	runtime.LockOSThread()
	if Nice() == n {
		runtime.UnlockOSThread()
		return
	}
	SetNice(n)
}
