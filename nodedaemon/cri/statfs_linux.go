package cri

import (
	"fmt"
	"syscall"
)

// Statfs returns the size and free space of the filesystem holding path.
// Available counts the blocks an unprivileged writer may use, so the root
// reserve is left out: a conservative view for a runtime that runs as root.
func Statfs(path string) (Space, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil { // edge: reads the host filesystem
		return Space{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := int64(st.Bsize)
	return Space{Mountpoint: path, Capacity: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs}, nil
}
