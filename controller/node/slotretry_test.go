package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestFailedSlotStepRetriesBeforeTheStrandedBound: a reconcile of a
// member of its pool that holds its Node (bootroll's cordon, a slot) and
// fails on an API error is tried again after ConflictRetry, not after the
// workqueue's per-item backoff: the slot's drain and verdict are due by
// drainTimeout and healthTimeout, and the Node's give-back within
// no-stranded-node's bound, of which the backoff knows nothing (explorer
// seed 176607 of rollout-100-nodes: under an hour of API errors on every
// verb, twenty take-ups of workers-84 in a row failed, its cordon
// recorded and on the Node, the record still Pending; the backoff reached
// its 1000 s cap and the node stayed cordoned and protected 57 min). A
// member granted a slot that holds nothing on its Node yet retries at the
// same pace: the pool holds the slot for it (explorer seed 176713: the
// backoff reached 16 minutes, the slot was taken up after the pool's
// maintenance window had closed). A member granted nothing keeps the
// backoff: the error is returned.
func TestFailedSlotStepRetriesBeforeTheStrandedBound(t *testing.T) {
	const (
		image  = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
		digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	now := time.Date(2026, 1, 5, 3, 13, 9, 0, time.UTC)
	granted := metav1.NewTime(now.Add(-32 * time.Second))
	protected := map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true", v1alpha1.AnnotationSlot: "p"}
	added := []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	// halfTaken is the seed's record: the take-up recorded its cordon and
	// cordoned, marked and protected the Node; the record's Draining write
	// was lost, and it is still Pending.
	halfTaken := func(bn *v1alpha1.BootcNode, n *corev1.Node) {
		bn.Status.Phase = v1alpha1.PhasePending
		ro := &bn.Status.Rollout
		ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = true, ptr.To(false), added
		ro.DrainStartedAt = &metav1.Time{Time: now.Add(-23 * time.Second)}
		n.Spec.Unschedulable, n.Annotations = true, protected
	}
	for _, c := range []struct {
		name string
		// record sets up the record and the Node as the API server has
		// them (the record is staged for the slot's image).
		record               func(bn *v1alpha1.BootcNode, n *corev1.Node)
		failRead, failStatus bool // the API server's Gets, the record's status patches fail
		wantRetry            bool // RequeueAfter ConflictRetry and no error, or the error
	}{
		{"take-up stopped part way, the re-reads fail", halfTaken, true, false, true},
		{"take-up stopped part way, the record's writes fail", halfTaken, false, true, true},
		{"in its slot, the re-reads fail", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			halfTaken(bn, n)
			bn.Status.Phase = v1alpha1.PhaseDraining
			bn.Status.Rollout.SlotGrantedAt = granted.DeepCopy()
		}, true, false, true},
		{"granted, nothing taken up yet, the re-reads fail", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhasePending
		}, true, false, true},
		{"granted, nothing taken up yet, the cordon's record write fails", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhasePending
		}, false, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = image
			pool.Status.TargetImage = image
			pool.Status.Slots = []v1alpha1.Slot{{Node: "n", Image: image, Since: granted}}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool = "p"
			bn.Spec.DesiredImage = image
			bn.Status.Staged = &v1alpha1.HostImage{Image: image, Digest: digest}
			bn.Status.Rollout.TargetImage = image
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			c.record(bn, node)
			res, err, base := reconcileFailing(t, now, pool, bn, node, apiFailures{read: c.failRead, status: c.failStatus})
			wantRetry(t, res, err, c.wantRetry, "no-stranded-node's bound")
			var got v1alpha1.BootcNode
			if err := base.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase != bn.Status.Phase {
				t.Fatalf("the record went from %s to %s; the case must fail part way", bn.Status.Phase, got.Status.Phase)
			}
		})
	}
}
