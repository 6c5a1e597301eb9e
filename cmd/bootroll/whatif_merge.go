package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"

	"github.com/spf13/cobra"

	"github.com/bootroll/bootroll/sim/whatif"
)

func newWhatifMergeCmd(stdout, stderr io.Writer) *cobra.Command {
	var out string
	var jobs int
	cmd := &cobra.Command{
		Use:   "merge DIR|FILE... [--out DIR]",
		Short: "Combine the shard files of a sweep into results.json and results.csv",
		Long: `Read the shard files (shard-i-of-n.json, written by bootroll whatif
--shard i/n) in each DIR, or the FILEs given, check that they are of one
sweep (same scenario content, grid, seeds and sets; the first field that
differs is named) and cover every run exactly once (missing or duplicate
shard indexes are named), and write DIR/results.json and DIR/results.csv
byte for byte as one local run of the same sweep would, and its table to
stdout.

Exit status: 0 when every run held its invariants and expectations, 1 when
some run violated one, 2 on bad input.`,
		Example: `  bootroll whatif merge shards/ --out whatif-out`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if jobs < 1 || jobs > 256 {
				fmt.Fprintf(stderr, "--jobs: want 1 to 256, got %d\n", jobs)
				return exitError{exitBadInput}
			}
			return runWhatifMerge(stdout, stderr, args, out, jobs)
		},
	}
	cmd.Flags().StringVar(&out, "out", "whatif-out", "directory for results.json and results.csv")
	cmd.Flags().IntVar(&jobs, "jobs", runtime.GOMAXPROCS(0), "workers for what the report replays (each point's median run)")
	return cmd
}

func runWhatifMerge(stdout, stderr io.Writer, args []string, out string, jobs int) error {
	shards, err := readShards(args)
	if err != nil {
		fmt.Fprintf(stderr, "whatif merge: %v\n", err)
		return exitError{exitBadInput}
	}
	plan, res, err := whatif.Merge(shards)
	if err != nil {
		fmt.Fprintf(stderr, "whatif merge: %v\n", err)
		return exitError{exitBadInput}
	}
	violated, err := writeResults(stdout, stderr, plan, res, out, jobs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "whatif merge: %d shards, %d runs of %s; wrote %s/results.json and %s/results.csv\n",
		len(shards), res.Runs, plan.Scenario, out, out)
	if violated {
		return exitError{exitViolated}
	}
	return nil
}

// readShards reads the shard files named, or shard-*-of-*.json in each
// directory named.
func readShards(args []string) ([]whatif.NamedShard, error) {
	var files []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, a)
			continue
		}
		m, err := filepath.Glob(filepath.Join(a, "shard-*-of-*.json"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no shard files (shard-i-of-n.json) in the directory", a)
		}
		files = append(files, m...)
	}
	slices.Sort(files)
	var shards []whatif.NamedShard
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := whatif.DecodeShard(name, data)
		if err != nil {
			return nil, err
		}
		shards = append(shards, whatif.NamedShard{Name: name, File: f})
	}
	return shards, nil
}

// writeShard writes a shard's file into dir and returns its path.
func writeShard(plan *whatif.Plan, sh whatif.Shard, runs []whatif.RunSummary, dir string) (string, error) {
	f, err := whatif.NewShardFile(plan, sh, runs)
	if err != nil {
		return "", err
	}
	data, err := f.Encode()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	name := filepath.Join(dir, sh.FileName())
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	return name, nil
}
