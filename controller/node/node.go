package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/cached"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/patch"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/internal/readopts"
)

// Reconciler moves one node through its update: it derives the staging
// phases from what the daemon reports, and for a node that holds a reboot
// slot it cordons, drains, asks the daemon to boot the image, verifies the
// node and uncordons it. Each step is recorded on the BootcNode before the
// world is touched, so a restarted controller resumes where it stopped.
type Reconciler struct {
	client   client.Client
	clock    clock.PassiveClock
	recorder options.Recorder
	metrics  *options.Metrics
	drainer  *Drainer
	reader   client.Reader
	opts     options.Options
	// retries keeps the deadline retries' log to one line per node and
	// error a minute (RetryLogEvery).
	retries retryLog
}

// NewReconciler builds the node reconciler from its edges.
func NewReconciler(c client.Client, opts options.Options) *Reconciler {
	return &Reconciler{client: c, clock: opts.Clock, recorder: opts.Recorder, metrics: opts.Metrics, drainer: NewDrainer(c, opts.TestOnly), reader: opts.Reader(c), opts: opts}
}

// nodeStep is one reconcile's view of a node.
type nodeStep struct {
	// bn is the record this reconcile edits; orig is the record as last
	// read or written, reduced to what patchStatus diffs against (see
	// recordOf).
	orig, bn *v1alpha1.BootcNode
	// node is the Node as the cache holds it (shared, not copied, as
	// pool is) or as a read or write of the API server returned it: read
	// it, never change it; a write works on a DeepCopy and replaces it.
	node *corev1.Node
	// pool is shared with the cache (sharedPool): read it, never change it.
	pool *v1alpha1.BootcNodePool
	now  time.Time
	// recorded runs once the record write that carries this pass's
	// edits lands (patchStatus; finish's write of the new phase): the
	// outcome's events and metrics, said once, when it is durable, and
	// not by each try whose write fails and is retried, nor lost when a
	// later write of the same pass fails (onRecorded).
	recorded []func()
}

// onRecorded has f run once the step's next record write lands: an event
// that announces an edit of the record not written yet.
func (s *nodeStep) onRecorded(f func()) { s.recorded = append(s.recorded, f) }

// phaseRecorded runs what waits for the record write (s.recorded) once.
func (s *nodeStep) phaseRecorded() {
	fs := s.recorded
	s.recorded = nil
	for _, f := range fs {
		f()
	}
}

// ConflictRetry is how soon a node reconcile that lost a write to a
// conflict (it acted on a stale cache) runs again. A fixed short wait, not
// the workqueue's per-item exponential backoff: a burst of conflicts (API
// faults, a lagging cache) grew that backoff to minutes, and a node whose
// slot had ended was given back that much late, its post-update
// protection outliving its deadline (post-update-emptiness-reaping
// seed1001). Every retry re-reads; the cache has mostly caught up by
// then, though a lagging watch can take half a minute (a release does
// not wait for it: step, NodeRelease). A reconcile that fails otherwise
// on a record whose post-update protection is pending, or that still
// holds the Node (its release due, the record being deleted or its node
// out of the pool; or a slot, or bootroll's cordon, of a member), runs
// again after it too (Reconcile, owesByDeadline).
const ConflictRetry = time.Second

// HoldsNode reports whether a record still holds something on its Node
// that a release gives back: a slot, bootroll's cordon, or annotations
// and post-update protection bootroll added.
func HoldsNode(bn *v1alpha1.BootcNode) bool {
	ro := &bn.Status.Rollout
	return ro.Cordoned || rollout.HoldsSlot(rollout.RecordPhase(bn)) || rollout.ProtectionPending(ro)
}

// Reconcile advances one BootcNode. A record that holds its Node after
// the pass (HoldsNode) is looked at again at OwedPriority, ahead of the
// records that hold nothing; one that holds nothing goes back to the
// default priority. A deleted pool's ten slot holders, waiting for their
// reboots to end, were looked at again behind its 90 other records'
// finalizes, a few seconds each under slow API requests, and one was
// still cordoned and marked 2m20s after its reboot ended (explorer seed
// 176758 of the 176681 regression, a requeue that followed no error).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var bn v1alpha1.BootcNode
	if err := r.client.Get(ctx, req.NamespacedName, &bn); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	res, err := r.reconcileRecord(ctx, &bn)
	if res.Priority == nil && res.RequeueAfter > 0 {
		prio := 0
		if HoldsNode(&bn) {
			prio = OwedPriority
		}
		res.Priority = &prio
	}
	return res, err
}

// reconcileRecord is Reconcile's pass over the record bn as read; bn
// ends as the pass left it.
func (r *Reconciler) reconcileRecord(ctx context.Context, bn *v1alpha1.BootcNode) (reconcile.Result, error) {
	if bn.DeletionTimestamp != nil {
		res, err := r.finalize(ctx, bn)
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: ConflictRetry}, nil
		}
		if err != nil && HoldsNode(bn) {
			// A record being deleted that still holds its Node (a slot,
			// bootroll's cordon, annotations bootroll added) has a
			// release due that the workqueue's per-item backoff knows
			// nothing of, as has a protection's deadline (below): a run
			// of failed requests (API errors) doubled it to minutes, the
			// controller not trying meanwhile, and the Node stayed
			// cordoned and protected that long after the record was
			// deleted (explorer seed 176219 of bootcnode-deleted-mid-reboot:
			// sixteen failed finalizes of workers-2 in a row from
			// 9m48.6s, back from its reboot, took the backoff to 2m44s;
			// the last tries came at 11m10.7s, 12m32.7s and 15m16.5s,
			// and it was given back 6m16s after the deletion). It tries
			// again as after a conflict; the error is logged, as the
			// manager would log it.
			return r.retryBeforeDeadline(ctx, bn, err, owedRelease), nil
		}
		return res, err
	}
	if !controllerutil.ContainsFinalizer(bn, v1alpha1.Finalizer) {
		// Records made before bootroll had finalizers get one: before a
		// record goes, what bootroll did to its Node is undone.
		before := bn.DeepCopy()
		controllerutil.AddFinalizer(bn, v1alpha1.Finalizer)
		if err := r.client.Patch(ctx, bn, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{RequeueAfter: ConflictRetry}, nil
			}
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	s := &nodeStep{orig: recordOf(bn), bn: bn, now: r.clock.Now()}
	// The Node is read as the cache holds it, not copied: the step only
	// reads it (every write of a Node patches a DeepCopy, and the step
	// then holds the copy). A copy per reconcile, its labels, annotations,
	// conditions and taints, was 6% of what a node reconcile allocated.
	// The cache never changes an object it holds (an event replaces it),
	// so the shared Node stays the one read.
	var node corev1.Node
	if err := r.client.Get(ctx, types.NamespacedName{Name: bn.Name}, &node, readopts.NoCopyGet...); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("get node %s: %w", bn.Name, err)
		}
		// The Node is gone: nothing to uncordon. Recording that the node
		// left its slot gives the slot back (the pool drops the entry) and
		// lets the pool delete the record. A conflict is a stale read,
		// answered like every other step's.
		if err := r.nodeGone(ctx, s); apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: ConflictRetry}, nil
		} else if err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	}
	s.node = &node
	pool, err := cached.Pool(ctx, r.client, bn.Spec.Pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	s.pool = pool
	res, err := r.step(ctx, s)
	if err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: ConflictRetry}, nil
		}
		owed := s.owesByDeadline()
		if owed == "" {
			return reconcile.Result{}, err
		}
		// What bootroll owes the Node by a deadline the workqueue's
		// per-item backoff knows nothing of: a run of failed requests
		// (API errors) doubled it to minutes, and the Node waited as
		// much past its deadline, the controller not trying meanwhile
		// (explorer seeds 176161 and 176212 of
		// repair-during-slow-reboot; a record being deleted, above: 176219). It tries again as after a
		// conflict; the error is logged, as the manager would log it.
		return r.retryBeforeDeadline(ctx, bn, err, owed), nil
	}
	if until := s.bn.Status.Rollout.ProtectUntil; until != nil {
		// Whatever path this step took (a slot that ended here, a finish
		// resumed after a conflict), the post-update protection ends on
		// time only if the record is looked at again by its deadline: no
		// event need come (post-update-emptiness-reaping seed1001 ended
		// it a minute late once the daemon's resync no longer woke it).
		wake := max(until.Sub(s.now), time.Second)
		if res.RequeueAfter == 0 || wake < res.RequeueAfter {
			res.RequeueAfter = wake
		}
	}
	return res, nil
}

// owesByDeadline says what a failed step leaves bootroll owing the Node
// by a deadline, which the workqueue's backoff would pass ("": nothing):
//   - the end of post-update protection (its protectUntil as read, or as
//     the failed pass set it): seventeen failed reconciles in a row as
//     kp-1's slot ended took the backoff to 5m28s, and the next try came
//     5m08s after the deadline (explorer seed 176161);
//   - the release of a node that left its pool, or whose pool is being
//     deleted, while its record, as read, still holds the Node
//     (HoldsNode; rollout.NodeRelease): it is given back within minutes
//     (DESIGN.md section 4). kp-1, rebooting in its slot when its pool
//     was deleted at 16m07s, was back at 24m47s; seventeen releases
//     in a row failed on API errors, the last at 29m41s, and the next
//     try came at 35m08s (5 ms x 2^16 later): the node stayed cordoned
//     and protected 10m21s after its reboot ended (explorer seed
//     176212). A release is pending only for a node that held a slot
//     or a cordon, so few records retry at this pace, as few as hold
//     post-update protection. A record being deleted is the same case
//     (Reconcile, before the step; explorer seed 176219);
//   - the end of the slot of a member that, as read, holds its Node (a
//     slot, bootroll's cordon: a take-up stopped part way, a slot in
//     progress, a slot's end half written): its drain and its verdict
//     are due by drainTimeout and healthTimeout, and its give-back
//     within no-stranded-node's bound (DESIGN.md section 4). Under an
//     hour of API errors on every verb, twenty take-ups of workers-84 in
//     a row failed from 3h12m38s, its cordon recorded and on the Node
//     from 3h12m46s, the record still Pending; the backoff reached its
//     1000 s cap, the last try came at 3h51m24s and the next at
//     4h08m05s, the node cordoned and protected 57 min (explorer seed
//     176607 of rollout-100-nodes). These are as few as the slots too;
//   - the take-up of a slot the pool granted the member (GrantedSlot) that
//     holds nothing on its Node yet: the slot is the pool's, held for it,
//     and with maxUnavailable 1 nothing else moves while it waits. Under
//     30% API errors on every verb, workers-77's take-ups failed from
//     3h02m22s (each needs several requests), the backoff reached 16
//     minutes, and the slot granted at 3h02m21s was taken up at 3h41m34s,
//     after the pool's maintenance window had closed at 3h21m: 77 of 100
//     updated where 85 were with the take-up in time (explorer seed
//     176713 of the 176607 regression). As few as the slots again.
func (s *nodeStep) owesByDeadline() string {
	if s.orig.Status.Rollout.ProtectUntil != nil || s.bn.Status.Rollout.ProtectUntil != nil {
		return owedProtectionEnd
	}
	if !HoldsNode(s.orig) {
		if s.grantedBefore() {
			return owedSlotTakeUp
		}
		return ""
	}
	if rollout.LeftPool(s.pool, s.node) {
		return owedRelease
	}
	return owedSlotEnd
}

