package invariant

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file holds the invariants about the fake Karpenter:
// no-reap-while-updating and no-churn, both from Karpenter's decisions as
// they happen.

// ExceptionForceful names the documented exception of
// no-reap-while-updating: an expiry, which Karpenter carries out without
// looking at do-not-disrupt (reference/karpenter.md, Expiry), so bootroll
// cannot prevent it. Exceptions are recorded, not violations.
const ExceptionForceful = "forceful"

// karpenterState is the checker's view of Karpenter.
type karpenterState struct {
	stats func() fakekarpenter.Stats
	// expired are the nodes whose NodeClaim expired while they held a
	// slot: the drain that follows is part of the exception.
	expired map[string]bool
	// decided are the nodes Karpenter itself decided to disrupt
	// (consolidation, drift, repair; not expiry): the taint and drain of
	// its termination then follow its decision. A node deleted by someone
	// else (an admin's kubectl delete node) is terminated without one.
	decided    map[string]bool
	exceptions []Violation
	reported   map[string]bool // node + "\x00" + what, reported once
	// consolidateAfter is each NodePool's spec.disruption.consolidateAfter
	// (nil: Never), from its objects.
	consolidateAfter map[string]*time.Duration
}

// churnRecord is what no-churn needs of bootroll's last episode on a
// node, from ground truth: when bootroll's slot marker went on and came
// off, until when the pool's post-update protection runs, and when
// bootroll last removed a workload pod from it.
type churnRecord struct {
	markedAt, releasedAt time.Time
	// protectUntil is releasedAt plus the pool's
	// karpenter.postUpdateProtection when the slot ended after an update
	// (rebooted: bootroll's daemon was asked to reboot the node while
	// marked), releasedAt otherwise: the protection is promised "after
	// the update".
	protectUntil time.Time
	rebooted     bool
	drainedAt    time.Time
	// refilled is set when a workload pod is bound to the node after the
	// marker's removal, or runs on it at the removal: the post-update
	// protection ends then (the API:
	// "or until the node runs non-DaemonSet pods again"), and Karpenter's
	// consolidateAfter counts from that pod event, not bootroll's drain.
	refilled bool
	// handedBack is set when a pool's deletion, the BootcNode's deletion
	// or the node leaving its pool makes bootroll give the node back
	// (cleanup): the invariant cleanup then requires bootroll to remove
	// its cordon and protection within CleanupBound, so what Karpenter
	// does to the node once they are gone is not bootroll's churn.
	handedBack bool
}

// followRefill notes a workload pod bound to a node bootroll released.
func (c *Checker) followRefill(ev apiserver.Event) {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok || ev.Type == apiserver.Deleted || p.Spec.NodeName == "" {
		return
	}
	n := c.world.Node(p.Spec.NodeName)
	if n != nil && !n.Marked && !n.churn.releasedAt.IsZero() && n.WorkloadPods > 0 {
		n.churn.refilled = true
	}
}

// followChurn updates the node's churnRecord after a Node event: old is
// the Node before it (nil for a creation).
func (c *Checker) followChurn(n *Node, old *corev1.Node, now time.Time) {
	if old == nil {
		// A creation, or a change of the node's slot listing.
		if n.Marked && n.churn.markedAt.IsZero() {
			n.churn.markedAt = now
		}
		return
	}
	_, was := old.Annotations[v1alpha1.AnnotationSlot]
	switch {
	case n.Marked && !was:
		n.churn.markedAt = now
		n.churn.refilled, n.churn.rebooted, n.churn.handedBack = false, false, false
	case !n.Marked && was:
		var pup time.Duration
		if p := c.world.pools[old.Annotations[v1alpha1.AnnotationSlot]]; p != nil && n.churn.rebooted {
			pup = p.protectionAfter(n)
		}
		n.churn.releasedAt = now
		n.churn.protectUntil = now.Add(pup)
		if n.WorkloadPods > 0 {
			// It runs workloads already (bound while an admin had it
			// uncordoned in its slot): the protection ends at once, as
			// the API says (explorer seed 92198 of
			// nodeclass-drift-mid-rollout).
			n.churn.refilled = true
		}
	}
}

