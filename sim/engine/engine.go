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
	now  time.Time
	seed uint64
	rng  *rand.Rand
	// events holds the pending events scheduled for a time after the
	// instant they were scheduled at, soon (from soonHead on) those
	// scheduled for that instant itself (At a time not after Now, After
	// d <= 0; a reconcile's start is one), in the order they were
	// scheduled; soonLive counts those of soon still pending (a
	// cancelled one leaves a nil in soon). Every event of soon
	// is at Now: time moves on only once soon has run dry, as its
	// events are no later than any other. So soon is in (time, seq)
	// order and its first event is its earliest, and the next event is
	// the earlier of that and the heap's first; an event at Now saves
	// the heap's push and pop.
	events   eventHeap
	soon     []*Handle
	soonHead int
	soonLive int
	seq      uint64
	ran      uint64
	stopped  bool
	hooks    []func(name string)
	clock    *Clock
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
	sec  int64
	nsec int32
	seq  uint64
	name string
	fn   func()
	// index is the event's position in the heap, or soonIndex of its
	// position in the engine's soon list, or done once run or cancelled.
	index int
}

// done is the Handle.index of an event that ran or was cancelled.
const done = -1

// soonIndex is the Handle.index of the event at position i of soon, and
// soonPos the position of the event of a Handle.index below done.
func soonIndex(i int) int   { return -2 - i }
func soonPos(index int) int { return -2 - index }

// Cancel removes the event and reports whether it was still pending.
// Cancelling a nil handle, or one that ran, does nothing.
func (h *Handle) Cancel() bool {
	if h == nil || h.index == done {
		return false
	}
	if h.index < done {
		e := h.e
		e.soon[soonPos(h.index)] = nil
		e.soonLive--
		h.index = done
		return true
	}
	h.e.events.remove(h.index)
	return true
}

// Pending reports whether the event has neither run nor been cancelled.
func (h *Handle) Pending() bool { return h != nil && h.index != done }

// When returns the virtual time the event is (or was) scheduled for.
func (h *Handle) When() time.Time { return h.at }

// Name returns the event's name.
func (h *Handle) Name() string { return h.name }

// At schedules fn to run at t under name. A t before Now runs at Now: time
// never goes backwards. Events at the same time run in the order they were
// scheduled.
func (e *Engine) At(t time.Time, name string, fn func()) *Handle {
	return e.schedule(new(Handle), t, name, fn)
}

// schedule is At in h, a new Handle or one of the caller's that is no
// longer pending (it ran or was cancelled): a work queue schedules its
// keys' events in Handles of the keys, which saves an allocation per
// event. It returns h.
func (e *Engine) schedule(h *Handle, t time.Time, name string, fn func()) *Handle {
	if fn == nil {
		panic("engine: At " + name + " with a nil func")
	}
	if h.e != nil && h.index != done {
		panic("engine: " + name + " scheduled in a pending event's Handle")
	}
	t = t.Round(0)
	later := t.After(e.now)
	if !later && t.Before(e.now) {
		t = e.now
	}
	*h = Handle{e: e, at: t, sec: t.Unix(), nsec: int32(t.Nanosecond()), seq: e.seq, name: name, fn: fn}
	e.seq++
	if later {
		e.events.push(h)
	} else {
		h.index = soonIndex(len(e.soon))
		e.soon = append(e.soon, h)
		e.soonLive++
	}
	return h
}

// AtIn is At in h, a Handle of the caller's that is new (zero) or no
// longer pending (it ran or was cancelled; a Handle may be scheduled
// again by its own event): a caller that keeps one event pending at a
// time saves an allocation per event. It returns h.
func (e *Engine) AtIn(h *Handle, t time.Time, name string, fn func()) *Handle {
	return e.schedule(h, t, name, fn)
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
	if e.stopped {
		return false
	}
	h, fromSoon := e.next()
	if h == nil {
		return false
	}
	if fromSoon {
		e.soon[e.soonHead] = nil
		e.soonHead++
		e.soonLive--
		h.index = done
	} else {
		e.events.pop()
	}
	e.now = h.at
	// h may be scheduled again by its own event (schedule): its name
	// is read first.
	name := h.name
	h.fn()
	e.ran++
	for _, hook := range e.hooks {
		hook(name)
	}
	return true
}

