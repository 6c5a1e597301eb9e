package twin_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// actionsYAML is a small cluster for the action tests: three static
// workers and two Karpenter-managed nodes, all on v1 and in pool
// workers (image v1, so nothing rolls unless an event says so); the
// events and faults follow.
const actionsYAML = `name: actions
limit: 2h
images:
  - {name: v1, ref: "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", size: 1Gi}
  - {name: v2, ref: "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222", size: 1Gi}
host:
  reboot: 90s
nodeGroups:
  - {name: workers, count: 3, labels: {pool: workers}, capacity: {cpu: "4", memory: 16Gi}, bootImage: v1}
  - {name: kp, count: 2, labels: {pool: workers}, capacity: {cpu: "4", memory: 16Gi}, bootImage: v1, karpenter: {nodePool: kp}}
workloads:
  - {name: web, replicas: 4, requests: {cpu: "1"}, nodeSelector: {pool: workers}, pdb: {maxUnavailable: 1}}
karpenter:
  nodeClasses: [{name: default, bootImage: v1}]
  nodePools:
    - {name: kp, labels: {pool: workers}, consolidateAfter: Never}
bootroll:
  pools:
    - {name: workers, nodeSelector: {pool: workers}, image: v1}
expect:
  invariants: [max-unavailable]
`

func runActions(t *testing.T, extra string) (*twin.Result, []traceLine) {
	t.Helper()
	sc, err := scenario.Parse("actions.yaml", []byte(actionsYAML+extra))
	if err != nil {
		t.Fatal(err)
	}
	res, trace := run(t, sc, 1)
	return res, parseTrace(t, trace)
}

// find returns the trace lines of kind whose object contains object.
func find(tr []traceLine, kind, object string) []traceLine {
	var out []traceLine
	for _, l := range tr {
		if l.Kind == kind && strings.Contains(l.Object, object) {
			out = append(out, l)
		}
	}
	return out
}

func TestActionEffects(t *testing.T) {
	_, tr := runActions(t, `events:
  - {at: 1m, cordonNode: {node: workers-1}}
  - {at: 2m, uncordonNode: {node: workers-1}}
  - {at: 3m, deleteBootcNode: {node: workers-2}}
  - {at: 4m, setPool: {pool: workers, paused: true, maxUnavailable: 2}}
  - {at: 5m, setPool: {pool: workers, image: v2}}
  - {at: 6m, deleteNode: {node: workers-0}}
  - {at: 7m, relabelNode: {node: workers-1, set: {pool: elsewhere}}}
  - {at: 8m, deletePool: {pool: workers}}
  - {at: 9m, createPool: {name: again, nodeSelector: {pool: workers}, image: v2, paused: true}}
`)
	for _, c := range []struct {
		what, kind, object string
		check              func(traceLine) bool
	}{
		{"admin cordon", "node.cordon", "workers-1", func(l traceLine) bool { return l.Details["unschedulable"] == true && l.Details["slot"] == nil }},
		{"admin uncordon", "node.cordon", "workers-1", func(l traceLine) bool { return l.Details["unschedulable"] == false }},
		{"BootcNode deleted", "bootcnode.deleted", "workers-2", nil},
		{"pool paused", "pool.spec", "workers", func(l traceLine) bool { return l.Details["paused"] == true }},
		{"pool image", "pool.spec", "workers", func(l traceLine) bool {
			return strings.Contains(l.Details["image"].(string), "sha256:2222")
		}},
		{"node deleted", "node.deleted", "workers-0", nil},
		{"pool deleted", "pool.deleted", "workers", nil},
		{"pool created", "pool.created", "BootcNodePool/again", func(l traceLine) bool {
			return l.Details["paused"] == true && strings.Contains(l.Details["image"].(string), "sha256:2222")
		}},
	} {
		ok := false
		for _, l := range find(tr, c.kind, c.object) {
			if c.check == nil || c.check(l) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: no %s of %s in the trace", c.what, c.kind, c.object)
		}
	}
	for _, kind := range []string{"scenario.cordonNode", "scenario.uncordonNode", "scenario.deleteBootcNode", "scenario.setPool", "scenario.deleteNode", "scenario.relabelNode", "scenario.deletePool", "scenario.createPool"} {
		if len(find(tr, kind, "")) == 0 {
			t.Errorf("no %s in the trace", kind)
		}
	}
}

