package apiserver_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/bootroll/bootroll/sim/apiserver"
)

func exists(t *testing.T, c client.Client, obj client.Object) bool {
	t.Helper()
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestDeleteWithFinalizers(t *testing.T) {
	s, e := newServer(t)
	c := s.Client()
	n := node("n")
	n.Finalizers = []string{"a", "b"}
	mustCreate(t, c, n)
	e.RunUntil(t0.Add(time.Minute))

	if err := c.Delete(ctx, node("n")); err != nil {
		t.Fatal(err)
	}
	got := get(t, c, node("n"))
	if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("deletionTimestamp = %v, want %v", got.DeletionTimestamp, t0.Add(time.Minute))
	}
	if got.Generation != 0 {
		t.Errorf("generation after the delete = %d, want 0 (Nodes have none)", got.Generation)
	}
	rv := got.ResourceVersion
	if err := c.Delete(ctx, node("n")); err != nil {
		t.Fatal(err)
	}
	if again := get(t, c, node("n")); again.ResourceVersion != rv {
		t.Errorf("second Delete wrote: resourceVersion %s → %s", rv, again.ResourceVersion)
	}

	controllerutil.AddFinalizer(got, "new")
	if err := c.Update(ctx, got); !apierrors.IsInvalid(err) {
		t.Errorf("adding a finalizer while deleting: %v, want Invalid", err)
	}
	got = get(t, c, node("n"))
	controllerutil.RemoveFinalizer(got, "a")
	if err := c.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	if !exists(t, c, node("n")) {
		t.Fatal("removed with a finalizer left")
	}
	base := got.DeepCopy()
	controllerutil.RemoveFinalizer(got, "b")
	if err := c.Patch(ctx, got, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if exists(t, c, node("n")) {
		t.Fatal("still there after the last finalizer was removed")
	}
	if err := c.Delete(ctx, node("n")); !apierrors.IsNotFound(err) {
		t.Errorf("Delete of a missing object: %v, want NotFound", err)
	}
}

func TestDeleteOptions(t *testing.T) {
	tests := []struct {
		name  string
		opts  []client.DeleteOption
		check func(error) bool
	}{
		{"stale resourceVersion", []client.DeleteOption{client.Preconditions{ResourceVersion: new("0")}}, apierrors.IsConflict},
		{"other uid", []client.DeleteOption{client.Preconditions{UID: new(types.UID("x"))}}, apierrors.IsConflict},
		{"orphan", []client.DeleteOption{client.PropagationPolicy(metav1.DeletePropagationOrphan)}, apierrors.IsBadRequest},
		{"dry run", []client.DeleteOption{client.DryRunAll}, apierrors.IsBadRequest},
		{"matching preconditions", []client.DeleteOption{client.Preconditions{UID: new(types.UID("uid-00000001")), ResourceVersion: new("1")}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			c := s.Client()
			mustCreate(t, c, node("n"))
			err := c.Delete(ctx, node("n"), tt.opts...)
			if tt.check == nil {
				if err != nil || exists(t, c, node("n")) {
					t.Errorf("Delete: %v, exists %v; want deleted", err, exists(t, c, node("n")))
				}
				return
			}
			if !tt.check(err) {
				t.Errorf("Delete error = %v", err)
			}
			if !exists(t, c, node("n")) {
				t.Error("deleted despite the error")
			}
		})
	}
}

func ownedBy(obj client.Object, owners ...client.Object) client.Object {
	for _, o := range owners {
		obj.SetOwnerReferences(append(obj.GetOwnerReferences(), metav1.OwnerReference{
			APIVersion: "v1", Kind: "ConfigMap", Name: o.GetName(), UID: o.GetUID(),
		}))
	}
	return obj
}

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func TestGarbageCollection(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	root, second, mid := cm("root"), cm("second"), cm("mid")
	mustCreate(t, c, root, second)
	mustCreate(t, c, ownedBy(mid, root))
	leaf := ownedBy(pod("ns", "leaf", ""), mid)
	shared := ownedBy(pod("ns", "shared", ""), root, second)
	held := ownedBy(pod("ns", "held", ""), root)
	held.SetFinalizers([]string{"hold"})
	mustCreate(t, c, leaf, shared, held)

	var deleted []string
	s.Subscribe(func(ev apiserver.Event) {
		if ev.Type == apiserver.Deleted {
			deleted = append(deleted, ev.Object.GetName())
		}
	})
	if err := c.Delete(ctx, cm("root")); err != nil {
		t.Fatal(err)
	}
	// Dependents go in GVK, namespace, name order (ConfigMap mid before the
	// pods), and mid's own dependents go as soon as it does.
	if want := []string{"root", "mid", "leaf"}; !equalStrings(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	if !exists(t, c, pod("ns", "shared", "")) {
		t.Error("a dependent with a live owner was collected")
	}
	h := get(t, c, pod("ns", "held", ""))
	if h.DeletionTimestamp == nil {
		t.Error("a collected dependent with a finalizer has no deletionTimestamp")
	}
	if err := c.Delete(ctx, cm("second")); err != nil {
		t.Fatal(err)
	}
	if exists(t, c, pod("ns", "shared", "")) {
		t.Error("a dependent outlived its last owner")
	}
}

func TestDeleteAllOf(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	a, b, other := pod("ns", "a", ""), pod("ns", "b", ""), pod("ns", "c", "")
	a.Labels = map[string]string{"app": "x"}
	b.Labels = map[string]string{"app": "x"}
	mustCreate(t, c, a, b, other)
	if err := c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("ns"), client.MatchingLabels{"app": "x"}); err != nil {
		t.Fatal(err)
	}
	var list corev1.PodList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if got := names(list.Items); !equalStrings(got, []string{"ns/c"}) {
		t.Errorf("left %v, want [ns/c]", got)
	}
}

func TestEviction(t *testing.T) {
	t.Run("default deletes the pod", func(t *testing.T) {
		s, _ := newServer(t)
		c := s.Client()
		mustCreate(t, c, pod("ns", "p", "n1"))
		if err := c.SubResource("eviction").Create(ctx, pod("ns", "p", ""), &policyv1.Eviction{}); err != nil {
			t.Fatal(err)
		}
		if exists(t, c, pod("ns", "p", "")) {
			t.Error("evicted pod still exists")
		}
		if got := s.Count(apiserver.VerbEvict); got != 1 {
			t.Errorf("eviction count = %d, want 1", got)
		}
	})
	t.Run("handler refuses", func(t *testing.T) {
		s, _ := newServer(t)
		c := s.Client()
		mustCreate(t, c, pod("ns", "p", "n1"))
		var seen *corev1.Pod
		var seenEv *policyv1.Eviction
		s.SetEvictionHandler(func(_ context.Context, p *corev1.Pod, ev *policyv1.Eviction) error {
			seen, seenEv = p, ev
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		})
		err := c.SubResource("eviction").Create(ctx, pod("ns", "p", ""), &policyv1.Eviction{})
		if !apierrors.IsTooManyRequests(err) {
			t.Errorf("eviction error = %v, want TooManyRequests", err)
		}
		if !exists(t, c, pod("ns", "p", "")) {
			t.Error("refused eviction deleted the pod")
		}
		if seen == nil || seen.Spec.NodeName != "n1" || seenEv.Name != "p" || seenEv.Namespace != "ns" {
			t.Errorf("handler saw pod %+v eviction %+v, want the stored pod and a named eviction", seen, seenEv)
		}
	})
	t.Run("handler admits", func(t *testing.T) {
		s, _ := newServer(t)
		c := s.Client()
		mustCreate(t, c, pod("ns", "p", "n1"))
		s.SetEvictionHandler(func(ctx context.Context, p *corev1.Pod, _ *policyv1.Eviction) error {
			return s.AdminClient().Delete(ctx, p)
		})
		if err := c.SubResource("eviction").Create(ctx, pod("ns", "p", ""), &policyv1.Eviction{}); err != nil {
			t.Fatal(err)
		}
		if exists(t, c, pod("ns", "p", "")) {
			t.Error("admitted eviction left the pod")
		}
	})
	t.Run("missing pod", func(t *testing.T) {
		s, _ := newServer(t)
		err := s.Client().SubResource("eviction").Create(ctx, pod("ns", "p", ""), &policyv1.Eviction{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("eviction error = %v, want NotFound", err)
		}
	})
}

// CountOf counts requests of Client() per verb and kind; the admin
// client (the twin's own models) is not counted.
func TestCountOfByKind(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, pod("ns", "a", "n1"), pod("ns", "b", "n1"), cm("x"))
	if err := c.Delete(ctx, pod("ns", "a", "")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cm("x")); err != nil {
		t.Fatal(err)
	}
	if err := s.AdminClient().Delete(ctx, pod("ns", "b", "")); err != nil {
		t.Fatal(err)
	}
	if got := s.CountOf(apiserver.VerbDelete, "Pod"); got != 1 {
		t.Errorf("CountOf(delete, Pod) = %d, want 1 (the admin delete does not count)", got)
	}
	if got := s.CountOf(apiserver.VerbDelete, "ConfigMap"); got != 1 {
		t.Errorf("CountOf(delete, ConfigMap) = %d, want 1", got)
	}
	if got := s.Count(apiserver.VerbDelete); got != 2 {
		t.Errorf("Count(delete) = %d, want 2", got)
	}
	// An eviction and an eviction refused by nothing else: both count as
	// pod removals with the delete, not the ConfigMap's delete.
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	mustCreate(t, c, pod("ns", "c", "n1"))
	_ = c.SubResource("eviction").Create(ctx, pod("ns", "c", ""), ev)
	if got, want := s.PodRemovals(), s.Count(apiserver.VerbEvict)+s.CountOf(apiserver.VerbDelete, "Pod"); got != want || got != 2 {
		t.Errorf("PodRemovals() = %d; want Count(evict)+CountOf(delete, Pod) = %d, and 2", got, want)
	}
	s.ResetCounts()
	if got := s.CountOf(apiserver.VerbDelete, "Pod"); got != 0 {
		t.Errorf("after ResetCounts CountOf = %d, want 0", got)
	}
	if got := s.PodRemovals(); got != 0 {
		t.Errorf("after ResetCounts PodRemovals = %d, want 0", got)
	}
}
