package whatif

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/report"
	"github.com/bootroll/bootroll/sim/twin"
)

// Metric names one measurement of a run.
type Metric int

// The metrics, in the order of results.json and results.csv.
const (
	Duration Metric = iota
	MinSchedCPU
	MinSchedCPUPct
	MeanSchedCPU
	MeanSchedCPUPct
	MinSchedMem
	MinSchedMemPct
	MeanSchedMem
	MeanSchedMemPct
	PeakUnavailable
	EvictionRequests
	PDBRefusals
	PDBBlockedDrain
	PeakPending
	PendingPodMinutes
	KarpenterLaunched
	KarpenterReaped
	KarpenterReplaced
	FailedNodes
	Violations
	ControllerWrites
	numMetrics
)

// MetricInfo describes a metric in results.json.
type MetricInfo struct {
	Name        string `json:"name"`
	Unit        string `json:"unit"`
	Description string `json:"description"`
}

// Metrics describes every metric, indexed by Metric.
var Metrics = [numMetrics]MetricInfo{
	Duration:          {"rolloutDuration", "s", "virtual time from the first reboot slot until every pool converged (or, when the run did not converge, the last node update), as summary.json's rolloutDurationSeconds"},
	MinSchedCPU:       {"minSchedulableCPU", "millicores", "lowest allocatable CPU on schedulable nodes (Ready, not cordoned, no NoSchedule taint) from the first slot to the end"},
	MinSchedCPUPct:    {"minSchedulableCPUPercent", "%", "minSchedulableCPU as a percentage of the highest schedulable CPU of the same run"},
	MeanSchedCPU:      {"meanSchedulableCPU", "millicores", "time-weighted mean schedulable CPU from the first slot to the end of the run"},
	MeanSchedCPUPct:   {"meanSchedulableCPUPercent", "%", "meanSchedulableCPU as a percentage of the highest schedulable CPU of the same run"},
	MinSchedMem:       {"minSchedulableMemory", "MiB", "lowest allocatable memory on schedulable nodes from the first slot to the end"},
	MinSchedMemPct:    {"minSchedulableMemoryPercent", "%", "minSchedulableMemory as a percentage of the highest schedulable memory of the same run"},
	MeanSchedMem:      {"meanSchedulableMemory", "MiB", "time-weighted mean schedulable memory from the first slot to the end of the run"},
	MeanSchedMemPct:   {"meanSchedulableMemoryPercent", "%", "meanSchedulableMemory as a percentage of the highest schedulable memory of the same run"},
	PeakUnavailable:   {"peakNodesUnavailable", "nodes", "most nodes unavailable because of bootroll (in a reboot slot) at once"},
	EvictionRequests:  {"evictionRequests", "requests", "Eviction API requests by the controller and Karpenter, granted or refused"},
	PDBRefusals:       {"pdbRefusedEvictions", "requests", "evictions a PodDisruptionBudget refused (429)"},
	PDBBlockedDrain:   {"pdbBlockedDrainTime", "node-min", "node-time drains spent blocked by PodDisruptionBudgets: per node, from a refused eviction of one of its pods to the next admitted one, its uncordon or its deletion (summed over nodes)"},
	PeakPending:       {"peakPendingPods", "pods", "most workload pods not bound to a node at once, from the first slot on"},
	PendingPodMinutes: {"pendingPodMinutes", "pod-min", "integral of pending workload pods over virtual time, from the first slot on"},
	KarpenterLaunched: {"karpenterLaunched", "nodes", "NodeClaims Karpenter created (for pending pods and as replacements)"},
	KarpenterReaped:   {"karpenterReaped", "nodes", "nodes Karpenter disrupted without a replacement (emptiness, delete-consolidation, expiry, repair)"},
	KarpenterReplaced: {"karpenterReplaced", "nodes", "nodes Karpenter disrupted after launching replacements"},
	FailedNodes:       {"failedNodes", "nodes", "BootcNodes in phase Failed at the end, all pools"},
	Violations:        {"violations", "violations", "invariant and expectation violations, including those past the recording bound"},
	ControllerWrites:  {"controllerWrites", "writes", "successful API writes of the controller (not measured under the instant profile, which has no gates)"},
}

// RunSummary is what is kept of one run: a value per metric, present or
// not, and its violations. The run's trace and timeline are dropped.
type RunSummary struct {
	Seed       uint64
	Values     [numMetrics]float64
	Has        [numMetrics]bool
	Violations []RunViolation

	// timeline is the run's thinned timeline, kept by a local sweep of
	// at most KeepTimelinesUpTo runs so that AttachTimelines need not
	// replay the median run; never in a shard file (unexported).
	timeline *Timeline
}

