package invariant

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file follows what bootroll does to each Node, from ground truth
// (the Node, its NodeClaim and the pools' slot tables), for cleanup,
// no-stranded-node and the deadline of post-update protection
// (no-leaked-annotation).
//
// An episode starts when bootroll marks a Node: its slot marker
// (bootroll.dev/slot) appears, or a taint in bootroll's domain other than
// the admin's startup taint bootroll.dev/os-not-ready. The Node as it was
// just before (its cordon, its bootroll-owned annotations and bootroll
// taints) and its NodeClaim's bootroll-owned annotations then are the
// state bootroll found it in. The episode ends when the Node is back in
// that state: no slot marker, no owned annotation or bootroll taint that
// it did not have, and the cordon it had (checked when the marker goes:
// bootroll restores the cordon in the patch that removes the marker).

// The bounds of the time-based invariants, in virtual time.
const (
	// CleanupBound is how long bootroll has, after a pool is deleted, a
	// BootcNode is deleted or a node leaves its pool, to return the Node
	// and its NodeClaim to the state it found them in: a few reconciles
	// and their retries.
	CleanupBound = 2 * time.Minute
	// CleanupRebootCap is how long a reboot in progress (requested and
	// the Node not Ready again yet) may hold a cleanup back: bootroll keeps
	// a rebooting node cordoned, so that a daemon that read a boot order
	// before it was withdrawn does not reboot an uncordoned node, and
	// gives it back CleanupBound after it is Ready again; a node that does
	// not come back within this cap (a boot that never gets Ready) is
	// judged then. It is the API's default healthTimeout; a pool with a
	// longer healthTimeout gets that (cleanupRebootCap).
	CleanupRebootCap = 15 * time.Minute
	// cleanupPoll is how often a cleanup held back by a reboot looks
	// again.
	cleanupPoll = 10 * time.Second
	// StrandSlack is added to a pool's drainTimeout + 2 × healthTimeout
	// (a drain, a reboot into the target and, with failurePolicy
	// Rollback, a reboot back) to bound how long a node that holds a slot
	// may stay cordoned or tainted by bootroll; the time counts from the
	// cordon or the pool's last spec.image change, whichever is later (a
	// new image restarts a slot's work).
	StrandSlack = 5 * time.Minute
	// UnslottedStrandBound bounds how long a node that no pool's
	// status.slots lists may stay cordoned or tainted by bootroll: a slot
	// is given before the cordon and taken back after the uncordon, so
	// this only covers the reconciles in between.
	UnslottedStrandBound = 2 * time.Minute
	// ProtectionGrace is how long after a post-update protection deadline
	// (slot end + the pool's karpenter.postUpdateProtection) bootroll may
	// take to remove the Karpenter annotations it added: its polls of
	// post-update protection are at most 15s apart.
	ProtectionGrace = time.Minute
	// KarpenterReaction is how long after a protection ends a run keeps
	// observing, on top of the largest consolidateAfter of the
	// scenario's NodePools, so that what Karpenter does to the
	// unprotected node is seen: its polling period (10s) and its
	// validation delay (15s), with room.
	KarpenterReaction = time.Minute
)

// touch is the Checker's record of what bootroll did to a node.
type touch struct {
	// active is true during an episode; id names it.
	active bool
	id     uint64
	// The state bootroll found the node in.
	baseUnschedulable bool
	baseOwned         []string
	baseTaints        []string
	baseClaim         []string
	// cordonLeft is true while the marker is gone but the cordon is not
	// the one bootroll found.
	cordonLeft bool
	// released counts the marker's removals in the episode;
	// protectDeadline is when the Karpenter annotations must be gone
	// after the last one.
	released        int
	protectDeadline time.Time
	// strandSince is when the node became cordoned or tainted by bootroll
	// (zero while it is not); strandID names that stretch.
	strandSince    time.Time
	strandID       uint64
	strandReported bool
	// slotted and unslottedSince follow the node's slot listing.
	slotted        bool
	unslottedSince time.Time
}

// deadlineKind is what a deadline checks.
type deadlineKind int

