// Package whatif runs a scenario over a grid of overridden values times a
// number of seeds in the twin, and summarises each grid point over its
// seeds: rollout duration, schedulable capacity, nodes unavailable,
// evictions, pending pods, Karpenter's activity, failures, violations and
// the controller's API writes (bootroll whatif).
//
// The grid's axes are --set paths (sim/scenario's override syntax, applied
// by scenario.ParseWithSets), so any scenario field can be varied. Runs are
// spread over worker goroutines, each running one twin engine at a time;
// every run is written to its own slot and only per-run summaries are kept,
// so the results depend neither on the number of workers nor on the order
// runs finish in, and memory stays bounded by the workers' engines. See
// docs/whatif.md.
package whatif

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/bootroll/bootroll/internal/parallel"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// MaxRuns is the most runs (grid points times seeds) one sweep accepts.
// 100,000 runs of a small scenario are hours on two cores; a larger sweep
// is a mistake in the --vary lists more often than a plan.
const MaxRuns = 100_000

// Axis is one --vary: a --set path and the values it takes.
type Axis struct {
	Path   string   `json:"path"`
	Values []string `json:"values"`
}

// ParseVary parses a --vary argument, "path=v1,v2,...". The path is checked
// against the scenario later, by Prepare.
func ParseVary(arg string) (Axis, error) {
	path, list, ok := strings.Cut(arg, "=")
	path = strings.TrimSpace(path)
	if !ok || path == "" {
		return Axis{}, fmt.Errorf("--vary %q: want path=v1,v2,... (e.g. bootroll.pools[0].maxUnavailable=1,10%%)", arg)
	}
	if strings.TrimSpace(list) == "" {
		return Axis{}, fmt.Errorf("--vary %q: empty list of values for %s", arg, path)
	}
	a := Axis{Path: path}
	for v := range strings.SplitSeq(list, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			return Axis{}, fmt.Errorf("--vary %q: empty value in the list for %s", arg, path)
		}
		if slices.Contains(a.Values, v) {
			return Axis{}, fmt.Errorf("--vary %q: value %q given twice for %s", arg, v, path)
		}
		a.Values = append(a.Values, v)
	}
	return a, nil
}

// Spec is a sweep: a scenario file, the axes, fixed overrides and seeds.
type Spec struct {
	File string
	Data []byte
	Axes []Axis
	// Sets are fixed overrides (--set) applied before the axes' values.
	Sets []string
	// Seeds is the number of seeds per point; FirstSeed the first (0
	// means 1): a point runs FirstSeed, FirstSeed+1, ...
	Seeds     int
	FirstSeed uint64
}

// Point is one grid point: a value per axis, in axis order.
type Point struct {
	Values []string
	sets   []string
	sc     *scenario.Scenario
}

// Sets returns the point's overrides as --set expressions: the fixed ones,
// then one per axis.
func (p Point) Sets() []string { return slices.Clone(p.sets) }

// Plan is a validated sweep, ready to run.
type Plan struct {
	Spec
	Scenario string
	Points   []Point
}

// Runs returns the number of twin runs of the plan.
func (p *Plan) Runs() int { return len(p.Points) * p.Seeds }

// Seed returns the seed of a point's k-th run.
func (p *Plan) Seed(k int) uint64 { return p.FirstSeed + uint64(k) }

// Prepare checks a sweep and loads the scenario once per grid point. Every
// value of every axis is first applied alone, so an unknown path or a bad
// value is reported with the --vary that gave it.
func Prepare(s Spec) (*Plan, error) {
	if s.Seeds < 1 {
		return nil, fmt.Errorf("--seeds: want at least 1, got %d", s.Seeds)
	}
	if s.FirstSeed == 0 {
		s.FirstSeed = 1
	}
	if len(s.Axes) == 0 {
		return nil, fmt.Errorf("--vary: give at least one, e.g. --vary 'bootroll.pools[0].maxUnavailable=1,10%%'")
	}
	points := 1
	for i, a := range s.Axes {
		if len(a.Values) == 0 {
			return nil, fmt.Errorf("--vary %s: empty list of values", a.Path)
		}
		for _, b := range s.Axes[:i] {
			if b.Path == a.Path {
				return nil, fmt.Errorf("--vary %s: the path is varied twice; give its values in one --vary", a.Path)
			}
		}
		points *= len(a.Values)
		if points > MaxRuns {
			break
		}
	}
	if runs := points * s.Seeds; points > MaxRuns || runs > MaxRuns || runs/s.Seeds != points {
		return nil, fmt.Errorf("--vary/--seeds: the grid is %s points × %d seeds, more than the limit of %d runs (whatif.MaxRuns); vary fewer values or use fewer seeds", gridSize(s.Axes), s.Seeds, MaxRuns)
	}
	if _, err := scenario.ParseWithSets(s.File, s.Data, s.Sets); err != nil {
		return nil, err
	}
	for _, a := range s.Axes {
		for _, v := range a.Values {
			set := a.Path + "=" + v
			if _, err := scenario.ParseWithSets(s.File, s.Data, append(slices.Clone(s.Sets), set)); err != nil {
				return nil, fmt.Errorf("--vary %s: value %q: %w", a.Path, v, err)
			}
		}
	}
	plan := &Plan{Spec: s}
	idx := make([]int, len(s.Axes))
	for range points {
		p := Point{Values: make([]string, len(s.Axes)), sets: slices.Clone(s.Sets)}
		for i, a := range s.Axes {
			p.Values[i] = a.Values[idx[i]]
			p.sets = append(p.sets, a.Path+"="+p.Values[i])
		}
		sc, err := scenario.ParseWithSets(s.File, s.Data, p.sets)
		if err != nil {
			return nil, fmt.Errorf("--vary point %s: %w", strings.Join(p.sets[len(s.Sets):], " "), err)
		}
		p.sc = sc
		plan.Scenario = sc.Name
		plan.Points = append(plan.Points, p)
		// The last axis varies fastest, as in nested loops.
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(s.Axes[i].Values) {
				break
			}
			idx[i] = 0
		}
	}
	return plan, nil
}

