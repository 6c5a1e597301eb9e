package invariant

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
)

// World is what the invariants know of the cluster, kept up to date from
// the API server's watch events: per Node its labels, cordon, taints, slot
// marker, readiness and the workload pods bound to it, per BootcNode its
// pool, phase and orders, per NodeClaim its bootroll-owned annotations,
// per pool its spec, slot table, member count, unavailable count and
// conditions. Every watch event but a pool's creation, deletion or
// selector change costs O(pools + slots), so checks after each engine
// event stay O(1) in the number of nodes.
//
// World never iterates a map to decide anything: lists it returns are
// sorted.
type World struct {
	nodes map[string]*Node
	pools map[string]*Pool
	// poolList holds the live pools sorted by name.
	poolList []*Pool
	// dirty are the pools whose unavailable or member count changed since
	// the last TakeDirty.
	dirty []*Pool

	converged   int // live pools that are converged
	phaseCounts [numPhases]int
	inSlot      int // nodes unavailable because of bootroll, all pools
	// incarnations counts the pools created so far (Pool.incarnation).
	incarnations int
	marked       int // nodes that carry bootroll's slot marker

	// cacheModelled is set once the twin reports what reaches the
	// controller's cache (ControllerCacheNode); the cluster target does
	// not, and its judge counts from the removals themselves.
	cacheModelled bool

	podsChanged bool
	// podRemoved is set when a pod started terminating or went away in
	// the current event.
	podRemoved bool
	// pods are the pods bound to a node, by namespace and name.
	pods map[types.NamespacedName]*podInfo
	// claims are the NodeClaims' bootroll-owned annotations, by name.
	claims map[string][]string
	// claimLife is each NodeClaim's spec.expireAfter (Karpenter's default
	// when unset), by name, kept after the claim is deleted; a claim that
	// never expires has no entry.
	claimLife map[string]time.Duration
	// claimBorn is each expiring NodeClaim's creationTimestamp.
	claimBorn map[string]time.Time
	// pdbs are the PodDisruptionBudgets' selectors, sorted by
	// namespace/name.
	pdbs []pdbSelector

	// nodeHook, when set, is called after every change of a Node, a
	// NodeClaim or a node's slot listing (the Checker's bookkeeping of
	// what bootroll did to the node); old is the Node before a Node event,
	// nil otherwise.
	nodeHook func(n *Node, old *corev1.Node)
	// poolHook, when set, is called after every pool event, before the
	// membership is recomputed on deletion.
	poolHook func(p *Pool, o *v1alpha1.BootcNodePool, deleted bool)
	// bootcHook, when set, is called after every BootcNode event.
	bootcHook func(n *Node, t apiserver.EventType, old, o *v1alpha1.BootcNode)
	// leftHook, when set, is called when a node stops being a member of a
	// pool while both still exist.
	leftHook func(n *Node, p *Pool)

	// clock, when set, is the time of the event being observed (the
	// Checker's now): it times Ready transitions and boots (health.go).
	clock func() time.Time

	// OnPhase, when set, is called when a BootcNode's phase changes,
	// including its creation (from "") and deletion (to "").
	OnPhase func(node string, from, to v1alpha1.NodePhase)
}

// Node is one node as the invariants see it: the Node object and the
// BootcNode of the same name.
type Node struct {
	Name string
	// Exists is true while the Node object exists.
	Exists bool
	// Deleting is true once the Node has a deletionTimestamp.
	Deleting bool
	Labels   map[string]string
	// Unschedulable is spec.unschedulable.
	Unschedulable bool
	// Ready is the Node's Ready condition.
	Ready bool
	// Taints are the keys of the Node's taints in bootroll's domain
	// (bootroll.dev/), sorted.
	Taints []string
	// Claim names the NodeClaim that owns the Node, "" when none.
	Claim string
	// Created is the Node's creationTimestamp.
	Created time.Time
	// WorkloadPods counts the pods bound to the node that a drain must
	// remove: all but DaemonSet pods, mirror pods and finished pods;
	// terminating pods count until they are gone.
	WorkloadPods int
	// OSNotReady is true while the Node has the bootroll.dev/os-not-ready
	// startup taint: it joined on an old image and is updated without a
	// drain or a reboot slot, so it is not unavailable because of bootroll.
	OSNotReady bool
	// Marked is true while the Node carries bootroll's slot annotation;
	// MarkPool is its value.
	Marked   bool
	MarkPool string
	// Owned lists the bootroll-owned annotations (slot, Karpenter
	// protection) the Node carries, sorted.
	Owned []string
	// InitialUnschedulable and InitialOwned are the Node's cordon and
	// bootroll-owned annotations when it was created: bootroll must leave
	// them as it found them.
	InitialUnschedulable bool
	InitialOwned         []string
	// OthersRemovedDoNotDisrupt is when someone other than bootroll last
	// removed karpenter.sh/do-not-disrupt from the Node (zero: never).
	OthersRemovedDoNotDisrupt time.Time
	// OthersRemovedDoNotRepair is when someone other than bootroll last
	// removed karpenter.sh/do-not-repair from the Node (zero: never).
	OthersRemovedDoNotRepair time.Time
	// slotProtectUntil is the protection deadline of the node's last slot
	// (its end + the pool's karpenter.postUpdateProtection +
	// ProtectionGrace): until then bootroll may put its Karpenter
	// protection back on the node (touch.go, protectionBack).
	slotProtectUntil time.Time
	// lifted follows each of those removals (index vetoDoNotDisrupt,
	// vetoDoNotRepair) to the controller's cache (ControllerCacheNode).
	lifted [2]vetoLift

	// HasBootcNode is true while the BootcNode exists.
	HasBootcNode bool
	BootcPool    string
	Phase        v1alpha1.NodePhase
	// BootcDeleting is true while the BootcNode is being deleted.
	BootcDeleting bool
	DesiredImage  string
	FailedImage   string
	BootID        string
	BootedDigest  string
	// LastRebootImage is status.daemon.lastReboot.image.
	LastRebootImage string
	// DesiredBooted is true while the BootcNode carries a boot order for
	// DesiredImage that is not withdrawn (orderStands).
	DesiredBooted bool
	// rollbackOrder is the digest of the image the BootcNode's boot order
	// leaves when it is a rollback order (spec.bootOrder.rollback,
	// standing or withdrawn: a daemon may act on it before it sees the
	// withdrawal), "" otherwise: a reboot off that image is the rollback
	// the pool asked for, whatever its target was then (Checker.Reboot).
	rollbackOrder string
	// order is the BootcNode's spec.bootOrder as the API server has it,
	// standing or withdrawn (zero without one): the order a reboot
	// bootroll's daemon asks for may carry out (askedSince).
	order orderSeen
	// orderUnheard is true while the BootcNode carries a boot order,
	// standing or withdrawn, in a spec its daemon has not acknowledged
	// (status.daemon.observedGeneration below metadata.generation): a
	// daemon that has not seen the withdrawal may still act on the order,
	// so bootroll cannot yet give the node back (cleanup).
	orderUnheard bool

	// health is what updated-healthy judges the node by (health.go).
	health nodeHealth

	// upAt is when the Node was last seen up again (Ready, not in a
	// reboot) after it was down (not Ready, or in a reboot).
	upAt time.Time
	// leftAt is when the Node began to go (the first deletionTimestamp or
	// its deletion), zero while it is not going; leftRV is the
	// resourceVersion of that write, and leftKnown when the controller's
	// cache first held it or a later one (ControllerCacheNode): the pool's
	// status cannot count the node as gone before (converges,
	// expiryOutpacesUpdates).
	leftAt, leftKnown time.Time
	leftRV            uint64
	// rebooting is set by the Checker from a reboot request until the Node
	// was NotReady and is Ready again (rebootDown records the first half)
	// or is Ready with a new boot ID, or its BootcNode is Failed or
	// RolledBack.
	rebooting, rebootDown bool
	// asked is the last reboot bootroll's daemon asked the host for, kept
	// until the Node is back from it (as rebooting, but whatever the
	// record says: a Failed or Pending record does not end it) or is
	// deleted: no-reap-while-updating holds the node in its slot until
	// then, at most its pool's healthTimeout (Checker.inAskedReboot).
	asked askedReboot
	// markedAt is when bootroll's slot marker last went on the Node.
	markedAt time.Time
	// cleanupFrom is when someone else first made bootroll give the node
	// back (its pool or record deleted, the node relabelled out of its
	// pool: Checker.triggerCleanup) since bootroll last marked it, for
	// pool cleanupPool: the invariant cleanup has bootroll give it back
	// by cleanup's cap from then, down in a reboot or not, and
	// no-reap-while-updating's hold of a reboot in progress ends there.
	cleanupFrom time.Time
	cleanupPool string
	// failedDown is set when a reboot bootroll asked for ends in Failed or
	// RolledBack with the Node not Ready since (the failure policy counts
	// it, not max-unavailable), until the Node is Ready again or is
	// rebooted again: a slot bootroll then gives it, to retarget or roll
	// it back, takes no capacity that was still there (updateUnavailable).
	failedDown bool
	// rolledOff is set by the Checker from a reboot that took the node
	// off its pool's target to another image (a rollback: while
	// spec.image stays the same the pool directs nodes to its target
	// only), or off the image a rollback order on its BootcNode leaves,
	// and cleared by any other reboot (converges, downNodesBlock); a boot
	// order into that image in a later epoch notes the epoch, and a
	// change of spec.image while the node is still in that reboot moves
	// it into the new epoch (noteRollingBack).
	rolledOff rollOff
	// rebootInto is set by the Checker from a reboot into its pool's
	// target from another image, and cleared by any other reboot and by
	// the Node's deletion: a node back from it Ready on another image
	// came back on the old one, which DESIGN.md section 4 counts as
	// failed (converges, downNodesBlock); a boot order into that image in
	// a later epoch notes the epoch, as for rolledOff (noteReorder).
	rebootInto rebootInto
	// askedInto is set by the Checker from a reboot bootroll asked for
	// (a standing boot order, not a rollback's, into spec.desiredImage)
	// into another image than the node ran: the digest and the
	// generation that asked (pool, incarnation, epoch); cleared by any
	// other reboot (no-double-reboot, checkDoubleReboot).
	askedInto rebootKey
	// nodeBootID is the Node's status.nodeInfo.bootID; rebootBootID is
	// the one it had when bootroll's daemon asked for the reboot: a new
	// boot ID ends the reboot too, for a node that came back before it
	// was ever seen NotReady (a reboot shorter than the node lifecycle
	// controller's grace period, or a power cycle that pre-empted it).
	nodeBootID, rebootBootID string
	// slotIn is the live pool whose status.slots lists the node.
	slotIn *Pool
	// touch is the Checker's record of what bootroll did to the node.
	touch touch
	// churn is the Checker's record, for no-churn, of bootroll's last
	// episode on the node (karpenter.go).
	churn churnRecord

	pools     []*Pool // live pools whose selector matches
	unavailIn *Pool   // the pool the node counts as unavailable in
	// wasUnavailable is Unavailable() at the last updateUnavailable.
	wasUnavailable bool
}

