package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// adminCordonFixture is a node n of pool p in its slot, cordoned by
// bootroll over an admin's earlier cordon (priorUnschedulable true), that
// an admin has since uncordoned (kubectl uncordon keeps the slot marker)
// when uncordoned is set.
func adminCordonFixture(t *testing.T, phase v1alpha1.NodePhase, uncordoned bool) (client.Client, *Reconciler) {
	t.Helper()
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"},
		Annotations: map[string]string{v1alpha1.AnnotationSlot: "p"}}}
	node.Spec.Unschedulable = !uncordoned
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	bn.Spec.Pool = "p"
	bn.Spec.DesiredImage = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	bn.Status.Phase = phase
	ro := &bn.Status.Rollout
	ro.TargetImage = bn.Spec.DesiredImage
	ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(true)
	ro.DrainStartedAt = &metav1.Time{Time: time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)}
	cl := fakeapi.Client(t, pool, bn, node)
	return cl, NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 5, 10, 1, 0, 0, time.UTC))})
}

// getNode returns the BootcNode and the Node n.
func getNode(ctx context.Context, t *testing.T, cl client.Client) (*v1alpha1.BootcNode, *corev1.Node) {
	t.Helper()
	var bn v1alpha1.BootcNode
	var n corev1.Node
	if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &bn); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &n); err != nil {
		t.Fatal(err)
	}
	return &bn, &n
}

// TestAdminUncordonInTheSlotIsKept: an admin's kubectl uncordon of a node
// in its slot replaces the cordon bootroll found before the slot (issue 11,
// *.no-leaked-cordon reproducers: bootroll restored the stale
// priorUnschedulable and left the node cordoned for good). After a reboot
// the node is given back uncordoned; in a drain bootroll cordons it again
// until its update and records that it gives it back uncordoned. A node
// still cordoned at the end keeps the admin's earlier cordon.
func TestAdminUncordonInTheSlotIsKept(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name       string
		uncordoned bool
		want       bool
	}{{"uncordoned by the admin in the slot", true, false}, {"still cordoned", false, true}} {
		t.Run("finish/"+c.name, func(t *testing.T) {
			cl, r := adminCordonFixture(t, v1alpha1.PhaseVerifying, c.uncordoned)
			bn, n := getNode(ctx, t, cl)
			var pool v1alpha1.BootcNodePool
			if err := cl.Get(ctx, types.NamespacedName{Name: "p"}, &pool); err != nil {
				t.Fatal(err)
			}
			s := &nodeStep{orig: recordOf(bn), bn: bn, node: n, pool: &pool, now: r.clock.Now()}
			if err := r.finish(ctx, s, v1alpha1.PhaseUpdated, "Updated", "test", true); err != nil {
				t.Fatal(err)
			}
			_, got := getNode(ctx, t, cl)
			if got.Spec.Unschedulable != c.want {
				t.Errorf("unschedulable after the slot = %v, want %v", got.Spec.Unschedulable, c.want)
			}
			if _, marked := got.Annotations[v1alpha1.AnnotationSlot]; marked {
				t.Error("slot marker left")
			}
		})
	}
	t.Run("drain", func(t *testing.T) {
		cl, r := adminCordonFixture(t, v1alpha1.PhaseDraining, true)
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
			t.Fatal(err)
		}
		checkRecordoned(t, cl)
	})
}

