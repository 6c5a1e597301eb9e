package karpenter_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/karpenter"
)

// A sh/disrupted taint blocks a slot only on a node a NodeClaim
// owns: one Karpenter no longer owns (Karpenter removed mid-disruption)
// keeps a stale taint that must not defer its update for good (issue 11,
// nodeclass-drift-mid-rollout.converges.seed2052).
func TestSlotBlockerIgnoresAStaleDisruptedTaint(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	tainted := []corev1.Taint{{Key: v1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule}}
	orphan := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: corev1.NodeSpec{Taints: tainted}, Status: corev1.NodeStatus{Conditions: ready}}
	owned := orphan.DeepCopy()
	owned.Name = "owned"
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpenter.NodeClaimGVK.GroupVersion().String(), Kind: "NodeClaim", Name: "claim-1", UID: "u1"}}
	claim := &unstructured.Unstructured{}
	claim.SetGroupVersionKind(karpenter.NodeClaimGVK)
	claim.SetName("claim-1")
	cl := fakeapi.Client(t, orphan, owned, claim)
	for _, c := range []struct {
		node    *corev1.Node
		blocked bool
	}{{orphan, false}, {owned, true}} {
		why, err := karpenter.SlotBlocker(context.Background(), cl, cl.RESTMapper(), c.node, false)
		if err != nil {
			t.Fatal(err)
		}
		if (why != "") != c.blocked {
			t.Errorf("%s: SlotBlocker = %q, want blocked %v", c.node.Name, why, c.blocked)
		}
	}
}
