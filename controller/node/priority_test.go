package node

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestRequeuePriorityFollowsWhatTheRecordHolds: a pass that leaves its
// record holding the Node (a slot, bootroll's cordon) asks to be looked at
// again at OwedPriority, ahead of the records that hold nothing; a record
// that holds nothing is requeued at the default priority. A deleted pool's
// slot holders, waiting for their reboots to end, were looked at again
// behind its 90 other records' finalizes and one stayed cordoned 2m20s
// after its reboot ended (explorer seed 176758 of the 176681 regression).
func TestRequeuePriorityFollowsWhatTheRecordHolds(t *testing.T) {
	const (
		image  = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
		digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	now := time.Date(2026, 1, 5, 3, 13, 9, 0, time.UTC)
	granted := metav1.NewTime(now.Add(-32 * time.Second))
	for _, c := range []struct {
		name   string
		record func(bn *v1alpha1.BootcNode, n *corev1.Node)
		want   int
	}{
		{"in its slot, rebooting", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhaseRebooting
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(false)
			ro.SlotGrantedAt = granted.DeepCopy()
			ro.DrainStartedAt = &metav1.Time{Time: now.Add(-30 * time.Second)}
			bn.Spec.BootOrder = &v1alpha1.BootOrder{At: metav1.NewTime(now.Add(-20 * time.Second))}
			n.Spec.Unschedulable = true
			n.Annotations = map[string]string{v1alpha1.AnnotationSlot: "p"}
		}, OwedPriority},
		{"after a failed slot, holding nothing", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhasePending
			ro := &bn.Status.Rollout
			ro.Failures = 1
			ro.RetryAfter = &metav1.Time{Time: now.Add(5 * time.Minute)}
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = image
			pool.Status.TargetImage = image
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", image
			bn.Status.Staged = &v1alpha1.HostImage{Image: image, Digest: digest}
			bn.Status.Rollout.TargetImage = image
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			c.record(bn, node)
			if c.want == OwedPriority {
				pool.Status.Slots = []v1alpha1.Slot{{Node: "n", Image: image, Since: granted}}
			}
			res, err, _ := reconcileFailing(t, now, pool, bn, node, apiFailures{})
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if c.want == OwedPriority {
				if res.RequeueAfter <= 0 || res.Priority == nil || *res.Priority != OwedPriority {
					t.Fatalf("reconcile: result %+v; want a requeue at priority %d", res, OwedPriority)
				}
				return
			}
			if res.Priority != nil && *res.Priority != 0 {
				t.Fatalf("reconcile: result %+v; want the default priority", res)
			}
		})
	}
}
