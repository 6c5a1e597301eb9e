package apiserver

import (
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serialiseTimes sets every metav1.Time in obj (a pointer to a typed
// object) to the precision it is serialised with (whole seconds) and every
// metav1.MicroTime to microseconds, as a real API server stores what it is
// sent: a Create or Update keeps the caller's in-memory values otherwise,
// and a client would read back times that no real server returns. Patches
// need no such step: they are applied through JSON.
func serialiseTimes(obj any) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	if w := timeWalkerOf(v.Type().Elem()); w != nil {
		w(v.Elem())
	}
}

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()

	timeWalkersMu sync.Mutex
	timeWalkers   = map[reflect.Type]*timeWalker{}
)

// timeWalker serialises the times in an addressable value of one type; fn
// is nil for a type that holds none.
type timeWalker struct {
	fn func(reflect.Value)
	// building is set while the walker is built: a type met again inside
	// itself may hold times through the part not worked out yet.
	building bool
}

// walks reports whether a value with walker w may hold times.
func (w *timeWalker) walks() bool { return w.fn != nil || w.building }

// timeWalkerOf returns the walker of t, nil when values of t hold no time.
// Walkers are built once per type, with the fields that hold times worked
// out ahead, so a walk visits only those.
func timeWalkerOf(t reflect.Type) func(reflect.Value) {
	timeWalkersMu.Lock()
	defer timeWalkersMu.Unlock()
	// Complete once the outermost walkerLocked returns: fn no longer
	// changes.
	return walkerLocked(t).fn
}

// walkerLocked builds the walker of t. A type that contains itself, at any
// depth, gets the walker being built, which is complete before any value
// is walked; the types on the way are taken to hold times (walking more
// than needed is only slower).
func walkerLocked(t reflect.Type) *timeWalker {
	if w, ok := timeWalkers[t]; ok {
		return w
	}
	w := &timeWalker{building: true}
	timeWalkers[t] = w
	defer func() { w.building = false }()
	recursive := func(inner *timeWalker) func(reflect.Value) {
		return func(v reflect.Value) {
			if inner.fn != nil {
				inner.fn(v)
			}
		}
	}
	switch t {
	case timeType:
		w.fn = func(v reflect.Value) {
			tm := v.Addr().Interface().(*metav1.Time)
			// A time in whole seconds without a monotonic clock reading
			// (which Round(0) strips) is what Truncate would return: most
			// times written are stored ones, already truncated.
			if t := tm.Time; t.Nanosecond() != 0 || t != t.Round(0) {
				tm.Time = t.Truncate(time.Second)
			}
		}
		return w
	case microTimeType:
		w.fn = func(v reflect.Value) {
			tm := v.Addr().Interface().(*metav1.MicroTime)
			tm.Time = tm.Truncate(time.Microsecond)
		}
		return w
	}
	switch t.Kind() {
	case reflect.Pointer:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk := recursive(inner)
			w.fn = func(v reflect.Value) {
				if !v.IsNil() {
					walk(v.Elem())
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk := recursive(inner)
			w.fn = func(v reflect.Value) {
				for i := range v.Len() {
					walk(v.Index(i))
				}
			}
		}
	case reflect.Map:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk, elem := recursive(inner), t.Elem()
			// Map values cannot be changed in place: copy, walk, store back.
			w.fn = func(v reflect.Value) {
				it := v.MapRange()
				for it.Next() {
					e := reflect.New(elem).Elem()
					e.Set(it.Value())
					walk(e)
					v.SetMapIndex(it.Key(), e)
				}
			}
		}
	case reflect.Struct:
		type field struct {
			i    int
			walk func(reflect.Value)
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if inner := walkerLocked(f.Type); inner.walks() {
				fields = append(fields, field{i, recursive(inner)})
			}
		}
		if len(fields) > 0 {
			w.fn = func(v reflect.Value) {
				for _, f := range fields {
					f.walk(v.Field(f.i))
				}
			}
		}
	}
	return w
}
