package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]int64{
		"max\n":                 0,
		"8589934592\n":          8 << 30,
		"9223372036854771712\n": 0, // cgroup v1's "no limit"
		"":                      0,
		"-1":                    0,
	} {
		f := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := cgroupLimit(f); got != want {
			t.Errorf("cgroupLimit(%q) = %d, want %d", content, got, want)
		}
	}
	if got := cgroupLimit(filepath.Join(dir, "absent")); got != 0 {
		t.Errorf("cgroupLimit(absent) = %d, want 0", got)
	}
}

func TestMeminfo(t *testing.T) {
	f := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(f, []byte("Name:\tbootroll\nVmPeak:\t  2048 kB\nVmHWM:\t  1024 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := meminfo(f, "VmHWM:"); got != 1024<<10 {
		t.Errorf("VmHWM = %d, want %d", got, 1024<<10)
	}
	if got := meminfo(f, "MemTotal:"); got != 0 {
		t.Errorf("absent key = %d, want 0", got)
	}
}

func TestScenarioRunRefusesBadMemoryLimit(t *testing.T) {
	code, _, errOut := runCLI(t, "scenario", "run", "--memory-limit", "-3Gi", "../../scenarios/plain-rollout-10.yaml")
	if code != exitBadInput || !strings.Contains(errOut, `--memory-limit "-3Gi": want a positive size`) {
		t.Errorf("exit %d, stderr %q; want 2 naming the flag", code, errOut)
	}
}