// askedReboot is a reboot bootroll's daemon asked a node's host for
// (Checker.Reboot), until the Node is back from it: NotReady and Ready
// again (down records the first half), or Ready on a boot ID other than
// bootID, the one it had at the request. at is the request's time, since
// when its healthTimeout started (the boot order it carries out:
// askedSince), and pool the pool the node's record named then, whose
// healthTimeout bounds how long bootroll may keep a node that does not
// come back (DESIGN.md section 3: it is Failed then, and given back).
type askedReboot struct {
	on, down     bool
	at, since    time.Time
	pool, bootID string
}

// orderSeen is a BootcNode's spec.bootOrder as the judge keeps it: the
// digest it names, whether it is a rollback order, and its time at the
// API's precision of a second (metav1.Time); at is zero for none.
type orderSeen struct {
	digest   string
	rollback bool
	at       time.Time
}

// rollOff is a reboot of a node off its pool's target, or off the image
// a rollback order leaves: the pool (name and incarnation), its
// ImageEpoch then (or the later one that began while the node was still
// in that reboot: it counts as failing while it rolls back), and the
// digest it left; and reordered, the pool's ImageEpoch when the node was
// last given a boot order (not a rollback's) into that digest again
// after spec.image had changed and come back to it (0 for none).
type rollOff struct {
	pool                          string
	incarnation, epoch, reordered int
	from                          string
}

// rebootInto is a reboot of a node into its pool's target: the pool
// (name and incarnation), its ImageEpoch then, and the target's digest;
// and reordered, the pool's ImageEpoch when the node was last given a
// boot order (not a rollback's) into that digest again after spec.image
// had changed and come back to it (0 for none), as rollOff's.
type rebootInto struct {
	pool                          string
	incarnation, epoch, reordered int
	into                          string
}

// podInfo is one pod bound to a node.
type podInfo struct {
	node string
	// workload is true for a pod a drain must remove.
	workload bool
	// terminating is true once it has a deletionTimestamp.
	terminating bool
	// ds is namespace/name of the DaemonSet that controls the pod, "" for
	// none; ready is its Ready condition.
	ds    string
	ready bool
}

// Member reports whether the node is a member of the live pool named
// pool: it exists, is not being deleted and the pool's selector matches.
func (n *Node) Member(pool string) bool {
	for _, p := range n.pools {
		if p.Name == pool {
			return true
		}
	}
	return false
}

// SlotPool returns the name of the live pool whose status.slots lists the
// node, "" when none does.
func (n *Node) SlotPool() string {
	if n.slotIn == nil {
		return ""
	}
	return n.slotIn.Name
}

