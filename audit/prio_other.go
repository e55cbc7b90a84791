//go:build !linux

package audit

// lowerPriority does nothing where a thread's priority cannot be set alone.
func lowerPriority() {}

func threadNice() int { return 0 }

func setThreadNice(int) {}
