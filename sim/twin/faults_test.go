package twin_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// withFaults is plain-rollout-10 without its negative controls, with the
// given faults section (and optional top-level lines) appended.
func withFaults(t *testing.T, extra string) *scenario.Scenario {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(scenarios, "plain-rollout-10.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src, _, _ := strings.Cut(string(b), "negativeControls:")
	file := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(file, []byte(src+extra), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// kinds counts the trace lines by kind.
func kinds(t *testing.T, trace []byte) map[string]int {
	out := map[string]int{}
	for _, l := range parseTrace(t, trace) {
		out[l.Kind]++
	}
	return out
}

// TestAPIAndWatchFaults runs a rollout under every API and watch fault
// and checks that each was drawn, recorded in the trace, and that the run
// replays byte for byte; the same rollout without faults records none.
func TestAPIAndWatchFaults(t *testing.T) {
	const faults = `faults:
  - window: {from: 0s, to: 30m}
    apiErrors: {codes: [conflict, tooManyRequests, internalError, timeout], rate: 0.2, who: all}
  - window: {from: 0s, to: 30m}
    watchFaults: {drop: 0.1, delay: 2s}
  - window: {from: 0s, to: 30m}
    controllerCrash: {rate: 0.05, downFor: 10s}
  - window: {from: 0s, to: 30m}
    daemonWriteCrash: {rate: 0.1, downFor: 10s}
`
	res, a := run(t, withFaults(t, faults), 1)
	_, b := run(t, withFaults(t, faults), 1)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs differ at line %d", firstDiff(a, b))
	}
	k := kinds(t, a)
	for _, want := range []string{"fault.apiError", "fault.watchDrop", "informer.relist", "fault.controllerCrash", "fault.daemonWriteCrash"} {
		if k[want] == 0 {
			t.Errorf("no %s in the trace (kinds: %v)", want, k)
		}
	}
	if k["controller.start"] != k["fault.controllerCrash"]+1 {
		t.Errorf("%d controller starts for %d crashes", k["controller.start"], k["fault.controllerCrash"])
	}
	codes := map[string]bool{}
	for _, l := range parseTrace(t, a) {
		if l.Kind == "fault.apiError" {
			codes[l.Details["code"].(string)] = true
		}
	}
	if len(codes) != 4 {
		t.Errorf("codes drawn: %v, want all four", codes)
	}
	for _, v := range res.Violations {
		t.Errorf("violation under faults: %s", v)
	}
	// A daemon that crashed after a write acts on its host no more in
	// that reconcile (the same instant).
	dead := map[string]string{} // node → time of its crash
	for _, l := range parseTrace(t, a) {
		node := strings.TrimPrefix(strings.TrimPrefix(l.Object, "Node/"), "node/")
		switch {
		case l.Kind == "fault.daemonWriteCrash":
			dead[node] = l.T
		case strings.HasPrefix(l.Kind, "node/") && l.Kind != "node/daemon-down" && dead[node] == l.T:
			t.Errorf("%s of %s at %s, right after its daemon crashed", l.Kind, node, l.T)
		}
	}

	_, c := run(t, withFaults(t, ""), 1)
	k = kinds(t, c)
	for _, never := range []string{"fault.apiError", "fault.watchDrop", "informer.relist", "fault.controllerCrash", "fault.daemonWriteCrash"} {
		if k[never] != 0 {
			t.Errorf("%d %s without faults", k[never], never)
		}
	}
}

// TestControllerCrashAfterWrites crashes the controller right after its
// third write, once.
func TestControllerCrashAfterWrites(t *testing.T) {
	_, tr := run(t, withFaults(t, "faults:\n  - at: 0s\n    controllerCrash: {afterWrites: 3, downFor: 5s}\n"), 1)
	k := kinds(t, tr)
	if k["fault.controllerCrash"] != 1 || k["controller.start"] != 2 {
		t.Errorf("%d crashes and %d controller starts, want 1 and 2", k["fault.controllerCrash"], k["controller.start"])
	}
}

// TestDaemonCrashAfterHostCall crashes daemons right after a host call
// (daemonWriteCrash with hostCalls): some crash right after asking the
// host to stage or reboot, and the rollout still holds every invariant.
func TestDaemonCrashAfterHostCall(t *testing.T) {
	res, tr := run(t, withFaults(t, "faults:\n  - window: {from: 0s, to: 30m}\n    daemonWriteCrash: {rate: 0.5, downFor: 20s, hostCalls: true}\n"), 1)
	after := map[string]int{}
	for _, l := range parseTrace(t, tr) {
		if l.Kind == "fault.daemonWriteCrash" {
			after[l.Details["afterVerb"].(string)]++
		}
	}
	if after["host/stage"] == 0 || after["host/apply"] == 0 {
		t.Errorf("crashes by the step they followed: %v, want some right after host/stage and host/apply", after)
	}
	for _, v := range res.Violations {
		t.Errorf("violation: %s", v)
	}
}

// TestProfiles runs a rollout under each profile; an unknown one is
// refused.
func TestProfiles(t *testing.T) {
	var starts []string
	for _, p := range []string{"default", "stale", "instant"} {
		res, tr := run(t, withFaults(t, "profile: "+p+"\n"), 1)
		if !res.Passed() {
			t.Errorf("profile %s: %v", p, res.Violations)
		}
		for _, l := range parseTrace(t, tr) {
			if l.Kind == "controller.start" {
				starts = append(starts, p)
			}
		}
	}
	if len(starts) != 3 {
		t.Errorf("controller starts %v", starts)
	}
	if _, err := twin.Run(withFaults(t, ""), twin.Options{Profile: "bogus"}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("profile bogus: %v", err)
	}
}