func gridSize(axes []Axis) string {
	parts := make([]string, len(axes))
	for i, a := range axes {
		parts[i] = fmt.Sprint(len(a.Values))
	}
	return strings.Join(parts, "×")
}

// GCPercent is the GOGC a sweep runs with unless GOGC is set in the
// environment (bootroll whatif sets it; twin.GCPercent is a single run's).
// A sweep keeps both cores busy with runs, so a collection is no longer
// free on an idle core, and each worker's heap is reused run after run,
// so a larger heap costs its first pages once. 5 points x 8 seeds of
// pool-200-static on 2 workers (GODEBUG=gctrace=1, the collector's own
// CPU): 26 collections and 0.57 s at 800, 12 and 0.23 s at 1600, 6 and
// 0.13 s at 3200, of about 12 s of CPU; the sweep's peak RSS is about
// 0.8-1.2 GiB at 1600 against 0.45-0.55 GiB at 800. The sweep's memory
// limit (--memory-limit) bounds it whatever the live heap.
const GCPercent = 1600

// Config says how to run a plan.
type Config struct {
	// Jobs is the number of workers, each running one engine at a time
	// (default 1).
	Jobs int
	// Progress, when set, is called after each run with the runs done and
	// the total, never concurrently.
	Progress func(done, total int)
	// Replay returns the command that replays one run; nil leaves replay
	// commands out.
	Replay func(file string, seed uint64, sets []string) string

	// keepTimelines keeps each run's thinned timeline (Run sets it).
	keepTimelines bool
}

// KeepTimelinesUpTo is the most runs a local sweep keeps the timelines of
// (at most MaxTimelineSamples samples each, about 30 KB), so that the
// report needs no replay of the median runs; a larger sweep replays them
// (one run per point) rather than hold them all.
const KeepTimelinesUpTo = 4096

// Run runs every point of the plan under every seed and summarises them:
// shard 0 of 1 and a merge in memory, so a local sweep and a merge of
// shards (Merge) summarise through the same function. An error means a
// run could not be made (twin.Run failed); violated invariants are
// results.
func Run(plan *Plan, cfg Config) (*Results, error) {
	cfg.keepTimelines = plan.Runs() <= KeepTimelinesUpTo
	runs, err := RunShard(plan, Shard{Index: 0, Count: 1}, cfg)
	if err != nil {
		return nil, err
	}
	return Summarise(plan, runs)
}

// RunShard runs the plan's runs of one shard (Shard.Runs) and returns
// their summaries in run-index order. Progress counts the shard's runs.
func RunShard(plan *Plan, sh Shard, cfg Config) ([]RunSummary, error) {
	if err := sh.check(); err != nil {
		return nil, err
	}
	jobs := max(cfg.Jobs, 1)
	idx := sh.Runs(plan.Runs())
	total := len(idx)
	runs := make([]RunSummary, total)
	errs := make([]error, total)
	var mu sync.Mutex
	done := 0
	parallel.For(jobs, total, func(j int) { // edge: independent twin runs in parallel, one engine each
		i := idx[j]
		pi, k := i/plan.Seeds, i%plan.Seeds
		p := plan.Points[pi]
		seed := plan.Seed(k)
		res, err := twin.Run(p.sc, twin.Options{Seed: seed})
		if err != nil {
			errs[j] = fmt.Errorf("point %s seed %d: %w", strings.Join(p.Values, ","), seed, err)
		} else {
			var replay string
			if cfg.Replay != nil {
				replay = cfg.Replay(plan.File, seed, p.sets)
			}
			runs[j] = Measure(res, replay)
			if cfg.keepTimelines {
				var d *float64
				if runs[j].Has[Duration] {
					d = &runs[j].Values[Duration]
				}
				runs[j].timeline = timelineWith(res, d)
			}
		}
		mu.Lock()
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
		mu.Unlock()
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// Summarise summarises every run of the plan, given in run-index order
// (point × seeds + seed offset): the one path from per-run summaries to
// results.json, for a local run and for a merge of shards.
func Summarise(plan *Plan, runs []RunSummary) (*Results, error) {
	if len(runs) != plan.Runs() {
		return nil, fmt.Errorf("summarising %d runs of a sweep of %d", len(runs), plan.Runs())
	}
	return summarise(plan, runs), nil
}