// grantedBefore reports whether the record, as read before the step,
// had a slot granted to take up (rollout.GrantedSlot). orig keeps the
// controller's part of the status only; the daemon's staged image and the
// record's UID, which a grant is also decided on, are the step's record's:
// a step does not change them.
func (s *nodeStep) grantedBefore() bool {
	read := *s.orig
	read.UID, read.Status.Staged = s.bn.UID, s.bn.Status.Staged
	_, granted := rollout.GrantedSlot(s.pool, &read)
	return granted
}

// What a Node is owed by a deadline (owesByDeadline), the owed label of
// bootroll_node_deadline_retries_total.
const (
	owedProtectionEnd = "protection-end"
	owedRelease       = "release"
	owedSlotEnd       = "slot-end"
	owedSlotTakeUp    = "slot-take-up"
)

// OwedPriority is the workqueue priority (controller-runtime's priority
// queue, its default) of a retry before a Node's deadline: it goes ahead
// of the records that owe nothing. At the default priority a retry waited
// behind every record queued before it: when a pool with 100 members was
// deleted under slow, failing API requests, the 90 records that held
// nothing were finalized, a few seconds each on 4 workers, before each
// failed release of a node in its slot was tried again, and the slot
// holders stayed cordoned and marked 3 minutes (explorer seed 176681 of
// rollout-100-nodes). A record keeps the priority for the requeues that
// follow until its queue entry is done (controller-runtime keeps an
// item's priority when a result sets none): the few that owe a deadline.
const OwedPriority = 1

// retryBeforeDeadline answers a failed reconcile of bn whose Node is owed
// something by a deadline (owed): the error is logged, as the manager
// would log it (the same error of the same node once a minute,
// RetryLogEvery), and counted (controller-runtime's error counter does not
// see it), and the record is looked at again after ConflictRetry, at
// OwedPriority.
func (r *Reconciler) retryBeforeDeadline(ctx context.Context, bn *v1alpha1.BootcNode, err error, owed string) reconcile.Result {
	if ok, skipped := r.retries.note(bn.Name, owed, err.Error(), r.clock.Now()); ok {
		log.FromContext(ctx).Error(err, "Reconciler error; retrying before the Node's deadline", "node", bn.Name, "owed", owed, "after", ConflictRetry, "notLoggedSinceLast", skipped)
	}
	if r.metrics != nil {
		r.metrics.DeadlineRetries.WithLabelValues(bn.Spec.Pool, owed).Inc()
	}
	return reconcile.Result{RequeueAfter: ConflictRetry, Priority: ptr.To(OwedPriority)}
}

// view is the step's record, Node, pool and time as the rules read them.
func (s *nodeStep) view() rollout.NodeView {
	return rollout.NodeView{Record: s.bn, Node: s.node, Pool: s.pool, Now: s.now}
}

