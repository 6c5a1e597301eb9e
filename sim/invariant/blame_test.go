package invariant

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Tests that pdb-respected, no-reap-while-updating and no-churn blame
// bootroll only for what bootroll did (issue 11): each has the case that
// used to be blamed wrongly passing and the case that is bootroll's
// caught.

// webPod adds a running, ready pod of the workload "web" on node.
func (f *fixture) webPod(name, node string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:   corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	f.c.Observe(apiserver.Event{Type: apiserver.Added, Object: p})
	return p
}

// terminate gives the pod a deletionTimestamp; healthyAfter is the
// budget's healthy count once the cluster model has counted it (it
// counts after the checker saw the event, as in the twin).
func (f *fixture) terminate(p *corev1.Pod, healthyAfter int) {
	term := p.DeepCopy()
	term.DeletionTimestamp = &metav1.Time{Time: f.now}
	f.c.Observe(apiserver.Event{Type: apiserver.Modified, Old: p, Object: term})
	f.setHealthy(healthyAfter)
}

func (f *fixture) setHealthy(h int) {
	f.pdbs[0].Healthy = h
	f.pdbs[0].Violated = h < f.pdbs[0].DesiredHealthy
	f.pdbs[0].DisruptionsAllowed = max(h-f.pdbs[0].DesiredHealthy, 0)
}

func pdbFixture(t *testing.T) (*fixture, []*corev1.Pod) {
	f := newFixture(t, nil, intstr.FromInt32(1), "a", "b", "c")
	f.c.Observe(apiserver.Event{Type: apiserver.Added, Object: &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: new(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}})
	pods := []*corev1.Pod{f.webPod("web-0", "a"), f.webPod("web-1", "b"), f.webPod("web-2", "c")}
	f.pdbs = []facts.PDBState{{Namespace: "default", Name: "web", ExpectedPods: 3, DesiredHealthy: 2}}
	f.setHealthy(3)
	f.check(time.Second)
	return f, pods
}

func TestPDBPowerCycleDuringRefusedEvictions(t *testing.T) {
	f, pods := pdbFixture(t)
	// bootroll's eviction of web-0 is granted: 3 -> 2 healthy, at the floor.
	f.evicted++
	f.terminate(pods[0], 2)
	f.check(2 * time.Second)
	// Its next eviction (web-1) is refused: nothing is removed.
	f.evicted++
	f.check(3 * time.Second)
	// Then a power cycle of node c takes web-2 down, and the node
	// lifecycle controller deletes it: 1 healthy, below the floor, by
	// someone else.
	f.setHealthy(1)
	f.check(4 * time.Second)
	f.terminate(pods[2], 1)
	f.check(5 * time.Second)
	// A refused eviction in the same event as the crash's removal.
	f.evicted++
	f.node("a", func(n *corev1.Node) { n.Labels["x"] = "y" })
	f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: pods[0]})
	f.check(6 * time.Second)
	f.want(scenario.InvPDBRespected, 0, "power cycle during refused evictions")

	// A bootroll deletion of an unhealthy pod changes no healthy count.
	f.setHealthy(1)
	p3 := f.webPod("web-3", "b")
	f.check(7 * time.Second)
	f.evicted++
	f.terminate(p3, 1)
	f.check(8 * time.Second)
	f.want(scenario.InvPDBRespected, 0, "bootroll removed a pod that was not healthy")
}

func TestPDBBootrollDeletionCaught(t *testing.T) {
	f, pods := pdbFixture(t)
	// bootroll (testOnly.deleteInsteadOfEvict) deletes web-0 and web-1 in
	// one reconcile: 3 -> 1 healthy, below the floor of 2.
	f.evicted++
	f.terminate(pods[0], 2)
	f.evicted++
	f.terminate(pods[1], 1)
	f.check(2 * time.Second)
	f.want(scenario.InvPDBRespected, 1, "bootroll's deletions took the budget below its floor")
	// A pod outside the budget's selector is not judged against it.
	f, _ = pdbFixture(t)
	other := f.pod("other", "a", false)
	f.setHealthy(2)
	f.check(2 * time.Second)
	f.evicted++
	f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: other})
	f.setHealthy(1) // a crash elsewhere in the same event
	f.check(3 * time.Second)
	f.want(scenario.InvPDBRespected, 0, "bootroll removed a pod no budget covers")
}

func TestNoReapAdminDeletionNotBlamed(t *testing.T) {
	f := newFixture(t, nil, intstr.FromInt32(1), "a", "b", "c")
	for _, n := range []string{"a", "b", "c"} {
		f.node(n, protect)
	}
	// An admin deletes node a while it holds a slot: Karpenter's
	// termination taints and drains it without having decided anything.
	f.node("a", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: f.now} })
	f.c.KarpenterTrace("karpenter/tainted", "node/a", map[string]any{"taint": fakekarpenter.TaintDisrupted}, f.now)
	f.c.KarpenterTrace("karpenter/evicted", "pod/default/web-0", map[string]any{"node": "a"}, f.now)
	f.c.KarpenterTrace("karpenter/pod-deleted", "pod/default/web-1", map[string]any{"node": "a", "reason": "drain deadline"}, f.now)
	f.want(scenario.InvNoReapWhileUpdating, 0, "admin deletion of a node in a slot")

	// Karpenter decides to disrupt node b (drift) while it holds a slot.
	f.c.KarpenterTrace("karpenter/disrupt", "node/b", map[string]any{"method": "drift", "reason": fakekarpenter.ReasonDrifted, "decision": "replace"}, f.now)
	f.want(scenario.InvNoReapWhileUpdating, 1, "drift of a node in a slot")
	// Karpenter decided to consolidate node c before it got its slot, and
	// drains it while it holds one.
	f.node("c", unmark)
	f.c.KarpenterTrace("karpenter/disrupt", "node/c", map[string]any{"method": "emptiness", "reason": fakekarpenter.ReasonEmpty, "decision": "delete"}, f.now)
	f.want(scenario.InvNoReapWhileUpdating, 1, "disruption of a node outside a slot")
	f.node("c", protect)
	f.c.KarpenterTrace("karpenter/evicted", "pod/default/web-2", map[string]any{"node": "c"}, f.now)
	f.want(scenario.InvNoReapWhileUpdating, 2, "Karpenter drains a node it decided to disrupt, in a slot")
}

