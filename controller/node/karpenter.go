package node

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/karpenter"
)

// lookupClaim reads the Node's NodeClaim. A missing CRD is not an error; a
// stale REST mapping (the CRD was removed and installed again) is refreshed.
func (r *Reconciler) lookupClaim(ctx context.Context, n *corev1.Node) (karpenter.Claim, error) {
	return karpenter.LookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
}

// protectClaim adds the protection annotations to the NodeClaim and
// records which ones bootroll added.
func (r *Reconciler) protectClaim(ctx context.Context, s *nodeStep) error {
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
	if err := r.client.Patch(ctx, cl.Claim, client.MergeFrom(orig), fieldManager...); err != nil {
		return fmt.Errorf("protect NodeClaim %s: %w", cl.Claim.GetName(), err)
	}
	return nil
}

// unprotectClaim removes the NodeClaim annotations bootroll added.
func (r *Reconciler) unprotectClaim(ctx context.Context, s *nodeStep) error {
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
		if err := r.client.Patch(ctx, cl.Claim, client.MergeFrom(orig), fieldManager...); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unprotect NodeClaim %s: %w", cl.Claim.GetName(), err)
		}
	}
	ro.AddedNodeClaimAnnotations = nil
	return nil
}
