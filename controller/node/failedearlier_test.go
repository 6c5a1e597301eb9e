package node

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestFailedEarlierMarksANewRecord: a node failed the pool's target under
// a BootcNode that was deleted since (the failure went on the pool's
// status.failures first); the record made again for it, directed to the
// same target, is marked Failed (FailedEarlier) rather than wait for a
// slot the pool will not grant it (explorer seed 118173 of
// bootcnode-deleted-mid-reboot: the new record got the slot and the node
// booted the failed image a second time). A failure of an earlier rollout
// of the image (before targetSince) leaves the record alone.
func TestFailedEarlierMarksANewRecord(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	now := time.Date(2026, 1, 5, 0, 9, 50, 0, time.UTC)
	for _, c := range []struct {
		name        string
		targetSince time.Time
		want        v1alpha1.NodePhase
	}{
		{"failed in this rollout", now.Add(-10 * time.Minute), v1alpha1.PhaseFailed},
		{"failed in an earlier rollout of the image", now.Add(-time.Second), v1alpha1.PhasePending},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Status.TargetImage = img
			pool.Status.TargetSince = &metav1.Time{Time: c.targetSince}
			pool.Status.Failures = []v1alpha1.NodeFailure{{Node: "n", Image: img, Reason: "BootFailed", Message: "fell back", Time: metav1.Time{Time: now.Add(-2 * time.Second)}}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", img
			bn.Status.Phase = v1alpha1.PhasePending
			bn.Status.Rollout.TargetImage = img
			cl := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now)})
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
				t.Fatal(err)
			}
			got, _ := getNode(context.Background(), t, cl)
			if got.Status.Phase != c.want {
				t.Fatalf("phase %s (%s: %s), want %s", got.Status.Phase, got.Status.Rollout.Reason, got.Status.Rollout.Message, c.want)
			}
			if c.want == v1alpha1.PhaseFailed {
				ro := got.Status.Rollout
				if ro.FailedImage != img || ro.Reason != "FailedEarlier" || !strings.Contains(ro.Message, "BootFailed") {
					t.Errorf("rollout %+v, want failedImage the target, reason FailedEarlier and the pool's reason in the message", ro)
				}
			}
		})
	}
}
