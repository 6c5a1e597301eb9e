package twin

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

// queueRef lets controller-runtime's own event handlers enqueue into an
// engine queue: it implements the workqueue interface the handlers take.
// It points at the runner's current queue, which is nil while the
// controller is down; adds are then dropped, as events are when no
// informer runs.
type queueRef struct{ q **engine.Queue }

var _ workqueue.TypedRateLimitingInterface[reconcile.Request] = queueRef{}

func (r queueRef) Add(req reconcile.Request) {
	if q := *r.q; q != nil {
		q.Add(req)
	}
}

func (r queueRef) AddAfter(req reconcile.Request, d time.Duration) {
	if q := *r.q; q != nil {
		q.AddAfter(req, d)
	}
}

func (r queueRef) AddRateLimited(req reconcile.Request) {
	if q := *r.q; q != nil {
		q.AddRateLimited(req)
	}
}

func (r queueRef) NumRequeues(req reconcile.Request) int {
	if q := *r.q; q != nil {
		return q.NumRequeues(req)
	}
	return 0
}

func (r queueRef) Len() int {
	if q := *r.q; q != nil {
		return q.Len()
	}
	return 0
}

func (r queueRef) ShuttingDown() bool { return *r.q == nil }

// The methods a worker uses are not used by event handlers.

func (queueRef) Forget(reconcile.Request) {}
func (queueRef) Get() (reconcile.Request, bool) {
	panic("twin: queueRef.Get: workers are the engine queue's")
}
func (queueRef) Done(reconcile.Request) {}
func (queueRef) ShutDown()              {}
func (queueRef) ShutDownWithDrain()     {}

// counting counts the requests a watch hands its queue, to show where
// reconciles come from.
type counting struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	n uint64
}

func (c *counting) Add(req reconcile.Request) {
	c.n++
	c.TypedRateLimitingInterface.Add(req)
}

func (c *counting) AddAfter(req reconcile.Request, d time.Duration) {
	c.n++
	c.TypedRateLimitingInterface.AddAfter(req, d)
}

// watch is one controller-runtime watch: objects of one Go type, the
// predicates that filter its events and the handler that maps them to
// requests of one queue.
type watch struct {
	name       string
	accepts    func(client.Object) bool
	predicates []predicate.Predicate
	handler    handler.EventHandler
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]
	// counted is queue, counting.
	counted *counting
}

// deliver hands an API server event to the watch the way an informer
// event reaches controller-runtime's handler: predicates first, then the
// handler with the queue.
func (w *watch) deliver(ctx context.Context, ev apiserver.Event) {
	if !w.accepts(ev.Object) {
		return
	}
	if w.counted == nil {
		w.counted = &counting{TypedRateLimitingInterface: w.queue}
	}
	q := w.counted
	switch ev.Type {
	case apiserver.Added:
		e := event.CreateEvent{Object: ev.Object}
		for _, p := range w.predicates {
			if !p.Create(e) {
				return
			}
		}
		w.handler.Create(ctx, e, q)
	case apiserver.Modified:
		e := event.UpdateEvent{ObjectOld: ev.Old, ObjectNew: ev.Object}
		for _, p := range w.predicates {
			if !p.Update(e) {
				return
			}
		}
		w.handler.Update(ctx, e, q)
	case apiserver.Deleted:
		e := event.DeleteEvent{Object: ev.Object}
		for _, p := range w.predicates {
			if !p.Delete(e) {
				return
			}
		}
		w.handler.Delete(ctx, e, q)
	}
}

func isPool(o client.Object) bool      { _, ok := o.(*v1alpha1.BootcNodePool); return ok }
func isBootcNode(o client.Object) bool { _, ok := o.(*v1alpha1.BootcNode); return ok }
func isNode(o client.Object) bool      { _, ok := o.(*corev1.Node); return ok }

// controllerWatches are the watches controller.Setup registers, in its
// order, built from the same exported mapping functions and
// controller-runtime's own handlers and predicates. reader is what the map
// functions read (the manager's cache in production, the API server here).
// When controller.Setup changes, this must follow; TestWatchMappings holds
// the two together.
func controllerWatches(reader client.Reader, pool, node workqueue.TypedRateLimitingInterface[reconcile.Request]) []watch {
	return []watch{
		// Pool controller: For(BootcNodePool) with GenerationChangedPredicate.
		{
			name: "bootcnodepool/BootcNodePool", accepts: isPool,
			predicates: []predicate.Predicate{predicate.GenerationChangedPredicate{}},
			handler:    &handler.EnqueueRequestForObject{},
			queue:      pool,
		},
		// Pool controller: Node → the pools that select it, updates only
		// when membership or slot eligibility may have changed.
		{
			name: "bootcnodepool/Node", accepts: isNode,
			predicates: []predicate.Predicate{predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return controller.NodeMembershipChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
			}}},
			handler: handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
				return controller.NodeToPools(ctx, reader, o.(*corev1.Node))
			}),
			queue: pool,
		},
		// Pool controller: BootcNode → its pool, debounced.
		{
			name: "bootcnodepool/BootcNode", accepts: isBootcNode,
			handler: debouncedPoolHandler(),
			queue:   pool,
		},
		// Node controller: For(BootcNode), every event.
		{
			name: "bootcnode/BootcNode", accepts: isBootcNode,
			handler: &handler.EnqueueRequestForObject{},
			queue:   node,
		},
		// Node controller: Node → the BootcNode of the same name.
		{
			name: "bootcnode/Node", accepts: isNode,
			handler: handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
			}),
			queue: node,
		},
	}
}

// debouncedPoolHandler is controller.Setup's handler of BootcNode events
// for the pool controller (unexported there): the pool is enqueued
// PoolStatusDebounce after a change that matters to it.
func debouncedPoolHandler() handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, r := range controller.BootcNodeToPool(o) {
			q.AddAfter(r, controller.PoolStatusDebounce)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if controller.BootcNodeChangeMatters(e.ObjectOld.(*v1alpha1.BootcNode), e.ObjectNew.(*v1alpha1.BootcNode)) {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}
