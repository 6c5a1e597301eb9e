package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestFinishProtectsAfterEverySlot ends a slot that drained a node, as
// Updated, Failed, abandoned (Retargeted) or after the node left its
// pool: the first three keep Karpenter's do-not-disrupt for the pool's
// postUpdateProtection (issue 11, node-churn.no-churn.seed2: Karpenter
// reaped a node emptied by a failed slot 20 s after), the last gives it
// back at once (cleanup).
func TestFinishProtectsAfterEverySlot(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		phase    v1alpha1.NodePhase
		reason   string
		success  bool
		leftPool bool
		wantKeep bool
	}{
		{"updated", v1alpha1.PhaseUpdated, "Updated", true, false, true},
		{"failed", v1alpha1.PhaseFailed, "BootFailed", false, false, true},
		{"drain abandoned", v1alpha1.PhasePending, "Retargeted", false, false, true},
		{"left its pool", v1alpha1.PhasePending, "LeftPool", false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: 5 * time.Minute}
			labels := map[string]string{"pool": "p"}
			if c.leftPool {
				labels = map[string]string{"pool": "elsewhere"}
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: map[string]string{
				v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true"}}}
			node.Spec.Unschedulable = true
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseVerifying
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			cl := fakeClient(t, pool, bn, node)
			r := NewNodeReconciler(cl, Options{})
			var cur v1alpha1.BootcNode
			var n corev1.Node
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &n); err != nil {
				t.Fatal(err)
			}
			s := &nodeStep{orig: recordOf(&cur), bn: &cur, node: &n, pool: pool, now: now}
			if err := r.finish(context.Background(), s, c.phase, c.reason, "test", c.success); err != nil {
				t.Fatal(err)
			}
			var got corev1.Node
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Unschedulable {
				t.Fatal("still cordoned after the slot ended")
			}
			_, kept := got.Annotations[v1alpha1.KarpenterDoNotDisrupt]
			if kept != c.wantKeep {
				t.Fatalf("do-not-disrupt kept = %v, want %v (annotations %v)", kept, c.wantKeep, got.Annotations)
			}
			if c.wantKeep {
				pu := cur.Status.Rollout.ProtectUntil
				if pu == nil || !pu.Time.Equal(now.Add(5*time.Minute)) {
					t.Fatalf("protectUntil = %v, want %s", pu, now.Add(5*time.Minute))
				}
			}
		})
	}
}
