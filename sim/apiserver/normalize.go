package apiserver

import (
	"reflect"
	"sync"
	"time"
	"unsafe"

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
		w(v.UnsafePointer())
	}
}

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()

	timeWalkersMu sync.Mutex
	timeWalkers   = map[reflect.Type]*timeWalker{}
)

// walkFunc serialises the times in the value of its type at p. Walkers
// work on addresses, with the offsets and sizes of their type worked out
// ahead, not on reflect.Values: reflect's Field, Index and Elem on every
// step of a walk were most of the cost of a write's in (2% of a run).
type walkFunc func(p unsafe.Pointer)

// timeWalker serialises the times in a value of one type; fn is nil for a
// type that holds none.
type timeWalker struct {
	fn walkFunc
	// building is set while the walker is built: a type met again inside
	// itself may hold times through the part not worked out yet.
	building bool
}

// walks reports whether a value with walker w may hold times.
func (w *timeWalker) walks() bool { return w.fn != nil || w.building }

// timeWalkerOf returns the walker of t, nil when values of t hold no time.
// Walkers are built once per type, with the fields that hold times worked
// out ahead, so a walk visits only those.
func timeWalkerOf(t reflect.Type) walkFunc {
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
	recursive := func(inner *timeWalker) walkFunc {
		if !inner.building {
			return inner.fn
		}
		return func(p unsafe.Pointer) {
			if inner.fn != nil {
				inner.fn(p)
			}
		}
	}
	switch t {
	case timeType:
		w.fn = func(p unsafe.Pointer) {
			tm := (*metav1.Time)(p)
			// A time in whole seconds without a monotonic clock reading
			// (which Round(0) strips) is what Truncate would return: most
			// times written are stored ones, already truncated.
			if t := tm.Time; t.Nanosecond() != 0 || t != t.Round(0) {
				tm.Time = t.Truncate(time.Second)
			}
		}
		return w
	case microTimeType:
		w.fn = func(p unsafe.Pointer) {
			tm := (*metav1.MicroTime)(p)
			tm.Time = tm.Truncate(time.Microsecond)
		}
		return w
	}
	switch t.Kind() {
	case reflect.Pointer:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk := recursive(inner)
			w.fn = func(p unsafe.Pointer) {
				if e := *(*unsafe.Pointer)(p); e != nil {
					walk(e)
				}
			}
		}
	case reflect.Slice:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk, size := recursive(inner), t.Elem().Size()
			w.fn = func(p unsafe.Pointer) {
				s := (*sliceHeader)(p)
				for i := range s.len {
					walk(unsafe.Add(s.data, uintptr(i)*size))
				}
			}
		}
	case reflect.Array:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk, size, n := recursive(inner), t.Elem().Size(), t.Len()
			w.fn = func(p unsafe.Pointer) {
				for i := range n {
					walk(unsafe.Add(p, uintptr(i)*size))
				}
			}
		}
	case reflect.Map:
		if inner := walkerLocked(t.Elem()); inner.walks() {
			walk, elem := recursive(inner), t.Elem()
			// Map values cannot be changed in place: copy, walk, store back.
			w.fn = func(p unsafe.Pointer) {
				v := reflect.NewAt(t, p).Elem()
				it := v.MapRange()
				for it.Next() {
					e := reflect.New(elem)
					e.Elem().Set(it.Value())
					walk(e.UnsafePointer())
					v.SetMapIndex(it.Key(), e.Elem())
				}
			}
		}
	case reflect.Struct:
		type field struct {
			off  uintptr
			walk walkFunc
		}
		var fields []field
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if inner := walkerLocked(f.Type); inner.walks() {
				fields = append(fields, field{f.Offset, recursive(inner)})
			}
		}
		if len(fields) > 0 {
			w.fn = func(p unsafe.Pointer) {
				for _, f := range fields {
					f.walk(unsafe.Add(p, f.off))
				}
			}
		}
	}
	return w
}

// sliceHeader is the layout of a slice.
type sliceHeader struct {
	data     unsafe.Pointer
	len, cap int
}