// Pool is one BootcNodePool as the invariants see it.
type Pool struct {
	Name           string
	Selector       labels.Selector
	MaxUnavailable *intstr.IntOrString
	Generation     int64
	// ObservedGeneration is status.observedGeneration.
	ObservedGeneration int64
	UpToDate           bool
	UpToDateReason     string
	Halted             bool
	HaltedReason       string
	Degraded           bool
	DegradedReason     string
	Summary            string
	TargetImage        string
	// SpecImage is spec.image; ImageEpoch counts its changes, and
	// ImageChangedAt is when it last changed (the pool's creation first).
	SpecImage  string
	ImageEpoch int
	// incarnation numbers the pools the World has seen created, so that a
	// pool created again under a deleted one's name is told apart.
	incarnation    int
	ImageChangedAt time.Time
	// DrainTimeout, HealthTimeout and PostUpdateProtection are the spec's,
	// with the API's documented defaults (10m, 15m); PostUpdateProtection
	// is the spec's value, set when the spec gives one (see protectionAfter).
	DrainTimeout            time.Duration
	HealthTimeout           time.Duration
	PostUpdateProtection    time.Duration
	postUpdateProtectionSet bool
	// MaxFailures is spec.failurePolicy.maxFailures, with the API's
	// documented default (1).
	MaxFailures int
	// Health is spec.healthChecks (health.go).
	Health poolHealth
	// Windows is spec.windows; LastGrant the latest grant time (since) of
	// a slot the pool's status listed; LastRefusal the latest time a
	// PodDisruptionBudget refused an eviction while the pool's status
	// listed a slot (the Checker sets it: a drain of the pool's may have
	// been refused then).
	Windows     []v1alpha1.MaintenanceWindow
	LastGrant   time.Time
	LastRefusal time.Time
	// windowsSeen are the spec.windows the pool has had, oldest first,
	// each from when the checker saw it (windowsChangedAt); hadWindows is
	// set once one of them had a window (grant-in-window, window.go).
	windowsSeen []windowsVersion
	hadWindows  bool
	// Members counts the Nodes the selector matches that are not being
	// deleted, as the controller counts them for maxUnavailable.
	Members int
	// memberSince is when each member last became one (its Node matched
	// the selector, existing and not being deleted), by name; zero for a
	// World without a clock.
	memberSince map[string]time.Time
	// Unavailable counts the member nodes unavailable because of bootroll.
	Unavailable int

	unavailable map[string]struct{}
	// slots is status.slots by node; prevSlots is what it was before the
	// pool's last event.
	slots, prevSlots map[string]v1alpha1.Slot
	// slotList is a copy of the status.slots that setSlots last took, for
	// the pool events that leave them as they were.
	slotList []v1alpha1.Slot
	// nodeSelector is a copy of the spec.nodeSelector that Selector was
	// last made from, for the pool events that leave it as it was.
	nodeSelector map[string]string
	live         bool
	isDirty      bool
	converged    bool
	overLimit    bool
	// lastUnavailable is Unavailable at the last max-unavailable check.
	lastUnavailable int
	// departed are the Karpenter nodes (a NodeClaim's life known) whose
	// BootcNode left the pool's records after their Node began to go, by
	// name, until a Node of that name comes again: the pool's status may
	// still count one until its controller has seen it go
	// (expiryOutpacesUpdates), and the World forgets the node itself once
	// both objects are gone.
	departed map[string]departed
}

// departed is what the World keeps of a node of a pool's departed: when
// its Node began to go (leftAt, leftRV the resourceVersion of that write)
// and when the controller's cache first held that write or a later one
// (leftKnown), as Node keeps them, and its NodeClaim's life
// (World.ClaimLife).
type departed struct {
	leftAt, leftKnown time.Time
	leftRV            uint64
	life              time.Duration
}

// Slot returns the pool's status.slots entry of node.
func (p *Pool) Slot(node string) (v1alpha1.Slot, bool) {
	s, ok := p.slots[node]
	return s, ok
}

// ownedAnnotations are the Node annotations that bootroll adds and must
// remove.
var ownedAnnotations = []string{v1alpha1.AnnotationSlot, v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}

// taintDomain prefixes the keys of bootroll's taints.
const taintDomain = "bootroll.dev/"

// The API's documented defaults (api/v1alpha1) of the pool timeouts.
const (
	defaultDrainTimeout  = 10 * time.Minute
	defaultHealthTimeout = 15 * time.Minute
	// defaultPostUpdateProtection is the API's documented default of
	// spec.karpenter.postUpdateProtection on Karpenter-managed nodes (0s
	// turns it off).
	defaultPostUpdateProtection = 5 * time.Minute
	// defaultMaxFailures is the documented default of
	// spec.failurePolicy.maxFailures.
	defaultMaxFailures = 1
)

// numPhases is len(v1alpha1.AllPhases); an init check keeps them equal.
const numPhases = 10

func init() {
	if len(v1alpha1.AllPhases) != numPhases {
		panic("invariant: numPhases is not len(v1alpha1.AllPhases)")
	}
}

// NewWorld returns an empty world.
func NewWorld() *World {
	return &World{nodes: map[string]*Node{}, pools: map[string]*Pool{}, pods: map[types.NamespacedName]*podInfo{}, claims: map[string][]string{}, claimLife: map[string]time.Duration{}, claimBorn: map[string]time.Time{}}
}

// Observe applies one watch event.
func (w *World) Observe(ev apiserver.Event) {
	switch o := ev.Object.(type) {
	case *corev1.Node:
		old, _ := ev.Old.(*corev1.Node)
		w.observeNode(ev.Type, o, old)
	case *v1alpha1.BootcNode:
		old, _ := ev.Old.(*v1alpha1.BootcNode)
		w.observeBootcNode(ev.Type, o, old)
	case *v1alpha1.BootcNodePool:
		w.observePool(ev.Type, o)
	case *policyv1.PodDisruptionBudget:
		w.observePDB(ev.Type, o)
	case *corev1.Pod:
		w.podsChanged = true
		w.observePod(ev.Type, o)
	case *unstructured.Unstructured:
		if o.GetKind() == "NodeClaim" {
			w.observeClaim(ev.Type, o)
		}
	}
}

// observePod keeps the count of workload pods per node.
func (w *World) observePod(t apiserver.EventType, o *corev1.Pod) {
	key := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
	// The info is kept by pointer: a pod's update is written in place,
	// with no map assignment.
	info := w.pods[key]
	had := info != nil
	var old podInfo
	if had {
		old = *info
	}
	var cur podInfo
	has := t != apiserver.Deleted && o.Spec.NodeName != ""
	if has {
		cur = podInfo{node: o.Spec.NodeName, workload: mustLeave(o), terminating: o.DeletionTimestamp != nil, ds: daemonSetOf(o), ready: podReady(o)}
	}
	if had && (!has || !old.terminating && cur.terminating) {
		if !old.terminating {
			w.podRemoved = true
		}
	} else if !had && t == apiserver.Deleted || !had && has && cur.terminating {
		w.podRemoved = true
	}
	if had == has && old == cur {
		return
	}
	if had {
		if !has {
			delete(w.pods, key)
		}
		w.countDaemonSetPod(old, -1)
		if old.workload {
			if n := w.nodes[old.node]; n != nil {
				n.WorkloadPods--
				w.forget(n)
			}
		}
	}
	if has {
		if info == nil {
			info = new(podInfo)
			w.pods[key] = info
		}
		*info = cur
		w.countDaemonSetPod(cur, 1)
		if cur.workload {
			w.node(cur.node).WorkloadPods++
		}
	}
}

// mustLeave reports whether a drain must remove the pod before a reboot:
// every pod but DaemonSet pods, mirror (static) pods and finished pods, as
// kubectl drain decides.
func mustLeave(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}

