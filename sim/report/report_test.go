package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/invariant"
	"github.com/bootroll/bootroll/sim/twin"
)

func result() *twin.Result {
	phases := func(p ...int) []int {
		out := make([]int, len(v1alpha1.AllPhases))
		copy(out, p)
		return out
	}
	return &twin.Result{
		Scenario: "demo", File: "scenarios/demo.yaml", Seed: 7,
		Start: time.Date(2026, 1, 5, 2, 0, 0, 0, time.UTC),
		End:   20 * time.Minute, Limit: time.Hour, Events: 1234,
		Converged: false,
		Violations: []invariant.Violation{{Invariant: "max-unavailable", At: 90 * time.Second,
			Objects: []string{"BootcNodePool/p", "Node/a"}, Message: "3 nodes <of> pool p"}},
		Counts:       map[string]int{"max-unavailable": 1},
		Pools:        []twin.PoolResult{{Name: "p", Nodes: 4, Updated: 3, Phases: map[v1alpha1.NodePhase]int{v1alpha1.PhaseUpdated: 3, v1alpha1.PhaseStaged: 1}}},
		HasFirstSlot: true, FirstSlot: time.Minute, LastUpdate: 15 * time.Minute,
		NodeUpdates: []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 10 * time.Minute},
		Phases:      v1alpha1.AllPhases,
		Timeline: []twin.Sample{
			{At: 0, Phases: phases(4), SchedulableCPU: 16000, SchedulableNodes: 4, DemandCPU: 9000,
				Pools: []twin.PoolSample{{Name: "p", MaxUnavailable: 1}}},
			{At: time.Minute, Phases: phases(0, 0, 3, 1), InSlot: 1, SchedulableCPU: 12000, SchedulableNodes: 3, DemandCPU: 9000, Pending: 2, EvictionsRefused: 3,
				Pools: []twin.PoolSample{{Name: "p", Unavailable: 1, MaxUnavailable: 1, Halted: true}}},
			{At: 15 * time.Minute, Phases: phases(0, 0, 1, 0, 0, 0, 3), SchedulableCPU: 16000, SchedulableNodes: 4, DemandCPU: 9000, EvictionsRefused: 5,
				Pools: []twin.PoolSample{{Name: "p", MaxUnavailable: 1}}},
		},
		Markers:          []twin.Marker{{At: 5 * time.Minute, What: "setPoolImage p"}},
		EvictionsRefused: 5,
		Reconciles:       map[string]uint64{"pool": 5},
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(result(), 2*time.Second)
	if s.Verdict != "fail" || s.EventsPerSecond != 617 || s.ConvergedAtSeconds != nil {
		t.Errorf("verdict %s, events/s %v, convergedAt %v", s.Verdict, s.EventsPerSecond, s.ConvergedAtSeconds)
	}
	if got := *s.Timings.TimeToFirstSlot; got != 60 {
		t.Errorf("time to first slot %v", got)
	}
	if got := *s.Timings.RolloutDuration; got != 14*60 {
		t.Errorf("rollout duration %v, want from first slot to last update", got)
	}
	if d := s.Timings.NodeUpdate; d.Count != 4 || d.P50 != 120 || d.P90 != 600 || d.Max != 600 {
		t.Errorf("node updates %+v", d)
	}
	if len(s.Violations) != 1 || s.Violations[0].AtSeconds != 90 || s.Pools[0].Phases["Updated"] != 3 {
		t.Errorf("summary %+v", s)
	}
}

func TestWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := Write(dir, result(), time.Second, []string{"bootroll.pools[0].maxUnavailable=2"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "seed", "verdict", "virtualSeconds", "wallSeconds", "events", "pools", "violations", "timings", "overrides", "evictionsRefused", "peakPendingPods"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary.json has no %q", k)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if o := m["overrides"]; len(o.([]any)) != 1 || o.([]any)[0] != "bootroll.pools[0].maxUnavailable=2" {
		t.Errorf("summary.json overrides %v", o)
	}
	if m["evictionsRefused"] != 5.0 || m["peakPendingPods"] != 2.0 {
		t.Errorf("summary.json evictionsRefused %v, peakPendingPods %v", m["evictionsRefused"], m["peakPendingPods"])
	}
	// Phases, CPU, memory, pending, PDB refusals, and one per pool (no
	// Karpenter in this run).
	if n := strings.Count(html, "<svg"); n != 6 {
		t.Errorf("%d SVG charts, want 6", n)
	}
	for _, want := range []string{
		"--set bootroll.pools[0].maxUnavailable=2",   // the overrides
		"time of day (UTC) from 2026-01-05 02:00:00", // the axis title
		">02:04<",             // a tick as time of day
		"setPoolImage p",      // the timed event
		"02:05:00 (5m 0s in)", // its time, rounded for people
		"Pool p: nodes unavailable and maxUnavailable", // one chart per pool
		`<title>maxUnavailable</title>`,                // its bound line
		"halted from +1m 0s to +15m 0s",                // the halt band
		"requested by workloads",                       // demand next to capacity
		"Evictions refused by PodDisruptionBudgets: 5", // the count
		"virtual 20m 0s",                               // durations rounded
	} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Self-contained: no scripts, no external resources.
	for _, bad := range []string{"<script", "<link", "src=", "@import", "url("} {
		if strings.Contains(html, bad) {
			t.Errorf("report.html contains %q", bad)
		}
	}
	for _, u := range regexp.MustCompile(`https?://[^"\s]*`).FindAllString(html, -1) {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("report.html refers to %s", u)
		}
	}
	if !strings.Contains(html, "3 nodes &lt;of&gt; pool p") {
		t.Error("violation message missing or not escaped")
	}
}

func TestNiceTop(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0, 4}, {2, 4}, {10, 12}, {40, 40}, {41, 80}, {1000, 1200}} {
		if got := niceTop(tc.in); got != tc.want {
			t.Errorf("niceTop(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
