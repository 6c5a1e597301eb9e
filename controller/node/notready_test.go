package node

import (
	"context"
	"encoding/hex"
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
	"github.com/bootroll/bootroll/internal/imageref"
)

// TestNotReadyOnTarget fails a node that runs its target outside any slot
// and has been reported NotReady for the pool's healthTimeout (issue 11,
// rollback-on-failed-boot.max-unavailable.seed9: released mid-boot by a
// deleted pool, it counted as Updated in the recreated one), records the
// failure on the pool, and leaves alone a node NotReady for less, a node
// Ready, and a node on another image.
func TestNotReadyOnTarget(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	target := settleRef("v2")
	cases := []struct {
		name       string
		booted     string
		ready      corev1.ConditionStatus
		since      time.Duration // before now
		wantFailed bool
	}{
		{"NotReady on the target past healthTimeout", target, corev1.ConditionFalse, 6 * time.Minute, true},
		{"NotReady on the target within healthTimeout", target, corev1.ConditionFalse, 4 * time.Minute, false},
		{"Ready on the target", target, corev1.ConditionTrue, time.Hour, false},
		{"NotReady on another image", settleRef("v1"), corev1.ConditionFalse, time.Hour, false},
		{"lost contact (Unknown) on the target", target, corev1.ConditionUnknown, time.Hour, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			pool.Status.TargetImage = target
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", target
			bn.Status.Phase = v1alpha1.PhaseUpdated
			bn.Status.Booted = &v1alpha1.HostImage{Image: c.booted, Digest: imageref.Digest(c.booted)}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: c.ready, LastTransitionTime: metav1.NewTime(now.Add(-c.since))}}
			cl := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(cl, options.Options{})
			var cur v1alpha1.BootcNode
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			s := &nodeStep{orig: recordOf(&cur), bn: &cur, node: node, pool: pool, now: now}
			failed, wait, err := r.notReadyOnTarget(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if failed != c.wantFailed {
				t.Fatalf("failed = %v (wait %s), want %v", failed, wait, c.wantFailed)
			}
			var got v1alpha1.BootcNode
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			var p v1alpha1.BootcNodePool
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "p"}, &p); err != nil {
				t.Fatal(err)
			}
			if !c.wantFailed {
				if got.Status.Phase != v1alpha1.PhaseUpdated || len(p.Status.Failures) != 0 {
					t.Fatalf("phase %s, pool failures %v: want the node left alone", got.Status.Phase, p.Status.Failures)
				}
				return
			}
			if got.Status.Phase != v1alpha1.PhaseFailed || got.Status.Rollout.FailedImage != target || got.Status.Rollout.Reason != "NotReadyOnTarget" {
				t.Fatalf("record: phase %s failedImage %q reason %q; want Failed, %s, NotReadyOnTarget", got.Status.Phase, got.Status.Rollout.FailedImage, got.Status.Rollout.Reason, target)
			}
			if len(p.Status.Failures) != 1 || p.Status.Failures[0].Node != "n" {
				t.Fatalf("pool failures %+v: want the node's failure recorded", p.Status.Failures)
			}
			if node.Spec.Unschedulable || got.Spec.Order() != nil {
				t.Fatal("a node outside a slot must be neither cordoned nor ordered to reboot")
			}
		})
	}
}

// settleRef returns a digest reference for a short image name (its bytes
// in hex, padded: a well-formed digest).
func settleRef(name string) string {
	return "registry.example/os@sha256:" + (hex.EncodeToString([]byte(name)) + strings.Repeat("0", 64))[:64]
}

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
