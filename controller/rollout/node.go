package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// NodeView is what the node rules decide on: a node's record, its Node
// (which exists: a record whose Node is gone is released without asking),
// its pool (nil when gone) and the time. Nothing here changes them.
type NodeView struct {
	Record *v1alpha1.BootcNode
	Node   *corev1.Node
	Pool   *v1alpha1.BootcNodePool
	Now    time.Time
	// Pods are the pods bound to the Node, read only for Verify when the
	// pool's health checks name DaemonSets and the node runs its target
	// (NeedsPods); nil otherwise.
	Pods []corev1.Pod
}

// NodeAction is the next thing the node reconciler does for a record.
type NodeAction int

const (
	// NodeIdle: nothing to do.
	NodeIdle NodeAction = iota
	// NodeRelease: the node left its pool (or the pool is being deleted)
	// while it holds a slot or a cordon: withdraw the boot order, wait
	// for it to settle (BootOrderSettled), and give back what bootroll
	// holds on the Node, as a failure of the target when it booted it
	// and is still down (DownAfterLeaving).
	NodeRelease
	// NodeRetarget: status.rollout.targetImage lags spec.desiredImage;
	// take up the new target, then decide again.
	NodeRetarget
	// NodeDrain: in its slot, draining.
	NodeDrain
	// NodeVerify: in its slot, asked to reboot or being verified.
	NodeVerify
	// NodeRedrain: asked to reboot, but the Node was uncordoned before the
	// daemon asked the host (UncordonedBeforeReboot): withdraw the order
	// and drain again.
	NodeRedrain
	// NodeConclude: Failed or RolledBack and still cordoned: end the slot.
	NodeConclude
	// NodeEndProtection: Failed or RolledBack, with post-update
	// protection or bootroll's annotations still to end.
	NodeEndProtection
	// NodeAwaitGrant: a slot take-up is under way (cordon recorded,
	// still waiting) and the pool's cached slot table does not show the
	// slot: leave it for Wait.
	NodeAwaitGrant
	// NodeRestoreCordon: a cordon no slot accounts for, left by a crash
	// between a node's last steps: give it back.
	NodeRestoreCordon
	// NodeClearMarker: a slot marker on the Node that no record accounts for.
	NodeClearMarker
	// NodeTakeSlot: the pool granted the node a slot (status.slots) it has
	// not taken up: record the cordon, cordon the Node, enter Draining
	// (Decision.Slot).
	NodeTakeSlot
	// NodeFollowDaemon: waiting for its turn or done; the stored phase
	// follows the daemon's report (StagingPhase), after ending any
	// post-update protection, updating a node that joined on an old boot
	// image, and failing one NotReady on its target too long.
	NodeFollowDaemon
)

var nodeActionNames = [...]string{"Idle", "Release", "Retarget", "Drain", "Verify", "Redrain", "Conclude", "EndProtection", "AwaitGrant", "RestoreCordon", "ClearMarker", "TakeSlot", "FollowDaemon"}

func (a NodeAction) String() string {
	if int(a) < len(nodeActionNames) {
		return nodeActionNames[a]
	}
	return fmt.Sprintf("NodeAction(%d)", int(a))
}

// NodeDecision is NextNodeAction's answer.
type NodeDecision struct {
	Action NodeAction
	// KeepProtected: in its slot and cordoned; a protection someone else
	// put on the node (and so not bootroll's) may have been lifted: put
	// bootroll's back before the action.
	KeepProtected bool
	// Wait is how long NodeAwaitGrant waits.
	Wait time.Duration
	// Slot is the slot NodeTakeSlot takes up.
	Slot v1alpha1.Slot
}

