package twin_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

const scenarios = "../../scenarios"

func load(t testing.TB, name string, sets ...string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.LoadWithSets(filepath.Join(scenarios, name), sets)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func run(t testing.TB, sc *scenario.Scenario, seed uint64) (*twin.Result, []byte) {
	t.Helper()
	var trace bytes.Buffer
	res, err := twin.Run(sc, twin.Options{Seed: seed, Trace: &trace})
	if err != nil {
		t.Fatalf("%s: %v", sc.Name, err)
	}
	return res, trace.Bytes()
}

// TestDeterministicTrace runs scenarios twice with the same seed and
// compares the traces byte for byte, then once with another seed, which
// must give another trace. daemon-crash-while-staging draws fault times
// and targets from the seed, so the seed reaches the faults too.
func TestDeterministicTrace(t *testing.T) {
	for _, tc := range []struct {
		file        string
		seed, other uint64
	}{
		{"plain-rollout-10.yaml", 1, 2},
		{"daemon-crash-while-staging.yaml", 5, 6},
	} {
		t.Run(tc.file, func(t *testing.T) {
			sc := load(t, tc.file)
			_, a := run(t, sc, tc.seed)
			_, b := run(t, load(t, tc.file), tc.seed)
			if !bytes.Equal(a, b) {
				t.Fatalf("two runs with seed %d differ at line %d", tc.seed, firstDiff(a, b))
			}
			if len(a) == 0 {
				t.Fatal("empty trace")
			}
			_, c := run(t, load(t, tc.file), tc.other)
			if bytes.Equal(a, c) {
				t.Errorf("seeds %d and %d gave the same trace", tc.seed, tc.other)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// traceLine is one line of the trace.
type traceLine struct {
	T       string         `json:"t"`
	Kind    string         `json:"kind"`
	Object  string         `json:"object"`
	Details map[string]any `json:"details"`
}

func parseTrace(t *testing.T, data []byte) []traceLine {
	t.Helper()
	var out []traceLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var l traceLine
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		if !bytes.HasPrefix(line, []byte(`{"t":`)) || !bytes.Contains(line, []byte(`,"kind":`)) {
			t.Fatalf("trace line keys out of order: %s", line)
		}
		out = append(out, l)
	}
	return out
}

// TestScenarios runs every scenario of scenarios/ and scenarios/cluster/
// (the variants for --target cluster, whose twin verdicts the cluster's
// must match; not scenarios/bench/): each must pass, and each of its
// negative controls must be caught by the invariant it names. -short
// skips the 100-node scenario.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarios, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	cluster, err := filepath.Glob(filepath.Join(scenarios, "cluster", "*.yaml"))
	if err != nil || len(cluster) == 0 {
		t.Fatalf("no scenarios/cluster: %v", err)
	}
	for _, file := range append(files, cluster...) {
		name, _ := filepath.Rel(scenarios, file)
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			if testing.Short() && name == "rollout-100-nodes.yaml" {
				t.Skip("slow; run without -short")
			}
			sc := load(t, name)
			res, trace := run(t, sc, 0)
			if !res.Passed() {
				for _, v := range res.Violations {
					t.Errorf("%s", v)
				}
			}
			if check := scenarioChecks[name]; check != nil {
				check(t, res, parseTrace(t, trace))
			}
			for _, nc := range sc.NegativeControls {
				ctl := load(t, name, nc.Set...)
				cres, _ := run(t, ctl, 0)
				if !cres.Caught(string(nc.CaughtBy)) {
					t.Errorf("negative control %s was not caught by %s; violations: %v", nc.Name, nc.CaughtBy, cres.Violations)
				}
			}
		})
	}
}

// scenarioChecks check that a scenario exercises what its name says, so
// that a change in timing cannot quietly turn it into a plain rollout.
var scenarioChecks = map[string]func(*testing.T, *twin.Result, []traceLine){
	"controller-restart-mid-drain.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
		draining := map[string]bool{}
		restarts := 0
		for _, l := range tr {
			switch l.Kind {
			case "bootcnode.phase":
				draining[l.Object] = l.Details["to"] == "Draining"
			case "fault.controllerRestart":
				restarts++
				n := 0
				for _, d := range draining {
					if d {
						n++
					}
				}
				if n == 0 {
					t.Errorf("controller restart at %s with no node draining", l.T)
				}
			}
		}
		if restarts != 2 {
			t.Errorf("%d controller restarts, want 2", restarts)
		}
	},
	"daemon-crash-while-staging.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
		aborted := 0
		for _, l := range tr {
			if l.Kind == "node/stage-abort" && l.Details["reason"] == "daemon crash" {
				aborted++
			}
		}
		if aborted < 3 {
			t.Errorf("%d stages aborted by a daemon crash, want at least 3", aborted)
		}
	},
	"pdb-blocks-drain.yaml": func(t *testing.T, res *twin.Result, tr []traceLine) {
		timeouts := 0
		for _, l := range tr {
			if l.Kind == "bootcnode.phase" && l.Details["reason"] == "DrainTimeout" {
				timeouts++
			}
		}
		if timeouts < 3 {
			t.Errorf("%d drain timeouts, want at least 3", timeouts)
		}
		if res.Converged {
			t.Error("the pool converged although its PDB allows no disruption")
		}
	},
	"bad-image-halt-recover.yaml": func(t *testing.T, res *twin.Result, tr []traceLine) {
		halted := false
		for _, l := range tr {
			if l.Kind == "pool.status" && l.Details["Halted"] == "True/MaxFailuresReached" {
				halted = true
			}
			if l.Kind == "scenario.setPoolImage" && !halted {
				t.Error("the pool was not halted before the fixed image was set")
			}
		}
		if !halted || !res.Converged {
			t.Errorf("halted %v, converged %v; want both", halted, res.Converged)
		}
	},
}