const (
	dlCleanup deadlineKind = iota
	dlProtection
	dlStrand
)

// deadline is a check due at a virtual time.
type deadline struct {
	at   time.Time
	seq  uint64
	kind deadlineKind
	node string
	// id is the episode (cleanup, protection) or stretch (strand) it is
	// about; released the marker removal (protection).
	id       uint64
	released int
	// pool and why say what started a cleanup; left is true when the node
	// left the pool (a cleanup that no longer applies if it is back).
	pool, why string
	left      bool
	// since is when the cleanup was triggered; waited is true once the
	// deadline was moved past a reboot in progress (CleanupRebootCap; for
	// a protection, the reboot bootroll asked for: inAskedReboot).
	since          time.Time
	waited, graced bool
	// refused is true once a cleanup was moved past the API server's
	// failures of the controller's requests for the node (cleanupRefused).
	refused bool
	// downBase is the controller downtime when the check was set;
	// downUsed the downtime it was already moved by (postponed).
	downBase, downUsed time.Duration
}

type deadlineHeap []deadline

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h deadlineHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)   { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

func (c *Checker) push(d deadline) {
	c.seq++
	if d.seq == 0 {
		// A new check: the controller downtime so far is not its own.
		d.downBase = c.downtime(c.now())
	}
	d.seq = c.seq
	heap.Push(&c.deadlines, d)
}

// ControllerRunning tells the checker that the bootroll controller process
// started (true) or stopped (false). A bound on what only the controller
// does (give a node back, end post-update protection) is counted in time
// the controller runs: a controller that is down cannot act, and a check
// that falls due then moves by the downtime since it was set.
func (c *Checker) ControllerRunning(up bool) {
	now := c.now()
	switch {
	case !up && c.downSince.IsZero():
		c.downSince = now
	case up && !c.downSince.IsZero():
		c.downTotal += now.Sub(c.downSince)
		c.downs = append(c.downs, period{c.downSince, now})
		c.downSince = time.Time{}
	}
}

// period is a span of time [from, to).
type period struct{ from, to time.Time }

// ControllerRequestFailed tells the checker that an injected API fault
// failed a request of the bootroll controller at at (an error, or a
// timeout, applied or not): what the controller was doing must be done
// again, and its reaction to a lifted do-not-repair starts over
// (othersLiftedVeto). node names the node when the request was for its
// Node or its BootcNode (they share its name), else it is empty: a
// cleanup the API refused starts over from it (cleanupRefused).
func (c *Checker) ControllerRequestFailed(at time.Time, node string) {
	if at.After(c.failedRequest) {
		c.failedRequest = at
	}
	if node == "" {
		return
	}
	if c.failedOn == nil {
		c.failedOn = map[string]time.Time{}
	}
	if at.After(c.failedOn[node]) {
		c.failedOn[node] = at
	}
}

// cleanupRefused reports, for a cleanup of n begun at since and judged at
// now, when it may be judged instead because the API server refused the
// controller's requests for n's own objects: CleanupBound after the last
// such failure since the cleanup began, at most rebootCap after since. A
// controller that tries to give a node back and is refused (a third of
// its requests failing under three API faults at once, each try three to
// five round trips: explorer seeds 176971 of the half-held and
// slot-holders regressions) is not late; one that never tries fails no
// request for the node and is judged at the plain bound (the starvation
// of seed 176942, a holder first looked at 2m18s after its pool's
// deletion).
func (c *Checker) cleanupRefused(n *Node, since, now time.Time, rebootCap time.Duration) (time.Time, bool) {
	f, ok := c.failedOn[n.Name]
	if !ok || !f.After(since) {
		return time.Time{}, false
	}
	at := minTime(f.Add(CleanupBound), since.Add(rebootCap))
	return at, now.Before(at)
}

// runningBetween is how long the controller ran between from and to.
func (c *Checker) runningBetween(from, to time.Time) time.Duration {
	run := to.Sub(from)
	downs := c.downs
	if !c.downSince.IsZero() {
		downs = append(slices.Clip(downs), period{c.downSince, to})
	}
	for _, d := range downs {
		if lo, hi := maxTime(d.from, from), minTime(d.to, to); hi.After(lo) {
			run -= hi.Sub(lo)
		}
	}
	return max(run, 0)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// downtime is how long the controller has been down in all, up to now.
func (c *Checker) downtime(now time.Time) time.Duration {
	if c.downSince.IsZero() {
		return c.downTotal
	}
	return c.downTotal + now.Sub(c.downSince)
}

// postponed moves a controller-bound check d that fell due by the
// controller downtime since it was set (and not yet accounted for), and
// reports whether it did: the check is then pushed again.
func (c *Checker) postponed(d deadline, now time.Time) bool {
	extra := c.downtime(now) - d.downBase - d.downUsed
	if !c.downSince.IsZero() && extra <= 0 {
		extra = cleanupPoll // down now: look again once it may be up
	}
	if extra <= 0 {
		return false
	}
	d.downUsed += extra
	d.at = now.Add(extra)
	c.push(d)
	return true
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// bootrollTaints returns the keys of a Node's taints in bootroll's domain
// but the admin's startup taint.
func bootrollTaints(keys []string) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return k == v1alpha1.TaintOSNotReady })
}

