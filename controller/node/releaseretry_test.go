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

// TestFailedReleaseOfADeletedRecordRetriesBeforeTheCleanupBound: a reconcile that fails on
// an API error while it gives back a Node the record still holds (the
// record is being deleted, or its node left the pool) is tried again after
// ConflictRetry, not after the workqueue's per-item backoff, which knows
// nothing of the release being due (explorer seed 176219 of
// bootcnode-deleted-mid-reboot: sixteen failed finalizes of workers-2 in
// a row took the backoff to 2m44s, and the node stayed cordoned, marked
// and protected 6m16s after its record was deleted). A record being
// deleted that holds nothing on its Node keeps the backoff: the error is
// returned. A member of its pool whose step fails while it holds its Node
// retries too, for its slot's end
// (TestFailedSlotStepRetriesBeforeTheStrandedBound, seed 176607).
func TestFailedReleaseOfADeletedRecordRetriesBeforeTheCleanupBound(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 9, 48, 0, time.UTC)
	protected := map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true", v1alpha1.AnnotationSlot: "p"}
	added := []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	// inSlot is the seed's record: in its slot, cordoned and protected by
	// bootroll, the Node as bootroll left it.
	inSlot := func(bn *v1alpha1.BootcNode, n *corev1.Node) {
		bn.Status.Phase = v1alpha1.PhaseDraining
		ro := &bn.Status.Rollout
		ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = true, ptr.To(false), added
		ro.DrainStartedAt = &metav1.Time{Time: now.Add(-3 * time.Minute)}
		n.Spec.Unschedulable, n.Annotations = true, protected
	}
	for _, c := range []struct {
		name string
		// record sets up the record and the Node as the API server has
		// them.
		record              func(bn *v1alpha1.BootcNode, n *corev1.Node)
		deleted, left       bool // the record is being deleted; the Node no longer has the pool's label
		failRead, failPatch bool // the API server's Gets, the Node patches fail
		wantRetry           bool // RequeueAfter ConflictRetry and no error, or the error
	}{
		{"deleted in its slot, the re-reads fail", inSlot, true, false, true, false, true},
		{"deleted in its slot, the uncordon fails", inSlot, true, false, false, true, true},
		{"deleted, only protection kept, the re-reads fail", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhaseUpdated
			bn.Status.Rollout.AddedAnnotations = added
			n.Annotations = map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"}
		}, true, false, true, false, true},
		{"left its pool in its slot, the re-reads fail", inSlot, false, true, true, false, true},
		{"left its pool in its slot, the uncordon fails", inSlot, false, true, false, true, true},
		{"deleted, holding nothing, the re-reads fail", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhasePending
		}, true, false, true, false, false},
		{"in its pool, its slot's end half written, the re-reads fail", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhaseUpdated
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(false)
			n.Spec.Unschedulable = true
			n.Annotations = map[string]string{v1alpha1.AnnotationSlot: "p"}
		}, false, false, true, false, true}, // still cordoned: owed its give-back (seed 176607)
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			if c.deleted {
				bn.DeletionTimestamp = &metav1.Time{Time: now.Add(-48 * time.Second)}
			}
			bn.Spec.Pool = "p"
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			if c.left {
				node.Labels["pool"] = "other"
			}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			c.record(bn, node)
			res, err, base := reconcileFailing(t, now, pool, bn, node, apiFailures{read: c.failRead, nodePatch: c.failPatch})
			wantRetry(t, res, err, c.wantRetry, "cleanup's bound")
			if c.wantRetry {
				var n corev1.Node
				if err := base.Get(context.Background(), types.NamespacedName{Name: "n"}, &n); err != nil {
					t.Fatal(err)
				}
				if !n.Spec.Unschedulable && len(n.Annotations) == 0 {
					t.Fatalf("the Node was given back; the case must fail part way")
				}
			}
		})
	}
}
