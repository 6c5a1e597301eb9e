package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A pool whose drains PodDisruptionBudgets hold up says so in Degraded
// (DrainsBlocked), naming the nodes and what their records say; a drain
// under way or a node that waits for anything else is no such report.
func TestDrainsBlockedIsReported(t *testing.T) {
	row := func(name string, phase v1alpha1.NodePhase, reason, msg string) poolRow {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		bn.Status.Phase = phase
		bn.Status.Rollout.Reason, bn.Status.Rollout.Message = reason, msg
		return poolRow{name: name, bn: bn, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, rowFacts: rowFacts{phase: phase}}
	}
	rows := []poolRow{
		row("a", v1alpha1.PhaseDraining, "DrainBlocked", "eviction refused by a PodDisruptionBudget: default/web-1"),
		row("b", v1alpha1.PhasePending, "DrainTimeout", "drain did not finish in 10m0s"),
		row("c", v1alpha1.PhaseDraining, "SlotGranted", "reboot slot 1/2"),
		row("d", v1alpha1.PhaseStaged, "", ""),
	}
	got := drainsBlocked(rows)
	if len(got) != 2 || !strings.HasPrefix(got[0], "a (eviction refused") || !strings.HasPrefix(got[1], "b (drain did not finish") {
		t.Fatalf("drainsBlocked = %q, want a and b with their messages", got)
	}

	r := &PoolReconciler{}
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	r.conditions(pool, nil, nil, nil, got, false, true, now)
	c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDrainsBlocked || !strings.Contains(c.Message, "a (eviction refused") {
		t.Errorf("Degraded = %+v, want True/DrainsBlocked naming node a", c)
	}
	r.conditions(pool, nil, nil, nil, drainsBlocked(rows[2:]), false, true, now)
	if c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v with no drain held up, want False", c)
	}
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// A record whose node left the pool keeps its slot while the grant is
// fresh and the pool's cache does not show it on the record yet (issue 11,
// node-relabelled-out-mid-drain.max-unavailable.seed2008: the record was
// deleted, its slot given to the next node while the node reconciler
// drained the first), but not past grantSettle.
func TestSlotGrantedToALeavingNode(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	img := "repo@sha256:" + zeros(64)
	bn.Spec.DesiredImage = img
	bn.Status.Staged = &v1alpha1.HostImage{Digest: "sha256:" + zeros(64)} // staged, as the pool reads the report
	bn.Status.Rollout.TargetImage = img
	bn.Status.Rollout.PhaseSince = &metav1.Time{Time: now.Add(-time.Hour)}
	slot := func(node string, ago time.Duration) []v1alpha1.Slot {
		return []v1alpha1.Slot{{Node: node, Image: img, Since: metav1.NewTime(now.Add(-ago))}}
	}
	for _, c := range []struct {
		name  string
		slots []v1alpha1.Slot
		want  bool
	}{
		{"fresh grant", slot("a", 10*time.Second), true},
		{"grant of another node", slot("b", 10*time.Second), false},
		{"grant older than grantSettle", slot("a", grantSettle+time.Second), false},
	} {
		if got := slotGranted(c.slots, bn, now); got != c.want {
			t.Errorf("%s: slotGranted = %v, want %v", c.name, got, c.want)
		}
	}
	// A record that entered its slot and left it again (its phase moved
	// after the grant) was told: the slot is not kept for it.
	left := bn.DeepCopy()
	left.Status.Rollout.PhaseSince = &metav1.Time{Time: now.Add(-5 * time.Second)}
	if slotGranted(slot("a", 10*time.Second), left, now) {
		t.Error("a record whose phase moved after the grant: slotGranted = true, want false")
	}
}

// A karpenter.sh/disrupted taint blocks a slot only on a node a NodeClaim
// owns: one Karpenter no longer owns (Karpenter removed mid-disruption)
// keeps a stale taint that must not defer its update for good (issue 11,
// nodeclass-drift-mid-rollout.converges.seed2052).
func TestSlotBlockerIgnoresAStaleDisruptedTaint(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	tainted := []corev1.Taint{{Key: v1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule}}
	orphan := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: corev1.NodeSpec{Taints: tainted}, Status: corev1.NodeStatus{Conditions: ready}}
	owned := orphan.DeepCopy()
	owned.Name = "owned"
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: NodeClaimGVK.GroupVersion().String(), Kind: "NodeClaim", Name: "claim-1", UID: "u1"}}
	claim := &unstructured.Unstructured{}
	claim.SetGroupVersionKind(NodeClaimGVK)
	claim.SetName("claim-1")
	cl := fakeClient(t, orphan, owned, claim)
	for _, c := range []struct {
		node    *corev1.Node
		blocked bool
	}{{orphan, false}, {owned, true}} {
		why, err := SlotBlocker(context.Background(), cl, cl.RESTMapper(), c.node, false)
		if err != nil {
			t.Fatal(err)
		}
		if (why != "") != c.blocked {
			t.Errorf("%s: SlotBlocker = %q, want blocked %v", c.node.Name, why, c.blocked)
		}
	}
}
