package explore

import (
	"testing"
)

// plantedBug is a deliberately broken setting (bootroll.testOnly) that
// exploration must find in a scenario within maxRuns runs and shrink to at
// most MaxShrunk faults and actions.
type plantedBug struct {
	set       string
	scenario  string
	invariant string
}

// MaxShrunk is the most faults and actions a planted bug's shrunk
// reproducer may keep.
const MaxShrunk = 3

// plantedMaxRuns is the CI budget for finding one planted bug.
const plantedMaxRuns = 200

var plantedBugs = []plantedBug{
	{"bootroll.testOnly.ignoreSlotLimit=true", "plain-rollout-10", "max-unavailable"},
	{"bootroll.testOnly.skipUncordon=true", "plain-rollout-10", "no-leaked-cordon"},
	{"bootroll.testOnly.deleteInsteadOfEvict=true", "pdb-blocks-drain", "pdb-respected"},
	{"bootroll.testOnly.forgetLastReboot=true", "bad-image-halt-recover", "no-double-reboot"},
	{"bootroll.testOnly.noStagingReserve=true", "storage-exhaustion-during-prefetch", "os-staging-not-starved"},
	{"bootroll.testOnly.freeSlotBeforeVerify=true", "plain-rollout-10", "max-unavailable"},
	{"bootroll.testOnly.keepBootOrder=true", "plain-rollout-10", "no-unprotected-reboot"},
	{"bootroll.testOnly.countSlotsFromCache=true", "plain-rollout-10", "max-unavailable"},
	{"bootroll.testOnly.forgetPriorCordon=true", "admin-node-actions", "no-leaked-cordon"},
	{"bootroll.testOnly.haltFromLiveRecords=true", "bad-image-halt-recover", "halt-is-final"},
	{"bootroll.testOnly.skipCleanupOnDelete=true", "plain-rollout-10", "cleanup"},
	{"bootroll.testOnly.dropAnnotationOwnership=true", "pool-deleted-mid-rollout", "no-leaked-annotation"},
	{"bootroll.testOnly.skipKarpenterProtection=true", "repair-during-slow-reboot", "no-reap-while-updating"},
	{"bootroll.testOnly.keepAnnotations=true", "plain-rollout-10", "no-leaked-annotation"},
	{"bootroll.testOnly.forgetSlotsOnRestart=true", "controller-restart-mid-drain", "max-unavailable"},
	{"bootroll.testOnly.noHealthTimeout=true", "boot-failure-modes", "converges"},
	{"bootroll.testOnly.skipHealthChecks=true", "health-checks", "updated-healthy"},
	{"bootroll.testOnly.ignoreWindows=true", "maintenance-windows", "grant-in-window"},
}

// TestPlantedBugsAreFound proves the harness: every planted bug is found by
// exploration with every category on, within plantedMaxRuns runs, and
// shrunk to at most MaxShrunk faults and actions. It logs the runs each
// needed.
func TestPlantedBugsAreFound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the twin")
	}
	for _, pb := range plantedBugs {
		t.Run(pb.set, func(t *testing.T) {
			tg := target(t, pb.scenario, pb.set)
			f, runs, err := Hunt(tg, pb.invariant, plantedMaxRuns, Config{Categories: AllCategories})
			if err != nil {
				t.Fatal(err)
			}
			if f == nil {
				t.Fatalf("%s in %s: not found by %s in %d runs", pb.set, pb.scenario, pb.invariant, runs)
			}
			if len(f.Shrunk) > MaxShrunk {
				t.Fatalf("%s: shrunk to %d items, want at most %d: %v", pb.set, len(f.Shrunk), MaxShrunk, f.Shrunk)
			}
			t.Logf("%s: found by %s after %d run(s) (seed %d), shrunk from %d to %d item(s) in %d runs", pb.set, pb.invariant, runs, f.Seed, len(f.Schedule), len(f.Shrunk), f.ShrinkRuns)
		})
	}
}
