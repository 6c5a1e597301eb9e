package controller

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// wokenBy runs slotsGranted's update from old to cur on a plain workqueue
// and returns the names it queued, sorted.
func wokenBy(old, cur *v1alpha1.BootcNodePool) []string {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	slotsGranted.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: cur}, q)
	var out []string
	for q.Len() > 0 {
		r, _ := q.Get()
		out = append(out, r.Name)
		q.Done(r)
	}
	slices.Sort(out)
	return out
}

// TestSlotsGrantedWakesSlotHoldersOnDeletion: a pool update wakes the
// records of the slots it granted; one that deletes the pool or changes
// its spec wakes every slot holder, which must give the node back or
// withdraw a boot order the change voids (explorer seed 90128 of
// plain-rollout-10: a slot holder heard of its pool's deletion only at its
// daemon's next report, and its daemon rebooted meanwhile).
func TestSlotsGrantedWakesSlotHoldersOnDeletion(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	pool.Status.Slots = []v1alpha1.Slot{{Node: "a", Image: "i", Since: since}, {Node: "b", Image: "i", Since: since}}
	woken := func(mutate func(*v1alpha1.BootcNodePool)) []string {
		next := pool.DeepCopy()
		mutate(next)
		return wokenBy(pool, next)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) { p.Status.Summary = "x" }); len(got) != 0 {
		t.Errorf("a status change with the same slots woke %v, want none", got)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) {
		p.Status.Slots = append(p.Status.Slots, v1alpha1.Slot{Node: "c", Image: "i", Since: since})
	}); !slices.Equal(got, []string{"c"}) {
		t.Errorf("a slot granted woke %v, want [c]", got)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) {
		p.DeletionTimestamp = &since
		p.Generation = 2
	}); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the pool's deletion woke %v, want both slot holders [a b]", got)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) { p.Generation = 2 }); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("a spec change woke %v, want both slot holders [a b]", got)
	}
}

// TestSlotsGrantedWakesRecordsOfNewFailures: a failure recorded on the
// pool wakes the record of its node, which failedEarlier marks Failed
// when it was made again after the failure; a record whose last reconcile
// read the pool before the failure reached the cache waited for a slot
// the pool never grants it (explorer seed 177830 of the 176717
// regression: the pool said "0/1 updated; 1 staged" for good). A failure
// already listed, or one dropped, wakes nothing.
func TestSlotsGrantedWakesRecordsOfNewFailures(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	pool.Status.Failures = []v1alpha1.NodeFailure{{Node: "a", Image: "i", Reason: "BootFailed", Time: at}}
	woken := func(mutate func(*v1alpha1.BootcNodePool)) []string {
		next := pool.DeepCopy()
		mutate(next)
		return wokenBy(pool, next)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) {
		p.Status.Failures = append(p.Status.Failures, v1alpha1.NodeFailure{Node: "b", Image: "i", Reason: "BootFailed", Time: at})
	}); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a failure recorded woke %v, want [b]", got)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) {
		p.Status.Failures = []v1alpha1.NodeFailure{{Node: "a", Image: "j", Reason: "BootFailed", Time: at}}
	}); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a failure of another image woke %v, want [a]", got)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) { p.Status.Summary = "x" }); len(got) != 0 {
		t.Errorf("a status change with the same failures woke %v, want none", got)
	}
	if got := woken(func(p *v1alpha1.BootcNodePool) { p.Status.Failures = nil }); len(got) != 0 {
		t.Errorf("the failures dropped woke %v, want none", got)
	}
}

// TestSlotsGrantedAsSlotMap compares the nodes a pool update wakes with
// those of a map from each node to a copy of its (last) old slot, over
// random slot tables with nodes added, dropped, regranted and repeated.
func TestSlotsGrantedAsSlotMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	table := func() []v1alpha1.Slot {
		var out []v1alpha1.Slot
		for range rng.IntN(8) {
			out = append(out, v1alpha1.Slot{
				Node:  string(rune('a' + rng.IntN(6))),
				Image: string(rune('x' + rng.IntN(2))),
				Since: metav1.NewTime(t0.Add(time.Duration(rng.IntN(2)) * time.Second)),
			})
		}
		return out
	}
	want := func(old, cur []v1alpha1.Slot) []string {
		had := map[string]v1alpha1.Slot{}
		for _, s := range old {
			had[s.Node] = s
		}
		var out []string
		for _, s := range cur {
			if o, ok := had[s.Node]; !ok || o.Image != s.Image || !o.Since.Equal(&s.Since) {
				out = append(out, s.Node)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for range 10000 {
		po := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
		po.Status.Slots = table()
		pn := po.DeepCopy()
		pn.Status.Slots = table()
		got := wokenBy(po, pn)
		if w := want(po.Status.Slots, pn.Status.Slots); !slices.Equal(got, w) {
			t.Fatalf("old %v new %v: woke %v, want %v", po.Status.Slots, pn.Status.Slots, got, w)
		}
	}
}
