package apiserver

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// widget is an object type with an unexported top-level field, which
// reflect cannot set field by field.
type widget struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec   string
	Status string
	note   string
}

func (w *widget) DeepCopyObject() runtime.Object {
	c := *w
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// withStatus gives the stored object's fields, all of them, with the
// written status: in itself for a type reflect can set field by field, a
// new object for one with an unexported field.
func TestWithStatus(t *testing.T) {
	k := &kind{goType: reflect.TypeFor[widget](), statusField: 3}
	cur := &widget{ObjectMeta: metav1.ObjectMeta{Name: "w", ResourceVersion: "5"}, Spec: "spec", Status: "old", note: "kept"}
	in := &widget{Status: "new", note: "mine"}
	next := k.withStatus(cur, in).(*widget)
	if want := (widget{ObjectMeta: cur.ObjectMeta, Spec: "spec", Status: "new", note: "kept"}); !reflect.DeepEqual(*next, want) {
		t.Errorf("withStatus = %+v, want %+v", *next, want)
	}
	if cur.Status != "old" || cur.note != "kept" {
		t.Errorf("withStatus changed the stored object: %+v", *cur)
	}
}

// gadget is widget without the unexported field.
type gadget struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Spec   string
	Status string
}

func (g *gadget) DeepCopyObject() runtime.Object {
	c := *g
	g.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func TestWithStatusReusesTheWrittenObject(t *testing.T) {
	k := &kind{goType: reflect.TypeFor[gadget](), statusField: 3}
	cur := &gadget{ObjectMeta: metav1.ObjectMeta{Name: "g", ResourceVersion: "5"}, Spec: "spec", Status: "old"}
	in := &gadget{Status: "new"}
	next := k.withStatus(cur, in)
	if next != in {
		t.Errorf("withStatus made a new object")
	}
	if want := (gadget{ObjectMeta: cur.ObjectMeta, Spec: "spec", Status: "new"}); !reflect.DeepEqual(*in, want) {
		t.Errorf("withStatus = %+v, want %+v", *in, want)
	}
}
