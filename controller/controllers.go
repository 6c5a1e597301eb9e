// Package controller is bootroll's rollout controller: the pool reconciler
// (membership, slots, status) and the node reconciler (cordon, drain,
// reboot, verify, uncordon). Both take their edges (client, clock,
// resolver, event recorder, metrics) from their constructors; this file
// wires them for a controller-runtime manager and the twin wires the same
// constructors to its simulated API server.
package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/internal/cached"
	"github.com/bootroll/bootroll/controller/node"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/pinned"
	"github.com/bootroll/bootroll/controller/pool"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/readopts"
)

// The controllers, by name.
const (
	PoolController      = "bootcnodepool"
	NodeController      = "bootcnode"
	PinnedSetController = "pinnedimageset"
)

// WatchSpec is one watch of a controller: the watched type, whether it is
// the controller's primary type (its Handler enqueues the object itself),
// the predicates and the handler that maps events to requests.
type WatchSpec struct {
	Object     client.Object
	For        bool
	Predicates []predicate.Predicate
	Handler    handler.EventHandler
}

// Controller is one of bootroll's controllers: its name, how its
// reconciler is built from the edges, and its watches, in order.
type Controller struct {
	Name    string
	New     func(c client.Client, opts options.Options) reconcile.Reconciler
	Watches []WatchSpec
	// Workers is how many of its requests run at once
	// (MaxConcurrentReconciles; 0 means 1). A request is never run by two
	// workers at once, in the manager as in the twin.
	Workers int
}

// NodeWorkers is how many nodes the node controller reconciles at once.
// Each node's reconcile reads and writes only that node's objects (the
// pool's grants say which nodes may take slots), so they can overlap; with
// one worker the controller's progress over a pool was one API round trip
// after another: under an API server answering in 0-1 s, giving back the
// 100 nodes of a deleted pool took over 4 minutes, each node waiting for
// the 99 others between its steps (explorer seed 137292 of
// rollout-100-nodes). Four were not enough when half of such a pool
// held slots at its deletion under requests taking 0-3 s, a third of them
// failing: a release is three to five round trips, retried from the first
// after a failure, and a holder was still cordoned 2 minutes after (explorer
// seeds 176942, 176915, 176907; 144 of 180 explored runs of their scenarios
// failed at four workers, 10 at eight, 1 at sixteen; docs/decisions.md).
const NodeWorkers = 16

// Controllers is the one list of bootroll's controllers. Setup registers
// each with a manager (cmd/bootroll-controller) and the twin builds a
// queue for each and delivers its API server's events through the same
// watches, so a controller added here runs in both, and events map to
// requests the same way in both. reader is what the map functions read
// (the manager's cache, or the twin's); the pool controller's BootcNode
// and Node handlers also record every event into feed, the pool
// reconciler's Options.Feed.
func Controllers(reader client.Reader, feed *poolfeed.Feed) []Controller {
	self := &handler.EnqueueRequestForObject{}
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	return []Controller{
		{Name: PoolController, New: func(c client.Client, o options.Options) reconcile.Reconciler { return pool.NewReconciler(c, o) }, Watches: []WatchSpec{
			// A pool being deleted is a generation change too (the API
			// server bumps it with the deletionTimestamp); the explicit
			// check keeps that from depending on it.
			{Object: &v1alpha1.BootcNodePool{}, For: true, Handler: self,
				Predicates: []predicate.Predicate{predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, deletionChanged, failuresChanged)}},
			// Node events that can change membership or eligibility reach
			// the pools that select the node, debounced like BootcNode
			// events: a reboot flips readiness twice per node.
			{Object: &corev1.Node{}, Handler: poolfeed.Feeding(feed, debouncedNodePoolHandler(reader))},
			{Object: &v1alpha1.BootcNode{}, Handler: poolfeed.Feeding(feed, debouncedPoolHandler(reader))},
		}},
		{Name: NodeController, New: func(c client.Client, o options.Options) reconcile.Reconciler { return node.NewReconciler(c, o) }, Watches: []WatchSpec{
			{Object: &v1alpha1.BootcNode{}, For: true, Handler: self},
			{Object: &v1alpha1.BootcNode{}, Handler: holdersFirst},
			{Object: &corev1.Node{}, Handler: sameName},
			// A slot the pool grants is taken up by the node's record.
			{Object: &v1alpha1.BootcNodePool{}, Handler: slotsGranted},
		}, Workers: NodeWorkers},
		{Name: PinnedSetController, New: func(c client.Client, o options.Options) reconcile.Reconciler { return pinned.New(c, o) }, Watches: []WatchSpec{
			{Object: &v1alpha1.PinnedImageSet{}, For: true, Handler: self,
				Predicates: []predicate.Predicate{predicate.GenerationChangedPredicate{}}},
			{Object: &v1alpha1.BootcNode{},
				Handler: debounced(func(ctx context.Context, o client.Object) []reconcile.Request {
					return pinned.BootcNodeToPinnedSets(ctx, reader, o)
				}, func(old, cur client.Object) bool {
					return pinned.PinnedProgressChanged(old.(*v1alpha1.BootcNode), cur.(*v1alpha1.BootcNode))
				})},
			{Object: &corev1.Node{},
				Handler: handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
					return pinned.NodeToPinnedSets(ctx, reader, o.(*corev1.Node))
				}),
				Predicates: []predicate.Predicate{predicate.Funcs{
					CreateFunc: func(event.CreateEvent) bool { return false },
					UpdateFunc: func(e event.UpdateEvent) bool {
						return !labels.Equals(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
					}}}},
		}},
	}
}

