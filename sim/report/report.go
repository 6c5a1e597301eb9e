// Package report writes what a twin run did for people and tools:
// summary.json (verdict, durations, per-pool counts, violations, timings)
// and report.html, a self-contained page (no network, no scripts) with SVG
// timelines of nodes per phase, schedulable capacity and nodes in a slot.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/bootroll/bootroll/sim/twin"
)

// Summary is the content of summary.json.
type Summary struct {
	Scenario string `json:"scenario"`
	File     string `json:"file,omitempty"`
	Seed     uint64 `json:"seed"`
	// Overrides are the --set PATH=VALUE overrides the run used, in the
	// order given (none: the file as written).
	Overrides []string `json:"overrides"`
	// Start is the scenario's virtual start, the zero of the timeline.
	Start time.Time `json:"start"`
	// Verdict is "pass" when every invariant and expectation held, else
	// "fail".
	Verdict string `json:"verdict"`
	// VirtualDuration is the simulated time the run covered, as a Go
	// duration; VirtualSeconds the same in seconds.
	VirtualDuration string  `json:"virtualDuration"`
	VirtualSeconds  float64 `json:"virtualSeconds"`
	LimitSeconds    float64 `json:"limitSeconds"`
	// WallSeconds is the real time the run took.
	WallSeconds     float64 `json:"wallSeconds"`
	Events          uint64  `json:"events"`
	EventsPerSecond float64 `json:"eventsPerSecond"`
	Converged       bool    `json:"converged"`
	// ConvergedAtSeconds is when every pool was last converged, null when
	// the run did not converge.
	ConvergedAtSeconds *float64    `json:"convergedAtSeconds"`
	Pools              []Pool      `json:"pools"`
	Violations         []Violation `json:"violations"`
	// Exceptions are documented exceptions of the invariants (a forceful
	// Karpenter expiry of a node in a slot): recorded, not violations.
	Exceptions []Violation `json:"exceptions,omitempty"`
	// ViolationCounts counts violations per name, including those past
	// the number recorded.
	ViolationCounts map[string]int    `json:"violationCounts"`
	Timings         Timings           `json:"timings"`
	Reconciles      map[string]uint64 `json:"reconciles"`
	Enqueued        map[string]uint64 `json:"enqueuedByWatch"`
	Requests        map[string]uint64 `json:"apiRequests"`
	RecordedEvents  map[string]int    `json:"recordedEvents"`
	Reboots         int               `json:"reboots"`
	PeakHeapBytes   uint64            `json:"peakHeapBytes,omitempty"`
	// EvictionsRefused counts the evictions PodDisruptionBudgets refused.
	EvictionsRefused uint64 `json:"evictionsRefused"`
	// PDBBlockedDrainSeconds is the node-time drains spent blocked by
	// PodDisruptionBudgets: per node, from a refused eviction of one of
	// its pods to the next admitted one (or the drain given up).
	PDBBlockedDrainSeconds float64 `json:"pdbBlockedDrainSeconds"`
	// PeakPending is the most workload pods pending at once on the
	// timeline.
	PeakPending int `json:"peakPendingPods"`
	// Karpenter is what the fake Karpenter did, null without one.
	Karpenter *Karpenter `json:"karpenter"`
}

// Karpenter counts the fake Karpenter's node launches and removals.
type Karpenter struct {
	Launched   int `json:"launched"`
	Terminated int `json:"terminated"`
	Replaced   int `json:"replaced"`
	Deleted    int `json:"deleted"`
}

// Pool is one pool at the end of the run.
type Pool struct {
	Name         string         `json:"name"`
	Nodes        int            `json:"nodes"`
	Updated      int            `json:"updated"`
	Failed       int            `json:"failed"`
	Phases       map[string]int `json:"phases"`
	UpToDate     bool           `json:"upToDate"`
	Halted       bool           `json:"halted"`
	HaltedReason string         `json:"haltedReason,omitempty"`
	Summary      string         `json:"summary"`
	TargetImage  string         `json:"targetImage"`
}

// Violation is one failed invariant or expectation.
type Violation struct {
	Invariant string   `json:"invariant"`
	AtSeconds float64  `json:"atSeconds"`
	At        string   `json:"at"`
	Objects   []string `json:"objects"`
	Message   string   `json:"message"`
}

// Timings are the rollout's durations, in seconds of virtual time; a
// null is a moment that never came.
type Timings struct {
	// TimeToFirstSlot is from the start until the first node got a
	// reboot slot.
	TimeToFirstSlot *float64 `json:"timeToFirstSlotSeconds"`
	// RolloutDuration is from the first slot until the rollout converged
	// (or, when it did not, the last node update).
	RolloutDuration *float64 `json:"rolloutDurationSeconds"`
	// NodeUpdate are the per-node durations from slot grant to Updated.
	NodeUpdate Distribution `json:"nodeUpdate"`
}