func taintKeys(o *corev1.Node) []string {
	var out []string
	for _, t := range o.Spec.Taints {
		if strings.HasPrefix(t.Key, taintDomain) && t.Key != v1alpha1.TaintOSNotReady && !slices.Contains(out, t.Key) {
			out = append(out, t.Key)
		}
	}
	slices.Sort(out)
	return out
}

// nodeChanged follows a Node, its NodeClaim or its slot listing after a
// change; old is the Node before a Node event, nil otherwise.
func (c *Checker) nodeChanged(n *Node, old *corev1.Node) {
	if !n.Exists {
		return
	}
	c.followChurn(n, old, c.now())
	t := &n.touch
	now := c.now()
	back := !n.Marked && protectionBack(n, now)
	if !t.active && !n.Marked && len(n.Taints) == 0 && (n.slotIn != nil) == t.slotted && !back {
		return // untouched, and stays so
	}
	taints := n.Taints
	if slices.Contains(taints, v1alpha1.TaintOSNotReady) {
		taints = bootrollTaints(taints)
	}
	claim, _ := c.world.ClaimOwned(n)
	if slotted := n.slotIn != nil; slotted != t.slotted {
		t.slotted = slotted
		if !slotted {
			t.unslottedSince = now
		}
		if !t.strandSince.IsZero() {
			c.pushStrand(n)
		}
	}
	if !t.active && (n.Marked || len(taints) > 0) {
		c.touchSeq++
		slotted, unslotted := t.slotted, t.unslottedSince
		*t = touch{active: true, id: c.touchSeq, slotted: slotted, unslottedSince: unslotted, baseClaim: claim}
		if old != nil {
			t.baseUnschedulable = old.Spec.Unschedulable
			t.baseOwned = ownedOf(old.Annotations)
			t.baseTaints = taintKeys(old)
		} else {
			t.baseUnschedulable = n.InitialUnschedulable
			t.baseOwned = n.InitialOwned
		}
		t.baseOwned = slices.DeleteFunc(slices.Clone(t.baseOwned), func(a string) bool { return a == v1alpha1.AnnotationSlot })
		t.baseTaints = minus(t.baseTaints, taints) // taints bootroll adds now are not the base
	}
	if !t.active && back {
		// bootroll put Karpenter protection back on the node after its
		// slot, within the slot's post-update protection (keepProtected:
		// someone else lifted the protection that was there, so bootroll
		// did not add its own in the slot and the slot's episode ended
		// with the marker; explorer seed 158367 of
		// cluster-karpenter-rollout-2): an episode of its own, whose
		// annotations must go by the slot's deadline, as the slot's
		// would. The base is what the node had at creation and what
		// operators set since.
		c.touchSeq++
		slotted, unslotted := t.slotted, t.unslottedSince
		*t = touch{active: true, id: c.touchSeq, slotted: slotted, unslottedSince: unslotted, baseClaim: claim,
			baseUnschedulable: n.Unschedulable, released: 1, protectDeadline: n.slotProtectUntil}
		t.baseOwned = slices.DeleteFunc(slices.Clone(n.InitialOwned), func(a string) bool { return a == v1alpha1.AnnotationSlot })
		t.baseTaints = slices.Clone(taints)
		c.push(deadline{at: t.protectDeadline, kind: dlProtection, node: n.Name, id: t.id, released: t.released})
	}
	if !t.active {
		return
	}
	if old != nil && !n.Marked {
		if _, was := old.Annotations[v1alpha1.AnnotationSlot]; was {
			t.released++
			if n.Unschedulable != t.baseUnschedulable {
				t.cordonLeft = true
			}
			var pup time.Duration
			if p := c.world.pools[old.Annotations[v1alpha1.AnnotationSlot]]; p != nil {
				pup = p.protectionAfter(n)
			}
			t.protectDeadline = now.Add(pup + ProtectionGrace)
			n.slotProtectUntil = t.protectDeadline
			c.push(deadline{at: t.protectDeadline, kind: dlProtection, node: n.Name, id: t.id, released: t.released})
		}
	}
	if t.cordonLeft && n.Unschedulable == t.baseUnschedulable {
		t.cordonLeft = false
	}
	if !n.Marked && !t.cordonLeft && subset(n.Owned, t.baseOwned) && subset(taints, t.baseTaints) && subset(claim, t.baseClaim) {
		slotted, unslotted := t.slotted, t.unslottedSince
		*t = touch{slotted: slotted, unslottedSince: unslotted}
		return
	}
	stranded := n.Marked && n.Unschedulable || t.cordonLeft || !subset(taints, t.baseTaints)
	switch {
	case stranded && t.strandSince.IsZero():
		c.strandSeq++
		t.strandSince, t.strandID, t.strandReported = now, c.strandSeq, false
		c.pushStrand(n)
	case !stranded:
		t.strandSince = time.Time{}
	}
}