// NextNodeAction is the rule that picks a record's next step. The
// reconciler carries it out and, after a NodeRetarget, asks again.
func NextNodeAction(v NodeView, to TestOnly) NodeDecision {
	bn, ro := v.Record, &v.Record.Status.Rollout
	if LeftPool(v.Pool, v.Node) {
		if to.SkipCleanupOnDelete && (v.Pool == nil || v.Pool.DeletionTimestamp != nil) {
			return NodeDecision{} // planted: nothing undone when a pool goes
		}
		if ro.Cordoned || HoldsSlot(RecordPhase(bn)) {
			return NodeDecision{Action: NodeRelease}
		}
		return NodeDecision{}
	}
	if ro.TargetImage != bn.Spec.DesiredImage {
		return NodeDecision{Action: NodeRetarget}
	}
	phase := RecordPhase(bn)
	keep := KeepsProtection(bn)
	switch phase {
	case v1alpha1.PhaseDraining:
		return NodeDecision{Action: NodeDrain, KeepProtected: keep}
	case v1alpha1.PhaseRebooting, v1alpha1.PhaseVerifying:
		if phase == v1alpha1.PhaseRebooting && UncordonedBeforeReboot(bn, v.Node) {
			return NodeDecision{Action: NodeRedrain, KeepProtected: keep}
		}
		return NodeDecision{Action: NodeVerify, KeepProtected: keep}
	case v1alpha1.PhaseFailed, v1alpha1.PhaseRolledBack:
		switch {
		case ro.Cordoned:
			return NodeDecision{Action: NodeConclude}
		case ProtectionPending(ro):
			return NodeDecision{Action: NodeEndProtection}
		}
		return NodeDecision{}
	}
	// Outside a slot: a slot the pool granted is taken up (also after a
	// take-up that stopped part way); otherwise the phase follows what the
	// daemon reports.
	if s, ok := GrantedSlot(v.Pool, bn); ok {
		return NodeDecision{Action: NodeTakeSlot, Slot: s}
	}
	if ro.Cordoned {
		if ro.DrainStartedAt != nil {
			// A slot take-up is under way: it records the cordon (still
			// waiting) before it cordons the Node and then sets Draining,
			// and this read of the pool may not show the slot yet.
			// Restoring now would race it and leave the protection it
			// adds with no record of it (envtest TestKarpenter, now and
			// then). Give it GrantSettle.
			if wait := ro.DrainStartedAt.Add(GrantSettle).Sub(v.Now); wait > 0 {
				return NodeDecision{Action: NodeAwaitGrant, Wait: wait}
			}
		}
		return NodeDecision{Action: NodeRestoreCordon}
	}
	if _, marked := v.Node.Annotations[v1alpha1.AnnotationSlot]; marked {
		return NodeDecision{Action: NodeClearMarker}
	}
	return NodeDecision{Action: NodeFollowDaemon}
}

// UncordonedBeforeReboot reports whether the daemon holds back its boot
// order (not a rollback's) because someone uncordoned the Node under
// bootroll's slot marker before the daemon asked the host to reboot: the
// daemon has seen the current spec, reports Staged (it has asked for no
// reboot: nodedaemon's holdReboot) and recorded none for this order. The
// daemon never reboots an uncordoned node, so the order waits for nothing
// but healthTimeout, and pods may have landed on the node meanwhile: it is
// drained again (explorer seed 115028 of cluster-pool-deleted-mid-rollout:
// the slot ran into healthTimeout and failed a node that never rebooted).
//
// So is a node whose daemon has not seen the order yet (it is down, or
// behind) and recorded no reboot for it: the order stands on a drain that
// no longer holds, and the daemon, once back, reboots on it if the Node is
// cordoned again by then, by anyone, with the pods that landed meanwhile
// (explorer seed 176127 of the 94277 regression of
// cluster-karpenter-rollout-2: the daemon of kp-1 down from before its
// order until 1m26s, an admin's uncordon at 30s, a pod bound at 31s, the
// admin's cordon at 1m; the daemon rebooted the node with the pod on it).
// Should the daemon be acting on the order unreported, its report moves
// the record on and the withdrawal (written on the record read) meets a
// conflict; a reboot it asked for all the same is verified by the drain
// that follows (the node then runs its target).
func UncordonedBeforeReboot(bn *v1alpha1.BootcNode, n *corev1.Node) bool {
	o, d := bn.Spec.Order(), &bn.Status.Daemon
	if o == nil || o.Rollback || !UncordonedUnderMarker(n, bn.Spec.Pool) || RebootStarted(bn) {
		return false
	}
	return d.ObservedGeneration < bn.Generation || d.Phase == v1alpha1.DaemonStaged
}

