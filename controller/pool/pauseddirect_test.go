package pool

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
)

// TestPausedPoolDirectsNodesOnItsTarget: a paused pool directs to its
// target the members that run it already (no staging, no slot), and no
// other. Left on the image it was directed to before, a node rolled back
// onto the new target kept its verdict of the old one; when the operator
// set the old image again, still paused, the pool took that verdict for a
// failure of the new rollout and never tried the node again (explorer seed
// 176740 of the 176172 regression of pool-edited-mid-rollout: workers-8,
// rolled back off v2 onto v1, stayed RolledBack for v2 through v1 at 1h25m
// and v2 at 1h29m10s, the pool paused from 1h23m to 1h31m51s).
func TestPausedPoolDirectsNodesOnItsTarget(t *testing.T) {
	const v1, v2 = rigV1, rigV2
	digest := rigDigest
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 1, 25, 0, 0, time.UTC))
	p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "workers", Finalizers: []string{v1alpha1.Finalizer}, Generation: 2}}
	p.Spec.NodeSelector = map[string]string{"pool": "workers"}
	p.Spec.Image = v1
	p.Spec.Paused = true
	p.Status.TargetImage, p.Status.TargetDigest = v2, digest(v2)
	p.Status.TargetSince = &metav1.Time{Time: clk.Now().Add(-time.Hour)}
	objs := []client.Object{p}
	node := func(name string) *corev1.Node { return rigNode(name, clk.Now().Add(-time.Hour)) }
	record := func(name, desired, booted string, phase v1alpha1.NodePhase, failed string) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelPool: "workers"}, Finalizers: []string{v1alpha1.Finalizer}},
			Spec:       v1alpha1.BootcNodeSpec{Pool: "workers", DesiredImage: desired},
		}
		bn.Status.Booted = &v1alpha1.HostImage{Image: booted, Digest: digest(booted)}
		bn.Status.Phase = phase
		bn.Status.Rollout.TargetImage = desired
		bn.Status.Rollout.FailedImage = failed
		since := metav1.NewTime(clk.Now().Add(-40 * time.Minute))
		bn.Status.Rollout.PhaseSince = &since
		return bn
	}
	// rolled: rolled back off v2 onto v1, the new target. updated: on v2,
	// the image the pool leaves (directing it would stage v1). pending:
	// on v1, directed to v2 and not rebooted yet.
	rolled := record("rolled", v2, v1, v1alpha1.PhaseRolledBack, v2)
	updated := record("updated", v2, v2, v1alpha1.PhaseUpdated, "")
	pending := record("pending", v2, v1, v1alpha1.PhasePending, "")
	for _, bn := range []*v1alpha1.BootcNode{rolled, updated, pending} {
		objs = append(objs, node(bn.Name), bn)
	}
	cl := fakeapi.Client(t, objs...)
	feed := poolfeed.New()
	for _, o := range objs {
		feed.Observe(o, false)
	}
	r := NewReconciler(cl, options.Options{Clock: clk, Feed: feed})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "workers"}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"rolled": v1, "updated": v2, "pending": v1}
	for name, image := range want {
		var bn v1alpha1.BootcNode
		if err := cl.Get(context.Background(), types.NamespacedName{Name: name}, &bn); err != nil {
			t.Fatal(err)
		}
		if bn.Spec.DesiredImage != image {
			t.Errorf("%s: spec.desiredImage %q after the paused pass; want %q", name, bn.Spec.DesiredImage, image)
		}
	}
	var got v1alpha1.BootcNodePool
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "workers"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Slots) != 0 {
		t.Errorf("slots %v granted by a paused pool", got.Status.Slots)
	}
}
