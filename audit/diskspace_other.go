//go:build !unix

package audit

import "errors"

// DiskSpace is not measured where there is no statfs.
func DiskSpace(path string) (free, total uint64, err error) {
	return 0, 0, errors.New("free space: not measured on this system")
}
