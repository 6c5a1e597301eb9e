package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/patch"
)

// lookupClaim reads the Node's NodeClaim. A missing CRD is not an error; a
// stale REST mapping (the CRD was removed and installed again) is refreshed.
func (r *NodeReconciler) lookupClaim(ctx context.Context, n *corev1.Node) (karpenter.Claim, error) {
	return karpenter.LookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
}

// protectClaim adds the protection annotations to the NodeClaim and
// records which ones bootroll added.
func (r *NodeReconciler) protectClaim(ctx context.Context, s *nodeStep) error {
	ro := &s.bn.Status.Rollout
	cl, err := r.lookupClaim(ctx, s.node)
	if err != nil || cl.Claim == nil {
		return err
	}
	orig := cl.Claim.DeepCopy()
	ann, added := karpenter.Protect(cl.Claim.GetAnnotations())
	if r.opts.TestOnly.DropAnnotationOwnership && len(added) > 0 {
		added = karpenter.ProtectAnnotations // claims the ones that were there before
	}
	if len(added) == 0 {
		return nil
	}
	// Record first: a crash after the patch must not forget what we added.
	// When the record already lists them (the claim lost them, or this
	// reconcile reads a stale record of a slot that has ended since),
	// nothing is written, so nothing is locked: check that the record is
	// the current one before the claim is annotated, or a slot given back
	// meanwhile would leave the annotations behind for good (envtest
	// TestPoolDeletionCleansUp, now and then under load).
	merged := karpenter.MergeKeys(ro.AddedNodeClaimAnnotations, added)
	if slices.Equal(merged, ro.AddedNodeClaimAnnotations) {
		if err := r.current(ctx, s); err != nil {
			return fmt.Errorf("before protecting NodeClaim %s: %w", cl.Claim.GetName(), err)
		}
	}
	ro.AddedNodeClaimAnnotations = merged
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	cl.Claim.SetAnnotations(ann)
	if err := r.client.Patch(ctx, cl.Claim, client.MergeFrom(orig), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("protect NodeClaim %s: %w", cl.Claim.GetName(), err)
	}
	return nil
}

// unprotectClaim removes the NodeClaim annotations bootroll added.
func (r *NodeReconciler) unprotectClaim(ctx context.Context, s *nodeStep) error {
	ro := &s.bn.Status.Rollout
	if len(ro.AddedNodeClaimAnnotations) == 0 {
		return nil
	}
	cl, err := r.lookupClaim(ctx, s.node)
	if err != nil {
		return err
	}
	if cl.Claim != nil {
		orig := cl.Claim.DeepCopy()
		ann := cl.Claim.GetAnnotations()
		if !r.opts.TestOnly.KeepAnnotations {
			karpenter.Unprotect(cl.Claim, ann, ro.AddedNodeClaimAnnotations, r.opts.TestOnly.DropAnnotationOwnership)
		}
		cl.Claim.SetAnnotations(ann)
		if err := r.client.Patch(ctx, cl.Claim, client.MergeFrom(orig), client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unprotect NodeClaim %s: %w", cl.Claim.GetName(), err)
		}
	}
	ro.AddedNodeClaimAnnotations = nil
	return nil
}

// grantCordon is what the pool reconciler writes on a
// node it grants a slot to: the cordon and slot marker, and the protection
// annotations bootroll adds to the Node and to its NodeClaim.
type grantCordon struct {
	pool      string
	node      *corev1.Node
	claim     *unstructured.Unstructured
	nodeKeys  []string
	claimKeys []string
}

