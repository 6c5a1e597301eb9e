package explore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// BudgetRuns is the least number of runs make test's exploration makes
// over the shipped scenarios.
const BudgetRuns = 2000

// pendingDir holds the explorer's reproducers of bugs found and not fixed
// yet, named <scenario>.<invariant>.seed<N>.yaml as the explorer writes
// them. make scenario does not run them.
const pendingDir = "../../scenarios/regressions-pending"

// pending returns the (scenario, invariant) pairs that have a pending
// reproducer, with its file.
func pending(t *testing.T) map[[2]string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(pendingDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[[2]string]string{}
	for _, f := range files {
		parts := strings.Split(filepath.Base(f), ".")
		if len(parts) != 4 || !strings.HasPrefix(parts[2], "seed") {
			continue // a hand-written scenario, not an explorer reproducer
		}
		out[[2]string{parts[0], parts[1]}] = f
	}
	return out
}

// TestExploreBudget runs a fixed exploration over every shipped scenario
// (at least BudgetRuns runs, seeds 1..N, every category) and fails on any
// violation, printing each with its shrunk reproducer, except a scenario's
// invariant that has a pending reproducer in scenarios/regressions-pending
// (a known bug, logged, not failed). make explore runs a longer one.
func TestExploreBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a fixed exploration budget: a few minutes on 2 cores")
	}
	tgs := shipped(t)
	seeds := (BudgetRuns + len(tgs) - 1) / len(tgs)
	out := t.TempDir()
	known := pending(t)
	rep, err := Run(tgs, Config{Seeds: seeds, Categories: AllCategories, Jobs: runtime.GOMAXPROCS(0), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d runs (%d seeds x %d scenarios, every category), %.1f simulated hours, wall %s, %.1f runs/s per core",
		rep.Runs, seeds, len(tgs), rep.Sim.Hours(), rep.Wall.Round(time.Millisecond), float64(rep.Runs)/rep.RunWall.Seconds())
	if rep.Runs < BudgetRuns {
		t.Fatalf("%d runs, want at least %d", rep.Runs, BudgetRuns)
	}
	for _, f := range rep.Failures {
		var sched []string
		for _, it := range f.Shrunk {
			sched = append(sched, it.String())
		}
		msg := fmt.Sprintf("%s: %s (seed %d): %s\n  shrunk to: %s\n  replay: bootroll scenario explore %s --seeds 1 --first-seed %d --faults all",
			f.Scenario, f.Invariant, f.Seed, f.Message, strings.Join(sched, "; "), f.File, f.Seed)
		if file, ok := known[[2]string{f.Scenario, f.Invariant}]; ok {
			t.Logf("known, pending (%s): %s", file, msg)
			continue
		}
		if data, err := os.ReadFile(f.ShrunkFile); err == nil {
			msg += "\n  shrunk reproducer:\n" + string(data)
		}
		t.Errorf("%s", msg)
	}
}

// TestPendingReproducersStillFail keeps scenarios/regressions-pending
// honest: each reproducer there still violates the invariant its name
// gives; once its bug is fixed it belongs in scenarios/regressions.
func TestPendingReproducersStillFail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the twin")
	}
	for pair, file := range pending(t) {
		sc, err := scenario.Load(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		res, err := twin.Run(sc, twin.Options{})
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if !res.Caught(pair[1]) {
			t.Errorf("%s no longer violates %s: its bug is fixed; move it to scenarios/regressions", file, pair[1])
		}
	}
}
