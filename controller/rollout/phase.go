package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// HoldsSlot reports whether a node in phase p is inside its reboot slot.
func HoldsSlot(p v1alpha1.NodePhase) bool {
	return p == v1alpha1.PhaseDraining || p == v1alpha1.PhaseRebooting || p == v1alpha1.PhaseVerifying
}

// Waiting reports whether a stored phase is that of a node waiting for its
// turn: Pending, nothing stored yet, or the Staging and Staged an older
// bootroll stored.
func Waiting(p v1alpha1.NodePhase) bool {
	switch p {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseStaging, v1alpha1.PhaseStaged:
		return true
	}
	return false
}

// Done reports whether a node in phase p has a verdict on its last
// attempt that keeps it out of the rollout of that image: Failed or
// RolledBack.
func Done(p v1alpha1.NodePhase) bool {
	return p == v1alpha1.PhaseFailed || p == v1alpha1.PhaseRolledBack
}

// StagingPhase is the phase the controller stores for a node outside a
// slot: Pending (waiting for its turn: staging or staged, which are
// derived from the daemon's report, see ObservedPhase, and never stored),
// Updated when it runs its desired image, or Degraded while its staging
// fails.
func StagingPhase(bn *v1alpha1.BootcNode) (v1alpha1.NodePhase, string, string) {
	target := imageref.Digest(bn.Spec.DesiredImage)
	d := bn.Status.Daemon
	switch {
	case bn.Spec.DesiredImage == "":
		return v1alpha1.PhasePending, "", ""
	case DigestOfHost(bn.Status.Booted) == target && !RebootUnreported(bn):
		// (status.booted of a daemon that has not reported since the
		// reboot it asked for names the boot it left, not the one it
		// came up on, if any: explorer seed 70309 of
		// admin-uncordon-mid-drain counted a node down in a failed image
		// as Updated on the image it had left.)
		return v1alpha1.PhaseUpdated, "", ""
	case DigestOfHost(bn.Status.Staged) != target && d.Phase == v1alpha1.DaemonError && d.StageAttempts > 0:
		return v1alpha1.PhaseDegraded, "StageFailed", fmt.Sprintf("staging failed %d time(s), retrying with backoff: %s", d.StageAttempts, d.LastError)
	default:
		return v1alpha1.PhasePending, "", ""
	}
}

// RebootUnreported reports whether the daemon asked for a reboot from its
// current boot and has not reported since: the node is going down or
// coming up (or stays down), and status.booted names the boot it left.
func RebootUnreported(bn *v1alpha1.BootcNode) bool {
	d := &bn.Status.Daemon
	return d.LastReboot != nil && d.LastReboot.BootID == d.BootID
}

// RebootUnreportedInSlot reports whether the daemon asked for a reboot in
// the record's current slot (at or after its grant,
// status.rollout.slotGrantedAt, when one is recorded) and has not reported
// since (RebootUnreported): the node is going down, down or coming up in
// the slot's reboot, whether the order that asked for it stands, was
// withdrawn or was voided by a new desired image.
func RebootUnreportedInSlot(bn *v1alpha1.BootcNode) bool {
	if !RebootUnreported(bn) {
		return false
	}
	g := bn.Status.Rollout.SlotGrantedAt
	return g == nil || askedSince(bn.Status.Daemon.LastReboot, g.Time)
}

// RecordPhase is a record's phase as the rules read it: the stored phase,
// except that a node in its slot's drain (stored Draining) whose boot order
// stands is Rebooting. The order (spec.bootOrder, with its time) is the
// record of the reboot request: one write where a status write of
// Rebooting and the order were two (issue 12).
func RecordPhase(bn *v1alpha1.BootcNode) v1alpha1.NodePhase {
	if bn.Status.Phase == v1alpha1.PhaseDraining && BootOrdered(bn) {
		return v1alpha1.PhaseRebooting
	}
	return bn.Status.Phase
}

// BootOrdered reports whether the record's boot order stands and was
// given in its current slot: at or after the drain started
// (status.rollout.drainStartedAt), or on the os-not-ready path, which has
// no drain. A spent order from an earlier slot for the same image does not
// count: the node is drained again and ordered afresh.
func BootOrdered(bn *v1alpha1.BootcNode) bool {
	o := bn.Spec.Order()
	return o != nil && OrderedInSlot(bn, o)
}

