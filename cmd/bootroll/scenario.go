package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/sim/invariant"
	"github.com/bootroll/bootroll/sim/report"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

func newScenarioCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "Run, validate and list twin scenarios",
		Long: `A scenario is one YAML file (schema: scenarios/schema.json) that describes
the cluster (node groups, workloads, PDBs, images, host timings), the
bootroll pools, timed events and faults, the virtual-time limit and what
must hold: the invariants checked after every event and the expectations
checked at the end.`,
	}
	cmd.AddCommand(newRunCmd(stdout, stderr), newExploreCmd(stdout, stderr), newValidateCmd(stdout, stderr), newListCmd(stdout, stderr))
	return cmd
}

type runFlags struct {
	seed     uint64
	trace    string
	report   string
	sets     []string
	bench    bool
	cpuProf  string
	controls bool
	profile  string
	memLimit string
	cluster  clusterTarget
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE...",
		Short: "Run scenarios in the twin and check their invariants and expectations",
		Long: `Run each scenario in the twin and print one line per scenario: name,
verdict, virtual duration, wall time and seed.

When an invariant or expectation is violated, the run prints which, at what
virtual time, the objects involved, and the exact command that replays the
run (same file, seed and overrides): the twin is deterministic, so the
replay fails the same way.

Every file is loaded strictly before anything runs: an unknown field, a
wrong type or an impossible value is reported as FILE:LINE: FIELD: message.

Exit status: 0 when everything held, 1 when something was violated (or a
negative control was not caught), 2 on bad input.`,
		Example: `  bootroll scenario run scenarios/plain-rollout-10.yaml
  bootroll scenario run scenarios/*.yaml --negative-controls
  bootroll scenario run scenarios/plain-rollout-10.yaml --seed 7 --trace /tmp/t.jsonl --report /tmp/r
  bootroll scenario run scenarios/plain-rollout-10.yaml --set 'bootroll.pools[0].maxUnavailable=50%'
  bootroll scenario run scenarios/bench/bench-1000.yaml --bench
  bootroll scenario run scenarios/cluster/static-rollout-3.yaml --target cluster   # on a real API server, docs/cluster-target.md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return runScenarios(stdout, stderr, args, f)
		},
	}
	fl := cmd.Flags()
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the run's random source (default: the scenario's seed)")
	fl.StringVar(&f.trace, "trace", "", "write the JSONL trace to this file (with several scenarios: into this directory, one <name>.jsonl each)")
	fl.StringVar(&f.report, "report", "", "write summary.json and report.html into this directory (with several scenarios: one subdirectory per scenario)")
	fl.StringArrayVar(&f.sets, "set", nil, "override a scenario field, path=value, e.g. bootroll.pools[0].maxUnavailable=20% (repeatable; an unknown path is an error)")
	fl.BoolVar(&f.bench, "bench", false, "print wall time, virtual time, events, events per second, peak heap and peak RSS")
	fl.StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of the whole run to this file (read it with go tool pprof)")
	fl.StringVar(&f.profile, "profile", "", "cache profile of every run: default, stale or instant (same as --set profile=...)")
	fl.BoolVar(&f.controls, "negative-controls", false, "also run each scenario's negative controls and require the named invariant to catch each")
	fl.StringVar(&f.memLimit, "memory-limit", "", "Go runtime soft memory limit, e.g. 7Gi (default: GOMEMLIMIT if set, else 75% of the memory the process may use)")
	addClusterTargetFlags(fl, &f.cluster)
	return cmd
}

// loaded is a scenario file ready to run.
type loaded struct {
	file string
	sc   *scenario.Scenario
}

func runScenarios(stdout, stderr io.Writer, files []string, f runFlags) error {
	if f.profile != "" {
		f.sets = append([]string{"profile=" + f.profile}, f.sets...)
	}
	var scs []loaded
	bad := false
	for _, file := range files {
		sc, err := scenario.LoadWithSets(file, f.sets)
		if err != nil {
			fmt.Fprintln(stderr, err)
			bad = true
			continue
		}
		scs = append(scs, loaded{file, sc})
	}
	if err := f.cluster.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		bad = true
	}
	limit, err := memoryLimit(f.memLimit)
	if err != nil {
		fmt.Fprintf(stderr, "--memory-limit %q: %v\n", f.memLimit, err)
		bad = true
	}
	if bad {
		return exitError{exitBadInput}
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	if f.cpuProf != "" {
		pf, err := os.Create(f.cpuProf)
		if err != nil {
			fmt.Fprintln(stderr, "--cpuprofile:", err)
			return exitError{exitBadInput}
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintln(stderr, "--cpuprofile:", err)
			return exitError{exitBadInput}
		}
		defer pprof.StopCPUProfile()
	}
	code := exitOK
	for _, l := range scs {
		c := runOne(stdout, stderr, l, f, len(scs) > 1)
		code = max(code, c)
	}
	if code != exitOK {
		return exitError{code}
	}
	return nil
}

// runOne runs a scenario (and its negative controls) and returns the exit
// status it calls for.
func runOne(stdout, stderr io.Writer, l loaded, f runFlags, several bool) int {
	if f.cluster.target == targetCluster {
		return runOnCluster(stdout, stderr, l, f, several)
	}
	opts := twin.Options{Seed: f.seed, Bench: f.bench}
	traceFile, err := createTrace(f.trace, l.sc.Name, several)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --trace: %v\n", l.file, err)
		return exitBadInput
	}
	if traceFile != nil {
		defer traceFile.Close()
		opts.Trace = traceFile
	}
	res, wall, err := timedRun(l.sc, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", l.file, err)
		return exitBadInput
	}
	if traceFile != nil {
		if err := traceFile.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: --trace: %v\n", l.file, err)
			return exitBadInput
		}
	}
	code := exitOK
	printLine(stdout, res, wall)
	for _, v := range res.Exceptions {
		fmt.Fprintf(stdout, "  exception %s\n", v)
	}
	if !res.Passed() {
		code = exitViolated
		printViolations(stdout, res)
		fmt.Fprintf(stdout, "  replay: %s\n", replay(l.file, res.Seed, f.sets))
	}
	if f.bench {
		printBench(stdout, res, wall)
	}
	if f.report != "" {
		dir := f.report
		if several {
			dir = filepath.Join(f.report, l.sc.Name)
		}
		if err := report.Write(dir, res, wall, f.sets); err != nil {
			fmt.Fprintf(stderr, "%s: --report: %v\n", l.file, err)
			code = max(code, exitBadInput)
		}
	}
	if f.controls {
		for _, nc := range l.sc.NegativeControls {
			code = max(code, runControl(stdout, stderr, l, nc, f))
		}
	}
	return code
}

// runControl runs one negative control: the scenario with the control's
// overrides, which the named invariant must catch.
func runControl(stdout, stderr io.Writer, l loaded, nc scenario.NegativeControl, f runFlags) int {
	sets := append(slices.Clone(f.sets), nc.Set...)
	sc, err := scenario.LoadWithSets(l.file, sets)
	if err != nil {
		fmt.Fprintf(stderr, "negative control %s: %v\n", nc.Name, err)
		return exitBadInput
	}
	res, wall, err := timedRun(sc, twin.Options{Seed: f.seed})
	if err != nil {
		fmt.Fprintf(stderr, "%s: negative control %s: %v\n", l.file, nc.Name, err)
		return exitBadInput
	}
	caughtBy := string(nc.CaughtBy)
	if res.Caught(caughtBy) {
		at := res.FirstAt(caughtBy)
		fmt.Fprintf(stdout, "  negative control %s: caught by %s at %s (virtual %s, wall %s)\n", nc.Name, caughtBy, ms(at), ms(res.End), wallString(wall))
		return exitOK
	}
	fmt.Fprintf(stdout, "  FAIL negative control %s was not caught by %s (virtual %s, wall %s)\n", nc.Name, caughtBy, ms(res.End), wallString(wall))
	if len(res.Violations) > 0 {
		fmt.Fprintf(stdout, "    it was caught only by: %s\n", strings.Join(slices.Sorted(maps.Keys(res.Counts)), ", "))
	}
	fmt.Fprintf(stdout, "    replay: %s\n", replay(l.file, res.Seed, sets))
	return exitViolated
}

// createTrace creates the --trace file of one scenario's run: the flag's
// path, or with several scenarios NAME.jsonl in that directory; nil
// without --trace.
func createTrace(flag, name string, several bool) (*os.File, error) {
	if flag == "" {
		return nil, nil
	}
	path := flag
	if several {
		if err := os.MkdirAll(flag, 0o755); err != nil {
			return nil, err
		}
		path = filepath.Join(flag, name+".jsonl")
	}
	return os.Create(path)
}

// timedRun runs a scenario and measures its wall time; the CLI owns the
// wall clock, the twin never reads it.
func timedRun(sc *scenario.Scenario, opts twin.Options) (*twin.Result, time.Duration, error) {
	start := time.Now()
	res, err := twin.Run(sc, opts)
	return res, time.Since(start), err
}

// ms rounds a virtual duration to milliseconds for printing.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func wallString(d time.Duration) string {
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// printLine prints the one line of a scenario.
func printLine(w io.Writer, res *twin.Result, wall time.Duration) {
	verdict := "PASS"
	if !res.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%-32s %s  virtual %-12s wall %-7s seed %d\n", res.Scenario, verdict, ms(res.End), wallString(wall), res.Seed)
}

func printViolations(w io.Writer, res *twin.Result) {
	for _, v := range res.Violations {
		fmt.Fprintf(w, "  %s at %s: %s\n", v.Invariant, ms(v.At), v.Message)
		if len(v.Objects) > 0 {
			fmt.Fprintf(w, "    objects: %s\n", strings.Join(v.Objects, ", "))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(res.Counts)) {
		if n := res.Counts[name]; n > countRecorded(res.Violations, name) {
			fmt.Fprintf(w, "  (%s: %d violations in all, %d shown)\n", name, n, countRecorded(res.Violations, name))
		}
	}
}

func countRecorded(vs []invariant.Violation, name string) int {
	n := 0
	for _, v := range vs {
		if v.Invariant == name {
			n++
		}
	}
	return n
}

func printBench(w io.Writer, res *twin.Result, wall time.Duration) {
	rate := 0.0
	if wall > 0 {
		rate = float64(res.Events) / wall.Seconds()
	}
	fmt.Fprintf(w, "  bench: wall %s  virtual %s  events %d  events/s %.0f  peak heap %.1f MiB  peak RSS %.1f MiB (process)  reconciles pool %d node %d daemon %d  GOMAXPROCS %d  GOGC %s  memory limit %s\n",
		wallString(wall), ms(res.End), res.Events, rate, float64(res.PeakHeap)/(1<<20), float64(peakRSS())/(1<<20),
		res.Reconciles[controller.PoolController], res.Reconciles[controller.NodeController], res.Reconciles["daemon"], runtime.GOMAXPROCS(0), gogc,
		memString(debug.SetMemoryLimit(-1)))
	printWrites(w, res)
}

// printWrites prints the writes per node update of the controller and the
// daemons, and what they were, most frequent first.
func printWrites(w io.Writer, res *twin.Result) {
	updates := len(res.NodeUpdates)
	if updates == 0 || len(res.Writes) == 0 {
		return
	}
	for _, who := range []string{"controller", "daemon"} {
		byVerb := res.Writes[who]
		var total uint64
		keys := make([]string, 0, len(byVerb))
		for k, n := range byVerb {
			total += n
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if c := cmp.Compare(byVerb[b], byVerb[a]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %.2f", k, float64(byVerb[k])/float64(updates))
		}
		fmt.Fprintf(w, "  bench: %s writes per node update %.2f (%d writes, %d updates): %s\n", who, float64(total)/float64(updates), total, updates, strings.Join(parts, ", "))
	}
}

// replay is the command line that reruns a scenario exactly.
func replay(file string, seed uint64, sets []string) string {
	parts := []string{"bootroll", "scenario", "run", shellQuote(file), "--seed", fmt.Sprint(seed)}
	for _, s := range sets {
		parts = append(parts, "--set", shellQuote(s))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:%,+@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check scenario files without running them",
		Long: `Load each scenario file strictly, as run does, including every negative
control's overrides, and report each error as FILE:LINE: FIELD: message.
Exit status 2 when any file is invalid.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			bad := false
			for _, file := range args {
				sc, err := scenario.Load(file)
				if err != nil {
					fmt.Fprintln(stderr, err)
					bad = true
					continue
				}
				fmt.Fprintf(stdout, "%s: ok: %s (%d pool(s), %d node(s), %d negative control(s))\n", file, sc.Name, len(sc.Bootroll.Pools), nodeCount(sc), len(sc.NegativeControls))
			}
			if bad {
				return exitError{exitBadInput}
			}
			return nil
		},
	}
}

func newListCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list [DIR]",
		Short: "List the scenarios of a directory (default scenarios)",
		Long: `List the *.yaml scenarios of DIR (default: scenarios) with their name,
pools, nodes at the start and description. Files that do not load are
reported, and make the exit status 2.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dir := "scenarios"
			if len(args) == 1 {
				dir = args[0]
			}
			files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
			if err != nil {
				return err
			}
			if len(files) == 0 {
				fmt.Fprintf(stderr, "%s: no *.yaml scenarios\n", dir)
				return exitError{exitBadInput}
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPOOLS\tNODES\tFILE\tDESCRIPTION")
			bad := false
			for _, file := range files {
				sc, err := scenario.Load(file)
				if err != nil {
					fmt.Fprintln(stderr, err)
					bad = true
					continue
				}
				var pools []string
				for _, p := range sc.Bootroll.Pools {
					pools = append(pools, p.Name)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", sc.Name, strings.Join(pools, ","), nodeCount(sc), file, oneLine(sc.Description))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if bad {
				return exitError{exitBadInput}
			}
			return nil
		},
	}
}

func nodeCount(sc *scenario.Scenario) int {
	n := 0
	for _, g := range sc.NodeGroups {
		n += g.Count
	}
	return n
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// gogc is the GOGC in force, as main set it (twin.SetGCPercent).
var gogc string