// A node whose BootcNode is being deleted and that bootroll has given back
// after its reboot (marker gone) is out of the slot although the record
// still shows a slot phase (the controller crashed between the release's
// Node write and the record's: explorer seed 112337 of cluster-node-churn);
// one still marked, or still down in bootroll's reboot, is not; nor is one
// whose record is not being deleted.
func TestNoReapReleasedRecordBeingDeleted(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		deleting, marked, rebooted bool
		want                       int
	}{
		{"given back after its reboot", true, false, true, 0},
		{"still marked", true, true, true, 1},
		{"still in its reboot", true, false, false, 1},
		{"record not being deleted", false, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, intstr.FromInt32(1), "a")
			f.node("a", readyCond(true))
			f.bn("a", func(b *v1alpha1.BootcNode) { b.Status.Phase = v1alpha1.PhaseDraining })
			f.node("a", protect)
			f.c.Reboot("a", imgA, imgB)
			f.node("a", readyCond(false))
			if tc.rebooted {
				f.node("a", func(n *corev1.Node) { readyCond(true)(n); n.Status.NodeInfo.BootID = "boot-2" })
			}
			if tc.deleting {
				f.bn("a", func(b *v1alpha1.BootcNode) { b.DeletionTimestamp = &metav1.Time{Time: f.now} })
			}
			if !tc.marked {
				f.node("a", unmark)
			}
			f.c.KarpenterTrace("karpenter/disrupt", "node/a", map[string]any{"method": "emptiness", "reason": fakekarpenter.ReasonEmpty, "decision": "delete"}, f.now)
			f.want(scenario.InvNoReapWhileUpdating, tc.want, tc.name)
		})
	}
}

// A disruption Karpenter decided and then abandoned (its replacement
// went), or decided about a NodeClaim the node no longer has (a new one
// launched for it), is no decision of the node's later termination that
// someone else asked for (explorer seeds 111320 of
// cluster-nodepool-drift-mid-rollout, 177015 of boot-image-skew); one not
// abandoned still is.
func TestNoReapAbandonedDecisionNotBlamed(t *testing.T) {
	for _, how := range []string{"abandoned", "relaunched", ""} {
		abandoned := how != ""
		f := newFixture(t, nil, intstr.FromInt32(1), "a")
		f.c.KarpenterTrace("karpenter/disrupt", "node/a", map[string]any{"method": "drift", "reason": fakekarpenter.ReasonDrifted, "decision": "replace"}, f.now)
		switch how {
		case "abandoned":
			f.c.KarpenterTrace("karpenter/command-abandoned", "node/a", map[string]any{"method": "drift", "reason": "replacement deleted"}, f.now)
		case "relaunched":
			// Karpenter removed and installed again adopts the node with
			// a new NodeClaim (explorer seed 177015 of boot-image-skew).
			f.c.KarpenterTrace("karpenter/launched", "nodeclaim/a", map[string]any{"node": "a", "nodepool": "workers"}, f.now)
		}
		f.node("a", protect) // then node a gets its slot
		f.node("a", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: f.now} })
		f.c.KarpenterTrace("karpenter/tainted", "node/a", map[string]any{"taint": fakekarpenter.TaintDisrupted}, f.now)
		want := map[bool]int{true: 0, false: 1}[abandoned]
		f.want(scenario.InvNoReapWhileUpdating, want, fmt.Sprintf("termination of a node in a slot after a decision (%q)", how))
	}
}

// churnFixture is a Karpenter-managed pool of nodes a, b, c in NodePool
// workers (consolidateAfter 30s), pool p with postUpdateProtection pup.
func churnFixture(t *testing.T, pup time.Duration) *fixture {
	f := newFixture(t, nil, intstr.FromInt32(1), "a", "b", "c")
	f.setPool(func(p *v1alpha1.BootcNodePool) {
		p.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: pup}
	})
	np := &unstructured.Unstructured{}
	np.SetAPIVersion("karpenter.sh/v1")
	np.SetKind("NodePool")
	np.SetName("workers")
	_ = unstructured.SetNestedField(np.Object, "30s", "spec", "disruption", "consolidateAfter")
	f.c.Observe(apiserver.Event{Type: apiserver.Added, Object: np})
	for _, n := range []string{"a", "b", "c"} {
		f.node(n, func(n *corev1.Node) { n.Labels[fakekarpenter.LabelNodePool] = "workers" })
	}
	f.check(time.Second)
	return f
}

