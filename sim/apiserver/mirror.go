package apiserver

import (
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// This file lets a Server serve as the store of an informer cache
// (sim/informer): objects another Server stored are put into it as they
// are, shared, with their resourceVersion, and read back through its
// AdminClient with the same Get and List (selectors, field indexes) as
// the API server. A mirror has no writes of its own: no new
// resourceVersion, no watch event, no garbage collection.

// NewMirror returns an empty server to hold an informer cache's objects:
// unlike New it registers no kind up front (a typed kind is served from
// its first use), so it is cheap to make one per process.
func NewMirror(scheme *runtime.Scheme, clk clock.PassiveClock) *Server {
	return newServer(scheme, clk)
}

// Put stores obj, an object another Server stored, as the current state of
// its object, sharing it: obj must never be modified, as for any stored
// object. It returns the object it replaced, nil when there was none; an
// error when the kind is not served.
func (s *Server) Put(obj client.Object) (old client.Object, err error) {
	k, err := s.kindOf(obj)
	if err != nil {
		return nil, err
	}
	key := objKey{obj.GetNamespace(), obj.GetName()}
	if rv, ok := parseRV(obj.GetResourceVersion()); ok && rv > s.rv {
		s.rv = rv
	}
	if e := k.store.get(key); e != nil {
		old = e.obj
		e.obj = obj
		e.json, e.jsonOf = nil, nil
		k.reindex(e, obj)
		return old, nil
	}
	e := &entry{key: key, obj: obj}
	k.store.insert(e)
	k.reindex(e, obj)
	return nil, nil
}

// Remove takes the object named like obj out of the store and returns what
// was stored, nil when there was nothing.
func (s *Server) Remove(obj client.Object) (old client.Object, err error) {
	k, err := s.kindOf(obj)
	if err != nil {
		return nil, err
	}
	key := objKey{obj.GetNamespace(), obj.GetName()}
	e := k.store.get(key)
	if e == nil {
		return nil, nil
	}
	k.store.delete(key)
	k.reindex(e, nil)
	return e.obj, nil
}

// Snapshot returns the stored objects of the kind of example, shared (they
// must not be modified), sorted by namespace and name.
func (s *Server) Snapshot(example client.Object) ([]client.Object, error) {
	k, err := s.kindOf(example)
	if err != nil {
		return nil, err
	}
	entries := k.store.list("")
	out := make([]client.Object, len(entries))
	for i, e := range entries {
		out[i] = e.obj
	}
	return out, nil
}

// Stored returns the stored object named like obj, shared, or nil.
func (s *Server) Stored(obj client.Object) client.Object {
	k, err := s.kindOf(obj)
	if err != nil {
		return nil
	}
	if e := k.store.get(objKey{obj.GetNamespace(), obj.GetName()}); e != nil {
		return e.obj
	}
	return nil
}

// kindOf returns the served kind of obj; typed kinds are remembered by Go
// type, which saves the scheme lookup on every event a cache applies.
func (s *Server) kindOf(obj client.Object) (*kind, error) {
	t := TypeIDOf(obj)
	if k := s.byType[t]; k != nil && k.present {
		return k, nil
	}
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return nil, err
	}
	k, err := s.kindFor(gvk)
	if err == nil && k.typed() {
		if s.byType == nil {
			s.byType = map[TypeID]*kind{}
		}
		s.byType[t] = k
	}
	return k, err
}

// parseRV returns the value of the resourceVersion rv, as
// strconv.ParseUint(rv, 10, 64) gives it; ok is false where that fails.
// Up to 19 digits (no uint64 overflows) it reads them itself, without
// ParseUint's generality, on every event an informer cache applies.
func parseRV(rv string) (n uint64, ok bool) {
	if len(rv) == 0 || len(rv) > 19 {
		n, err := strconv.ParseUint(rv, 10, 64)
		return n, err == nil
	}
	for i := 0; i < len(rv); i++ {
		d := rv[i] - '0'
		if d > 9 {
			return 0, false
		}
		n = n*10 + uint64(d)
	}
	return n, true
}
