package pool

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/patch"
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
func (r *Reconciler) finalize(ctx context.Context, p *v1alpha1.BootcNodePool) (reconcile.Result, error) {
	if r.metrics != nil {
		// A pool being deleted reports no more: its series go now.
		r.metrics.ForgetPool(p.Name)
	}
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
	return reconcile.Result{}, patch.RemoveFinalizer(ctx, r.client, p)
}