// slotsGranted enqueues the records of the nodes a pool's slot table
// gained: the pool grants, the node reconciler takes the slot up.
var slotsGranted = handler.Funcs{
	CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, s := range e.Object.(*v1alpha1.BootcNodePool).Status.Slots {
			addOwed(q, s.Node)
		}
	},
	UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		po, pn := e.ObjectOld.(*v1alpha1.BootcNodePool), e.ObjectNew.(*v1alpha1.BootcNodePool)
		// A failure recorded on the pool wakes its node's record: a
		// record made again after the failure (its predecessor deleted
		// mid-reboot) is marked Failed from it (failedEarlier), and one
		// whose last reconcile read the pool before the failure reached
		// the cache waited for a slot the pool never grants it, and the
		// pool never finished (explorer seed 177830 of the 176717
		// regression: the record made again at 12m51s looked at 13m02s,
		// the failure written at 12m50s reached its cache later).
		// A set of the old failures, as the slot tables below: a pool's
		// status changes with every node update.
		if len(pn.Status.Failures) > 0 {
			type failed struct{ node, image string }
			listed := make(map[failed]bool, len(po.Status.Failures))
			for _, f := range po.Status.Failures {
				listed[failed{f.Node, f.Image}] = true
			}
			for _, f := range pn.Status.Failures {
				if !listed[failed{f.Node, f.Image}] {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: f.Node}})
				}
			}
		}
		if po.Generation != pn.Generation || (po.DeletionTimestamp == nil) != (pn.DeletionTimestamp == nil) {
			// A pool being deleted, or whose spec changed (its selector,
			// its image), may leave its slot holders out of the pool or
			// void their boot orders: each looks again now, not at its
			// next event (a staging daemon rebooted 43s after its pool was
			// deleted: explorer seed 90128 of plain-rollout-10).
			for _, s := range pn.Status.Slots {
				addOwed(q, s.Node)
			}
			return
		}
		// One pass over each table (a pool at 10,000 nodes and 10% holds
		// 1,000 slots, and its status changes with every node update).
		// The map holds each node's index in the old table (its last
		// entry's, should a node appear twice), not a copy of the slot.
		old := e.ObjectOld.(*v1alpha1.BootcNodePool).Status.Slots
		had := make(map[string]int, len(old))
		for i := range old {
			had[old[i].Node] = i
		}
		news := e.ObjectNew.(*v1alpha1.BootcNodePool).Status.Slots
		for i := range news {
			s := &news[i]
			if j, ok := had[s.Node]; !ok || old[j].Image != s.Image || !old[j].Since.Equal(&s.Since) {
				addOwed(q, s.Node)
			}
		}
	},
}

// addOwed queues the record of a node in a pool's slot table at
// node.OwedPriority: a slot holder is owed its take-up, its boot order's
// withdrawal or its release by a deadline, as a record that retries
// before one is (node.Reconciler's requeues). Queued at the default
// priority, a deleted pool's holders waited behind the retries of the
// holders whose first release had failed, every second at OwedPriority,
// and one was first looked at 2m18s after the deletion (explorer seed
// 176942 of the rollout-100-nodes-cleanup-owed-priority regression,
// maxUnavailable 50%: 50 holders under slow, failing API requests). A
// queue without priorities gets a plain Add.
func addOwed(q workqueue.TypedRateLimitingInterface[reconcile.Request], name string) {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(node.OwedPriority)}, req)
		return
	}
	q.Add(req)
}

