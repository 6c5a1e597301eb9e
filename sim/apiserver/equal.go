package apiserver

import (
	"reflect"
	"sync"

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
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	if eq := equalFor(va.Type()); eq != nil {
		if same, ok := eq(va, vb, 0); ok {
			return same
		}
	}
	return serialEqual.DeepEqual(a, b)
}

// maxEqualDepth bounds the nesting a compiled comparison follows.
const maxEqualDepth = 100

// equalFunc compares two values of one type; ok is false when the
// comparison cannot be finished here (see serialDeepEqual).
type equalFunc func(a, b reflect.Value, depth int) (same, ok bool)

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
		p.fn = func(a, b reflect.Value, depth int) (bool, bool) {
			if depth > maxEqualDepth {
				return false, false
			}
			return fn(a, b, depth)
		}
	}
	return p
}

// compileEqual returns the comparison of values of type t as the
// Equalities walk does it, nil when it cannot.
func compileEqual(t reflect.Type, building map[reflect.Type]*equalPlan) equalFunc {
	if eq, ok := directEqual[t]; ok {
		return eq
	}
	if fv, ok := serialEqual.Equalities[t]; ok {
		return func(a, b reflect.Value, _ int) (bool, bool) {
			return fv.Call([]reflect.Value{a, b})[0].Bool(), true
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.Bool() == b.Bool(), true }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.Int() == b.Int(), true }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.Uint() == b.Uint(), true }
	case reflect.Float32, reflect.Float64:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.Float() == b.Float(), true }
	case reflect.Complex64, reflect.Complex128:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.Complex() == b.Complex(), true }
	case reflect.String:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.String() == b.String(), true }
	case reflect.Func:
		return func(a, b reflect.Value, _ int) (bool, bool) { return a.IsNil() && b.IsNil(), true }
	case reflect.Pointer:
		elem := compilePlan(t.Elem(), building)
		return func(a, b reflect.Value, depth int) (bool, bool) {
			if a.IsNil() || b.IsNil() {
				return a.IsNil() == b.IsNil(), true
			}
			if elem.fn == nil {
				return false, false
			}
			return elem.fn(a.Elem(), b.Elem(), depth+1)
		}
	case reflect.Interface:
		return func(a, b reflect.Value, depth int) (bool, bool) {
			if a.IsNil() || b.IsNil() {
				return a.IsNil() == b.IsNil(), true
			}
			ea, eb := a.Elem(), b.Elem()
			if ea.Type() != eb.Type() {
				return false, true
			}
			eq := equalFor(ea.Type())
			if eq == nil {
				return false, false
			}
			return eq(ea, eb, depth+1)
		}
	case reflect.Array:
		elem := compilePlan(t.Elem(), building)
		return func(a, b reflect.Value, depth int) (bool, bool) {
			if sameAddr(a, b) {
				return true, true
			}
			if elem.fn == nil {
				return false, false
			}
			for i := range a.Len() {
				if same, ok := elem.fn(a.Index(i), b.Index(i), depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	case reflect.Slice:
		elem := compilePlan(t.Elem(), building)
		return func(a, b reflect.Value, depth int) (bool, bool) {
			if sameAddr(a, b) {
				return true, true
			}
			na, nb := a.Len(), b.Len() // 0 for nil: nil and empty are equal
			if na != nb {
				return false, true
			}
			if na == 0 || a.Pointer() == b.Pointer() {
				return true, true
			}
			if elem.fn == nil {
				return false, false
			}
			for i := range na {
				if same, ok := elem.fn(a.Index(i), b.Index(i), depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	case reflect.Map:
		elem := compilePlan(t.Elem(), building)
		return func(a, b reflect.Value, depth int) (bool, bool) {
			if sameAddr(a, b) {
				return true, true
			}
			na, nb := a.Len(), b.Len()
			if na != nb {
				return false, true
			}
			if na == 0 || a.Pointer() == b.Pointer() {
				return true, true
			}
			if elem.fn == nil {
				return false, false
			}
			it := a.MapRange()
			for it.Next() {
				vb := b.MapIndex(it.Key())
				if !vb.IsValid() {
					return false, true
				}
				if same, ok := elem.fn(it.Value(), vb, depth+1); !same || !ok {
					return same, ok
				}
			}
			return true, true
		}
	case reflect.Struct:
		n := t.NumField()
		fields := make([]*equalPlan, n)
		for i := range n {
			if !t.Field(i).IsExported() {
				return nil // Equalities would panic reaching it
			}
			fields[i] = compilePlan(t.Field(i).Type, building)
		}
		return func(a, b reflect.Value, depth int) (bool, bool) {
			if sameAddr(a, b) {
				return true, true
			}
			for i, f := range fields {
				if f.fn == nil {
					return false, false
				}
				if same, ok := f.fn(a.Field(i), b.Field(i), depth+1); !same || !ok {
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
	return func(a, b reflect.Value, _ int) (bool, bool) {
		return eq(valueOf[T](a), valueOf[T](b)), true
	}
}

// sameAddr is the walk's shortcut for arrays, slices, maps and structs:
// two addressable values at the same address are equal.
func sameAddr(a, b reflect.Value) bool {
	return a.CanAddr() && b.CanAddr() && a.UnsafeAddr() == b.UnsafeAddr()
}

// valueOf returns the T that v holds, without boxing it when v is
// addressable.
func valueOf[T any](v reflect.Value) T {
	if v.CanAddr() {
		return *(*T)(v.Addr().UnsafePointer())
	}
	return v.Interface().(T)
}
