package invariant

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
)

// World is what the invariants know of the cluster, kept up to date from
// the API server's watch events: per Node its labels, cordon and slot
// marker, per BootcNode its pool and phase, per pool its selector,
// maxUnavailable, member count, unavailable count and conditions. Every
// watch event costs O(pools), so checks after each engine event stay O(1)
// in the number of nodes.
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
	marked      int // nodes that carry bootroll's slot marker

	podsChanged bool

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

	// HasBootcNode is true while the BootcNode exists.
	HasBootcNode bool
	BootcPool    string
	Phase        v1alpha1.NodePhase
	DesiredImage string
	FailedImage  string
	BootID       string
	BootedDigest string
	// LastRebootImage is status.daemon.lastReboot.image.
	LastRebootImage string

	pools     []*Pool // live pools whose selector matches
	unavailIn *Pool   // the pool the node counts as unavailable in
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
	Summary            string
	TargetImage        string
	// Members counts the Nodes the selector matches that are not being
	// deleted, as the controller counts them for maxUnavailable.
	Members int
	// Unavailable counts the member nodes unavailable because of bootroll.
	Unavailable int

	unavailable map[string]struct{}
	live        bool
	isDirty     bool
	converged   bool
	overLimit   bool
}

// ownedAnnotations are the Node annotations that bootroll adds and must
// remove.
var ownedAnnotations = []string{v1alpha1.AnnotationSlot, v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}

// numPhases is len(v1alpha1.AllPhases); an init check keeps them equal.
const numPhases = 10

func init() {
	if len(v1alpha1.AllPhases) != numPhases {
		panic("invariant: numPhases is not len(v1alpha1.AllPhases)")
	}
}

// NewWorld returns an empty world.
func NewWorld() *World {
	return &World{nodes: map[string]*Node{}, pools: map[string]*Pool{}}
}

// Observe applies one watch event.
func (w *World) Observe(ev apiserver.Event) {
	switch o := ev.Object.(type) {
	case *corev1.Node:
		w.observeNode(ev.Type, o)
	case *v1alpha1.BootcNode:
		w.observeBootcNode(ev.Type, o)
	case *v1alpha1.BootcNodePool:
		w.observePool(ev.Type, o)
	case *corev1.Pod:
		w.podsChanged = true
	}
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

func (w *World) observeNode(t apiserver.EventType, o *corev1.Node) {
	n := w.node(o.Name)
	if t == apiserver.Deleted {
		w.setMarked(n, false, "")
		n.Exists, n.Deleting = false, false
		w.setPools(n, nil)
		w.updateUnavailable(n)
		w.forget(n)
		return
	}
	owned := ownedOf(o.Annotations)
	if t == apiserver.Added || !n.Exists {
		n.InitialUnschedulable = o.Spec.Unschedulable
		n.InitialOwned = owned
	}
	n.Exists = true
	n.Deleting = o.DeletionTimestamp != nil
	n.Unschedulable = o.Spec.Unschedulable
	n.OSNotReady = false
	for _, t := range o.Spec.Taints {
		if t.Key == v1alpha1.TaintOSNotReady {
			n.OSNotReady = true
		}
	}
	n.Owned = owned
	mark, marked := o.Annotations[v1alpha1.AnnotationSlot]
	w.setMarked(n, marked, mark)
	if t == apiserver.Added || !labels.Equals(n.Labels, o.Labels) || n.Deleting {
		n.Labels = o.Labels
		w.setPools(n, w.matching(n))
	}
	w.updateUnavailable(n)
}

func (w *World) setMarked(n *Node, marked bool, pool string) {
	if marked != n.Marked {
		if marked {
			w.marked++
		} else {
			w.marked--
		}
	}
	n.Marked, n.MarkPool = marked, pool
}

// forget drops a node that has neither a Node nor a BootcNode any more.
func (w *World) forget(n *Node) {
	if !n.Exists && !n.HasBootcNode {
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
			w.markDirty(p)
		}
	}
	for _, p := range pools {
		if !slices.Contains(n.pools, p) {
			p.Members++
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

// updateUnavailable recomputes whether the node is unavailable because of
// bootroll and in which pool it counts: the pool its slot marker names, else
// its BootcNode's pool.
func (w *World) updateUnavailable(n *Node) {
	var in *Pool
	if n.Exists && (n.Marked || holdsSlot(n.Phase) && !n.OSNotReady) {
		name := n.BootcPool
		if n.Marked && n.MarkPool != "" {
			name = n.MarkPool
		}
		in = w.Pool(name)
		if in == nil {
			// A marker naming no pool still makes the node unavailable;
			// count it in its BootcNode's pool.
			in = w.Pool(n.BootcPool)
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
	}
	n.unavailIn = in
}

func (w *World) observeBootcNode(t apiserver.EventType, o *v1alpha1.BootcNode) {
	n := w.node(o.Name)
	from := n.Phase
	if !n.HasBootcNode {
		from = ""
	}
	if t == apiserver.Deleted {
		n.HasBootcNode = false
		w.countPhase(n, from, "")
		n.Phase, n.BootcPool = "", ""
		w.updateUnavailable(n)
		w.forget(n)
		return
	}
	to := o.Status.Phase
	if to == "" {
		to = v1alpha1.PhasePending
	}
	n.HasBootcNode = true
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
	n.Phase = to
	w.countPhase(n, from, to)
	w.updateUnavailable(n)
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
		if p != nil && p.live {
			w.removePool(p)
		}
		return
	}
	if p == nil || !p.live {
		p = &Pool{Name: o.Name, unavailable: map[string]struct{}{}, live: true}
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
		w.remap()
	} else if sel := labels.SelectorFromSet(o.Spec.NodeSelector); sel.String() != p.Selector.String() {
		p.Selector = sel
		w.remap()
	}
	p.MaxUnavailable = o.Spec.Rollout.MaxUnavailable
	p.Generation = o.Generation
	p.ObservedGeneration = o.Status.ObservedGeneration
	p.Summary = o.Status.Summary
	p.TargetImage = o.Status.TargetImage
	p.UpToDate, p.UpToDateReason = condition(o, v1alpha1.ConditionUpToDate)
	p.Halted, p.HaltedReason = condition(o, v1alpha1.ConditionHalted)
	w.markDirty(p)
	w.setConverged(p, p.ObservedGeneration == p.Generation && (p.UpToDate || (p.Halted && p.HaltedReason != "")))
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
// from then on that is the cordon bootroll must leave the node with.
func (w *World) SetIntendedCordon(node string, unschedulable bool) {
	w.node(node).InitialUnschedulable = unschedulable
}