// OrderedInSlot reports whether boot order o of the record was given in
// its current slot: at or after the drain started, or the slot's grant
// (status.rollout.slotGrantedAt) when that is earlier, or with no drain.
// A slot may hold more than one drain: a retarget while the node is in
// its reboot drains it again (withdrawing the order), and the order given
// again after it keeps the time of the reboot under way (OrderAgainAt).
// Read from the last drain's start, that order was from before the slot:
// it did not stand (BootOrdered), and was given again at once with the
// time now, which no rule finds the slot's reboot from (explorer seed
// 176602 of cluster-repair-during-slow-reboot: kp-0, ordered into v2 at
// 57 s, drained again for v1 at 3m19s and for v2 at 5m11s, was ordered
// at 5m11s; the finalizer of its record, deleted at 12m10s, released it
// fallen back to v1 with no failure on the pool).
func OrderedInSlot(bn *v1alpha1.BootcNode, o *v1alpha1.BootOrder) bool {
	ro := &bn.Status.Rollout
	from := ro.DrainStartedAt
	if from == nil {
		return true
	}
	if g := ro.SlotGrantedAt; g != nil && g.Time.Before(from.Time) {
		from = g
	}
	return !o.At.Time.Before(from.Time.Truncate(time.Second))
}

// OrderSpent reports whether the record's last boot order was carried
// out: the node runs the ordered image (or, for a rollback order, has left
// it). The daemon boots nothing more for
// it, and a new desired image voids it.
func OrderSpent(bn *v1alpha1.BootcNode) bool {
	o := bn.Spec.LastOrder()
	if o == nil {
		return false
	}
	booted := DigestOfHost(bn.Status.Booted)
	if o.Rollback {
		// A rollback order names the image it leaves.
		return booted != "" && booted != imageref.Digest(o.Image)
	}
	return booted == imageref.Digest(o.Image)
}

// OrderedAt is when the last boot order for the record's desired image
// was given (withdrawn or not), nil when there is none.
func OrderedAt(bn *v1alpha1.BootcNode) *metav1.Time {
	if o := bn.Spec.LastOrder(); o != nil {
		return &o.At
	}
	return nil
}

// RebootClock is when this slot's reboot began for healthTimeout and the
// reboot-time metric: the boot order for the desired image (OrderedAt),
// or, when there is none but a reboot the daemon asked for an order since
// voided is still to come (the pool went back to the image the node runs
// mid-reboot), that order; nil otherwise. Without the second, a reboot
// that never ended held the node cordoned in its slot for good (explorer
// seed 129186 of cluster-static-faults-3: a 51-minute reboot).
func RebootClock(bn *v1alpha1.BootcNode) *metav1.Time {
	if at := OrderedAt(bn); at != nil {
		return at
	}
	if o := bn.Spec.BootOrder; o != nil && RebootUnreported(bn) {
		return &o.At
	}
	return nil
}

// ObservedPhase is a record's phase as people and the pool read it: the
// stored phase, except that a node waiting for its turn (stored Pending)
// is Staging while its daemon stages the desired image and Staged once the
// image is staged. Those two are a pure function of the daemon's report,
// so they are derived here and never written back (DESIGN.md section 2:
// what can be derived is derived); records written by an older bootroll
// that stored them read the same way.
func ObservedPhase(bn *v1alpha1.BootcNode) v1alpha1.NodePhase {
	if !Waiting(bn.Status.Phase) {
		return RecordPhase(bn)
	}
	target := imageref.Digest(bn.Spec.DesiredImage)
	switch {
	case target == "" || DigestOfHost(bn.Status.Booted) == target:
		return v1alpha1.PhasePending
	case DigestOfHost(bn.Status.Staged) == target:
		return v1alpha1.PhaseStaged
	case bn.Status.Daemon.Phase == v1alpha1.DaemonStaging:
		return v1alpha1.PhaseStaging
	}
	return v1alpha1.PhasePending
}

// DigestOfHost is the digest of a deployment the daemon reported, or "".
func DigestOfHost(h *v1alpha1.HostImage) string {
	if h == nil {
		return ""
	}
	return h.Digest
}

// NodeReady reports whether the kubelet reports the Node Ready.
func NodeReady(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionTrue }

// NodeNotReady reports whether the kubelet reports the Node NotReady
// (Ready=False): the host is up, unlike Unknown.
func NodeNotReady(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionFalse }

// readyStatus is the status of the Node's Ready condition, "" without one.
func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	if c := readyCondition(n); c != nil {
		return c.Status
	}
	return ""
}

// readyCondition is the Node's Ready condition, nil without one.
func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// HasTaint reports whether the Node carries a taint with key.
func HasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// DurationOr is d, or def when d is unset or not positive.
func DurationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
