package apiserver_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// byNode indexes pods by spec.nodeName and counts its calls.
type byNode struct{ calls int }

func (b *byNode) extract(o client.Object) []string {
	b.calls++
	if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
		return []string{n}
	}
	return nil
}

// countingSelector matches everything and counts the objects it is asked
// about: the objects a List looked at.
type countingSelector struct {
	labels.Selector
	calls int
}

func (c *countingSelector) Matches(labels.Labels) bool { c.calls++; return true }

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

func TestList(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	ix := &byNode{}
	if err := s.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", ix.extract); err != nil {
		t.Fatal(err)
	}
	// Created out of order; listings come sorted.
	for _, p := range []*corev1.Pod{
		pod("b", "p2", "n1"), pod("a", "p3", "n2"), pod("a", "p1", "n1"),
		pod("b", "p1", "n2"), pod("a", "p2", ""),
	} {
		if p.Name == "p1" {
			p.Labels = map[string]string{"app": "x"}
		}
		mustCreate(t, c, p)
	}
	tests := []struct {
		name  string
		opts  []client.ListOption
		want  []string
		check func(error) bool
	}{
		{"all", nil, []string{"a/p1", "a/p2", "a/p3", "b/p1", "b/p2"}, nil},
		{"all, shared", []client.ListOption{client.UnsafeDisableDeepCopy}, []string{"a/p1", "a/p2", "a/p3", "b/p1", "b/p2"}, nil},
		{"namespace", []client.ListOption{client.InNamespace("b")}, []string{"b/p1", "b/p2"}, nil},
		{"labels", []client.ListOption{client.MatchingLabels{"app": "x"}}, []string{"a/p1", "b/p1"}, nil},
		{"index", []client.ListOption{client.MatchingFields{"spec.nodeName": "n1"}}, []string{"a/p1", "b/p2"}, nil},
		{"index in namespace", []client.ListOption{client.InNamespace("a"), client.MatchingFields{"spec.nodeName": "n2"}}, []string{"a/p3"}, nil},
		{"index and labels", []client.ListOption{client.MatchingFields{"spec.nodeName": "n2"}, client.MatchingLabels{"app": "x"}}, []string{"b/p1"}, nil},
		{"index without match", []client.ListOption{client.MatchingFields{"spec.nodeName": "n9"}}, nil, nil},
		{"metadata.name", []client.ListOption{client.MatchingFields{"metadata.name": "p1"}}, []string{"a/p1", "b/p1"}, nil},
		{"metadata.name in namespace", []client.ListOption{client.InNamespace("b"), client.MatchingFields{"metadata.name": "p1"}}, []string{"b/p1"}, nil},
		{"metadata.namespace", []client.ListOption{client.MatchingFields{"metadata.namespace": "a"}}, []string{"a/p1", "a/p2", "a/p3"}, nil},
		{"metadata.namespace and name", []client.ListOption{client.MatchingFields{"metadata.namespace": "a", "metadata.name": "p2"}}, []string{"a/p2"}, nil},
		{"index and metadata.name", []client.ListOption{client.MatchingFields{"spec.nodeName": "n1", "metadata.name": "p2"}}, []string{"b/p2"}, nil},
		{"field not indexed", []client.ListOption{client.MatchingFields{"spec.schedulerName": "x"}}, nil, apierrors.IsBadRequest},
		{"index, not equal", []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("spec.nodeName", "n1")}}, []string{"a/p2", "a/p3", "b/p1"}, nil},
		{"index, empty value", []client.ListOption{client.MatchingFields{"spec.nodeName": ""}}, []string{"a/p2"}, nil},
		{"index, not empty", []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("spec.nodeName", "")}}, []string{"a/p1", "a/p3", "b/p1", "b/p2"}, nil},
		{"metadata.name, not equal", []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("metadata.name", "p1")}}, []string{"a/p2", "a/p3", "b/p2"}, nil},
		{"metadata.namespace, not equal", []client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermNotEqualSelector("metadata.namespace", "a")}}, []string{"b/p1", "b/p2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list corev1.PodList
			err := c.List(ctx, &list, tt.opts...)
			if tt.check != nil {
				if !tt.check(err) {
					t.Fatalf("List error = %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(list.Items); !equalStrings(got, tt.want) {
				t.Errorf("List = %v, want %v", got, tt.want)
			}
			if list.ResourceVersion != "5" {
				t.Errorf("list resourceVersion = %q, want 5", list.ResourceVersion)
			}
		})
	}
}

