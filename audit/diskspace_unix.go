//go:build unix

package audit

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DiskSpace is the space available to the controller (not root's reserve)
// and the size of the file system holding path.
func DiskSpace(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Dir(path), &st); err != nil {
		return 0, 0, fmt.Errorf("free space under %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
