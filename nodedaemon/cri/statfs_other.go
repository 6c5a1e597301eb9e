//go:build !linux

package cri

import "fmt"

// Statfs is only implemented on Linux, where the daemon runs.
func Statfs(path string) (Space, error) {
	return Space{}, fmt.Errorf("statfs %s: not supported on this platform", path)
}
