package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/scenario"
)

// group is a node group of the scenario and the nodes it has now.
type group struct {
	spec  *scenario.NodeGroup
	boot  *scenario.Image
	alloc res
	next  int   // index of the next node added
	live  []int // indices of the existing nodes, ascending
	// decorate, when set, changes a Node object before it is created
	// (karpenter.go: a launched node's labels and taints).
	decorate func(*corev1.Node)
}

// node is one Node: what the API says of it, what runs on it, and its host.
type node struct {
	name  string
	uid   types.UID
	g     *group
	index int
	used  res
	pods  []*pod // bound pods, in binding order
	host  *host
	gone  bool

	// The API's view, kept in sync by the watch.
	labels        map[string]string
	ready         bool
	unschedulable bool
	tainted       bool // has a NoSchedule or NoExecute taint
	deleting      bool

	// pdbBlockedSince is when an eviction of a pod of this node was
	// refused by a PodDisruptionBudget with no eviction admitted since;
	// zero when none is (PDBBlockedDrain).
	pdbBlockedSince time.Time

	schedulable bool   // counted in SchedulableCapacity and in the heaps
	heapPos     []int  // position in each selector's heap, -1 when absent
	tie         uint64 // the scheduler's random tiebreak (drawTie)
	readySince  metav1.Time
	// evictH is the node lifecycle controller's pending eviction of the
	// pods of this NotReady node (actions.go).
	evictH *engine.Handle
	// graceH is the node lifecycle controller's pending Ready=Unknown of a
	// node whose kubelet died (actions.go); lastHeartbeat is the kubelet's
	// last status post.
	graceH        *engine.Handle
	lastHeartbeat metav1.Time
	// readyReason is the reason of the last Ready write (setReady).
	readyReason string
	// conds are the Node conditions besides Ready it reports, sorted by
	// type: its group's, changed by health faults (health.go).
	conds []corev1.NodeCondition
}

func (n *node) free() res { return n.g.alloc.minus(n.used) }

// before orders nodes by group, then index: the scheduler's last
// tiebreak.
func (n *node) before(m *node) bool {
	if n.g != m.g {
		return n.g.spec.Name < m.g.spec.Name
	}
	return n.index < m.index
}

// createNode creates node i of group g with its host and DaemonSet pods.
// Initial nodes (Start) get Running DaemonSet pods and no trace line.
func (c *Cluster) createNode(ctx context.Context, g *group, i int, initial bool) (*node, error) {
	name := scenario.NodeName(g.spec.Name, i)
	if c.nodes[name] != nil {
		return nil, fmt.Errorf("cluster: node %s exists already", name)
	}
	n := &node{name: name, g: g, index: i, heapPos: make([]int, len(c.sels))}
	for j := range n.heapPos {
		n.heapPos[j] = -1
	}
	n.host = newHost(c, n)
	n.readySince = metav1.NewTime(c.kubeletNow(name))
	n.conds = c.groupConditions(g, c.kubeletNow(name))
	labels := map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux"}
	for k, v := range g.spec.Labels {
		labels[k] = v
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Unschedulable: i < g.spec.Cordoned},
		Status:     c.nodeStatus(n, true, ""),
	}
	for _, t := range g.spec.Taints {
		obj.Spec.Taints = append(obj.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	if g.decorate != nil {
		g.decorate(obj)
		labels = obj.Labels
	}
	c.nodes[name] = n
	c.sorted = nil
	g.live = append(g.live, i) // indices only grow
	// Not echoed: obj becomes the stored Node (the server keeps a typed
	// object given with NoEcho), which syncNode reads and nothing here
	// modifies; the echo deep-copied the whole Node back.
	if err := c.c.Create(ctx, obj, apiserver.NoEcho); err != nil {
		delete(c.nodes, name)
		g.live = g.live[:len(g.live)-1]
		return nil, fmt.Errorf("cluster: creating node %s: %w", name, err)
	}
	n.uid = obj.UID
	c.syncNode(n, obj) // the watch did it already unless a delivery was under way
	for _, ds := range c.daemonSet {
		if subset(ds.spec.NodeSelector, labels) {
			if err := c.createDaemonPod(ctx, ds, n, initial); err != nil {
				return nil, err
			}
		}
	}
	if !initial {
		c.trace("node/created", "node/"+name, map[string]any{"group": g.spec.Name, "booted": n.host.booted.ref})
	}
	return n, nil
}

// nodeStatus is the Node status the kubelet of n reports.
func (c *Cluster) nodeStatus(n *node, ready bool, reason string) corev1.NodeStatus {
	now := metav1.NewTime(c.kubeletNow(n.name))
	cond := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: n.readySince,
	}
	switch {
	case !ready && reason == ReasonNodeStatusUnknown:
		// The node lifecycle controller's write: the kubelet stopped
		// posting; the last heartbeat is the one before.
		cond.Status, cond.Message = corev1.ConditionUnknown, "Kubelet stopped posting node status."
		cond.Reason, cond.LastHeartbeatTime = reason, n.lastHeartbeat
	case !ready:
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, reason, "node is down: "+reason
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.g.alloc.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.g.alloc.mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(n.g.alloc.pods, resource.DecimalSI),
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Conditions:  c.conditions(n, cond, now),
		NodeInfo: corev1.NodeSystemInfo{
			BootID:          n.host.bootID(),
			OSImage:         n.host.booted.ref,
			OperatingSystem: "linux",
			Architecture:    "amd64",
		},
	}
}

