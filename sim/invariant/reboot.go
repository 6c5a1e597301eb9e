package invariant

import (
	"fmt"
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file judges reboots at the instant they are requested, from ground
// truth: no-unprotected-reboot and no-double-reboot.

// rebootKey is a node's reboots into one digest in one generation of its
// pool's image.
type rebootKey struct {
	node, digest, pool string
	// incarnation tells a pool created again under its name from the one
	// deleted (an operator's deliberate do-over); epoch counts spec.image
	// changes within one.
	incarnation, epoch int
}

// Reboot takes a reboot the cluster model reports at the instant it is
// requested (cluster.Hooks.Reboot): node boots from now and will boot to,
// both digest references. It marks the node as rebooting (unavailable
// because of bootroll until it is back), notes a reboot off its pool's
// target or off the image a rollback order leaves (a rollback), and one
// into its pool's target, and judges the reboot:
//
// no-unprotected-reboot: a reboot into another digest must find the Node
// cordoned by bootroll (spec.unschedulable and its slot marker), drained
// (no workload pod bound to it: none but DaemonSet, mirror and finished
// pods, terminating ones included) and holding a slot (the status.slots
// of the pool its marker names lists it); or on the os-not-ready fast
// path: the Node has the bootroll.dev/os-not-ready taint and no workload
// pod.
//
// no-double-reboot: a node is rebooted into one digest at most once while
// its pool's spec.image stays the same (an operator who sets the image
// back, A -> B -> A, starts a new generation in which A may boot again),
// unless it booted another image since through a reboot bootroll asked
// for into that image under another pool or spec.image (askedInto).
func (c *Checker) Reboot(node, from, to string) {
	now := c.now()
	at := now.Sub(c.start)
	n := c.world.nodes[node]
	if n != nil && n.Exists {
		n.rebooting, n.rebootDown, n.rebootBootID = true, false, n.nodeBootID
		n.asked = askedReboot{on: true, at: now, since: askedSince(n, from, to, now), pool: n.BootcPool, bootID: n.nodeBootID}
		n.failedDown = false
		n.rolledOff = rollOff{}
		if p := c.world.Pool(n.BootcPool); p != nil && digestOf(to) != digestOf(from) &&
			((p.TargetImage != "" && digestOf(from) == digestOf(p.TargetImage)) || (n.rollbackOrder != "" && digestOf(from) == n.rollbackOrder)) {
			// Off the target, to another image, while spec.image stays
			// the same: a rollback (converges, downNodesBlock). So is a
			// reboot off the image a rollback order leaves when the
			// pool's target had moved on from it (spec.image changed
			// while the node was in its slot for it): its daemon never
			// reboots for that image again (explorer seed 176172 of the
			// 176122 regression of pool-edited-mid-rollout).
			n.rolledOff = rollOff{pool: p.Name, incarnation: p.incarnation, epoch: p.ImageEpoch, from: digestOf(from)}
		}
		n.rebootInto = rebootInto{}
		if p := c.world.Pool(n.BootcPool); p != nil && p.TargetImage != "" && digestOf(to) != digestOf(from) && digestOf(to) == digestOf(p.TargetImage) {
			// Into the target: a node back from it Ready on another
			// image came back on the old one, and failed (converges,
			// downNodesBlock; explorer seed 176210).
			n.rebootInto = rebootInto{pool: p.Name, incarnation: p.incarnation, epoch: p.ImageEpoch, into: digestOf(to)}
		}
		c.world.updateUnavailable(n)
		if n.Marked {
			n.churn.rebooted = true // an update in the slot (no-churn)
		}
	}
	c.checkDoubleReboot(n, node, from, to, at)
	if digestOf(from) == digestOf(to) || !c.enabled[scenario.InvNoUnprotectedReboot] {
		return
	}
	if why := unprotected(c.world, n); why != "" {
		c.record(Violation{Invariant: string(scenario.InvNoUnprotectedReboot), At: at, Objects: []string{"Node/" + node},
			Message: fmt.Sprintf("node %s reboots from %s into %s while %s", node, from, to, why)})
	}
}

// askedSince is when the healthTimeout of a reboot of n that bootroll's
// daemon asks the host for now, from into to, starts: the time of the
// boot order the reboot carries out, its record's spec.bootOrder.at as the
// API server has it (standing or withdrawn: a daemon may act on an order
// before it sees the withdrawal), or else the request. The API counts
// healthTimeout from bootroll's reboot request, the order ("HealthTimeout
// bounds the time from reboot request", a withdrawn order "is kept so
// that a reboot it may have started still counts from At", and
// docs/fields.md: "healthTimeout counts from it ... the order is the
// record of the reboot request"), and the
// controller gives the node back, Failed, healthTimeout after it (Verify,
// BootOrderSettled, the finalizer's verdicts): the daemon's delay in
// acting on the order counts against the timeout (explorer seed 176809 of
// cluster-repair-during-slow-reboot: kp-0 ordered at 20 s, its daemon's
// stale cache asked the host at 45 s, and the finalizer of its deleted
// record gave it back, down and Failed, at 30m20s under a healthTimeout of
// 30m). The order counts only when it names this reboot (into its image;
// a rollback order, off it), came no later than the request, and was
// given in the slot the node holds: not before bootroll's slot marker last
// went on, at the API's precision of a second (an order's time carried
// over from an earlier slot starts nothing).
func askedSince(n *Node, from, to string, now time.Time) time.Time {
	o := n.order
	if o.at.IsZero() || o.at.After(now) || !n.Marked || n.markedAt.IsZero() || o.at.Before(n.markedAt.Truncate(time.Second)) {
		return now
	}
	if (o.rollback && o.digest != digestOf(from)) || (!o.rollback && o.digest != digestOf(to)) {
		return now
	}
	return o.at
}

// unprotected says why a reboot of n into another image is not protected,
// "" when it is.
func unprotected(w *World, n *Node) string {
	if n == nil || !n.Exists {
		return "its Node does not exist"
	}
	if n.OSNotReady && n.WorkloadPods == 0 {
		return "" // the os-not-ready fast path
	}
	var why []string
	if !n.Unschedulable {
		why = append(why, "not cordoned")
	}
	switch p := w.Pool(n.MarkPool); {
	case !n.Marked:
		why = append(why, "without bootroll's slot marker "+v1alpha1.AnnotationSlot)
		if n.slotIn == nil {
			why = append(why, "holding no slot (no pool's status.slots lists it)")
		}
	case p == nil:
		// A pool being deleted gives its slots back only once their
		// nodes are safe (its finalizer), so a node its last slot table
		// lists is still in a slot; cleanup bounds how long.
		if dp := w.pools[n.MarkPool]; dp == nil || dp.live {
			why = append(why, fmt.Sprintf("its slot marker names %q, which is no pool", n.MarkPool))
		} else if _, ok := dp.slots[n.Name]; !ok {
			why = append(why, fmt.Sprintf("its slot marker names %q, a deleted pool whose last status.slots does not list it", n.MarkPool))
		}
	default:
		if _, ok := p.slots[n.Name]; !ok {
			why = append(why, fmt.Sprintf("holding no slot (pool %s's status.slots does not list it)", p.Name))
		}
	}
	if n.WorkloadPods > 0 {
		why = append(why, fmt.Sprintf("%d workload pod(s) still bound to it (not drained)", n.WorkloadPods))
	}
	if len(why) == 0 {
		return ""
	}
	if n.OSNotReady {
		why = append(why, "(it has the "+v1alpha1.TaintOSNotReady+" taint, but with workload pods)")
	}
	return strings.Join(why, ", ")
}

func (c *Checker) checkDoubleReboot(n *Node, node, from, to string, at time.Duration) {
	if n != nil {
		// The node's last reboot was one bootroll asked for into the
		// image it runs now, and it came back on it: its reboots into
		// other images before that, in other generations than the one
		// that asked, were left deliberately (a node moved into
		// another pool and rolled to its image, then back), so the
		// next one into such an image is not a second one. A reboot
		// that fell back, crashed back or was rolled back to the
		// image it runs was not asked for into it and excuses nothing
		// (explorer seed 100 of a probe of node-moves-between-pools).
		if a := n.askedInto; a.digest != "" && a.digest == digestOf(from) {
			for k := range c.reboots[node] {
				if k.digest != a.digest && (k.pool != a.pool || k.incarnation != a.incarnation || k.epoch != a.epoch) {
					delete(c.reboots[node], k)
				}
			}
		}
		n.askedInto = rebootKey{}
		if n.Exists && n.HasBootcNode && n.DesiredBooted && n.rollbackOrder == "" &&
			digestOf(to) != digestOf(from) && digestOf(to) == digestOf(n.DesiredImage) {
			a := rebootKey{node: node, digest: digestOf(to), pool: n.BootcPool}
			if p := c.world.Pool(n.BootcPool); p != nil {
				a.incarnation, a.epoch = p.incarnation, p.ImageEpoch
			}
			n.askedInto = a
		}
	}
	k := rebootKey{node: node, digest: digestOf(to)}
	if n != nil && n.BootcPool != "" {
		k.pool = n.BootcPool
		if p := c.world.Pool(n.BootcPool); p != nil {
			k.incarnation, k.epoch = p.incarnation, p.ImageEpoch
		}
	}
	counts := c.reboots[node]
	if counts == nil {
		counts = map[rebootKey]int{}
		c.reboots[node] = counts
	}
	counts[k]++
	if counts[k] == 2 && c.enabled[scenario.InvNoDoubleReboot] {
		gen := "outside any pool"
		if k.pool != "" {
			gen = fmt.Sprintf("while pool %s's spec.image stayed the same", k.pool)
		}
		c.record(Violation{Invariant: string(scenario.InvNoDoubleReboot), At: at, Objects: []string{"Node/" + node},
			Message: fmt.Sprintf("node %s is rebooted into %s a second time %s", node, to, gen)})
	}
}