func TestOverlappingControllerRestartsRunOneController(t *testing.T) {
	_, tr := runActions(t, `faults:
  - {at: 1m, controllerRestart: {downFor: 5m}}
  - {at: 2m, controllerRestart: {downFor: 1m}}
  - {at: 3m, controllerRestart: {downFor: 10m}}
  - {at: 20m, controllerRestart: {}}
  - {at: 20m, controllerRestart: {}}
`)
	var starts, stops []string
	up := false
	for _, l := range tr {
		switch l.Kind {
		case "controller.start":
			if up {
				t.Errorf("a second controller started at %s while one ran", l.T)
			}
			up = true
			starts = append(starts, l.T)
		case "controller.stop":
			up = false
			stops = append(stops, l.T)
		}
	}
	// The first start, the one after the overlapping restarts (at 13m, the
	// latest end), and two at 20m.
	if len(starts) != 4 || !strings.HasPrefix(starts[1], "2026-01-05T00:13:00") {
		t.Errorf("controller starts at %v, want 4 with the second at 00:13:00", starts)
	}
	if len(stops) != 3 {
		t.Errorf("controller stops at %v, want 3 (a restart while down stops nothing)", stops)
	}
	if n := len(find(tr, "fault.controllerRestart", "")); n != 5 {
		t.Errorf("%d restart faults traced, want 5", n)
	}
}

func TestAddNodesToKarpenterGroupGetsNodeClaims(t *testing.T) {
	_, tr := runActions(t, `events:
  - {at: 1m, addNodes: {group: kp, count: 2}}
  - {at: 2m, addNodes: {group: workers, count: 1}}
`)
	for _, n := range []string{"kp-2", "kp-3"} {
		if len(find(tr, "karpenter/registered", n)) == 0 {
			t.Errorf("added node %s was not registered by Karpenter (no NodeClaim)", n)
		}
	}
	if len(find(tr, "karpenter/registered", "workers-3")) != 0 {
		t.Error("a node added to a group without a NodePool got a NodeClaim")
	}
}

func TestKarpenterCRDsRemovedAndReinstalled(t *testing.T) {
	_, tr := runActions(t, `events:
  - {at: 1m, karpenterCRDs: {installed: false}}
  - {at: 10m, karpenterCRDs: {installed: true}}
`)
	if len(find(tr, "karpenter.remove", "")) != 1 || len(find(tr, "karpenter.install", "")) != 2 {
		t.Fatalf("removes %d, installs %d; want 1 and 2", len(find(tr, "karpenter.remove", "")), len(find(tr, "karpenter.install", "")))
	}
	for _, l := range tr {
		if l.Kind == "node.deleted" || l.Kind == "node.deleting" {
			t.Errorf("%s %s: removing Karpenter's CRDs must leave the nodes", l.Kind, l.Object)
		}
	}
	// Reinstalled, Karpenter adopts the nodes again.
	for _, n := range []string{"kp-0", "kp-1"} {
		if got := len(find(tr, "karpenter/registered", n)); got != 2 {
			t.Errorf("node %s registered %d times, want 2 (before the removal and after the reinstall)", n, got)
		}
	}
}

func TestHostFaultsTraced(t *testing.T) {
	_, tr := runActions(t, `faults:
  - {at: 1m, powerCycle: {node: workers-0, offFor: 10m}}
  - {at: 1m, registryOutage: {for: 5m}}
  - {at: 1m, slowPulls: {for: 5m, factor: 4}}
  - {at: 1m, diskFill: {node: workers-1, size: 1Gi, for: 1m}}
  - {at: 1m, longReboot: {node: workers-2}}
  - {at: 1m, bootFailure: {group: kp, count: 2, mode: Flapping}}
`)
	for _, kind := range []string{"fault.powerCycle", "fault.registryOutage", "fault.slowPulls", "fault.diskFill", "fault.longReboot", "fault.bootFailure",
		"node/power-cycle", "registry/outage", "registry/slow", "node/disk-fill", "node/disk-freed"} {
		if len(find(tr, kind, "")) == 0 {
			t.Errorf("no %s in the trace", kind)
		}
	}
	// workers-0 is off for 10 minutes from 1m: it shows Unknown after the
	// 50 s grace period and its web pods are evicted 300 s later.
	ev := find(tr, "node-lifecycle/evict", "workers-0")
	if len(ev) != 1 || !strings.HasPrefix(ev[0].T, "2026-01-05T00:06:50") {
		t.Errorf("evictions of workers-0: %v, want one at 00:06:50", ev)
	}
}

