package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// rebootedInSlot is a record n in pool p's slot whose boot order into img
// (given at t0) was carried out: the daemon recorded the reboot in boot
// boot-1, and the Node, labelled pool=label, cordoned, marked and
// protected by bootroll, runs boot-2 with Ready as given.
func rebootedInSlot(img string, t0 time.Time, phase v1alpha1.NodePhase, label string, ready corev1.ConditionStatus) (*v1alpha1.BootcNode, *corev1.Node) {
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
	bn.Spec.Pool, bn.Spec.DesiredImage = "p", img
	bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: img, At: metav1.NewTime(t0)}
	bn.Status.Phase = phase
	bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: img, BootID: "boot-1", At: metav1.NewTime(t0.Add(time.Second))}
	ro := &bn.Status.Rollout
	ro.TargetImage, ro.Cordoned, ro.PriorUnschedulable = img, true, ptr.To(false)
	ro.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": label},
		Annotations: map[string]string{v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"}}}
	node.Spec.Unschedulable = true
	node.Status.NodeInfo.BootID = "boot-2"
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	return bn, node
}

// TestReleaseOnAStaleCache: a node in its slot whose pool was deleted is
// given back by one reconcile even when the cache still shows its record
// as it was before the controller's own last write of the release (the
// withdrawal, or the phase written before a later request failed): the
// release runs again on the API server's record instead of waiting, a
// conflict per retry, for the cache to catch up (explorer seed 176099 of
// rollout-100-nodes: under API faults and a stale cache, workers-20 was
// given back 2m01s after its pool's deletion). A record the API server
// shows released already is left alone; a cache that is current releases
// as before.
func TestReleaseOnAStaleCache(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 6, 25, 0, time.UTC)
	now := t0.Add(100 * time.Second)
	for _, c := range []struct {
		name string
		// written is what the controller wrote after the cache's copy
		// (nil: the cache is current).
		written func(*v1alpha1.BootcNode)
		// released: the API server's record is given back already, and
		// so is the Node.
		released bool
	}{
		{"cache current", nil, false},
		{"withdrawal not in the cache", func(b *v1alpha1.BootcNode) { b.Spec.BootOrder.Withdrawn = true }, false},
		{"phase not in the cache", func(b *v1alpha1.BootcNode) {
			b.Spec.BootOrder.Withdrawn = true
			b.Status.Phase = v1alpha1.PhasePending
			b.Status.Rollout.Reason = "LeftPool"
		}, false},
		{"release not in the cache", func(b *v1alpha1.BootcNode) {
			b.Spec.BootOrder.Withdrawn = true
			b.Status.Phase = v1alpha1.PhasePending
			ro := &b.Status.Rollout
			ro.Reason, ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = "LeftPool", false, nil, nil
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			// Back from the reboot into the image: the order is settled.
			bn, node := rebootedInSlot(img, t0, v1alpha1.PhaseDraining, "p", corev1.ConditionTrue)
			if c.released {
				node.Annotations, node.Spec.Unschedulable = nil, false
			}
			api := fakeapi.Client(t, bn, node) // the pool is gone
			var cachedBN v1alpha1.BootcNode
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &cachedBN); err != nil {
				t.Fatal(err)
			}
			if c.written != nil {
				w := cachedBN.DeepCopy()
				c.written(w)
				status := w.Status.DeepCopy()
				if err := api.Update(ctx, w); err != nil { // the spec
					t.Fatal(err)
				}
				w.Status = *status
				if err := api.Status().Update(ctx, w); err != nil {
					t.Fatal(err)
				}
			}
			// The cache: the record as it was before those writes.
			cache := interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if b, ok := obj.(*v1alpha1.BootcNode); ok {
						cachedBN.DeepCopyInto(b)
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			var before corev1.Node
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &before); err != nil {
				t.Fatal(err)
			}
			r := NewReconciler(cache, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: api})
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}})
			if err != nil {
				t.Fatal(err)
			}
			var n corev1.Node
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &n); err != nil {
				t.Fatal(err)
			}
			if n.Spec.Unschedulable || len(n.Annotations) > 0 {
				t.Errorf("after one reconcile (result %+v) the Node is unschedulable %v with annotations %v; want it given back", res, n.Spec.Unschedulable, n.Annotations)
			}
			if c.released && n.ResourceVersion != before.ResourceVersion {
				t.Errorf("a Node given back already was written again")
			}
			var got v1alpha1.BootcNode
			if err := api.Get(ctx, types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.Rollout.Cordoned || got.Status.Phase != v1alpha1.PhasePending || !got.Spec.BootOrder.Withdrawn {
				t.Errorf("record: cordoned %v, phase %s, order withdrawn %v; want given back, Pending, withdrawn",
					got.Status.Rollout.Cordoned, got.Status.Phase, got.Spec.BootOrder.Withdrawn)
			}
		})
	}
}
