package whatif

import (
	"fmt"
	"math"
	"strings"

	"github.com/bootroll/bootroll/internal/parallel"
	"github.com/bootroll/bootroll/sim/report"
	"github.com/bootroll/bootroll/sim/twin"
)

// MaxTimelineSamples bounds the samples kept of a median run's timeline
// (results.json and the report's per-point chart): a 200-node rollout has
// a few thousand; 240 keep the chart's shape at the width it is drawn.
const MaxTimelineSamples = 240

// Timeline is the thinned nodes-per-phase timeline of a point's
// median-duration run, replayed after the sweep (runs are deterministic
// for a seed, so the replay is that run).
type Timeline struct {
	Seed uint64 `json:"seed"`
	// EndSeconds is the virtual time the run stopped;
	// RolloutDurationSeconds its rollout duration (the metric), absent when
	// no node got a slot.
	EndSeconds             float64  `json:"endSeconds"`
	RolloutDurationSeconds *float64 `json:"rolloutDurationSeconds,omitempty"`
	// Phases name the columns of TimelineSample.Phases: the phases some
	// sample has a node in, in v1alpha1.AllPhases order.
	Phases  []string         `json:"phases"`
	Samples []TimelineSample `json:"samples"`
}

// TimelineSample is the cluster at one moment of a median run.
type TimelineSample struct {
	AtSeconds float64 `json:"at"`
	// Phases counts BootcNodes per phase, in Timeline.Phases order.
	Phases []int `json:"phases"`
	// InSlot counts nodes unavailable because of bootroll.
	InSlot int `json:"inSlot"`
}

// AttachTimelines stores the thinned timeline of the median-duration run
// of every point of res (its MedianSeed) in the point's MedianRun, for
// report.html. A local sweep (Run) kept it from the run itself; for
// shards merged it replays the run, on jobs workers, which costs one run
// per point and gives the same timeline. res must come from plan.
func AttachTimelines(plan *Plan, res *Results, jobs int) error {
	if len(plan.Points) != len(res.Points) {
		return fmt.Errorf("timelines: the plan has %d points, the results %d", len(plan.Points), len(res.Points))
	}
	errs := make([]error, len(res.Points))
	parallel.For(max(jobs, 1), len(res.Points), func(i int) { // edge: independent twin runs in parallel, one engine each
		seed := res.Points[i].MedianSeed
		if seed == 0 {
			return
		}
		if i < len(res.kept) && res.kept[i] != nil && res.kept[i].Seed == seed {
			res.Points[i].MedianRun = res.kept[i]
			return
		}
		out, err := twin.Run(plan.Points[i].sc, twin.Options{Seed: seed})
		if err != nil {
			errs[i] = fmt.Errorf("timeline of point %s seed %d: %w", strings.Join(plan.Points[i].Values, ","), seed, err)
			return
		}
		res.Points[i].MedianRun = timelineOf(out)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// timelineOf keeps the phases in use and at most MaxTimelineSamples
// samples, always the first and the last.
func timelineOf(res *twin.Result) *Timeline {
	return timelineWith(res, report.Summarize(res, 0).Timings.RolloutDuration)
}

// timelineWith is timelineOf given the run's rollout duration in seconds
// (nil: none), which Measure has computed already.
func timelineWith(res *twin.Result, d *float64) *Timeline {
	t := &Timeline{Seed: res.Seed, EndSeconds: round(res.End.Seconds()), Phases: []string{}, Samples: []TimelineSample{}}
	if d != nil {
		v := round(*d)
		t.RolloutDurationSeconds = &v
	}
	var cols []int
	for k, ph := range res.Phases {
		for _, s := range res.Timeline {
			if s.Phases[k] > 0 {
				cols = append(cols, k)
				t.Phases = append(t.Phases, string(ph))
				break
			}
		}
	}
	in := res.Timeline
	n := min(len(in), MaxTimelineSamples)
	step := 1.0
	if n > 1 {
		step = float64(len(in)-1) / float64(n-1)
	}
	for i := range n {
		s := in[int(math.Round(float64(i)*step))]
		ts := TimelineSample{AtSeconds: round(s.At.Seconds()), Phases: make([]int, len(cols)), InSlot: s.InSlot}
		for j, k := range cols {
			ts.Phases[j] = s.Phases[k]
		}
		t.Samples = append(t.Samples, ts)
	}
	return t
}
