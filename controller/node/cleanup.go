package node

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
	"github.com/bootroll/bootroll/controller/internal/cached"
	"github.com/bootroll/bootroll/controller/patch"
	"github.com/bootroll/bootroll/controller/rollout"
)

// finalize undoes what bootroll did to the Node of a record being deleted
// (by hand, because its node left the pool, or with its pool): it
// withdraws any boot order, restores the Node's prior cordon state and
// removes the slot marker and exactly the annotations bootroll recorded
// adding, from the Node and its NodeClaim; then it lets the record go.
// The record is read from the API server: the ownership it lists must be
// the latest written.
func (r *Reconciler) finalize(ctx context.Context, seen *v1alpha1.BootcNode) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(seen, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	var bn v1alpha1.BootcNode
	if err := r.reader.Get(ctx, types.NamespacedName{Name: seen.Name}, &bn); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	obj := &bn
	if !r.opts.TestOnly.SkipCleanupOnDelete {
		s := &nodeStep{orig: recordOf(&bn), bn: &bn, now: r.clock.Now()}
		pool, err := cached.Pool(ctx, r.client, bn.Spec.Pool)
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
		if ok, _ := rollout.BootOrderSettledWith(s.view(), r.opts.TestOnly); ok {
			image, reason, msg, wait := failedAfterLeaving(s, "its record was deleted")
			if wait {
				// Back from the reboot, but its daemon has not said what
				// it booted yet: the release waits for that report.
				return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
			}
			if reason != "" {
				// The failure goes on the pool before the record goes:
				// the record made again must not be ordered into the
				// image its node failed. It is said on the record once,
				// with the pool's write, as the pool's own event is:
				// the finalize is tried again until the release lands
				// (every second under API errors: ConflictRetry), and
				// each try said it again (bootcnode-deleted-mid-reboot-
				// release-retry-under-api-errors: eight BootFailed
				// events for workers-2 in 12 s).
				first, err := r.recordPoolFailure(ctx, s, image, reason, msg)
				if err != nil {
					return reconcile.Result{}, err
				}
				if first {
					r.event(&bn, corev1.EventTypeWarning, reason, "%s", msg)
				}
			}
		}
		if wait, err := r.release(ctx, s, "Released", "the record is being deleted: bootroll undid what it did to the Node"); err != nil || wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, err
		}
		obj = s.bn
	}
	return reconcile.Result{}, patch.RemoveFinalizer(ctx, r.client, obj)
}

// release withdraws the record's boot order and, once the daemon can no
// longer act on it (bootOrderSettled; wait says how soon to look again
// until then), gives back everything bootroll holds on the Node and its
// NodeClaim: the cordon (to the state recorded before bootroll's), the slot
// marker, and the annotations it recorded adding. A record in a slot
// phase leaves it first, before the Node is given back; the result is
// recorded after, so a crash part way is resumed.
func (r *Reconciler) release(ctx context.Context, s *nodeStep, reason, msg string) (wait time.Duration, err error) {
	if err := r.withdrawBootOrder(ctx, s); err != nil {
		return 0, err
	}
	if ok, wait := rollout.BootOrderSettledWith(s.view(), r.opts.TestOnly); !ok {
		return wait, r.keepUntilSettled(ctx, s)
	}
	read := s.orig // the record as read: patchStatus replaces s.orig
	ro := &s.bn.Status.Rollout
	leaving := rollout.HoldsSlot(s.bn.Status.Phase)
	if leaving {
		s.bn.Status.Phase = v1alpha1.PhasePending
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	ro.Reason, ro.Message = reason, msg
	if s.node != nil {
		if leaving {
			// The record leaves its slot phase first, still cordoned and
			// owning what bootroll added, as every slot's end does
			// (finish): given back first, the Node lost its marker and
			// protection while its record still said it was in its slot,
			// and a write that failed in between left it so (explorer
			// seed 176610 of cluster-repair-during-slow-reboot: the
			// NodeClaim's unprotect failed on API errors, and the record
			// of kp-0, still down, said Draining 4 s later when
			// Karpenter repaired the node).
			if err := r.patchStatus(ctx, s); err != nil {
				return 0, err
			}
		}
		if err := r.uncordon(ctx, s, false); err != nil {
			return 0, err
		}
		if err := r.unprotectClaim(ctx, s); err != nil {
			return 0, err
		}
	}
	ro.AddedAnnotations, ro.AddedNodeClaimAnnotations, ro.ProtectUntil = nil, nil, nil
	ro.Cordoned, ro.PriorUnschedulable, ro.DrainStartedAt = false, nil, nil
	if err := r.patchStatus(ctx, s); err != nil {
		return 0, err
	}
	if s.node != nil && recordDiffers(read, s.bn) {
		// Said by the pass whose writes gave the Node back, not again by
		// one that finds them written: a finalizer whose removal failed
		// is tried again, and each try said it again.
		r.event(s.bn, corev1.EventTypeNormal, reason, "%s", msg)
	}
	return 0, nil
}

// clearStrayMarker removes a slot marker that no record of bootroll's
// accounts for (an earlier pool, or an earlier bootroll, was removed
// without cleaning up): the record, read fresh, is not cordoned and not
// in a slot. The cordon the marker stands for is undone; the prior state
// is unknown, so the node is uncordoned.
func (r *Reconciler) clearStrayMarker(ctx context.Context, s *nodeStep) error {
	if err := r.current(ctx, s); err != nil {
		return fmt.Errorf("before clearing a stray slot marker: %w", err)
	}
	n, err := r.freshNode(ctx, s)
	if err != nil {
		return err
	}
	if n == nil {
		return nil // gone: its delete event is handled (nodeGone)
	}
	if _, marked := n.Annotations[v1alpha1.AnnotationSlot]; !marked {
		// Only the cache still showed the marker (the slot that just
		// ended removed it): nothing to clear, and nothing to say.
		return nil
	}
	if err := r.uncordonNode(ctx, s, n, true); err != nil {
		return err
	}
	r.event(s.bn, corev1.EventTypeNormal, "StrayMarkerCleared", "removed a %s marker and cordon that no bootroll record accounts for", v1alpha1.AnnotationSlot)
	return nil
}

// failedAfterLeaving is the verdict on the slot of a node whose record is
// going (why), checked in this order: down on the pool's target
// (downAfterLeaving: HealthTimeout), back on another image after its boot
// into it (fellBackAfterLeaving: BootFailed), its rollback to the image
// the pool went back to failed (rollbackFailedAfterLeaving:
// RollbackFailed). image is what the node failed, as the pool names it;
// reason is "" when it failed nothing; wait says its daemon has not
// reported from the boot after the reboot yet, so the verdict is not
// known.
func failedAfterLeaving(s *nodeStep, why string) (image, reason, msg string, wait bool) {
	if msg, down := downAfterLeaving(s, why); down {
		return s.bn.Spec.DesiredImage, "HealthTimeout", msg, false
	}
	if msg, fell, unknown := fellBackAfterLeaving(s, why); fell {
		return s.bn.Spec.DesiredImage, "BootFailed", msg, false
	} else if unknown {
		return "", "", "", true
	}
	if image, msg, failed, unknown := rollbackFailedAfterLeaving(s, why); failed {
		return image, "RollbackFailed", msg, false
	} else if unknown {
		return "", "", "", true
	}
	return "", "", "", false
}