// step carries out what the rules (rollout.NextNodeAction) pick next.
func (r *Reconciler) step(ctx context.Context, s *nodeStep) (reconcile.Result, error) {
	bn, ro := s.bn, &s.bn.Status.Rollout
	d := rollout.NextNodeAction(s.view(), r.opts.TestOnly)
	if d.Action == rollout.NodeRetarget {
		if err := r.retarget(ctx, s, bn.Spec.DesiredImage); err != nil {
			return reconcile.Result{}, err
		}
		ro = &s.bn.Status.Rollout
		if d = rollout.NextNodeAction(s.view(), r.opts.TestOnly); d.Action == rollout.NodeRetarget {
			return reconcile.Result{}, fmt.Errorf("BootcNode %s: status.rollout.targetImage %q still differs from spec.desiredImage %q after the retarget (a bootroll bug)", bn.Name, ro.TargetImage, bn.Spec.DesiredImage)
		}
	}
	if d.KeepProtected {
		// A protection someone else put on the node, and so did not
		// become bootroll's, may be lifted in the middle of the slot.
		if err := r.keepProtected(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	switch d.Action {
	case rollout.NodeIdle:
		return reconcile.Result{}, nil
	case rollout.NodeRelease:
		res, err := r.releaseLeft(ctx, s)
		if !apierrors.IsConflict(err) {
			return res, err
		}
		// The release lost a write, or its check of the record, to a
		// conflict: the cache is behind, most often behind this
		// controller's own last write of the release (a withdrawal or
		// a phase written before a later request failed). A retry on
		// the cache would meet the same conflict until the cache caught
		// up, and a lagging watch can take half a minute to (explorer
		// seed 176099 of rollout-100-nodes: the pool deleted under API
		// faults and a stale cache, workers-20 spent 40 s of retries
		// on a record the controller had written over, and was given
		// back 2m01s after the deletion). It runs once more on the
		// record the API server holds, as finalize does.
		if fresh, err := r.freshRecord(ctx, s); err != nil || !fresh {
			return reconcile.Result{}, err
		}
		if rollout.NextNodeAction(s.view(), r.opts.TestOnly).Action != rollout.NodeRelease {
			return reconcile.Result{}, nil // released already
		}
		return r.releaseLeft(ctx, s)
	case rollout.NodeDrain:
		return r.drain(ctx, s)
	case rollout.NodeVerify:
		return r.verify(ctx, s)
	case rollout.NodeRedrain:
		if err := r.redrain(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
		return r.drain(ctx, s)
	case rollout.NodeConclude, rollout.NodeRestoreCordon:
		// A verdict still cordoned ends its slot; a cordon a crash
		// between the node's last steps left is restored.
		return reconcile.Result{}, r.finish(ctx, s, bn.Status.Phase, ro.Reason, ro.Message, false)
	case rollout.NodeEndProtection:
		// A failed slot keeps post-update protection too (finish): end it.
		wait, err := r.postUpdate(ctx, s)
		return reconcile.Result{RequeueAfter: wait}, err
	case rollout.NodeAwaitGrant:
		return reconcile.Result{RequeueAfter: d.Wait}, nil
	case rollout.NodeTakeSlot:
		return r.takeSlot(ctx, s, d.Slot)
	case rollout.NodeClearMarker:
		// A marker no record accounts for: left by a pool or a bootroll
		// removed without cleaning up.
		return reconcile.Result{}, r.clearStrayMarker(ctx, s)
	}
	// NodeFollowDaemon: waiting for its turn or done.
	var res reconcile.Result
	if rollout.ProtectionPending(ro) {
		wait, err := r.postUpdate(ctx, s)
		if err != nil {
			return reconcile.Result{}, err
		}
		res.RequeueAfter = wait
	}
	if rollout.HasTaint(s.node, v1alpha1.TaintOSNotReady) {
		return r.osNotReady(ctx, s)
	}
	if failed, err := r.failedEarlier(ctx, s); err != nil || failed {
		return reconcile.Result{}, err
	}
	if failed, wait, err := r.notReadyOnTarget(ctx, s); err != nil || failed {
		return reconcile.Result{}, err
	} else if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
		res.RequeueAfter = wait
	}
	phase, reason, msg := rollout.StagingPhase(bn)
	if reason == "" && phase == bn.Status.Phase {
		// Keep the reason of the last wait or failure (e.g. DrainTimeout)
		// until the phase moves on.
		reason, msg = ro.Reason, ro.Message
	}
	if phase != bn.Status.Phase || reason != ro.Reason || msg != ro.Message {
		if err := r.setPhase(ctx, s, phase, reason, msg); err != nil {
			return reconcile.Result{}, err
		}
	} else if err := r.patchStatus(ctx, s); err != nil {
		// A retarget outside a slot (nothing else to write): patchStatus
		// writes only what differs from the record read.
		return reconcile.Result{}, err
	}
	return res, nil
}

// releaseLeft gives back anything bootroll holds on the Node of a node
// that left its pool (or whose pool is being deleted), once a boot order
// it may hold is withdrawn and the daemon can no longer act on it.
func (r *Reconciler) releaseLeft(ctx context.Context, s *nodeStep) (reconcile.Result, error) {
	if err := r.withdrawBootOrder(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	if ok, wait := rollout.BootOrderSettledWith(s.view(), r.opts.TestOnly); !ok {
		return reconcile.Result{RequeueAfter: wait}, r.keepUntilSettled(ctx, s)
	}
	// Read after the withdrawal, which replaces the step's record: an
	// edit through a pointer into the record before it was lost when the
	// withdrawal and the failure fell in one reconcile (the reboot over,
	// the withdrawal settles at once), and the failed image with it.
	bn, ro := s.bn, &s.bn.Status.Rollout
	if msg, down := downAfterLeaving(s, "left its pool"); down {
		// It booted the pool's target in its slot and is still
		// down: a failure of that target, which the pool counts
		// (its halt) as any other, not a node that just left.
		if _, err := r.recordPoolFailure(ctx, s, bn.Spec.DesiredImage, "HealthTimeout", msg); err != nil {
			return reconcile.Result{}, err
		}
		ro.FailedImage = bn.Spec.DesiredImage
		// Said once the verdict is written, and not again by a release
		// resumed on a record that says it already: said first, each
		// try whose write failed said it again.
		if o := s.orig.Status; o.Phase != v1alpha1.PhaseFailed || o.Rollout.Reason != "HealthTimeout" {
			s.onRecorded(func() { r.event(bn, corev1.EventTypeWarning, "HealthTimeout", "%s", msg) })
		}
		return reconcile.Result{}, r.finish(ctx, s, v1alpha1.PhaseFailed, "HealthTimeout", msg, false)
	}
	return reconcile.Result{}, r.finish(ctx, s, v1alpha1.PhasePending, "LeftPool", "node left its pool during the update", false)
}

// downAfterLeaving reports whether a node that left its (still live) pool
// in its slot, and whose boot order is settled, booted the pool's target
// for that order and is not Ready healthTimeout after the reboot request:
// the boot failed, and releasing it as merely gone would lose the failure
// (the pool would hand its slot, and the same image, to the next node).
func downAfterLeaving(s *nodeStep, why string) (string, bool) {
	bn, last, o := s.bn, s.bn.Status.Daemon.LastReboot, s.bn.Spec.LastOrder()
	if s.pool == nil || s.pool.DeletionTimestamp != nil || s.node == nil || o == nil || o.Rollback ||
		!rollout.RebootStarted(s.bn) || rollout.NodeReady(s.node) {
		return "", false
	}
	if want := imageref.Digest(bn.Spec.DesiredImage); want == "" || imageref.Digest(last.Image) != want {
		return "", false
	}
	timeout := rollout.DurationOr(s.pool.Spec.HealthTimeout, rollout.DefaultHealthTimeout)
	if s.now.Before(o.At.Add(timeout)) {
		return "", false
	}
	return fmt.Sprintf("%s during the update and was not healthy %s after the reboot request (booted %q, Ready=false)",
		why, timeout, rollout.DigestOfHost(bn.Status.Booted)), true
}

// fellBackAfterLeaving reports whether the node, whose slot ends because
// of why, came back from the reboot into the pool's target Ready on
// another image: the boot failed and the host fell back (a bootloader
// fallback, greenboot's boot counter). Its record is going, and the
// record made again in its place would not know, so the failure must go
// on the pool first, or the node is rebooted into the same image again
// (explorer seed 70152 of bootcnode-deleted-mid-reboot). The message
// says so. What the node booted is the daemon's report from the boot the
// Node now runs; until the daemon has reported from it (unknown), the
// caller waits, at most until healthTimeout after the order.
func fellBackAfterLeaving(s *nodeStep, why string) (msg string, fell, unknown bool) {
	bn := s.bn
	o := bn.Spec.LastOrder()
	if s.pool == nil || s.pool.DeletionTimestamp != nil || s.node == nil || o == nil || o.Rollback || !rollout.RebootOver(bn, s.node) {
		return "", false, false
	}
	if bn.Status.Daemon.BootID != s.node.Status.NodeInfo.BootID {
		timeout := rollout.DurationOr(s.pool.Spec.HealthTimeout, rollout.DefaultHealthTimeout)
		return "", false, s.now.Before(o.At.Add(timeout))
	}
	want, booted := imageref.Digest(bn.Spec.DesiredImage), rollout.DigestOfHost(bn.Status.Booted)
	if want == "" || booted == "" || booted == want {
		return "", false, false
	}
	return fmt.Sprintf("%s during the update, after the node rebooted into %s and came back Ready on %s (the boot failed and the host fell back)",
		why, bn.Spec.DesiredImage, booted), true, false
}

// rollbackFailedAfterLeaving is fellBackAfterLeaving for a rollback order:
// the node, whose slot ends because of why, rebooted to roll back to
// status.rollout.rollbackTo, which is now the pool's target (the pool went
// back to it meanwhile), and did not come back healthy on it: the daemon
// reports another image from the boot the Node now runs (the rollback
// crash-looped and the host fell back), or the node is not Ready on it
// healthTimeout after the order. A record that stayed would be Failed and
// count as failed on that image (Facts.FailedOn; explorer seed 92018 of
// rollback-on-failed-boot); this one is going, and the record made again
// would not know, so the failure of the pool's target goes on the pool
// first (image names it as the pool does), or the node is rebooted into
// the image its rollback just failed on (explorer seed 176172 of that
// regression). Until it is known, the caller waits, at most until
// healthTimeout after the order.
func rollbackFailedAfterLeaving(s *nodeStep, why string) (image, msg string, failed, unknown bool) {
	bn, last := s.bn, s.bn.Status.Daemon.LastReboot
	o := bn.Spec.LastOrder()
	if s.pool == nil || s.pool.DeletionTimestamp != nil || s.node == nil || o == nil || !o.Rollback ||
		!rollout.RebootStarted(bn) || !last.Rollback {
		return "", "", false, false
	}
	to, target := imageref.Digest(bn.Status.Rollout.RollbackTo), s.pool.Status.TargetImage
	if to == "" || imageref.Digest(target) != to {
		return "", "", false, false // the pool keeps failures of its target only
	}
	d, boot := &bn.Status.Daemon, s.node.Status.NodeInfo.BootID
	booted := rollout.DigestOfHost(bn.Status.Booted)
	if boot != "" && boot != last.BootID && d.BootID == boot && booted != "" {
		// The daemon has reported from the boot after the rollback's reboot.
		if booted != to {
			return target, fmt.Sprintf("%s while it rolled back to %s, and the node came back on %s (the rollback failed and the host fell back)",
				why, bn.Status.Rollout.RollbackTo, booted), true, false
		}
		if rollout.NodeReady(s.node) {
			return "", "", false, false
		}
	}
	timeout := rollout.DurationOr(s.pool.Spec.HealthTimeout, rollout.DefaultHealthTimeout)
	if s.now.Before(o.At.Add(timeout)) {
		return "", "", false, true
	}
	return target, fmt.Sprintf("%s while it rolled back to %s, and the node was not healthy on it %s after the rollback order (booted %q, Ready=%v)",
		why, bn.Status.Rollout.RollbackTo, timeout, booted, rollout.NodeReady(s.node)), true, false
}

// failedEarlier marks Failed a record outside any slot, directed to its
// pool's target, whose node failed that target in this rollout under an
// earlier record (deleted since, the failure recorded on the pool first:
// rollout.FailureOf). The pool grants such a node no slot; without the
// mark its record waited for one for ever and the pool never finished.
func (r *Reconciler) failedEarlier(ctx context.Context, s *nodeStep) (bool, error) {
	bn, ro := s.bn, &s.bn.Status.Rollout
	target := bn.Spec.DesiredImage
	if s.pool == nil || target == "" || target != s.pool.Status.TargetImage || rollout.Done(bn.Status.Phase) {
		return false, nil
	}
	f := rollout.FailureOf(&s.pool.Status, bn.Name, target)
	if f == nil {
		return false, nil
	}
	ro.FailedImage = target
	ro.PhaseSince = &metav1.Time{Time: s.now}
	bn.Status.Phase = v1alpha1.PhaseFailed
	ro.Reason = "FailedEarlier"
	ro.Message = fmt.Sprintf("failed %s in this rollout under an earlier BootcNode (pool %s, status.failures: %s at %s); not tried again until spec.image changes",
		target, s.pool.Name, f.Reason, f.Time.UTC().Format(time.RFC3339))
	if err := r.patchStatus(ctx, s); err != nil {
		return false, err
	}
	r.event(bn, corev1.EventTypeWarning, "FailedEarlier", "%s", ro.Message)
	return true, nil
}

// notReadyOnTarget fails a node outside any slot that runs its target but
// whose kubelet has reported it NotReady for the pool's healthTimeout: a
// boot of the target that never got Ready, whose slot ended without a
// verdict (its pool or record was deleted mid-boot and the failure went with
// it). The failure is recorded on the pool, so the halt counts it; the node
// is not rolled back, as it holds no slot and no cordon. wait is how soon
// to look again while the node is NotReady.
func (r *Reconciler) notReadyOnTarget(ctx context.Context, s *nodeStep) (failed bool, wait time.Duration, err error) {
	bn, ro := s.bn, &s.bn.Status.Rollout
	if s.pool == nil {
		return false, 0, nil
	}
	target := bn.Spec.DesiredImage
	if target == "" {
		// A record the pool has not directed yet (it is halted or paused):
		// the node came back into the pool down on its target.
		target = s.pool.Status.TargetImage
	}
	want := imageref.Digest(target)
	if want == "" || rollout.DigestOfHost(bn.Status.Booted) != want || ro.FailedImage == target {
		return false, 0, nil
	}
	var since time.Time
	notReady := false
	for _, c := range s.node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			notReady, since = c.Status == corev1.ConditionFalse, c.LastTransitionTime.Time
		}
	}
	if !notReady {
		return false, 0, nil
	}
	if rollout.RebootUnreported(bn) {
		// The daemon has not reported since it asked for a reboot: the
		// node is going down or coming up, and status.booted names the
		// boot it left, not the one it is coming up on.
		return false, rollout.VerifyPoll, nil
	}
	timeout := rollout.DurationOr(s.pool.Spec.HealthTimeout, rollout.DefaultHealthTimeout)
	if left := since.Add(timeout).Sub(s.now); left > 0 {
		return false, min(left, rollout.VerifyPoll), nil
	}
	msg := fmt.Sprintf("node runs %s but has been NotReady since %s, longer than healthTimeout %s", target, since.UTC().Format(time.RFC3339), timeout)
	if _, err := r.recordPoolFailure(ctx, s, target, "NotReadyOnTarget", msg); err != nil {
		return false, 0, err
	}
	ro.FailedImage = target
	if bn.Status.Phase != v1alpha1.PhaseFailed {
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	bn.Status.Phase = v1alpha1.PhaseFailed
	ro.Reason, ro.Message = "NotReadyOnTarget", msg
	if err := r.patchStatus(ctx, s); err != nil {
		return false, 0, err
	}
	r.event(bn, corev1.EventTypeWarning, "NotReadyOnTarget", "%s", msg)
	return true, 0, nil
}

// redrain takes a node whose daemon holds its boot order back on an
// uncordoned Node (rollout.UncordonedBeforeReboot) back to Draining: the
// order is withdrawn, and the drain (which records the uncordon, cordons
// the node again and evicts what landed on it) orders the reboot afresh.
func (r *Reconciler) redrain(ctx context.Context, s *nodeStep) error {
	msg := "the node was uncordoned before its reboot: draining it again before it reboots into " + s.bn.Status.Rollout.TargetImage
	if err := r.drainAgain(ctx, s, "Uncordoned", msg); err != nil {
		return err
	}
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	r.event(s.bn, corev1.EventTypeWarning, "Uncordoned", "%s", msg)
	return nil
}

// drainAgain takes a record asked to reboot back to Draining, its drain
// starting now: its boot order is withdrawn (written), the rest is left
// to the caller's status write. The drain orders the reboot afresh.
func (r *Reconciler) drainAgain(ctx context.Context, s *nodeStep, reason, msg string) error {
	if err := r.withdrawBootOrder(ctx, s); err != nil {
		return err
	}
	ro := &s.bn.Status.Rollout
	s.bn.Status.Phase = v1alpha1.PhaseDraining
	ro.PhaseSince = &metav1.Time{Time: s.now}
	ro.DrainStartedAt = &metav1.Time{Time: s.now}
	ro.Reason, ro.Message = reason, msg
	return nil
}

// retarget moves the record to a new desired image. A drain in progress is
// abandoned (the node is uncordoned); a failed node keeps the image that
// failed for debugging and starts over. The pool does not retarget a node
// asked to reboot until it has finished (direct); should one be retargeted
// all the same, its boot order is withdrawn first and it stays cordoned in
// its slot and is drained again before it may boot the new image.
func (r *Reconciler) retarget(ctx context.Context, s *nodeStep, target string) error {
	ro := &s.bn.Status.Rollout
	phase := rollout.RecordPhase(s.bn)
	if o, d := s.bn.Spec.BootOrder, &s.bn.Status.Daemon; phase == v1alpha1.PhaseDraining && o != nil && !o.Withdrawn &&
		rollout.OrderedInSlot(s.bn, o) && (d.Phase == v1alpha1.DaemonRebooting || d.ObservedGeneration < s.bn.Generation) {
		// An order given in this slot, void under the new image: until
		// the daemon has seen the change and says it is not rebooting,
		// the node may be going down, and is handled as rebooting (kept
		// in its slot and cordoned); an abandoned drain gave it back
		// mid-reboot (explorer seed 94094 of rollout-100-nodes).
		phase = v1alpha1.PhaseRebooting
	}
	if phase == v1alpha1.PhaseDraining && rollout.RebootUnreportedInSlot(s.bn) {
		// So is a drain again in the slot whose reboot the daemon asked
		// for and has not reported from: its order was withdrawn (by a
		// retarget before this one, or the node left its pool and came
		// back), not voided, and the node is down in that reboot. An
		// abandoned drain gave it back down, its protection ended 5m
		// later, and Karpenter repaired it (explorer seed 176602 of
		// cluster-repair-during-slow-reboot: kp-0, rebooting from 1m02s
		// for 12m on its order of 57 s, was retargeted to v1 at 3m19s
		// and back to v2 at 5m11s, given back then, repaired at 11m10s).
		phase = v1alpha1.PhaseRebooting
	}
	switch phase {
	case v1alpha1.PhaseDraining:
		if err := r.finish(ctx, s, v1alpha1.PhasePending, "Retargeted", "drain abandoned: the pool image changed", false); err != nil {
			return err
		}
	case v1alpha1.PhaseRebooting, v1alpha1.PhaseVerifying:
		if err := r.drainAgain(ctx, s, "Retargeted", "pool image changed while the node was in its slot; draining again before booting "+target); err != nil {
			return err
		}
		ro = &s.bn.Status.Rollout
	case v1alpha1.PhaseFailed, v1alpha1.PhaseRolledBack:
		s.bn.Status.Phase = v1alpha1.PhasePending
		ro.PhaseSince = &metav1.Time{Time: s.now}
		ro.Reason, ro.Message = "Retargeted", fmt.Sprintf("retargeted to %s after %s failed", target, ro.FailedImage)
	}
	inSlot := rollout.HoldsSlot(s.bn.Status.Phase)
	if ro.FailedImage == target && s.bn.Status.Phase != v1alpha1.PhaseFailed && s.bn.Status.Phase != v1alpha1.PhaseRolledBack {
		// The pool directs a node to an image that failed on it only in a
		// later rollout of that image (it forgot the failure when its
		// target changed): a new attempt, whose outcome replaces the old
		// one. Kept, the old failure would count against the new attempt
		// (the pool's halt counts a record in its slot that failed its
		// target). The events and the pool's lastHalt keep it.
		ro.FailedImage = ""
	}
	if o := s.bn.Spec.BootOrder; !r.opts.TestOnly.KeepBootOrder && o != nil && !o.Withdrawn && o.Image != target {
		// An order for the image the node leaves (a spent rollback of a
		// failed image, say) is withdrawn now: left standing, it stood
		// again when the pool went back to that image, and a daemon
		// reads a standing rollback order as "done, stage nothing"
		// (explorer seed 92351 of rollback-on-failed-boot).
		if err := r.withdrawBootOrder(ctx, s); err != nil {
			return err
		}
		ro = &s.bn.Status.Rollout
	}
	if o := s.bn.Spec.BootOrder; r.opts.TestOnly.KeepBootOrder && o != nil && o.Image != target {
		// Planted: the last order follows the node to its new image.
		if err := r.patchSpec(ctx, s, func(b *v1alpha1.BootcNode) { b.Spec.BootOrder.Image, b.Spec.BootOrder.Withdrawn = target, false }); err != nil {
			return err
		}
		ro = &s.bn.Status.Rollout
	}
	if left := ro.TargetImage; left != "" && left != target && ro.FailedImage == "" && !inSlot && s.node != nil &&
		!rollout.NodeReady(s.node) && rollout.DigestOfHost(s.bn.Status.Booted) == imageref.Digest(left) && !r.opts.TestOnly.ForgetDownOnLeft {
		// Down on the image it leaves, outside a slot: it booted that
		// image and never came up (a new record took the node over as
		// Updated, say, before notReadyOnTarget could fail it). It is
		// recorded as down on that image, as a node that failed it is,
		// so that it may take a slot for the new target while down:
		// nothing else could ever bring it back (explorer seed 158119 of
		// rollback-on-failed-boot: its pool deleted and made again while
		// it was down on v2-bad, then set back to v1 by an operator; the
		// node stayed down and the rollout stalled on it).
		ro.FailedImage = left
		// Said once written (outside a slot, by the step's own write):
		// said first, a write that failed left the record as it was,
		// and the retry said it again.
		s.onRecorded(func() {
			r.event(s.bn, corev1.EventTypeWarning, "DownOnLeftImage", "not Ready on %s, which the pool no longer targets; it may take a slot for %s while down", left, target)
		})
	}
	ro.TargetImage = target
	ro.Failures = 0
	ro.RetryAfter = nil
	// A failed rollback's image is history once the node is directed
	// elsewhere (the pool never directs it to that image while it is
	// Failed), as FailedImage is.
	ro.RollbackTo = ""
	if !inSlot {
		// Outside a slot nothing waits on it: it goes with the step's
		// own write (its phase), one write where there were two. The
		// pool grants a slot only once the record names the target.
		return nil
	}
	return r.patchStatus(ctx, s)
}

// drain cordons the node (recording the prior cordon state first), evicts
// its pods, and asks for the reboot once it is empty. A drain that outlives
// drainTimeout gives the slot back and backs off.
func (r *Reconciler) drain(ctx context.Context, s *nodeStep) (reconcile.Result, error) {
	ro := &s.bn.Status.Rollout
	if !ro.Cordoned || rollout.HaltedFor(s.pool, ro.TargetImage) {
		// A slot granted for an image the pool has since halted on is
		// given back: before the node is touched (read afresh), or as
		// soon as the cache shows the halt (a halt lasts until the
		// target changes, so a cached one is never out of date).
		fresh, err := r.freshPool(ctx, s)
		if err != nil {
			return reconcile.Result{}, err
		}
		if halted, err := r.haltedOn(ctx, s, fresh); err != nil || halted {
			return reconcile.Result{}, err
		}
	}
	if !ro.Cordoned {
		// The state to give back is read from the API server: a cache that
		// does not show an admin's cordon yet would have bootroll remove
		// it when the slot ends.
		fresh, err := r.freshNode(ctx, s)
		if err != nil || fresh == nil {
			return reconcile.Result{}, err // a Node gone is handled by its delete event
		}
		s.node = fresh
		if _, ours := s.node.Annotations[v1alpha1.AnnotationSlot]; !ours && !r.opts.TestOnly.ForgetPriorCordon {
			ro.PriorUnschedulable = ptr.To(s.node.Spec.Unschedulable)
		}
		if r.protects(s) {
			_, added := karpenter.Protect(maps.Clone(s.node.Annotations))
			if r.opts.TestOnly.DropAnnotationOwnership {
				added = karpenter.ProtectAnnotations // claims the ones that were there before
			}
			ro.AddedAnnotations = karpenter.MergeKeys(ro.AddedAnnotations, added)
		}
		ro.ProtectUntil = nil
		ro.Cordoned = true
		ro.DrainStartedAt = &metav1.Time{Time: s.now}
		if err := r.patchStatus(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
		r.event(s.bn, corev1.EventTypeNormal, "Cordoned", "cordoned for the update to %s", ro.TargetImage)
	}
	if ro.DrainStartedAt == nil {
		ro.DrainStartedAt = &metav1.Time{Time: s.now}
		if err := r.patchStatus(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	recordoned, err := r.recordAdminUncordon(ctx, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.cordon(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	if recordoned {
		// Said once the cordon is back: said first, a cordon that failed
		// left the node uncordoned, and the retry said it again.
		r.event(s.bn, corev1.EventTypeWarning, "Recordoned", "the node was uncordoned during its drain: cordoned again until its update, and left uncordoned after it")
	}
	if r.protects(s) {
		if err := r.protectClaim(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	res, err := r.drainer.Drain(ctx, s.node.Name, drainOptions(s.pool))
	if err != nil {
		return reconcile.Result{}, err
	}
	if res.Remaining == 0 {
		// The pass read the pods from the cache, which may not show a pod
		// bound just before the cordon: before the boot order, the API
		// server (uncached, now that the cordon is written) must agree
		// that none is left.
		if res.Remaining, err = PodsToLeave(ctx, r.reader, s.node.Name); err != nil {
			return reconcile.Result{}, err
		}
	}
	d := rollout.Drain(s.view(), res.Remaining, len(res.Blocked) > 0)
	switch d.Outcome {
	case rollout.DrainDone:
		// No record write: the boot order that verify gives (with its
		// time) records that the drain is over, and makes the phase
		// Rebooting (rollout.RecordPhase).
		res, err := r.verify(ctx, s)
		if err == nil && s.bn.Spec.Order() != nil {
			r.observe(s, "drain", d.Took, "drained")
			r.event(s.bn, corev1.EventTypeNormal, "Drained", "drained in %s; rebooting into %s", d.Took.Round(time.Second), ro.TargetImage)
		}
		return res, err
	case rollout.DrainTimedOut:
		timeout := rollout.DurationOr(s.pool.Spec.DrainTimeout, rollout.DefaultDrainTimeout)
		ro.Failures = d.Failures
		ro.RetryAfter = &metav1.Time{Time: s.now.Add(d.Backoff)}
		msg := fmt.Sprintf("drain did not finish within %s (%d pod(s) left; blocked: %s); retry after %s",
			timeout, res.Remaining, blockedMessage(res.Blocked), d.Backoff)
		// Said and counted once the slot's end is written: a write that
		// failed left the record Draining, and the retry timed the drain
		// out again.
		s.onRecorded(func() {
			r.observe(s, "drain", d.Took, "timeout")
			if r.metrics != nil {
				r.metrics.Failures.WithLabelValues(s.bn.Spec.Pool, "DrainTimeout").Inc()
			}
			r.event(s.bn, corev1.EventTypeWarning, "DrainTimeout", "%s", msg)
		})
		return reconcile.Result{RequeueAfter: d.Backoff}, r.finish(ctx, s, v1alpha1.PhasePending, "DrainTimeout", msg, false)
	}
	if d.MarkBlocked {
		ro.Reason, ro.Message = "DrainBlocked", "drain blocked: "+blockedMessage(res.Blocked)
		if err := r.patchStatus(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: d.Wait}, nil
}

// verify waits for the node to boot the target digest and be Ready within
// healthTimeout, then finishes the update.
func (r *Reconciler) verify(ctx context.Context, s *nodeStep) (reconcile.Result, error) {
	// No cordon here: drain() cordoned the node before it asked for the
	// reboot. Re-cordoning from a stale read of a node that has already
	// finished would cordon it again after its uncordon.
	v, err := r.verifyView(ctx, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := rollout.Verify(v, r.opts.TestOnly)
	if d.Outcome == rollout.VerifyOrderBoot {
		bn := s.bn
		// The last moment a halt can stop the node: before the boot order.
		if !bn.Spec.RollingBack() {
			fresh, err := r.freshPool(ctx, s)
			if err != nil {
				return reconcile.Result{}, err
			}
			if halted, err := r.haltedOn(ctx, s, fresh); err != nil || halted {
				return reconcile.Result{}, err
			}
			if left, err := r.leftPool(ctx, s, fresh); err != nil || left {
				// Given back once the cache shows it (step): no order.
				return reconcile.Result{RequeueAfter: time.Second}, err
			}
		}
		order := &v1alpha1.BootOrder{Image: bn.Spec.DesiredImage, At: metav1.Time{Time: s.now}}
		if at := rollout.OrderAgainAt(bn); at != nil {
			// The slot's reboot is under way, or over: the order keeps
			// the time of the one that asked for it.
			order.At = *at
		}
		if err := r.patchSpec(ctx, s, func(b *v1alpha1.BootcNode) { b.Spec.BootOrder = order }); err != nil {
			return reconcile.Result{}, fmt.Errorf("ask BootcNode %s to boot %s: %w", bn.Name, bn.Spec.DesiredImage, err)
		}
		r.event(s.bn, corev1.EventTypeNormal, "Rebooting", "asked the daemon to boot %s", s.bn.Spec.DesiredImage)
		d = rollout.Verify(s.view(), r.opts.TestOnly)
	}
	if d.Outcome == rollout.VerifyDone && !r.opts.TestOnly.VerifyOnCache {
		// The verdict ends the slot: it is taken again on the Node (and
		// the pods the checks read) as the API server has them. A cache
		// that lags showed a node Ready for the pool's readyFor that had
		// gone NotReady 11 s before, and never passed its checks (explorer
		// seed 147032 of health-checks: powered off in its last minute of
		// readyFor, recorded Updated while down).
		if d, err = r.verifyFresh(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	bn, ro := s.bn, &s.bn.Status.Rollout
	booted := rollout.DigestOfHost(bn.Status.Booted)
	switch d.Outcome {
	case rollout.VerifyDone:
		phase, reason := v1alpha1.PhaseUpdated, "Updated"
		if bn.Spec.RollingBack() {
			phase, reason = v1alpha1.PhaseRolledBack, "RolledBack"
		}
		msg := fmt.Sprintf("booted %s and Ready %s after the reboot request", bn.Spec.DesiredImage, d.Took.Round(time.Second))
		if rollout.HasHealthChecks(&s.pool.Spec.HealthChecks) {
			msg = fmt.Sprintf("booted %s and passed the pool's health checks %s after the reboot request", bn.Spec.DesiredImage, d.Took.Round(time.Second))
		}
		if bn.Spec.RollingBack() {
			msg = fmt.Sprintf("rolled back from %s to %s and Ready %s after the rollback request", bn.Spec.DesiredImage, rollout.DigestOfHost(bn.Status.Booted), d.Took.Round(time.Second))
		}
		// Recorded once the phase is written: a write that conflicts is
		// retried, and the retry must not count twice; a later write of
		// the same finish that fails must not lose it either (the retry
		// finds the phase written and only gives the Node back).
		s.onRecorded(func() {
			r.observe(s, "reboot", d.Took, "ok")
			r.event(bn, corev1.EventTypeNormal, reason, "%s", msg)
		})
		return reconcile.Result{}, r.finish(ctx, s, phase, reason, msg, !bn.Spec.RollingBack())
	case rollout.VerifyBootFailed:
		return reconcile.Result{}, r.fail(ctx, s, "BootFailed", fmt.Sprintf("node came back on %s: %s", booted, bn.Status.Daemon.LastError))
	}
	// With health checks, the check a node waits for shows in kubectl get
	// bn; said once per change (each unmet message is stable while it
	// lasts).
	checkMsg := ""
	if d.Outcome == rollout.VerifyWait && d.Unmet != "" && rollout.HasHealthChecks(&s.pool.Spec.HealthChecks) {
		checkMsg = "booted the target; waiting for health check: " + d.Unmet
	}
	if d.MarkVerifying || (checkMsg != "" && bn.Status.Phase == v1alpha1.PhaseVerifying && ro.Message != checkMsg) {
		if d.MarkVerifying {
			bn.Status.Phase = v1alpha1.PhaseVerifying
			ro.PhaseSince = &metav1.Time{Time: s.now}
			ro.Reason, ro.Message = "WaitingForReady", "booted the target; waiting for the Node to be Ready"
		}
		if checkMsg != "" {
			ro.Reason, ro.Message = "WaitingForHealthChecks", checkMsg
		}
		if err := r.patchStatus(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	if d.Outcome == rollout.VerifyHealthTimeout {
		timeout := rollout.DurationOr(s.pool.Spec.HealthTimeout, rollout.DefaultHealthTimeout)
		why := fmt.Sprintf("not healthy %s after the reboot request (booted %q, Ready=%v)", timeout, booted, rollout.NodeReady(s.node))
		if rollout.HasHealthChecks(&s.pool.Spec.HealthChecks) && d.Unmet != "" {
			why += ": " + d.Unmet
		}
		return reconcile.Result{}, r.fail(ctx, s, "HealthTimeout", why)
	}
	return reconcile.Result{RequeueAfter: d.Wait}, nil
}

// verifyFresh decides Verify again on the Node read from the API server,
// with the pods on the node read there too when the pool's checks read
// them. A Node gone waits for its delete event (nodeGone).
func (r *Reconciler) verifyFresh(ctx context.Context, s *nodeStep) (rollout.VerifyDecision, error) {
	fresh, err := r.freshNode(ctx, s)
	if err != nil {
		return rollout.VerifyDecision{}, err
	}
	if fresh == nil {
		return rollout.VerifyDecision{Outcome: rollout.VerifyWait, Wait: ConflictRetry}, nil
	}
	s.node = fresh
	v, err := r.viewOn(ctx, s, r.reader)
	if err != nil {
		return rollout.VerifyDecision{}, err
	}
	return rollout.Verify(v, r.opts.TestOnly), nil
}

// verifyView is the view Verify decides on, with the pods on the node
// when the pool's health checks read them (rollout.VerifyNeedsPods), from
// the cache's pods-by-node index.
func (r *Reconciler) verifyView(ctx context.Context, s *nodeStep) (rollout.NodeView, error) {
	return r.viewOn(ctx, s, r.client)
}

// viewOn is verifyView with the pods read through c: the cache, or the
// API server for a verdict (verifyFresh). The pods are only read.
func (r *Reconciler) viewOn(ctx context.Context, s *nodeStep, c client.Reader) (rollout.NodeView, error) {
	v := s.view()
	if !rollout.VerifyNeedsPods(v, r.opts.TestOnly) {
		return v, nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, onNode(s.node.Name), client.UnsafeDisableDeepCopy); err != nil {
		return v, fmt.Errorf("list pods on node %s for its health checks: %w", s.node.Name, err)
	}
	v.Pods = pods.Items
	return v, nil
}

// fail marks the node Failed for its target. With failurePolicy Rollback
// and the new image booted, the daemon is asked to return to the rollback
// deployment and the node keeps its slot until that has booted.
func (r *Reconciler) fail(ctx context.Context, s *nodeStep, reason, msg string) error {
	bn := s.bn
	var took time.Duration
	if at := rollout.RebootClock(bn); at != nil {
		took = s.now.Sub(at.Time)
	}
	// The failure goes on the pool first, before anything that can
	// conflict: a record deleted, or a write lost, cannot lose it. A failed
	// rollback is a failure of the image it rolled back from.
	image := bn.Spec.DesiredImage
	if bn.Spec.RollingBack() && bn.Status.Rollout.FailedImage != "" {
		image, reason = bn.Status.Rollout.FailedImage, "RollbackFailed"
		msg = "rollback failed: " + msg
	}
	if _, err := r.recordPoolFailure(ctx, s, image, reason, msg); err != nil {
		return err
	}
	// Counted only once written: a conflicting write is retried.
	if err := r.recordFailure(ctx, s, reason, msg); err != nil {
		return err
	}
	if r.metrics != nil {
		r.metrics.Failures.WithLabelValues(bn.Spec.Pool, reason).Inc()
		r.metrics.RebootSeconds.WithLabelValues(bn.Spec.Pool, "failed").Observe(took.Seconds())
	}
	r.event(bn, corev1.EventTypeWarning, reason, "%s", msg)
	return nil
}

func (r *Reconciler) recordFailure(ctx context.Context, s *nodeStep, reason, msg string) error {
	bn := s.bn
	failedImage := bn.Spec.DesiredImage
	if s.pool.Spec.FailurePolicy.Action == v1alpha1.FailureRollback && !bn.Spec.RollingBack() &&
		rollout.DigestOfHost(bn.Status.Booted) == imageref.Digest(bn.Spec.DesiredImage) && bn.Status.RollbackImage != nil && bn.Status.RollbackImage.Digest != "" {
		// The rollback order names the image it leaves (the pool's
		// target stays spec.desiredImage, the pool its one writer); the
		// daemon returns to the rollback deployment the host reported.
		prev := bn.Status.RollbackImage.Image
		// The failed image, and the one the rollback returns to, are
		// recorded before the rollback order, so that no crash between
		// the writes can lose them: should the rollback fail, the node
		// failed that image too (Facts.FailedOn; explorer seed 92018 of
		// rollback-on-failed-boot: the pool, gone back to it, booted the
		// node into the image its rollback had crash-looped on).
		to, err := imageref.WithDigest(prev, bn.Status.RollbackImage.Digest)
		if err != nil {
			to = prev // the daemon reported a reference that does not parse: kept to be read
		}
		if ro := &s.bn.Status.Rollout; ro.FailedImage != failedImage || ro.RollbackTo != to {
			ro.FailedImage, ro.RollbackTo = failedImage, to
			if err := r.patchStatus(ctx, s); err != nil {
				return err
			}
		}
		order := &v1alpha1.BootOrder{Image: failedImage, Rollback: true, At: metav1.Time{Time: s.now}}
		if err := r.patchSpec(ctx, s, func(b *v1alpha1.BootcNode) { b.Spec.BootOrder = order }); err != nil {
			return fmt.Errorf("ask BootcNode %s to roll back: %w", bn.Name, err)
		}
		ro := &s.bn.Status.Rollout
		ro.Reason, ro.Message = "RollingBack", msg+"; rolling back to "+prev
		return r.patchStatus(ctx, s)
	}
	// A failed rollback keeps the image that failed. Failed is recorded
	// before finish withdraws the boot order (so an unplanned reboot does
	// not retry it): once the daemon sees the withdrawal its report of the
	// failed boot is gone, and a retry after a conflict must still know.
	ro := &s.bn.Status.Rollout
	if !bn.Spec.RollingBack() || ro.FailedImage == "" {
		ro.FailedImage = failedImage
	}
	if s.bn.Status.Phase != v1alpha1.PhaseFailed {
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	s.bn.Status.Phase = v1alpha1.PhaseFailed
	ro.Reason, ro.Message = reason, msg
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	return r.finish(ctx, s, v1alpha1.PhaseFailed, reason, msg, false)
}

// withdrawBootOrder marks the last boot order withdrawn (locked on the
// record read, like every spec write), whether it stands or was voided by
// a change of spec.desiredImage: a void order is not dead, as the pool
// may set its image again (A -> B -> A), and it would stand again then,
// given long before the node was drained for it (explorer seed 70058 of
// pdb-changed-mid-rollout: the node rebooted on it as soon as a later
// slot cordoned it, with its pods still bound). The order stays,
// withdrawn, so a reboot it may have started still counts from its time.
func (r *Reconciler) withdrawBootOrder(ctx context.Context, s *nodeStep) error {
	if o := s.bn.Spec.BootOrder; o == nil || o.Withdrawn || r.opts.TestOnly.KeepBootOrder {
		return nil
	}
	if err := r.patchSpec(ctx, s, func(b *v1alpha1.BootcNode) { b.Spec.BootOrder.Withdrawn = true }); err != nil {
		return fmt.Errorf("withdraw the boot order of BootcNode %s: %w", s.bn.Name, err)
	}
	return nil
}

// current returns a conflict when the record this reconcile acts on is
// not the one the API server holds.
func (r *Reconciler) current(ctx context.Context, s *nodeStep) error {
	return recordCurrent(ctx, r.reader, s.bn)
}

// freshRecord makes the record the API server holds the step's record,
// in place of the cached one and of any edits of it not yet written. It
// reports whether there is one to act on (false: gone).
func (r *Reconciler) freshRecord(ctx context.Context, s *nodeStep) (bool, error) {
	var fresh v1alpha1.BootcNode
	if err := r.reader.Get(ctx, types.NamespacedName{Name: s.bn.Name}, &fresh); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("re-read BootcNode %s: %w", s.bn.Name, err)
	}
	s.bn, s.orig = &fresh, recordOf(&fresh)
	s.recorded = nil // the edits they announce are dropped
	return true, nil
}

// recordCurrent reads bn from the API server (reader is uncached) and
// returns a conflict when the copy at hand is not the one it holds: a
// cached record may be stale, and what is written on its word (a Node's
// cordon, protection) would then act on a state that has moved on. Only
// the resourceVersion is compared, so only the metadata is read (as
// freshPool reads a pool's first): the whole record, its status with the
// daemon's report, was copied for it before every write of a Node.
func recordCurrent(ctx context.Context, reader client.Reader, bn *v1alpha1.BootcNode) error {
	var fresh metav1.PartialObjectMetadata
	fresh.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BootcNode"))
	if err := reader.Get(ctx, types.NamespacedName{Name: bn.Name}, &fresh); err != nil {
		return fmt.Errorf("re-read BootcNode %s: %w", bn.Name, err)
	}
	if fresh.ResourceVersion != bn.ResourceVersion {
		return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("bootcnodes").GroupResource(), bn.Name,
			fmt.Errorf("the cached record is stale (%s, current %s)", bn.ResourceVersion, fresh.ResourceVersion))
	}
	return nil
}

// freshPool reads the record's pool from the API server (a cached pool may
// not show a halt just set, or a deletion); nil when it is gone. One read
// serves every check made at one point of the slot: the pool's status
// grows with its slots, and the read is made for every node.
func (r *Reconciler) freshPool(ctx context.Context, s *nodeStep) (*v1alpha1.BootcNodePool, error) {
	// The pool's metadata first: when its resourceVersion is the cached
	// pool's, the cache is current and the whole pool, whose status lists
	// every slot (1,000 at 10,000 nodes and 10%), need not cross the wire
	// and be copied once per node update. The cached pool is shared: the
	// callers only read it.
	key := types.NamespacedName{Name: s.bn.Spec.Pool}
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BootcNodePool"))
	if err := r.reader.Get(ctx, key, &m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read pool %s: %w", s.bn.Spec.Pool, err)
	}
	if s.pool != nil && s.pool.UID == m.UID && s.pool.ResourceVersion == m.ResourceVersion {
		return s.pool, nil
	}
	var p v1alpha1.BootcNodePool
	if err := r.reader.Get(ctx, key, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read pool %s: %w", s.bn.Spec.Pool, err)
	}
	return &p, nil
}

// haltedOn gives the slot back when the pool p (read by freshPool; nil:
// gone) is halted for the node's target: the node is restored and stays
// Staged. It reports whether it did.
func (r *Reconciler) haltedOn(ctx context.Context, s *nodeStep, p *v1alpha1.BootcNodePool) (bool, error) {
	if p == nil || !rollout.HaltedFor(p, s.bn.Status.Rollout.TargetImage) {
		return false, nil
	}
	ro := &s.bn.Status.Rollout
	// Retry no sooner than the slot was given, so the pool drops it.
	ro.RetryAfter = &metav1.Time{Time: s.now.Add(rollout.BackoffBase)}
	msg := fmt.Sprintf("the pool halted on %s: slot given back before the reboot", s.bn.Status.Rollout.TargetImage)
	// Said once the slot's end is written: a write that failed left the
	// record in its slot, and the retry gave it back again.
	s.onRecorded(func() { r.event(s.bn, corev1.EventTypeWarning, "Halted", "%s", msg) })
	return true, r.finish(ctx, s, v1alpha1.PhasePending, "Halted", msg, false)
}

// leftPool reads the pool and the Node from the API server and reports
// whether the node is no longer in the pool: the pool is gone or being
// deleted, or no longer selects the Node (or the Node is gone). A cache
// may not show that yet; a boot order issued then reboots a node that is
// being given back, and its release has to wait for the reboot (found by
// the explorer, issue 11: controller-restart-mid-drain seed 7, a boot order
// 5 s after the pool's deletion; node-churn seed 415, 2 s after a
// relabel).
func (r *Reconciler) leftPool(ctx context.Context, s *nodeStep, p *v1alpha1.BootcNodePool) (bool, error) {
	if p == nil || p.DeletionTimestamp != nil {
		return true, nil
	}
	n, err := r.freshNode(ctx, s)
	if err != nil {
		return false, err
	}
	return n == nil || !rollout.Selects(p, n), nil
}

// recordPoolFailure records the node's failure of image in its pool's
// status.failures (read from the API server, written under its
// resourceVersion). The node reconciler is that field's one writer; once
// maxFailures failures are written, the pool counts as halted
// (rollout.HaltedFor) and its reconciler records the halt. first is
// false when the pool already held the failure (an earlier try wrote
// it): a caller that says the failure on the record too says it once, as
// the pool's own event is (finalize). It is true when this call wrote it,
// and when the pool keeps no such failure (gone, or image is not its
// target): nothing records it then but the event.
func (r *Reconciler) recordPoolFailure(ctx context.Context, s *nodeStep, image, reason, msg string) (first bool, err error) {
	if r.opts.TestOnly.HaltFromLiveRecords {
		return true, nil // the old behaviour: the failure lives on the record only
	}
	var p v1alpha1.BootcNodePool
	if err := r.reader.Get(ctx, types.NamespacedName{Name: s.bn.Spec.Pool}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	first = image != p.Status.TargetImage || rollout.FailureOf(&p.Status, s.bn.Name, image) == nil
	before := p.DeepCopy()
	if !rollout.NoteFailure(&p.Status, rollout.FailureAt(s.bn.Name, image, reason, msg, s.now)) {
		return first, nil
	}
	if err := r.client.Status().Patch(ctx, &p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("record the failure of %s on pool %s: %w", s.bn.Name, p.Name, err)
	}
	r.event(&p, corev1.EventTypeWarning, reason, "node %s failed %s: %s", s.bn.Name, image, msg)
	return first, nil
}

// dropStaleFailures removes the failures of an earlier target from the
// pool's status.failures (this reconciler's field), so that a pool that
// rolls a new image out no longer lists the old one's failures; its
// lastHalt keeps them. p is the pool as read for a slot take-up: its slot
// table names the current target.
func (r *Reconciler) dropStaleFailures(ctx context.Context, p *v1alpha1.BootcNodePool) error {
	if p == nil || r.opts.TestOnly.HaltFromLiveRecords || !rollout.HasStaleFailures(&p.Status) {
		return nil // the common case: no copy of a pool (and its slot table) per take-up
	}
	cur := p.DeepCopy()
	rollout.DropStaleFailures(&cur.Status)
	if err := r.client.Status().Patch(ctx, cur, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("drop the failures of earlier targets from pool %s: %w", p.Name, err)
	}
	return nil
}

// patchSpec changes the BootcNode spec with an optimistic lock and keeps
// the status edits of this reconcile that are not written yet.
func (r *Reconciler) patchSpec(ctx context.Context, s *nodeStep, mutate func(*v1alpha1.BootcNode)) error {
	pending := s.bn.Status.DeepCopy()
	b := s.bn.DeepCopy()
	mutate(b)
	if err := r.client.Patch(ctx, b, patch.Spec(s.bn, true)); err != nil {
		return err
	}
	s.orig = recordOf(b)
	s.bn = b
	s.bn.Status = *pending
	return nil
}

// recordAdminUncordon handles a Node found uncordoned under bootroll's
// slot marker while it drains: someone (kubectl uncordon) removed
// bootroll's cordon. That uncordon is now the cordon state the node is
// given back with, so a cordon found before the slot is forgotten; the
// drain then cordons the node again (cordon), so that no pod lands on it
// before its reboot, and says so once that cordon is written (found). The
// Node is read afresh first, as a cached one may show such a state from
// an earlier slot.
func (r *Reconciler) recordAdminUncordon(ctx context.Context, s *nodeStep) (found bool, err error) {
	ro := &s.bn.Status.Rollout
	if !rollout.UncordonedUnderMarker(s.node, s.bn.Spec.Pool) {
		return false, nil
	}
	var fresh corev1.Node
	if err := r.reader.Get(ctx, types.NamespacedName{Name: s.node.Name}, &fresh); err != nil {
		return false, fmt.Errorf("re-read node %s: %w", s.node.Name, err)
	}
	if !rollout.UncordonedUnderMarker(&fresh, s.bn.Spec.Pool) {
		return false, nil
	}
	if ro.PriorUnschedulable == nil || *ro.PriorUnschedulable {
		ro.PriorUnschedulable = ptr.To(false)
		if err := r.patchStatus(ctx, s); err != nil {
			return false, err
		}
	}
	return true, nil
}

// cordon makes sure the Node is cordoned with bootroll's slot marker, in
// one patch.
func (r *Reconciler) cordon(ctx context.Context, s *nodeStep) error {
	n := s.node
	missing := false
	for _, k := range s.bn.Status.Rollout.AddedAnnotations {
		if _, ok := n.Annotations[k]; !ok {
			missing = true
		}
	}
	if n.Spec.Unschedulable && n.Annotations[v1alpha1.AnnotationSlot] == s.bn.Spec.Pool && !missing {
		return nil
	}
	// Writing the Node on a stale read of the record could cordon a node
	// that has already been uncordoned and released: check first that the
	// record this reconcile acts on is the current one.
	if err := r.current(ctx, s); err != nil {
		return fmt.Errorf("before cordoning: %w", err)
	}
	m := n.DeepCopy()
	m.Spec.Unschedulable = true
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[v1alpha1.AnnotationSlot] = s.bn.Spec.Pool
	for _, k := range s.bn.Status.Rollout.AddedAnnotations {
		if _, ok := m.Annotations[k]; !ok {
			m.Annotations[k] = "true"
		}
	}
	if err := r.client.Patch(ctx, m, patch.Node(n), fieldManager...); err != nil {
		return fmt.Errorf("cordon node %s: %w", n.Name, err)
	}
	s.node = m
	return nil
}

// finish ends the node's time in the slot: it restores the cordon state
// the node had before bootroll, removes bootroll's marker, records phase,
// and gives the slot back. Each step is idempotent, so a crash between
// them is repaired by the next reconcile.
func (r *Reconciler) finish(ctx context.Context, s *nodeStep, phase v1alpha1.NodePhase, reason, msg string, success bool) error {
	// A boot order not carried out is withdrawn before anything else, so
	// that no stale read can act on it once the node is out of its slot
	// (DESIGN.md section 4). One carried out (the node runs its image) is
	// spent: the daemon boots nothing for it, and the pool's next target
	// voids it, so it costs no write (docs/decisions.md).
	if phase != v1alpha1.PhaseRebooting && phase != v1alpha1.PhaseVerifying && !rollout.OrderSpent(s.bn) {
		if err := r.withdrawBootOrder(ctx, s); err != nil {
			return err
		}
	}
	if s.bn.Status.Rollout.Cordoned {
		// Uncordoning on a stale read of the record could end a slot the
		// record has moved on from: check that it is the current one.
		if err := r.current(ctx, s); err != nil {
			return err
		}
	}
	bn, ro := s.bn, &s.bn.Status.Rollout
	// Post-update protection follows every slot that ends with the node
	// still in its pool, failed or abandoned as well as updated: each one
	// drained the node, and an empty node is what Karpenter reaps (DESIGN
	// §5). A node that leaves its pool is given back at once (cleanup).
	keep := false
	stays := s.pool != nil && s.pool.DeletionTimestamp == nil && s.node != nil && rollout.Selects(s.pool, s.node)
	var fresh *corev1.Node // the API server's Node, once read
	read := false
	moved := false // the deadline moved to this pass's give-back: recorded first
	if stays && (len(ro.AddedAnnotations) > 0 || len(ro.AddedNodeClaimAnnotations) > 0) {
		claimed := karpenter.ClaimName(s.node) != ""
		if claimed && s.pool.Spec.Karpenter.PostUpdateProtection == nil {
			// The default protection is for nodes Karpenter manages, and
			// the cache may still show an owner the Node has lost: the
			// API server says (explorer seed 120245 of
			// cluster-halt-lifted-by-node-delete-karpenter: Karpenter's
			// CRDs removed, a stale cache, and the node kept a 5-minute
			// protection nothing needed). The uncordon below uses the
			// same read: nothing writes the Node in between.
			var err error
			if fresh, err = r.freshNode(ctx, s); err != nil {
				return err
			}
			read = true
			claimed = fresh != nil && karpenter.ClaimName(fresh) != ""
		}
		if pup := rollout.PostUpdateProtection(s.pool, claimed); pup > 0 {
			keep = true
			// The protection runs from the Node's give-back (its pods
			// can come back only then): a finish resumed after its
			// first pass recorded the deadline (a later write failed)
			// keeps that deadline once the Node was given back. Set
			// again from the resumed pass, it moved on with every late
			// retry (explorer seed 176161 of repair-during-slow-reboot:
			// the finish of kp-1, whose Node had been given back at
			// 25m00s with its deadline at 30m00s, resumed at 35m08s and
			// set 40m08s). A Node still carrying bootroll's slot marker
			// (the uncordon failed) is given back by this pass: the
			// deadline runs from now, recorded before the uncordon
			// (explorer seed 176264 of node-churn: kp-2's record said
			// Updated with its deadline at 10m26s, the uncordon failed
			// on API errors until 10m45s, and the protection ended
			// 4m40s after the give-back; Karpenter reaped the empty
			// node 19 s later). The cordon of every slot clears it.
			if ro.ProtectUntil != nil && ro.Cordoned {
				if !read {
					var err error
					if fresh, err = r.freshNode(ctx, s); err != nil {
						return err
					}
					read = true
				}
				if fresh != nil && ro.ProtectUntil.Time.Before(s.now.Add(pup)) {
					if _, marked := fresh.Annotations[v1alpha1.AnnotationSlot]; marked {
						ro.ProtectUntil, moved = nil, true
					}
				}
			}
			if ro.ProtectUntil == nil {
				ro.ProtectUntil = &metav1.Time{Time: s.now.Add(pup)}
			}
		}
	}
	leaving := rollout.HoldsSlot(bn.Status.Phase) && !rollout.HoldsSlot(phase)
	if bn.Status.Phase != phase {
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	bn.Status.Phase = phase
	ro.Reason, ro.Message = reason, msg
	ro.DrainStartedAt = nil
	if success {
		ro.Failures = 0
		ro.RetryAfter = nil
	}
	// The node leaves the slot phase on its record first, still cordoned
	// (the pool keeps the slot) and owning what bootroll added; only then
	// does the Node lose its marker and protection. Removed first, a
	// record write that then failed (or timed out unapplied) left a node
	// in its slot unprotected until a retry landed, and Karpenter
	// disrupted it (issue 11, karpenter-defaults.no-reap-while-updating.seed30).
	// A crash between the two is finished by the next pass (a cordoned
	// record outside a slot phase). This holds for a node without a
	// NodeClaim too, as the take-up's order does (rollout.TakeUp):
	// Karpenter may come to manage it in between (explorer seed 176094 of
	// nodeclass-drift-mid-rollout: the release uncordoned and unprotected
	// such a node first, the controller crashed before the record write,
	// and Karpenter, its CRDs installed again, adopted and drifted the
	// node still in its slot on its record).
	if (leaving || moved) && ro.Cordoned && !r.opts.TestOnly.SkipUncordon {
		if err := r.patchStatus(ctx, s); err != nil {
			return err
		}
		s.phaseRecorded()
	}
	if !keep {
		// The NodeClaim first: once the Node loses its marker, what is
		// left to give back has a deadline, and a claim patch that fails
		// and backs off would spend it (the Node keeps do-not-disrupt
		// until its own patch).
		if err := r.unprotectClaim(ctx, s); err != nil {
			return err
		}
	}
	uncordoned := false
	if ro.Cordoned && !r.opts.TestOnly.SkipUncordon {
		if !read {
			var err error
			if fresh, err = r.freshNode(ctx, s); err != nil {
				return err
			}
		}
		if err := r.uncordonNode(ctx, s, fresh, keep); err != nil {
			return err
		}
		uncordoned = true
	}
	if !r.opts.TestOnly.SkipUncordon {
		ro.Cordoned = false
		ro.PriorUnschedulable = nil
	}
	// The slot is given back by this record: the pool drops the entry of
	// a node that is neither cordoned nor in a slot phase (slotInUse).
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	if uncordoned {
		// Said once the record no longer says cordoned: said when the
		// Node was written, a record write that then failed had the
		// retry, which finds the Node given back, say it again.
		r.event(bn, corev1.EventTypeNormal, "Uncordoned", "restored the cordon state the node had before the update")
	}
	s.phaseRecorded()
	// The startup taint goes last: a crash before it leaves a node that
	// is Updated and still kept from workloads (the os-not-ready path
	// removes it next), never one that takes workloads while its record
	// says it reboots.
	if success && rollout.HasTaint(s.node, v1alpha1.TaintOSNotReady) {
		return r.removeTaint(ctx, s)
	}
	return nil
}

// uncordon restores the node's prior cordon state and removes the slot
// marker and, unless keepProtection, the annotations bootroll added.
func (r *Reconciler) uncordon(ctx context.Context, s *nodeStep, keepProtection bool) error {
	n, err := r.freshNode(ctx, s)
	if err != nil {
		return err
	}
	return r.uncordonNode(ctx, s, n, keepProtection)
}

// uncordonNode is uncordon on n, the Node as the API server has it (nil:
// gone).
func (r *Reconciler) uncordonNode(ctx context.Context, s *nodeStep, n *corev1.Node, keepProtection bool) error {
	ro := &s.bn.Status.Rollout
	if n == nil {
		if !keepProtection {
			ro.AddedAnnotations = nil // the Node is gone, and with it what bootroll added
		}
		return nil
	}
	prior := ro.PriorUnschedulable
	want := prior != nil && *prior
	_, marked := n.Annotations[v1alpha1.AnnotationSlot]
	m := n.DeepCopy()
	if marked {
		// Only the cordon bootroll made is undone: a node that someone
		// cordoned before the update stays cordoned. A node that someone
		// uncordoned during the slot stays uncordoned: bootroll never
		// cordons a node to give it back. Nor does it undo a cordon that
		// another field manager wrote since bootroll's (an admin's
		// uncordon and cordon again while the node verified: bootroll's
		// cordon is no longer there to undo).
		keep := want || (cordonedByOther(n) && !r.opts.TestOnly.ForgetPriorCordon)
		m.Spec.Unschedulable = keep && n.Spec.Unschedulable
	}
	delete(m.Annotations, v1alpha1.AnnotationSlot)
	if !keepProtection && !r.opts.TestOnly.KeepAnnotations {
		karpenter.Unprotect(n, m.Annotations, ro.AddedAnnotations, r.opts.TestOnly.DropAnnotationOwnership)
	}
	if nodeChanged(n, m) {
		if err := r.client.Patch(ctx, m, patch.Node(n), fieldManager...); err != nil {
			return fmt.Errorf("uncordon node %s: %w", n.Name, err)
		}
		s.node = m
	}
	if !keepProtection {
		ro.AddedAnnotations = nil
	}
	return nil
}

// nodeChanged reports whether m, a deep copy of the Node n in which only
// the annotations and spec.unschedulable were changed, differs from n as
// apiequality.Semantic.DeepEqual(n, m) would say: the copy is equal in
// everything else, and Semantic takes nil and empty annotations as equal,
// as maps.Equal does. (Semantic's reflective walk of the whole Node was
// most of the cost of an uncordon.)
func nodeChanged(n, m *corev1.Node) bool {
	return n.Spec.Unschedulable != m.Spec.Unschedulable || !maps.Equal(n.Annotations, m.Annotations)
}

// cordonedByOther reports whether a field manager other than bootroll's
// owns n's spec.unschedulable by its managedFields: it wrote the cordon n
// has (an update that leaves the field as it was moves no ownership, and
// an uncordon leaves the field to no one). A cordon bootroll wrote is
// bootroll's until someone else uncordons and cordons the node again.
func cordonedByOther(n *corev1.Node) bool { return karpenter.ForeignOwned(n, "unschedulable") }

// freshNode reads the step's Node from the API server, or nil when it is
// gone. What bootroll takes back (its cordon, slot marker and annotations)
// is computed from the Node as it is: a cached copy may not show them yet,
// and a merge patch from it would remove nothing.
func (r *Reconciler) freshNode(ctx context.Context, s *nodeStep) (*corev1.Node, error) {
	var n corev1.Node
	if err := r.reader.Get(ctx, types.NamespacedName{Name: s.bn.Name}, &n); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("re-read node %s: %w", s.bn.Name, err)
	}
	return &n, nil
}

// protects reports whether the pool protects its nodes from Karpenter
// (karpenter.protect, default true).
func (r *Reconciler) protects(s *nodeStep) bool {
	if r.opts.TestOnly.SkipKarpenterProtection {
		return false
	}
	p := s.pool.Spec.Karpenter.Protect
	return p == nil || *p
}

// postUpdate ends the protection kept after an update once
// postUpdateProtection has passed or the node runs workloads again. It
// returns how soon to look again.
func (r *Reconciler) postUpdate(ctx context.Context, s *nodeStep) (time.Duration, error) {
	ro := &s.bn.Status.Rollout
	if until := ro.ProtectUntil; until != nil && s.now.Before(until.Time) {
		pods, err := WorkloadPods(ctx, r.client, s.node.Name)
		if err != nil {
			return 0, err
		}
		if pods > 0 {
			// The cache may still show the pods the drain evicted: the
			// protection ends early only on what the API server says
			// (a stale cache ended it at once, and Karpenter reaped the
			// emptied node: explorer seed 94145 of
			// post-update-emptiness-reaping), as the drain confirms its
			// end with the same read.
			if pods, err = WorkloadPods(ctx, r.reader, s.node.Name); err != nil {
				return 0, err
			}
		}
		if pods == 0 {
			wait := until.Sub(s.now)
			if wait > 15*time.Second {
				wait = 15 * time.Second
			}
			return wait, r.keepProtected(ctx, s)
		}
	}
	n, err := r.freshNode(ctx, s)
	if err != nil {
		return 0, err
	}
	if n != nil {
		m := n.DeepCopy()
		if !r.opts.TestOnly.KeepAnnotations {
			karpenter.Unprotect(n, m.Annotations, ro.AddedAnnotations, r.opts.TestOnly.DropAnnotationOwnership)
		}
		if nodeChanged(n, m) {
			if err := r.client.Patch(ctx, m, patch.Node(n), fieldManager...); err != nil {
				return 0, fmt.Errorf("end protection of node %s: %w", n.Name, err)
			}
			s.node = m
		}
	}
	if err := r.unprotectClaim(ctx, s); err != nil {
		return 0, err
	}
	ro.AddedAnnotations, ro.ProtectUntil = nil, nil
	if err := r.patchStatus(ctx, s); err != nil {
		return 0, err
	}
	// Said once the record no longer lists the protection: said first,
	// each pass on a cache that did not show that write yet found the
	// Node given back, said it again and lost its write to a conflict,
	// one a second (ConflictRetry), as did each retry of a write that
	// failed (seed 176610's regression, stale profile: nine
	// ProtectionEnded events for kp-0 from 43m23s).
	r.event(s.bn, corev1.EventTypeNormal, "ProtectionEnded", "removed the Karpenter protection bootroll added")
	return 0, nil
}

// keepUntilSettled keeps the protection of a node that bootroll gives
// back (it left its pool, or its record is being deleted) while the boot
// order it may still act on has not settled: the node is in its slot
// until then (down in a reboot, say), and a protection someone lifts
// meanwhile is put back, or Karpenter repairs the node mid-reboot
// (explorer seeds 107078 and 113126 of cluster-repair-during-slow-reboot:
// relabelled out of its pool, or its record deleted, while down, and an
// operator's do-not-repair removed).
func (r *Reconciler) keepUntilSettled(ctx context.Context, s *nodeStep) error {
	if !rollout.KeepsProtection(s.bn) || s.node == nil {
		return nil
	}
	return r.keepProtected(ctx, s)
}

// keepProtected keeps the node protected from Karpenter while it holds a
// slot and until its post-update protection ends: a protection annotation
// that someone else had put on the node (so bootroll did not add it) and
// has since removed is added again, as bootroll's own. Ownership is
// recorded before the Node is written.
func (r *Reconciler) keepProtected(ctx context.Context, s *nodeStep) error {
	if s.pool == nil || !r.protects(s) {
		return nil
	}
	if protected(s.node.Annotations) {
		return nil // the cache shows every protection annotation
	}
	n, err := r.freshNode(ctx, s)
	if err != nil || n == nil {
		return err
	}
	if _, marked := n.Annotations[v1alpha1.AnnotationSlot]; !marked && rollout.HoldsSlot(s.bn.Status.Phase) {
		// In a slot whose cordon is not on the Node yet (the grant's
		// cordon failed): the drain's cordon writes the marker, the
		// cordon and the protection in one patch (DESIGN §3), in this
		// same pass. Written alone here first, the protection looked
		// like an operator's to anyone reading the Node, and stayed
		// after the slot (explorer seed 100025 of node-churn).
		return nil
	}
	ann, added := karpenter.Protect(maps.Clone(n.Annotations))
	if len(added) == 0 {
		return nil
	}
	// Only on the current record: a cached one may still show a slot
	// that has just ended, and protecting then would outlive it.
	if err := r.current(ctx, s); err != nil {
		return fmt.Errorf("before restoring the protection of node %s: %w", n.Name, err)
	}
	ro := &s.bn.Status.Rollout
	ro.AddedAnnotations = karpenter.MergeKeys(ro.AddedAnnotations, added)
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	m := n.DeepCopy()
	m.Annotations = ann
	if err := r.client.Patch(ctx, m, patch.Node(n), fieldManager...); err != nil {
		return fmt.Errorf("keep the post-update protection of node %s: %w", n.Name, err)
	}
	s.node = m
	until := "the slot ends"
	if ro.ProtectUntil != nil {
		until = "the post-update protection ends at " + ro.ProtectUntil.UTC().Format(time.RFC3339)
	}
	r.event(s.bn, corev1.EventTypeNormal, "ProtectionRestored", "added %s again until %s", strings.Join(added, ", "), until)
	return nil
}

// protected reports whether annotations hold every Karpenter protection
// annotation, so that karpenter.Protect would add none: keepProtected
// asks it of the cached Node on every pass of a slot, without the copy of
// the annotations Protect writes into.
func protected(annotations map[string]string) bool {
	for _, k := range karpenter.ProtectAnnotations {
		if _, ok := annotations[k]; !ok {
			return false
		}
	}
	return true
}

// osNotReady updates a node that joined with an old boot image and the
// startup taint: it holds no workloads, so it boots the target at once,
// without drain or slot; the taint goes when the target has booted.
func (r *Reconciler) osNotReady(ctx context.Context, s *nodeStep) (reconcile.Result, error) {
	bn, ro := s.bn, &s.bn.Status.Rollout
	target := bn.Spec.DesiredImage
	if target == "" {
		return reconcile.Result{}, nil
	}
	if rollout.DigestOfHost(bn.Status.Booted) == imageref.Digest(target) {
		if err := r.removeTaint(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.setPhase(ctx, s, v1alpha1.PhaseUpdated, "OSReady", "runs the target; removed the "+v1alpha1.TaintOSNotReady+" taint")
	}
	pods, err := WorkloadPods(ctx, r.client, s.node.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if pods > 0 {
		msg := fmt.Sprintf("has the %s taint but runs %d workload pod(s); waiting for them to leave before the unslotted update", v1alpha1.TaintOSNotReady, pods)
		if ro.Reason != "OSNotReadyWithWorkloads" {
			if err := r.setPhase(ctx, s, bn.Status.Phase, "OSNotReadyWithWorkloads", msg); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if phase := rollout.ObservedPhase(bn); phase != v1alpha1.PhaseStaged {
		stored, reason, msg := rollout.StagingPhase(bn)
		if stored != bn.Status.Phase || reason != ro.Reason {
			return reconcile.Result{}, r.setPhase(ctx, s, stored, reason, msg)
		}
		return reconcile.Result{}, r.patchStatus(ctx, s) // a retarget, if any
	}
	// A halted target is not booted here either (verify checks the pool
	// afresh before the boot order; this spares a halted node the loop).
	if rollout.HaltedFor(s.pool, target) {
		return reconcile.Result{}, nil
	}
	if ra := ro.RetryAfter; ra != nil && s.now.Before(ra.Time) {
		return reconcile.Result{RequeueAfter: ra.Sub(s.now)}, nil
	}
	bn.Status.Phase = v1alpha1.PhaseRebooting
	ro.PhaseSince = &metav1.Time{Time: s.now}
	ro.Reason, ro.Message = "OSNotReady", "joined with an old boot image and no workloads: booting "+target+" without drain or slot"
	if err := r.patchStatus(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	r.event(bn, corev1.EventTypeNormal, "OSNotReady", "%s", ro.Message)
	return r.verify(ctx, s)
}

func (r *Reconciler) removeTaint(ctx context.Context, s *nodeStep) error {
	n := s.node
	m := n.DeepCopy()
	m.Spec.Taints = nil
	for _, t := range n.Spec.Taints {
		if t.Key != v1alpha1.TaintOSNotReady {
			m.Spec.Taints = append(m.Spec.Taints, t)
		}
	}
	if len(m.Spec.Taints) == len(n.Spec.Taints) {
		return nil
	}
	if err := r.client.Patch(ctx, m, patch.Node(n), fieldManager...); err != nil {
		return fmt.Errorf("remove the %s taint from node %s: %w", v1alpha1.TaintOSNotReady, n.Name, err)
	}
	s.node = m
	r.event(s.bn, corev1.EventTypeNormal, "OSReady", "removed the %s taint", v1alpha1.TaintOSNotReady)
	return nil
}

// nodeGone records that the Node of a record in a slot was deleted: there
// is nothing left to uncordon, and the record leaves its slot.
func (r *Reconciler) nodeGone(ctx context.Context, s *nodeStep) error {
	ro := &s.bn.Status.Rollout
	if !ro.Cordoned && !rollout.HoldsSlot(s.bn.Status.Phase) {
		return nil
	}
	if s.bn.Status.Phase != v1alpha1.PhasePending {
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	// A Node that comes back under the same name must not find an order
	// standing for it outside a slot.
	if err := r.withdrawBootOrder(ctx, s); err != nil {
		return err
	}
	ro = &s.bn.Status.Rollout
	s.bn.Status.Phase = v1alpha1.PhasePending
	ro.Cordoned, ro.PriorUnschedulable, ro.DrainStartedAt = false, nil, nil
	ro.Reason, ro.Message = "NodeGone", "the Node was deleted during the update"
	return r.patchStatus(ctx, s)
}

// setPhase records phase, reason and msg on the record; a change of phase
// is said in an event once the write landed: a write that conflicts (a
// cache behind the daemon's writes) is retried after ConflictRetry, and
// each try said it again (explorer seed 176388: twenty Pending events for
// kp-69, one a second, before its phase was written).
func (r *Reconciler) setPhase(ctx context.Context, s *nodeStep, phase v1alpha1.NodePhase, reason, msg string) error {
	ro := &s.bn.Status.Rollout
	changed := s.bn.Status.Phase != phase
	if changed {
		ro.PhaseSince = &metav1.Time{Time: s.now}
	}
	s.bn.Status.Phase = phase
	ro.Reason, ro.Message = reason, msg
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	if changed {
		typ := corev1.EventTypeNormal
		if phase == v1alpha1.PhaseDegraded {
			typ = corev1.EventTypeWarning
		}
		r.event(s.bn, typ, string(phase), "%s%s", phaseNote(phase, s.bn.Spec.DesiredImage), msg)
	}
	return nil
}

func phaseNote(p v1alpha1.NodePhase, img string) string {
	switch p {
	case v1alpha1.PhaseUpdated:
		return "running " + img
	}
	return ""
}

// patchStatus writes the controller's part of the status (phase and
// rollout record) with an optimistic lock, so a decision made on a stale
// read is never written. What waits for the write (s.recorded) runs once
// it lands.
func (r *Reconciler) patchStatus(ctx context.Context, s *nodeStep) error {
	if !recordDiffers(s.orig, s.bn) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, s.bn, patch.Record(s.orig)); err != nil {
		return fmt.Errorf("record %s on BootcNode %s: %w", s.bn.Status.Phase, s.bn.Name, err)
	}
	s.orig = recordOf(s.bn)
	s.phaseRecorded()
	return nil
}

// recordDiffers reports whether bn's phase or rollout record differs from
// orig's: what a record write (patchStatus) would change.
func recordDiffers(orig, bn *v1alpha1.BootcNode) bool {
	return orig.Status.Phase != bn.Status.Phase || !equalRollout(&orig.Status.Rollout, &bn.Status.Rollout)
}

// recordOf copies what a record patch (recordPatch) diffs against and
// locks on: the name, the resourceVersion and the controller's part of the
// status. A whole DeepCopy per write was a tenth of a node transition.
// The rollout record is copied deeply, as its DeepCopyInto does, but its
// times go in the same allocation as the record (recordCopy): one
// allocation where there were up to seven, at every reconcile.
// TestRecordOfCopiesDeeply fails when a field is shared.
func recordOf(bn *v1alpha1.BootcNode) *v1alpha1.BootcNode {
	c := &recordCopy{}
	out := &c.bn
	out.Name, out.ResourceVersion = bn.Name, bn.ResourceVersion
	out.Status.Phase = bn.Status.Phase
	in, ro := &bn.Status.Rollout, &out.Status.Rollout
	*ro = *in
	room := c.times[:0]
	ro.PhaseSince = copyTime(&room, in.PhaseSince)
	ro.ProtectUntil = copyTime(&room, in.ProtectUntil)
	ro.SlotGrantedAt = copyTime(&room, in.SlotGrantedAt)
	ro.DrainStartedAt = copyTime(&room, in.DrainStartedAt)
	ro.RetryAfter = copyTime(&room, in.RetryAfter)
	if in.PriorUnschedulable != nil {
		ro.PriorUnschedulable = ptr.To(*in.PriorUnschedulable)
	}
	if in.AddedAnnotations != nil {
		ro.AddedAnnotations = slices.Clone(in.AddedAnnotations)
	}
	if in.AddedNodeClaimAnnotations != nil {
		ro.AddedNodeClaimAnnotations = slices.Clone(in.AddedNodeClaimAnnotations)
	}
	return out
}

// recordCopy is recordOf's record with room for the times its pointers
// point to. Of its five times a record has three set at most, as a rule
// (phaseSince, with slotGrantedAt and drainStartedAt in a slot or
// protectUntil after it: never more in a pool-200-static run), so there
// is room for three; a fourth is allocated on its own, as is
// priorUnschedulable (a bool: Go's tiny allocator packs it with others).
// With room for five times and the bool the copy was 816 bytes, in Go's
// 896-byte size class; it now fits the 768-byte one with the 8-byte
// header Go puts before an object this large (TestRecordCopySize).
type recordCopy struct {
	bn    v1alpha1.BootcNode
	times [3]metav1.Time
}

// copyTime copies *t into the next time of room, a slice of a
// recordCopy's times, and points to it; nil stays nil. With no room left
// the time is allocated on its own.
func copyTime(room *[]metav1.Time, t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	r := *room
	if len(r) == cap(r) {
		return t.DeepCopy()
	}
	r = append(r, *t)
	*room = r
	return &r[len(r)-1]
}

func (r *Reconciler) event(obj client.Object, typ, reason, f string, args ...any) {
	if r.recorder != nil {
		r.recorder.Eventf(obj, typ, reason, f, args...)
	}
}

// observe records how long a drain or a reboot took.
func (r *Reconciler) observe(s *nodeStep, what string, d time.Duration, result string) {
	if r.metrics == nil {
		return
	}
	h := r.metrics.DrainSeconds
	if what == "reboot" {
		h = r.metrics.RebootSeconds
	}
	h.WithLabelValues(s.bn.Spec.Pool, result).Observe(d.Seconds())
}