// holdersFirst raises a record that still holds its Node (node.HoldsNode:
// bootroll's cordon, a slot, a protection) in a new controller's initial
// list to node.OwedPriority, where the For watch queues every record of
// the initial list at controller-runtime's LowPriority (a priority queue
// keeps the higher of two priorities of an item). A controller back from
// a restart after its pool's deletion otherwise released the ten slot
// holders behind the 90 records that held nothing, 4 min after the
// deletion (explorer seed 176934 of the 176681 regression).
var holdersFirst = handler.Funcs{
	CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		bn, ok := e.Object.(*v1alpha1.BootcNode)
		if !ok || !e.IsInInitialList || !node.HoldsNode(bn) {
			return
		}
		addOwed(q, bn.Name)
	},
}

// failuresChanged passes an update of a pool's status.failures (the node
// reconciler's field): the pool's pass records the halt it may bring.
var failuresChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !equality.Semantic.DeepEqual(e.ObjectOld.(*v1alpha1.BootcNodePool).Status.Failures, e.ObjectNew.(*v1alpha1.BootcNodePool).Status.Failures)
}}

// deletionChanged passes an update that set or cleared the deletionTimestamp,
// or changed the finalizers.
var deletionChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil) ||
		!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
}}

// Setup registers the indexes and every controller of Controllers with a
// manager.
func Setup(mgr manager.Manager, opts options.Options) error {
	ctx := context.Background()
	for _, ix := range index.All() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			return fmt.Errorf("index %T %s: %w", ix.Object, ix.Field, err)
		}
	}
	c := mgr.GetClient()
	if opts.APIReader == nil {
		opts.APIReader = mgr.GetAPIReader()
	}
	if opts.Feed == nil {
		opts.Feed = poolfeed.New()
	}
	for _, ctl := range Controllers(c, opts.Feed) {
		b := ctrl.NewControllerManagedBy(mgr).Named(ctl.Name)
		for _, w := range ctl.Watches {
			if w.For {
				b = b.For(w.Object, builder.WithPredicates(w.Predicates...))
			} else {
				b = b.Watches(w.Object, w.Handler, builder.WithPredicates(w.Predicates...))
			}
		}
		b = b.WithOptions(crcontroller.Options{MaxConcurrentReconciles: max(ctl.Workers, 1)})
		if err := b.Complete(ctl.New(c, opts)); err != nil {
			return fmt.Errorf("set up %s controller: %w", ctl.Name, err)
		}
	}
	return nil
}

// debounced enqueues what m maps an object to rollout.PoolStatusDebounce after a
// create, delete, or an update that changed reports true for.
func debounced(m func(context.Context, client.Object) []reconcile.Request, changed func(old, cur client.Object) bool) handler.Funcs {
	enqueue := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, r := range m(ctx, o) {
			q.AddAfter(r, rollout.PoolStatusDebounce)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if changed(e.ObjectOld, e.ObjectNew) {
				enqueue(ctx, e.ObjectNew, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, e.Object, q)
		},
	}
}

// debouncedPoolHandler enqueues a BootcNode's pool rollout.PoolStatusDebounce
// after a change that matters to the pool, so a burst of node changes
// costs one pool reconcile; a deletion also reaches the pools that select
// its Node (BootcNodeGoneToPools). reader is what the map reads.
//
// A create or update enqueues the one request of the record's pool
// (bootcNodePool) without BootcNodeToPool's slice: that slice, built for
// every BootcNode event, was one allocation per event.
func debouncedPoolHandler(reader client.Reader) handler.EventHandler {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if r, ok := bootcNodePool(o); ok {
			q.AddAfter(r, rollout.PoolStatusDebounce)
		}
	}
	var h handler.Funcs
	h.CreateFunc = func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueue(e.Object, q)
	}
	h.UpdateFunc = func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if BootcNodeChangeMatters(e.ObjectOld.(*v1alpha1.BootcNode), e.ObjectNew.(*v1alpha1.BootcNode)) {
			enqueue(e.ObjectNew, q)
		}
	}
	h.DeleteFunc = func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, r := range BootcNodeGoneToPools(ctx, reader, e.Object) {
			q.AddAfter(r, rollout.PoolStatusDebounce)
		}
	}
	return h
}

// debouncedNodePoolHandler enqueues, rollout.PoolStatusDebounce after a
// Node event that can change membership or eligibility, the pools that
// select the Node (NodeToPools); an update also reaches the pools that
// selected it before the change. A pool that counted a Node as a member
// without a record of its own (the record was still the old pool's)
// was not woken when the Node then left every pool: NodeToPools of the
// new Node reached only the record's pool, and the other said "0/1
// updated" to the end (explorer seed 5072 of the pool-return regression:
// workers-0 moved into other at 1m while workers' record waited out its
// 18-minute reboot, and left every pool at 10m).
func debouncedNodePoolHandler(reader client.Reader) handler.EventHandler {
	m := func(ctx context.Context, o client.Object) []reconcile.Request {
		return NodeToPools(ctx, reader, o.(*corev1.Node))
	}
	// The update handler is its own (below): it also reaches the pools of
	// the old labels, so debounced's is never called.
	h := debounced(m, nil)
	h.UpdateFunc = func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		old, cur := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
		if !NodeMembershipChanged(old, cur) {
			return
		}
		reqs := m(ctx, cur)
		if !labels.Equals(old.Labels, cur.Labels) {
			reqs = union(reqs, m(ctx, old))
		}
		for _, r := range reqs {
			q.AddAfter(r, rollout.PoolStatusDebounce)
		}
	}
	return h
}

