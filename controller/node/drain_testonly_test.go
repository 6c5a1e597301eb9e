package node

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/rollout"
)

// drainCalls records what a Drainer asked the API server for.
type drainCalls struct {
	evicted, deleted []string
}

// drainClient is a fake client holding pods, indexed like the manager's
// cache, that records evictions and deletions. blocked names pods whose
// eviction a PDB refuses (429); every other eviction and deletion
// succeeds and removes the pod.
func drainClient(t *testing.T, calls *drainCalls, blocked []string, pods ...client.Object) client.Client {
	t.Helper()
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(sch).WithObjects(pods...)
	for _, ix := range index.All() {
		if _, ok := ix.Object.(*corev1.Pod); ok {
			b = b.WithIndex(ix.Object, ix.Field, ix.Extract)
		}
	}
	return b.WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				calls.deleted = append(calls.deleted, obj.GetNamespace()+"/"+obj.GetName())
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			if sub != "eviction" {
				return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
			}
			if _, ok := subObj.(*policyv1.Eviction); !ok {
				t.Errorf("eviction of %s with a %T", obj.GetName(), subObj)
			}
			key := obj.GetNamespace() + "/" + obj.GetName()
			calls.evicted = append(calls.evicted, key)
			if slices.Contains(blocked, key) {
				return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
			}
			return c.Delete(ctx, obj)
		},
	}).Build()
}

// drainPods are the pods of node n1 (two workloads, a DaemonSet pod, a
// mirror pod, a finished pod and a terminating one) and a workload on n2.
func drainPods() []client.Object {
	pod := func(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	return []client.Object{
		pod("web-a", "n1", nil),
		pod("web-b", "n1", nil),
		pod("exporter", "n1", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "exporter", UID: "ds", Controller: ptr.To(true)}}
		}),
		pod("etcd-n1", "n1", func(p *corev1.Pod) {
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		}),
		pod("job-done", "n1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("leaving", "n1", func(p *corev1.Pod) {
			p.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			p.Finalizers = []string{"example.com/hold"}
		}),
		pod("web-other", "n2", nil),
	}
}

func podNames(ctx context.Context, t *testing.T, c client.Client) []string {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestDrainerEvictsNeverDeletes: without the test-only setting the drainer
// goes through the Eviction API only, also when a PDB refuses.
func TestDrainerEvictsNeverDeletes(t *testing.T) {
	ctx := context.Background()
	var calls drainCalls
	c := drainClient(t, &calls, []string{"default/web-b"}, drainPods()...)
	d := NewDrainer(c, rollout.TestOnly{})
	if d.DeleteInsteadOfEvict {
		t.Fatal("NewDrainer with the zero TestOnly deletes instead of evicting")
	}
	res, err := d.Drain(ctx, "n1", v1alpha1.DrainSpec{Force: true}) // the fixture's pods have no controller
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"default/web-a", "default/web-b"}; !slices.Equal(calls.evicted, want) {
		t.Errorf("evicted %v, want %v", calls.evicted, want)
	}
	if len(calls.deleted) != 0 {
		t.Errorf("deleted %v directly; the drainer must only evict", calls.deleted)
	}
	if got, want := blockedMessage(res.Blocked), "default/web-b (Cannot evict pod as it would violate the pod's disruption budget.)"; got != want {
		t.Errorf("blocked %q, want %q", got, want)
	}
	// web-a, web-b and the terminating pod still had to leave in this pass.
	if res.Remaining != 3 {
		t.Errorf("remaining %d, want 3", res.Remaining)
	}
	if got, want := podNames(ctx, t, c), []string{"etcd-n1", "exporter", "job-done", "leaving", "web-b", "web-other"}; !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
}

// TestDrainerDeleteInsteadOfEvict: with the test-only setting the drainer
// deletes the pods that must leave and never asks the Eviction API, so a
// PDB that would refuse is not consulted.
func TestDrainerDeleteInsteadOfEvict(t *testing.T) {
	ctx := context.Background()
	var calls drainCalls
	c := drainClient(t, &calls, []string{"default/web-b"}, drainPods()...)
	d := NewDrainer(c, rollout.TestOnly{DeleteInsteadOfEvict: true})
	if !d.DeleteInsteadOfEvict {
		t.Fatal("NewDrainer did not take TestOnly.DeleteInsteadOfEvict")
	}
	res, err := d.Drain(ctx, "n1", v1alpha1.DrainSpec{Force: true}) // the fixture's pods have no controller
	if err != nil {
		t.Fatal(err)
	}
	if len(calls.evicted) != 0 {
		t.Errorf("evicted %v; the broken drainer must delete instead", calls.evicted)
	}
	if want := []string{"default/web-a", "default/web-b"}; !slices.Equal(calls.deleted, want) {
		t.Errorf("deleted %v, want %v", calls.deleted, want)
	}
	if len(res.Blocked) != 0 {
		t.Errorf("blocked %v; a deletion is never refused by a PDB", res.Blocked)
	}
	if got, want := podNames(ctx, t, c), []string{"etcd-n1", "exporter", "job-done", "leaving", "web-other"}; !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
	// A pod already gone is not an error.
	if _, err := d.Drain(ctx, "n1", v1alpha1.DrainSpec{Force: true}); err != nil {
		t.Errorf("second pass: %v", err)
	}
}