// setReady writes the node's Ready condition.
func (c *Cluster) setReady(n *node, ready bool, reason string) {
	n.graceH.Cancel()
	n.graceH = nil
	if reason != ReasonNodeStatusUnknown {
		n.lastHeartbeat = metav1.NewTime(c.kubeletNow(n.name))
		n.readySince = n.lastHeartbeat
	} else {
		// The node lifecycle controller's write, on the control plane's
		// clock.
		n.readySince = metav1.NewTime(c.eng.Now().Truncate(time.Second))
	}
	n.readyReason = reason
	c.writeNodeStatus(n, c.nodeStatus(n, ready, reason), "writing the status of node ")
	if ready {
		if c.tracing() {
			c.trace("node/ready", "node/"+n.name, map[string]any{"bootID": n.host.bootID()})
		}
	} else {
		if c.tracing() {
			c.trace("node/notready", "node/"+n.name, map[string]any{"reason": reason})
		}
	}
}

// writeNodeStatus writes the Node status of n, as the kubelet does, and
// takes the API's view of the node from the stored Node: read shared, not
// echoed into a deep copy of the whole Node (a copy per status write).
func (c *Cluster) writeNodeStatus(n *node, st corev1.NodeStatus, what string) {
	ctx := context.Background()
	obj := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Status: st}
	if err := c.c.Status().Update(ctx, obj, apiserver.NoEcho); err != nil {
		must(err, what+n.name)
	}
	stored := &c.scratchNode
	if err := c.c.Get(ctx, client.ObjectKey{Name: n.name}, stored, apiserver.Shared); err != nil {
		must(err, "reading node "+n.name)
	}
	if stored.UID == n.uid {
		c.syncNode(n, stored)
	}
}

// syncNode takes the API's view of the node from obj.
func (c *Cluster) syncNode(n *node, obj *corev1.Node) {
	n.ready = false
	for _, cond := range obj.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			n.ready = cond.Status == corev1.ConditionTrue
		}
	}
	n.unschedulable = obj.Spec.Unschedulable
	if !n.unschedulable {
		c.unblock(n) // the drain was given up
	}
	n.deleting = obj.DeletionTimestamp != nil
	n.tainted = false
	for _, t := range obj.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			n.tainted = true
		}
	}
	if !mapsEqual(n.labels, obj.Labels) {
		n.labels = make(map[string]string, len(obj.Labels))
		for k, v := range obj.Labels {
			n.labels[k] = v
		}
		// A relabelled node may match other selectors: leave every heap so
		// that refreshNode re-adds it where it belongs.
		c.leaveHeaps(n)
	}
	c.refreshNode(n)
}

// refreshNode puts the node in or out of the scheduler's heaps and the
// capacity counters after its schedulability may have changed.
func (c *Cluster) refreshNode(n *node) {
	want := !n.gone && n.ready && !n.unschedulable && !n.tainted && !n.deleting
	if want != n.schedulable {
		n.schedulable = want
		if want {
			c.drawTie(n)
			c.schedCPU += n.g.alloc.cpu
			c.schedMem += n.g.alloc.mem
			c.schedNodes++
		} else {
			c.schedCPU -= n.g.alloc.cpu
			c.schedMem -= n.g.alloc.mem
			c.schedNodes--
		}
	}
	for _, s := range c.sels {
		in := n.heapPos[s.id] >= 0
		should := want && subset(s.labels, n.labels)
		switch {
		case should && !in:
			s.push(n)
			// Pods that fit nowhere may fit here.
			c.capEpoch++
			c.kick()
		case !should && in:
			s.remove(n)
		}
	}
}

func (c *Cluster) leaveHeaps(n *node) {
	for _, s := range c.sels {
		if n.heapPos[s.id] >= 0 {
			s.remove(n)
		}
	}
}

// AddNodes adds count nodes to a group, numbered on from the group's
// highest index so far. They join Ready, with their DaemonSet pods, and
// their daemons run at once (DaemonRestarted).
func (c *Cluster) AddNodes(ctx context.Context, group string, count int) ([]string, error) {
	g := c.groups[group]
	if g == nil {
		return nil, fmt.Errorf("cluster: adding nodes: no node group %q", group)
	}
	var names []string
	for range count {
		n, err := c.createNode(ctx, g, g.next, false)
		if err != nil {
			return names, err
		}
		g.next++
		names = append(names, n.name)
		n.host.startDaemon()
	}
	return names, nil
}

