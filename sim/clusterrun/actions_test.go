package clusterrun

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/scenario"
)

// TestActorTellsIntents: an operator's cordon, uncordon and annotation
// change reach the invariants before they are written, for what they
// change only, as in the twin (a kubectl cordon of a cordoned node, or an
// annotation set to the value it has, changes nothing the invariants
// expect). Without it, the cluster's checker blamed bootroll for leaving
// an operator's annotation change as the operator made it.
func TestActorTellsIntents(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Annotations: map[string]string{v1alpha1.KarpenterDoNotRepair: "true"}}}
	n.Spec.Unschedulable = true
	c := fake.NewClientBuilder().WithObjects(n).Build()
	a := newActor(c, &scenario.Scenario{})
	var got []string
	a.intendCordon = func(node string, on bool) {
		got = append(got, node+" cordon "+map[bool]string{true: "on", false: "off"}[on])
	}
	a.intendAnnotation = func(node, key string, present bool) {
		got = append(got, node+" "+key+" "+map[bool]string{true: "set", false: "removed"}[present])
	}
	ctx := context.Background()
	for _, ev := range []scenario.Event{
		{CordonNode: &scenario.NodeRef{Node: "w-0"}},
		{UncordonNode: &scenario.NodeRef{Node: "w-0"}},
		{AnnotateNode: &scenario.AnnotateNode{Node: "w-0", Set: map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"}}},
		{AnnotateNode: &scenario.AnnotateNode{Node: "w-0", Remove: []string{v1alpha1.KarpenterDoNotDisrupt, "absent"}}},
	} {
		if err := a.Do(ctx, &ev); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"w-0 cordon off", "w-0 karpenter.sh/do-not-disrupt set", "w-0 karpenter.sh/do-not-disrupt removed"}
	if !slices.Equal(got, want) {
		t.Errorf("intents %q, want %q", got, want)
	}
	var gone scenario.Event
	gone.UncordonNode = &scenario.NodeRef{Node: "w-9"}
	if err := a.Do(ctx, &gone); err == nil {
		t.Error("uncordon of a node that does not exist: no skip")
	}
}
