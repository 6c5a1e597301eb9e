package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestLeftPool: before the boot order the pool is read afresh, and a node
// whose pool is gone, being deleted or no longer selecting it gets none
// (issue 11, controller-restart-mid-drain seed 7: a stale cache issued a
// boot order 5 s after the pool's deletion; node-churn seed 415, 2 s after
// a relabel).
func TestLeftPool(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
	pool := func(mut func(p *v1alpha1.BootcNodePool)) *v1alpha1.BootcNodePool {
		p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		p.Spec.NodeSelector = map[string]string{"pool": "p"}
		if mut != nil {
			mut(p)
		}
		return p
	}
	relabelled := node.DeepCopy()
	relabelled.Labels = map[string]string{"pool": "elsewhere"}
	cases := []struct {
		name    string
		pool    *v1alpha1.BootcNodePool
		apiNode *corev1.Node // the Node on the API server; the cache has node
		want    bool
	}{
		{"member", pool(nil), node, false},
		{"pool gone", nil, node, true},
		{"pool being deleted", pool(func(p *v1alpha1.BootcNodePool) {
			p.Finalizers = []string{v1alpha1.Finalizer}
			p.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
		}), node, true},
		{"no longer selected", pool(func(p *v1alpha1.BootcNodePool) { p.Spec.NodeSelector = map[string]string{"pool": "q"} }), node, true},
		{"relabelled, the cache not there yet", pool(nil), relabelled, true},
		{"Node gone", pool(nil), nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var objs []client.Object
			if c.pool != nil {
				objs = append(objs, c.pool)
			}
			if c.apiNode != nil {
				objs = append(objs, c.apiNode.DeepCopy())
			}
			cl := fakeapi.Client(t, objs...)
			r := NewReconciler(cl, options.Options{})
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			s := &nodeStep{bn: bn, node: node}
			pool, err := r.freshPool(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.leftPool(context.Background(), s, pool)
			if err != nil || got != c.want {
				t.Fatalf("leftPool = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