// observeClaim keeps the NodeClaims' bootroll-owned annotations.
func (w *World) observeClaim(t apiserver.EventType, o *unstructured.Unstructured) {
	if t == apiserver.Deleted {
		// claimLife and claimBorn stay: the life of a node whose claim
		// went with it is still what it was (expiryOutpacesUpdates).
		delete(w.claims, o.GetName())
	} else {
		w.claims[o.GetName()] = ownedOf(o.GetAnnotations())
		if d, ok := claimLife(o); ok {
			w.claimLife[o.GetName()] = d
			w.claimBorn[o.GetName()] = o.GetCreationTimestamp().Time
		} else {
			delete(w.claimLife, o.GetName())
		}
	}
	// The claim's node names it in its ownerReferences; a claim knows its
	// node from status.nodeName.
	if name, _, _ := unstructured.NestedString(o.Object, "status", "nodeName"); name != "" {
		if n := w.nodes[name]; n != nil && n.Claim == o.GetName() && w.nodeHook != nil {
			w.nodeHook(n, nil)
		}
	}
}

// claimLife returns how long after its creation Karpenter expires the
// NodeClaim (spec.expireAfter, Karpenter's default when unset), and false
// when it never does ("Never") or the value does not parse.
func claimLife(o *unstructured.Unstructured) (time.Duration, bool) {
	s, found, _ := unstructured.NestedString(o.Object, "spec", "expireAfter")
	if !found || s == "" {
		return fakekarpenter.DefaultExpireAfter, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// ClaimLife returns how long the Node lives before its NodeClaim expires:
// the claim's expireAfter less the time from the claim's creation to the
// Node's (its launch and registration), and whether the node has a
// NodeClaim that expires.
func (w *World) ClaimLife(n *Node) (time.Duration, bool) {
	if n.Claim == "" {
		return 0, false
	}
	d, ok := w.claimLife[n.Claim]
	if born := w.claimBorn[n.Claim]; ok && !born.IsZero() && !n.Created.IsZero() && n.Created.After(born) {
		d -= n.Created.Sub(born)
	}
	return d, ok
}

// ClaimOwned returns the bootroll-owned annotations of the node's
// NodeClaim, and whether the claim exists.
func (w *World) ClaimOwned(n *Node) ([]string, bool) {
	if n.Claim == "" {
		return nil, false
	}
	a, ok := w.claims[n.Claim]
	return a, ok
}

// TakePodRemoved reports whether a pod started terminating or went away
// since the last call.
func (w *World) TakePodRemoved() bool {
	r := w.podRemoved
	w.podRemoved = false
	return r
}

// Node returns the node named name, or nil.
func (w *World) Node(name string) *Node { return w.nodes[name] }

// Pool returns the live pool named name, or nil.
func (w *World) Pool(name string) *Pool {
	if p := w.pools[name]; p != nil && p.live {
		return p
	}
	return nil
}

// Pools returns the live pools sorted by name. The slice is shared: do not
// modify it.
func (w *World) Pools() []*Pool { return w.poolList }

// NodeNames returns the names of every node seen (Node or BootcNode),
// sorted. It is O(N log N): for the end of a run.
func (w *World) NodeNames() []string {
	out := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Members returns the names of the live pool's member nodes, sorted. It is
// O(N): for the end of a run.
func (w *World) Members(pool string) []string {
	var out []string
	for _, name := range w.NodeNames() {
		n := w.nodes[name]
		if !n.Exists || n.Deleting {
			continue
		}
		for _, p := range n.pools {
			if p.Name == pool {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// Going returns the nodes whose BootcNode is still in pool's records
// while their Node is being deleted or gone, sorted: the pool's status
// may count them until its controller has seen them go.
func (w *World) Going(pool string) []string {
	var out []string
	for _, name := range w.NodeNames() {
		n := w.nodes[name]
		if n.HasBootcNode && n.BootcPool == pool && (!n.Exists || n.Deleting) {
			out = append(out, name)
		}
	}
	return out
}

// AllConverged reports whether every live pool is converged: its status
// describes its current generation and it is UpToDate, or Halted with a
// reason. A world without pools is converged.
func (w *World) AllConverged() bool { return w.converged == len(w.poolList) }

// Converged reports whether pool p is converged (see AllConverged).
func (p *Pool) Converged() bool { return p.converged }

// PhaseCounts returns the number of BootcNodes in each phase, in the order
// of v1alpha1.AllPhases.
func (w *World) PhaseCounts() []int {
	return slices.Clone(w.phaseCounts[:])
}

// InSlot returns how many nodes are unavailable because of bootroll: they
// carry its slot marker or their BootcNode is in a slot phase.
func (w *World) InSlot() int { return w.inSlot }

// Marked returns how many nodes carry bootroll's slot marker.
func (w *World) Marked() int { return w.marked }

// TakeDirty returns the pools whose member or unavailable count changed
// since the last call, and forgets them.
func (w *World) TakeDirty() []*Pool {
	d := w.dirty
	for _, p := range d {
		p.isDirty = false
	}
	w.dirty = w.dirty[:0:0]
	return d
}

// TakePodsChanged reports whether a Pod changed since the last call.
func (w *World) TakePodsChanged() bool {
	c := w.podsChanged
	w.podsChanged = false
	return c
}

func (w *World) node(name string) *Node {
	n := w.nodes[name]
	if n == nil {
		n = &Node{Name: name}
		w.nodes[name] = n
	}
	return n
}

func (w *World) observeNode(t apiserver.EventType, o *corev1.Node, old *corev1.Node) {
	n := w.node(o.Name)
	if t == apiserver.Added || !n.Exists {
		n.leftAt, n.leftKnown, n.leftRV = time.Time{}, time.Time{}, 0
	}
	if t == apiserver.Added {
		// A Node of that name again: it counts as itself.
		for _, p := range w.poolList {
			delete(p.departed, o.Name)
		}
	}
	if (t == apiserver.Deleted || o.DeletionTimestamp != nil) && n.leftAt.IsZero() && w.clock != nil {
		n.leftAt, n.leftRV = w.clock(), parseRV(o.ResourceVersion)
	}
	if t == apiserver.Deleted {
		w.setMarked(n, false, "")
		n.Exists, n.Deleting = false, false
		n.rebooting, n.rebootDown, n.failedDown = false, false, false
		n.asked = askedReboot{}
		n.cleanupFrom, n.cleanupPool = time.Time{}, ""
		n.rebootInto = rebootInto{}
		n.touch = touch{}
		n.churn = churnRecord{}
		w.setPools(n, nil)
		w.updateUnavailable(n)
		w.forget(n)
		return
	}

	owned := ownedOf(o.Annotations)
	n.liftWritten(o)
	if t == apiserver.Added || !n.Exists {
		n.InitialUnschedulable = o.Spec.Unschedulable
		n.InitialOwned = owned
		n.Created = o.CreationTimestamp.Time
	}
	n.Exists = true
	n.Deleting = o.DeletionTimestamp != nil
	n.Unschedulable = o.Spec.Unschedulable
	n.OSNotReady = false
	n.Taints = nil
	for _, t := range o.Spec.Taints {
		if t.Key == v1alpha1.TaintOSNotReady {
			n.OSNotReady = true
		}
		if strings.HasPrefix(t.Key, taintDomain) && !slices.Contains(n.Taints, t.Key) {
			n.Taints = append(n.Taints, t.Key)
		}
	}
	slices.Sort(n.Taints)
	wasReady := n.Ready && t != apiserver.Added
	n.Ready = false
	for _, c := range o.Status.Conditions {
		if c.Type == corev1.NodeReady {
			n.Ready = c.Status == corev1.ConditionTrue
		}
	}
	w.observeHealth(n, o, wasReady)
	n.Claim = ""
	for _, r := range o.OwnerReferences {
		if r.Kind == "NodeClaim" && strings.HasPrefix(r.APIVersion, "karpenter.sh/") {
			n.Claim = r.Name
		}
	}
	n.nodeBootID = o.Status.NodeInfo.BootID
	wasDown := t != apiserver.Added && (n.rebooting || !wasReady)
	if n.rebooting {
		switch {
		case !n.Ready:
			n.rebootDown = true
		case n.rebootDown, n.nodeBootID != n.rebootBootID:
			n.rebooting, n.rebootDown = false, false
		}
	}
	if a := &n.asked; a.on {
		switch {
		case !n.Ready:
			a.down = true
		case a.down, n.nodeBootID != a.bootID:
			*a = askedReboot{}
		}
	}
	if n.Ready {
		n.failedDown = false
	}
	if wasDown && !n.rebooting && n.Ready && w.clock != nil {
		n.upAt = w.clock()
	}
	n.Owned = owned
	mark, marked := o.Annotations[v1alpha1.AnnotationSlot]
	w.setMarked(n, marked, mark)
	if t == apiserver.Added || !labels.Equals(n.Labels, o.Labels) || n.Deleting {
		n.Labels = o.Labels
		w.setPools(n, w.matching(n))
	}
	w.updateUnavailable(n)
	if w.nodeHook != nil {
		w.nodeHook(n, old)
	}
}

func (w *World) setMarked(n *Node, marked bool, pool string) {
	if marked != n.Marked {
		if marked {
			w.marked++
			n.markedAt = time.Time{}
			if w.clock != nil {
				n.markedAt = w.clock()
			}
			n.cleanupFrom, n.cleanupPool = time.Time{}, "" // a new episode
		} else {
			w.marked--
		}
	}
	n.Marked, n.MarkPool = marked, pool
}

// noteDeparted keeps, on the pool of n's BootcNode that is being deleted,
// what expiryOutpacesUpdates needs of n when its Node is going and its
// NodeClaim's life is known: the pool's status may still count n after
// the BootcNode went, and the World forgets n once its Node is gone too
// (explorer seed 176388 of the 168262 regression of
// cluster-expiry-during-update: kp-69's Node was deleted at 01:28:11, its
// controller's cache held it at 01:28:21.88, the controller deleted its
// BootcNode at 01:28:21.9, and its status writes of the pool conflicted
// on a cache behind its own last write until the run ended at 01:28:24).
func (w *World) noteDeparted(n *Node) {
	p := w.pools[n.BootcPool]
	if p == nil || !p.live || n.leftAt.IsZero() {
		return
	}
	life, ok := w.ClaimLife(n)
	if !ok {
		return
	}
	if p.departed == nil {
		p.departed = map[string]departed{}
	}
	p.departed[n.Name] = departed{leftAt: n.leftAt, leftKnown: n.leftKnown, leftRV: n.leftRV, life: life}
}

// forget drops a node that has neither a Node nor a BootcNode any more.
func (w *World) forget(n *Node) {
	if !n.Exists && !n.HasBootcNode && n.WorkloadPods == 0 && n.slotIn == nil {
		delete(w.nodes, n.Name)
	}
}

func ownedOf(ann map[string]string) []string {
	var out []string
	for _, k := range ownedAnnotations {
		if _, ok := ann[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// matching returns the live pools whose selector matches the node, sorted
// by name; none while the Node is being deleted.
func (w *World) matching(n *Node) []*Pool {
	if !n.Exists || n.Deleting {
		return nil
	}
	var out []*Pool
	set := labels.Set(n.Labels)
	for _, p := range w.poolList {
		if p.Selector.Matches(set) {
			out = append(out, p)
		}
	}
	return out
}

// setPools changes the node's pool membership and the member counts.
func (w *World) setPools(n *Node, pools []*Pool) {
	for _, p := range n.pools {
		if !slices.Contains(pools, p) {
			p.Members--
			delete(p.memberSince, n.Name)
			w.markDirty(p)
			if w.leftHook != nil && p.live && n.Exists && !n.Deleting {
				w.leftHook(n, p)
			}
		}
	}
	for _, p := range pools {
		if !slices.Contains(n.pools, p) {
			p.Members++
			var since time.Time
			if w.clock != nil {
				since = w.clock()
			}
			p.memberSince[n.Name] = since
			w.markDirty(p)
		}
	}
	n.pools = pools
}

func (w *World) markDirty(p *Pool) {
	if !p.isDirty {
		p.isDirty = true
		w.dirty = append(w.dirty, p)
	}
}

// holdsSlot reports whether a node in phase p holds a reboot slot; it is
// the controller's rule (Draining, Rebooting, Verifying).
func holdsSlot(p v1alpha1.NodePhase) bool {
	return p == v1alpha1.PhaseDraining || p == v1alpha1.PhaseRebooting || p == v1alpha1.PhaseVerifying
}

// Unavailable reports whether the node is unavailable because of
// bootroll (see updateUnavailable).
func (n *Node) Unavailable() bool {
	if !n.Exists || n.Deleting {
		return false
	}
	if n.Marked || n.slotIn != nil && n.slotIn.live {
		return true
	}
	return !n.OSNotReady && (holdsSlot(n.Phase) || n.rebooting)
}

// updateUnavailable recomputes whether the node is unavailable because of
// bootroll and in which pool it counts: the pool its slot marker names,
// else the pool whose slot table lists it, else its BootcNode's pool.
//
// A node is unavailable because of bootroll while its Node exists and is
// not being deleted (a node someone else deletes is not bootroll's), and
//   - it carries bootroll's slot marker (the cordon bootroll puts on with
//     it), or
//   - a pool's status.slots lists it (bootroll's own reservation), or
//   - bootroll's daemon requested a reboot of it, until the Node was
//     NotReady and is Ready again, or is Ready with another boot ID than
//     at the request (a reboot too short to be seen NotReady, or one a
//     power cycle pre-empted), or it is Failed or RolledBack (a node
//     that never comes back is counted by the failure policy), or
//   - its BootcNode is in a slot phase (Draining, Rebooting, Verifying);
//
// the last two except on the os-not-ready fast path (the node has the
// bootroll.dev/os-not-ready taint), where a node holds no workloads.
func (w *World) updateUnavailable(n *Node) {
	var in *Pool
	joined := false // counted in its BootcNode's pool, already unavailable before
	unavailable := n.Unavailable()
	defer func() { n.wasUnavailable = unavailable }()
	if unavailable {
		switch {
		case n.Marked && w.Pool(n.MarkPool) != nil:
			in = w.Pool(n.MarkPool)
		case n.slotIn != nil && n.slotIn.live:
			// A deleted pool's slot table counts no more: its nodes are
			// judged by cleanup, and a pool created again under its name
			// starts with its own.
			in = n.slotIn
		default:
			// A marker naming no pool still makes the node unavailable;
			// count it in its BootcNode's pool. A node down in a reboot
			// bootroll asked for, neither marked nor in a slot table,
			// counts there only while it is a member: one an operator
			// took out of the pool is not the pool's capacity any more
			// (explorer seed 101155 of rollback-on-failed-boot: relabelled
			// out while down, its deleted record still naming the pool).
			if p := w.Pool(n.BootcPool); p != nil && (n.Marked || slices.Contains(n.pools, p)) {
				in = p
				joined = n.wasUnavailable && n.unavailIn == nil && !n.Marked
			}
		}
	}
	if in == n.unavailIn {
		return
	}
	if p := n.unavailIn; p != nil {
		p.Unavailable--
		delete(p.unavailable, n.Name)
		w.inSlot--
		w.markDirty(p)
	}
	if in != nil {
		in.Unavailable++
		in.unavailable[n.Name] = struct{}{}
		w.inSlot++
		w.markDirty(in)
		if n.unavailIn == nil && n.failedDown {
			// Down since a reboot that failed (its failure counted by the
			// failure policy), now given a slot to be retargeted or
			// rolled back: bootroll took no capacity that was still there,
			// so it raises the count without an increase of bootroll's
			// doing, and later grants must count it (explorer seed 158119
			// of rollback-on-failed-boot: failed while down on v2-bad,
			// retargeted to v1 by an operator's revert, given a slot
			// while down).
			joined = true
		}
		if joined {
			// A node that became the pool's (a member, or its record made
			// again) while already down from a reboot bootroll asked for
			// earlier, outside this pool's slots: bootroll did not make
			// it unavailable now, so it raises the count without being
			// an increase of bootroll's doing; the pool's next grant
			// must count it (explorer seed 111226 of
			// rollback-on-failed-boot: relabelled back into a pool made
			// again while two slots were in use).
			in.lastUnavailable++
		}
	}
	n.unavailIn = in
}

func (w *World) observeBootcNode(t apiserver.EventType, o, old *v1alpha1.BootcNode) {
	n := w.node(o.Name)
	from := n.Phase
	if !n.HasBootcNode {
		from = ""
	}
	if t == apiserver.Deleted {
		w.noteDeparted(n)
		n.HasBootcNode, n.BootcDeleting = false, false
		w.countPhase(n, from, "")
		n.Phase, n.BootcPool = "", ""
		n.DesiredBooted, n.orderUnheard, n.rollbackOrder = false, false, ""
		n.order = orderSeen{}
		w.updateUnavailable(n)
		if w.bootcHook != nil {
			w.bootcHook(n, t, old, o)
		}
		w.forget(n)
		return
	}
	to := displayPhase(o)
	n.HasBootcNode = true
	n.BootcDeleting = o.DeletionTimestamp != nil
	n.BootcPool = o.Spec.Pool
	n.DesiredImage = o.Spec.DesiredImage
	n.FailedImage = o.Status.Rollout.FailedImage
	n.BootID = o.Status.Daemon.BootID
	n.BootedDigest = ""
	if o.Status.Booted != nil {
		n.BootedDigest = o.Status.Booted.Digest
	}
	n.LastRebootImage = ""
	if r := o.Status.Daemon.LastReboot; r != nil {
		n.LastRebootImage = r.Image
	}
	n.DesiredBooted = orderStands(o)
	n.rollbackOrder, n.order = "", orderSeen{}
	if b := o.Spec.BootOrder; b != nil {
		if b.Rollback {
			n.rollbackOrder = digestOf(b.Image)
		}
		n.order = orderSeen{digest: digestOf(b.Image), rollback: b.Rollback, at: b.At.Truncate(time.Second)}
	}
	n.orderUnheard = o.Spec.BootOrder != nil && o.Status.Daemon.ObservedGeneration < o.Generation
	n.Phase = to
	if to == v1alpha1.PhaseFailed || to == v1alpha1.PhaseRolledBack {
		n.failedDown = n.failedDown || (n.rebooting && !n.Ready)
		n.rebooting, n.rebootDown = false, false
	}
	w.countPhase(n, from, to)
	w.updateUnavailable(n)
	if w.bootcHook != nil {
		w.bootcHook(n, t, old, o)
	}
}

func (w *World) countPhase(n *Node, from, to v1alpha1.NodePhase) {
	if from == to {
		return
	}
	// Counted at their place in v1alpha1.AllPhases; a phase this version
	// does not know counts as the first (Pending), as before.
	if from != "" {
		i, _ := v1alpha1.PhaseIndex(from)
		w.phaseCounts[i]--
	}
	if to != "" {
		i, _ := v1alpha1.PhaseIndex(to)
		w.phaseCounts[i]++
	}
	if w.OnPhase != nil {
		w.OnPhase(n.Name, from, to)
	}
}

func (w *World) observePool(t apiserver.EventType, o *v1alpha1.BootcNodePool) {
	p := w.pools[o.Name]
	if t == apiserver.Deleted || o.DeletionTimestamp != nil {
		if p != nil && t != apiserver.Deleted {
			// The controller's release waits for a reboot in progress
			// up to the deleting pool's healthTimeout, which may still
			// be edited (cleanup's cap; explorer seed 92171 of
			// bootcnode-deleted-mid-reboot).
			p.HealthTimeout = durationOr(o.Spec.HealthTimeout, defaultHealthTimeout)
		}
		if p != nil && p.live {
			if w.poolHook != nil {
				w.poolHook(p, o, true)
			}
			w.removePool(p)
		}
		return
	}
	if p == nil || !p.live {
		w.incarnations++
		p = &Pool{Name: o.Name, unavailable: map[string]struct{}{}, slots: map[string]v1alpha1.Slot{}, memberSince: map[string]time.Time{}, live: true, ImageEpoch: 1, SpecImage: string(o.Spec.Image), incarnation: w.incarnations}
		w.pools[o.Name] = p
		i, _ := slices.BinarySearchFunc(w.poolList, p.Name, func(a *Pool, name string) int {
			switch {
			case a.Name < name:
				return -1
			case a.Name > name:
				return 1
			}
			return 0
		})
		w.poolList = slices.Insert(w.poolList, i, p)
		p.Selector = labels.SelectorFromSet(o.Spec.NodeSelector)
		p.nodeSelector = maps.Clone(o.Spec.NodeSelector)
		w.remap()
	} else if !maps.Equal(o.Spec.NodeSelector, p.nodeSelector) {
		// The same set makes the same selector: only another one is
		// made and compared (String was a tenth of this event's cost).
		p.nodeSelector = maps.Clone(o.Spec.NodeSelector)
		if sel := labels.SelectorFromSet(o.Spec.NodeSelector); sel.String() != p.Selector.String() {
			p.Selector = sel
			w.remap()
		}
	}
	p.MaxUnavailable = o.Spec.Rollout.MaxUnavailable
	if img := string(o.Spec.Image); img != p.SpecImage {
		p.SpecImage = img
		p.ImageEpoch++
		p.ImageChangedAt = time.Time{}
	}
	p.DrainTimeout = durationOr(o.Spec.DrainTimeout, defaultDrainTimeout)
	p.HealthTimeout = durationOr(o.Spec.HealthTimeout, defaultHealthTimeout)
	p.MaxFailures = defaultMaxFailures
	if m := o.Spec.FailurePolicy.MaxFailures; m != nil {
		p.MaxFailures = int(*m)
	}
	p.PostUpdateProtection = durationOr(o.Spec.Karpenter.PostUpdateProtection, 0)
	p.postUpdateProtectionSet = o.Spec.Karpenter.PostUpdateProtection != nil
	p.setHealthChecks(&o.Spec.HealthChecks)
	p.Windows = o.Spec.Windows
	for _, s := range o.Status.Slots {
		if s.Since.After(p.LastGrant) {
			p.LastGrant = s.Since.Time
		}
	}
	p.prevSlots = p.slots
	w.setSlots(p, o.Status.Slots)
	p.Generation = o.Generation
	p.ObservedGeneration = o.Status.ObservedGeneration
	p.Summary = o.Status.Summary
	p.TargetImage = o.Status.TargetImage
	p.UpToDate, p.UpToDateReason = condition(o, v1alpha1.ConditionUpToDate)
	p.Halted, p.HaltedReason = condition(o, v1alpha1.ConditionHalted)
	p.Degraded, p.DegradedReason = condition(o, v1alpha1.ConditionDegraded)
	w.markDirty(p)
	w.setConverged(p, p.ObservedGeneration == p.Generation && (p.UpToDate || (p.Halted && p.HaltedReason != "")))
	if w.poolHook != nil {
		w.poolHook(p, o, false)
	}
}

// sameWindows reports whether two spec.windows lists are the same.
func sameWindows(a, b []v1alpha1.MaintenanceWindow) bool {
	return slices.EqualFunc(a, b, func(x, y v1alpha1.MaintenanceWindow) bool {
		return x.Start == y.Start && x.Duration == y.Duration && slices.Equal(x.Days, y.Days)
	})
}

// protectionAfter is how long the pool's post-update protection lasts on
// node n after a slot: the spec's value, or when the spec gives none, the
// documented default on a node Karpenter manages (owned by a NodeClaim)
// and none on any other (Karpenter never disrupts it).
func (p *Pool) protectionAfter(n *Node) time.Duration {
	switch {
	case p.postUpdateProtectionSet:
		return p.PostUpdateProtection
	case n != nil && n.Claim != "":
		return defaultPostUpdateProtection
	}
	return 0
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// setSlots takes the pool's status.slots: O(slots).
func (w *World) setSlots(p *Pool, slots []v1alpha1.Slot) {
	if slices.Equal(slots, p.slotList) {
		// The list it took last: the loop below would find them the
		// same, a map lookup per slot.
		return
	}
	p.slotList = append(p.slotList[:0], slots...)
	if len(slots) == len(p.slots) {
		same := true
		for _, s := range slots {
			if old, ok := p.slots[s.Node]; !ok || old != s {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	next := make(map[string]v1alpha1.Slot, len(slots))
	for _, s := range slots {
		next[s.Node] = s
	}
	var changed []string
	for name := range p.slots {
		if _, ok := next[name]; !ok {
			changed = append(changed, name)
		}
	}
	for name, s := range next {
		if old, ok := p.slots[name]; !ok || old != s {
			changed = append(changed, name)
		}
	}
	p.slots = next
	slices.Sort(changed)
	for _, name := range changed {
		w.updateSlotted(w.node(name))
	}
}

// updateSlotted recomputes which live pool's slot table lists the node.
func (w *World) updateSlotted(n *Node) {
	var in *Pool
	if n.BootcPool != "" {
		if p := w.Pool(n.BootcPool); p != nil {
			if _, ok := p.slots[n.Name]; ok {
				in = p
			}
		}
	}
	if in == nil && n.Marked {
		if p := w.Pool(n.MarkPool); p != nil {
			if _, ok := p.slots[n.Name]; ok {
				in = p
			}
		}
	}
	if in == nil {
		for _, p := range w.poolList {
			if _, ok := p.slots[n.Name]; ok {
				in = p
				break
			}
		}
	}
	if in != n.slotIn {
		n.slotIn = in
		w.updateUnavailable(n)
		if w.nodeHook != nil {
			w.nodeHook(n, nil)
		}
	}
	w.forget(n)
}

// condition returns whether the pool's condition t is True for the
// pool's current generation, and its reason.
func condition(o *v1alpha1.BootcNodePool, t string) (bool, string) {
	c := apimeta.FindStatusCondition(o.Status.Conditions, t)
	if c == nil {
		return false, ""
	}
	return c.Status == "True" && c.ObservedGeneration == o.Generation, c.Reason
}

func (w *World) setConverged(p *Pool, c bool) {
	if c != p.converged {
		if c {
			w.converged++
		} else {
			w.converged--
		}
	}
	p.converged = c
}

func (w *World) removePool(p *Pool) {
	w.setConverged(p, false)
	p.live = false
	for _, name := range slices.Sorted(maps.Keys(p.slots)) {
		if n := w.nodes[name]; n != nil && n.slotIn == p {
			w.updateSlotted(n)
		}
	}
	w.poolList = slices.DeleteFunc(w.poolList, func(x *Pool) bool { return x == p })
	w.remap()
}

// remap recomputes every node's pool membership after a pool was added,
// removed or changed its selector: O(N), but pools change rarely.
func (w *World) remap() {
	for _, name := range w.NodeNames() {
		n := w.nodes[name]
		w.setPools(n, w.matching(n))
		if n.unavailIn != nil && !n.unavailIn.live {
			n.unavailIn.Unavailable--
			delete(n.unavailIn.unavailable, n.Name)
			w.inSlot--
			n.unavailIn = nil
		}
		w.updateUnavailable(n)
	}
}

// UnavailableNodes returns the names of the nodes that count as
// unavailable in the pool, sorted.
func (p *Pool) UnavailableNodes() []string {
	out := make([]string, 0, len(p.unavailable))
	for name := range p.unavailable {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// SetIntendedCordon records that someone other than bootroll (an admin's
// kubectl cordon or uncordon, a scenario event) set the node's cordon:
// from then on that is the cordon bootroll must leave the node with, at
// the end (no-leaked-cordon) and when it gives the node back from the
// episode under way (cleanup, no-stranded-node), as kubectl's last word
// replaces the state bootroll found.
func (w *World) SetIntendedCordon(node string, unschedulable bool) {
	n := w.node(node)
	n.InitialUnschedulable = unschedulable
	if n.touch.active {
		n.touch.baseUnschedulable = unschedulable
	}
}

// SetIntendedAnnotation records that someone other than bootroll (an
// operator's kubectl annotate, a scenario event) set (present) or removed
// annotation key on the node at at: when key is one of bootroll's
// protection annotations, that is how bootroll must leave it, at the end
// (no-leaked-annotation) and when it gives the node back (cleanup). The
// removal of do-not-disrupt or do-not-repair is kept with its time
// (no-churn, no-reap-while-updating).
func (w *World) SetIntendedAnnotation(node, key string, present bool, at time.Time) {
	if !slices.Contains(ownedAnnotations, key) || key == v1alpha1.AnnotationSlot {
		return
	}
	n := w.node(node)
	switch {
	case present:
	case key == v1alpha1.KarpenterDoNotDisrupt:
		n.OthersRemovedDoNotDisrupt = at
		n.lifted[vetoDoNotDisrupt] = vetoLift{pending: true}
	case key == v1alpha1.KarpenterDoNotRepair:
		n.OthersRemovedDoNotRepair = at
		n.lifted[vetoDoNotRepair] = vetoLift{pending: true}
	}
	set := func(l []string) []string {
		l = slices.DeleteFunc(slices.Clone(l), func(k string) bool { return k == key })
		if present {
			l = append(l, key)
			slices.Sort(l)
		}
		return l
	}
	n.InitialOwned = set(n.InitialOwned)
	if n.touch.active {
		n.touch.baseOwned = set(n.touch.baseOwned)
	}
}

// The vetoes someone else may lift, indexes of Node.lifted.
const (
	vetoDoNotDisrupt = iota
	vetoDoNotRepair
)

// vetoLift follows one removal of a veto annotation by someone else: the
// resourceVersion of the write that removed it, and when the controller's
// cache first held that write or a later one of the Node.
type vetoLift struct {
	// pending: the removal is announced (SetIntendedAnnotation) and its
	// write not seen yet.
	pending bool
	rv      uint64
	known   time.Time
}

// liftWritten takes the resourceVersion of the write that carried out an
// announced removal: the first write of the Node without the annotation.
func (n *Node) liftWritten(o *corev1.Node) {
	for i, key := range [...]string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair} {
		l := &n.lifted[i]
		if _, has := o.Annotations[key]; l.pending && !has {
			l.pending, l.rv = false, parseRV(o.ResourceVersion)
		}
	}
}

// ControllerCacheNode records that the controller's cache received the
// Node o at at (the twin's delivery of a watch event or an initial list:
// a fact of the simulated world, not of the controller). The first
// delivery that holds the write removing a veto, or a later one, is when
// the controller could first know of the removal: its reaction bound
// (othersLiftedVeto) runs from then. Judging from the write itself blamed
// the controller for a cache 15 s behind (explorer seed 151388 of
// post-update-emptiness-reaping, profile stale: an admin's removal of
// bootroll's do-not-disrupt mid-reboot, Karpenter's emptiness 15 s later).
// The same holds for the Node's deletion: converges gives the pool's
// status LeaveReactBound from then to stop counting a node that is gone.
func (w *World) ControllerCacheNode(o *corev1.Node, at time.Time) {
	w.cacheModelled = true
	n := w.nodes[o.Name]
	rv := parseRV(o.ResourceVersion)
	// A pool may remember the node after its BootcNode went, the World
	// forgetting it once its Node is gone too (noteDeparted).
	for _, p := range w.poolList {
		if d, ok := p.departed[o.Name]; ok && d.leftKnown.IsZero() && rv >= d.leftRV {
			d.leftKnown = at
			p.departed[o.Name] = d
		}
	}
	if n == nil {
		return
	}
	if n.leftRV != 0 && n.leftKnown.IsZero() && rv >= n.leftRV {
		n.leftKnown = at
	}
	for i := range n.lifted {
		if l := &n.lifted[i]; l.rv != 0 && l.known.IsZero() && rv >= l.rv {
			l.known = at
		}
	}
}

// parseRV reads a resourceVersion as the simulated API server writes it
// (a decimal counter); 0 when it is not one.
func parseRV(s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// pdbSelector is one PodDisruptionBudget's pod selector.
type pdbSelector struct {
	key       string // namespace/name
	namespace string
	selector  labels.Selector
	// spec is the spec.selector the selector was made from.
	spec *metav1.LabelSelector
}

// observePDB keeps the PodDisruptionBudgets' selectors: O(PDBs). A
// status write (most of a PDB's events) keeps the selector already made.
func (w *World) observePDB(t apiserver.EventType, o *policyv1.PodDisruptionBudget) {
	key := o.Namespace + "/" + o.Name
	i, found := slices.BinarySearchFunc(w.pdbs, key, func(p pdbSelector, k string) int { return strings.Compare(p.key, k) })
	if found && t != apiserver.Deleted && o.DeletionTimestamp == nil && sameSelector(w.pdbs[i].spec, o.Spec.Selector) {
		return
	}
	w.pdbs = slices.DeleteFunc(w.pdbs, func(p pdbSelector) bool { return p.key == key })
	if t == apiserver.Deleted || o.DeletionTimestamp != nil {
		return
	}
	sel := labels.Nothing()
	if o.Spec.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(o.Spec.Selector); err == nil {
			sel = s
		}
	}
	i, _ = slices.BinarySearchFunc(w.pdbs, key, func(p pdbSelector, k string) int { return strings.Compare(p.key, k) })
	w.pdbs = slices.Insert(w.pdbs, i, pdbSelector{key: key, namespace: o.Namespace, selector: sel, spec: o.Spec.Selector.DeepCopy()})
}

// sameSelector reports whether two label selectors select the same:
// metav1.LabelSelectorAsSelector reads only the lengths of absent and
// empty maps and lists, so nil and empty are the same.
func sameSelector(a, b *metav1.LabelSelector) bool {
	if a == nil || b == nil {
		return a == b
	}
	return maps.Equal(a.MatchLabels, b.MatchLabels) && slices.EqualFunc(a.MatchExpressions, b.MatchExpressions, func(x, y metav1.LabelSelectorRequirement) bool {
		return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
	})
}

// PDBsCovering returns the namespace/name of the PodDisruptionBudgets
// whose selector matches the pod, sorted: O(PDBs).
func (w *World) PDBsCovering(p *corev1.Pod) []string {
	var out []string
	set := labels.Set(p.Labels)
	for _, b := range w.pdbs {
		if b.namespace == p.Namespace && b.selector.Matches(set) {
			out = append(out, b.key)
		}
	}
	return out
}

// podRemoval reports whether the event removes a pod that was bound to a
// node and not terminating yet (it gets a deletionTimestamp or goes), and
// the node it was on and whether a drain must remove it; call it before
// Observe applies the event.
func (w *World) podRemoval(ev apiserver.Event) (node string, workload, ok bool) {
	o, isPod := ev.Object.(*corev1.Pod)
	if !isPod {
		return "", false, false
	}
	info := w.pods[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}]
	if info == nil || info.terminating {
		return "", false, false
	}
	if ev.Type == apiserver.Deleted || o.DeletionTimestamp != nil {
		return info.node, info.workload, true
	}
	return "", false, false
}

// displayPhase is a BootcNode's phase as the timeline shows it: the stored
// phase, except that a node waiting for its turn (Pending, or nothing
// stored yet) shows Staging while its daemon reports staging its desired
// image and Staged once it reports that image staged. bootroll derives
// those two from the daemon's report and does not store them; this is the
// world's own reading of the report (it calls no controller code), used
// for the report's phase counts only: no invariant judges by it.
func displayPhase(o *v1alpha1.BootcNode) v1alpha1.NodePhase {
	switch o.Status.Phase {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseStaging, v1alpha1.PhaseStaged:
	default:
		return o.Status.Phase
	}
	want := digestOf(o.Spec.DesiredImage)
	switch {
	case want == "" || (o.Status.Booted != nil && o.Status.Booted.Digest == want):
	case o.Status.Staged != nil && o.Status.Staged.Digest == want:
		return v1alpha1.PhaseStaged
	case o.Status.Daemon.Phase == v1alpha1.DaemonStaging:
		return v1alpha1.PhaseStaging
	}
	return v1alpha1.PhasePending
}

// orderStands reports whether o carries a boot order the daemon acts on:
// spec.bootOrder names spec.desiredImage and is not withdrawn (the API's
// documented rule, read here on its own).
func orderStands(o *v1alpha1.BootcNode) bool {
	b := o.Spec.BootOrder
	return b != nil && !b.Withdrawn && b.Image != "" && b.Image == o.Spec.DesiredImage
}
