package apiserver_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

func describe(ev apiserver.Event) string {
	old := "-"
	if ev.Old != nil {
		old = ev.Old.GetResourceVersion()
	}
	return fmt.Sprintf("%s %s rv=%s old=%s", ev.Type, ev.Object.GetName(), ev.Object.GetResourceVersion(), old)
}

func TestWatchEvents(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	var got []string
	s.Subscribe(func(ev apiserver.Event) {
		got = append(got, describe(ev))
	})

	n := node("n")
	n.Finalizers = []string{"f"}
	mustCreate(t, c, n)
	n.Status.Phase = corev1.NodeRunning
	if err := c.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	n = get(t, c, node("n"))
	n.Finalizers = nil
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ADDED n rv=1 old=-",
		"MODIFIED n rv=2 old=1",
		"MODIFIED n rv=3 old=2", // deletionTimestamp set
		"DELETED n rv=4 old=3",
	}
	if !equalStrings(got, want) {
		t.Errorf("events:\n%q\nwant\n%q", got, want)
	}
}

func TestWatchOrderWithNestedWrites(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	var first, second []string
	s.Subscribe(func(ev apiserver.Event) {
		first = append(first, describe(ev))
		if ev.Type == apiserver.Added && ev.Object.GetName() == "a" {
			// A write from inside a delivery.
			mustCreate(t, c, node("b"))
		}
	})
	cancel := s.Subscribe(func(ev apiserver.Event) { second = append(second, describe(ev)) })
	mustCreate(t, c, node("a"))
	want := []string{"ADDED a rv=1 old=-", "ADDED b rv=2 old=-"}
	if !equalStrings(first, want) || !equalStrings(second, want) {
		t.Errorf("first saw %q, second saw %q, want both %q", first, second, want)
	}
	cancel()
	mustCreate(t, c, node("c"))
	if len(second) != 2 {
		t.Errorf("an unsubscribed func got %d events, want 2", len(second))
	}
}

func TestFaultsAndCounts(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, node("a"), node("b"))
	type call struct {
		verb string
		gvk  schema.GroupVersionKind
		key  client.ObjectKey
	}
	var calls []call
	s.SetFault(func(verb string, gvk schema.GroupVersionKind, key client.ObjectKey) error {
		calls = append(calls, call{verb, gvk, key})
		if verb == apiserver.VerbUpdate && key.Name == "a" {
			return apierrors.NewServiceUnavailable("injected")
		}
		return nil
	})
	a, b := get(t, c, node("a")), get(t, c, node("b"))
	if err := c.Update(ctx, a); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("faulted update: %v, want ServiceUnavailable", err)
	}
	if err := c.Update(ctx, b); err != nil {
		t.Errorf("unfaulted update: %v", err)
	}
	if err := s.AdminClient().Update(ctx, a); err != nil {
		t.Errorf("admin update went through the fault hook: %v", err)
	}
	var list corev1.NodeList
	if err := c.List(ctx, &list, client.InNamespace("ignored")); err != nil {
		t.Fatal(err)
	}
	nodeGVK := corev1.SchemeGroupVersion.WithKind("Node")
	wantCalls := []call{
		{apiserver.VerbGet, nodeGVK, client.ObjectKey{Name: "a"}},
		{apiserver.VerbGet, nodeGVK, client.ObjectKey{Name: "b"}},
		{apiserver.VerbUpdate, nodeGVK, client.ObjectKey{Name: "a"}},
		{apiserver.VerbUpdate, nodeGVK, client.ObjectKey{Name: "b"}},
		{apiserver.VerbList, nodeGVK, client.ObjectKey{}},
	}
	if fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Errorf("fault hook calls:\n%v\nwant\n%v", calls, wantCalls)
	}
	wantCounts := []apiserver.VerbCount{{"create", 2}, {"get", 2}, {"list", 1}, {"update", 2}}
	if got := s.Counts(); fmt.Sprint(got) != fmt.Sprint(wantCounts) {
		t.Errorf("Counts = %v, want %v", got, wantCounts)
	}
	s.ResetCounts()
	if got := s.Counts(); len(got) != 0 {
		t.Errorf("Counts after reset = %v", got)
	}
}
