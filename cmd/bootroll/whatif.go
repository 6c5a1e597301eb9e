package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/bootroll/bootroll/sim/whatif"
)

type whatifFlags struct {
	vary      []string
	sets      []string
	seeds     int
	firstSeed uint64
	jobs      int
	out       string
	memLimit  string
	cpuProf   string
	shard     string
	job       jobFlags
}

func newWhatifCmd(stdout, stderr io.Writer) *cobra.Command {
	var f whatifFlags
	cmd := &cobra.Command{
		Use:   "whatif FILE --vary path=v1,v2,... [--vary ...] --seeds N",
		Short: "Sweep a scenario over a grid of values and seeds; summarise each point",
		Long: `Run the scenario once per grid point and seed in the twin. The grid is the
product of the --vary lists; each --vary path is a --set path of
bootroll scenario run (e.g. bootroll.pools[0].maxUnavailable). Each point
runs --seeds seeds, first-seed, first-seed+1, ...

Runs are spread over --jobs workers in this process, each running one twin
engine at a time, and only a summary of each run is kept. For each point
the seeds are summarised (p5, p50, p95, min, mean, max of every metric) and
written to DIR/results.json and DIR/results.csv; a table goes to stdout and
progress to stderr. The files depend only on the scenario, the flags'
values and the seeds, not on --jobs or the machine: no wall time is in them.

A grid of more than ` + strconv.Itoa(whatif.MaxRuns) + ` runs (points × seeds) is refused.

Exit status: 0 when every run held its invariants and expectations, 1 when
some run violated one (the files list each with its replay command), 2 on
bad input.

--shard i/n runs only shard i of n (the runs whose index, point × seeds +
seed offset, is i mod n) and writes DIR/shard-i-of-n.json: the sweep's
inputs and each run's summary, exit status 0 even when a run violated an
invariant (merge reports it). bootroll whatif merge DIR... combines the
shards into the same results.json and results.csv as one local run.
--emit-job writes a Kubernetes Indexed Job that runs the shards, one per
completion index, instead of running anything (see docs/whatif.md).`,
		Example: `  bootroll whatif scenarios/whatif/pool-200.yaml --vary 'bootroll.pools[0].maxUnavailable=1,2,5%,10%,20%' --seeds 50
  bootroll whatif scenarios/plain-rollout-10.yaml --vary 'bootroll.pools[0].maxUnavailable=1,3' --vary 'host.reboot.median=60s,3m' --seeds 5 --out /tmp/w
  bootroll whatif scenarios/whatif/pool-200.yaml --vary 'bootroll.pools[0].maxUnavailable=1,5%' --seeds 20 --shard 0/2 --out shards
  bootroll whatif scenarios/whatif/pool-200.yaml --vary 'bootroll.pools[0].maxUnavailable=1,5%' --seeds 20 --emit-job --shards 8 --image REGISTRY/bootroll:TAG > job.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.job.outSet = cmd.Flags().Changed("out")
			return runWhatif(stdout, stderr, args[0], f)
		},
	}
	cmd.AddCommand(newWhatifMergeCmd(stdout, stderr))
	fl := cmd.Flags()
	fl.StringArrayVar(&f.vary, "vary", nil, "vary a scenario field over values, path=v1,v2,... (a --set path; repeatable: the grid is the product)")
	fl.StringArrayVar(&f.sets, "set", nil, "override a scenario field in every run, path=value (as scenario run --set)")
	fl.IntVar(&f.seeds, "seeds", 10, "runs per grid point, one seed each")
	fl.Uint64Var(&f.firstSeed, "seed", 1, "seed of each point's first run; run k uses seed+k")
	fl.IntVar(&f.jobs, "jobs", runtime.GOMAXPROCS(0), "workers, each running one engine at a time")
	fl.StringVar(&f.out, "out", "whatif-out", "directory for results.json, results.csv and report.html")
	fl.StringVar(&f.memLimit, "memory-limit", "", "Go runtime soft memory limit, e.g. 6Gi (default: GOMEMLIMIT if set, else 75% of physical memory)")
	fl.StringVar(&f.cpuProf, "cpuprofile", "", "write a CPU profile of the sweep to this file (read it with go tool pprof)")
	fl.StringVar(&f.shard, "shard", "", "run only shard i of n (i/n, from 0) of the runs and write DIR/shard-i-of-n.json for whatif merge")
	addJobFlags(fl, &f.job)
	return cmd
}

func runWhatif(stdout, stderr io.Writer, file string, f whatifFlags) error {
	bad := func(format string, a ...any) error {
		fmt.Fprintf(stderr, format+"\n", a...)
		return exitError{exitBadInput}
	}
	if f.jobs < 1 || f.jobs > 256 {
		return bad("--jobs: want 1 to 256, got %d", f.jobs)
	}
	if f.seeds < 1 {
		return bad("--seeds: want at least 1, got %d", f.seeds)
	}
	if f.firstSeed == 0 {
		return bad("--seed: want at least 1, got 0")
	}
	if len(f.vary) == 0 {
		return bad("--vary: give at least one, e.g. --vary 'bootroll.pools[0].maxUnavailable=1,10%%'")
	}
	limit, err := memoryLimit(f.memLimit)
	if err != nil {
		return bad("--memory-limit %q: %v", f.memLimit, err)
	}
	spec := whatif.Spec{File: file, Sets: f.sets, Seeds: f.seeds, FirstSeed: f.firstSeed}
	for _, v := range f.vary {
		a, err := whatif.ParseVary(v)
		if err != nil {
			return bad("%v", err)
		}
		spec.Axes = append(spec.Axes, a)
	}
	spec.Data, err = os.ReadFile(file)
	if err != nil {
		return bad("%v", err)
	}
	plan, err := whatif.Prepare(spec)
	if err != nil {
		return bad("%v", err)
	}
	if f.job.emit {
		if f.shard != "" {
			return bad("--emit-job and --shard: give one; the Job's pods get --shard")
		}
		return emitJob(stdout, stderr, plan, f)
	}
	shard := whatif.Shard{Index: 0, Count: 1}
	if f.shard != "" {
		if shard, err = whatif.ParseShard(f.shard); err != nil {
			return bad("%v", err)
		}
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	gcPercent := os.Getenv("GOGC")
	if gcPercent == "" {
		debug.SetGCPercent(whatif.GCPercent)
		gcPercent = strconv.Itoa(whatif.GCPercent)
	}
	if f.cpuProf != "" {
		pf, err := os.Create(f.cpuProf)
		if err != nil {
			return bad("--cpuprofile: %v", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return bad("--cpuprofile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	runs := len(shard.Runs(plan.Runs()))
	of := ""
	if f.shard != "" {
		of = fmt.Sprintf(", shard %s: %d runs", shard, runs)
	}
	fmt.Fprintf(stderr, "whatif %s: %d points × %d seeds = %d runs%s on %d workers (memory limit %s, GOGC %s)\n",
		plan.Scenario, len(plan.Points), plan.Seeds, plan.Runs(), of, f.jobs, memString(debug.SetMemoryLimit(-1)), gcPercent)
	pr := newProgress(stderr)
	start := time.Now() // edge: wall clock of the command line, only printed to stderr
	cfg := whatif.Config{Jobs: f.jobs, Progress: pr.update, Replay: replay}
	if f.shard != "" {
		sums, err := whatif.RunShard(plan, shard, cfg)
		pr.finish()
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{exitBadInput}
		}
		wall := time.Since(start) // edge: see start
		name, err := writeShard(plan, shard, sums, f.out)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{exitBadInput}
		}
		fmt.Fprintf(stderr, "whatif: shard %s: %d runs in %s wall, %s runs/s on %d workers; wrote %s\n",
			shard, runs, wallString(wall), rateString(float64(runs)/wall.Seconds()), f.jobs, name)
		return nil
	}
	res, err := whatif.Run(plan, cfg)
	pr.finish()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError{exitBadInput}
	}
	wall := time.Since(start) // edge: see start
	violated, err := writeResults(stdout, stderr, plan, res, f.out, f.jobs)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "whatif: %d runs in %s wall, %s runs/s on %d workers; wrote %s/results.json, results.csv and report.html\n",
		plan.Runs(), wallString(wall), rateString(float64(plan.Runs())/wall.Seconds()), f.jobs, f.out)
	if violated {
		return exitError{exitViolated}
	}
	return nil
}

// attachTimelines adds to res what report.html needs beyond the statistics
// (the median run of each point, replayed on jobs workers) before the
// files are written. writeResults calls it, so a local run and whatif
// merge write the same results.json and report.html (Results.Write writes
// the report); a test replaces it to see that both paths call it.
var attachTimelines = whatif.AttachTimelines

// writeResults writes the files of a finished sweep into dir and the table
// to stdout, for a local run and for whatif merge alike; violated says
// whether a run violated an invariant.
func writeResults(stdout, stderr io.Writer, plan *whatif.Plan, res *whatif.Results, dir string, jobs int) (violated bool, err error) {
	if attachTimelines != nil {
		if err := attachTimelines(plan, res, jobs); err != nil {
			fmt.Fprintln(stderr, err)
			return false, exitError{exitBadInput}
		}
	}
	if err := res.Write(dir); err != nil {
		fmt.Fprintln(stderr, err)
		return false, exitError{exitBadInput}
	}
	if err := res.Table(stdout); err != nil {
		return false, err
	}
	for _, p := range res.Points {
		if len(p.Violations) > 0 {
			violated = true
		}
	}
	return violated, nil
}

// progress reports runs done on stderr: a line redrawn in place on a
// terminal, else a plain line every progressEvery.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time
	mu    sync.Mutex
	last  time.Time
	line  bool
}

const progressEvery = 5 * time.Second

func newProgress(w io.Writer) *progress {
	tty := false
	if fh, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(fh.Fd()))
	}
	now := time.Now() // edge: progress is wall-clock reporting
	return &progress{w: w, tty: tty, start: now, last: now}
}

func (p *progress) update(done, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now() // edge: progress is wall-clock reporting
	every := progressEvery
	if p.tty {
		every = 200 * time.Millisecond
	}
	if done < total && now.Sub(p.last) < every {
		return
	}
	p.last = now
	el := now.Sub(p.start)
	rate := float64(done) / el.Seconds()
	left := "?"
	if rate > 0 {
		left = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	msg := fmt.Sprintf("%d/%d runs (%.0f%%)  %s runs/s  elapsed %s  left %s", done, total, 100*float64(done)/float64(total), rateString(rate), el.Round(time.Second), left)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", msg)
		p.line = true
		return
	}
	fmt.Fprintln(p.w, "whatif:", msg)
}

// rateString prints a rate with two significant digits at least.
func rateString(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0f", r)
	}
	return strconv.FormatFloat(r, 'g', 2, 64)
}

func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line {
		fmt.Fprintln(p.w)
		p.line = false
	}
}
