package apiserver

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// in returns a server-owned copy of obj in the form kind k is stored in,
// with its GVK set and its times at the precision they are serialised with
// (serialiseTimes), as a real API server stores them. For a write of the
// status subresource (status), only the status's times are: update reads
// nothing else of it but the resourceVersion and UID.
//
// With keep (NoEcho: the caller gives its object up) a typed object of the
// kind's Go type is taken as it is, not copied.
//
// A status write of a typed object is never kept: update stores the
// object in returns, its other fields set to the stored object's
// (withStatus), and the caller's must stay as it was. With keep, or a
// status copier, that object is a new one with only the resourceVersion,
// UID and status of obj (shared with keep, else copied), all that update
// reads of it; else a whole copy.
func (k *kind) in(obj client.Object, keep, status bool) (client.Object, error) {
	u, isU := obj.(*unstructured.Unstructured)
	var out client.Object
	switch {
	case isU && !k.typed():
		out = u.DeepCopy()
	case isU:
		out = k.newObject()
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
			return nil, fmt.Errorf("converting unstructured %s %q: %w", k.gvk.Kind, u.GetName(), err)
		}
	case !k.typed():
		return nil, fmt.Errorf("%s is served unstructured; use *unstructured.Unstructured, not %T", k.gvk, obj)
	case reflect.TypeOf(obj).Elem() != k.goType:
		return nil, fmt.Errorf("%s is %v, not %T", k.gvk, k.goType, obj)
	case status && (keep || k.copier != nil && k.copier.status != nil):
		out = k.newObject()
		out.SetResourceVersion(obj.GetResourceVersion())
		out.SetUID(obj.GetUID())
		if keep {
			k.takeStatus(out, obj)
		} else {
			k.copier.status(obj, out)
		}
	case keep:
		out = obj
	case k.copier != nil:
		out = k.copier.clone(obj)
	default:
		out = obj.DeepCopyObject().(client.Object)
	}
	if k.typed() {
		k.serialiseTimes(out, status && k.status)
	}
	k.setGVK(out)
	return out, nil
}

// serialiseTimes is serialiseTimes for an object of typed kind k, or for
// its status only, with the walkers looked up once per kind.
func (k *kind) serialiseTimes(obj client.Object, status bool) {
	if !k.walkersReady {
		k.times = timeWalkerOf(k.goType)
		if k.statusField >= 0 {
			f := k.goType.Field(k.statusField)
			k.statusTimes, k.statusOffset = timeWalkerOf(f.Type), f.Offset
		}
		k.walkersReady = true
	}
	walk := k.times
	p := reflect.ValueOf(obj).UnsafePointer()
	if status {
		walk, p = k.statusTimes, unsafe.Add(p, k.statusOffset)
	}
	if walk != nil {
		walk(p)
	}
}

// out copies the stored object obj into dst, which may be typed or
// unstructured.
func (k *kind) out(obj client.Object, dst client.Object) error {
	u, isU := dst.(*unstructured.Unstructured)
	switch {
	case isU && !k.typed():
		obj.(*unstructured.Unstructured).DeepCopyInto(u)
	case isU:
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return fmt.Errorf("converting %s %q to unstructured: %w", k.gvk.Kind, obj.GetName(), err)
		}
		u.SetUnstructuredContent(m)
		u.SetGroupVersionKind(k.gvk)
	case !k.typed():
		return fmt.Errorf("%s is served unstructured; use *unstructured.Unstructured, not %T", k.gvk, dst)
	case reflect.TypeOf(dst).Elem() != k.goType:
		return fmt.Errorf("%s is %v, not %T", k.gvk, k.goType, dst)
	case k.copier != nil:
		k.copier.into(obj, dst)
	default:
		reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(obj.DeepCopyObject()).Elem())
	}
	return nil
}

// shallowCopy returns a new object with the fields of obj: for a typed
// kind the struct is copied and its maps, slices and pointers are shared;
// an unstructured object is deep-copied. Only for objects that are never
// changed in place.
func (k *kind) shallowCopy(obj client.Object) client.Object {
	if !k.typed() {
		return obj.DeepCopyObject().(client.Object)
	}
	if k.copier != nil {
		return k.copier.shallow(obj)
	}
	out := k.newObject()
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return out
}

