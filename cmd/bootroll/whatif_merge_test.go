package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootroll/bootroll/sim/whatif"
)

func readFiles(t *testing.T, dir string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// TestWhatifShardMerge: 3 shards of 2 points × 4 seeds (3, 3 and 2 runs),
// each written by its own process into its own directory and merged with
// the directories in another order, give the same results.json,
// results.csv and table as one local run; a missing shard, a duplicate and
// a shard of another sweep are refused with exit 2.
func TestWhatifShardMerge(t *testing.T) {
	dir := t.TempDir()
	// The report's hook runs for a local run and for a merge, with the plan.
	var hooked []string
	orig := attachTimelines
	attachTimelines = func(plan *whatif.Plan, res *whatif.Results, jobs int) error {
		hooked = append(hooked, fmt.Sprintf("%s %d points %d runs", plan.Scenario, len(plan.Points), res.Runs))
		return nil
	}
	t.Cleanup(func() { attachTimelines = orig })
	sweep := []string{"whatif", plain, "--vary", "bootroll.pools[0].maxUnavailable=1,3", "--seeds", "4"}
	local := filepath.Join(dir, "local")
	code, localTable, stderr := runCLI(t, append(sweep, "--out", local)...)
	if code != 0 {
		t.Fatalf("local run: exit %d\n%s", code, stderr)
	}
	var shardDirs []string
	for i := range 3 {
		d := filepath.Join(dir, "s"+string(rune('0'+i)))
		code, _, stderr := runCLI(t, append(sweep, "--shard", string(rune('0'+i))+"/3", "--jobs", "1", "--out", d)...)
		if code != 0 {
			t.Fatalf("shard %d: exit %d\n%s", i, code, stderr)
		}
		if want := []string{"3 runs", "3 runs", "2 runs"}[i]; !strings.Contains(stderr, want) {
			t.Errorf("shard %d: stderr %q, want %q", i, stderr, want)
		}
		if _, err := os.Stat(filepath.Join(d, "results.json")); err == nil {
			t.Errorf("shard %d wrote results.json", i)
		}
		shardDirs = append(shardDirs, d)
	}
	merged := filepath.Join(dir, "merged")
	code, table, stderr := runCLI(t, "whatif", "merge", shardDirs[2], shardDirs[0], shardDirs[1], "--out", merged)
	if code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, stderr)
	}
	want := readFiles(t, local, "results.json", "results.csv")
	got := readFiles(t, merged, "results.json", "results.csv")
	for i, name := range []string{"results.json", "results.csv"} {
		if got[i] != want[i] {
			t.Errorf("merged %s differs from the local run:\n%s\nwant\n%s", name, got[i], want[i])
		}
	}
	if want := "plain-rollout-10 2 points 8 runs"; len(hooked) != 2 || hooked[0] != want || hooked[1] != want {
		t.Errorf("attachTimelines calls %q, want two (local run, merge) of %q", hooked, want)
	}
	if table != localTable {
		t.Errorf("merge table:\n%s\nlocal table:\n%s", table, localTable)
	}

	other := filepath.Join(dir, "other")
	if code, _, stderr := runCLI(t, "whatif", plain, "--vary", "bootroll.pools[0].maxUnavailable=1,3", "--seeds", "4", "--set", "host.reboot.max=6m", "--shard", "1/3", "--out", other); code != 0 {
		t.Fatalf("other sweep: exit %d\n%s", code, stderr)
	}
	s := func(d string, i int) string { return filepath.Join(d, "shard-"+string(rune('0'+i))+"-of-3.json") }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{shardDirs[0], shardDirs[2]}, "missing shards 1 of 3"},
		{"duplicate", []string{shardDirs[0], shardDirs[1], s(shardDirs[1], 1), shardDirs[2]}, "shard 1 of 3 is in"},
		{"other sweep", []string{shardDirs[0], other, shardDirs[2]}, "sweep.sets differs"},
		{"no shards", []string{dir}, "no shard files"},
	} {
		code, _, stderr := runCLI(t, append([]string{"whatif", "merge", "--out", filepath.Join(dir, "bad")}, tc.args...)...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and %q", tc.name, code, stderr, tc.want)
		}
	}
}

// TestWhatifShardMergeReport: with the real timeline replay, two shards
// merged write the same results.json (timelines included), results.csv
// and report.html as one local run.
func TestWhatifShardMergeReport(t *testing.T) {
	dir := t.TempDir()
	sweep := []string{"whatif", plain, "--vary", "bootroll.pools[0].maxUnavailable=1,3", "--seeds", "2"}
	local := filepath.Join(dir, "local")
	if code, _, stderr := runCLI(t, append(sweep, "--out", local)...); code != 0 {
		t.Fatalf("local run: exit %d\n%s", code, stderr)
	}
	var shardDirs []string
	for i := range 2 {
		d := filepath.Join(dir, "s"+string(rune('0'+i)))
		if code, _, stderr := runCLI(t, append(sweep, "--shard", string(rune('0'+i))+"/2", "--out", d)...); code != 0 {
			t.Fatalf("shard %d: exit %d\n%s", i, code, stderr)
		}
		shardDirs = append(shardDirs, d)
	}
	merged := filepath.Join(dir, "merged")
	if code, _, stderr := runCLI(t, "whatif", "merge", shardDirs[1], shardDirs[0], "--out", merged); code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, stderr)
	}
	files := []string{"results.json", "results.csv", "report.html"}
	want, got := readFiles(t, local, files...), readFiles(t, merged, files...)
	for i, name := range files {
		if got[i] != want[i] {
			t.Errorf("merged %s differs from the local run's", name)
		}
	}
	if !strings.Contains(want[0], "medianRun") {
		t.Errorf("results.json has no median-run timeline")
	}
}
