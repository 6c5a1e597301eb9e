package bootc

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultBootIDPath is where Linux publishes the ID of the current boot.
const DefaultBootIDPath = "/proc/sys/kernel/random/boot_id"

// ReadBootID reads the kernel boot ID (default path
// /proc/sys/kernel/random/boot_id, used when path is ""), trimmed. The ID
// changes on every boot, so the daemon compares it to tell that a node
// rebooted, planned or not.
func ReadBootID(path string) (string, error) {
	if path == "" {
		path = DefaultBootIDPath
	}
	f, err := os.Open(path) // edge: reads the kernel's boot ID
	if err != nil {
		return "", fmt.Errorf("reading boot ID: %w", err)
	}
	defer f.Close()
	// A boot ID is 37 bytes; do not read an arbitrary file whole.
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", fmt.Errorf("reading boot ID from %s: %w", path, err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("reading boot ID from %s: the file is empty", path)
	}
	return id, nil
}