// UncordonedUnderMarker reports whether Node n carries pool's slot marker
// but is not cordoned: someone (kubectl uncordon) removed bootroll's
// cordon in the slot.
func UncordonedUnderMarker(n *corev1.Node, pool string) bool {
	return n != nil && !n.Spec.Unschedulable && n.Annotations[v1alpha1.AnnotationSlot] == pool
}

// KeepsProtection reports whether bootroll keeps a node's Karpenter
// protection up whatever others do to it: the record is cordoned and in a
// slot phase (the node reconciler's KeepProtected, and the wait of a
// release for its boot order to settle).
func KeepsProtection(bn *v1alpha1.BootcNode) bool {
	return bn.Status.Rollout.Cordoned && HoldsSlot(RecordPhase(bn))
}

// LeftPool reports whether a Node is no member of pool: the pool is gone,
// being deleted, or no longer selects it.
func LeftPool(pool *v1alpha1.BootcNodePool, n *corev1.Node) bool {
	return pool == nil || pool.DeletionTimestamp != nil || !Selects(pool, n)
}

// ProtectionPending reports whether the record still holds post-update
// protection, or annotations bootroll added, to end.
func ProtectionPending(ro *v1alpha1.RolloutStatus) bool {
	return ro.ProtectUntil != nil || len(ro.AddedAnnotations) > 0 || len(ro.AddedNodeClaimAnnotations) > 0
}

// RebootStarted reports whether the daemon recorded a reboot at or after
// this slot's boot order (status.daemon.lastReboot).
func RebootStarted(bn *v1alpha1.BootcNode) bool {
	at, r := OrderedAt(bn), bn.Status.Daemon.LastReboot
	return at != nil && r != nil && askedSince(r, at.Time)
}

// askedSince reports whether the reboot r was asked for at or after t (an
// order's or a grant's time, on the controller's clock, kept to the second
// as the API keeps times), the one rule that matches reboots with orders
// and slots. It reads the time of the order the reboot carried out
// (orderAt), or, from a daemon that does not write it, the daemon's own
// time (at), on the node's clock. A node whose clock ran 20 s behind
// recorded its reboot as from before the order it carried out, and when
// its record was deleted in that reboot the record made again ordered the
// same reboot a second time (explorer seed 178010 of the 118173
// regression).
func askedSince(r *v1alpha1.RebootRecord, t time.Time) bool {
	asked := r.At.Time
	if r.OrderAt != nil {
		asked = r.OrderAt.Time
	}
	return !asked.Before(t.Truncate(time.Second))
}

// OrderAgainAt is the time a boot order given again to a record in its
// slot takes: the time of its order for the desired image, given in this
// slot's drain and withdrawn after the daemon recorded the reboot into
// that image for it (the node left its pool mid-reboot and came back
// while the release waited for the reboot to settle). That reboot is the
// slot's: a daemon never reboots into one image twice (its lastReboot),
// so the order given again only restates it, and healthTimeout counts
// from the request that started it. Given a new time, every rule that
// finds the slot's reboot from the order (RebootStarted, RebootOver, the
// finalizer's verdicts on a record deleted afterwards) missed it
// (explorer seed 176717 of cluster-repair-during-slow-reboot: kp-0,
// relabelled out of its pool at 1m in its reboot from 0:38 and back at
// 3m18s, was ordered again at 3m18s; its record was deleted at 12m10s and
// the node came back at 12m39s fallen back to v1, a failed boot the
// finalizer did not record, and the record made again rebooted it into
// v2 a second time). nil when there is none: the order is given now.
func OrderAgainAt(bn *v1alpha1.BootcNode) *metav1.Time {
	o, r := bn.Spec.LastOrder(), bn.Status.Daemon.LastReboot
	if o == nil || !o.Withdrawn || o.Rollback || r == nil || r.Rollback || bn.Status.Rollout.DrainStartedAt == nil ||
		!OrderedInSlot(bn, o) || !RebootStarted(bn) || imageref.Digest(r.Image) != imageref.Digest(o.Image) {
		return nil
	}
	return &o.At
}