func TestDeleteKarpenterNode(t *testing.T) {
	_, tr := runActions(t, `events:
  - {at: 1m, deleteNode: {node: kp-0}}
`)
	// The Node carries Karpenter's termination finalizer: Karpenter
	// drains it, ends the instance and lets it go.
	if len(find(tr, "node.deleting", "kp-0")) != 1 || len(find(tr, "karpenter/terminated", "")) == 0 || len(find(tr, "node.deleted", "kp-0")) != 1 {
		t.Errorf("deleting a Karpenter node: deleting %d, terminated %d, deleted %d; want 1, >0, 1",
			len(find(tr, "node.deleting", "kp-0")), len(find(tr, "karpenter/terminated", "")), len(find(tr, "node.deleted", "kp-0")))
	}
}

// TestActionsOnGoneObjectsAreSkipped: exploration puts actions at random
// times, so an action on a node or pool that is gone by then is traced
// as skipped, not a failed run.
func TestActionsOnGoneObjectsAreSkipped(t *testing.T) {
	_, tr := runActions(t, `events:
  - {at: 1m, deleteNode: {node: workers-0}}
  - {at: 2m, deleteNode: {node: workers-0}}
  - {at: 2m, cordonNode: {node: workers-0}}
  - {at: 2m, relabelNode: {node: workers-0, set: {a: b}}}
  - {at: 3m, deletePool: {pool: workers}}
  - {at: 4m, deletePool: {pool: workers}}
  - {at: 4m, setPool: {pool: workers, paused: true}}
  - {at: 4m, setPoolImage: {pool: workers, image: v2}}
faults:
  - {at: 2m, nodeCrash: {node: workers-0}}
  - {at: 2m, powerCycle: {node: workers-0}}
  - {at: 2m, daemonCrash: {node: workers-0}}
`)
	for _, kind := range []string{"scenario.deleteNode.skipped", "scenario.cordonNode.skipped", "scenario.relabelNode.skipped", "scenario.deletePool.skipped",
		"scenario.updatePool.skipped", "fault.nodeCrash.skipped", "fault.powerCycle.skipped", "fault.daemonCrash.skipped"} {
		if len(find(tr, kind, "")) == 0 {
			t.Errorf("no %s in the trace", kind)
		}
	}
	if n := len(find(tr, "scenario.updatePool.skipped", "")); n != 2 {
		t.Errorf("%d pool updates skipped, want 2 (setPool and setPoolImage)", n)
	}
}

// TestDeterministicWithActionsAndFaults runs the scenario with the most
// new actions and faults twice with one seed (byte-identical traces) and
// once with another (a different trace: the power cycles are drawn).
func TestDeterministicWithActionsAndFaults(t *testing.T) {
	for _, file := range []string{"host-faults-mid-rollout.yaml", "admin-node-actions.yaml"} {
		_, a := run(t, load(t, file), 3)
		_, b := run(t, load(t, file), 3)
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Fatalf("%s: two runs with seed 3 differ at line %d", file, firstDiff(a, b))
		}
	}
	_, a := run(t, load(t, "host-faults-mid-rollout.yaml"), 3)
	_, c := run(t, load(t, "host-faults-mid-rollout.yaml"), 4)
	if bytes.Equal(a, c) {
		t.Error("seeds 3 and 4 gave the same trace")
	}
}

// TestAdminCordonOfCordonedNodeChangesNothing: kubectl cordon of a node
// that is cordoned already writes nothing, so it changes nothing the
// invariants expect of bootroll either.
func TestAdminCordonOfCordonedNodeChangesNothing(t *testing.T) {
	res, tr := runActions(t, `events:
  - {at: 1m, cordonNode: {node: workers-1}}
  - {at: 2m, cordonNode: {node: workers-1}}
  - {at: 3m, uncordonNode: {node: workers-1}}
  - {at: 4m, uncordonNode: {node: workers-1}}
`)
	var got []any
	for _, kind := range []string{"scenario.cordonNode", "scenario.uncordonNode"} {
		for _, l := range find(tr, kind, "workers-1") {
			got = append(got, l.Details["changes"])
		}
	}
	if want := []any{true, false, true, false}; len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("changes of the four admin cordons: %v, want %v", got, want)
	}
	if n := len(find(tr, "node.cordon", "workers-1")); n != 2 {
		t.Errorf("%d cordon writes, want 2", n)
	}
	if !res.Passed() {
		t.Errorf("violations: %v", res.Violations)
	}
}
