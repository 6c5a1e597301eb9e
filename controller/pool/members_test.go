package pool

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
)

// A pass that grants slots under a percentage counts the pool's members on
// the API server: the cache may still show a member Karpenter is
// deleting, and the smaller pool has fewer slots (explorer seed 122078 of
// karpenter-defaults). Four members in the cache, three on the API server:
// 50% allows one slot, not two. With the API server agreeing, two.
func TestGrantCountsMembersOnTheAPIServer(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	target := "quay.io/example/os@" + digest
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	objects := func(deleting string) []client.Object {
		p := &v1alpha1.BootcNodePool{
			ObjectMeta: metav1.ObjectMeta{Name: "kp", Finalizers: []string{v1alpha1.Finalizer}},
			Spec: v1alpha1.BootcNodePoolSpec{
				NodeSelector: map[string]string{"pool": "kp"},
				Image:        v1alpha1.ImageReference(target),
			},
		}
		p.Spec.Rollout.MaxUnavailable = ptr.To(intstr.FromString("50%"))
		objs := []client.Object{p}
		for _, name := range []string{"kp-1", "kp-2", "kp-3", "kp-4"} {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "kp"}}}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			if name == deleting {
				n.Finalizers = []string{"karpenter.sh/termination"}
				n.DeletionTimestamp = &metav1.Time{Time: now.Add(-3 * time.Second)}
			}
			bn := &v1alpha1.BootcNode{
				ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelPool: "kp"}, Finalizers: []string{v1alpha1.Finalizer}},
				Spec:       v1alpha1.BootcNodeSpec{Pool: "kp", DesiredImage: target},
			}
			bn.Status.Phase = v1alpha1.PhaseStaged
			bn.Status.Booted = &v1alpha1.HostImage{Digest: "sha256:" + "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"}
			bn.Status.Staged = &v1alpha1.HostImage{Digest: digest}
			bn.Status.Rollout.TargetImage = target
			objs = append(objs, n, bn)
		}
		return objs
	}
	for _, c := range []struct {
		name     string
		deleting string // on the API server, not in the cache
		want     int
	}{
		{"the API server agrees with the cache", "", 2},
		{"a member is being deleted on the API server", "kp-4", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cached := objects("")
			cache := fakeapi.Client(t, cached...)
			feed := poolfeed.New()
			for _, o := range cached {
				feed.Observe(o, false)
			}
			r := NewReconciler(cache, options.Options{
				Clock:     clocktesting.NewFakePassiveClock(now),
				Feed:      feed,
				APIReader: fakeapi.Client(t, objects(c.deleting)...),
			})
			if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "kp"}}); err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.BootcNodePool
			if err := cache.Get(context.Background(), types.NamespacedName{Name: "kp"}, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Slots) != c.want {
				t.Errorf("%d slots granted (%v), want %d; deferred: %s", len(got.Status.Slots), got.Status.Slots, c.want, got.Status.Summary)
			}
		})
	}
}
