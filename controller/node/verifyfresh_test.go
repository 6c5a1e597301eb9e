package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/rollout"
)

// events keeps the reasons of the Events a reconciler records.
type events []string

func (e *events) Eventf(_ runtime.Object, _, reason, _ string, _ ...any) {
	*e = append(*e, reason)
}

// TestVerdictReadsTheAPIServer: a node whose cache shows it Ready for the
// pool's readyFor, which the API server shows NotReady, is not recorded
// Updated (explorer seed 147032 of health-checks: powered off in its last
// minute of readyFor, its cache 11 s behind); with the API server's Node
// Ready too, it is. The planted VerifyOnCache records it Updated on the
// cache's word.
func TestVerdictReadsTheAPIServer(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	now := time.Date(2026, 1, 5, 0, 10, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		apiReady corev1.ConditionStatus
		to       rollout.TestOnly
		want     v1alpha1.NodePhase
	}{
		{"NotReady on the API server", corev1.ConditionUnknown, rollout.TestOnly{}, v1alpha1.PhaseVerifying},
		{"Ready on both", corev1.ConditionTrue, rollout.TestOnly{}, v1alpha1.PhaseUpdated},
		{"planted verifyOnCache", corev1.ConditionUnknown, rollout.TestOnly{VerifyOnCache: true}, v1alpha1.PhaseUpdated},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.HealthChecks.ReadyFor = &metav1.Duration{Duration: 2 * time.Minute}
			node := func(ready corev1.ConditionStatus) *corev1.Node {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"},
					Annotations: map[string]string{v1alpha1.AnnotationSlot: "p"}}}
				n.Spec.Unschedulable = true
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready,
					LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Minute))}}
				return n
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", img
			bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: img, At: metav1.NewTime(now.Add(-4 * time.Minute))}
			bn.Status.Phase = v1alpha1.PhaseVerifying
			bn.Status.Booted = &v1alpha1.HostImage{Image: img, Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}
			ro := &bn.Status.Rollout
			ro.TargetImage, ro.Cordoned = img, true
			cached := node(corev1.ConditionTrue)
			cl := fakeapi.Client(t, pool, bn, cached)
			api := fakeapi.Client(t, pool.DeepCopy(), bn.DeepCopy(), node(c.apiReady))
			r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: api, TestOnly: c.to})
			s := &nodeStep{orig: recordOf(bn), bn: bn, node: cached, pool: pool, now: now}
			if d := rollout.Verify(s.view(), rollout.TestOnly{}); d.Outcome != rollout.VerifyDone {
				t.Fatalf("the cached view's verdict is %+v, want VerifyDone (the test's setup)", d)
			}
			if _, err := r.verify(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if s.bn.Status.Phase != c.want {
				t.Errorf("phase %s, want %s", s.bn.Status.Phase, c.want)
			}
		})
	}
}

// TestStrayMarkerOnlyTheCacheShows: a slot marker the cache still shows
// but the API server's Node no longer has (the slot that just ended
// removed it) is no stray marker: nothing is written and no
// StrayMarkerCleared event says it was removed; one the API server's Node
// has is removed, with the event.
func TestStrayMarkerOnlyTheCacheShows(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 10, 0, 0, time.UTC)
	for _, apiMarked := range []bool{false, true} {
		t.Run(fmt.Sprintf("marked on the API server %v", apiMarked), func(t *testing.T) {
			node := func(marked bool) *corev1.Node {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{}}}
				if marked {
					n.Annotations[v1alpha1.AnnotationSlot] = "p"
					n.Spec.Unschedulable = true
				}
				return n
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "7"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseUpdated
			cached := node(true)
			cl := fakeapi.Client(t, bn, cached)
			var stored v1alpha1.BootcNode
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &stored); err != nil {
				t.Fatal(err)
			}
			apiNode := node(apiMarked)
			api := fakeapi.Client(t, stored.DeepCopy(), apiNode)
			var ev events
			r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: api, Recorder: &ev})
			s := &nodeStep{orig: recordOf(&stored), bn: &stored, node: cached, now: now}
			if err := r.clearStrayMarker(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if got := len(ev) == 1 && ev[0] == "StrayMarkerCleared"; got != apiMarked {
				t.Errorf("events %v; want StrayMarkerCleared only when the API server's Node is marked", ev)
			}
		})
	}
}