// update runs bootroll's slot on node from 1m: cordon and mark, drain
// its pod (by bootroll's eviction when byBootroll), reboot at 3m, release
// at 10m.
func (f *fixture) update(node string, byBootroll bool) { f.slot(node, byBootroll, true) }

// slot is update, with the reboot only when reboot is set (a drain
// abandoned without an update, e.g. when the pool image is set back).
func (f *fixture) slot(node string, byBootroll, reboot bool) {
	f.at(time.Minute)
	f.node(node, protect)
	p := f.webPod("w-"+node, node)
	f.at(2 * time.Minute)
	if byBootroll {
		f.evicted++
	}
	f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: p})
	f.check(2 * time.Minute)
	if reboot {
		f.at(3 * time.Minute)
		f.c.Reboot(node, imgA, imgB)
	}
	if f.deleteBootcNodeAt != 0 {
		f.at(f.deleteBootcNodeAt)
		f.bn(node, func(b *v1alpha1.BootcNode) { b.DeletionTimestamp = &metav1.Time{Time: f.now} })
	}
	f.at(10 * time.Minute)
	f.node(node, func(n *corev1.Node) {
		n.Spec.Unschedulable = false
		delete(n.Annotations, v1alpha1.AnnotationSlot)
	})
	f.check(10 * time.Minute)
}

func (f *fixture) disrupt(node, reason string, at time.Duration) {
	f.at(at)
	forceful := reason == fakekarpenter.ReasonExpired || reason == fakekarpenter.ReasonUnhealthy
	f.c.KarpenterTrace("karpenter/disrupt", "node/"+node, map[string]any{"method": "m", "reason": reason, "decision": "delete", "forceful": forceful}, f.now)
}