// SetKarpenter gives the checker Karpenter's counters.
func (c *Checker) SetKarpenter(stats func() fakekarpenter.Stats) {
	c.kstate().stats = stats
}

func (c *Checker) kstate() *karpenterState {
	if c.karp == nil {
		c.karp = &karpenterState{expired: map[string]bool{}, decided: map[string]bool{}, reported: map[string]bool{}, consolidateAfter: map[string]*time.Duration{}}
	}
	return c.karp
}

// observeNodePool keeps a NodePool's consolidateAfter.
func (c *Checker) observeNodePool(t apiserver.EventType, u *unstructured.Unstructured) {
	ks := c.kstate()
	if t == apiserver.Deleted {
		delete(ks.consolidateAfter, u.GetName())
		return
	}
	after, found, _ := unstructured.NestedString(u.Object, "spec", "disruption", "consolidateAfter")
	if !found {
		after = "0s" // Karpenter v1's default
	}
	if after == "Never" {
		ks.consolidateAfter[u.GetName()] = nil
		return
	}
	d, err := time.ParseDuration(after)
	if err != nil {
		delete(ks.consolidateAfter, u.GetName())
		return
	}
	ks.consolidateAfter[u.GetName()] = &d
}

// Exceptions returns the documented exceptions seen (forceful expiries
// of nodes in a slot), in the order they happened.
func (c *Checker) Exceptions() []Violation {
	if c.karp == nil {
		return nil
	}
	return c.karp.exceptions
}

// inSlot reports whether the node holds a bootroll slot: the slot marker,
// or a slot phase of its BootcNode. A BootcNode being deleted holds the
// node only with the marker or in a reboot bootroll asked for: once
// bootroll gave the node back after its reboot (the marker and the
// protection gone), the record's phase is its last word until the
// finalizer goes, and Karpenter's decisions about the node are its own
// (explorer seed 112337 of cluster-node-churn: the controller crashed
// between the release's Node write and the record's, and Karpenter
// consolidated the empty node meanwhile).
//
// And, whatever its record and markers say, a node in a reboot bootroll's
// daemon asked for holds its slot until it is back (inAskedReboot): DESIGN.md
// section 4 has Karpenter never reap a node in the middle of a bootroll
// update, and section 3 frees the slot only after the node came back
// healthy or healthTimeout passed. A release that gives a node back down
// in that reboot before then (explorer seed 176610 of
// cluster-repair-during-slow-reboot: the record deleted mid-reboot, the
// pool's image changed, the finalizer settled the voided order and wrote
// the record Pending, and Karpenter repaired kp-0 still down) leaves it
// to Karpenter mid-update.
func (c *Checker) inSlot(node string) bool {
	n := c.world.Node(node)
	if n == nil || !n.Exists {
		return false
	}
	return markedOrRecorded(n) || c.inAskedReboot(n)
}

// markedOrRecorded reports whether n holds its slot by bootroll's marker
// or its BootcNode's slot phase (a record being deleted only while the
// node is in its reboot), without the hold of an asked reboot.
func markedOrRecorded(n *Node) bool {
	return n.Marked || (holdsSlot(n.Phase) && (!n.BootcDeleting || n.rebooting))
}

// inAskedReboot reports whether n is in a reboot bootroll's daemon asked
// for (askedReboot) that bootroll may not give it back in yet: less than
// the healthTimeout of the pool its record named at the request (its spec
// as the API server has it, last seen for a pool deleted since; the API's
// default 15m without one) since the boot order the reboot carries out
// (askedSince; the request without one), and before the cap of a
// cleanup someone else started meanwhile (a pool or record deleted, the
// node relabelled out: cleanup makes bootroll give the node back by then).
// A reboot bootroll did not ask for (a crash, a power cycle) is not one.
func (c *Checker) inAskedReboot(n *Node) bool {
	a := &n.asked
	if !a.on {
		return false
	}
	now := c.now()
	return now.Before(c.askedRebootUntil(n)) && (n.cleanupFrom.IsZero() || now.Before(n.cleanupFrom.Add(c.cleanupRebootCap(n.cleanupPool))))
}