// TestUncordonedBeforeRebootDrainsAgain: the daemon holds a boot order back
// because an admin uncordoned the node after its drain and before the
// daemon asked the host to reboot (it reports Staged and recorded no
// reboot). The node reconciler withdraws that order and drains again
// (cordoned, the uncordon recorded as the state to give back) before it
// orders the reboot afresh; with the order left standing, the slot waited
// for healthTimeout and failed a node that never rebooted (explorer seed
// 115028 of cluster-pool-deleted-mid-rollout).
func TestUncordonedBeforeRebootDrainsAgain(t *testing.T) {
	ctx := context.Background()
	cl, r := adminCordonFixture(t, v1alpha1.PhaseDraining, true)
	bn, _ := getNode(ctx, t, cl)
	ordered := metav1.Time{Time: time.Date(2026, 1, 5, 10, 0, 30, 0, time.UTC)}
	bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: bn.Spec.DesiredImage, At: ordered}
	if err := cl.Update(ctx, bn); err != nil {
		t.Fatal(err)
	}
	bn, _ = getNode(ctx, t, cl)
	bn.Status.Daemon = v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged, BootID: "boot-1", ObservedGeneration: bn.Generation,
		LastError: "waiting to reboot into " + bn.Spec.DesiredImage + ": its Node is not cordoned (spec.unschedulable false)"}
	if err := cl.Status().Update(ctx, bn); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	bn = checkRecordoned(t, cl)
	now := r.clock.Now()
	if ds := bn.Status.Rollout.DrainStartedAt; ds == nil || !ds.Time.Equal(now) {
		t.Errorf("drainStartedAt = %v, want the drain started again at %v", ds, now)
	}
	if o := bn.Spec.BootOrder; o == nil || o.Withdrawn || !o.At.Time.Equal(now) {
		t.Errorf("boot order = %+v, want one given afresh at %v after the node (empty) was drained again", o, now)
	}
}

// checkRecordoned checks that node n, uncordoned by an admin in its slot,
// is cordoned again under the slot marker and that its record gives it
// back uncordoned (priorUnschedulable false); it returns the record.
func checkRecordoned(t *testing.T, cl client.Client) *v1alpha1.BootcNode {
	t.Helper()
	bn, n := getNode(context.Background(), t, cl)
	if !n.Spec.Unschedulable || n.Annotations[v1alpha1.AnnotationSlot] != "p" {
		t.Errorf("node not cordoned again: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if p := bn.Status.Rollout.PriorUnschedulable; p == nil || *p {
		t.Errorf("priorUnschedulable = %v (set %v), want false (the admin's uncordon)", ptr.Deref(p, false), p != nil)
	}
	return bn
}

// TestHaltedPoolTakesBackAHalfTakenSlot: a take-up that stopped part way
// (its cordon recorded, the Node cordoned, marked and protected, the
// record still Pending) on a pool that has halted on the slot's image
// since gives the slot back: the Node is uncordoned and unmarked, the
// record no longer cordoned (explorer seed 173151 of
// nodeclass-drift-mid-rollout: the controller crashed after the take-up's
// NodeClaim patch, the pool halted, and the node stayed cordoned and
// protected for good). On a pool that has not halted the take-up goes on.
func TestHaltedPoolTakesBackAHalfTakenSlot(t *testing.T) {
	ctx := context.Background()
	const image = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	now := time.Date(2026, 1, 5, 10, 1, 0, 0, time.UTC)
	for _, halted := range []bool{true, false} {
		t.Run(map[bool]string{true: "halted", false: "not halted"}[halted], func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = image
			pool.Status.TargetImage = image
			pool.Status.Slots = []v1alpha1.Slot{{Node: "n", Image: image, Since: metav1.NewTime(now.Add(-20 * time.Second))}}
			if halted {
				pool.Status.Halt = &v1alpha1.HaltRecord{Image: image, Since: metav1.NewTime(now.Add(-10 * time.Second))}
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"},
				Annotations: map[string]string{v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true"}}}
			node.Spec.Unschedulable = true
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Spec.DesiredImage = image
			bn.Status.Phase = v1alpha1.PhasePending
			bn.Status.Staged = &v1alpha1.HostImage{Image: image, Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}
			ro := &bn.Status.Rollout
			ro.TargetImage = image
			ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(false)
			ro.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			ro.DrainStartedAt = &metav1.Time{Time: now.Add(-20 * time.Second)}
			cl := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now)})
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
				t.Fatal(err)
			}
			gotBN, gotNode := getNode(ctx, t, cl)
			_, marked := gotNode.Annotations[v1alpha1.AnnotationSlot]
			_, dnd := gotNode.Annotations[v1alpha1.KarpenterDoNotDisrupt]
			if halted {
				if gotNode.Spec.Unschedulable || marked || dnd || gotBN.Status.Rollout.Cordoned {
					t.Fatalf("halted pool: Node unschedulable %v marked %v do-not-disrupt %v, record cordoned %v; want the slot given back",
						gotNode.Spec.Unschedulable, marked, dnd, gotBN.Status.Rollout.Cordoned)
				}
				return
			}
			if !gotNode.Spec.Unschedulable || !marked || gotBN.Status.Phase != v1alpha1.PhaseDraining {
				t.Fatalf("pool not halted: Node unschedulable %v marked %v, record %s; want the take-up to go on to Draining",
					gotNode.Spec.Unschedulable, marked, gotBN.Status.Phase)
			}
		})
	}
}

