package twin

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	nodectl "github.com/bootroll/bootroll/controller/node"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

// staleWorld is a runner with just what a controller process needs, and a
// BootcNode that holds a slot in a pool that does not exist: the node
// reconciler gives the slot back with a record patch locked on the
// resourceVersion it read.
func staleWorld(t *testing.T, prof string) (*runner, client.Client) {
	return staleWorldWith(t, prof, true)
}

// staleWorldWith is staleWorld, with or without the BootcNode's Node.
func staleWorldWith(t *testing.T, prof string, withNode bool) (*runner, client.Client) {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), 1)
	api := apiserver.New(scheme, eng.Clock())
	ctx := logf.IntoContext(context.Background(), logr.Discard())
	for _, ix := range index.All() {
		if err := api.IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			t.Fatal(err)
		}
	}
	r := &runner{eng: eng, api: api, ctx: ctx, profile: prof}
	admin := api.AdminClient()
	n := &corev1.Node{}
	n.Name = "n"
	bn := &v1alpha1.BootcNode{}
	bn.Name = "n"
	bn.Spec.Pool = "gone"
	objs := []client.Object{n, bn}
	if !withNode {
		// Past the finalizer's first write, so that the locked patch
		// that conflicts is the slot's return.
		objs = objs[1:]
		bn.Finalizers = []string{v1alpha1.Finalizer}
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	bn.Status.Phase = v1alpha1.PhaseDraining
	if err := admin.Status().Update(ctx, bn); err != nil {
		t.Fatal(err)
	}
	c := api.Client()
	if prof != ProfileInstant {
		api.Subscribe(func(ev apiserver.Event) {
			if r.ctrl != nil {
				r.ctrl.cache.Observe(ev)
			}
		})
		p, err := r.newProc("controller", "", controllerKinds(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.cache.Sync(); err != nil {
			t.Fatal(err)
		}
		r.ctrl, c = p, p.client
	}
	// Someone else writes the BootcNode (a label): the store moves on, the
	// cache learns of it a few milliseconds later.
	bn.Labels = map[string]string{"touched": "yes"}
	if err := admin.Update(ctx, bn); err != nil {
		t.Fatal(err)
	}
	return r, c
}

func reconcileNode(t *testing.T, r *runner, c client.Client) (requeue bool) {
	t.Helper()
	rec := nodectl.NewReconciler(c, options.Options{Clock: r.eng.Clock(), Metrics: options.NewMetrics(nil), Feed: poolfeed.New()})
	res, err := rec.Reconcile(r.ctx, request("n"))
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter == nodectl.ConflictRetry // the reconciler's conflict answer
}

func phaseOf(t *testing.T, r *runner) v1alpha1.NodePhase {
	t.Helper()
	var bn v1alpha1.BootcNode
	if err := r.api.AdminClient().Get(r.ctx, client.ObjectKey{Name: "n"}, &bn); err != nil {
		t.Fatal(err)
	}
	return bn.Status.Phase
}

// TestControllerReadsStaleCache shows the real node reconciler reading its
// cache: right after another writer changed the BootcNode, it reads the
// old resourceVersion and its locked patch conflicts; once the event has
// reached the cache, the same reconcile succeeds. Under the instant
// profile (reads see the store) there is no conflict: the control.
func TestControllerReadsStaleCache(t *testing.T) {
	r, c := staleWorld(t, ProfileDefault)
	if !reconcileNode(t, r, c) {
		t.Fatal("a reconcile right after a foreign write did not conflict: it did not read the (stale) cache")
	}
	if got := phaseOf(t, r); got != v1alpha1.PhaseDraining {
		t.Fatalf("phase %s after a conflicted patch, want Draining", got)
	}
	r.eng.RunUntil(r.eng.Now().Add(time.Second))
	if reconcileNode(t, r, c) {
		t.Fatal("a reconcile after the event reached the cache still conflicted")
	}
	if got := phaseOf(t, r); got == v1alpha1.PhaseDraining {
		t.Fatalf("phase still %s: the slot was not given back", got)
	}

	r, c = staleWorld(t, ProfileInstant)
	if reconcileNode(t, r, c) {
		t.Fatal("instant profile: the reconcile conflicted though it reads the store")
	}
}

// TestNodeGoneConflictRetries: a record whose Node is gone gives its slot
// back with the same locked patch; when that patch conflicts (a stale
// cache), the reconcile answers with the conflict retry like every other
// step, not with an error (which the manager logs as "Reconciler error" and
// retries with the per-item backoff; seen in a cluster run of the
// emptiness race, where Karpenter deleted Nodes in the middle of updates).
func TestNodeGoneConflictRetries(t *testing.T) {
	r, c := staleWorldWith(t, ProfileDefault, false)
	if !reconcileNode(t, r, c) {
		t.Fatal("a reconcile of a record whose Node is gone, right after a foreign write, did not answer with the conflict retry")
	}
	r.eng.RunUntil(r.eng.Now().Add(time.Second))
	if reconcileNode(t, r, c) {
		t.Fatal("a reconcile after the event reached the cache still conflicted")
	}
	if got := phaseOf(t, r); got != v1alpha1.PhasePending {
		t.Fatalf("phase %s, want Pending: the slot of a gone Node was not given back", got)
	}
}

// The controller's cache holds objects other than Pods and Nodes without
// their managedFields, as options.CacheOptions' DefaultTransform leaves
// them, and never modifies what the API server's store holds; the
// daemons' caches keep them.
func TestControllerCacheDropsManagedFields(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}, ManagedFields: mf}}
	u := &unstructured.Unstructured{Object: map[string]any{"kind": "NodeClaim", "metadata": map[string]any{"name": "c1"}}}
	u.SetManagedFields(mf)
	tr := transformFor("controller")
	for _, in := range []client.Object{bn, u} {
		out := tr(in)
		if len(out.GetManagedFields()) != 0 {
			t.Errorf("%T: the controller's cache holds managedFields %v", in, out.GetManagedFields())
		}
		if len(in.GetManagedFields()) != 1 {
			t.Errorf("%T: the transform modified the stored object", in)
		}
		if out.GetName() != in.GetName() || !maps.Equal(out.GetLabels(), in.GetLabels()) {
			t.Errorf("%T: the transform lost more than managedFields: %v", in, out)
		}
	}
	if got := tr(&v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}); got.GetName() != "n2" {
		t.Errorf("an object without managedFields changed: %v", got)
	}
	if transformFor("daemon/n1") != nil {
		t.Errorf("a daemon's cache transforms its objects")
	}
}
