package pool

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
)

// reasons keeps the reasons of the Events a reconciler records.
type reasons []string

func (e *reasons) Eventf(_ runtime.Object, _, reason, _ string, _ ...any) {
	*e = append(*e, reason)
}

// tagResolver resolves every tag to digest.
type tagResolver struct{ digest string }

func (r tagResolver) Resolve(_ context.Context, ref string, _ *corev1.Secret) (string, error) {
	return "registry.example/os@" + r.digest, nil
}

// TestResolvedSaidOnceWritten: a tag resolved to a new digest is said once
// the pool's status that records it is written: said at the resolution, a
// pass whose status write then failed (or conflicted, on a cache behind
// the pool's own write) resolved the tag again on its retry, and said it
// again (the seed 120245 regression of
// cluster-halt-lifted-by-node-delete-karpenter: fourteen Resolved events
// for one digest in the first 19 s). A pass that resolves the same digest
// again says nothing.
func TestResolvedSaidOnceWritten(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "kp", Finalizers: []string{v1alpha1.Finalizer}}}
	p.Spec.NodeSelector = map[string]string{"pool": "kp"}
	p.Spec.Image = "registry.example/os:v2"
	base := fakeapi.Client(t, p)
	failing := true
	cl := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if failing {
				return apierrors.NewInternalError(context.DeadlineExceeded)
			}
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	feed := poolfeed.New()
	feed.Observe(p, false)
	var ev reasons
	r := NewReconciler(cl, options.Options{Clock: clk, Feed: feed, Resolver: tagResolver{digest}, Recorder: &ev})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "kp"}}
	if _, err := r.Reconcile(context.Background(), req); err == nil {
		t.Fatal("the pass whose status write fails: no error")
	}
	if len(ev) != 0 {
		t.Errorf("events %v from the pass whose status write failed; want none: the digest was not recorded", ev)
	}
	failing = false
	for i := 0; i < 2; i++ {
		clk.Step(time.Minute) // past the pacing of passes
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	var got v1alpha1.BootcNodePool
	if err := base.Get(context.Background(), req.NamespacedName, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.TargetDigest != digest {
		t.Fatalf("target digest %q written, want %q", got.Status.TargetDigest, digest)
	}
	n := 0
	for _, e := range ev {
		if e == "Resolved" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("events %v; want one Resolved, once the status write landed", ev)
	}
}