// RunViolation is one kind of violation of a run.
type RunViolation struct {
	Seed      uint64 `json:"seed"`
	Invariant string `json:"invariant"`
	// Count counts the invariant's violations in the run; AtSeconds is
	// when the first happened.
	Count     int     `json:"count"`
	AtSeconds float64 `json:"atSeconds"`
	Replay    string  `json:"replay,omitempty"`
}

func (r *RunSummary) set(m Metric, v float64) { r.Values[m], r.Has[m] = v, true }

// Measure keeps what a sweep needs of a run; replay is the command that
// replays it.
func Measure(res *twin.Result, replay string) RunSummary {
	r := RunSummary{Seed: res.Seed}
	if d := report.Summarize(res, 0).Timings.RolloutDuration; d != nil {
		r.set(Duration, *d)
	}
	if g := res.Gauges; g.Window > 0 || g.MaxSchedulableCPU > 0 {
		r.set(MinSchedCPU, float64(g.MinSchedulableCPU))
		mean := float64(g.MinSchedulableCPU)
		if g.Window > 0 {
			mean = g.SchedulableCPUArea / g.Window.Seconds()
		}
		r.set(MeanSchedCPU, mean)
		if g.MaxSchedulableCPU > 0 {
			r.set(MinSchedCPUPct, 100*float64(g.MinSchedulableCPU)/float64(g.MaxSchedulableCPU))
			r.set(MeanSchedCPUPct, 100*mean/float64(g.MaxSchedulableCPU))
		}
		if g.MaxSchedulableMem > 0 {
			const mib = 1 << 20
			memMean := float64(g.MinSchedulableMem)
			if g.Window > 0 {
				memMean = g.SchedulableMemArea / g.Window.Seconds()
			}
			r.set(MinSchedMem, float64(g.MinSchedulableMem)/mib)
			r.set(MeanSchedMem, memMean/mib)
			r.set(MinSchedMemPct, 100*float64(g.MinSchedulableMem)/float64(g.MaxSchedulableMem))
			r.set(MeanSchedMemPct, 100*memMean/float64(g.MaxSchedulableMem))
		}
		r.set(PeakUnavailable, float64(g.PeakInSlot))
		r.set(PeakPending, float64(g.PeakPending))
		r.set(PendingPodMinutes, g.PendingArea/60)
	}
	var evict uint64
	for _, vc := range res.Requests {
		if vc.Verb == apiserver.VerbEvict {
			evict += vc.Count
		}
	}
	r.set(EvictionRequests, float64(evict))
	r.set(PDBRefusals, float64(res.EvictionsRefused))
	r.set(PDBBlockedDrain, res.PDBBlockedDrain.Minutes())
	if k := res.Karpenter; k != nil {
		r.set(KarpenterLaunched, float64(k.Launched))
		r.set(KarpenterReaped, float64(sum(k.Deleted)))
		r.set(KarpenterReplaced, float64(sum(k.Replaced)))
	}
	failed := 0
	for _, p := range res.Pools {
		failed += p.Failed
	}
	r.set(FailedNodes, float64(failed))
	total := 0
	for _, name := range slices.Sorted(maps.Keys(res.Counts)) {
		total += res.Counts[name]
		rv := RunViolation{Seed: res.Seed, Invariant: name, Count: res.Counts[name], Replay: replay}
		for _, v := range res.Violations {
			if v.Invariant == name {
				rv.AtSeconds = round(v.At.Seconds())
				break
			}
		}
		r.Violations = append(r.Violations, rv)
	}
	r.set(Violations, float64(total))
	if w, ok := res.Writes["controller"]; ok {
		var n uint64
		for _, c := range w {
			n += c
		}
		r.set(ControllerWrites, float64(n))
	}
	return r
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// Stats summarises one metric of a point over its seeds. N is the number
// of runs that measured it (a run with no reboot slot has no duration).
type Stats struct {
	Metric string  `json:"metric"`
	N      int     `json:"n"`
	P5     float64 `json:"p5"`
	P50    float64 `json:"p50"`
	P95    float64 `json:"p95"`
	Min    float64 `json:"min"`
	Mean   float64 `json:"mean"`
	Max    float64 `json:"max"`
}

// stats summarises values in seed order with nearest-rank percentiles.
func stats(m Metric, values []float64) Stats {
	s := Stats{Metric: Metrics[m].Name, N: len(values)}
	if len(values) == 0 {
		return s
	}
	var total float64
	for _, v := range values {
		total += v
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
		return sorted[max(0, min(i, len(sorted)-1))]
	}
	s.P5, s.P50, s.P95 = round(rank(5)), round(rank(50)), round(rank(95))
	s.Min, s.Max = round(sorted[0]), round(sorted[len(sorted)-1])
	s.Mean = round(total / float64(len(values)))
	return s
}

// round keeps three decimals: enough for seconds and percentages, and
// short files.
func round(x float64) float64 { return math.Round(x*1000) / 1000 }

// Results is the content of results.json.
type Results struct {
	Scenario  string       `json:"scenario"`
	File      string       `json:"file"`
	Sets      []string     `json:"sets"`
	Axes      []Axis       `json:"axes"`
	Seeds     int          `json:"seeds"`
	FirstSeed uint64       `json:"firstSeed"`
	Runs      int          `json:"runs"`
	Metrics   []MetricInfo `json:"metrics"`
	Points    []PointStats `json:"points"`

	// kept is, per point, the timeline of its median run when the runs
	// kept theirs (a local sweep): AttachTimelines' answer without a
	// replay. Not in results.json, which a merge of shards must give the
	// same.
	kept []*Timeline
}

// PointStats is one grid point over its seeds.
type PointStats struct {
	// Values are the axes' values, in axis order; Sets the overrides the
	// point ran with.
	Values []string `json:"values"`
	Sets   []string `json:"sets"`
	// MedianSeed is the seed of the run of median rollout duration (ties
	// broken by seed; the lower median for an even count), 0 when no run
	// had a duration.
	MedianSeed uint64 `json:"medianSeed"`
	// Metrics summarise the metrics measured in at least one run, in
	// Metrics order.
	Metrics    []Stats        `json:"metrics"`
	Violations []RunViolation `json:"violations"`
	// MedianRun is the timeline of the MedianSeed run (AttachTimelines).
	MedianRun *Timeline `json:"medianRun,omitempty"`
}

// Get returns the point's stats of a metric.
func (p *PointStats) Get(m Metric) (Stats, bool) {
	for _, s := range p.Metrics {
		if s.Metric == Metrics[m].Name {
			return s, true
		}
	}
	return Stats{}, false
}

func summarise(plan *Plan, runs []RunSummary) *Results {
	out := &Results{
		Scenario: plan.Scenario, File: plan.File, Sets: slices.Clone(plan.Sets), Axes: plan.Axes,
		Seeds: plan.Seeds, FirstSeed: plan.FirstSeed, Runs: len(runs), Metrics: Metrics[:],
	}
	if out.Sets == nil {
		out.Sets = []string{}
	}
	for pi, p := range plan.Points {
		prs := runs[pi*plan.Seeds : (pi+1)*plan.Seeds]
		ps := PointStats{Values: p.Values, Sets: p.Sets(), Metrics: []Stats{}, Violations: []RunViolation{}}
		for m := range numMetrics {
			var vs []float64
			for _, r := range prs {
				if r.Has[m] {
					vs = append(vs, r.Values[m])
				}
			}
			if len(vs) > 0 {
				ps.Metrics = append(ps.Metrics, stats(m, vs))
			}
		}
		ps.MedianSeed = medianSeed(prs)
		var kept *Timeline
		for _, r := range prs {
			if r.Seed == ps.MedianSeed && r.timeline != nil {
				kept = r.timeline
			}
		}
		out.kept = append(out.kept, kept)
		for _, r := range prs {
			ps.Violations = append(ps.Violations, r.Violations...)
		}
		out.Points = append(out.Points, ps)
	}
	return out
}

// medianSeed returns the seed of the median-duration run.
func medianSeed(runs []RunSummary) uint64 {
	var with []RunSummary
	for _, r := range runs {
		if r.Has[Duration] {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return 0
	}
	slices.SortFunc(with, func(a, b RunSummary) int {
		return cmp.Or(cmp.Compare(a.Values[Duration], b.Values[Duration]), cmp.Compare(a.Seed, b.Seed))
	})
	return with[(len(with)-1)/2].Seed
}

// axisLabel is a short column name for an axis path: its last segment.
func axisLabel(path string) string {
	if i := strings.LastIndexAny(path, ".]"); i >= 0 && i+1 < len(path) {
		return path[i+1:]
	}
	return path
}
