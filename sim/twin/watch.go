package twin

import (
	"context"
	"reflect"
	"slices"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
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
// engine queue: it implements the workqueue interface the handlers take,
// the priority queue's (controller-runtime v0.25's default, whose rules
// the engine queue follows) included, so that the handlers give the
// initial list's events controller-runtime's LowPriority themselves.
// get returns the current queue, which is nil while its process is
// down; adds are then dropped, as events are when no informer runs.
type queueRef struct{ get func() *engine.Queue }

var _ priorityqueue.PriorityQueue[reconcile.Request] = queueRef{}

// AddWithOpts queues items at o's priority (0 when unset), after o.After
// or its backoff when o.RateLimited.
func (r queueRef) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if q := r.get(); q != nil {
		for _, req := range items {
			q.AddWithPriority(req, o.After, o.RateLimited, ptr.Deref(o.Priority, 0))
		}
	}
}

func (queueRef) GetWithPriority() (reconcile.Request, int, bool) {
	panic("twin: queueRef.GetWithPriority: workers are the engine queue's")
}

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

// AddWithOpts counts and hands the adds to the queue's AddWithOpts (a
// queue that is no priority queue gets them without their priority).
func (c *counting) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	c.n += uint64(len(items))
	if pq, ok := c.TypedRateLimitingInterface.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(o, items...)
		return
	}
	for _, req := range items {
		switch {
		case o.RateLimited:
			c.TypedRateLimitingInterface.AddRateLimited(req)
		default:
			c.TypedRateLimitingInterface.AddAfter(req, o.After)
		}
	}
}

func (c *counting) GetWithPriority() (reconcile.Request, int, bool) {
	panic("twin: counting.GetWithPriority: workers are the engine queue's")
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
// initial list's events, and updates whose resourceVersion did not
// change (a resync), a low priority on a priority queue; otherwise it
// calls the function as it is. The twin hands over no update of an
// unchanged resourceVersion (watch.go's controllerWatches; twin.go), so
// directFuncs goes through handler.Funcs for the initial list's create
// events only, and calls the function at once for the others.
type directFuncs struct{ f handler.Funcs }

func isPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request]) bool {
	_, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	return ok
}

func (d directFuncs) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.IsInInitialList && isPriority(q) {
		d.f.Create(ctx, e, q)
	} else if d.f.CreateFunc != nil {
		d.f.CreateFunc(ctx, e, q)
	}
}

func (d directFuncs) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if isPriority(q) && e.ObjectOld != nil && e.ObjectNew != nil && e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
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
	name string
	// typ is the Go type of the objects watched: events of other types
	// are not the watch's.
	typ        reflect.Type
	predicates []predicate.Predicate
	handler    handler.EventHandler
	queue      workqueue.TypedRateLimitingInterface[reconcile.Request]
	// counted is queue, counting.
	counted *counting
}

// deliver hands an API server event to the watch the way an informer
// event reaches controller-runtime's handler: predicates first, then the
// handler with the queue. initial says an Added event is one of the
// initial list a process's informers deliver before its workers start
// (event.CreateEvent's IsInInitialList: controller-runtime's handlers
// queue it at LowPriority, behind the events of changes).
func (w *watch) deliver(ctx context.Context, ev apiserver.Event, initial bool) {
	if reflect.TypeOf(ev.Object) != w.typ {
		return
	}
	if w.counted == nil {
		w.counted = &counting{TypedRateLimitingInterface: w.queue}
	}
	q := w.counted
	switch ev.Type {
	case apiserver.Added:
		e := event.CreateEvent{Object: ev.Object, IsInInitialList: initial}
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
				typ:        typ,
				predicates: w.Predicates,
				handler:    direct(w.Handler),
				queue:      q,
			})
		}
	}
	return out
}

// watchSet is a process's watches, in order, with the watches of each
// object type listed apart (byType), so that an event is offered to the
// watches of its type only, in their order, instead of to every watch.
type watchSet struct {
	all    []watch
	byType []typeWatches
}

// typeWatches are the watches of a watchSet that watch objects of typ.
type typeWatches struct {
	typ     reflect.Type
	watches []*watch
}

// newWatchSet returns the set of the watches ws, which it keeps.
func newWatchSet(ws []watch) watchSet {
	s := watchSet{all: ws}
	for i := range ws {
		w := &ws[i]
		j := slices.IndexFunc(s.byType, func(t typeWatches) bool { return t.typ == w.typ })
		if j < 0 {
			j = len(s.byType)
			s.byType = append(s.byType, typeWatches{typ: w.typ})
		}
		s.byType[j].watches = append(s.byType[j].watches, w)
	}
	return s
}

// deliver hands ev to the watches of its object's type, in order, as
// delivering it to every watch of the set does (watch.deliver).
func (s *watchSet) deliver(ctx context.Context, ev apiserver.Event, initial bool) {
	typ := reflect.TypeOf(ev.Object)
	for i := range s.byType {
		if s.byType[i].typ == typ {
			for _, w := range s.byType[i].watches {
				w.deliver(ctx, ev, initial)
			}
			return
		}
	}
}
