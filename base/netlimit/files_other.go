//go:build !unix

package netlimit

import "errors"

// RaiseFileLimit has nothing to raise off Unix.
func RaiseFileLimit() (uint64, error) { return 0, errors.New("no RLIMIT_NOFILE on this system") }

// OpenFiles is not known off Unix.
func OpenFiles() (int, error) { return 0, errors.New("open files are not counted on this system") }