// BootcNodeGoneToPools maps a deleted BootcNode to its pool and to the
// pools that select its Node now. A record is one per node (named after
// it): a pool that a Node moved into, from another pool, cannot create the
// Node's record while the old pool's record is still there (its create
// meets AlreadyExists), and nothing else about the Node changes once that
// record is gone, so the record's deletion is what must wake it (a node
// relabelled from pool workers into the existing pool other never got a
// record in other: 5 of 5 seeds of a two-node probe, seed 3 first, failed
// converges at 1h with "other: 0/1 updated").
func BootcNodeGoneToPools(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	out := BootcNodeToPool(o)
	var n corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: o.GetName()}, &n); err != nil {
		return out
	}
	return union(out, NodeToPools(ctx, c, &n))
}

// union appends to a the requests of b it does not hold (a few pools).
func union(a, b []reconcile.Request) []reconcile.Request {
	for _, r := range b {
		if !slices.Contains(a, r) {
			a = append(a, r)
		}
	}
	return a
}

// BootcNodeToPool maps a BootcNode to its pool.
func BootcNodeToPool(o client.Object) []reconcile.Request {
	r, ok := bootcNodePool(o)
	if !ok {
		return nil
	}
	return []reconcile.Request{r}
}

// bootcNodePool is BootcNodeToPool's one request, without a slice; false
// when o is no BootcNode or names no pool.
func bootcNodePool(o client.Object) (reconcile.Request, bool) {
	bn, ok := o.(*v1alpha1.BootcNode)
	if !ok || bn.Spec.Pool == "" {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: bn.Spec.Pool}}, true
}

// BootcNodeChangeMatters reports whether a BootcNode update can change its
// pool's decisions or status: its phase, images, slot-relevant record, the
// reason of its last step (a drain a budget blocks makes the pool
// Degraded).
func BootcNodeChangeMatters(old, cur *v1alpha1.BootcNode) bool {
	if old.Status.Phase != cur.Status.Phase || old.Spec.DesiredImage != cur.Spec.DesiredImage ||
		old.Status.Daemon.Phase != cur.Status.Daemon.Phase ||
		old.Status.Rollout.Cordoned != cur.Status.Rollout.Cordoned ||
		old.Status.Rollout.TargetImage != cur.Status.Rollout.TargetImage ||
		old.Status.Rollout.Reason != cur.Status.Rollout.Reason {
		return true
	}
	return rollout.DigestOfHost(old.Status.Booted) != rollout.DigestOfHost(cur.Status.Booted) ||
		rollout.DigestOfHost(old.Status.Staged) != rollout.DigestOfHost(cur.Status.Staged) ||
		!old.Status.Rollout.RetryAfter.Equal(cur.Status.Rollout.RetryAfter)
}

// NodeMembershipChanged reports whether a Node update can change pool
// membership or slot eligibility (labels, deletion, readiness, taints).
func NodeMembershipChanged(old, cur *corev1.Node) bool {
	if !labels.Equals(old.Labels, cur.Labels) || (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) {
		return true
	}
	return rollout.NodeReady(old) != rollout.NodeReady(cur) || len(old.Spec.Taints) != len(cur.Spec.Taints)
}

// NodeToPools maps a Node to the pools whose selector matches it. Pools are
// few; a Node event lists pools, never nodes.
func NodeToPools(ctx context.Context, c client.Reader, n *corev1.Node) []reconcile.Request {
	pools, err := cached.Pools(ctx, c)
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range pools {
		if rollout.Selects(&pools[i], n) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: pools[i].Name}})
		}
	}
	// A Node that left a pool must reach that pool too. Its record is
	// read as the cache holds it, not copied: only its pool is read.
	var bn v1alpha1.BootcNode
	if err := c.Get(ctx, types.NamespacedName{Name: n.Name}, &bn, readopts.NoCopyGet...); err == nil && bn.Spec.Pool != "" {
		r := reconcile.Request{NamespacedName: types.NamespacedName{Name: bn.Spec.Pool}}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
