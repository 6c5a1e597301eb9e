package apiserver_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestLabelSelectorListFollowsWrites checks label-selector listings against
// filtering a full listing, across creates, label changes and deletes:
// from the first write on, and from a listing after 200 writes (the label
// index is built on the first label listing, from what is stored then).
func TestLabelSelectorListFollowsWrites(t *testing.T) {
	for _, from := range []int{0, 200} {
		labelListsFollowWrites(t, from)
	}
}

func labelListsFollowWrites(t *testing.T, from int) {
	s, _ := newServer(t)
	c := s.Client()
	r := rand.New(rand.NewPCG(3, 4))
	vals := []string{"", "x", "y"}
	randLabels := func() map[string]string {
		m := map[string]string{}
		for _, k := range []string{"a", "b"} {
			if v := vals[r.IntN(len(vals))]; v != "" {
				m[k] = v
			}
		}
		if r.IntN(3) == 0 {
			m["e"] = ""
		}
		return m
	}
	selectors := []string{"a=x", "a==y", "a in (x)", "a=x,b=y", "a=x,b!=y", "e=", "a in (x,y)", "!a", "a", "", "a=z"}
	for step := range 400 {
		ns := []string{"n1", "n2"}[r.IntN(2)]
		name := []string{"p1", "p2", "p3", "p4", "p5"}[r.IntN(5)]
		var cur corev1.Pod
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cur)
		switch {
		case err != nil:
			p := pod(ns, name, "")
			p.Labels = randLabels()
			mustCreate(t, c, p)
		case r.IntN(4) == 0:
			if err := c.Delete(ctx, &cur); err != nil {
				t.Fatal(err)
			}
		default:
			cur.Labels = randLabels()
			if err := c.Update(ctx, &cur); err != nil {
				t.Fatal(err)
			}
		}
		if step < from {
			continue
		}
		var all corev1.PodList
		if err := c.List(ctx, &all); err != nil {
			t.Fatal(err)
		}
		for _, sel := range selectors {
			ls, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			for _, lns := range []string{"", "n1"} {
				var want []string
				for _, p := range all.Items {
					if (lns == "" || p.Namespace == lns) && ls.Matches(labels.Set(p.Labels)) {
						want = append(want, p.Namespace+"/"+p.Name)
					}
				}
				var got corev1.PodList
				if err := c.List(ctx, &got, client.InNamespace(lns), client.MatchingLabelsSelector{Selector: ls}); err != nil {
					t.Fatal(err)
				}
				if g := names(got.Items); !slices.Equal(g, want) {
					t.Fatalf("labels listed from step %d: step %d: List(%q, ns %q) = %v, want %v", from, step, sel, lns, g, want)
				}
			}
		}
	}
}