// TestResult checks the figures a run reports.
func TestResult(t *testing.T) {
	res, _ := run(t, load(t, "plain-rollout-10.yaml"), 0)
	if !res.Converged || res.ConvergedAt <= 0 || res.End != res.ConvergedAt+twin.Settle {
		t.Errorf("converged %v at %s, end %s; want converged and the end Settle later", res.Converged, res.ConvergedAt, res.End)
	}
	if len(res.NodeUpdates) != 10 || !res.HasFirstSlot || res.Reboots != 10 {
		t.Errorf("%d node updates, first slot %v, %d reboots; want 10, true, 10", len(res.NodeUpdates), res.HasFirstSlot, res.Reboots)
	}
	if len(res.Pools) != 1 || res.Pools[0].Updated != 10 || !res.Pools[0].UpToDate {
		t.Errorf("pools %+v", res.Pools)
	}
	if len(res.Timeline) < 10 {
		t.Errorf("%d timeline samples", len(res.Timeline))
	}
	for i := 1; i < len(res.Timeline); i++ {
		if res.Timeline[i].At < res.Timeline[i-1].At {
			t.Fatalf("timeline goes back at %d", i)
		}
	}
	if res.Reconciles[controller.PoolController] == 0 || res.Reconciles[controller.NodeController] == 0 || res.Reconciles["daemon"] == 0 {
		t.Errorf("reconciles %v", res.Reconciles)
	}
}

// TestTimelineFollowsRefusedEvictions: a drain that a PDB blocks retries
// without a phase or cordon changing; the timeline still shows the
// refusals grow (the report draws them; the timeline used to be sampled
// only at phase and cordon changes).
func TestTimelineFollowsRefusedEvictions(t *testing.T) {
	res, _ := run(t, load(t, "pdb-blocks-drain.yaml"), 0)
	if res.EvictionsRefused < 5 {
		t.Fatalf("%d evictions refused; the scenario should refuse many", res.EvictionsRefused)
	}
	seen := map[uint64]bool{}
	for _, s := range res.Timeline {
		seen[s.EvictionsRefused] = true
	}
	if len(seen) < int(res.EvictionsRefused)/4 || !seen[res.EvictionsRefused] {
		t.Errorf("the timeline shows %d distinct counts of refused evictions (final %d seen: %v); want at least a quarter of them and the final one", len(seen), res.EvictionsRefused, seen[res.EvictionsRefused])
	}
}
