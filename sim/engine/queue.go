package engine

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Default backoff of a failed reconcile: controller-runtime's default
// per-item exponential limiter (5ms doubling, capped at 1000s).
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
)

// QueueOptions configures a Queue. The zero value gives controller-runtime's
// defaults.
type QueueOptions struct {
	// ReconcileLatency is the virtual time one reconcile occupies its worker.
	// The reconcile itself runs, and writes, when it is dequeued; its result
	// is acted on ReconcileLatency later, as when a real reconcile returns.
	ReconcileLatency time.Duration

	// Duration, when set, is called after each reconcile returns and gives
	// how long that reconcile occupied its worker, instead of
	// ReconcileLatency: a drawn run time plus the latency of the API
	// requests it made. Keys added meanwhile wait, deduplicated, as
	// they do behind a busy controller-runtime worker.
	Duration func() time.Duration

	// MaxConcurrentReconciles is the number of workers; default 1. A key is
	// never reconciled by two workers at once.
	MaxConcurrentReconciles int

	// RateLimiter computes the backoff of failed reconciles. The default is
	// controller-runtime's: exponential from DefaultBaseDelay to
	// DefaultMaxDelay. It must not read the wall clock (client-go's bucket
	// limiter does), or runs stop being reproducible.
	RateLimiter workqueue.TypedRateLimiter[reconcile.Request]
}

// QueueStats counts what a queue has done.
type QueueStats struct {
	Reconciles uint64 // reconciles called
	Errors     uint64 // reconciles that returned an error
}

// Queue is one reconciler's work queue on virtual time. Its rules are those
// of controller-runtime v0.25's default priority queue:
//   - a queued key is queued once; adding it again keeps the earlier ready
//     time and the higher priority; a key handed to a worker whose reconcile
//     has not started yet counts as queued;
//   - a key added while it is being reconciled is reconciled again after the
//     current reconcile ends;
//   - ready keys are handed out by priority, then first-ready-first-out;
//   - a result with RequeueAfter > 0 forgets the key's backoff and adds it
//     after that duration; an error (except a TerminalError) or Requeue adds
//     it after the rate limiter's backoff; success forgets the backoff.
//
// controller-runtime's priority queue uses no overall token bucket, so none
// is modelled. Each reconcile runs in an engine event named
// "reconcile/<queue>"; with ReconcileLatency > 0 its end is the event
// "reconciled/<queue>"; a waiting key becomes ready in the event
// "requeue/<queue>" (the key is in the event's closure, not its name).
// Reconcile gets context.Background(); panics in it
// are not recovered, so that a bug stops the run.
type Queue struct {
	eng      *Engine
	name     string
	r        reconcile.Reconciler
	latency  time.Duration
	duration func() time.Duration
	workers  int
	limiter  workqueue.TypedRateLimiter[reconcile.Request]
	// keys holds every key that was ever added since the queue started:
	// those queued (ready or waiting), handed to a worker, or both, and
	// the idle ones, kept for their next add.
	keys     map[reconcile.Request]*key
	queued   int // keys queued
	busy     int // keys handed to a worker
	ready    readyHeap
	counter  uint64
	shutdown bool
	stats    QueueStats

	// The names of the queue's engine events, built once: the request is
	// in each event's closure. A name per request cost a string
	// concatenation per event, for names nothing reads but a debugger.
	requeueName, reconcileName, reconciledName string
}

// key is one key of the queue: queued (waiting or ready), handed to a
// worker, both (added again while it is being reconciled), or idle. It is
// kept from one reconcile to the next, idle ones too (a queue's requests
// are a cluster's objects: few, and added again and again), with its
// event functions bound once.
type key struct {
	q   *Queue
	req reconcile.Request

	// While queued:
	queued   bool
	priority int
	counter  uint64    // FIFO order among equal priorities
	readyAt  time.Time // zero once ready
	wake     *Handle   // the event that makes it ready; nil once ready
	index    int       // position in the ready heap; -1 while waiting

	// While handed to a worker: its reconcile event, then, once the
	// reconcile has returned and ReconcileLatency > 0, its end event; the
	// priority it was handed out at and the reconcile's result.
	flight      *Handle
	started     bool
	runPriority int
	res         reconcile.Result
	err         error

	// The key's event functions: wakeFn, startFn, endFn.
	wakeFn, startFn, endFn func()

	// The Handles its events are scheduled in (Engine.schedule): wake is
	// &wakeH while set, flight &flightH. A key has one wake-up and one
	// reconcile start or end pending at most, and its Handles outlive
	// them: the key is dropped only once neither is pending.
	wakeH, flightH Handle
}