// TestUncordonedBeforeTheDaemonSawTheOrderDrainsAgain: an admin uncordons
// a node after its drain and boot order, while its daemon is down and has
// not seen the order (status.daemon.observedGeneration behind), and a pod
// lands on it. The order must not stand on the drain that no longer holds:
// the node reconciler withdraws it and drains again (cordoned, the pod
// evicted) before it orders the reboot afresh. Left standing, the daemon
// back from its crash found the Node cordoned again by the admin and
// rebooted it with the pod bound (explorer seed 176127 of the 94277
// regression of cluster-karpenter-rollout-2).
func TestUncordonedBeforeTheDaemonSawTheOrderDrainsAgain(t *testing.T) {
	ctx := context.Background()
	cl, r := adminCordonFixture(t, v1alpha1.PhaseDraining, true)
	bn, _ := getNode(ctx, t, cl)
	bn.Status.Daemon = v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged, BootID: "boot-1", ObservedGeneration: bn.Generation}
	if err := cl.Status().Update(ctx, bn); err != nil {
		t.Fatal(err)
	}
	bn, _ = getNode(ctx, t, cl)
	ordered := metav1.Time{Time: time.Date(2026, 1, 5, 10, 0, 30, 0, time.UTC)}
	bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: bn.Spec.DesiredImage, At: ordered}
	bn.Generation = bn.Status.Daemon.ObservedGeneration + 1 // the fake client keeps no generation
	if err := cl.Update(ctx, bn); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if err := cl.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if bn, _ = getNode(ctx, t, cl); bn.Status.Daemon.ObservedGeneration >= bn.Generation {
		t.Fatalf("fixture: the daemon has seen generation %d of %d", bn.Status.Daemon.ObservedGeneration, bn.Generation)
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	bn, n := getNode(ctx, t, cl)
	if !n.Spec.Unschedulable || n.Annotations[v1alpha1.AnnotationSlot] != "p" {
		t.Errorf("node not cordoned again: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if p := bn.Status.Rollout.PriorUnschedulable; p == nil || *p {
		t.Errorf("priorUnschedulable = %v (set %v), want false (the admin's uncordon)", ptr.Deref(p, false), p != nil)
	}
	var left corev1.Pod
	podLeft := cl.Get(ctx, client.ObjectKeyFromObject(pod), &left) == nil
	o := bn.Spec.Order()
	if o != nil && o.At.Time.Equal(ordered.Time) {
		t.Errorf("boot order given at %v still stands on the node uncordoned since (pod left: %v)", o.At, podLeft)
	}
	if o != nil && podLeft {
		t.Errorf("boot order %+v stands with pod %s still bound to the node", o, pod.Name)
	}
	if now := r.clock.Now(); !podLeft && (o == nil || !o.At.Time.Equal(now)) {
		t.Errorf("boot order = %+v, want one given afresh at %v after the node was drained again", o, now)
	}
}
