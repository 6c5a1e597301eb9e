package pool

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/rollout"
)

// TestPassLeavesTheViewAsTheFeedSaysIt: a pass works on its pool view's
// rows in place, and the records it creates and directs are its own
// (rowEdits): once it is over, the view says what the feed says, which has
// not seen those writes yet, and its tally counts those rows. A row the
// pass left changed would make the next pass read a write the cache does
// not show.
func TestPassLeavesTheViewAsTheFeedSaysIt(t *testing.T) {
	const v1, v2 = rigV1, rigV2
	digest := rigDigest
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 1, 25, 0, 0, time.UTC))
	p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "workers", Finalizers: []string{v1alpha1.Finalizer}, Generation: 1}}
	p.Spec.NodeSelector = map[string]string{"pool": "workers"}
	p.Spec.Image = v2
	objs := []client.Object{p}
	node := func(name string) *corev1.Node { return rigNode(name, clk.Now().Add(-time.Hour)) }
	record := func(name string) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelPool: "workers"}, Finalizers: []string{v1alpha1.Finalizer}},
			Spec:       v1alpha1.BootcNodeSpec{Pool: "workers", DesiredImage: v1},
		}
		bn.Status.Booted = &v1alpha1.HostImage{Image: v1, Digest: digest(v1)}
		bn.Status.Phase = v1alpha1.PhaseUpdated
		bn.Status.Rollout.TargetImage = v1
		return bn
	}
	// a, b: records on v1, directed to v2 by the pass. c: a Node without
	// a record, which the pass creates. gone: a record whose Node is gone,
	// which the pass deletes.
	for _, name := range []string{"a", "b"} {
		objs = append(objs, node(name), record(name))
	}
	objs = append(objs, node("c"), record("gone"))
	cl := fakeapi.Client(t, objs...)
	feed := poolfeed.New()
	for _, o := range objs {
		feed.Observe(o, false)
	}
	r := NewReconciler(cl, options.Options{Clock: clk, Feed: feed})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "workers"}}); err != nil {
		t.Fatal(err)
	}
	// The pass wrote: a and b directed, c created, gone deleted.
	for name, want := range map[string]string{"a": v2, "b": v2, "c": v2} {
		var bn v1alpha1.BootcNode
		if err := cl.Get(context.Background(), types.NamespacedName{Name: name}, &bn); err != nil {
			t.Fatal(err)
		}
		if bn.Spec.DesiredImage != want {
			t.Fatalf("%s: spec.desiredImage %q after the pass; want %q (the test needs a pass that writes)", name, bn.Spec.DesiredImage, want)
		}
	}
	var gone v1alpha1.BootcNode
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "gone"}, &gone); err == nil && gone.DeletionTimestamp == nil {
		t.Fatal("the record of a gone Node is still there after the pass (the test needs a pass that deletes)")
	}
	v := r.views["workers"]
	if v == nil {
		t.Fatal("no view kept for the pool")
	}
	fresh := feed.Rows(&poolfeed.Scope{Pool: "workers", Sel: labels.SelectorFromSet(p.Spec.NodeSelector)})
	if len(v.rows) != len(fresh) {
		t.Fatalf("view has %d rows after the pass, the feed %d", len(v.rows), len(fresh))
	}
	for i := range fresh {
		if v.rows[i] != fresh[i] {
			t.Errorf("row %s after the pass: record %p, desired %q; the feed says record %p, desired %q", fresh[i].Name, v.rows[i].Record, v.rows[i].Desired, fresh[i].Record, fresh[i].Desired)
		}
	}
	// And the view's tally counts the view's rows.
	var count rollout.Tally
	count.Count(fresh, v2, digest(v2))
	if !v.tally.Counts(v2, digest(v2)) || !v.tally.Equal(&count) {
		t.Errorf("the view's tally after the pass %+v; a count of its rows %+v", v.tally, count)
	}
}
