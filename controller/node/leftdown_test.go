package node

import (
	"context"
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

// TestLeftPoolDownRecordsTheFailedImage: a node relabelled out of its
// pool after it booted the pool's target in its slot, and still not Ready
// healthTimeout after the reboot request, is a failure of that target.
// When the reconcile that finds it also withdraws the boot order (the
// reboot is over, so the withdrawal settles at once), the record written
// must still name the failed image: the withdrawal replaces the step's
// record, and a pointer into the record read before it lost the edit.
func TestLeftPoolDownRecordsTheFailedImage(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 6, 25, 0, time.UTC)
	now := t0.Add(10 * time.Minute)
	ctx := context.Background()
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{v1alpha1.Finalizer}}}
	pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	pool.Spec.Image = img
	pool.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	// Relabelled out of the pool, back from the reboot (a new boot) but
	// not Ready.
	bn, node := rebootedInSlot(img, t0, v1alpha1.PhaseRebooting, "elsewhere", corev1.ConditionFalse)
	api := fakeapi.Client(t, pool, bn, node)
	r := NewReconciler(api, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: api})
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.BootcNode
	if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &got); err != nil {
		t.Fatal(err)
	}
	if !got.Spec.BootOrder.Withdrawn || got.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("record: order withdrawn %v, phase %s; want withdrawn and Failed in this reconcile", got.Spec.BootOrder.Withdrawn, got.Status.Phase)
	}
	if got.Status.Rollout.FailedImage != img {
		t.Errorf("failed image %q, want %q: the failure of the target was not recorded on the record", got.Status.Rollout.FailedImage, img)
	}
}
