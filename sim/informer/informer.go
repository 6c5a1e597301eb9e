// Package informer models the informer caches a controller-runtime manager
// and a node daemon read through: a cache holds the objects of some kinds
// as the watch events of the API server reach it, each after a delivery
// delay drawn from the run's PRNG, in order per kind (a real watch
// delivers one resource type in resourceVersion order). Reads of a cached
// client come from the cache, writes go to the API server and show in the
// cache only when their event arrives. Handlers (controller-runtime's
// event handlers and predicates) run when an event reaches the cache, not
// when the write happens.
//
// A watch can break: the event is lost, and so is every later event of the
// kind until the reflector re-lists after a drawn delay; the re-list
// replaces the cache's objects of that kind with the server's and hands
// the differences to the handlers as events, as client-go's Replace does.
//
// Objects are shared with the API server's store, never copied: a stored
// object is never modified (see sim/apiserver), so a cache holds pointers
// and its per-event cost does not grow with the cluster.
package informer

import (
	"fmt"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

// WatchFault is what a watch fault does to one event of a kind: Drop loses
// it and breaks the watch until a re-list RelistAfter later; Extra delays
// it (and, per-kind order being kept, those after it).
type WatchFault struct {
	Drop        bool
	RelistAfter time.Duration
	Extra       time.Duration
}

// Options make a Cache.
type Options struct {
	// Name names the cache in engine events ("informer/<name>/<kind>").
	Name string
	// Engine runs the deliveries; Source is the API server the cache
	// lists from; Store holds the cache's objects (a Server used as a
	// mirror: apiserver.New with the indexes the readers need).
	Engine *engine.Engine
	Source *apiserver.Server
	Store  *apiserver.Server
	// Kinds are the kinds the cache holds, as empty objects (&corev1.Pod{}).
	// Initial lists run in this order.
	Kinds []client.Object
	// Only, when set, restricts the cache to the object of that name of
	// each kind (a daemon's field selector on metadata.name).
	Only *client.ObjectKey
	// Delay draws the delivery delay of one event; nil means none.
	Delay func() time.Duration
	// Fault, when set, is asked about every event of a held kind.
	Fault func(kind string) WatchFault
	// Handle receives each event as it reaches the cache: Old is what the
	// cache held before (nil when nothing), as an informer hands it to
	// OnUpdate.
	Handle func(apiserver.Event)
	// Trace, when set, is told of re-lists (Fault traces the drops).
	Trace func(what, kind string, fields map[string]any)
	// Transform, when set, is what the cache holds and hands to Handle
	// instead of each object the API server sends, as a
	// controller-runtime cache's transform (options.CacheOptions). It
	// must not modify its argument, which the API server's store holds.
	Transform func(client.Object) client.Object
}

// Cache is one process's informer cache.
type Cache struct {
	o       Options
	streams map[apiserver.TypeID]*stream
	order   []*stream
	lists   map[schema.GroupVersionKind]bool
	// listTypes memoises HoldsList for typed lists (the kind of a Go list
	// type cannot change): working the kind out from the scheme was 1% of
	// a twin run.
	listTypes map[apiserver.TypeID]bool
	synced    bool
	closed    bool
}

// stream is the watch of one kind: the events on their way to the cache,
// first in first out.
type stream struct {
	c       *Cache
	kind    string
	name    string // of its delivery events
	fireFn  func() // s.fire, made once
	example client.Object
	pending []delivery
	head    int
	timer   *engine.Handle
	// fireAt is the Handle timer is scheduled in (Engine.AtIn): the
	// stream has one delivery event pending at most.
	fireAt engine.Handle
	last   time.Time // when the last queued event arrives
	broken bool
	relist *engine.Handle
}

type delivery struct {
	at time.Time
	ev apiserver.Event
}

// New makes an empty cache; Sync fills it. Observe ignores events until
// then: a reflector watches from the resourceVersion of its list.
func New(o Options) (*Cache, error) {
	c := &Cache{o: o, streams: map[apiserver.TypeID]*stream{}, lists: map[schema.GroupVersionKind]bool{}}
	for _, ex := range o.Kinds {
		gvk, err := apiutil.GVKForObject(ex, o.Store.AdminClient().Scheme())
		if err != nil {
			return nil, fmt.Errorf("informer %s: kind of %T: %w", o.Name, ex, err)
		}
		c.lists[gvk.GroupVersion().WithKind(gvk.Kind+"List")] = true
		t := reflect.TypeOf(ex)
		if _, dup := c.streams[apiserver.TypeIDOf(ex)]; dup {
			return nil, fmt.Errorf("informer %s: kind %T given twice", o.Name, ex)
		}
		s := &stream{c: c, kind: t.Elem().Name(), example: ex}
		s.name = "informer/" + o.Name + "/" + s.kind
		s.fireFn = s.fire
		c.streams[apiserver.TypeIDOf(ex)] = s
		c.order = append(c.order, s)
	}
	return c, nil
}

// Sync fills the cache with the initial list of every kind, in the order
// of Options.Kinds, as a manager does before it starts its workers; the
// objects reach Handle as Added events.
func (c *Cache) Sync() error {
	c.synced = true
	for _, s := range c.order {
		if err := s.replace(); err != nil {
			return err
		}
	}
	return nil
}

// Store returns the server that holds the cache's objects; read it through
// its AdminClient.
func (c *Cache) Store() *apiserver.Server { return c.o.Store }

// Holds reports whether the cache holds objects of obj's kind.
func (c *Cache) Holds(obj client.Object) bool {
	_, ok := c.streams[apiserver.TypeIDOf(obj)]
	return ok
}

// HoldsList reports whether the cache holds the items of list's kind.
func (c *Cache) HoldsList(list client.ObjectList) bool {
	_, unstructured := list.(runtime.Unstructured) // its kind is in the object
	t := apiserver.TypeIDOf(list)
	if held, ok := c.listTypes[t]; ok && !unstructured {
		return held
	}
	gvk, err := apiutil.GVKForObject(list, c.o.Store.AdminClient().Scheme())
	held := err == nil && c.lists[gvk]
	if !unstructured {
		if c.listTypes == nil {
			c.listTypes = map[apiserver.TypeID]bool{}
		}
		c.listTypes[t] = held
	}
	return held
}

// Close stops the cache: events on their way and re-lists to come are
// dropped, as when the process holding it ends.
func (c *Cache) Close() {
	c.closed = true
	for _, s := range c.order {
		s.timer.Cancel()
		s.relist.Cancel()
		s.pending, s.head = nil, 0
	}
}

// Observe is handed every event of the API server at the time of the
// write; events of kinds (and names) the cache does not hold are ignored.
func (c *Cache) Observe(ev apiserver.Event) { c.ObserveAfter(ev, 0) }

// ObserveAfter is Observe for a write that lands at the server after
// from now (the latency of the requests its reconcile made before it):
// its event leaves for the cache then.
func (c *Cache) ObserveAfter(ev apiserver.Event, after time.Duration) {
	if c.closed || !c.synced {
		return
	}
	s := c.streams[apiserver.TypeIDOf(ev.Object)]
	if s == nil {
		return
	}
	if c.o.Only != nil && (ev.Object.GetName() != c.o.Only.Name || ev.Object.GetNamespace() != c.o.Only.Namespace) {
		return
	}
	s.observe(ev, after)
}

func (s *stream) observe(ev apiserver.Event, after time.Duration) {
	if s.broken {
		return
	}
	c := s.c
	eng := c.o.Engine
	d := after
	if c.o.Delay != nil {
		d += c.o.Delay()
	}
	if c.o.Fault != nil {
		f := c.o.Fault(s.kind)
		if f.Drop {
			s.broken = true
			s.relist = eng.At(maxTime(eng.Now().Add(f.RelistAfter), s.last), s.name+"/relist", s.doRelist)
			return
		}
		d += f.Extra
	}
	at := eng.Now().Add(d)
	if at.Before(s.last) {
		at = s.last
	}
	s.last = at
	s.pending = append(s.pending, delivery{at: at, ev: ev})
	if s.timer == nil {
		s.schedule()
	}
}

func (s *stream) trace(what string, fields map[string]any) {
	if s.c.o.Trace != nil {
		s.c.o.Trace(what, s.kind, fields)
	}
}

// schedule sets the timer for the head of the queue.
func (s *stream) schedule() {
	if s.head >= len(s.pending) {
		s.pending, s.head, s.timer = s.pending[:0], 0, nil
		return
	}
	s.timer = s.c.o.Engine.AtIn(&s.fireAt, s.pending[s.head].at, s.name, s.fireFn)
}

// fire delivers every event due now.
func (s *stream) fire() {
	now := s.c.o.Engine.Now()
	for s.head < len(s.pending) && !s.c.closed && !s.pending[s.head].at.After(now) {
		ev := s.pending[s.head].ev
		s.pending[s.head] = delivery{}
		s.head++
		s.apply(ev)
	}
	if s.c.closed {
		return
	}
	s.schedule()
}

// flush delivers every event still on its way, whatever its time.
func (s *stream) flush() {
	s.timer.Cancel()
	for s.head < len(s.pending) && !s.c.closed {
		ev := s.pending[s.head].ev
		s.pending[s.head] = delivery{}
		s.head++
		s.apply(ev)
	}
	s.pending, s.head, s.timer = s.pending[:0], 0, nil
}

// apply puts one watch event into the cache and hands it to Handle.
func (s *stream) apply(ev apiserver.Event) {
	store := s.c.o.Store
	if s.c.o.Transform != nil {
		ev.Object = s.c.o.Transform(ev.Object)
	}
	var old client.Object
	var err error
	if ev.Type == apiserver.Deleted {
		old, err = store.Remove(ev.Object)
	} else {
		old, err = store.Put(ev.Object)
	}
	if err != nil {
		panic(fmt.Sprintf("informer %s: %s %s: %v", s.c.o.Name, ev.Type, s.kind, err))
	}
	out := apiserver.Event{Type: ev.Type, Object: ev.Object, Old: old}
	if ev.Type != apiserver.Deleted {
		if old == nil {
			out.Type = apiserver.Added
		} else {
			out.Type = apiserver.Modified
		}
	}
	if s.c.o.Handle != nil {
		s.c.o.Handle(out)
	}
}

func (s *stream) doRelist() {
	s.relist = nil
	if s.c.closed {
		return
	}
	s.flush()
	s.broken = false
	s.last = s.c.o.Engine.Now()
	s.trace("informer.relist", nil)
	if err := s.replace(); err != nil {
		panic(err)
	}
}

// replace lists the kind from the source and makes the cache hold exactly
// that, handing the differences to Handle: Added for new objects, Modified
// for changed ones (same resourceVersion: nothing), Deleted for objects
// gone.
func (s *stream) replace() error {
	c := s.c
	var want []client.Object
	if c.o.Only != nil {
		probe := reflect.New(reflect.TypeOf(s.example).Elem()).Interface().(client.Object)
		probe.SetName(c.o.Only.Name)
		probe.SetNamespace(c.o.Only.Namespace)
		if o := c.o.Source.Stored(probe); o != nil {
			want = []client.Object{o}
		}
	} else {
		var err error
		if want, err = c.o.Source.Snapshot(s.example); err != nil {
			return fmt.Errorf("informer %s: listing %s: %w", c.o.Name, s.kind, err)
		}
	}
	have, err := c.o.Store.Snapshot(s.example)
	if err != nil {
		return fmt.Errorf("informer %s: listing cached %s: %w", c.o.Name, s.kind, err)
	}
	// Both are sorted by namespace and name: merge them.
	i, j := 0, 0
	for i < len(want) || j < len(have) {
		switch cmpKey(want, i, have, j) {
		case -1:
			s.apply(apiserver.Event{Type: apiserver.Added, Object: want[i]})
			i++
		case 1:
			s.apply(apiserver.Event{Type: apiserver.Deleted, Object: have[j]})
			j++
		default:
			if want[i].GetResourceVersion() != have[j].GetResourceVersion() {
				s.apply(apiserver.Event{Type: apiserver.Modified, Object: want[i]})
			}
			i++
			j++
		}
	}
	return nil
}

// cmpKey compares want[i] and have[j] by namespace and name, an exhausted
// side comparing last.
func cmpKey(want []client.Object, i int, have []client.Object, j int) int {
	switch {
	case i >= len(want):
		return 1
	case j >= len(have):
		return -1
	}
	a, b := want[i], have[j]
	switch {
	case a.GetNamespace() < b.GetNamespace():
		return -1
	case a.GetNamespace() > b.GetNamespace():
		return 1
	case a.GetName() < b.GetName():
		return -1
	case a.GetName() > b.GetName():
		return 1
	}
	return 0
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
