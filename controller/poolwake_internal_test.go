package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/poolfeed"
)

// wokenQueue records the names a handler enqueues.
type wokenQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	names *[]string
}

func (q wokenQueue) Add(r reconcile.Request) { *q.names = append(*q.names, r.Name) }
func (q wokenQueue) AddAfter(r reconcile.Request, _ time.Duration) {
	*q.names = append(*q.names, r.Name)
}

// TestBootcNodeDeletionWakesThePoolsSelectingItsNode: a record is one per
// node, so a pool a Node moved into from another pool cannot create the
// Node's record while the old pool's record is being finalized; the old
// record's deletion must wake the new pool too, not only the record's own
// pool (a two-node probe of the twenty-second session, seed 3: workers-1
// relabelled from pool workers into the existing pool other never got a
// record in other, which stayed "0/1 updated" for the hour).
func TestBootcNodeDeletionWakesThePoolsSelectingItsNode(t *testing.T) {
	pool := func(name string) *v1alpha1.BootcNodePool {
		return &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": name}, Image: "r/os:v1"}}
	}
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	record := func(name, pool string) *v1alpha1.BootcNode {
		return &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.BootcNodeSpec{Pool: pool}}
	}
	for _, tc := range []struct {
		name  string
		nodes []client.Object
		gone  *v1alpha1.BootcNode
		want  []string
	}{
		// The case found: the Node is in pool other now.
		{"node moved into another pool", []client.Object{node("n1", "other")}, record("n1", "workers"), []string{"other", "workers"}},
		// Near cases: still in its own pool (once, not twice), gone, in no pool.
		{"node still in its pool", []client.Object{node("n1", "workers")}, record("n1", "workers"), []string{"workers"}},
		{"node gone", nil, record("n1", "workers"), []string{"workers"}},
		{"node in no pool", []client.Object{node("n1", "none")}, record("n1", "workers"), []string{"workers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{pool("workers"), pool("other")}, tc.nodes...)
			c := fakeapi.Client(t, objs...)
			var got []string
			q := wokenQueue{names: &got}
			for _, ctl := range Controllers(c, poolfeed.New()) {
				if ctl.Name != PoolController {
					continue
				}
				for _, w := range ctl.Watches {
					if _, ok := w.Object.(*v1alpha1.BootcNode); ok {
						w.Handler.Delete(context.Background(), event.DeleteEvent{Object: tc.gone}, q)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("the deletion of BootcNode %s of pool %s woke pools %q, want %q", tc.gone.Name, tc.gone.Spec.Pool, got, tc.want)
			}
		})
	}
}

// TestNodeLeavingWakesThePoolsThatSelectedIt: a Node whose labels change
// wakes the pools that selected it before the change as well as those that
// select it now and its record's pool: a pool that counted the Node as a
// member without a record of its own (the old pool's record was still
// there) was never woken when the Node then left every pool (explorer seed
// 5072 of the node-moves-between-pools-return regression: other said
// "0/1 updated" to the end).
func TestNodeLeavingWakesThePoolsThatSelectedIt(t *testing.T) {
	pool := func(name string) *v1alpha1.BootcNodePool {
		return &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": name}, Image: "r/os:v1"}}
	}
	node := func(pool string, ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"pool": pool}}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		return n
	}
	record := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1alpha1.BootcNodeSpec{Pool: "workers"}}
	for _, tc := range []struct {
		name     string
		old, cur *corev1.Node
		want     []string
	}{
		// The case found: in other (the record still workers'), then in no pool.
		{"left every pool", node("other", corev1.ConditionTrue), node("none", corev1.ConditionTrue), []string{"other", "workers"}},
		// Near cases: moved into other (other selects it now), a readiness change in other.
		{"moved into other", node("workers", corev1.ConditionTrue), node("other", corev1.ConditionTrue), []string{"other", "workers"}},
		{"readiness only", node("other", corev1.ConditionTrue), node("other", corev1.ConditionFalse), []string{"other", "workers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeapi.Client(t, pool("workers"), pool("other"), record, tc.cur)
			var got []string
			q := wokenQueue{names: &got}
			for _, ctl := range Controllers(c, poolfeed.New()) {
				if ctl.Name != PoolController {
					continue
				}
				for _, w := range ctl.Watches {
					if _, ok := w.Object.(*corev1.Node); ok {
						w.Handler.Update(context.Background(), event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.cur}, q)
					}
				}
			}
			slices.Sort(got)
			got = slices.Compact(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Node n1 labelled %v then %v woke pools %q, want %q", tc.old.Labels, tc.cur.Labels, got, tc.want)
			}
		})
	}
}