// askedNote says, for a node that holds its slot only by the reboot
// bootroll asked for, which reboot, for a violation's message.
func (c *Checker) askedNote(node string) string {
	n := c.world.Node(node)
	if n == nil || markedOrRecorded(n) || !c.inAskedReboot(n) {
		return ""
	}
	record := "its BootcNode gone"
	if n.HasBootcNode {
		record = fmt.Sprintf("its BootcNode %s", n.Phase)
	}
	since := "the request"
	if a := &n.asked; a.since.Before(a.at) {
		since = fmt.Sprintf("its boot order at %s", a.since.Sub(c.start))
	}
	return fmt.Sprintf(" (no slot marker, %s, but still in the reboot bootroll's daemon asked for at %s: bootroll may not give it back before it is back or its pool's healthTimeout, %s, has passed since %s)",
		record, n.asked.at.Sub(c.start), c.askedTimeout(n), since)
}

// askedRebootUntil is when bootroll may give back a node still down in
// the reboot it asked for: its boot order (askedSince) plus its pool's
// healthTimeout.
func (c *Checker) askedRebootUntil(n *Node) time.Time {
	return n.asked.since.Add(c.askedTimeout(n))
}

// askedTimeout is the healthTimeout of the pool n's record named at the
// request of the reboot bootroll asked for, the API's default without one.
func (c *Checker) askedTimeout(n *Node) time.Duration {
	if p := c.world.pools[n.asked.pool]; p != nil {
		return p.HealthTimeout
	}
	return defaultHealthTimeout
}

// KarpenterTrace takes one of the fake Karpenter's trace records (its
// Options.Trace) at virtual time now. For no-reap-while-updating: a
// disruption or a repair of a node that holds a slot is a violation,
// unless it is an expiry (recorded as a forceful exception); the
// karpenter.sh/disrupted taint or an eviction on such a node is one only
// when Karpenter decided to disrupt that node, not when it carries out
// someone else's deletion of it. For no-churn: see judgeChurn.
func (c *Checker) KarpenterTrace(kind, object string, details map[string]any, now time.Time) {
	ks := c.kstate()
	at := now.Sub(c.start)
	node := strings.TrimPrefix(object, "node/")
	switch kind {
	case "karpenter/disrupt":
		if !strings.HasPrefix(object, "node/") {
			return
		}
		reason, _ := details["reason"].(string)
		forceful, _ := details["forceful"].(bool)
		expiry := reason == fakekarpenter.ReasonExpired && forceful
		if c.othersLiftedVeto(node, reason, now) {
			// Someone else removed the annotation that vetoes this
			// disruption, and bootroll's controller has not run long
			// enough since to put it back: neither the disruption nor
			// what Karpenter does to carry it out is bootroll's doing.
			return
		}
		if !expiry {
			ks.decided[node] = true
			c.judgeChurn(node, reason, details, now)
		}
		if !c.inSlot(node) {
			return
		}
		if expiry {
			ks.expired[node] = true
			ks.exceptions = append(ks.exceptions, Violation{Invariant: ExceptionForceful, At: at, Objects: []string{"Node/" + node},
				Message: fmt.Sprintf("NodeClaim of node %s expired while the node held a bootroll slot: Karpenter deletes it forcefully, without checking do-not-disrupt (documented, not preventable)", node)})
			return
		}
		c.reapViolation(node, "disrupt", at, fmt.Sprintf("Karpenter disrupted node %s (method %v, reason %s, decision %v) while it held a bootroll slot%s", node, details["method"], reason, details["decision"], c.askedNote(node)))
	case "karpenter/repair":
		if c.othersLiftedVeto(node, fakekarpenter.ReasonUnhealthy, now) {
			return // as for its disrupt event above
		}
		ks.decided[node] = true
		if c.inSlot(node) {
			c.reapViolation(node, "repair", at, fmt.Sprintf("Karpenter repairs node %s (profile %v, unhealthy for %v) while it holds a bootroll slot%s", node, details["profile"], details["unhealthyFor"], c.askedNote(node)))
		}
	case "karpenter/tainted":
		if c.inSlot(node) && ks.decided[node] && !ks.expired[node] {
			c.reapViolation(node, "taint", at, fmt.Sprintf("Karpenter put the %s taint on node %s, which it decided to disrupt, while it held a bootroll slot", fakekarpenter.TaintDisrupted, node))
		}
	case "karpenter/evicted", "karpenter/pod-deleted":
		node, _ := details["node"].(string)
		if node != "" && c.inSlot(node) && ks.decided[node] && !ks.expired[node] {
			c.reapViolation(node, "evict", at, fmt.Sprintf("Karpenter evicted or deleted %s from node %s, which it decided to disrupt, while the node held a bootroll slot", object, node))
		}
	case "karpenter/command-abandoned":
		// Karpenter gave its decision up (its replacement went): a later
		// deletion of the node by someone else, which Karpenter's
		// termination carries out, is not its decision (explorer seed
		// 111320 of cluster-nodepool-drift-mid-rollout).
		delete(ks.decided, node)
	case "karpenter/terminated":
		delete(ks.decided, node)
		delete(ks.expired, node)
	case "karpenter/launched":
		// A new NodeClaim for the node (Karpenter reinstalled adopts it,
		// or a node of the same name is launched): a decision about the
		// node's earlier claim is not this one's. A drift decision made
		// before Karpenter was removed at 4m was still held against
		// kp-0 after the reinstall, and the termination of an admin's
		// deletion at 5m was blamed on it (explorer seed 177015 of the
		// boot-image-skew regression).
		if n, _ := details["node"].(string); n != "" {
			delete(ks.decided, n)
			delete(ks.expired, n)
		}
	}
}