func TestNoChurnOnlyBootrollsChurn(t *testing.T) {
	// The last updated node, drained by bootroll and never refilled, is
	// consolidated after its 5m post-update protection: it was schedulable
	// and unprotected for consolidateAfter, Karpenter's own policy.
	f := churnFixture(t, 5*time.Minute)
	f.update("a", true)
	f.disrupt("a", fakekarpenter.ReasonEmpty, 15*time.Minute+30*time.Second)
	// Others' churn: a node an operator's scale-down emptied, drift of a
	// NodeClass change, repair of a crashed node, an expiry.
	f.disrupt("b", fakekarpenter.ReasonEmpty, 16*time.Minute)
	f.disrupt("c", fakekarpenter.ReasonDrifted, 16*time.Minute)
	f.want(scenario.InvNoChurn, 0, "consolidation and drift outside bootroll's protection")
	// A slot just given (BootcNode Draining) to a node bootroll has not
	// cordoned yet: Karpenter's drift of it is its own.
	f.bn("b", phase(v1alpha1.PhaseDraining))
	f.disrupt("b", fakekarpenter.ReasonDrifted, 17*time.Minute)
	f.want(scenario.InvNoChurn, 0, "drift of a node given a slot but not cordoned yet")
	f = churnFixture(t, 0)
	f.update("a", false) // emptied by a scale-down while in its slot, not by bootroll
	f.disrupt("a", fakekarpenter.ReasonEmpty, 10*time.Minute+10*time.Second)
	f.node("b", protect)
	f.disrupt("b", fakekarpenter.ReasonExpired, 11*time.Minute)
	f.disrupt("c", fakekarpenter.ReasonUnhealthy, 11*time.Minute)
	f.want(scenario.InvNoChurn, 0, "emptied by others, expiry, repair outside a slot")
	// Pods come back after the update (the protection ends with them, as
	// the API documents), then an operator's scale-down empties the node
	// and Karpenter consolidates it inside the 5m.
	f = churnFixture(t, 5*time.Minute)
	f.update("a", true)
	f.at(10*time.Minute + 5*time.Second)
	back := f.webPod("back", "a")
	f.at(11 * time.Minute)
	f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: back})
	f.disrupt("a", fakekarpenter.ReasonEmpty, 11*time.Minute+30*time.Second)
	f.want(scenario.InvNoChurn, 0, "refilled after the update, then emptied by a scale-down")
	// An admin deletes the BootcNode mid-slot: bootroll must give the
	// node back (cleanup), and Karpenter then consolidates it.
	f = churnFixture(t, 5*time.Minute)
	f.deleteBootcNodeAt = 5 * time.Minute
	f.update("a", true)
	f.disrupt("a", fakekarpenter.ReasonEmpty, 10*time.Minute+20*time.Second)
	f.want(scenario.InvNoChurn, 0, "consolidation of a node given back after its BootcNode was deleted")
	// Workload pods bound before the slot ends (an admin uncordoned the
	// node in its slot): the protection ends at the release, as the API
	// says, and drift a minute later is not bootroll's (explorer seed
	// 92198 of nodeclass-drift-mid-rollout).
	f = churnFixture(t, 5*time.Minute)
	f.at(time.Minute)
	f.node("a", protect)
	w := f.webPod("w-a", "a")
	f.at(2 * time.Minute)
	f.evicted++
	f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: w})
	f.check(2 * time.Minute)
	f.at(3 * time.Minute)
	f.c.Reboot("a", imgA, imgB)
	f.at(8 * time.Minute)
	f.webPod("early", "a")
	f.at(10 * time.Minute)
	f.node("a", func(n *corev1.Node) {
		n.Spec.Unschedulable = false
		delete(n.Annotations, v1alpha1.AnnotationSlot)
	})
	f.check(10 * time.Minute)
	f.disrupt("a", fakekarpenter.ReasonDrifted, 11*time.Minute)
	f.want(scenario.InvNoChurn, 0, "drift of a node that ran workloads when its slot ended")
	// A drain abandoned without an update: no post-update protection is
	// promised, so drift a minute later is the operator's.
	f = churnFixture(t, 5*time.Minute)
	f.slot("a", true, false)
	f.disrupt("a", fakekarpenter.ReasonDrifted, 11*time.Minute)
	f.want(scenario.InvNoChurn, 0, "drift after a drain abandoned without an update")

	// Bootroll's churn: disrupted in a slot, inside the post-update
	// protection, or consolidated on bootroll's drain before the node was
	// schedulable for consolidateAfter.
	f = churnFixture(t, 5*time.Minute)
	f.node("b", protect)
	f.disrupt("b", fakekarpenter.ReasonEmpty, 3*time.Minute)
	f.want(scenario.InvNoChurn, 1, "consolidation of a node in a slot")
	f.node("c", protect)
	f.disrupt("c", fakekarpenter.ReasonUnhealthy, 3*time.Minute)
	f.want(scenario.InvNoChurn, 2, "repair of a node in a slot")
	f.update("a", true)
	f.disrupt("a", fakekarpenter.ReasonDrifted, 12*time.Minute)
	f.want(scenario.InvNoChurn, 3, "drift inside the post-update protection")

	// An operator removes do-not-disrupt inside the post-update
	// protection: with bootroll's controller down from then to
	// Karpenter's decision, bootroll could not put it back (explorer seed
	// 118251 of cluster-crd-install-mid-rollout); up for
	// ProtectionReactBound or more since, it could have.
	for _, c := range []struct {
		name       string
		down, back time.Duration // controller down from 11m+down until 11m+back (0: stays up)
		want       int
	}{
		{"controller down from the removal to the decision", 13 * time.Millisecond, 0, 0},
		{"controller up all along", 0, 0, 1},
		{"controller back 10s before the decision", 5 * time.Second, 15 * time.Second, 1},
		{"controller back 5s before the decision", 2 * time.Second, 20 * time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := churnFixture(t, 5*time.Minute)
			f.update("a", true)
			f.at(11 * time.Minute)
			f.c.World().SetIntendedAnnotation("a", v1alpha1.KarpenterDoNotDisrupt, false, f.now)
			f.node("a", func(n *corev1.Node) { delete(n.Annotations, v1alpha1.KarpenterDoNotDisrupt) })
			if c.down > 0 {
				f.at(11*time.Minute + c.down)
				f.c.ControllerRunning(false)
			}
			if c.back > 0 {
				f.at(11*time.Minute + c.back)
				f.c.ControllerRunning(true)
			}
			f.disrupt("a", fakekarpenter.ReasonEmpty, 11*time.Minute+25*time.Second)
			f.want(scenario.InvNoChurn, c.want, c.name)
		})
	}

	f = churnFixture(t, time.Second)
	f.update("a", true)
	f.disrupt("a", fakekarpenter.ReasonEmpty, 10*time.Minute+25*time.Second)
	f.want(scenario.InvNoChurn, 1, "emptiness on bootroll's drain, 1s of protection")
	// The same after a drain abandoned without an update.
	f2 := churnFixture(t, 5*time.Minute)
	f2.slot("b", true, false)
	f2.disrupt("b", fakekarpenter.ReasonEmpty, 10*time.Minute+25*time.Second)
	f2.want(scenario.InvNoChurn, 1, "emptiness on bootroll's abandoned drain")
	// With a long consolidateAfter, a node idle and schedulable for most
	// of it (past RefillBound) is spare capacity, not bootroll's.
	f3 := churnFixture(t, 0)
	np := &unstructured.Unstructured{}
	np.SetAPIVersion("karpenter.sh/v1")
	np.SetKind("NodePool")
	np.SetName("workers")
	_ = unstructured.SetNestedField(np.Object, "1h", "spec", "disruption", "consolidateAfter")
	f3.c.Observe(apiserver.Event{Type: apiserver.Modified, Object: np})
	f3.update("a", true)
	f3.disrupt("a", fakekarpenter.ReasonEmpty, 10*time.Minute+RefillBound+time.Second)
	f3.want(scenario.InvNoChurn, 0, "idle past RefillBound under consolidateAfter 1h")
	f3.update("b", true)
	f3.disrupt("b", fakekarpenter.ReasonEmpty, 10*time.Minute+RefillBound-time.Second)
	f3.want(scenario.InvNoChurn, 1, "consolidated before RefillBound under consolidateAfter 1h")
	if vs := f.of(scenario.InvNoChurn); len(vs) != 1 || vs[0].Objects[0] != "Node/a" {
		t.Errorf("no-churn violations %v, want one of Node/a", vs)
	}
}

