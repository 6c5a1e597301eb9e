package twin

import (
	"context"
	"reflect"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

// queueRef lets controller-runtime's own event handlers enqueue into an
// engine queue: it implements the workqueue interface the handlers take.
// get returns the current queue, which is nil while its process is
// down; adds are then dropped, as events are when no informer runs.
type queueRef struct{ get func() *engine.Queue }

var _ workqueue.TypedRateLimitingInterface[reconcile.Request] = queueRef{}

func (r queueRef) Add(req reconcile.Request) {
	if q := r.get(); q != nil {
		q.Add(req)
	}
}

func (r queueRef) AddAfter(req reconcile.Request, d time.Duration) {
	if q := r.get(); q != nil {
		q.AddAfter(req, d)
	}
}

func (r queueRef) AddRateLimited(req reconcile.Request) {
	if q := r.get(); q != nil {
		q.AddRateLimited(req)
	}
}

func (r queueRef) NumRequeues(req reconcile.Request) int {
	if q := r.get(); q != nil {
		return q.NumRequeues(req)
	}
	return 0
}

func (r queueRef) Len() int {
	if q := r.get(); q != nil {
		return q.Len()
	}
	return 0
}

func (r queueRef) ShuttingDown() bool { return r.get() == nil }

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

// direct returns h with each handler.Funcs in it (also inside a
// poolfeed.Feeding) replaced by directFuncs, which calls the functions
// without handler.Funcs' per-event reflection.
func direct(h handler.EventHandler) handler.EventHandler {
	if f, ok := h.(handler.Funcs); ok {
		return directFuncs{f}
	}
	if feed, inner, ok := poolfeed.Unwrap(h); ok {
		return poolfeed.Feeding(feed, direct(inner))
	}
	return h
}

// directFuncs does what its handler.Funcs does. handler.Funcs asks, by
// reflection on every event (reflect.Type.Implements, a few percent of a
// run), whether its object type implements client.Object, to give the
// initial list's events a low priority on a priority queue; with any
// other queue it calls the function as it is. The twin's queues are
// never priority queues, so directFuncs calls the function at once, and
// hands anything else to handler.Funcs.
type directFuncs struct{ f handler.Funcs }

func isPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request]) bool {
	_, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	return ok
}

func (d directFuncs) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if isPriority(q) {
		d.f.Create(ctx, e, q)
	} else if d.f.CreateFunc != nil {
		d.f.CreateFunc(ctx, e, q)
	}
}

func (d directFuncs) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if isPriority(q) {
		d.f.Update(ctx, e, q)
	} else if d.f.UpdateFunc != nil {
		d.f.UpdateFunc(ctx, e, q)
	}
}

func (d directFuncs) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.f.Delete(ctx, e, q) // no reflection there
}

func (d directFuncs) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	d.f.Generic(ctx, e, q) // no reflection there
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

// controllerWatches are the watches of every controller of ctrls, in
// order, each delivered to the queue queueOf gives for its controller; a
// controller queueOf gives no queue is skipped.
func controllerWatches(ctrls []controller.Controller, queueOf func(name string) workqueue.TypedRateLimitingInterface[reconcile.Request]) []watch {
	var out []watch
	for _, ctl := range ctrls {
		q := queueOf(ctl.Name)
		if q == nil {
			continue
		}
		for _, w := range ctl.Watches {
			typ := reflect.TypeOf(w.Object)
			out = append(out, watch{
				name:       ctl.Name + "/" + typ.Elem().Name(),
				accepts:    func(o client.Object) bool { return reflect.TypeOf(o) == typ },
				predicates: w.Predicates,
				handler:    direct(w.Handler),
				queue:      q,
			})
		}
	}
	return out
}