// setGVK sets the apiVersion and kind of obj to k's: for a typed object,
// to the strings of k (SetGroupVersionKind builds apiVersion anew, a
// string concatenation per write of a kind outside the core group).
func (k *kind) setGVK(obj client.Object) {
	if tm, ok := obj.GetObjectKind().(*metav1.TypeMeta); ok {
		tm.APIVersion, tm.Kind = k.apiVersion, k.gvk.Kind
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
}

// newObject returns a new empty object of typed kind k.
func (k *kind) newObject() client.Object {
	return reflect.New(k.goType).Interface().(client.Object)
}

// decode builds a server-owned object of kind k from JSON.
func (k *kind) decode(data []byte) (client.Object, error) {
	if !k.typed() {
		var m map[string]any
		if err := utiljson.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(k.gvk)
		return u, nil
	}
	obj := k.newObject()
	if err := json.Unmarshal(data, obj); err != nil {
		return nil, err
	}
	k.setGVK(obj)
	return obj, nil
}

// takeStatus sets the status of dst to the status of src, shared: stored
// objects are never changed in place, so the two may share it.
func (k *kind) takeStatus(dst, src client.Object) {
	if !k.typed() {
		d, s := dst.(*unstructured.Unstructured).Object, src.(*unstructured.Unstructured).Object
		if st, ok := s["status"]; ok {
			d["status"] = st
		} else {
			delete(d, "status")
		}
		return
	}
	reflect.ValueOf(dst).Elem().Field(k.statusField).Set(reflect.ValueOf(src).Elem().Field(k.statusField))
}

// withStatus returns an object with the fields of cur, shared, but for
// the status, which is in's: the object a write of the status subresource
// stores. For a typed kind it is in itself, its other fields set to cur's:
// update reads nothing else of in, which is the server's own (what in or
// a patch made), so no new object need be made.
func (k *kind) withStatus(cur, in client.Object) client.Object {
	if !k.typed() {
		next := k.shallowCopy(cur)
		k.takeStatus(next, in)
		return next
	}
	cv, iv := reflect.ValueOf(cur).Elem(), reflect.ValueOf(in).Elem()
	for i := range iv.NumField() {
		if i == k.statusField {
			continue
		}
		f := iv.Field(i)
		if !f.CanSet() {
			// An unexported field (no API type has one): a copy of
			// cur, as a whole.
			next := k.shallowCopy(cur)
			k.takeStatus(next, in)
			return next
		}
		f.Set(cv.Field(i))
	}
	return in
}

// clearStatus drops the status of obj.
func (k *kind) clearStatus(obj client.Object) {
	if !k.typed() {
		delete(obj.(*unstructured.Unstructured).Object, "status")
		return
	}
	f := reflect.ValueOf(obj).Elem().Field(k.statusField)
	f.Set(reflect.Zero(f.Type()))
}

// sameContent reports whether a and b agree outside metadata, and outside
// status when k has a status subresource: whether a write from a to b
// leaves metadata.generation alone. Only the fields d holds are compared
// (b shares the others with a), none when d is not anyDiff.
func (k *kind) sameContent(a, b client.Object, d diff) bool {
	if !k.typed() {
		am, bm := a.(*unstructured.Unstructured).Object, b.(*unstructured.Unstructured).Object
		skip := func(key string) bool {
			return key == "apiVersion" || key == "kind" || key == "metadata" || (k.status && key == "status")
		}
		for key, v := range am {
			if !skip(key) && !serialDeepEqual(v, bm[key]) {
				return false
			}
		}
		for key := range bm {
			if _, ok := am[key]; !ok && !skip(key) {
				return false
			}
		}
		return true
	}
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	fields := k.contentFields
	if !k.status && k.statusField >= 0 {
		fields = append(fields[:len(fields):len(fields)], k.statusField)
	}
	for _, i := range fields {
		if d.differs(i, func() bool {
			return serialDeepEqual(av.Field(i).Addr().Interface(), bv.Field(i).Addr().Interface())
		}) {
			return false
		}
	}
	return true
}

// serialEqual is apiequality.Semantic with times compared at the precision
// they are serialised with. Stored objects already hold such times
// (serialiseTimes, and patches go through JSON); the comparison still
// truncates so that an object to write that a caller built with finer
// times, or in another time zone, is not a change for that alone.
var serialEqual = conversion.EqualitiesOrDie(
	quantityEqual,
	microTimeEqual,
	timeEqual,
	fieldsV1Equal,
	func(a, b labels.Selector) bool { return a.String() == b.String() },
	func(a, b fields.Selector) bool { return a.String() == b.String() },
)

// The equality functions of serialEqual for struct types, which
// serialDeepEqual's compiled comparisons call directly (directEqual)
// rather than through reflect's Call.
var (
	quantityEqual  = func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }
	microTimeEqual = func(a, b metav1.MicroTime) bool {
		return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
	}
	timeEqual     = func(a, b metav1.Time) bool { return a.Truncate(time.Second).Equal(b.Truncate(time.Second)) }
	fieldsV1Equal = func(a, b metav1.FieldsV1) bool { return a.Equal(b) }
)

// sameMeta reports whether a and b have the same metadata.
func (k *kind) sameMeta(a, b client.Object) bool {
	if !k.typed() {
		return serialDeepEqual(a.(*unstructured.Unstructured).Object["metadata"], b.(*unstructured.Unstructured).Object["metadata"])
	}
	return serialDeepEqual(reflect.ValueOf(a).Elem().Field(k.metaField).Addr().Interface(),
		reflect.ValueOf(b).Elem().Field(k.metaField).Addr().Interface())
}

// sameStatus reports whether a and b have the same status.
func (k *kind) sameStatus(a, b client.Object) bool {
	if !k.typed() {
		return serialDeepEqual(a.(*unstructured.Unstructured).Object["status"], b.(*unstructured.Unstructured).Object["status"])
	}
	return serialDeepEqual(reflect.ValueOf(a).Elem().Field(k.statusField).Addr().Interface(),
		reflect.ValueOf(b).Elem().Field(k.statusField).Addr().Interface())
}
