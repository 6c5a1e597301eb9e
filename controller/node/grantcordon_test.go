package node

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/options"
)

// TestGrantCordonsKarpenterNode grants a slot to a Karpenter-managed node
// (issue 11, karpenter-defaults.no-reap-while-updating.seed21 and
// nodeclass-drift-mid-rollout.no-reap-while-updating.seed40: Karpenter
// drifted a node between its grant and the node reconciler's cordon): the
// grant records the cordon and the annotations bootroll adds, and writes
// cordon, slot marker and annotations on the Node and NodeClaim at once. An
// annotation someone else set is not claimed; a pool with protect false
// gets no annotations from the grant. A node no NodeClaim owns is cordoned
// on its grant too (since issue 12's write count: the grant records the
// cordon with the slot phase in one write), with the Node's annotations as
// the drain would add them.
func TestGrantCordonsKarpenterNode(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name          string
		managed       bool
		protect       *bool
		preset        map[string]string // Node annotations before the grant
		wantCordon    bool
		wantNodeKeys  []string
		wantClaimKeys []string
	}{
		{"managed", true, nil, nil, true, karpenter.ProtectAnnotations, karpenter.ProtectAnnotations},
		{"managed, do-not-disrupt set by someone else", true, nil,
			map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true"}, true,
			[]string{v1alpha1.KarpenterDoNotRepair}, karpenter.ProtectAnnotations},
		{"managed, protect false", true, ptr.To(false), nil, true, nil, nil},
		{"not managed by Karpenter: cordoned and annotated too, no NodeClaim", false, nil, nil, true, karpenter.ProtectAnnotations, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.Karpenter.Protect = c.protect
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: c.preset}}
			claim := &unstructured.Unstructured{}
			claim.SetGroupVersionKind(karpenter.NodeClaimGVK)
			claim.SetName("claim-n")
			if c.managed {
				node.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "claim-n", UID: "u"}}
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseStaged
			cl := fakeapi.Client(t, pool, bn, node, claim)
			r := NewReconciler(cl, options.Options{})
			var n corev1.Node
			if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &n); err != nil {
				t.Fatal(err)
			}
			b := bn.DeepCopy()
			g, err := r.planGrantCordon(ctx, pool, &n, b, now)
			if err != nil {
				t.Fatal(err)
			}
			ro := &b.Status.Rollout
			if ro.Cordoned != c.wantCordon {
				t.Fatalf("status.rollout.cordoned = %v after the grant, want %v", ro.Cordoned, c.wantCordon)
			}
			if !slices.Equal(ro.AddedAnnotations, c.wantNodeKeys) || !slices.Equal(ro.AddedNodeClaimAnnotations, c.wantClaimKeys) {
				t.Fatalf("recorded addedAnnotations %v, addedNodeClaimAnnotations %v; want %v, %v",
					ro.AddedAnnotations, ro.AddedNodeClaimAnnotations, c.wantNodeKeys, c.wantClaimKeys)
			}
			if c.wantCordon && (ro.PriorUnschedulable == nil || *ro.PriorUnschedulable || ro.DrainStartedAt == nil) {
				t.Fatalf("grant records priorUnschedulable %v, drainStartedAt %v; want false and the grant time", ro.PriorUnschedulable, ro.DrainStartedAt)
			}
			if _, err := g.applyNode(ctx, cl); err != nil {
				t.Fatal(err)
			}
			if err := g.applyClaim(ctx, cl); err != nil {
				t.Fatal(err)
			}
			var got corev1.Node
			if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if _, marked := got.Annotations[v1alpha1.AnnotationSlot]; got.Spec.Unschedulable != c.wantCordon || marked != c.wantCordon {
				t.Fatalf("Node unschedulable %v, slot marker %v after the grant; want both %v", got.Spec.Unschedulable, marked, c.wantCordon)
			}
			for _, k := range karpenter.ProtectAnnotations {
				_, has := got.Annotations[k]
				want := slices.Contains(c.wantNodeKeys, k) || c.preset[k] != ""
				if has != want {
					t.Fatalf("Node annotation %s present %v after the grant, want %v", k, has, want)
				}
			}
			gc := &unstructured.Unstructured{}
			gc.SetGroupVersionKind(karpenter.NodeClaimGVK)
			if err := cl.Get(ctx, types.NamespacedName{Name: "claim-n"}, gc); err != nil {
				t.Fatal(err)
			}
			for _, k := range karpenter.ProtectAnnotations {
				_, has := gc.GetAnnotations()[k]
				if want := slices.Contains(c.wantClaimKeys, k); has != want {
					t.Fatalf("NodeClaim annotation %s present %v after the grant, want %v", k, has, want)
				}
			}
		})
	}
}