// pushStrand schedules the next no-stranded-node check of a node.
func (c *Checker) pushStrand(n *Node) {
	if d, ok := c.strandDeadline(n); ok {
		c.push(deadline{at: d, kind: dlStrand, node: n.Name, id: n.touch.strandID})
	}
}

// strandDeadline is when a node cordoned or tainted by bootroll becomes
// stranded: for a node a pool's status.slots lists, drainTimeout + 2 ×
// healthTimeout + StrandSlack of that pool after the cordon or the pool's
// last spec.image change; for any other, UnslottedStrandBound after the
// cordon or the node's leaving its slot.
func (c *Checker) strandDeadline(n *Node) (time.Time, bool) {
	t := &n.touch
	if !t.active || t.strandSince.IsZero() || t.strandReported {
		return time.Time{}, false
	}
	if p := n.slotIn; p != nil {
		start := t.strandSince
		if p.ImageChangedAt.After(start) {
			start = p.ImageChangedAt
		}
		return start.Add(p.DrainTimeout + 2*p.HealthTimeout + StrandSlack), true
	}
	start := t.strandSince
	if t.unslottedSince.After(start) {
		start = t.unslottedSince
	}
	return start.Add(UnslottedStrandBound), true
}

// triggerCleanup starts the cleanup clock of a node bootroll has marked.
func (c *Checker) triggerCleanup(n *Node, pool, why string, left bool) {
	if n.Exists && n.cleanupFrom.IsZero() {
		// A reboot in progress may hold the give-back up to the cleanup's
		// cap from now, no longer (no-reap-while-updating's hold).
		n.cleanupFrom, n.cleanupPool = c.now(), pool
	}
	if !n.Exists || !n.touch.active {
		return
	}
	// Someone else took the node from bootroll, which must now give it
	// back: no post-update protection or drained emptiness of this
	// episode is bootroll's churn any more (no-churn).
	n.churn.handedBack = true
	at, waited := c.now().Add(CleanupBound), down(n)
	if waited {
		// A reboot in progress holds the cleanup back until CleanupBound
		// after it ends: follow it from now, or a reboot that ends before
		// the bound would go unseen and its grace with it.
		at = c.now().Add(cleanupPoll)
	}
	c.push(deadline{at: at, kind: dlCleanup, node: n.Name, id: n.touch.id, pool: pool, why: why, left: left, since: c.now(), waited: waited})
}

