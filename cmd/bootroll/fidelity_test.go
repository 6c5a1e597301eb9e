package main

import (
	"strings"
	"testing"

	"github.com/bootroll/bootroll/sim/fidelity"
	"github.com/bootroll/bootroll/sim/scenario"
)

func TestSpliceTable(t *testing.T) {
	old := "# Fidelity\n\nhand\n" + tableBegin + "\nold table\n" + tableEnd + "\nmore hand\n"
	got := string(spliceTable([]byte(old), []byte("| new |\n")))
	want := "# Fidelity\n\nhand\n" + tableBegin + "\n| new |\n" + tableEnd + "\nmore hand\n"
	if got != want {
		t.Errorf("spliced:\n%s\nwant:\n%s", got, want)
	}
	if got := string(spliceTable([]byte("no markers\n"), []byte("| t |\n"))); got != "| t |\n" {
		t.Errorf("without markers: %q", got)
	}
}

func TestFidelityRefusesBothClusterFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "fidelity", "--kubeconfig", "k", "--cluster-dir", "d", "../../scenarios/cluster/static-rollout-3.yaml")
	if code != exitBadInput || errOut == "" {
		t.Errorf("exit %d, stderr %q; want 2 and a message", code, errOut)
	}
}

func TestFidelityRefusesTwinSeedsOutOfRange(t *testing.T) {
	for _, n := range []string{"0", "1001"} {
		code, _, errOut := runCLI(t, "fidelity", "--twin-seeds", n, "../../scenarios/cluster/static-rollout-3.yaml")
		if code != exitBadInput || !strings.Contains(errOut, "--twin-seeds "+n+": must be 1 to 1000") {
			t.Errorf("--twin-seeds %s: exit %d, stderr %q; want 2 and the limit", n, code, errOut)
		}
	}
}

// twinRun gives the twin's run with the scenario's seed and with another,
// and the events of each trace.
func TestTwinRunEvents(t *testing.T) {
	sc, err := scenario.Load("../../scenarios/cluster/static-rollout-3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{0, sc.Seed + 1} {
		res, ev, err := twinRun(sc, seed)
		if err != nil {
			t.Fatal(err)
		}
		if want := max(seed, sc.Seed); res.Seed != want || !res.Passed() || len(ev[fidelity.Cordoned]) != 3 {
			t.Errorf("seed %d: ran seed %d, passed %v, %d cordons; want seed %d, passed, 3 cordons", seed, res.Seed, res.Passed(), len(ev[fidelity.Cordoned]), want)
		}
	}
}
