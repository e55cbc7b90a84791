//go:build !linux

package threadprio

// Nice is 0 where a thread's priority cannot be set alone.
func Nice() int { return 0 }

// SetNice does nothing where a thread's priority cannot be set alone.
func SetNice(int) {}
