package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

// run wires an engine, a server and a queue the way the twin does and
// returns the trace of a small randomised run.
func run(t *testing.T, seed uint64) string {
	t.Helper()
	e := engine.New(t0, seed)
	s := apiserver.New(newScheme(t), e.Clock())
	c := s.Client()
	var trace strings.Builder
	e.OnEvent(func(name string) { fmt.Fprintf(&trace, "%v %s\n", e.Now().Sub(t0), name) })

	// The reconciler mirrors each Node into a BootcNode and relabels the
	// Node now and then, at random.
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		// The queue's event names say the queue, not the request.
		fmt.Fprintf(&trace, "    reconciling %s\n", req.Name)
		var n corev1.Node
		if err := c.Get(ctx, req.NamespacedName, &n); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		b := bootcNode(n.Name)
		if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, err
		}
		if e.Rand().IntN(3) == 0 {
			n.Labels = map[string]string{"round": fmt.Sprint(e.Rand().IntN(100))}
			if err := c.Update(ctx, &n); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: time.Duration(1+e.Rand().IntN(60)) * time.Second}, nil
	})
	q := engine.NewQueue(e, "mirror", r, engine.QueueOptions{ReconcileLatency: 10 * time.Millisecond})
	s.Subscribe(func(ev apiserver.Event) {
		fmt.Fprintf(&trace, "  %s %T %s rv=%s\n", ev.Type, ev.Object, ev.Object.GetName(), ev.Object.GetResourceVersion())
		if _, ok := ev.Object.(*corev1.Node); ok {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: ev.Object.GetName()}})
		}
	})
	// One in four BootcNode creates fails.
	s.SetFault(func(verb string, gvk schema.GroupVersionKind, _ client.ObjectKey) error {
		if verb == apiserver.VerbCreate && gvk.Kind == "BootcNode" && e.Rand().IntN(4) == 0 {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	})
	for i := range 5 {
		name := fmt.Sprintf("n%d", i)
		e.After(time.Duration(e.Rand().IntN(10))*time.Second, "join/"+name, func() {
			mustCreate(t, s.AdminClient(), node(name))
		})
	}
	e.RunUntil(t0.Add(5 * time.Minute))
	var bns v1alpha1.BootcNodeList
	if err := c.List(ctx, &bns); err != nil || len(bns.Items) != 5 {
		t.Fatalf("BootcNodes after the run: %d, %v; want 5", len(bns.Items), err)
	}
	return trace.String()
}

func TestTwinRunIsDeterministic(t *testing.T) {
	a, b := run(t, 7), run(t, 7)
	if a != b {
		t.Fatalf("two runs with seed 7 differ:\n%s\n---\n%s", a, b)
	}
	if c := run(t, 8); c == a {
		t.Error("seeds 7 and 8 gave the same trace")
	}
	for _, want := range []string{"reconcile/mirror", "reconciled/mirror", "requeue/mirror", "reconciling n0", "ADDED *v1alpha1.BootcNode n0"} {
		if !strings.Contains(a, want) {
			t.Errorf("trace has no %q:\n%s", want, a)
		}
	}
}