// TestRepairAfterOthersRemovedDoNotRepair: an operator removes
// do-not-repair from a node in its slot and Karpenter's repair poll
// follows. Karpenter repairs without a validation period, so a removal
// just before the poll cannot be answered (explorer seed 122293 of
// cluster-repair-during-slow-reboot: 3 ms); bootroll's controller running
// RepairReactBound or more since could have put it back, and the repair is
// its failure (no-reap-while-updating and no-churn). That bound runs
// again from the controller's last request an API fault failed (explorer
// seed 176043 of the 113126 regression: its attempts to put the
// annotation back failed on injected errors for 2.7 s of the 4 s).
func TestRepairAfterOthersRemovedDoNotRepair(t *testing.T) {
	for _, c := range []struct {
		name       string
		repair     time.Duration // after the removal at 5m
		down, back time.Duration // controller down from 5m+down until 5m+back (0: stays up)
		failed     time.Duration // a controller request failed on an API fault at 5m+failed (0: none)
		want       int
	}{
		{"repair 3ms after the removal", 3 * time.Millisecond, 0, 0, 0, 0},
		{"repair 1.5s after the removal", 1500 * time.Millisecond, 0, 0, 0, 0},
		{"repair 5s after the removal, controller up", 5 * time.Second, 0, 0, 0, 1},
		{"repair 10s after, controller down from the removal", 10 * time.Second, time.Millisecond, 0, 0, 0},
		{"repair 10s after, controller back 1s before", 10 * time.Second, time.Millisecond, 9 * time.Second, 0, 0},
		{"repair 10s after, controller back 5s before", 10 * time.Second, time.Millisecond, 5 * time.Second, 0, 1},
		{"removed before the slot, repair in it", 0, 0, 0, 0, 1},
		// Explorer seed 176043: the controller's attempts to put the
		// annotation back failed on injected API errors until 1.3 s
		// before the repair, 4 s after the removal.
		{"repair 4s after, a controller request failed 1.3s before", 4 * time.Second, 0, 0, 2700 * time.Millisecond, 0},
		{"repair 5s after, a controller request failed 3s before", 5 * time.Second, 0, 0, 2 * time.Second, 1},
		{"repair 5s after, a controller request failed before the removal", 5 * time.Second, 0, 0, -time.Second, 1},
		{"repair 10s after, request failed 1s before, controller down 1s-8s", 10 * time.Second, time.Second, 8 * time.Second, 9 * time.Second, 0},
		{"repair 10s after, request failed at 1s, controller down 2s-7s", 10 * time.Second, 2 * time.Second, 7 * time.Second, time.Second, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := churnFixture(t, 5*time.Minute)
			f.at(2 * time.Minute)
			removeAt := 5 * time.Minute
			if c.repair == 0 {
				// Removed a minute before bootroll took the node (and
				// added its own), repaired minutes later.
				removeAt, c.repair = time.Minute, 5*time.Minute
			}
			f.at(removeAt)
			f.c.World().SetIntendedAnnotation("c", v1alpha1.KarpenterDoNotRepair, false, f.now)
			f.at(2 * time.Minute)
			f.node("c", protect)
			f.bn("c", phase(v1alpha1.PhaseRebooting))
			f.at(removeAt)
			if removeAt > 2*time.Minute {
				f.node("c", func(n *corev1.Node) { delete(n.Annotations, v1alpha1.KarpenterDoNotRepair) })
			}
			if c.failed != 0 {
				f.c.ControllerRequestFailed(t0.Add(removeAt+c.failed), "")
			}
			if c.down > 0 {
				f.at(removeAt + c.down)
				f.c.ControllerRunning(false)
			}
			if c.back > 0 {
				f.at(removeAt + c.back)
				f.c.ControllerRunning(true)
			}
			f.disrupt("c", fakekarpenter.ReasonUnhealthy, removeAt+c.repair)
			f.c.KarpenterTrace("karpenter/tainted", "node/c", map[string]any{}, f.now)
			f.want(scenario.InvNoReapWhileUpdating, 2*c.want, c.name+" (the repair and its taint)")
			f.want(scenario.InvNoChurn, c.want, c.name)
		})
	}
}

