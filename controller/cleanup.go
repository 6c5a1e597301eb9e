package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
)

// finalize lets a deleted pool go once its BootcNodes are gone. A node in
// its slot is first given back by the node reconciler, as for any node that
// leaves its pool (its boot order withdrawn, and the cordon kept until the
// daemon can no longer act on it, which the daemon reports only while its
// record is not being deleted); the other records are deleted at once, and
// each record's own finalizer (NodeReconciler.finalize) undoes what bootroll
// still holds on its Node and NodeClaim. The records are listed from the
// API server, not the cache, so none is missed.
func (r *PoolReconciler) finalize(ctx context.Context, p *v1alpha1.BootcNodePool) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(p, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	if !r.opts.TestOnly.SkipCleanupOnDelete {
		var bns v1alpha1.BootcNodeList
		if err := r.reader.List(ctx, &bns, client.MatchingLabels{v1alpha1.LabelPool: p.Name}); err != nil {
			return reconcile.Result{}, fmt.Errorf("list BootcNodes of deleted pool %s: %w", p.Name, err)
		}
		left := 0
		for i := range bns.Items {
			bn := &bns.Items[i]
			if bn.Spec.Pool != p.Name {
				continue
			}
			left++
			if bn.DeletionTimestamp != nil || bn.Status.Rollout.Cordoned || rollout.HoldsSlot(bn.Status.Phase) {
				continue
			}
			if err := r.client.Delete(ctx, bn); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("delete BootcNode %s of deleted pool %s: %w", bn.Name, p.Name, err)
			}
		}
		if left > 0 {
			// Each record's deletion event brings the pool back too.
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	return reconcile.Result{}, removeFinalizer(ctx, r.client, p)
}

// removeFinalizer removes bootroll's finalizer from obj, locked on the
// version read so no other finalizer is dropped.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	before := obj.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("remove finalizer %s from %s: %w", v1alpha1.Finalizer, obj.GetName(), err)
	}
	return nil
}

// finalize undoes what bootroll did to the Node of a record being deleted
// (by hand, because its node left the pool, or with its pool): it
// withdraws any boot order, restores the Node's prior cordon state and
// removes the slot marker and exactly the annotations bootroll recorded
// adding, from the Node and its NodeClaim; then it lets the record go.
// The record is read from the API server: the ownership it lists must be
// the latest written.
func (r *NodeReconciler) finalize(ctx context.Context, cached *v1alpha1.BootcNode) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(cached, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	var bn v1alpha1.BootcNode
	if err := r.reader.Get(ctx, types.NamespacedName{Name: cached.Name}, &bn); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	obj := &bn
	if !r.opts.TestOnly.SkipCleanupOnDelete {
		s := &nodeStep{orig: recordOf(&bn), bn: &bn, now: r.clock.Now()}
		pool, err := sharedPool(ctx, r.client, bn.Spec.Pool)
		if err != nil {
			return reconcile.Result{}, err
		}
		s.pool = pool // for its healthTimeout only: nil is fine
		var node corev1.Node
		err = r.client.Get(ctx, types.NamespacedName{Name: bn.Name}, &node)
		switch {
		case err == nil:
			s.node = &node
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, fmt.Errorf("get node %s: %w", bn.Name, err)
		}
		if ok, _ := rollout.BootOrderSettled(s.view()); ok {
			if msg, down := downAfterLeaving(s, "its record was deleted"); down {
				// The boot of the pool's target failed in the slot: the
				// failure goes on the pool before the record goes.
				if err := r.recordPoolFailure(ctx, s, bn.Spec.DesiredImage, "HealthTimeout", msg); err != nil {
					return reconcile.Result{}, err
				}
				r.event(&bn, corev1.EventTypeWarning, "HealthTimeout", "%s", msg)
			}
		}
		if wait, err := r.release(ctx, s, "Released", "the record is being deleted: bootroll undid what it did to the Node"); err != nil || wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, err
		}
		obj = s.bn
	}
	return reconcile.Result{}, removeFinalizer(ctx, r.client, obj)
}

// release withdraws the record's boot order and, once the daemon can no
// longer act on it (bootOrderSettled; wait says how soon to look again
// until then), gives back everything bootroll holds on the Node and its
// NodeClaim: the cordon (to the state recorded before bootroll's), the slot
// marker, and the annotations it recorded adding. It records the result,
// so a crash part way is resumed.
func (r *NodeReconciler) release(ctx context.Context, s *nodeStep, reason, msg string) (wait time.Duration, err error) {
	if err := r.withdrawBootOrder(ctx, s); err != nil {
		return 0, err
	}
	if ok, wait := rollout.BootOrderSettled(s.view()); !ok {
		return wait, nil
	}
	ro := &s.bn.Status.Rollout
	if s.node != nil {
		if err := r.uncordon(ctx, s, false); err != nil {
			return 0, err
		}
		if err := r.unprotectClaim(ctx, s); err != nil {
			return 0, err
		}
	}
	ro.AddedAnnotations, ro.AddedNodeClaimAnnotations, ro.ProtectUntil = nil, nil, nil
	ro.Cordoned, ro.PriorUnschedulable, ro.DrainStartedAt = false, nil, nil
	if rollout.HoldsSlot(s.bn.Status.Phase) {
		s.bn.Status.Phase = v1alpha1.PhasePending
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	ro.Reason, ro.Message = reason, msg
	if err := r.patchStatus(ctx, s); err != nil {
		return 0, err
	}
	if s.node != nil {
		r.event(s.bn, corev1.EventTypeNormal, reason, "%s", msg)
	}
	return 0, nil
}

// clearStrayMarker removes a slot marker that no record of bootroll's
// accounts for (an earlier pool, or an earlier bootroll, was removed
// without cleaning up): the record, read fresh, is not cordoned and not
// in a slot. The cordon the marker stands for is undone; the prior state
// is unknown, so the node is uncordoned.
func (r *NodeReconciler) clearStrayMarker(ctx context.Context, s *nodeStep) error {
	if err := r.current(ctx, s); err != nil {
		return fmt.Errorf("before clearing a stray slot marker: %w", err)
	}
	if err := r.uncordon(ctx, s, true); err != nil {
		return err
	}
	r.event(s.bn, corev1.EventTypeNormal, "StrayMarkerCleared", "removed a %s marker and cordon that no bootroll record accounts for", v1alpha1.AnnotationSlot)
	return nil
}
