package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestRetargetKeepsTheSlotOfANodeInItsReboot: a record in its slot, drained
// again (its order for v2 withdrawn) after the daemon asked for the reboot
// into v2, and retargeted back to v2 while the node is still down in that
// reboot, keeps its slot and its cordon, and is ordered again with the
// time of the order that reboot carries out. Before, the retarget
// abandoned the "drain" and gave the node back down, its protection ended
// 5m later and Karpenter repaired it; and an order given again in a later
// drain of the slot took the time now, so that the finalizer of its
// record, deleted later, did not find the reboot and lost the failed boot
// (explorer seed 176602 of cluster-repair-during-slow-reboot: kp-0 granted
// its slot at 30 s, ordered at 57 s, rebooting from 1m02s for 12m,
// retargeted to v1 at 3m19s and to v2 at 5m11s). A reboot asked for
// before the slot, or one the daemon has reported from, keeps the old
// rule: the drain is abandoned.
func TestRetargetKeepsTheSlotOfANodeInItsReboot(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	granted, ordered, rebooted := t0.Add(30*time.Second), t0.Add(57*time.Second), t0.Add(57*time.Second+290*time.Millisecond)
	drainedAgain, now := t0.Add(3*time.Minute+19*time.Second), t0.Add(5*time.Minute+11*time.Second)
	for _, c := range []struct {
		name      string
		rebooted  time.Time // status.daemon.lastReboot.at
		boot      string    // the boot the daemon reports from (the reboot left boot-1)
		keep      bool
		wantOrder time.Time // the standing order's time, when kept
	}{
		{"down in the slot's reboot", rebooted, "boot-1", true, ordered},
		{"the reboot was asked for before the slot", t0.Add(10 * time.Second), "boot-1", false, time.Time{}},
		{"the daemon reported from the boot after it", rebooted, "boot-2", false, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{v1alpha1.Finalizer}}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = v1alpha1.ImageReference(v2)
			pool.Spec.HealthTimeout = &metav1.Duration{Duration: 30 * time.Minute}
			pool.Status.TargetImage = v2
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", v2
			bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2, At: metav1.NewTime(ordered), Withdrawn: true}
			bn.Status.Phase = v1alpha1.PhaseDraining
			ro := &bn.Status.Rollout
			ro.TargetImage, ro.Cordoned, ro.PriorUnschedulable = v1, true, new(bool)
			ro.SlotGrantedAt, ro.DrainStartedAt = &metav1.Time{Time: granted}, &metav1.Time{Time: drainedAgain}
			ro.PhaseSince = &metav1.Time{Time: granted}
			d := &bn.Status.Daemon
			d.Phase, d.BootID = v1alpha1.DaemonRebooting, c.boot
			d.LastReboot = &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", At: metav1.NewTime(c.rebooted)}
			bn.Status.Booted = &v1alpha1.HostImage{Image: v1, Digest: v1[len("registry.example/os@"):]}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"},
				Annotations: map[string]string{v1alpha1.AnnotationSlot: "p"}}}
			node.Spec.Unschedulable = true
			node.Status.NodeInfo.BootID = "boot-1"
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
			api := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(api, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: api})
			var cur v1alpha1.BootcNode
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			s := &nodeStep{orig: recordOf(&cur), bn: cur.DeepCopy(), node: node, pool: pool, now: now}
			if _, err := r.step(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			var n corev1.Node
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &n); err != nil {
				t.Fatal(err)
			}
			kept := cur.Status.Phase == v1alpha1.PhaseDraining && cur.Status.Rollout.Cordoned && n.Spec.Unschedulable
			if kept != c.keep {
				t.Fatalf("kept in its slot %v (phase %s, cordoned %v, Node unschedulable %v: %s), want %v",
					kept, cur.Status.Phase, cur.Status.Rollout.Cordoned, n.Spec.Unschedulable, cur.Status.Rollout.Message, c.keep)
			}
			if !c.keep {
				return
			}
			o := cur.Spec.Order()
			if o == nil {
				t.Fatalf("no boot order stands: %+v", cur.Spec.BootOrder)
			}
			if !o.At.Time.Equal(c.wantOrder) {
				t.Errorf("ordered again at %s, want %s", o.At.Time.Sub(t0), c.wantOrder.Sub(t0))
			}
		})
	}
}
