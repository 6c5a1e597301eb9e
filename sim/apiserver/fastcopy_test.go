package apiserver

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestCopyMetaIsDeepCopy: copyMeta gives what ObjectMeta's generated
// DeepCopyInto gives, nil and empty maps and slices included, and shares
// no map, slice or pointer with its source; it fails when ObjectMeta gains
// or loses a field (copyMeta would not know it).
func TestCopyMetaIsDeepCopy(t *testing.T) {
	want := []string{"Name", "GenerateName", "Namespace", "SelfLink", "UID", "ResourceVersion", "Generation", "CreationTimestamp",
		"DeletionTimestamp", "DeletionGracePeriodSeconds", "Labels", "Annotations", "OwnerReferences", "Finalizers", "ManagedFields"}
	if got := fieldNames(reflect.TypeFor[metav1.ObjectMeta]()); !slices.Equal(got, want) {
		t.Fatalf("metav1.ObjectMeta has fields %v, copyMeta knows %v: teach copyMeta the change", got, want)
	}
	f := randfill.New().NilChance(0).NumElements(1, 4)
	for i := range 200 {
		var in metav1.ObjectMeta
		f.Fill(&in)
		if i%4 == 1 { // nil and empty, as DeepCopyInto keeps them
			in.Labels, in.Annotations, in.Finalizers, in.OwnerReferences = nil, map[string]string{}, []string{}, nil
		}
		var out metav1.ObjectMeta
		out.Labels = map[string]string{"stale": "x"} // a reused object's old contents go
		copyMeta(&in, &out)
		if w := in.DeepCopy(); !reflect.DeepEqual(&out, w) {
			t.Fatalf("copyMeta differs from DeepCopyInto:\n got %#v\nwant %#v", out, *w)
		}
		if shared := sharedRefs(reflect.ValueOf(&in).Elem(), reflect.ValueOf(&out).Elem()); len(shared) > 0 {
			t.Fatalf("copyMeta shares %v with its source", shared)
		}
	}
}

// TestCopiersAreDeepCopies: the copiers of the kinds with their own copy
// (Node, Pod, BootcNode) equal the generated DeepCopyInto and share
// nothing with the stored object; each fails when its type gains a
// top-level field.
func TestCopiersAreDeepCopies(t *testing.T) {
	f := randfill.New().NilChance(0).NumElements(1, 2).MaxDepth(12)
	for _, o := range []client.Object{&corev1.Node{}, &corev1.Pod{}, &v1alpha1.BootcNode{}} {
		typ := reflect.TypeOf(o).Elem()
		if got := fieldNames(typ); !slices.Equal(got, []string{"TypeMeta", "ObjectMeta", "Spec", "Status"}) {
			t.Fatalf("%v has fields %v: its copier copies TypeMeta, ObjectMeta, Spec and Status only", typ, got)
		}
		c, ok := copiers[typ]
		if !ok {
			t.Fatalf("no copier for %v", typ)
		}
		for range 20 {
			in := reflect.New(typ).Interface().(client.Object)
			f.Fill(in)
			out := reflect.New(typ).Interface().(client.Object)
			c.into(in, out)
			if w := in.DeepCopyObject(); !reflect.DeepEqual(out, w) {
				t.Fatalf("%v: the copier differs from DeepCopyInto", typ)
			}
			if shared := sharedRefs(reflect.ValueOf(in).Elem(), reflect.ValueOf(out).Elem()); len(shared) > 0 {
				t.Fatalf("%v: the copier shares %v with its source", typ, shared)
			}
			cl := c.clone(in)
			if w := in.DeepCopyObject(); !reflect.DeepEqual(cl, w) {
				t.Fatalf("%v: clone differs from DeepCopy", typ)
			}
			if shared := sharedRefs(reflect.ValueOf(in).Elem(), reflect.ValueOf(cl).Elem()); len(shared) > 0 {
				t.Fatalf("%v: clone shares %v with its source", typ, shared)
			}
			// shallow and share give the source's fields themselves.
			sh := c.shallow(in)
			into := reflect.New(typ).Interface().(client.Object)
			c.share(in, into)
			for _, got := range []client.Object{sh, into} {
				if got == in || !reflect.DeepEqual(got, in) || len(sharedRefs(reflect.ValueOf(in).Elem(), reflect.ValueOf(got).Elem())) == 0 {
					t.Fatalf("%v: a shallow copy is not a new object with the source's fields", typ)
				}
			}
		}
	}
}

