package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootroll/bootroll/sim/explore"
)

type exploreFlags struct {
	seeds        int
	firstSeed    uint64
	faults       string
	jobs         int
	untilFailure bool
	budget       time.Duration
	out          string
	shrinkRuns   int
}

func newExploreCmd(stdout, stderr io.Writer) *cobra.Command {
	var f exploreFlags
	cmd := &cobra.Command{
		Use:   "explore FILE...",
		Short: "Run scenarios under many seeds with random faults and actions; write and shrink what fails",
		Long: `Explore runs each scenario under --seeds seeds. Each run adds a schedule of
1-4 faults and actions drawn from the seed (from the --faults categories)
at times within the span the scenario takes without them, extends the
limit so the world has time to recover, drops the scenario's timing
expectations and negative controls, and checks every invariant.

Categories: api (API errors, latency), stale (delayed and dropped watch
events), crash (controller and daemon crashes), host (node crashes, boot
and disk faults), human (pool image changes and reverts, pauses, workload
scaling, nodes added and removed), karpenter (NodeClass drift), clock (a
node's clock seconds to minutes ahead or behind). A category
with nothing that fits a scenario draws nothing there.

For each scenario and violated invariant, the first failing run is written
to --out as a self-contained scenario (the original plus the concrete
schedule, at explicit times and nodes) that 'bootroll scenario run'
replays exactly, and then shrunk: faults and actions are dropped, nodes and
replicas cut and times rounded while the same invariant still fails; the
shrunk file is written beside it with the command that replays it.

The table says, per scenario: runs, runs that violated each invariant,
simulated hours and wall time. Results do not depend on --jobs (except when
--until-failure or --budget stop early).

Exit status: 0 when nothing was violated, 1 when something was, 2 on bad
input.`,
		Example: `  bootroll scenario explore scenarios/*.yaml --seeds 200 --jobs 2
  bootroll scenario explore scenarios/plain-rollout-10.yaml --seeds 1000 --faults crash,human --until-failure
  bootroll scenario explore scenarios/*.yaml --seeds 100000 --budget 30m --out /tmp/found`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runExplore(stdout, stderr, args, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.seeds, "seeds", 100, "runs per scenario, one seed each")
	fl.Uint64Var(&f.firstSeed, "first-seed", 1, "seed of the first run; run k uses first-seed+k")
	fl.StringVar(&f.faults, "faults", "all", "comma-separated categories to draw from: api, stale, crash, host, human, karpenter, clock, or all")
	fl.IntVar(&f.jobs, "jobs", 1, "runs at once, each with its own engine")
	fl.BoolVar(&f.untilFailure, "until-failure", false, "stop starting runs after the first that fails")
	fl.DurationVar(&f.budget, "budget", 0, "stop starting runs after this much wall time (0: no limit)")
	fl.StringVar(&f.out, "out", "explore-out", "directory for the reproducers of violations (empty: write none)")
	fl.IntVar(&f.shrinkRuns, "shrink-runs", 150, "most runs one shrink may make (negative: do not shrink)")
	return cmd
}

func runExplore(stdout, stderr io.Writer, files []string, f exploreFlags) error {
	cats, err := explore.ParseCategories(f.faults)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{exitBadInput}
	}
	if f.jobs < 1 || f.jobs > 64 {
		fmt.Fprintf(stderr, "--jobs: want 1 to 64, got %d\n", f.jobs)
		return exitError{exitBadInput}
	}
	if f.seeds < 1 || f.seeds > 10_000_000 {
		fmt.Fprintf(stderr, "--seeds: want 1 to 10000000, got %d\n", f.seeds)
		return exitError{exitBadInput}
	}
	var targets []explore.Target
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{exitBadInput}
		}
		targets = append(targets, explore.Target{File: file, Data: data})
	}
	rep, err := explore.Run(targets, explore.Config{
		Seeds: f.seeds, FirstSeed: f.firstSeed, Categories: cats, Jobs: f.jobs,
		UntilFailure: f.untilFailure, Budget: f.budget, ShrinkRuns: f.shrinkRuns,
		Out: f.out,
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{exitBadInput}
	}
	printExplore(stdout, rep)
	if len(rep.Failures) > 0 {
		return exitError{exitViolated}
	}
	return nil
}

func printExplore(w io.Writer, rep *explore.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRUNS\tVIOLATIONS (runs)\tSIM HOURS\tWALL")
	for _, s := range rep.Scenarios {
		var vs []string
		for _, inv := range slices.Sorted(mapsKeys(s.Violations)) {
			vs = append(vs, fmt.Sprintf("%s=%d", inv, s.Violations[inv]))
		}
		if s.Errors > 0 {
			vs = append(vs, fmt.Sprintf("run-errors=%d", s.Errors))
		}
		v := "-"
		if len(vs) > 0 {
			v = strings.Join(vs, " ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%s\n", s.Name, s.Runs, v, s.Sim.Hours(), wallString(s.Wall))
	}
	tw.Flush()
	perCore := 0.0
	if rep.RunWall > 0 {
		perCore = float64(rep.Runs) / rep.RunWall.Seconds()
	}
	fmt.Fprintf(w, "total: %d runs, %.1f simulated hours, wall %s, %.1f runs/s per core\n", rep.Runs, rep.Sim.Hours(), wallString(rep.Wall), perCore)
	if rep.Stopped != "" {
		fmt.Fprintf(w, "stopped early: %s\n", rep.Stopped)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "\nFAIL %s: %s (seed %d)\n", f.Scenario, f.Invariant, f.Seed)
		fmt.Fprintf(w, "  %s\n", f.Message)
		fmt.Fprintf(w, "  drawn (%d): %s\n", len(f.Schedule), scheduleString(f.Schedule))
		fmt.Fprintf(w, "  shrunk (%d, %d runs): %s\n", len(f.Shrunk), f.ShrinkRuns, scheduleString(f.Shrunk))
		if f.Err != "" && f.Invariant != "error" {
			fmt.Fprintf(w, "  error writing the reproducer: %s\n", f.Err)
		}
		if f.ShrunkFile != "" {
			fmt.Fprintf(w, "  replay: bootroll scenario run %s\n", f.ShrunkFile)
			fmt.Fprintf(w, "  unshrunk: bootroll scenario run %s\n", f.FullFile)
		}
	}
}

func scheduleString(s explore.Schedule) string {
	if len(s) == 0 {
		return "nothing (fails without faults)"
	}
	parts := make([]string, len(s))
	for i, it := range s {
		parts[i] = it.String()
	}
	return strings.Join(parts, "; ")
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
