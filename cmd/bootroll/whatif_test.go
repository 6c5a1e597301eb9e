package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWhatifJobsByteIdentical runs the same sweep with --jobs 1 and
// --jobs 3: results.json and results.csv must be byte-identical, and the
// table has one row per grid point.
func TestWhatifJobsByteIdentical(t *testing.T) {
	dir := t.TempDir()
	var files [2][2][]byte
	for i, jobs := range []string{"1", "3"} {
		out := filepath.Join(dir, jobs)
		code, stdout, stderr := runCLI(t, "whatif", plain, "--vary", "bootroll.pools[0].maxUnavailable=1,10,2", "--seeds", "2", "--jobs", jobs, "--out", out)
		if code != 0 {
			t.Fatalf("--jobs %s: exit %d\n%s%s", jobs, code, stdout, stderr)
		}
		if rows := strings.Count(stdout, "\n"); rows != 4 {
			t.Errorf("--jobs %s: table has %d lines, want a header and 3 rows:\n%s", jobs, rows, stdout)
		}
		if !strings.Contains(stderr, "6 runs in") || !strings.Contains(stderr, "runs/s") {
			t.Errorf("--jobs %s: stderr has no speed figure:\n%s", jobs, stderr)
		}
		for j, name := range []string{"results.json", "results.csv"} {
			b, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			files[i][j] = b
		}
	}
	for j, name := range []string{"results.json", "results.csv"} {
		if !bytes.Equal(files[0][j], files[1][j]) {
			t.Errorf("%s differs between --jobs 1 and --jobs 3", name)
		}
	}
}

func TestWhatifBadInput(t *testing.T) {
	mu := "bootroll.pools[0].maxUnavailable=1,2"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "3"}, "--vary: give at least one"},
		{[]string{"--vary", mu, "--seeds", "0"}, "--seeds: want at least 1, got 0"},
		{[]string{"--vary", mu, "--jobs", "0"}, "--jobs: want 1 to 256, got 0"},
		{[]string{"--vary", mu, "--seed", "0"}, "--seed: want at least 1, got 0"},
		{[]string{"--vary", "bootroll.pools[0].maxUnavailable="}, `empty list of values`},
		{[]string{"--vary", "bootroll.pools[0].nope=1,2"}, `--vary bootroll.pools[0].nope: value "1"`},
		{[]string{"--vary", "bootroll.pools[0].maxUnavailable=1,2,3,4,5,6,7,8,9,10", "--seeds", "20000"}, "more than the limit of 100000 runs"},
		{[]string{"--vary", mu, "--memory-limit", "lots"}, `--memory-limit "lots"`},
	} {
		code, _, stderr := runCLI(t, append([]string{"whatif", plain, "--out", t.TempDir()}, tc.args...)...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