// TestGrantTakenUpAgain: a grant recorded (Staged, cordoned, owning the
// annotations) whose Node patch did not happen is taken up again by the
// next pass, which puts the cordon and the recorded keys on the Node
// before the record enters the slot; on a stale record (the node
// reconciler gave the grant back since) it does nothing.
func TestGrantTakenUpAgain(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for _, stale := range []bool{false, true} {
		t.Run(map[bool]string{false: "current record", true: "stale record"}[stale], func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "claim-n", UID: "u"}}}}
			claim := &unstructured.Unstructured{}
			claim.SetGroupVersionKind(karpenter.NodeClaimGVK)
			claim.SetName("claim-n")
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseStaged
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.PriorUnschedulable = ptr.To(false)
			bn.Status.Rollout.AddedAnnotations = karpenter.ProtectAnnotations
			bn.Status.Rollout.AddedNodeClaimAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			cl := fakeapi.Client(t, pool, bn, node, claim)
			r := NewReconciler(cl, options.Options{})
			var cur v1alpha1.BootcNode
			if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			b := cur.DeepCopy()
			if stale {
				// The node reconciler gave the grant back meanwhile.
				upd := cur.DeepCopy()
				upd.Status.Rollout.Cordoned = false
				if err := cl.Status().Update(ctx, upd); err != nil {
					t.Fatal(err)
				}
			}
			g, err := r.planGrantCordon(ctx, pool, node, b, now)
			if stale {
				if err == nil || g.node != nil {
					t.Fatalf("stale record: grant %+v, err %v; want a conflict and no Node patch", g, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(b.Status.Rollout.AddedAnnotations, karpenter.ProtectAnnotations) {
				t.Fatalf("ownership changed to %v", b.Status.Rollout.AddedAnnotations)
			}
			if _, err := g.applyNode(ctx, cl); err != nil {
				t.Fatal(err)
			}
			if err := g.applyClaim(ctx, cl); err != nil {
				t.Fatal(err)
			}
			var got corev1.Node
			if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			_, marked := got.Annotations[v1alpha1.AnnotationSlot]
			_, dnd := got.Annotations[v1alpha1.KarpenterDoNotDisrupt]
			if !got.Spec.Unschedulable || !marked || !dnd {
				t.Fatalf("Node unschedulable %v marked %v do-not-disrupt %v; want all", got.Spec.Unschedulable, marked, dnd)
			}
			gc := &unstructured.Unstructured{}
			gc.SetGroupVersionKind(karpenter.NodeClaimGVK)
			if err := cl.Get(ctx, types.NamespacedName{Name: "claim-n"}, gc); err != nil {
				t.Fatal(err)
			}
			if _, ok := gc.GetAnnotations()[v1alpha1.KarpenterDoNotDisrupt]; !ok {
				t.Fatal("NodeClaim lacks do-not-disrupt")
			}
		})
	}
}

// TestGrantTakenUpAgainAfterAnAdminUncordon: a grant recorded before
// (cordoned, the node cordoned by an admin before it: prior true) whose
// record never entered the slot, on a Node someone uncordoned since under
// bootroll's slot marker, is taken up again giving back the uncordon (the
// admin's latest word) and starting its drain now (explorer seed 171247
// of repair-during-slow-reboot: the node was given back cordoned for good,
// and the take-up 18 min after the first one timed its drain out at
// once). A Node still cordoned under the marker keeps the recorded prior.
func TestGrantTakenUpAgainAfterAnAdminUncordon(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	first := metav1.NewTime(now.Add(-18 * time.Minute))
	for _, tc := range []struct {
		name               string
		marked, uncordoned bool
	}{
		// The earlier grant's Node patch landed (the slot marker is on
		// the Node): the recorded prior stands unless someone
		// uncordoned the node under the marker.
		{"marked, uncordoned since", true, true},
		{"marked, still cordoned", true, false},
		// It never landed: the Node's state now is the prior (explorer
		// seed 176006), cordoned or not.
		{"unmarked, uncordoned since", false, true},
		{"unmarked, still cordoned", false, false},
	} {
		marked, uncordoned := tc.marked, tc.uncordoned
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Unschedulable: !uncordoned}}
			if marked {
				node.Annotations = map[string]string{v1alpha1.AnnotationSlot: "p"}
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhasePending
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.PriorUnschedulable = ptr.To(true)
			bn.Status.Rollout.DrainStartedAt = &first
			cl := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(cl, options.Options{})
			var cur v1alpha1.BootcNode
			if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			b := cur.DeepCopy()
			if _, err := r.planGrantCordon(ctx, pool, node, b, now); err != nil {
				t.Fatal(err)
			}
			ro := b.Status.Rollout
			if want := !uncordoned; ro.PriorUnschedulable == nil || *ro.PriorUnschedulable != want {
				t.Errorf("prior unschedulable %v, want %v", ptr.Deref(ro.PriorUnschedulable, false), want)
			}
			if ro.DrainStartedAt == nil || !ro.DrainStartedAt.Time.Equal(now) {
				t.Errorf("drain started at %v, want %v (this take-up)", ro.DrainStartedAt, now)
			}
		})
	}
}
