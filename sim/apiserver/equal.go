package apiserver

import (
	"maps"
	"reflect"
	"sync"
	"sync/atomic"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// serialDeepEqual is serialEqual.DeepEqual(a, b), worked out by a
// comparison compiled once per Go type instead of Equalities' reflective
// walk, which defers a recover, looks the type up among the equality
// functions and records every struct, slice and map it enters in a map,
// for every value it compares (the status comparison of each write was a
// few percent of a run). It follows the walk case by case: the equality
// functions first (a metav1.Time compared directly, the others called as
// Equalities calls them), nil and empty slices and maps equal, a nil
// pointer or interface equal only to nil, the same address equal. It
// keeps no record of the pairs it entered, which only matters for a value
// that contains itself; API objects are trees, and past maxEqualDepth, or
// at a type it does not compile (unexported fields outside the equality
// functions, channels, unsafe pointers), it hands the whole comparison to
// serialEqual.DeepEqual.
func serialDeepEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == b
	}
	id := TypeIDOf(a)
	if id != TypeIDOf(b) {
		return false
	}
	tp := topPlanOf(id, a)
	var same, ok bool
	switch {
	case tp.plan.fn == nil:
	case tp.ptr:
		// The usual case, the address of a part of an object: what the
		// compiled comparison of the pointer type does, with the
		// pointers the interfaces hold.
		pa, pb := dataWord(a), dataWord(b)
		if pa == nil || pb == nil {
			return pa == pb
		}
		same, ok = tp.plan.fn(pa, pb, 1)
	default:
		same, ok = tp.plan.fn(addressOf(reflect.ValueOf(a)), addressOf(reflect.ValueOf(b)), 0)
	}
	if ok {
		return same
	}
	return serialEqual.DeepEqual(a, b)
}

// dataWord returns the data word of the interface value v: for a pointer,
// the pointer.
func dataWord(v any) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1]
}

// topPlan is what serialDeepEqual compares values of one dynamic type by:
// for a pointer type (ptr), the plan of the type it points to; else the
// plan of the type.
type topPlan struct {
	ptr  bool
	plan *equalPlan
}

// topPlans holds the topPlan of each dynamic type serialDeepEqual has
// compared, by TypeID: a map read without a lock, copied to add a type
// (under compileMu), where a sync.Map keyed by reflect.Type hashed an
// interface on every comparison.
var topPlans atomic.Pointer[map[TypeID]topPlan]