// RebootOver reports whether the reboot the daemon started for this slot's
// boot order is over: the daemon recorded a reboot into the ordered image
// at or after the order (status.daemon.lastReboot), and the Node is Ready
// on a boot ID other than the one that reboot left (status.nodeInfo.bootID).
// A daemon does not reboot twice for one order (its lastReboot names the
// boot it left), so from then on no stale read of the order can reboot the
// node; the withdrawal needs no acknowledgement, which a daemon never gives
// for a record being deleted.
func RebootOver(bn *v1alpha1.BootcNode, n *corev1.Node) bool {
	at, r := OrderedAt(bn), bn.Status.Daemon.LastReboot
	if at == nil || r == nil || r.BootID == "" || n == nil {
		return false
	}
	if want := imageref.Digest(bn.Spec.DesiredImage); want == "" || imageref.Digest(r.Image) != want || !askedSince(r, at.Time) {
		return false // a reboot from before this order, or for another image
	}
	boot := n.Status.NodeInfo.BootID
	return boot != "" && boot != r.BootID && NodeReady(n)
}

// OnOrderedImage reports whether a boot order (not a rollback's) can no
// longer reboot the node, whenever it was given: the daemon reports, from
// the Node's current boot, that the host runs the ordered image, and its
// last recorded reboot, into that image, left another boot. A daemon
// reboots for an order only off the ordered image and never twice into
// one image, and it does not acknowledge a withdrawal then
// (nodedaemon.ackNotNeeded): a node relabelled out of its pool mid-reboot
// and back got the order again after the reboot it was already in, and
// its release waited for an acknowledgement until healthTimeout (explorer
// seed 109301 of cluster-repair-during-slow-reboot).
func OnOrderedImage(bn *v1alpha1.BootcNode, n *corev1.Node) bool {
	o, d := bn.Spec.BootOrder, &bn.Status.Daemon
	if o == nil || o.Rollback || n == nil || d.LastReboot == nil {
		return false
	}
	want, boot := imageref.Digest(bn.Spec.DesiredImage), n.Status.NodeInfo.BootID
	return want != "" && DigestOfHost(bn.Status.Booted) == want && imageref.Digest(d.LastReboot.Image) == want &&
		boot != "" && d.BootID == boot && d.LastReboot.BootID != boot && NodeReady(n)
}

// BootOrderSettled reports whether a withdrawn boot order can no longer
// be acted on, and otherwise how soon to look again. The order is the one
// for the desired image or, when the pool's image changed since, a voided
// one whose reboot the daemon asked for and has not reported from
// (RebootClock), or has reported from on a Node not Ready: the node is in
// that reboot, down or going down, until it is back (Ready). Settled at once then, the release of a record deleted
// mid-reboot gave the node back down, its protection gone, as soon as
// the pool went back to the image it left (explorer seed 176610 of
// cluster-repair-during-slow-reboot: kp-0, its record deleted at 2m in a
// reboot from 22 s to 12m22s, was given back at 10m36s, when the pool went
// back to v1, and Karpenter repaired it at 10m40s).
func BootOrderSettled(v NodeView) (ok bool, wait time.Duration) {
	return BootOrderSettledWith(v, TestOnly{})
}