// leftPool is the World's leftHook: a node stopped matching a live pool.
func (c *Checker) leftPool(n *Node, p *Pool) {
	c.triggerCleanup(n, p.Name, "left pool "+p.Name+" (its labels no longer match the selector)", true)
}

// bootcChanged is the World's bootcHook.
func (c *Checker) bootcChanged(n *Node, t apiserver.EventType, old, o *v1alpha1.BootcNode) {
	deleting := t == apiserver.Deleted && (old == nil || old.DeletionTimestamp == nil) && o.DeletionTimestamp == nil ||
		t != apiserver.Deleted && o.DeletionTimestamp != nil && (old == nil || old.DeletionTimestamp == nil)
	if deleting {
		c.triggerCleanup(n, o.Spec.Pool, "BootcNode "+o.Name+" deleted", false)
	}
	c.haltBootcNode(n, t, old, o)
	c.noteReorder(n, t, o)
}

// noteReorder notes a boot order (not a rollback's) into the image a
// node was rolled back off, given to it after its pool's spec.image
// changed and came back to that image (an operator's A -> B -> A): the
// pool directed the node to the target again in this epoch, and the
// daemon never reboots again for an image it was rebooted off
// (docs/decisions.md, "No double reboot is the daemon's job"), so the
// node stays off the target with no reboot since (converges,
// downNodesBlock; explorer seed 176122 of the 176075 regression of
// pool-edited-mid-rollout). So it notes one into the image a node was
// rebooted into and came back from on another (fell back): its daemon
// does not reboot again for an image it was rebooted for either
// (explorer seed 176700 of the 106317 regression of boot-failure-modes:
// cl-0 fell back from crashloop at 5m43s, crashloop, neverready,
// crashloop at 8m and 10m40s, ordered to crashloop again at 23m32s and
// refused by its daemon while cl-1 stayed down on neverready).
func (c *Checker) noteReorder(n *Node, t apiserver.EventType, o *v1alpha1.BootcNode) {
	b := o.Spec.BootOrder
	if t == apiserver.Deleted || b == nil || b.Rollback {
		return
	}
	if r := &n.rolledOff; r.pool != "" && o.Spec.Pool == r.pool && digestOf(b.Image) == r.from {
		if e, ok := c.reorderEpoch(r.pool, r.incarnation, r.epoch, b); ok {
			r.reordered = e
		}
	}
	if r := &n.rebootInto; r.pool != "" && o.Spec.Pool == r.pool && digestOf(b.Image) == r.into {
		if e, ok := c.reorderEpoch(r.pool, r.incarnation, r.epoch, b); ok {
			r.reordered = e
		}
	}
}

// reorderEpoch returns the ImageEpoch of the pool named pool when boot
// order b was given in it after its spec.image last changed, and it is
// another epoch than epoch, the one of the reboot b orders again (false
// when not, or when the pool is gone or another incarnation).
func (c *Checker) reorderEpoch(pool string, incarnation, epoch int, b *v1alpha1.BootOrder) (int, bool) {
	p := c.world.Pool(pool)
	if p == nil || p.incarnation != incarnation || p.ImageEpoch == epoch || b.At.Time.Before(p.ImageChangedAt.Truncate(time.Second)) {
		return 0, false
	}
	return p.ImageEpoch, true
}

