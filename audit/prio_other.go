//go:build !linux

package audit

// lowerPriority does nothing where a thread's priority cannot be set alone.
func lowerPriority() {}