// topPlanOf returns the topPlan of v's dynamic type, of TypeID id.
func topPlanOf(id TypeID, v any) topPlan {
	if m := topPlans.Load(); m != nil {
		if tp, ok := (*m)[id]; ok {
			return tp
		}
	}
	t := reflect.TypeOf(v)
	tp := topPlan{ptr: t.Kind() == reflect.Pointer}
	if tp.ptr {
		tp.plan = planFor(t.Elem())
	} else {
		tp.plan = planFor(t)
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	next := map[TypeID]topPlan{}
	if m := topPlans.Load(); m != nil {
		maps.Copy(next, *m)
	}
	next[id] = tp
	topPlans.Store(&next)
	return tp
}

// addressOf returns the address of a copy of v, which is not addressable:
// a compiled comparison reads values in memory.
func addressOf(v reflect.Value) unsafe.Pointer {
	c := reflect.New(v.Type())
	c.Elem().Set(v)
	return c.UnsafePointer()
}

// maxEqualDepth bounds the nesting a compiled comparison follows.
const maxEqualDepth = 100

// equalFunc compares the two values of one type at a and b; ok is false
// when the comparison cannot be finished here (see serialDeepEqual).
// Comparisons read values in memory, with the offsets and sizes of their
// type worked out ahead, not through reflect.Values: reflect's Field,
// Index and Elem on every step were most of the cost of comparing a
// status.
type equalFunc func(a, b unsafe.Pointer, depth int) (same, ok bool)

// equalPlan holds the compiled comparison of a type: fn is nil for a type
// not compiled. A plan is stored before its type's parts are compiled, so
// a type that contains itself refers to its own plan.
type equalPlan struct {
	fn equalFunc
}

var equalPlans sync.Map // reflect.Type -> *equalPlan

// equalFor returns the compiled comparison of values of type t, nil when
// t is not compiled.
func equalFor(t reflect.Type) equalFunc {
	p := planFor(t)
	if p.fn == nil {
		return nil
	}
	return p.fn
}

var compileMu sync.Mutex

func planFor(t reflect.Type) *equalPlan {
	if p, ok := equalPlans.Load(t); ok {
		return p.(*equalPlan)
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	building := map[reflect.Type]*equalPlan{}
	p := compilePlan(t, building)
	for bt, bp := range building {
		equalPlans.Store(bt, bp)
	}
	return p
}

// compilePlan compiles the plan of t; building holds the plans being
// compiled, which planFor stores once they are all done.
func compilePlan(t reflect.Type, building map[reflect.Type]*equalPlan) *equalPlan {
	if p, ok := equalPlans.Load(t); ok {
		return p.(*equalPlan)
	}
	if p, ok := building[t]; ok {
		return p
	}
	p := &equalPlan{}
	building[t] = p
	if fn := compileEqual(t, building); fn != nil {
		p.fn = func(a, b unsafe.Pointer, depth int) (bool, bool) {
			if depth > maxEqualDepth {
				return false, false
			}
			return fn(a, b, depth)
		}
	}
	return p
}

// scalarEqual returns the comparison of values of type T by ==.
func scalarEqual[T comparable]() equalFunc {
	return func(a, b unsafe.Pointer, _ int) (bool, bool) { return *(*T)(a) == *(*T)(b), true }
}

// compileEqual returns the comparison of values of type t as the
// Equalities walk does it, nil when it cannot. The walk's same-address
// shortcut for arrays, slices, maps and structs applies to addressable
// values: parts of a value reached through a pointer, not a map's values
// or an interface's, which are compared from copies here.
func compileEqual(t reflect.Type, building map[reflect.Type]*equalPlan) equalFunc {
	if eq, ok := directEqual[t]; ok {
		return eq
	}
	if fv, ok := serialEqual.Equalities[t]; ok {
		return func(a, b unsafe.Pointer, _ int) (bool, bool) {
			return fv.Call([]reflect.Value{reflect.NewAt(t, a).Elem(), reflect.NewAt(t, b).Elem()})[0].Bool(), true
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return scalarEqual[bool]()
	case reflect.Int:
		return scalarEqual[int]()
	case reflect.Int8:
		return scalarEqual[int8]()
	case reflect.Int16:
		return scalarEqual[int16]()
	case reflect.Int32:
		return scalarEqual[int32]()
	case reflect.Int64:
		return scalarEqual[int64]()
	case reflect.Uint:
		return scalarEqual[uint]()
	case reflect.Uint8:
		return scalarEqual[uint8]()
	case reflect.Uint16:
		return scalarEqual[uint16]()
	case reflect.Uint32:
		return scalarEqual[uint32]()
	case reflect.Uint64:
		return scalarEqual[uint64]()
	case reflect.Uintptr:
		return scalarEqual[uintptr]()
	case reflect.Float32:
		return scalarEqual[float32]()
	case reflect.Float64:
		return scalarEqual[float64]()
	case reflect.Complex64:
		return scalarEqual[complex64]()
	case reflect.Complex128:
		return scalarEqual[complex128]()
	case reflect.String:
		return scalarEqual[string]()
	case reflect.Func:
		return func(a, b unsafe.Pointer, _ int) (bool, bool) {
			return *(*unsafe.Pointer)(a) == nil && *(*unsafe.Pointer)(b) == nil, true
		}
	case reflect.Pointer:
		elem := compilePlan(t.Elem(), building)
		return func(a, b unsafe.Pointer, depth int) (bool, bool) {
			ea, eb := *(*unsafe.Pointer)(a), *(*unsafe.Pointer)(b)
			if ea == nil || eb == nil {
				return ea == eb, true
			}
			if elem.fn == nil {
				return false, false
			}
			return elem.fn(ea, eb, depth+1)
		}
	case reflect.Interface:
		return func(a, b unsafe.Pointer, depth int) (bool, bool) {
			ia, ib := reflect.NewAt(t, a).Elem(), reflect.NewAt(t, b).Elem()
			if ia.IsNil() || ib.IsNil() {
				return ia.IsNil() == ib.IsNil(), true
			}
			ea, eb := ia.Elem(), ib.Elem()
			if ea.Type() != eb.Type() {
				return false, true
			}
			eq := equalFor(ea.Type())
			if eq == nil {
				return false, false
			}
			return eq(addressOf(ea), addressOf(eb), depth+1)
		}
	case reflect.Array:
		elem := compilePlan(t.Elem(), building)
		n, size := t.Len(), t.Elem().Size()
		return func(a, b unsafe.Pointer, depth int) (bool, bool) {
			if a == b {
				return true, true
			}
			if elem.fn == nil {
				return false, false
			}
			for i := range n {
				off := uintptr(i) * size
				if same, ok := elem.fn(unsafe.Add(a, off), unsafe.Add(b, off), depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	case reflect.Slice:
		elem := compilePlan(t.Elem(), building)
		size := t.Elem().Size()
		return func(a, b unsafe.Pointer, depth int) (bool, bool) {
			if a == b {
				return true, true
			}
			sa, sb := (*sliceHeader)(a), (*sliceHeader)(b)
			if sa.len != sb.len { // 0 for nil: nil and empty are equal
				return false, true
			}
			if sa.len == 0 || sa.data == sb.data {
				return true, true
			}
			if elem.fn == nil {
				return false, false
			}
			for i := range sa.len {
				off := uintptr(i) * size
				if same, ok := elem.fn(unsafe.Add(sa.data, off), unsafe.Add(sb.data, off), depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	case reflect.Map:
		if eq := stringMapEqual(t); eq != nil {
			return eq
		}
		elem := compilePlan(t.Elem(), building)
		return func(a, b unsafe.Pointer, depth int) (bool, bool) {
			if a == b {
				return true, true
			}
			ma, mb := reflect.NewAt(t, a).Elem(), reflect.NewAt(t, b).Elem()
			na, nb := ma.Len(), mb.Len()
			if na != nb {
				return false, true
			}
			if na == 0 || *(*unsafe.Pointer)(a) == *(*unsafe.Pointer)(b) {
				return true, true
			}
			if elem.fn == nil {
				return false, false
			}
			it := ma.MapRange()
			for it.Next() {
				vb := mb.MapIndex(it.Key())
				if !vb.IsValid() {
					return false, true
				}
				if same, ok := elem.fn(addressOf(it.Value()), addressOf(vb), depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	case reflect.Struct:
		type field struct {
			off  uintptr
			plan *equalPlan
		}
		n := t.NumField()
		fields := make([]field, n)
		for i := range n {
			f := t.Field(i)
			if !f.IsExported() {
				return nil // Equalities would panic reaching it
			}
			fields[i] = field{f.Offset, compilePlan(f.Type, building)}
		}
		return func(a, b unsafe.Pointer, depth int) (bool, bool) {
			if a == b {
				return true, true
			}
			for _, f := range fields {
				if f.plan.fn == nil {
					return false, false
				}
				if same, ok := f.plan.fn(unsafe.Add(a, f.off), unsafe.Add(b, f.off), depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	}
	return nil // channels, unsafe pointers
}

// directEqual holds the comparisons of the struct types with an equality
// function in serialEqual, which call that function directly: through
// reflect's Call (as Equalities does) it was most of the cost of comparing
// a Node's status, whose resource lists hold a Quantity per resource.
// TestDirectEqualIsSerialEqual checks that every struct type of
// serialEqual is here, with its function.
var directEqual = map[reflect.Type]equalFunc{
	timeType:                             direct(timeEqual),
	microTimeType:                        direct(microTimeEqual),
	reflect.TypeFor[resource.Quantity](): direct(quantityEqual),
	reflect.TypeFor[metav1.FieldsV1]():   direct(fieldsV1Equal),
}

// direct returns the comparison of values of type T by eq.
func direct[T any](eq func(a, b T) bool) equalFunc {
	return func(a, b unsafe.Pointer, _ int) (bool, bool) {
		return eq(*(*T)(a), *(*T)(b)), true
	}
}

// stringMapEqual returns the comparison of the maps of type t when its
// keys are strings and its values strings (labels, annotations, a node
// selector) or Quantities (a ResourceList), nil for other maps. It reads
// the maps as map[string]string or map[string]resource.Quantity, which
// have the layout and the key hashing of any map with such keys and
// values, where reflect's MapIndex and MapIter.Value copied every value
// to the heap to compare it. It compares as the Map case of compileEqual
// does.
func stringMapEqual(t reflect.Type) equalFunc {
	if t.Key().Kind() != reflect.String {
		return nil
	}
	switch e := t.Elem(); {
	case e.Kind() == reflect.String:
		if _, ok := serialEqual.Equalities[e]; ok {
			return nil
		}
		return mapEqual(func(a, b string) bool { return a == b })
	case e == reflect.TypeFor[resource.Quantity]():
		return mapEqual(quantityEqual)
	}
	return nil
}

// mapEqual returns the comparison of maps with string keys and values of
// type V, compared by eq.
func mapEqual[V any](eq func(a, b V) bool) equalFunc {
	return func(a, b unsafe.Pointer, depth int) (bool, bool) {
		if a == b {
			return true, true
		}
		ma, mb := *(*map[string]V)(a), *(*map[string]V)(b)
		if len(ma) != len(mb) {
			return false, true
		}
		if len(ma) == 0 || *(*unsafe.Pointer)(a) == *(*unsafe.Pointer)(b) {
			return true, true
		}
		if depth+1 > maxEqualDepth {
			return false, false
		}
		for k, va := range ma {
			vb, ok := mb[k]
			if !ok || !eq(va, vb) {
				return false, true
			}
		}
		return true, true
	}
}
