package explore

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// BudgetRuns is the least number of runs make test's exploration makes
// over the shipped scenarios.
const BudgetRuns = 2000

// budgetCategories are the categories make test's exploration draws from.
var budgetCategories = AllCategories

// TestExploreBudget runs a fixed exploration over every shipped scenario
// (at least BudgetRuns runs, with seeds 1..N, every category) and fails on
// any violation, printing each with its shrunk reproducer's replay
// command. make explore runs a longer one.
func TestExploreBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a fixed exploration budget: about a minute on 2 cores")
	}
	tgs := shipped(t)
	seeds := (BudgetRuns + len(tgs) - 1) / len(tgs)
	out := t.TempDir()
	rep, err := Run(tgs, Config{Seeds: seeds, Categories: budgetCategories, Jobs: runtime.GOMAXPROCS(0), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d runs, %.1f simulated hours, wall %s, %.1f runs/s per core\n", rep.Runs, rep.Sim.Hours(), rep.Wall.Round(time.Millisecond), float64(rep.Runs)/rep.RunWall.Seconds())
	t.Log(b.String())
	if rep.Runs < BudgetRuns {
		t.Fatalf("%d runs, want at least %d", rep.Runs, BudgetRuns)
	}
	for _, f := range rep.Failures {
		var sched []string
		for _, it := range f.Shrunk {
			sched = append(sched, it.String())
		}
		t.Errorf("%s: %s (seed %d): %s\n  shrunk to: %s\n  replay: bootroll scenario explore %s --seeds 1 --first-seed %d --faults all",
			f.Scenario, f.Invariant, f.Seed, f.Message, strings.Join(sched, "; "), f.File, f.Seed)
	}
}