// RemoveNodes deletes count nodes of a group, the highest-numbered first.
// Their pods are deleted with them (as the pod garbage collector does), and
// the workloads' controllers create replacements that the scheduler places
// elsewhere. A Node with finalizers stays until another party removes them.
func (c *Cluster) RemoveNodes(ctx context.Context, group string, count int) ([]string, error) {
	g := c.groups[group]
	if g == nil {
		return nil, fmt.Errorf("cluster: removing nodes: no node group %q", group)
	}
	var names []string
	for i := len(g.live) - 1; i >= 0 && len(names) < count; i-- {
		n := c.nodes[scenario.NodeName(g.spec.Name, g.live[i])]
		if n.deleting {
			continue
		}
		names = append(names, n.name)
	}
	for _, name := range names {
		n := c.nodes[name]
		if err := c.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
			return names, fmt.Errorf("cluster: removing node %s: %w", name, err)
		}
		if err := c.c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); apierrors.IsNotFound(err) {
			c.nodeGone(n)
		}
	}
	return names, nil
}

// nodeGone takes a deleted Node out of the model.
func (c *Cluster) nodeGone(n *node) {
	if n.gone {
		return
	}
	n.gone = true
	c.unblock(n)
	c.sorted = nil
	n.host.remove()
	c.refreshNode(n)
	if i, ok := slices.BinarySearch(n.g.live, n.index); ok {
		n.g.live = slices.Delete(n.g.live, i, i+1)
	}
	n.evictH.Cancel()
	n.graceH.Cancel()
	c.trace("node/removed", "node/"+n.name, map[string]any{"pods": len(n.pods)})
	for _, p := range slices.Clone(n.pods) {
		c.forceDelete(p)
	}
}

// CrashNode takes a node down hard: the daemon dies, an in-flight stage or
// reboot request is lost, the Node turns NotReady and its pods unready
// (they stay bound, as on a node whose kubelet died, until the node
// lifecycle controller evicts them after NotReadyEvictionTimeout). After downFor the host boots its default deployment
// (a staged one is lost, a queued rollback boots) and the node is Ready
// again; the daemon starts after host.daemonStartup. Crashing a node that
// is down already keeps it down for at least downFor more.
func (c *Cluster) CrashNode(ctx context.Context, node string, downFor time.Duration) error {
	n := c.nodes[node]
	if n == nil || n.gone {
		return fmt.Errorf("cluster: crashing node %s: no such node", node)
	}
	n.host.crash(downFor, "node/crash")
	return nil
}

// CrashDaemon kills the node's daemon process: an in-flight stage is
// aborted (the download dies with it; nothing is staged), DaemonDown is
// called now, and the daemon starts again after host.daemonStartup.
func (c *Cluster) CrashDaemon(node string) error {
	return c.CrashDaemonFor(node, 0)
}

// CrashDaemonFor is CrashDaemon with the daemon staying down for downFor
// before it starts (and then takes host.daemonStartup to run).
func (c *Cluster) CrashDaemonFor(node string, downFor time.Duration) error {
	n := c.nodes[node]
	if n == nil || n.gone {
		return fmt.Errorf("cluster: crashing the daemon of node %s: no such node", node)
	}
	if !n.host.daemonUp {
		return fmt.Errorf("cluster: crashing the daemon of node %s: %w", node, ErrNotRunning)
	}
	h := n.host
	h.abortStage("daemon crash")
	h.daemonDown("daemon crash")
	h.scheduleDaemon(downFor)
	return nil
}

// nodeDown marks the node NotReady and its pods unready; the node
// lifecycle controller evicts them if it stays NotReady.
func (c *Cluster) nodeDown(n *node, reason string) {
	c.setReady(n, false, reason)
	c.notReadyEviction(n)
	c.podsNotReady(n)
}

// podsNotReady marks the started pods of the node unready.
func (c *Cluster) podsNotReady(n *node) {
	for _, p := range slices.Clone(n.pods) {
		p.startH.Cancel()
		if p.started && !p.terminating {
			c.writePodStatus(p, false)
			c.setHealthy(p, false)
		}
	}
}

// nodeUp marks the node Ready; its pods start again and pods deleted while
// it was down finish terminating.
func (c *Cluster) nodeUp(n *node) {
	n.evictH.Cancel()
	n.evictH = nil
	if n.graceH.Pending() {
		// The node came back before anyone noticed it was gone: its
		// kubelet starts the pods again, which are not ready meanwhile.
		c.podsNotReady(n)
	}
	c.setReady(n, true, "")
	for _, p := range slices.Clone(n.pods) {
		switch {
		case p.terminating && p.awaitNode:
			c.finishPod(p)
		case !p.terminating:
			c.startPodAfter(p, PodStartup)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