// BootOrderSettledWith is BootOrderSettled with the controller's TestOnly
// settings: SettleOnOrderedAt brings back the behaviour before explorer
// seed 176610 (the order is the one for the desired image only, OrderedAt).
func BootOrderSettledWith(v NodeView, t TestOnly) (ok bool, wait time.Duration) {
	bn := v.Record
	at := RebootClock(bn)
	if t.SettleOnOrderedAt {
		at = OrderedAt(bn)
	}
	downAfterVoided := false
	if at == nil && !t.SettleOnOrderedAt && v.Node != nil && !NodeReady(v.Node) {
		// A voided order whose reboot the daemon recorded and has
		// reported from, on a Node not Ready: the node came back from
		// that reboot down, as a node whose order stands may (below:
		// RebootStarted on a Node not Ready), and is not back before it
		// is Ready or healthTimeout has passed. Settled as soon as the
		// daemon reported, the release of a record deleted mid-reboot
		// gave kp-0 back down on v2, its pool gone to v1 meanwhile, and
		// Karpenter repaired it 10m later (explorer seed 176588 of
		// cluster-repair-during-slow-reboot: ordered at 27 s, back
		// NotReady at 12m35s, given back at 12m40s, repaired at 22m40s).
		if o := bn.Spec.BootOrder; o != nil && rebootRecordedFor(bn, o) {
			at, downAfterVoided = &o.At, true
		}
	}
	if at == nil || v.Node == nil {
		return true, 0
	}
	if RebootOver(bn, v.Node) || OnOrderedImage(bn, v.Node) || RebootVerified(bn) {
		return true, 0
	}
	// A daemon that has seen the withdrawal but already asked the host to
	// reboot for this order cannot take that back: it reports Rebooting
	// until its node goes down, and only the end of the reboot settles it.
	// One that has seen the withdrawal and reports anything else did not
	// ask in its process (a daemon that crashed after recording the reboot
	// but before asking the host restarts on the same boot and says so).
	// A Node that went down after a reboot was recorded is rebooting,
	// whatever the last report said before it went.
	d := &bn.Status.Daemon
	if d.ObservedGeneration >= bn.Generation && d.Phase != v1alpha1.DaemonRebooting && !((RebootStarted(bn) || downAfterVoided) && !NodeReady(v.Node)) {
		return true, 0
	}
	timeout := DefaultHealthTimeout
	if v.Pool != nil {
		timeout = DurationOr(v.Pool.Spec.HealthTimeout, DefaultHealthTimeout)
	}
	left := at.Add(timeout).Sub(v.Now)
	if left <= 0 {
		return true, 0
	}
	return false, min(left, DrainPoll)
}

// RebootVerified reports whether the reboot for the record's last boot
// order (not a rollback's) was judged a success: the record is Updated,
// the host runs the ordered image, the daemon recorded the reboot into it
// for that order and has reported since from another boot. The
// verification writes Updated only once the Node was Ready on that boot,
// so the reboot is over whatever the Node does later, and a daemon never
// reboots again for an order the host has carried out. RebootOver asks
// for the Node Ready now: a node that crashed after its update and left
// its pool while down kept bootroll's do-not-disrupt and do-not-repair,
// for a reboot long over, until its daemon came back (explorer seed
// 177097 of the 158367 regression: updated at 13 s, relabelled out of the
// pool and crashed at 1m, given back only at 8m55s, when it booted again;
// Karpenter could not touch it meanwhile).
func RebootVerified(bn *v1alpha1.BootcNode) bool {
	o, d := bn.Spec.LastOrder(), &bn.Status.Daemon
	if o == nil || o.Rollback || bn.Status.Phase != v1alpha1.PhaseUpdated || !rebootRecordedFor(bn, o) {
		return false // rebootRecordedFor: lastReboot is set, for this order's image
	}
	want := imageref.Digest(o.Image)
	return want != "" && DigestOfHost(bn.Status.Booted) == want &&
		d.LastReboot.BootID != "" && d.BootID != "" && d.BootID != d.LastReboot.BootID
}

// rebootRecordedFor reports whether the daemon's last recorded reboot
// (status.daemon.lastReboot) is the one boot order o asked for: at or
// after the order, into its image (a rollback's for a rollback order).
func rebootRecordedFor(bn *v1alpha1.BootcNode, o *v1alpha1.BootOrder) bool {
	r := bn.Status.Daemon.LastReboot
	return r != nil && r.Rollback == o.Rollback && imageref.Digest(r.Image) == imageref.Digest(o.Image) &&
		askedSince(r, o.At.Time)
}

// PoolSelector is the selector of a pool's member Nodes, nil for a pool
// that selects none (no nodeSelector, or being deleted).
func PoolSelector(p *v1alpha1.BootcNodePool) labels.Selector {
	if len(p.Spec.NodeSelector) == 0 || p.DeletionTimestamp != nil {
		return nil
	}
	return labels.SelectorFromSet(p.Spec.NodeSelector)
}

