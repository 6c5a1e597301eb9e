package apiserver

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
)

// Verbs of countedVerbs and others are counted alike, by verb and by kind.
func TestCountsOfCountedAndOtherVerbs(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	s := New(scheme, clock.RealClock{})
	pod, err := s.kindFor(schema.GroupVersionKind{Version: "v1", Kind: "Pod"})
	if err != nil {
		t.Fatal(err)
	}
	node, err := s.kindFor(schema.GroupVersionKind{Version: "v1", Kind: "Node"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		verb string
		k    *kind
	}{{VerbGet, pod}, {VerbGet, node}, {VerbDelete, pod}, {VerbEvict, pod}, {"update/scale", pod}, {"update/scale", nil}, {VerbList, nil}} {
		s.count(c.verb, c.k)
	}
	if got, want := fmt.Sprint(s.Counts()), "[{create/eviction 1} {delete 1} {get 2} {list 1} {update/scale 2}]"; got != want {
		t.Errorf("Counts() = %s, want %s", got, want)
	}
	for _, c := range []struct {
		verb, kind string
		want       uint64
	}{{VerbGet, "Pod", 1}, {VerbGet, "Node", 1}, {"update/scale", "Pod", 1}, {"update/scale", "Node", 0}, {VerbList, "Pod", 0}} {
		if got := s.CountOf(c.verb, c.kind); got != c.want {
			t.Errorf("CountOf(%s, %s) = %d, want %d", c.verb, c.kind, got, c.want)
		}
	}
	if got := s.Count("update/scale"); got != 2 {
		t.Errorf(`Count("update/scale") = %d, want 2`, got)
	}
	if got := s.PodRemovals(); got != 2 {
		t.Errorf("PodRemovals() = %d, want 2", got)
	}
	s.ResetCounts()
	if got := s.Counts(); len(got) != 0 || s.CountOf(VerbGet, "Pod") != 0 || s.PodRemovals() != 0 {
		t.Errorf("after ResetCounts: Counts() = %v, CountOf(get, Pod) = %d, PodRemovals() = %d", got, s.CountOf(VerbGet, "Pod"), s.PodRemovals())
	}
}