// NewQueue returns the work queue of reconciler r, named name in event names.
func NewQueue(eng *Engine, name string, r reconcile.Reconciler, opts QueueOptions) *Queue {
	q := &Queue{
		eng:  eng,
		name: name,
		r:    r,
		// Events of queue q: requeue/q, reconcile/q, reconciled/q.
		requeueName:    "requeue/" + name,
		reconcileName:  "reconcile/" + name,
		reconciledName: "reconciled/" + name,
		latency:        opts.ReconcileLatency,
		duration:       opts.Duration,
		workers:        opts.MaxConcurrentReconciles,
		limiter:        opts.RateLimiter,
		keys:           map[reconcile.Request]*key{},
	}
	if q.workers <= 0 {
		q.workers = 1
	}
	if q.limiter == nil {
		q.limiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](DefaultBaseDelay, DefaultMaxDelay)
	}
	return q
}

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Add queues req to be reconciled now.
func (q *Queue) Add(req reconcile.Request) { q.add(req, 0, false, 0) }

// AddAfter queues req to be reconciled d from now; d <= 0 means now.
func (q *Queue) AddAfter(req reconcile.Request, d time.Duration) { q.add(req, d, false, 0) }

// AddWithPriority queues req at priority (higher first), after d (d <= 0:
// now) or, when rateLimited, after the shorter of d and its rate limiter
// backoff: controller-runtime's PriorityQueue.AddWithOpts.
func (q *Queue) AddWithPriority(req reconcile.Request, d time.Duration, rateLimited bool, priority int) {
	q.add(req, d, rateLimited, priority)
}

// AddRateLimited queues req after its rate limiter backoff, as a failed
// reconcile does.
func (q *Queue) AddRateLimited(req reconcile.Request) { q.add(req, 0, true, 0) }

// NumRequeues returns how many backoffs req has had since it was last
// forgotten.
func (q *Queue) NumRequeues(req reconcile.Request) int { return q.limiter.NumRequeues(req) }

// Len returns how many keys are queued, ready or waiting, not counting
// keys being reconciled.
func (q *Queue) Len() int { return q.queued }

// Stats returns the queue's counters.
func (q *Queue) Stats() QueueStats { return q.stats }

// ShutDown drops every queued key and pending reconcile and ignores later
// adds, as when a controller process stops. A reconcile already running
// finishes, but its result is dropped.
func (q *Queue) ShutDown() {
	q.shutdown = true
	for _, k := range q.keys {
		k.wake.Cancel()
		k.flight.Cancel()
	}
	q.keys = map[reconcile.Request]*key{}
	q.queued, q.busy = 0, 0
	q.ready = nil
}

func (q *Queue) add(req reconcile.Request, after time.Duration, rateLimited bool, priority int) {
	if q.shutdown {
		return
	}
	if rateLimited {
		if d := q.limiter.When(req); after <= 0 || d < after {
			after = d
		}
	}
	it := q.keys[req]
	if it == nil {
		it = q.newKey(req)
		q.keys[req] = it
	}
	q.addKey(it, after, priority)
}

// newKey returns the state of a key not in the queue.
func (q *Queue) newKey(req reconcile.Request) *key {
	k := &key{q: q, req: req, index: -1}
	k.wakeFn, k.startFn, k.endFn = k.wakeUp, k.start, k.end
	return k
}

// addKey is add for a key in q.keys, any backoff already in after.
func (q *Queue) addKey(it *key, after time.Duration, priority int) {
	if it.flight != nil && !it.started {
		// Handed to a worker but not started: that reconcile will see
		// whatever this add is about.
		return
	}
	if !it.queued {
		it.queued = true
		q.queued++
		it.priority, it.counter, it.index = priority, q.nextCounter(), -1
		if after > 0 {
			q.wait(it, q.eng.Now().Add(after))
		} else {
			q.ready.push(it)
		}
		q.dispatch()
		return
	}
	if priority > it.priority {
		it.priority = priority
		it.counter = q.nextCounter()
	}
	switch {
	case it.wake == nil:
		q.ready.fix(it.index)
	case after <= 0:
		it.wake.Cancel()
		it.wake, it.readyAt = nil, time.Time{}
		q.ready.push(it)
	default:
		if at := q.eng.Now().Add(after); at.Before(it.readyAt) {
			it.wake.Cancel()
			q.wait(it, at)
		}
	}
	q.dispatch()
}