func TestIndexFollowsWrites(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, pod("ns", "early", "n1"))
	ix := &byNode{}
	if err := s.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", ix.extract); err != nil {
		t.Fatal(err)
	}
	if err := s.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", ix.extract); err == nil {
		t.Error("indexing a field twice succeeded")
	}
	list := func(node string) []string {
		var l corev1.PodList
		if err := c.List(ctx, &l, client.MatchingFields{"spec.nodeName": node}); err != nil {
			t.Fatal(err)
		}
		return names(l.Items)
	}
	if got := list("n1"); !equalStrings(got, []string{"ns/early"}) {
		t.Errorf("objects stored before IndexField: %v", got)
	}
	p := pod("ns", "moving", "n1")
	mustCreate(t, c, p)
	p.Spec.NodeName = "n2"
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, want := list("n1"), []string{"ns/early"}; !equalStrings(got, want) {
		t.Errorf("n1 after the move = %v, want %v", got, want)
	}
	if got, want := list("n2"), []string{"ns/moving"}; !equalStrings(got, want) {
		t.Errorf("n2 after the move = %v, want %v", got, want)
	}
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got := list("n2"); got != nil {
		t.Errorf("n2 after the delete = %v, want none", got)
	}
}

func TestIndexedListReadsOnlyMatches(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	ix := &byNode{}
	if err := s.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", ix.extract); err != nil {
		t.Fatal(err)
	}
	const nodes, perNode = 50, 4
	for i := range nodes * perNode {
		mustCreate(t, c, pod(fmt.Sprintf("ns%d", i%3), fmt.Sprintf("p%04d", i), fmt.Sprintf("n%02d", i%nodes)))
	}
	if ix.calls != nodes*perNode {
		t.Fatalf("extractor calls after %d creates = %d, want one per write", nodes*perNode, ix.calls)
	}
	sel := &countingSelector{Selector: labels.Everything()}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.MatchingFields{"spec.nodeName": "n07"}, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != perNode {
		t.Errorf("List returned %d pods, want %d", len(list.Items), perNode)
	}
	if sel.calls != perNode {
		t.Errorf("List looked at %d objects, want only the %d the index names", sel.calls, perNode)
	}
	if ix.calls != nodes*perNode {
		t.Errorf("List called the extractor: %d calls, want %d", ix.calls, nodes*perNode)
	}
}

func TestUnindexedNameLookupReadsOne(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	for i := range 20 {
		mustCreate(t, c, node(fmt.Sprintf("n%02d", i)))
	}
	sel := &countingSelector{Selector: labels.Everything()}
	var list corev1.NodeList
	if err := c.List(ctx, &list, client.MatchingFields{"metadata.name": "n05"}, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || sel.calls != 1 {
		t.Errorf("metadata.name List: %d items after looking at %d objects, want 1 and 1", len(list.Items), sel.calls)
	}
}

// BenchmarkListByIndex lists the pods of one node among 10,000 pods.
func BenchmarkListByIndex(b *testing.B) {
	s, _ := newServer(b)
	c := s.Client()
	if err := s.IndexField(ctx, &corev1.Pod{}, "spec.nodeName", (&byNode{}).extract); err != nil {
		b.Fatal(err)
	}
	const pods, perNode = 10000, 10
	for i := range pods {
		mustCreate(b, c, pod("ns", fmt.Sprintf("p%05d", i), fmt.Sprintf("n%04d", i/perNode)))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.MatchingFields{"spec.nodeName": fmt.Sprintf("n%04d", i%(pods/perNode))}); err != nil {
			b.Fatal(err)
		}
		if len(list.Items) != perNode {
			b.Fatalf("got %d pods, want %d", len(list.Items), perNode)
		}
	}
}

// BenchmarkGetUpdate reads and writes one node among 10,000.
func BenchmarkGetUpdate(b *testing.B) {
	s, _ := newServer(b)
	c := s.Client()
	const nodes = 10000
	for i := range nodes {
		mustCreate(b, c, node(fmt.Sprintf("n%05d", i)))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		n := node(fmt.Sprintf("n%05d", i%nodes))
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			b.Fatal(err)
		}
		n.Labels = map[string]string{"i": fmt.Sprint(i)}
		if err := c.Update(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
}

// TestListOrderAcrossNamespaces checks that a listing of every namespace
// comes in kube-apiserver's order, that of the storage keys
// "<namespace>/<name>": namespace "a-b" before "a", since '-' sorts
// before '/'.
func TestListOrderAcrossNamespaces(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	for _, p := range []*corev1.Pod{pod("a", "p", ""), pod("a-b", "p", ""), pod("a.b", "p", ""), pod("ab", "p", ""), pod("a", "q", "")} {
		mustCreate(t, c, p)
	}
	var list corev1.PodList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	if got, want := names(list.Items), []string{"a-b/p", "a.b/p", "a/p", "a/q", "ab/p"}; !equalStrings(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
}
