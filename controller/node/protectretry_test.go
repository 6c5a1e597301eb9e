package node

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestFailedReconcileRetriesBeforeTheProtectionDeadline: a reconcile of a
// record whose post-update protection is pending that fails on an API
// error is tried again after ConflictRetry, not after the workqueue's
// per-item backoff, which knows nothing of the deadline (explorer seed
// 176161 of repair-during-slow-reboot: seventeen failed reconciles in a
// row as kp-1's slot ended took the backoff to 5m28s, and the next
// try came 5m08s after the deadline, the protection still on). So is one
// whose failing write is the one that ends the protection (the record as
// read has the deadline, the pass had cleared it). A record with no such
// deadline keeps the backoff (the error is returned) unless it still
// holds its Node: a slot's end half written, the cordon still on, is
// owed its give-back (TestFailedSlotStepRetriesBeforeTheStrandedBound).
func TestFailedReconcileRetriesBeforeTheProtectionDeadline(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 25, 41, 0, time.UTC)
	protected := map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"}
	added := []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	// pastDeadline: Updated, the protection's deadline passed, the Node
	// still protected.
	pastDeadline := func(bn *v1alpha1.BootcNode, n *corev1.Node) {
		bn.Status.Phase = v1alpha1.PhaseUpdated
		ro := &bn.Status.Rollout
		ro.AddedAnnotations = added
		ro.ProtectUntil = &metav1.Time{Time: now.Add(-10 * time.Second)}
		n.Annotations = protected
	}
	for _, c := range []struct {
		name string
		// record sets up the record and the Node as the API server has
		// them.
		record               func(bn *v1alpha1.BootcNode, n *corev1.Node)
		failRead, failStatus bool // the API server's Gets, the record's status patches fail
		wantRetry            bool // RequeueAfter ConflictRetry and no error, or the error
	}{
		{"slot's end half written, the re-read fails", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			// The seed's record: Updated and cordoned on the record (the
			// finish's last write lost), the Node given back but for the
			// protection it keeps.
			bn.Status.Phase = v1alpha1.PhaseUpdated
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = true, ptr.To(false), added
			ro.ProtectUntil = &metav1.Time{Time: now.Add(4 * time.Minute)}
			n.Annotations = protected
		}, true, false, true},
		{"protection past its deadline, the Node's re-read fails", pastDeadline, true, false, true},
		{"protection ended on the Node, the record write fails", pastDeadline, false, true, true},
		{"no protection pending, the record write fails", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = "" // the pass records Pending
		}, false, true, false},
		{"slot's end half written, no protection kept, the re-read fails", func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhaseUpdated
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(false)
		}, true, false, true}, // still cordoned: owed its give-back (seed 176607)
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool = "p"
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			c.record(bn, node)
			res, err, _ := reconcileFailing(t, now, pool, bn, node, apiFailures{read: c.failRead, status: c.failStatus})
			wantRetry(t, res, err, c.wantRetry, "the deadline")
		})
	}
}