// RunUntil runs every event scheduled at or before t, then advances the clock
// to t. A stop leaves the clock at the last event run.
func (e *Engine) RunUntil(t time.Time) {
	t = t.Round(0)
	for !e.stopped {
		if h, _ := e.next(); h == nil || h.at.After(t) {
			break
		}
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
func (e *Engine) Pending() int { return len(e.events) + e.soonLive }

// next returns the next event to run, and whether it is soon's first,
// without taking it; nil when none is pending. It skips the nils that
// cancelled events left at the head of soon, and empties soon once all
// of it has run.
func (e *Engine) next() (h *Handle, fromSoon bool) {
	for e.soonHead < len(e.soon) && e.soon[e.soonHead] == nil {
		e.soonHead++
	}
	if e.soonHead == len(e.soon) {
		e.soon, e.soonHead = e.soon[:0], 0
		if len(e.events) == 0 {
			return nil, false
		}
		return e.events[0], false
	}
	s := e.soon[e.soonHead]
	if len(e.events) > 0 && before(e.events[0], s) {
		return e.events[0], false
	}
	return s, true
}

// before reports whether event a runs before event b: it is earlier, or
// at the same time and scheduled first.
func before(a, b *Handle) bool {
	if a.sec != b.sec {
		return a.sec < b.sec
	}
	if a.nsec != b.nsec {
		return a.nsec < b.nsec
	}
	return a.seq < b.seq
}

// eventHeap orders events by time, then by the order they were scheduled
// (before), which makes the order total and so independent of heap
// layout. It is a 4-ary heap, as the Go runtime's timer heap is: half
// the levels of a binary one, so fewer moves per push and pop. up and
// down move the event along a hole rather than swapping at each level.
type eventHeap []*Handle

func (h *eventHeap) push(ev *Handle) {
	*h = append(*h, ev)
	h.up(len(*h) - 1)
}

// pop removes the first event.
func (h *eventHeap) pop() *Handle {
	old := *h
	n := len(old) - 1
	ev := old[0]
	old[0] = old[n]
	old[n] = nil
	*h = old[:n]
	if n > 0 {
		h.down(0, n)
	}
	ev.index = done
	return ev
}

// remove removes the event at position i.
func (h *eventHeap) remove(i int) {
	old := *h
	n := len(old) - 1
	ev := old[i]
	if i != n {
		old[i] = old[n]
		old[n] = nil
		*h = old[:n]
		if !h.down(i, n) {
			h.up(i)
		}
	} else {
		old[n] = nil
		*h = old[:n]
	}
	ev.index = done
}

// up moves the event at j up to its place.
func (h eventHeap) up(j int) {
	ev := h[j]
	for j > 0 {
		i := (j - 1) / 4 // parent
		if !before(ev, h[i]) {
			break
		}
		h[j] = h[i]
		h[j].index = j
		j = i
	}
	h[j] = ev
	ev.index = j
}

// down moves the event at i0 down to its place among the first n, and
// reports whether it moved.
func (h eventHeap) down(i0, n int) bool {
	ev := h[i0]
	i := i0
	for {
		// c is the first child (c < 0 after int overflow).
		c := 4*i + 1
		if c >= n || c < 0 {
			break
		}
		m := c // the earliest child
		for k, end := c+1, min(c+4, n); k < end; k++ {
			if before(h[k], h[m]) {
				m = k
			}
		}
		if !before(h[m], ev) {
			break
		}
		h[i] = h[m]
		h[i].index = i
		i = m
	}
	h[i] = ev
	ev.index = i
	return i > i0
}
