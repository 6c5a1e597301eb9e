//go:build bootroll_testonly

package main

import (
	"io"
	"strings"
	"testing"

	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/clusterrun"
)

// TestTestOnlyControllerFlags: the hidden command takes the command line
// the cluster target gives a controller plus --test-only, and refuses
// the daemon's settings and a missing --test-only.
func TestTestOnlyControllerFlags(t *testing.T) {
	args := append([]string{"--test-only=ignoreSlotLimit,haltFromLiveRecords"}, clusterrun.ControllerCommand("/k")...)
	o, err := parseTestOnlyControllerFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (rollout.TestOnly{IgnoreSlotLimit: true, HaltFromLiveRecords: true}); o.testOnly != want || o.kubeconfig != "/k" || o.metricsAddr != "0" {
		t.Fatalf("got %+v", o)
	}
	for _, bad := range [][]string{
		{"--test-only=forgetLastReboot", "--kubeconfig=/k"},
		{"--kubeconfig=/k"},
		{"--test-only=nope"},
	} {
		if _, err := parseTestOnlyControllerFlags(bad, io.Discard); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

func TestTestOnlyBuildHasTheCommand(t *testing.T) {
	code, _, errs := runCLI(t, clusterrun.TestOnlyCommand, "--kubeconfig=/k")
	if code != exitBadInput || !strings.Contains(errs, "--test-only is required") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}