// wait schedules it to become ready at t.
func (q *Queue) wait(it *key, t time.Time) {
	it.readyAt = t
	it.wake = q.eng.schedule(&it.wakeH, t, q.requeueName, it.wakeFn)
}

// wakeUp makes a waiting key ready.
func (k *key) wakeUp() {
	q := k.q
	k.wake, k.readyAt = nil, time.Time{}
	// Ready keys are ordered by when they became ready, not added.
	k.counter = q.nextCounter()
	q.ready.push(k)
	q.dispatch()
}

// dispatch hands ready keys to idle workers. A ready key that is being
// reconciled stays queued until that reconcile ends.
func (q *Queue) dispatch() {
	for !q.shutdown && q.busy < q.workers && q.ready.Len() > 0 {
		var busy []*key
		var next *key
		for q.ready.Len() > 0 {
			it := q.ready.pop()
			if it.flight != nil {
				busy = append(busy, it)
				continue
			}
			next = it
			break
		}
		for _, it := range busy {
			q.ready.push(it)
		}
		if next == nil {
			return
		}
		next.queued = false
		q.queued--
		next.runPriority, next.started = next.priority, false
		next.flight = q.eng.schedule(&next.flightH, q.eng.Now(), q.reconcileName, next.startFn)
		q.busy++
	}
}

// start is the key's reconcile event.
func (k *key) start() {
	k.started = true
	k.q.reconcile(k)
}

// end is the key's reconcile end event.
func (k *key) end() { k.q.finish(k) }

func (q *Queue) reconcile(k *key) {
	res, err := q.r.Reconcile(context.Background(), k.req)
	q.stats.Reconciles++
	if q.shutdown {
		return
	}
	k.res, k.err = res, err
	latency := q.latency
	if q.duration != nil {
		latency = q.duration()
	}
	if latency <= 0 {
		q.finish(k)
		return
	}
	// Its start event has run: its Handle takes the end event.
	k.flight = q.eng.schedule(&k.flightH, q.eng.Now().Add(latency), q.reconciledName, k.endFn)
}

// finish acts on a reconcile's result the way controller-runtime's
// reconcileHandler does, then frees the worker.
func (q *Queue) finish(k *key) {
	req, priority, res, err := k.req, k.runPriority, k.res, k.err
	k.flight, k.res, k.err = nil, reconcile.Result{}, nil
	q.busy--
	if res.Priority != nil {
		priority = *res.Priority
	}
	switch {
	case err != nil:
		q.stats.Errors++
		if !errors.Is(err, reconcile.TerminalError(nil)) {
			q.addKey(k, q.limiter.When(req), priority)
		}
	case res.RequeueAfter > 0:
		q.limiter.Forget(req)
		q.addKey(k, res.RequeueAfter, priority)
	case res.Requeue: //nolint:staticcheck // controller-runtime still honours Requeue.
		q.addKey(k, q.limiter.When(req), priority)
	default:
		q.limiter.Forget(req)
	}
	q.dispatch()
}

func (q *Queue) nextCounter() uint64 {
	c := q.counter
	q.counter++
	return c
}

// readyHeap orders ready keys by priority, highest first, then FIFO: a
// binary heap, with container/heap's algorithm called directly rather
// than through heap.Interface.
type readyHeap []*key

func (h readyHeap) Len() int { return len(h) }

func (h readyHeap) less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].counter < h[j].counter
}

func (h readyHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *readyHeap) push(it *key) {
	it.index = len(*h)
	*h = append(*h, it)
	h.up(len(*h) - 1)
}

// pop removes the first key.
func (h *readyHeap) pop() *key {
	n := len(*h) - 1
	h.swap(0, n)
	h.down(0, n)
	old := *h
	it := old[n]
	old[n] = nil
	it.index = -1
	*h = old[:n]
	return it
}

// fix restores the order after the key at i changed.
func (h readyHeap) fix(i int) {
	if !h.down(i, len(h)) {
		h.up(i)
	}
}

func (h readyHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h readyHeap) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // right child
		}
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
