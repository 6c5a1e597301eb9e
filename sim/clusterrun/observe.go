package clusterrun

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/invariant"
)

// Convert turns an informer notification into the checker's event: t is
// the event type, old the object before (nil for Added), obj the object
// after (for Deleted its last state, possibly a tombstone). ok is false
// for what is not an API object.
func Convert(t apiserver.EventType, old, obj any) (apiserver.Event, bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok || o == nil {
		return apiserver.Event{}, false
	}
	ev := apiserver.Event{Type: t, Object: o}
	if t == apiserver.Modified {
		if po, ok := old.(client.Object); ok {
			ev.Old = po
		}
	}
	return ev, true
}

// PodRemoval reports whether the event is a pod going: it starts
// terminating, or it is deleted without having been terminating; key is
// its namespace/name.
func PodRemoval(ev apiserver.Event) (key string, ok bool) {
	p, isPod := ev.Object.(*corev1.Pod)
	if !isPod {
		return "", false
	}
	key = p.Namespace + "/" + p.Name
	switch ev.Type {
	case apiserver.Deleted:
		// A pod deleted after it was seen terminating was counted then.
		return key, p.DeletionTimestamp == nil
	case apiserver.Modified:
		old, _ := ev.Old.(*corev1.Pod)
		return key, p.DeletionTimestamp != nil && (old == nil || old.DeletionTimestamp == nil)
	}
	return key, false
}

// RebootStarted reports whether the event is a Node that the host-mode
// daemon has just marked rebooting (localcluster.RebootingAnnotation).
func RebootStarted(ev apiserver.Event) (node string, ok bool) {
	n, isNode := ev.Object.(*corev1.Node)
	if !isNode || ev.Type == apiserver.Deleted {
		return "", false
	}
	if n.Annotations[localcluster.RebootingAnnotation] != "true" {
		return "", false
	}
	if old, _ := ev.Old.(*corev1.Node); old != nil && old.Annotations[localcluster.RebootingAnnotation] == "true" {
		return "", false
	}
	return n.Name, true
}

// PDBState is the checker's view of a PodDisruptionBudget, from the
// status the disruption controller writes.
func PDBState(p *policyv1.PodDisruptionBudget) facts.PDBState {
	return facts.PDBState{
		Namespace: p.Namespace, Name: p.Name,
		Healthy:            int(p.Status.CurrentHealthy),
		DesiredHealthy:     int(p.Status.DesiredHealthy),
		ExpectedPods:       int(p.Status.ExpectedPods),
		DisruptionsAllowed: int(p.Status.DisruptionsAllowed),
		Violated:           p.Status.CurrentHealthy < p.Status.DesiredHealthy,
	}
}

// hostImage is what a HostImage says a node boots: its digest, or its
// image reference.
func hostImage(h *v1alpha1.HostImage) string {
	if h == nil {
		return ""
	}
	if h.Digest != "" {
		return h.Digest
	}
	return h.Image
}

// Observer keeps what the checker's sources need from the watch events
// and hands every event to the checker; it is used from one goroutine.
type Observer struct {
	chk *invariant.Checker
	// asked says whether bootroll (the controller or the daemon, through
	// their proxies) asked to remove a pod; refused counts the evictions
	// PDBs refused.
	asked   func(key string) bool
	refused func() uint64
	now     func() time.Time

	bootc    map[string]*v1alpha1.BootcNode
	pdbs     map[string]facts.PDBState
	removals uint64
	// crashed are the nodes a nodeCrash or powerCycle fault marked
	// rebooting: that is not a reboot of bootroll's.
	crashed map[string]bool
	// Reboots counts the reboots seen.
	Reboots int
}

// NewObserver returns an observer; Sources are the checker's sources
// that read it, and Attach gives it the checker.
func NewObserver(now func() time.Time, asked func(string) bool, refused func() uint64) *Observer {
	return &Observer{asked: asked, refused: refused, now: now, bootc: map[string]*v1alpha1.BootcNode{}, pdbs: map[string]facts.PDBState{}}
}

// Attach gives the observer the checker it feeds.
func (o *Observer) Attach(chk *invariant.Checker) { o.chk = chk }

// Sources are the checker's sources answered from the watch.
func (o *Observer) Sources() invariant.Sources {
	return invariant.Sources{
		Now:         o.now,
		Booted:      o.Booted,
		PDBs:        o.PDBs,
		PodRemovals: func() uint64 { return o.removals },
		EvictionsRefused: func() uint64 {
			if o.refused == nil {
				return 0
			}
			return o.refused()
		},
	}
}

// Booted is what the node's daemon last reported booted.
func (o *Observer) Booted(node string) string {
	if bn := o.bootc[node]; bn != nil {
		return hostImage(bn.Status.Booted)
	}
	return ""
}

// PDBs are the budgets' states, sorted by namespace/name.
func (o *Observer) PDBs() []facts.PDBState {
	out := make([]facts.PDBState, 0, len(o.pdbs))
	for _, p := range o.pdbs {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b facts.PDBState) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// rebootTarget is the image a node reboots into: the standing boot
// order's, else the staged deployment's, else the desired image.
func rebootTarget(bn *v1alpha1.BootcNode) string {
	if bn == nil {
		return ""
	}
	if o := bn.Spec.BootOrder; o != nil && !o.Withdrawn {
		if o.Rollback {
			return hostImage(bn.Status.RollbackImage)
		}
		return o.Image
	}
	if s := hostImage(bn.Status.Staged); s != "" {
		return s
	}
	return bn.Spec.DesiredImage
}

// Apply hands one event to the checker, after telling it what the event
// means beyond the object: a pod removal bootroll asked for counts as
// bootroll's, and a node the daemon marks rebooting is a reboot.
func (o *Observer) Apply(ev apiserver.Event) {
	if key, ok := PodRemoval(ev); ok && o.asked != nil && o.asked(key) {
		o.removals++
	}
	if node, ok := RebootStarted(ev); ok && !o.crashed[node] {
		o.Reboots++
		bn := o.bootc[node]
		o.chk.Reboot(node, o.Booted(node), rebootTarget(bn))
	}
	switch x := ev.Object.(type) {
	case *v1alpha1.BootcNode:
		if ev.Type == apiserver.Deleted {
			delete(o.bootc, x.Name)
		} else {
			o.bootc[x.Name] = x
		}
	case *policyv1.PodDisruptionBudget:
		key := x.Namespace + "/" + x.Name
		if ev.Type == apiserver.Deleted {
			delete(o.pdbs, key)
		} else {
			o.pdbs[key] = PDBState(x)
		}
	}
	o.chk.Observe(ev)
}