func (c *Checker) reapViolation(node, what string, at time.Duration, msg string) {
	if !c.enabled[scenario.InvNoReapWhileUpdating] {
		return
	}
	key := node + "\x00" + what
	if c.kstate().reported[key] {
		return
	}
	c.kstate().reported[key] = true
	c.record(Violation{Invariant: string(scenario.InvNoReapWhileUpdating), At: at, Objects: []string{"Node/" + node}, Message: msg})
}

// judgeChurn decides whether Karpenter's decision to disrupt node (for
// reason, not an expiry) at now is churn bootroll caused (no-churn):
//
//   - protection: Karpenter disrupts the node while bootroll's protection
//     should be on it, i.e. bootroll has taken the node for its update:
//     it carries the slot marker (bootroll's cordon) or its BootcNode is
//     Rebooting or Verifying. A node whose BootcNode was just given a slot
//     (Draining) but that bootroll has not cordoned yet is untouched:
//     Karpenter's decision about it is its own (no-reap-while-updating
//     still judges that window). Or, for
//     a graceful disruption (Empty, Underutilized, Drifted), before the
//     post-update protection of its last slot has run out (the marker's
//     removal plus the pool's karpenter.postUpdateProtection). A repair
//     (Unhealthy) counts only in a slot: a node that breaks later is not
//     bootroll's doing.
//   - emptied: Karpenter consolidates (Empty, Underutilized) a node that
//     bootroll drained (removed a workload pod from, by eviction or
//     deletion, while its slot marker was on) sooner than its NodePool's
//     consolidateAfter (at most RefillBound) after bootroll uncordoned it
//     (removed the marker).
//     Karpenter consolidates a node only after consolidateAfter without a
//     pod event, and the last was bootroll's drain: a disruption before
//     the node has been schedulable for consolidateAfter counted time the
//     node spent cordoned by bootroll, and a node released empty without
//     that time would not have been disrupted yet. A workload pod bound
//     to the node after the uncordon is a later pod event, and ends this.
//
// A node given back because someone else deleted its pool or BootcNode or
// relabelled it out of the pool (cleanup obliges bootroll to remove its
// cordon and protection), a node that was schedulable and unprotected for
// consolidateAfter after its update, a node others emptied or deleted, drift from a NodeClass
// change outside the protection, and expiry are not bootroll's churn; nor
// is a graceful disruption soon after someone else removed do-not-disrupt
// (othersLiftedVeto, checked by KarpenterTrace before this).
func (c *Checker) judgeChurn(node, reason string, details map[string]any, now time.Time) {
	if !c.enabled[scenario.InvNoChurn] {
		return
	}
	n := c.world.Node(node)
	if n == nil || !n.Exists {
		return
	}
	at := now.Sub(c.start)
	consolidation := reason == fakekarpenter.ReasonEmpty || reason == fakekarpenter.ReasonUnderutilized
	what := fmt.Sprintf("Karpenter disrupted node %s (method %v, reason %s, decision %v)", node, details["method"], reason, details["decision"])
	rec := n.churn
	switch {
	case n.Marked || n.Phase == v1alpha1.PhaseRebooting || n.Phase == v1alpha1.PhaseVerifying:
		c.churnViolation(node, at, what+" while bootroll had it cordoned for an update (slot marker or a reboot phase)")
	case rec.handedBack && !n.Marked:
		// Given back because someone else deleted its pool or record or
		// relabelled it: the end of the protection is theirs.
	case rec.refilled:
		// Pods came back after the update: the protection ended with them,
		// and the emptiness Karpenter counts is not bootroll's drain.
	case graceful(reason) && !rec.releasedAt.IsZero() && now.Before(rec.protectUntil):
		c.churnViolation(node, at, fmt.Sprintf("%s %s after its slot ended, inside its pool's post-update protection of %s", what, now.Sub(rec.releasedAt), rec.protectUntil.Sub(rec.releasedAt)))
	case consolidation && !rec.markedAt.IsZero() && !rec.drainedAt.Before(rec.markedAt) && !rec.releasedAt.Before(rec.markedAt) && !rec.releasedAt.IsZero():
		ca, known := c.kstate().consolidateAfter[n.Labels[fakekarpenter.LabelNodePool]]
		if !known || ca == nil {
			return
		}
		if window := min(*ca, RefillBound); now.Before(rec.releasedAt.Add(window)) {
			c.churnViolation(node, at, fmt.Sprintf("%s %s after bootroll uncordoned it, drained by bootroll and schedulable for less than %s (its NodePool's consolidateAfter %s, at most %s): the emptiness Karpenter counted is bootroll's drain (post-update protection %s)",
				what, now.Sub(rec.releasedAt), window, *ca, RefillBound, rec.protectUntil.Sub(rec.releasedAt)))
		}
	}
}

