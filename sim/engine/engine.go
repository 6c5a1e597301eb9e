// Package engine is the twin's discrete-event simulator: a virtual clock, an
// event heap ordered by (time, sequence), the run's only random source, and
// controller-runtime-like work queues that run reconcilers on virtual time.
//
// Everything runs on the caller's goroutine. An event's function runs to
// completion before the next event starts, so the same seed and the same
// scheduled events give the same run.
package engine

import (
	"math/rand/v2"
	"time"
)

// Engine owns virtual time and the pending events of one simulation run.
// It is not safe for concurrent use; the simulation has one thread.
type Engine struct {
	now     time.Time
	seed    uint64
	rng     *rand.Rand
	events  eventHeap
	seq     uint64
	ran     uint64
	stopped bool
	hooks   []func(name string)
	clock   *Clock
}

// New returns an engine whose clock reads start and whose random source is
// PCG seeded from seed. The monotonic clock reading of start, if any, is
// dropped so that times print the same in every run.
func New(start time.Time, seed uint64) *Engine {
	e := &Engine{
		now:  start.Round(0),
		seed: seed,
		rng:  rand.New(rand.NewPCG(seed, seed)),
	}
	e.clock = &Clock{e: e}
	return e
}

// Seed returns the seed the engine was built with, for "reproduce with" lines.
func (e *Engine) Seed() uint64 { return e.seed }

// Rand returns the run's random source. It is the only randomness a run may
// use: draws happen in event order, so they are reproducible.
func (e *Engine) Rand() *rand.Rand { return e.rng }

// Now returns the virtual time: the time of the event being run, or of the
// last event run, or the time RunUntil advanced to.
func (e *Engine) Now() time.Time { return e.now }

// Clock returns the engine's clock, to hand to code that takes a clock.
func (e *Engine) Clock() *Clock { return e.clock }

// Handle is a scheduled event. Cancel removes it before it runs.
type Handle struct {
	e  *Engine
	at time.Time
	// sec and nsec are at's Unix seconds and nanoseconds: the heap
	// compares them instead of calling Time.Compare.
	sec   int64
	nsec  int32
	seq   uint64
	name  string
	fn    func()
	index int // position in the heap; -1 once run or cancelled
}

// Cancel removes the event from the heap and reports whether it was still
// pending. Cancelling a nil handle, or one that ran, does nothing.
func (h *Handle) Cancel() bool {
	if h == nil || h.index < 0 {
		return false
	}
	h.e.events.remove(h.index)
	return true
}

// Pending reports whether the event has neither run nor been cancelled.
func (h *Handle) Pending() bool { return h != nil && h.index >= 0 }

// When returns the virtual time the event is (or was) scheduled for.
func (h *Handle) When() time.Time { return h.at }

// Name returns the event's name.
func (h *Handle) Name() string { return h.name }

// At schedules fn to run at t under name. A t before Now runs at Now: time
// never goes backwards. Events at the same time run in the order they were
// scheduled.
func (e *Engine) At(t time.Time, name string, fn func()) *Handle {
	if fn == nil {
		panic("engine: At " + name + " with a nil func")
	}
	t = t.Round(0)
	if t.Before(e.now) {
		t = e.now
	}
	h := &Handle{e: e, at: t, sec: t.Unix(), nsec: int32(t.Nanosecond()), seq: e.seq, name: name, fn: fn}
	e.seq++
	e.events.push(h)
	return h
}

// After schedules fn to run d after Now under name; d <= 0 means now, after
// the events already scheduled for now.
func (e *Engine) After(d time.Duration, name string, fn func()) *Handle {
	if d < 0 {
		d = 0
	}
	return e.At(e.now.Add(d), name, fn)
}

// OnEvent adds a hook called with the event's name after every event, in
// the order hooks were added. Invariant checks live here; a hook may call
// Stop.
func (e *Engine) OnEvent(hook func(name string)) {
	e.hooks = append(e.hooks, hook)
}

// Step runs the next event and reports whether it ran one: it returns false
// when no event is pending or the engine was stopped.
func (e *Engine) Step() bool {
	if e.stopped || len(e.events) == 0 {
		return false
	}
	h := e.events.pop()
	e.now = h.at
	h.fn()
	e.ran++
	for _, hook := range e.hooks {
		hook(h.name)
	}
	return true
}

// RunUntil runs every event scheduled at or before t, then advances the clock
// to t. A stop leaves the clock at the last event run.
func (e *Engine) RunUntil(t time.Time) {
	t = t.Round(0)
	for !e.stopped && len(e.events) > 0 && !e.events[0].at.After(t) {
		e.Step()
	}
	if !e.stopped && e.now.Before(t) {
		e.now = t
	}
}

// Run runs events until none is pending or the engine is stopped. A model
// that always reschedules itself never runs dry: bound such runs with
// RunUntil.
func (e *Engine) Run() {
	for e.Step() {
	}
}

// Stop ends the run: the current event and its hooks finish, and no further
// event runs. It is final.
func (e *Engine) Stop() { e.stopped = true }

// Stopped reports whether Stop was called.
func (e *Engine) Stopped() bool { return e.stopped }

// EventsRun returns how many events have run.
func (e *Engine) EventsRun() uint64 { return e.ran }

// Pending returns how many events are scheduled and not yet run.
func (e *Engine) Pending() int { return len(e.events) }

// eventHeap orders events by time, then by the order they were scheduled,
// which makes the order total and so independent of heap layout.
type eventHeap []*Handle

func (h eventHeap) Len() int { return len(h) }

func (h eventHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.sec != b.sec {
		return a.sec < b.sec
	}
	if a.nsec != b.nsec {
		return a.nsec < b.nsec
	}
	return a.seq < b.seq
}

func (h eventHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *eventHeap) Push(x any) {
	ev := x.(*Handle)
	ev.index = len(*h)
	*h = append(*h, ev)
}

// push, pop and remove are container/heap's Push, Pop and Remove for
// eventHeap, with its methods called directly rather than through
// heap.Interface: the engine's heap holds every timer of a run.
func (h *eventHeap) push(ev *Handle) {
	h.Push(ev)
	h.up(len(*h) - 1)
}

func (h *eventHeap) pop() *Handle {
	n := len(*h) - 1
	h.Swap(0, n)
	h.down(0, n)
	return h.Pop().(*Handle)
}

func (h *eventHeap) remove(i int) {
	n := len(*h) - 1
	if n != i {
		h.Swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	h.Pop()
}

func (h eventHeap) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.Less(j, i) {
			break
		}
		h.Swap(i, j)
		j = i
	}
}

func (h eventHeap) down(i0, n int) bool {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.Less(j2, j1) {
			j = j2 // = 2*i + 2  // right child
		}
		if !h.Less(j, i) {
			break
		}
		h.Swap(i, j)
		i = j
	}
	return i > i0
}

func (h *eventHeap) Pop() any {
	old := *h
	n := len(old)
	ev := old[n-1]
	old[n-1] = nil
	ev.index = -1
	*h = old[:n-1]
	return ev
}