// noteRollingBack moves the rollback of a node still in its reboot off
// the image it leaves (rolledOff) into pool p's new image epoch: a node
// rolling back counts as failing while it rolls back (DESIGN.md section
// 4), so when spec.image changes to that image under it, it failed the
// new rollout too, and the pool does not direct it there again until
// spec.image changes (converges, downNodesBlock; explorer seed 176175 of
// the 176075 regression of pool-edited-mid-rollout: workers-8's rollback
// off v2 was asked for at 39m30s, under v1, and the operator set v2
// again at 39m34s, before the node went down).
func (c *Checker) noteRollingBack(p *Pool) {
	for _, name := range c.world.NodeNames() {
		n := c.world.nodes[name]
		if r := &n.rolledOff; n.rebooting && r.pool == p.Name && r.incarnation == p.incarnation {
			r.epoch = p.ImageEpoch
		}
	}
}

// poolChanged is the World's poolHook.
func (c *Checker) poolChanged(p *Pool, o *v1alpha1.BootcNodePool, deleted bool) {
	if p.ImageChangedAt.IsZero() {
		p.ImageChangedAt = c.now()
		c.noteRollingBack(p)
	}
	if deleted {
		for _, name := range c.world.NodeNames() {
			n := c.world.nodes[name]
			if n.MarkPool == p.Name || n.BootcPool == p.Name || n.slotIn == p || n.Member(p.Name) {
				c.triggerCleanup(n, p.Name, "pool "+p.Name+" deleted", false)
			}
		}
	}
	c.haltPool(p, o, deleted)
	c.windowPool(p, o, deleted)
}

// down reports whether a node is rebooting, not Ready, or holds a boot
// order its daemon has not acknowledged: bootroll keeps such a node
// cordoned until it is back (a daemon it cannot hear from may still act
// on a boot order), so its cleanup waits as for a reboot. The last is a
// daemon down with the node up (explorer seed 163148 of
// cluster-pool-deleted-mid-rollout: the daemon crashed as its node was
// given the order and stayed down past the pool's deletion; the
// withdrawal went unacknowledged and the node stayed cordoned until the
// daemon was back, as it must).
func down(n *Node) bool { return n.rebooting || !n.Ready || n.orderUnheard }

// cleanupRebootCap is how long a reboot in progress may hold back the
// cleanup of a node of pool: CleanupRebootCap, or the pool's healthTimeout
// (as last seen, the pool may be gone) when that is longer, since the
// reboot itself may take that long.
func (c *Checker) cleanupRebootCap(pool string) time.Duration {
	if p := c.world.pools[pool]; p != nil && p.HealthTimeout > CleanupRebootCap {
		return p.HealthTimeout
	}
	return CleanupRebootCap
}

// runDeadlines runs the checks due by now.
func (c *Checker) runDeadlines(now time.Time) {
	for len(c.deadlines) > 0 && !c.deadlines[0].at.After(now) {
		d := heap.Pop(&c.deadlines).(deadline)
		c.runDeadline(d, now)
	}
}