// ProtectionReactBound is how long bootroll's controller must have run,
// after someone else removed karpenter.sh/do-not-disrupt from a node it
// protects, before a graceful disruption of the node is its churn:
// Karpenter validates a disruption command for 15 s before it carries it
// out (../shared/reference/karpenter.md), and a protection put back
// meanwhile blocks it; a controller that is down cannot put it back.
const ProtectionReactBound = 15 * time.Second

// othersLiftedVeto reports whether someone other than bootroll removed
// from node the annotation that vetoes a disruption for reason, less than
// bootroll's reaction bound for it of the controller's running time before
// now, so that the disruption is not bootroll's: do-not-repair for a
// repair (RepairReactBound; explorer seed 122293 of
// cluster-repair-during-slow-reboot), and for consolidation and drift the
// do-not-disrupt bootroll put on for the node's last update
// (ProtectionReactBound; explorer seeds 118251 of
// cluster-crd-install-mid-rollout, the controller down 48 s after the
// slot, and 134017 of cluster-post-update-emptiness-reaping, down 1m49s
// in it). Other reasons (expiry) have no veto. The repair's bound runs
// from the controller's last request an API fault failed, if later: the
// bound is the reaction of a controller whose requests go through, and
// one that failed must be made again (explorer seed 176043 of
// cluster-repair-during-slow-reboot: ten attempts in a row to put the
// annotation back failed on injected errors, the eleventh landed 17 ms
// after the repair, 4 s after the removal).
func (c *Checker) othersLiftedVeto(node, reason string, now time.Time) bool {
	n := c.world.Node(node)
	if n == nil {
		return false
	}
	var at time.Time
	var bound time.Duration
	var lift vetoLift
	switch {
	case reason == fakekarpenter.ReasonUnhealthy:
		at, bound, lift = n.OthersRemovedDoNotRepair, RepairReactBound, n.lifted[vetoDoNotRepair]
	case graceful(reason):
		if marked := n.churn.markedAt; marked.IsZero() || n.OthersRemovedDoNotDisrupt.Before(marked) {
			return false // not the protection bootroll put on for this update
		}
		at, bound, lift = n.OthersRemovedDoNotDisrupt, ProtectionReactBound, n.lifted[vetoDoNotDisrupt]
	default:
		return false
	}
	if at.IsZero() || now.Before(at) {
		return false
	}
	if c.world.cacheModelled {
		// The bound runs from when the controller's cache held the
		// removal (World.ControllerCacheNode): before, it could not know.
		if lift.known.IsZero() {
			return true
		}
		at = lift.known
	}
	if reason == fakekarpenter.ReasonUnhealthy && c.failedRequest.After(at) && !c.failedRequest.After(now) {
		at = c.failedRequest
	}
	return c.runningBetween(at, now) < bound
}

