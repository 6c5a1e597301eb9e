package controller

import (
	"context"
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
