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

// TestOrderGivenAgainKeepsItsTime: a record in its slot whose boot order
// for v2, given in this slot's drain, was withdrawn after the daemon
// recorded the reboot into v2 for it (the node relabelled out of its pool
// mid-reboot and back) is ordered again with that order's time, not now:
// the reboot under way is the slot's. Given a new time, the finalizer of
// the record, deleted later, did not find the reboot (RebootOver counts
// from the order), released the node fallen back to v1 with no failure on
// the pool, and the record made again rebooted it into v2 a second time
// (explorer seed 176717 of cluster-repair-during-slow-reboot). An order
// the daemon recorded no reboot for, one from before this slot's drain,
// and a reboot into another image or a rollback's, take the time now.
func TestOrderGivenAgainKeepsItsTime(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	drain, ordered, rebooted, now := t0.Add(12*time.Second), t0.Add(27*time.Second), t0.Add(38*time.Second), t0.Add(3*time.Minute+18*time.Second)
	for _, c := range []struct {
		name      string
		drain     time.Time // status.rollout.drainStartedAt
		reboot    *v1alpha1.RebootRecord
		wantAt    time.Time
		deleteToo bool // then delete the record, the node back on v1
	}{
		{"rebooted for the withdrawn order", drain, &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", At: metav1.NewTime(rebooted)}, ordered, true},
		{"no reboot recorded", drain, nil, now, false},
		{"the reboot was before the withdrawn order", drain, &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", At: metav1.NewTime(drain)}, now, false},
		{"the withdrawn order is from before this drain", t0.Add(time.Minute), &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", At: metav1.NewTime(rebooted)}, now, false},
		{"the reboot was into another image", drain, &v1alpha1.RebootRecord{Image: v1, BootID: "boot-1", At: metav1.NewTime(rebooted)}, now, false},
		{"the reboot was a rollback's", drain, &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", Rollback: true, At: metav1.NewTime(rebooted)}, now, false},
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
			ro.TargetImage, ro.Cordoned, ro.DrainStartedAt = v2, true, &metav1.Time{Time: c.drain}
			d := &bn.Status.Daemon
			d.Phase, d.BootID, d.LastReboot = v1alpha1.DaemonRebooting, "boot-1", c.reboot
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
			if _, err := r.verify(ctx, s); err != nil {
				t.Fatal(err)
			}
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			o := cur.Spec.Order()
			if o == nil {
				t.Fatalf("no boot order stands: %+v", cur.Spec.BootOrder)
			}
			if !o.At.Time.Equal(c.wantAt) {
				t.Errorf("order given again at %s, want %s", o.At.Time.Sub(t0), c.wantAt.Sub(t0))
			}
			if !c.deleteToo {
				return
			}
			// The record is deleted at 12m10s (the order withdrawn); the
			// node comes back at 12m39s fallen back to v1, and the daemon
			// reports from that boot. The failure goes on the pool.
			del := t0.Add(12*time.Minute + 10*time.Second)
			gone := cur.DeepCopy()
			gone.ResourceVersion = ""
			gone.DeletionTimestamp = &metav1.Time{Time: del}
			gone.Spec.BootOrder.Withdrawn = true
			gone.Status.Daemon.Phase, gone.Status.Daemon.BootID = v1alpha1.DaemonStaging, "boot-2"
			gone.Status.Daemon.ObservedGeneration = gone.Generation + 1
			back := node.DeepCopy()
			back.Status.NodeInfo.BootID = "boot-2"
			back.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			var p v1alpha1.BootcNodePool
			if err := api.Get(ctx, types.NamespacedName{Name: "p"}, &p); err != nil {
				t.Fatal(err)
			}
			p.ResourceVersion = ""
			api2 := fakeapi.Client(t, &p, gone, back)
			r2 := NewReconciler(api2, options.Options{Clock: clocktesting.NewFakePassiveClock(t0.Add(12*time.Minute + 44*time.Second)), APIReader: api2})
			if _, err := r2.finalize(ctx, gone); err != nil {
				t.Fatal(err)
			}
			if err := api2.Get(ctx, types.NamespacedName{Name: "p"}, &p); err != nil {
				t.Fatal(err)
			}
			var failed bool
			for _, f := range p.Status.Failures {
				failed = failed || (f.Node == "n" && f.Image == v2 && f.Reason == "BootFailed")
			}
			if !failed {
				t.Errorf("no BootFailed failure of v2 on the pool after the record went: %+v", p.Status.Failures)
			}
		})
	}
}
