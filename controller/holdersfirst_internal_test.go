package controller

import (
	"context"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/node"
)

// TestHoldersFirstInTheInitialList: on controller-runtime's priority
// queue, the node controller's two BootcNode watches (For, and
// holdersFirst) queue a record of a new controller's initial list that
// still holds its Node at node.OwedPriority, one that holds nothing at
// LowPriority, and a record created later at the default priority
// (explorer seed 176934 of the 176681 regression: ten slot holders of a
// deleted pool behind 90 idle records after a controller restart).
func TestHoldersFirstInTheInitialList(t *testing.T) {
	holder := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "held"}}
	holder.Status.Rollout.Cordoned = true
	idle := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "idle"}}
	for _, c := range []struct {
		name    string
		bn      *v1alpha1.BootcNode
		initial bool
		want    int
	}{
		{"a holder in the initial list", holder, true, node.OwedPriority},
		{"an idle record in the initial list", idle, true, handler.LowPriority},
		{"a holder created later", holder, false, 0},
		{"an idle record created later", idle, false, 0},
	} {
		q := priorityqueue.New[reconcile.Request]("test")
		e := event.CreateEvent{Object: c.bn, IsInInitialList: c.initial}
		(&handler.EnqueueRequestForObject{}).Create(context.Background(), e, q)
		holdersFirst.Create(context.Background(), e, q)
		req, prio, _ := q.GetWithPriority()
		if req.Name != c.bn.Name || prio != c.want || q.Len() != 0 {
			t.Errorf("%s: got %s at priority %d (%d more), want %s at %d", c.name, req.Name, prio, q.Len(), c.bn.Name, c.want)
		}
		q.ShutDown()
	}
}

// TestSlotsGrantedQueuesHoldersOwed: on the priority queue, the records
// slotsGranted wakes because they are in the slot table (every holder
// when the pool is deleted, a node granted a slot) go in at
// node.OwedPriority, level with the retries of holders owed a deadline;
// a record woken only by a failure recorded on the pool goes in at the
// default priority (explorer seed 176942 of the
// rollout-100-nodes-cleanup-owed-priority regression: a deleted pool's
// holder queued at the default priority was first looked at 2m18s after
// the deletion, behind other holders' retries every second).
func TestSlotsGrantedQueuesHoldersOwed(t *testing.T) {
	since := metav1.Now()
	old := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, ResourceVersion: "1"}}
	old.Status.Slots = []v1alpha1.Slot{{Node: "a", Image: "i", Since: since}}
	for _, c := range []struct {
		name   string
		mutate func(*v1alpha1.BootcNodePool)
		want   map[string]int
	}{
		{"pool deleted", func(p *v1alpha1.BootcNodePool) { p.DeletionTimestamp = &since },
			map[string]int{"a": node.OwedPriority}},
		{"slot granted", func(p *v1alpha1.BootcNodePool) {
			p.Status.Slots = append(p.Status.Slots, v1alpha1.Slot{Node: "b", Image: "i", Since: since})
		}, map[string]int{"b": node.OwedPriority}},
		{"failure recorded", func(p *v1alpha1.BootcNodePool) {
			p.Status.Failures = []v1alpha1.NodeFailure{{Node: "c", Image: "i"}}
		}, map[string]int{"c": 0}},
	} {
		q := priorityqueue.New[reconcile.Request]("test")
		cur := old.DeepCopy()
		cur.ResourceVersion = "2" // the same one is a resync, queued at LowPriority
		c.mutate(cur)
		slotsGranted.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: cur}, q)
		got := map[string]int{}
		for q.Len() > 0 {
			req, prio, _ := q.GetWithPriority()
			got[req.Name] = prio
			q.Done(req)
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%s: queued %v, want %v", c.name, got, c.want)
		}
		q.ShutDown()
	}
	// Created, as in a new controller's initial list: the same.
	q := priorityqueue.New[reconcile.Request]("test")
	slotsGranted.Create(context.Background(), event.CreateEvent{Object: old}, q)
	if req, prio, _ := q.GetWithPriority(); req.Name != "a" || prio != node.OwedPriority {
		t.Errorf("create: got %s at %d, want a at %d", req.Name, prio, node.OwedPriority)
	}
	q.ShutDown()
}