// planGrantCordon records on b (the BootcNode about to be told of its slot)
// the cordon of node n and the protection annotations bootroll adds, as
// drain does, and returns what to write once b is written.
func (r *PoolReconciler) planGrantCordon(ctx context.Context, pool *v1alpha1.BootcNodePool, n *corev1.Node, b *v1alpha1.BootcNode, now time.Time) (grantCordon, error) {
	ro := &b.Status.Rollout
	// The state to give back is read from the API server, not the cache
	// (which may not show an admin's cordon yet); the cordon patch is
	// locked on this read.
	var fresh corev1.Node
	if err := r.reader.Get(ctx, types.NamespacedName{Name: n.Name}, &fresh); err != nil {
		return grantCordon{}, fmt.Errorf("re-read node %s before its slot: %w", n.Name, err)
	}
	n = &fresh
	g := grantCordon{pool: pool.Name, node: n}
	if ro.Cordoned {
		// A grant recorded before (its Node patch failed, or the
		// controller stopped): the cordon and the recorded keys go on
		// again, the missing ones only; what bootroll owns stays as
		// recorded. No record write locks this Node patch, so the record
		// must be the current one: the node reconciler may have given the
		// grant back since.
		var cur v1alpha1.BootcNode
		if err := r.reader.Get(ctx, types.NamespacedName{Name: b.Name}, &cur); err != nil {
			return grantCordon{}, fmt.Errorf("re-read BootcNode %s before its slot: %w", b.Name, err)
		}
		if cur.ResourceVersion != b.ResourceVersion {
			return grantCordon{}, apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("bootcnodes").GroupResource(), b.Name,
				fmt.Errorf("the cached record is stale (%s, current %s)", b.ResourceVersion, cur.ResourceVersion))
		}
		g.nodeKeys = ro.AddedAnnotations
		if len(ro.AddedNodeClaimAnnotations) > 0 {
			cl, err := karpenter.LookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
			if err != nil {
				return grantCordon{}, err
			}
			g.claim, g.claimKeys = cl.Claim, ro.AddedNodeClaimAnnotations
		}
		return g, nil
	}
	if _, ours := n.Annotations[v1alpha1.AnnotationSlot]; !ours && !r.opts.TestOnly.ForgetPriorCordon {
		ro.PriorUnschedulable = ptr.To(n.Spec.Unschedulable)
	}
	if !r.opts.TestOnly.SkipKarpenterProtection && (pool.Spec.Karpenter.Protect == nil || *pool.Spec.Karpenter.Protect) {
		claimAll := r.opts.TestOnly.DropAnnotationOwnership
		_, g.nodeKeys = karpenter.Protect(maps.Clone(n.Annotations))
		if claimAll && len(g.nodeKeys) > 0 {
			g.nodeKeys = karpenter.ProtectAnnotations // test-only: claims the ones that were there before
		}
		cl, err := karpenter.LookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
		if err != nil {
			return grantCordon{}, err
		}
		if cl.Claim != nil {
			g.claim = cl.Claim
			_, g.claimKeys = karpenter.Protect(maps.Clone(cl.Claim.GetAnnotations()))
			if claimAll && len(g.claimKeys) > 0 {
				g.claimKeys = karpenter.ProtectAnnotations
			}
		}
		ro.AddedAnnotations = karpenter.MergeKeys(ro.AddedAnnotations, g.nodeKeys)
		ro.AddedNodeClaimAnnotations = karpenter.MergeKeys(ro.AddedNodeClaimAnnotations, g.claimKeys)
	}
	ro.ProtectUntil = nil
	ro.Cordoned = true
	ro.DrainStartedAt = &metav1.Time{Time: now}
	return g, nil
}

// apply cordons the Node with the slot marker and the planned annotations
// in one patch, then annotates the NodeClaim. Only missing keys are added;
// a Node or NodeClaim that is gone is not an error (the node reconciler
// gives the slot back).
func (g grantCordon) apply(ctx context.Context, c client.Client) error {
	if g.node != nil {
		m := g.node.DeepCopy()
		m.Spec.Unschedulable = true
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1alpha1.AnnotationSlot] = g.pool
		for _, k := range g.nodeKeys {
			if _, ok := m.Annotations[k]; !ok {
				m.Annotations[k] = "true"
			}
		}
		if err := c.Patch(ctx, m, patch.Node(g.node), client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordon node %s: %w", g.node.Name, err)
		}
	}
	if g.claim != nil && len(g.claimKeys) > 0 {
		orig := g.claim.DeepCopy()
		ann := g.claim.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		for _, k := range g.claimKeys {
			if _, ok := ann[k]; !ok {
				ann[k] = "true"
			}
		}
		g.claim.SetAnnotations(ann)
		if err := c.Patch(ctx, g.claim, client.MergeFrom(orig), client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("annotate NodeClaim %s: %w", g.claim.GetName(), err)
		}
	}
	return nil
}
