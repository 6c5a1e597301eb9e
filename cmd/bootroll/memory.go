package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// memoryLimit returns the Go runtime memory limit to set: the flag's, else
// 0 (keep it) when GOMEMLIMIT is set, else 75% of the memory the process
// may use (physicalMemory; 0 when it cannot be read).
func memoryLimit(flag string) (int64, error) {
	if flag != "" {
		q, err := resource.ParseQuantity(flag)
		if err != nil {
			return 0, fmt.Errorf("want a size such as 6Gi or 6000M")
		}
		if q.Value() <= 0 {
			return 0, fmt.Errorf("want a positive size")
		}
		return q.Value(), nil
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	return physicalMemory() / 4 * 3, nil
}

// physicalMemory is the memory the process may use: MemTotal of
// /proc/meminfo, or the cgroup's limit when lower (a container's, a
// Kubernetes pod's memory limit); 0 when neither can be read.
func physicalMemory() int64 {
	total := meminfo("/proc/meminfo", "MemTotal:")
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if lim := cgroupLimit(f); lim > 0 && (total == 0 || lim < total) {
			return lim
		}
	}
	return total
}

// cgroupLimit reads a cgroup memory limit file: bytes, or 0 for "max",
// an unreadable file or a limit too large to mean one (cgroup v1 writes
// a huge number for none).
func cgroupLimit(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<60 {
		return 0
	}
	return v
}

// meminfo reads one "Key: n kB" line of a /proc meminfo-style file (also
// /proc/self/status) in bytes; 0 when it cannot.
func meminfo(file, key string) int64 {
	fh, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == key {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// peakRSS is the process's peak resident set size (VmHWM) in bytes; 0
// where /proc/self/status cannot be read.
func peakRSS() int64 { return meminfo("/proc/self/status", "VmHWM:") }

func memString(b int64) string {
	if b == int64(^uint64(0)>>1) {
		return "none"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}