func (c *Checker) runDeadline(d deadline, now time.Time) {
	n := c.world.nodes[d.node]
	if n == nil || !c.deadlineValid(d, n) {
		return
	}
	at := d.at.Sub(c.start)
	t := &n.touch
	switch d.kind {
	case dlStrand:
		due, ok := c.strandDeadline(n)
		if !ok {
			return
		}
		if due.After(now) {
			c.push(deadline{at: due, kind: dlStrand, node: n.Name, id: t.strandID})
			return
		}
		t.strandReported = true
		if !c.enabled[scenario.InvNoStrandedNode] {
			return
		}
		bound := fmt.Sprintf("%s (not in any pool's slot table)", UnslottedStrandBound)
		if p := n.slotIn; p != nil {
			bound = fmt.Sprintf("%s (pool %s: drainTimeout %s + 2 × healthTimeout %s + %s)", p.DrainTimeout+2*p.HealthTimeout+StrandSlack, p.Name, p.DrainTimeout, p.HealthTimeout, StrandSlack)
		}
		c.record(Violation{Invariant: string(scenario.InvNoStrandedNode), At: due.Sub(c.start), Objects: []string{"Node/" + n.Name},
			Message: fmt.Sprintf("node %s has been %s since %s, longer than %s", n.Name, c.leftovers(n), t.strandSince.Sub(c.start), bound)})
	case dlCleanup:
		if c.postponed(d, now) {
			return
		}
		rebootCap := c.cleanupRebootCap(d.pool)
		if down(n) && now.Before(d.since.Add(rebootCap)) {
			// A reboot in progress holds the cleanup back: look again
			// CleanupBound after it ends, or at the cap. A node down
			// again after a grace had started (a power cycle before its
			// daemon reported what it booted) gets the grace anew once
			// it is up (explorer seed 96098 of bootcnode-deleted-mid-reboot).
			d.waited, d.graced = true, false
			d.at = now.Add(cleanupPoll)
			if cap := d.since.Add(rebootCap); cap.Before(d.at) {
				d.at = cap
			}
			c.push(d)
			return
		}
		if d.waited && !d.graced && now.Before(d.since.Add(rebootCap)) {
			// The reboot ended within the last cleanupPoll.
			d.graced = true
			d.at = now.Add(CleanupBound)
			c.push(d)
			return
		}
		if !d.graced && n.upAt.After(d.since) && now.Before(n.upAt.Add(CleanupBound)) && now.Before(d.since.Add(rebootCap)) {
			// Down after the cleanup began and up again before this
			// check, unseen by the polls above (a node powered off just
			// before its pool was deleted went NotReady and came back
			// between two looks): bootroll hears nothing from the
			// daemon of a node that is down, so the grace runs anew
			// from its return (explorer seed 106174 of
			// cluster-pool-deleted-mid-rollout).
			d.waited, d.graced = true, true
			d.at = n.upAt.Add(CleanupBound)
			c.push(d)
			return
		}
		if at, later := c.cleanupRefused(n, d.since, now, rebootCap); later {
			d.refused = true
			d.at = at
			c.push(d)
			return
		}
		if c.enabled[scenario.InvCleanup] {
			bound := CleanupBound.String()
			switch {
			case d.refused:
				bound = fmt.Sprintf("%s (%s after the controller's last request for it that the API server failed, at %s; at most %s)", now.Sub(d.since), CleanupBound, c.failedOn[n.Name].Sub(c.start), rebootCap)
			case d.waited:
				bound = fmt.Sprintf("%s (%s after a reboot in progress ended, at most %s)", now.Sub(d.since), CleanupBound, rebootCap)
			}
			c.record(Violation{Invariant: string(scenario.InvCleanup), At: at, Objects: []string{"Node/" + n.Name},
				Message: fmt.Sprintf("%s after %s at %s, node %s is still %s", bound, d.why, d.since.Sub(c.start), n.Name, c.leftovers(n))})
		}
	case dlProtection:
		if c.postponed(d, now) {
			return
		}
		if c.inAskedReboot(n) {
			// Still down in the reboot bootroll's daemon asked for: the
			// hold no-reap-while-updating counts as the node's slot
			// (inAskedReboot), which the protection must outlast, or
			// Karpenter repairs the node mid-reboot; the deadline runs
			// ProtectionGrace from the reboot's end (explorer seed 177062
			// of the 176717 regression: kp-0's slot ended at 3m19s, 2m34s
			// into its 12m reboot, and the protection went when the node
			// was back at 12m40s). The hold ends at healthTimeout after
			// the boot order, or cleanup's cap.
			d.waited = true
			d.at = now.Add(cleanupPoll)
			c.push(d)
			return
		}
		if d.waited {
			// The reboot that held the deadline back ended within the
			// last cleanupPoll: ProtectionGrace from then.
			d.waited = false
			d.at = now.Add(ProtectionGrace)
			c.push(d)
			return
		}
		if c.enabled[scenario.InvNoLeakedAnnotation] {
			claim, _ := c.world.ClaimOwned(n)
			extra := minus(n.Owned, t.baseOwned)
			for _, a := range minus(claim, t.baseClaim) {
				extra = append(extra, "NodeClaim "+n.Claim+" "+a)
			}
			c.record(Violation{Invariant: string(scenario.InvNoLeakedAnnotation), At: at, Objects: []string{"Node/" + n.Name},
				Message: fmt.Sprintf("node %s still carries %s that bootroll added, past the end of its post-update protection (slot end + postUpdateProtection + %s)", n.Name, strings.Join(extra, ", "), ProtectionGrace)})
		}
	}
}

