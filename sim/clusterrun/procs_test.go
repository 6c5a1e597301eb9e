package clusterrun

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestOnlyController runs the script with a stand-in for bootroll
// that prints its arguments: the hidden command, the settings, then the
// controller's command line, one argument each.
func TestTestOnlyController(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake bootroll")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := TestOnlyController(filepath.Join(dir, "w"), fake, []string{"haltFromLiveRecords", "ignoreSlotLimit"})
	if err != nil {
		t.Fatal(err)
	}
	args := ControllerCommand("/tmp/k s")
	out, err := exec.Command(script, args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{TestOnlyCommand, "--test-only=haltFromLiveRecords,ignoreSlotLimit"}, args...)
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := TestOnlyController(dir, fake, []string{"a b"}); err == nil {
		t.Fatal("a name with a space was accepted")
	}
}