// TestFailedReleaseRetriesBeforeTheCleanupBound: a reconcile that fails
// on an API error while it gives back a node that left its pool, or whose
// pool is being deleted, in its slot or cordoned (rollout.NodeRelease) is
// tried again after ConflictRetry, not after the workqueue's per-item
// backoff: the node is owed its release within minutes (DESIGN.md section
// 4), and the backoff knows nothing of that (explorer seed 176212 of
// repair-during-slow-reboot: kp-1, rebooting in its slot when its pool
// was deleted, was back at 24m47s; its release failed fourteen times in a
// row, the backoff spaced the tries out to 35m08s, and the node stayed
// cordoned and protected meanwhile). A member the pool keeps that still
// holds a cordon to restore retries too, for its give-back
// (TestFailedSlotStepRetriesBeforeTheStrandedBound, seed 176607).
func TestFailedReleaseRetriesBeforeTheCleanupBound(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 24, 48, 0, time.UTC)
	protected := map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true", v1alpha1.AnnotationSlot: "p"}
	added := []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	deleting := func(p *v1alpha1.BootcNodePool) {
		p.Finalizers = []string{v1alpha1.Finalizer}
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-8 * time.Minute)}
	}
	// released is the seed's record: the release's first pass wrote
	// Pending, still cordoned and owning the protection, and lost the
	// rest.
	released := func(bn *v1alpha1.BootcNode, n *corev1.Node) {
		bn.Status.Phase = v1alpha1.PhasePending
		ro := &bn.Status.Rollout
		ro.Reason = "LeftPool"
		ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = true, ptr.To(false), added
		n.Spec.Unschedulable, n.Annotations = true, protected
	}
	for _, c := range []struct {
		name string
		pool func(p *v1alpha1.BootcNodePool)
		// record sets up the record and the Node as the API server has
		// them.
		record               func(bn *v1alpha1.BootcNode, n *corev1.Node)
		failRead, failStatus bool // the API server's Gets, the record's status patches fail
		wantRetry            bool // RequeueAfter ConflictRetry and no error, or the error
	}{
		{"pool being deleted, the release resumed, the record's re-read fails", deleting, released, true, false, true},
		{"pool being deleted, in its slot, the release's record write fails", deleting, func(bn *v1alpha1.BootcNode, n *corev1.Node) {
			bn.Status.Phase = v1alpha1.PhaseDraining
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = true, ptr.To(false), added
			ro.DrainStartedAt = &metav1.Time{Time: now.Add(-12 * time.Minute)}
			n.Spec.Unschedulable, n.Annotations = true, protected
		}, false, true, true},
		{"no longer selected, the release resumed, the record's re-read fails", func(p *v1alpha1.BootcNodePool) {
			p.Spec.NodeSelector = map[string]string{"pool": "q"}
		}, released, true, false, true},
		{"a member, a cordon to restore, the record's re-read fails", nil, released, true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			if c.pool != nil {
				c.pool(pool)
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool = "p"
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			c.record(bn, node)
			res, err, _ := reconcileFailing(t, now, pool, bn, node, apiFailures{read: c.failRead, status: c.failStatus})
			wantRetry(t, res, err, c.wantRetry, "the cleanup bound")
		})
	}
}

// apiFailures says which of the API server's answers fail in
// reconcileFailing: its Gets (read), the records' status patches
// (status), the Nodes' patches (nodePatch).
type apiFailures struct{ read, status, nodePatch bool }

// reconcileFailing runs one Reconcile of record n at now, on a fake API
// server holding pool, bn and node, that fails the requests f names with
// an internal error (a timeout). It returns the result and the error, and
// the API server's client to read what landed.
func reconcileFailing(t *testing.T, now time.Time, pool *v1alpha1.BootcNodePool, bn *v1alpha1.BootcNode, node *corev1.Node, f apiFailures) (reconcile.Result, error, client.Client) {
	t.Helper()
	base := fakeapi.Client(t, pool, bn, node)
	failed := apierrors.NewInternalError(context.DeadlineExceeded)
	cl := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, isNode := obj.(*corev1.Node); isNode && f.nodePatch {
				return failed
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if f.status {
				return failed
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	api := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if f.read {
				return failed
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	m := options.NewMetrics(nil)
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: api, Metrics: m})
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}})
	// A retry is counted (the error does not reach controller-runtime's
	// counter); an error returned is not.
	if n := testutil.CollectAndCount(m.DeadlineRetries); (n == 1) != (err == nil && res.RequeueAfter == ConflictRetry) || n > 1 {
		t.Errorf("bootroll_node_deadline_retries_total has %d series after result %+v, error %v", n, res, err)
	}
	return res, err, base
}

// wantRetry checks a failed reconcile's answer: with retry, a requeue
// after ConflictRetry and no error (the workqueue's backoff would pass
// bound); without, the error (the backoff).
func wantRetry(t *testing.T, res reconcile.Result, err error, retry bool, bound string) {
	t.Helper()
	if retry {
		if err != nil || res.RequeueAfter != ConflictRetry {
			t.Fatalf("reconcile: result %+v, error %v; want a retry after %s and no error (the workqueue's backoff would pass %s)", res, err, ConflictRetry, bound)
		}
		if res.Priority == nil || *res.Priority != OwedPriority {
			// Behind the records that owe nothing, a retry waited for all
			// of them (explorer seed 176681 of rollout-100-nodes).
			t.Fatalf("reconcile: result %+v; want the retry at priority %d, ahead of the records that owe nothing", res, OwedPriority)
		}
		return
	}
	if err == nil {
		t.Fatalf("reconcile: result %+v and no error; want the error (the workqueue's backoff)", res)
	}
}