// deadlineValid reports whether a pending check still applies: its
// episode, stretch or release is still the node's current one and what it
// checks still holds. A cleanup after a node left a pool no longer
// applies once the node is a member again.
func (c *Checker) deadlineValid(d deadline, n *Node) bool {
	t := &n.touch
	if !n.Exists || n.Deleting || !t.active {
		return false // a node being deleted is not bootroll's to restore
	}
	switch d.kind {
	case dlStrand:
		return t.strandID == d.id && !t.strandSince.IsZero() && !t.strandReported
	case dlCleanup:
		if t.id != d.id {
			return false
		}
		if d.left && n.Member(d.pool) {
			return false
		}
		return true
	case dlProtection:
		if t.id != d.id || t.released != d.released || n.Marked {
			return false
		}
		claim, _ := c.world.ClaimOwned(n)
		return !subset(n.Owned, t.baseOwned) || !subset(claim, t.baseClaim)
	}
	return false
}

// leftovers describes what bootroll left on a node.
func (c *Checker) leftovers(n *Node) string {
	t := &n.touch
	var parts []string
	if n.Unschedulable != t.baseUnschedulable {
		parts = append(parts, "cordoned")
	}
	if n.Marked {
		parts = append(parts, "marked "+v1alpha1.AnnotationSlot+"="+n.MarkPool)
	}
	if a := minus(n.Owned, append(slices.Clone(t.baseOwned), v1alpha1.AnnotationSlot)); len(a) > 0 {
		parts = append(parts, "annotated "+strings.Join(a, ", "))
	}
	if x := minus(bootrollTaints(n.Taints), t.baseTaints); len(x) > 0 {
		parts = append(parts, "tainted "+strings.Join(x, ", "))
	}
	if claim, ok := c.world.ClaimOwned(n); ok {
		if a := minus(claim, t.baseClaim); len(a) > 0 {
			parts = append(parts, "with NodeClaim "+n.Claim+" annotated "+strings.Join(a, ", "))
		}
	}
	if len(parts) == 0 {
		return "not as bootroll found it"
	}
	return strings.Join(parts, ", ")
}

// QuietUntil returns the virtual time until which the run must go on so
// that every pending time-based check is due and, after the end of a
// post-update protection, Karpenter has had time to react (see
// KarpenterReaction); zero when nothing is pending. A runner stops no
// earlier than this.
func (c *Checker) QuietUntil() time.Time {
	var q time.Time
	for _, d := range c.deadlines {
		n := c.world.nodes[d.node]
		if n == nil || !c.deadlineValid(d, n) {
			continue
		}
		at := d.at
		if d.kind == dlProtection {
			at = at.Add(c.karpenterReaction())
		}
		if d.kind == dlStrand {
			due, ok := c.strandDeadline(n)
			if !ok {
				continue
			}
			at = due
		}
		if at.After(q) {
			q = at
		}
	}
	return q
}

// karpenterReaction is KarpenterReaction plus the largest
// consolidateAfter of the scenario's NodePools.
func (c *Checker) karpenterReaction() time.Duration {
	r := KarpenterReaction
	if k := c.sc.Karpenter; k != nil {
		var most time.Duration
		for _, np := range k.NodePools {
			if !np.ConsolidateAfter.Never && np.ConsolidateAfter.Duration > most {
				most = np.ConsolidateAfter.Duration
			}
		}
		r += most
	}
	return r
}

// protectionBack reports whether the node carries a protection
// annotation that it did not have at creation and that no operator set,
// before its last slot's protection deadline: bootroll's post-update
// protection, put back after the slot.
func protectionBack(n *Node, now time.Time) bool {
	return now.Before(n.slotProtectUntil) && !subset(n.Owned, n.InitialOwned)
}

// protectionPending reports whether the node's post-update protection
// may still be in force at end.
func protectionPending(n *Node, end time.Time) bool {
	t := &n.touch
	return t.active && !n.Marked && t.released > 0 && end.Before(t.protectDeadline)
}