// Distribution summarises durations.
type Distribution struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50Seconds"`
	P90   float64 `json:"p90Seconds"`
	Max   float64 `json:"maxSeconds"`
}

// Summarize builds the summary of a run that took wall real time.
func Summarize(res *twin.Result, wall time.Duration) Summary {
	s := Summary{
		Overrides:       []string{},
		Start:           res.Start,
		Scenario:        res.Scenario,
		File:            res.File,
		Seed:            res.Seed,
		Verdict:         Verdict(res),
		VirtualDuration: res.End.String(),
		VirtualSeconds:  res.End.Seconds(),
		LimitSeconds:    res.Limit.Seconds(),
		WallSeconds:     wall.Seconds(),
		Events:          res.Events,
		Converged:       res.Converged,
		Violations:      []Violation{},
		ViolationCounts: res.Counts,
		Reconciles:      res.Reconciles,
		Enqueued:        res.Enqueued,
		Requests:        map[string]uint64{},
		RecordedEvents:  res.Recorded,
		Reboots:         res.Reboots,
		PeakHeapBytes:   res.PeakHeap,
	}
	if wall > 0 {
		s.EventsPerSecond = math.Round(float64(res.Events) / wall.Seconds())
	}
	if res.Converged {
		s.ConvergedAtSeconds = seconds(res.ConvergedAt)
	}
	for _, p := range res.Pools {
		pp := Pool{Name: p.Name, Nodes: p.Nodes, Updated: p.Updated, Failed: p.Failed, Phases: map[string]int{},
			UpToDate: p.UpToDate, Halted: p.Halted, HaltedReason: p.HaltedReason, Summary: p.Summary, TargetImage: p.TargetImage}
		for ph, n := range p.Phases {
			pp.Phases[string(ph)] = n
		}
		s.Pools = append(s.Pools, pp)
	}
	for _, v := range res.Violations {
		s.Violations = append(s.Violations, Violation{Invariant: v.Invariant, AtSeconds: v.At.Seconds(), At: v.At.String(), Objects: v.Objects, Message: v.Message})
	}
	for _, v := range res.Exceptions {
		s.Exceptions = append(s.Exceptions, Violation{Invariant: v.Invariant, AtSeconds: v.At.Seconds(), At: v.At.String(), Objects: v.Objects, Message: v.Message})
	}
	for _, vc := range res.Requests {
		s.Requests[vc.Verb] = vc.Count
	}
	if res.HasFirstSlot {
		s.Timings.TimeToFirstSlot = seconds(res.FirstSlot)
		end := res.LastUpdate
		if res.Converged {
			end = res.ConvergedAt
		}
		if end >= res.FirstSlot {
			s.Timings.RolloutDuration = seconds(end - res.FirstSlot)
		}
	}
	s.Timings.NodeUpdate = distribution(res.NodeUpdates)
	s.EvictionsRefused = res.EvictionsRefused
	s.PDBBlockedDrainSeconds = res.PDBBlockedDrain.Seconds()
	for _, x := range res.Timeline {
		s.PeakPending = max(s.PeakPending, x.Pending)
	}
	if k := res.Karpenter; k != nil {
		s.Karpenter = &Karpenter{Launched: k.Launched, Terminated: k.Terminated}
		for _, n := range k.Replaced {
			s.Karpenter.Replaced += n
		}
		for _, n := range k.Deleted {
			s.Karpenter.Deleted += n
		}
	}
	return s
}

// Verdict is "pass" or "fail".
func Verdict(res *twin.Result) string {
	if res.Passed() {
		return "pass"
	}
	return "fail"
}

func seconds(d time.Duration) *float64 {
	s := d.Seconds()
	return &s
}

// distribution summarises sorted durations with nearest-rank percentiles.
func distribution(sorted []time.Duration) Distribution {
	n := len(sorted)
	if n == 0 {
		return Distribution{}
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(n))) - 1
		return sorted[max(0, min(i, n-1))].Seconds()
	}
	return Distribution{Count: n, P50: rank(50), P90: rank(90), Max: sorted[n-1].Seconds()}
}

// Write writes summary.json and report.html of a run into dir, creating
// it; overrides are the --set PATH=VALUE the run used.
func Write(dir string, res *twin.Result, wall time.Duration, overrides []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating report directory: %w", err)
	}
	s := Summarize(res, wall)
	s.Overrides = append(s.Overrides, overrides...)
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding summary.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing summary.json: %w", err)
	}
	page, err := HTML(res, s)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.html"), page, 0o644); err != nil {
		return fmt.Errorf("writing report.html: %w", err)
	}
	return nil
}