// TestStatusCopiersAreDeepCopies: each copier's status copier sets the
// status of its destination to a deep copy of the source's and nothing
// else.
func TestStatusCopiersAreDeepCopies(t *testing.T) {
	f := randfill.New().NilChance(0).NumElements(1, 2).MaxDepth(12)
	for typ, c := range copiers {
		if c.status == nil {
			t.Fatalf("%v: no status copier", typ)
		}
		for range 20 {
			in := reflect.New(typ).Interface().(client.Object)
			f.Fill(in)
			out := reflect.New(typ).Interface().(client.Object)
			c.status(in, out)
			want := reflect.New(typ)
			want.Elem().FieldByName("Status").Set(reflect.ValueOf(in.DeepCopyObject()).Elem().FieldByName("Status"))
			if !reflect.DeepEqual(out, want.Interface()) {
				t.Fatalf("%v: the status copier gives %+v", typ, out)
			}
			if shared := sharedRefs(reflect.ValueOf(in).Elem(), reflect.ValueOf(out).Elem()); len(shared) > 0 {
				t.Fatalf("%v: the status copier shares %v with its source", typ, shared)
			}
		}
	}
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		out = append(out, t.Field(i).Name)
	}
	return out
}

// sharedRefs lists the paths at which a and b (values of one type) hold
// the same map, the same slice array or the same pointer; a *time.Location
// is shared by every copy of a time and is left out.
func sharedRefs(a, b reflect.Value) []string {
	var out []string
	var walk func(a, b reflect.Value, path string)
	walk = func(a, b reflect.Value, path string) {
		switch a.Kind() {
		case reflect.Pointer:
			if a.IsNil() || b.IsNil() || a.Type() == reflect.TypeFor[*time.Location]() {
				return
			}
			if a.Pointer() == b.Pointer() {
				out = append(out, path)
				return
			}
			walk(a.Elem(), b.Elem(), path)
		case reflect.Map:
			if a.IsNil() || b.IsNil() {
				return
			}
			if a.UnsafePointer() == b.UnsafePointer() {
				out = append(out, path)
				return
			}
			for _, k := range a.MapKeys() {
				if bv := b.MapIndex(k); bv.IsValid() {
					va, vb := reflect.New(a.Type().Elem()).Elem(), reflect.New(a.Type().Elem()).Elem()
					va.Set(a.MapIndex(k))
					vb.Set(bv)
					walk(va, vb, path+"["+k.String()+"]")
				}
			}
		case reflect.Slice:
			if a.Len() == 0 || b.Len() == 0 {
				return
			}
			if a.Pointer() == b.Pointer() {
				out = append(out, path)
				return
			}
			for i := range min(a.Len(), b.Len()) {
				walk(a.Index(i), b.Index(i), path+"[]")
			}
		case reflect.Struct:
			for i := range a.NumField() {
				walk(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)
			}
		case reflect.Interface:
			if !a.IsNil() && !b.IsNil() {
				walk(a.Elem(), b.Elem(), path)
			}
		}
	}
	walk(a, b, "")
	return out
}

// copyBootcNodeStatus gives what the generated DeepCopyInto gives, and
// shares nothing with its source, with every pointer set, with none and
// with some.
func TestCopyBootcNodeStatusIsDeepCopy(t *testing.T) {
	full := randfill.New().NilChance(0).NumElements(1, 2).MaxDepth(100)
	some := randfill.New().NilChance(0.5).NumElements(0, 2).MaxDepth(100)
	for i := range 100 {
		var in v1alpha1.BootcNodeStatus
		switch {
		case i%3 == 0:
			full.Fill(&in)
			setTimes(reflect.ValueOf(&in).Elem(), func() bool { return true })
			if in.Rollout.PhaseSince == nil || in.Booted == nil || in.Booted.Timestamp == nil || in.Daemon.LastReboot == nil || in.Rollout.PriorUnschedulable == nil {
				t.Fatalf("pointers left nil: %+v", in)
			}
		case i%3 == 1:
			some.Fill(&in)
			setTimes(reflect.ValueOf(&in).Elem(), func() bool { return i%2 == 0 })
		}
		var out v1alpha1.BootcNodeStatus
		copyBootcNodeStatus(&in, &out)
		if w := in.DeepCopy(); !reflect.DeepEqual(&out, w) {
			t.Fatalf("copyBootcNodeStatus differs from DeepCopyInto:\n got %+v\nwant %+v", out, *w)
		}
		if shared := sharedRefs(reflect.ValueOf(&in).Elem(), reflect.ValueOf(&out).Elem()); len(shared) > 0 {
			t.Fatalf("copyBootcNodeStatus shares %v with its source", shared)
		}
	}
}

// setTimes sets the nil *metav1.Time pointers in v (which randfill leaves
// nil) to distinct times, each when set says so.
func setTimes(v reflect.Value, set func() bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*metav1.Time]() {
			if v.IsNil() && set() {
				v.Set(reflect.ValueOf(&metav1.Time{Time: time.Unix(int64(rand.Uint32()), 0)}))
			}
			return
		}
		if !v.IsNil() {
			setTimes(v.Elem(), set)
		}
	case reflect.Slice:
		for i := range v.Len() {
			setTimes(v.Index(i), set)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setTimes(v.Field(i), set)
			}
		}
	}
}
