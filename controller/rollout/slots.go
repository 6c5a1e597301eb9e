package rollout

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// SlotInUse reports whether a slot table entry is still needed by its node.
// This is how slots are given back: the node reconciler records that the
// node left its slot (phase and cordon), and the pool drops the entry.
// Nodes enter a slot only from Staged, and the cache never goes back in
// time, so a node seen Updated, Failed or Pending and not cordoned has left
// its slot (this also drops an entry granted from a stale read of a node
// that had just finished).
//
// A node is Staged in its slot between the pool's grant and the node
// reconciler's take-up (Draining); a Staged node whose drain timed out after the grant (retryAfter
// set later than the grant) has given its slot back.
func SlotInUse(bn *v1alpha1.BootcNode, s v1alpha1.Slot) bool {
	return bn.Status.Rollout.Cordoned || HoldsSlot(bn.Status.Phase) || GrantPending(bn, s)
}

// ReleasedDown reports whether slot s stays held although no record is in
// it: the record that held it was deleted (a new one may stand in its
// place) and the member Node is not Ready. A record being deleted is
// released at the latest healthTimeout after its reboot request, while the
// node may still be down in that reboot; the node is unavailable because of
// bootroll until it is back, whatever happened to its record (DESIGN §4),
// and its new record cannot tell (its daemon is down), so the slot table
// keeps counting it until the Node is Ready again or its new record has a
// verdict (Failed, RolledBack).
func ReleasedDown(row *Row, s v1alpha1.Slot) bool {
	if row.Node == nil || row.Ready {
		return false
	}
	bn := row.Record
	if bn == nil {
		return true
	}
	if Done(row.Phase) {
		return false
	}
	return bn.DeletionTimestamp != nil || anotherRecord(bn, s)
}

// anotherRecord reports whether bn is not the record slot s was given to
// (the node's record was deleted and made again): by the slot's UID, or,
// for a slot given before slots named their record, by bn's creation after
// the grant (the API server's clock against the controller's, so only a
// fallback).
func anotherRecord(bn *v1alpha1.BootcNode, s v1alpha1.Slot) bool {
	if s.UID != "" {
		return s.UID != string(bn.UID)
	}
	return bn.CreationTimestamp.After(s.Since.Time)
}

// GrantSettle bounds how long a grant that the pool's cache does not show
// on the record keeps a record of a node that left the pool: longer than a
// watch event takes, short enough that a grant whose record write never
// landed does not hold its slot for good.
const GrantSettle = 2 * time.Minute

// SlotGranted reports whether slots hold a grant for bn's node, made less
// than GrantSettle before now, that bn has not been told of yet
// (GrantPending).
func SlotGranted(slots []v1alpha1.Slot, bn *v1alpha1.BootcNode, now time.Time) bool {
	for _, s := range slots {
		if s.Node == bn.Name && GrantPending(bn, s) && now.Sub(s.Since.Time) < GrantSettle {
			return true
		}
	}
	return false
}

// GrantedSlot returns the slot pool granted bn's node and the node has not
// taken up yet (GrantPending), if any.
func GrantedSlot(pool *v1alpha1.BootcNodePool, bn *v1alpha1.BootcNode) (v1alpha1.Slot, bool) {
	if pool == nil || pool.DeletionTimestamp != nil {
		return v1alpha1.Slot{}, false
	}
	for _, s := range pool.Status.Slots {
		if s.Node == bn.Name && GrantPending(bn, s) {
			return s, true
		}
	}
	return v1alpha1.Slot{}, false
}

// Listed reports whether pool's slot table holds slot s (same node, image
// and grant time).
func Listed(pool *v1alpha1.BootcNodePool, s v1alpha1.Slot) bool {
	for _, e := range pool.Status.Slots {
		if e.Node == s.Node && e.Image == s.Image && e.Since.Equal(&s.Since) {
			return true
		}
	}
	return false
}

// GrantPending reports whether a node was given slot s and has not yet
// taken it up: it is the record the grant was made to, it is still
// waiting, staged for the slot's image, it has
// not taken up that grant (status.rollout.slotGrantedAt), and its phase
// has not moved since the grant (a record that entered the slot and
// left it again, its Node gone or relabelled, moved; so did one whose
// drain timed out). It reads only what the grant itself was decided on
// (the record's target, phase and the daemon's staged image), never the
// spec: the pool may have written the spec in the same pass, and its
// cache may not show that write yet. Times are kept to the second: a
// phase that moved in the second of the grant reads as not moved, which
// keeps the slot (for at most GrantSettle) rather than hand it out twice.
func GrantPending(bn *v1alpha1.BootcNode, s v1alpha1.Slot) bool {
	if !Waiting(bn.Status.Phase) {
		return false
	}
	if s.UID != "" && anotherRecord(bn, s) {
		// Granted to the node's record before this one: that record was
		// deleted (and released what it held), and a grant read from a
		// pool status that still lists it is not this record's to take up
		// (explorer seed 70283 of node-churn: the new record took the old
		// grant from a stale cache and rebooted after the pool had dropped
		// it). By UID, not by times: the slot's time is the controller's
		// clock, a record's creation the API server's.
		return false
	}
	ro := &bn.Status.Rollout
	if ro.SlotGrantedAt != nil && ro.SlotGrantedAt.Equal(&s.Since) && !ro.Cordoned {
		// Taken up, and left since. Still cordoned and waiting, the
		// take-up was recorded and stopped part way (the controller
		// stopped between its writes): it is taken up again, which puts
		// back what the Node misses. Read as left, it held the slot and
		// the node's protection until GrantSettle and then started a new
		// post-update protection (explorer seed 116144 of
		// cluster-crd-install-mid-rollout, no-leaked-annotation).
		return false
	}
	return ro.TargetImage == s.Image && DigestOfHost(bn.Status.Staged) == imageref.Digest(s.Image) &&
		(ro.PhaseSince == nil || !ro.PhaseSince.After(s.Since.Time)) &&
		(ro.RetryAfter == nil || !ro.RetryAfter.After(s.Since.Time))
}

// NodeBlocker says why the Node may not get a reboot slot now, as far as
// the Node itself tells ("" when it may): it is being deleted, or it is
// not Ready. A node down on the image it failed (downOnFailed) may take a
// slot while NotReady (Ready=False, not Unknown: the host is up), since
// booting the new target is how it recovers. Whether Karpenter is
// disrupting it needs its NodeClaim: karpenter.SlotBlocker asks that
// after this.
func NodeBlocker(n *corev1.Node, downOnFailed bool) string {
	if n.DeletionTimestamp != nil {
		return "the Node is being deleted"
	}
	if !NodeReady(n) && !(downOnFailed && NodeNotReady(n)) {
		return "the Node is not Ready"
	}
	return ""
}