// TestDisruptionInSlotAfterOthersRemovedDoNotDisrupt: an operator removes
// do-not-disrupt from a node bootroll holds in its slot (drained, so
// empty) and Karpenter's emptiness follows after its 15 s validation.
// With bootroll's controller down from the removal on, nothing could put
// the annotation back (explorer seed 134017 of
// cluster-post-update-emptiness-reaping: down for 1m49s); running
// ProtectionReactBound or more since, it could have, and the disruption
// is its failure (no-reap-while-updating and no-churn). A removal before
// bootroll took the node is no excuse: bootroll puts its own on.
func TestDisruptionInSlotAfterOthersRemovedDoNotDisrupt(t *testing.T) {
	for _, c := range []struct {
		name       string
		reason     string
		removeAt   time.Duration
		down, back time.Duration // controller down from removeAt+down until removeAt+back (0: stays up)
		failed     time.Duration // a controller request failed on an API fault at removeAt+failed (0: none)
		want       int
	}{
		{"controller down from the removal to the decision", fakekarpenter.ReasonEmpty, 5 * time.Minute, time.Millisecond, 0, 0, 0},
		{"drift, controller down from the removal", fakekarpenter.ReasonDrifted, 5 * time.Minute, time.Millisecond, 0, 0, 0},
		{"controller up all along", fakekarpenter.ReasonEmpty, 5 * time.Minute, 0, 0, 0, 1},
		{"controller up 5s after the removal, back 10s before the decision", fakekarpenter.ReasonEmpty, 5 * time.Minute, 5 * time.Second, 15 * time.Second, 0, 1},
		{"controller back 5s before the decision", fakekarpenter.ReasonEmpty, 5 * time.Minute, time.Millisecond, 20 * time.Second, 0, 0},
		{"removed before the slot, controller down at the decision", fakekarpenter.ReasonEmpty, time.Minute, 3*time.Minute + time.Millisecond, 0, 0, 1},
		// A failed request restarts only the repair's bound: Karpenter's
		// 15 s validation leaves room for the retries.
		{"controller up all along, a request failed 1s before the decision", fakekarpenter.ReasonEmpty, 5 * time.Minute, 0, 0, 24 * time.Second, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := churnFixture(t, 5*time.Minute)
			if c.failed != 0 {
				f.c.ControllerRequestFailed(t0.Add(c.removeAt+c.failed), "")
			}
			f.at(c.removeAt)
			if c.removeAt < 2*time.Minute {
				f.c.World().SetIntendedAnnotation("c", v1alpha1.KarpenterDoNotDisrupt, false, f.now)
			}
			f.at(2 * time.Minute)
			f.node("c", protect)
			f.bn("c", phase(v1alpha1.PhaseRebooting))
			if c.removeAt > 2*time.Minute {
				f.at(c.removeAt)
				f.c.World().SetIntendedAnnotation("c", v1alpha1.KarpenterDoNotDisrupt, false, f.now)
				f.node("c", func(n *corev1.Node) { delete(n.Annotations, v1alpha1.KarpenterDoNotDisrupt) })
			}
			if c.down > 0 {
				f.at(c.removeAt + c.down)
				f.c.ControllerRunning(false)
			}
			if c.back > 0 {
				f.at(c.removeAt + c.back)
				f.c.ControllerRunning(true)
			}
			f.disrupt("c", c.reason, c.removeAt+max(25*time.Second, c.down+time.Second))
			f.c.KarpenterTrace("karpenter/tainted", "node/c", map[string]any{}, f.now)
			f.want(scenario.InvNoReapWhileUpdating, 2*c.want, c.name+" (the disruption and its taint)")
			f.want(scenario.InvNoChurn, c.want, c.name)
		})
	}
}

// TestVetoLiftTimedFromTheControllersCache: under a cache model (the
// twin), the controller's reaction bound to someone else's removal of a
// veto runs from when its cache first held the write that removed it, not
// from the write (explorer seed 151388 of post-update-emptiness-reaping,
// profile stale: the removal of do-not-disrupt at 9m00s reached the
// controller's cache at 9m21.9s, after Karpenter's emptiness at 9m15s).
// A cache that held it long enough before the disruption leaves it the
// controller's failure; without a cache model the write's time counts.
func TestVetoLiftTimedFromTheControllersCache(t *testing.T) {
	for _, c := range []struct {
		name    string
		veto    string
		reason  string
		deliver []time.Duration // deliveries of the removal's write (RV 101) after it, in order (0 s: the RV before it)
		react   time.Duration   // the disruption, after the removal
		model   bool
		want    int
	}{
		{"emptiness 15s after, the cache 21.9s behind", v1alpha1.KarpenterDoNotDisrupt, fakekarpenter.ReasonEmpty, []time.Duration{21900 * time.Millisecond}, 15 * time.Second, true, 0},
		{"emptiness 25s after, the cache 20s behind", v1alpha1.KarpenterDoNotDisrupt, fakekarpenter.ReasonEmpty, []time.Duration{20 * time.Second}, 25 * time.Second, true, 0},
		{"emptiness 25s after, the cache 2s behind", v1alpha1.KarpenterDoNotDisrupt, fakekarpenter.ReasonEmpty, []time.Duration{2 * time.Second}, 25 * time.Second, true, 1},
		{"an older write delivered first does not count", v1alpha1.KarpenterDoNotDisrupt, fakekarpenter.ReasonEmpty, []time.Duration{0, 20 * time.Second}, 25 * time.Second, true, 0},
		{"never reached the cache", v1alpha1.KarpenterDoNotDisrupt, fakekarpenter.ReasonEmpty, nil, time.Minute, true, 0},
		{"no cache model: from the write", v1alpha1.KarpenterDoNotDisrupt, fakekarpenter.ReasonEmpty, nil, 25 * time.Second, false, 1},
		{"repair 10s after, the cache 8.5s behind", v1alpha1.KarpenterDoNotRepair, fakekarpenter.ReasonUnhealthy, []time.Duration{8500 * time.Millisecond}, 10 * time.Second, true, 0},
		{"repair 10s after, the cache 1s behind", v1alpha1.KarpenterDoNotRepair, fakekarpenter.ReasonUnhealthy, []time.Duration{time.Second}, 10 * time.Second, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := churnFixture(t, 5*time.Minute)
			f.at(2 * time.Minute)
			f.node("c", func(n *corev1.Node) { protect(n); n.ResourceVersion = "100" })
			f.bn("c", phase(v1alpha1.PhaseRebooting))
			if c.model {
				f.c.World().ControllerCacheNode(f.nodes["c"].DeepCopy(), f.now)
			}
			removeAt := 5 * time.Minute
			f.at(removeAt)
			f.c.World().SetIntendedAnnotation("c", c.veto, false, f.now)
			f.node("c", func(n *corev1.Node) { delete(n.Annotations, c.veto); n.ResourceVersion = "101" })
			for _, d := range c.deliver {
				n := f.nodes["c"].DeepCopy()
				if d == 0 {
					n.ResourceVersion = "100"
				}
				f.c.World().ControllerCacheNode(n, t0.Add(removeAt+d))
			}
			f.disrupt("c", c.reason, removeAt+c.react)
			f.c.KarpenterTrace("karpenter/tainted", "node/c", map[string]any{}, f.now)
			f.want(scenario.InvNoReapWhileUpdating, 2*c.want, c.name+" (the disruption and its taint)")
			f.want(scenario.InvNoChurn, c.want, c.name)
		})
	}
}