// Selects reports whether pool p selects Node n: what PoolSelector(p)
// matches, without building the selector (it is asked on every Node event
// and node step: a selector per call was 2% of a rollout's allocations).
func Selects(p *v1alpha1.BootcNodePool, n *corev1.Node) bool {
	if len(p.Spec.NodeSelector) == 0 || p.DeletionTimestamp != nil {
		return false
	}
	for k, v := range p.Spec.NodeSelector {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// VerifyOutcome is what a node in its slot, asked to reboot or being
// verified, comes to (Verify).
type VerifyOutcome int

const (
	// VerifyWait: nothing decided yet; look again after Wait.
	VerifyWait VerifyOutcome = iota
	// VerifyOrderBoot: drained, no boot order yet: give it (the last
	// moment a halt or a departure from the pool can stop the node is
	// checked by the caller on a fresh read of the pool first).
	VerifyOrderBoot
	// VerifyDone: the node runs the image and is Ready: Updated, or
	// RolledBack for a rollback order.
	VerifyDone
	// VerifyBootFailed: the daemon rebooted into the image and the host
	// came back on another one.
	VerifyBootFailed
	// VerifyHealthTimeout: not healthy healthTimeout after the reboot
	// request.
	VerifyHealthTimeout
)

// VerifyDecision is Verify's answer.
type VerifyDecision struct {
	Outcome VerifyOutcome
	// MarkVerifying: the node booted the image and waits for its Node to be
	// Ready: record the Verifying phase (before the outcome).
	MarkVerifying bool
	// Took is the time since the reboot request.
	Took time.Duration
	// Unmet names the health check a node on its target does not pass
	// yet (NodeHealth), "" when it has not arrived.
	Unmet string
	Wait  time.Duration
}

// Verify is the rule for a node in Rebooting or Verifying, ordered to boot
// spec.desiredImage (spec.bootOrder, with its time).
func Verify(v NodeView, to TestOnly) VerifyDecision {
	bn, ro := v.Record, &v.Record.Status.Rollout
	want := imageref.Digest(bn.Spec.DesiredImage)
	booted := DigestOfHost(bn.Status.Booted)
	if !BootOrdered(bn) && booted != want {
		if bn.Spec.DesiredImage != ro.TargetImage {
			// The record has not caught up with the desired image yet
			// (retarget runs first): no boot order for either.
			return VerifyDecision{Wait: time.Second}
		}
		return VerifyDecision{Outcome: VerifyOrderBoot}
	}
	var took time.Duration
	if at := RebootClock(bn); at != nil {
		took = v.Now.Sub(at.Time)
	}
	d := &bn.Status.Daemon
	arrived := Arrived(bn)
	var health Health
	if arrived {
		health = NodeHealth(healthChecks(v.Pool, to), v.Node, v.Pods, rebootedAt(bn), v.Now)
		if health.Healthy && !NodeOnBoot(v.Node, d.BootID) {
			health = Health{Unmet: "the Node does not show the boot the daemon reports yet (its Ready condition is the last boot's)"}
		}
	}
	switch {
	case arrived && health.Healthy:
		return VerifyDecision{Outcome: VerifyDone, Took: took}
	case d.LastReboot != nil && d.LastReboot.Image == bn.Spec.DesiredImage && d.Phase == v1alpha1.DaemonError && !arrived:
		return VerifyDecision{Outcome: VerifyBootFailed, Took: took}
	}
	out := VerifyDecision{Took: took, MarkVerifying: arrived && bn.Status.Phase != v1alpha1.PhaseVerifying, Unmet: health.Unmet}
	timeout := DefaultHealthTimeout
	if v.Pool != nil {
		timeout = DurationOr(v.Pool.Spec.HealthTimeout, DefaultHealthTimeout)
	}
	if took >= timeout && !to.NoHealthTimeout {
		out.Outcome = VerifyHealthTimeout
		return out
	}
	out.Wait = min(VerifyPoll, timeout-took)
	if health.Wait > 0 {
		out.Wait = min(out.Wait, health.Wait)
	}
	return out
}

// NodeOnBoot reports whether the Node, as read, is from boot (the boot ID
// the daemon reports): its status.nodeInfo.bootID, which the kubelet of
// each boot writes, is that boot's, or either is unknown. A Node read
// from before the reboot (a cache behind, or a reboot shorter than the
// node lifecycle's grace period) still shows the last boot's Ready: a
// node that came back NotReady (its network never up) was called Updated
// on it, and its slot handed on while it was down (explorer seed 109392
// of cluster-daemon-crash-while-staging, the controller's watch 20 s
// late).
func NodeOnBoot(n *corev1.Node, boot string) bool {
	return n == nil || boot == "" || n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.BootID == boot
}

// healthChecks are the pool's health checks, nil for none (or a pool
// gone, or the planted SkipHealthChecks).
func healthChecks(p *v1alpha1.BootcNodePool, to TestOnly) *v1alpha1.HealthChecks {
	if p == nil || to.SkipHealthChecks || !HasHealthChecks(&p.Spec.HealthChecks) {
		return nil
	}
	return &p.Spec.HealthChecks
}

// rebootedAt is the earliest time this slot's reboot can have ended: the
// daemon's recorded reboot for it, or else the boot order. Ready from
// before it says nothing of the new boot.
func rebootedAt(bn *v1alpha1.BootcNode) time.Time {
	var at time.Time
	if o := OrderedAt(bn); o != nil {
		at = o.Time
	}
	if r := bn.Status.Daemon.LastReboot; r != nil && r.At.Time.After(at) {
		at = r.At.Time
	}
	return at
}

// Arrived reports whether the node runs where its order takes it: onto
// the desired image, or, for a rollback order (which names the image it
// leaves), off it.
func Arrived(bn *v1alpha1.BootcNode) bool {
	want, booted := imageref.Digest(bn.Spec.DesiredImage), DigestOfHost(bn.Status.Booted)
	if RebootUnreported(bn) {
		// A reboot asked for in this boot is still to come (the pool went
		// back to the image the host runs after the daemon asked it to
		// reboot into another): the host is about to go down (explorer
		// seed 94094 of rollout-100-nodes).
		return false
	}
	if bn.Spec.RollingBack() {
		return booted != "" && booted != want
	}
	return booted == want
}

// VerifyNeedsPods reports whether Verify reads v.Pods: the pool's health
// checks name DaemonSets and the node may have arrived on its target.
func VerifyNeedsPods(v NodeView, to TestOnly) bool {
	return NeedsPods(healthChecks(v.Pool, to)) && Arrived(v.Record)
}

// DrainOutcome is where a drain pass leaves a node in its slot (Drain).
type DrainOutcome int

const (
	// DrainWait: pods are left; look again after Wait.
	DrainWait DrainOutcome = iota
	// DrainDone: no pod is left: record Rebooting and order the boot.
	DrainDone
	// DrainTimedOut: drainTimeout passed with pods left: the slot is
	// given back (Pending) and the node retries after Backoff.
	DrainTimedOut
)

// DrainDecision is Drain's answer.
type DrainDecision struct {
	Outcome DrainOutcome
	// Took is the time since the drain started.
	Took time.Duration
	// Failures is the count of drain timeouts with this one, and Backoff
	// the wait before the next attempt (DrainTimedOut).
	Failures int32
	Backoff  time.Duration
	// MarkBlocked: PodDisruptionBudgets refused evictions and the record
	// does not say so yet: record DrainBlocked (DrainWait).
	MarkBlocked bool
	Wait        time.Duration
}

// Drain is the rule after one drain pass of a node in its slot: remaining
// pods are left on it, and blocked says whether a PodDisruptionBudget
// refused an eviction. The drain started at status.rollout.drainStartedAt.
func Drain(v NodeView, remaining int, blocked bool) DrainDecision {
	ro := &v.Record.Status.Rollout
	var took time.Duration
	if ro.DrainStartedAt != nil {
		took = v.Now.Sub(ro.DrainStartedAt.Time)
	}
	if remaining == 0 {
		return DrainDecision{Outcome: DrainDone, Took: took}
	}
	timeout := DefaultDrainTimeout
	if v.Pool != nil {
		timeout = DurationOr(v.Pool.Spec.DrainTimeout, DefaultDrainTimeout)
	}
	if took >= timeout {
		return DrainDecision{Outcome: DrainTimedOut, Took: took, Failures: ro.Failures + 1, Backoff: Backoff(ro.Failures + 1)}
	}
	return DrainDecision{Took: took, MarkBlocked: blocked && ro.Reason != "DrainBlocked", Wait: min(DrainPoll, timeout-took)}
}