// graceful reports whether a disruption reason is one that
// karpenter.sh/do-not-disrupt on the Node blocks: consolidation and drift.
func graceful(reason string) bool {
	return reason == fakekarpenter.ReasonEmpty || reason == fakekarpenter.ReasonUnderutilized || reason == fakekarpenter.ReasonDrifted
}

// RepairReactBound is how long bootroll's controller must have run, after
// someone else removed karpenter.sh/do-not-repair from a node, before
// Karpenter's repair of the node is bootroll's doing: Karpenter carries a
// repair out at the poll that finds the node unhealthy past its
// toleration, without the 15 s validation of graceful disruption
// (../shared/reference/karpenter.md), so a removal landing just before a
// poll cannot be answered. bootroll's controller puts the annotation back
// within tens of milliseconds of the watch event in the twin and on the
// local cluster; 2 s is its reaction time with room for a loaded host, and
// stays under Karpenter's 10 s poll, so a controller that never puts the
// protection back is caught at the next poll (explorer seed 122293 of
// cluster-repair-during-slow-reboot: the operator's removal fell 3 ms
// before the poll). It is a reaction on a working API: it runs again from
// each request of the controller that an injected API fault failed
// (ControllerRequestFailed; explorer seed 176043).
const RepairReactBound = 2 * time.Second

// RefillBound caps the window of no-churn's second rule: a node bootroll
// drained that has been schedulable again this long (or its NodePool's
// consolidateAfter, if shorter) had its chance to get pods back, and
// its emptiness is no longer bootroll's drain: with a long
// consolidateAfter, a node left idle for most of it is spare capacity.
const RefillBound = 5 * time.Minute

func (c *Checker) churnViolation(node string, at time.Duration, msg string) {
	key := node + "\x00churn"
	if c.kstate().reported[key] {
		return
	}
	c.kstate().reported[key] = true
	c.record(Violation{Invariant: string(scenario.InvNoChurn), At: at, Objects: []string{"Node/" + node}, Message: msg})
}

// finishKarpenter is the end of a run for the Karpenter invariants:
// no-churn is judged as Karpenter decides (judgeChurn), so nothing is
// left to check.
func (c *Checker) finishKarpenter(time.Duration) {}