// orderAt gives node a's record a boot order for image (a rollback's:
// off it) with the time at, withdrawn or not, written at that time.
func orderAt(image string, at time.Duration, rollback, withdrawn bool) func(f *fixture) {
	return func(f *fixture) {
		f.at(at)
		f.bn("a", func(b *v1alpha1.BootcNode) {
			b.Spec.DesiredImage = image
			b.Spec.BootOrder = &v1alpha1.BootOrder{Image: image, Rollback: rollback, At: metav1.Time{Time: f.now}, Withdrawn: withdrawn}
		})
	}
}

// TestNoReapNodeGivenBackMidReboot: bootroll gives node a back (marker
// gone, record Pending) at 3m while it is still down in the reboot its
// daemon asked for at 1m, and Karpenter repairs or disrupts it. The node
// holds its slot until it is back or its pool's healthTimeout has passed
// since the boot order the reboot carries out (the request without one:
// askedSince), whatever its record says (explorer seed 176610 of
// cluster-repair-during-slow-reboot: the release settled a voided order
// and gave kp-0 back down; the judge before read Pending and was silent).
// A reboot bootroll did not ask for (a crash), a node back from it, a
// repair after healthTimeout, an expiry (the forceful exception), a Node
// made again under the name, a repair just after someone else lifted
// do-not-repair, and one past cleanup's cap after the record's or the
// pool's deletion are not caught.
func TestNoReapNodeGivenBackMidReboot(t *testing.T) {
	deletePool := func(f *fixture) {
		f.setPool(func(p *v1alpha1.BootcNodePool) { p.DeletionTimestamp = &metav1.Time{Time: f.now} })
	}
	for _, c := range []struct {
		name string
		// healthTimeout of the pool (0: the API's default, 15m).
		healthTimeout time.Duration
		crash         bool // the node goes down without bootroll's reboot request
		back          bool // the node is Ready on a new boot at 4m (down again after)
		deleteRecord  bool // the record is deleted at 30s, before the reboot request
		// order, when set, gives the record its boot order before the
		// reboot request at 1m (none: the hold counts from the request).
		order         func(f *fixture)
		reason        string
		prep          func(f *fixture) // after the give-back
		at            time.Duration    // of the repair or disruption
		want, excused int
	}{
		// A repair is two events (repair, then the disruption), each
		// judged.
		{name: "repair mid-reboot after the give-back", at: 11 * time.Minute, want: 2},
		{name: "emptiness mid-reboot after the give-back", reason: fakekarpenter.ReasonEmpty, at: 5 * time.Minute, want: 1},
		{name: "repair after the default healthTimeout", at: 16*time.Minute + time.Second},
		{name: "repair just before the default healthTimeout", at: 16*time.Minute - time.Second, want: 2},
		{name: "repair after the pool's healthTimeout of 5m", healthTimeout: 5 * time.Minute, at: 7 * time.Minute},
		{name: "repair within the pool's healthTimeout of 30m", healthTimeout: 30 * time.Minute, at: 20 * time.Minute, want: 2},
		{name: "healthTimeout shortened to 5m after the request", prep: func(f *fixture) {
			f.setPool(func(p *v1alpha1.BootcNodePool) { p.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute} })
		}, at: 7 * time.Minute},
		{name: "node back from the reboot", back: true, at: 11 * time.Minute},
		{name: "a crash, no reboot bootroll asked for", crash: true, at: 11 * time.Minute},
		{name: "expiry mid-reboot", reason: fakekarpenter.ReasonExpired, at: 11 * time.Minute, excused: 1},
		{name: "Node made again under its name", prep: func(f *fixture) {
			f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: f.nodes["a"].DeepCopy()})
			f.c.Observe(apiserver.Event{Type: apiserver.Added, Object: f.nodes["a"].DeepCopy()})
		}, at: 11 * time.Minute},
		{name: "repair 3ms after someone else lifted do-not-repair", prep: func(f *fixture) {
			f.at(11*time.Minute - 3*time.Millisecond)
			f.node("a", func(n *corev1.Node) { n.Annotations[v1alpha1.KarpenterDoNotRepair] = "true" })
			f.c.World().SetIntendedAnnotation("a", v1alpha1.KarpenterDoNotRepair, false, f.now)
			f.node("a", func(n *corev1.Node) { delete(n.Annotations, v1alpha1.KarpenterDoNotRepair) })
		}, at: 11 * time.Minute},
		{name: "record deleted at 30s, reboot at 1m, repair past the cleanup cap", deleteRecord: true, at: 15*time.Minute + 45*time.Second},
		{name: "record deleted at 30s, reboot at 1m, repair within the cleanup cap", deleteRecord: true, at: 15*time.Minute + 15*time.Second, want: 2},
		{name: "pool deleted at 3m, healthTimeout 40m, repair after it", healthTimeout: 40 * time.Minute, prep: deletePool, at: 41*time.Minute + time.Second},
		{name: "pool deleted at 3m, healthTimeout 40m, repair within it", healthTimeout: 40 * time.Minute, prep: deletePool, at: 40 * time.Minute, want: 2},
		{name: "pool gone at 3m, healthTimeout 40m, repair within it", healthTimeout: 40 * time.Minute, prep: func(f *fixture) {
			deletePool(f)
			f.c.Observe(apiserver.Event{Type: apiserver.Deleted, Object: f.pool.DeepCopy()})
		}, at: 40 * time.Minute, want: 2},
		// The hold counts from the boot order the reboot carries out: the
		// daemon's delay in acting on it counts against healthTimeout
		// (explorer seed 176809 of cluster-repair-during-slow-reboot:
		// ordered at 20 s, asked at 45 s, given back at 30m20s).
		{name: "ordered at 30s, asked at 1m, repair past healthTimeout from the order", order: orderAt(imgB, 30*time.Second, false, false), at: 15*time.Minute + 31*time.Second},
		{name: "ordered at 30.9s (stored 30s), asked at 1m, repair 30.5s past the 15m", order: orderAt(imgB, 30900*time.Millisecond, false, false), at: 15*time.Minute + 30500*time.Millisecond},
		{name: "ordered at 30s, asked at 1m, repair just before healthTimeout from the order", order: orderAt(imgB, 30*time.Second, false, false), at: 15*time.Minute + 29*time.Second, want: 2},
		{name: "order withdrawn before the daemon saw it, repair past healthTimeout from it", order: orderAt(imgB, 30*time.Second, false, true), at: 15*time.Minute + 31*time.Second},
		{name: "rollback order off the image left, repair past healthTimeout from it", order: orderAt(imgA, 30*time.Second, true, false), at: 15*time.Minute + 31*time.Second},
		{name: "order for another image, repair past healthTimeout from it", order: orderAt(imgA, 30*time.Second, false, false), at: 15*time.Minute + 31*time.Second, want: 2},
		{name: "rollback order off the image the reboot goes into, repair past healthTimeout from it", order: orderAt(imgB, 30*time.Second, true, false), at: 15*time.Minute + 31*time.Second, want: 2},
		{name: "order's time from before the slot marker went on again", order: func(f *fixture) {
			orderAt(imgB, 10*time.Second, false, false)(f)
			f.at(20 * time.Second)
			f.node("a", unmark)
			f.node("a", protect)
		}, at: 15*time.Minute + 31*time.Second, want: 2},
		{name: "order's time after the request: it counts from the request", order: func(f *fixture) {
			orderAt(imgB, 2*time.Minute, false, false)(f)
		}, at: 16*time.Minute + time.Second},
		{name: "no boot order on the record: it counts from the request", at: 15*time.Minute + 31*time.Second, want: 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, nil, intstr.FromInt32(1), "a")
			if c.healthTimeout > 0 {
				f.setPool(func(p *v1alpha1.BootcNodePool) { p.Spec.HealthTimeout = &metav1.Duration{Duration: c.healthTimeout} })
			}
			f.node("a", func(n *corev1.Node) { n.Status.NodeInfo.BootID = "boot-1" })
			f.slots(imgB, "a")
			f.bn("a", phase(v1alpha1.PhaseDraining))
			f.node("a", protect)
			if c.deleteRecord {
				// Its daemon read the order before the withdrawal.
				f.at(30 * time.Second)
				f.bn("a", func(b *v1alpha1.BootcNode) { b.DeletionTimestamp = &metav1.Time{Time: f.now} })
			}
			if c.order != nil {
				c.order(f)
			}
			f.at(time.Minute)
			if !c.crash {
				f.c.Reboot("a", imgA, imgB)
				f.bn("a", phase(v1alpha1.PhaseRebooting))
			}
			f.node("a", readyCond(false))
			f.at(3 * time.Minute)
			f.bn("a", phase(v1alpha1.PhasePending))
			f.node("a", func(n *corev1.Node) {
				n.Spec.Unschedulable = false
				delete(n.Annotations, v1alpha1.AnnotationSlot)
				delete(n.Annotations, v1alpha1.KarpenterDoNotRepair)
				delete(n.Annotations, v1alpha1.KarpenterDoNotDisrupt)
			})
			f.slots(imgB)
			if c.prep != nil {
				c.prep(f)
			}
			if c.back {
				f.at(4 * time.Minute)
				f.node("a", func(n *corev1.Node) { readyCond(true)(n); n.Status.NodeInfo.BootID = "boot-2" })
				f.node("a", readyCond(false)) // broken again later: not bootroll's reboot
			}
			reason := c.reason
			if reason == "" {
				reason = fakekarpenter.ReasonUnhealthy
			}
			f.at(c.at)
			if reason == fakekarpenter.ReasonUnhealthy {
				f.c.KarpenterTrace("karpenter/repair", "node/a", map[string]any{"profile": "v1.15", "unhealthyFor": "10m"}, f.now)
			}
			f.disrupt("a", reason, c.at)
			f.want(scenario.InvNoReapWhileUpdating, c.want, c.name)
			if got := len(f.c.Exceptions()); got != c.excused {
				t.Errorf("%s: %d forceful exceptions, want %d", c.name, got, c.excused)
			}
		})
	}
}
