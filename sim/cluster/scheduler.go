package cluster

import (
	"container/heap"
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// The scheduler keeps, for each distinct workload nodeSelector, a heap of
// the schedulable nodes that selector matches, ordered by free CPU (most
// first), then free memory, then free pod slots, then a random tiebreak
// (node.tie), as kube-scheduler picks at random among the nodes with the
// best score. Placing a pod looks at the top of
// its selector's heap: when the top lacks CPU no node has enough, so the
// common case costs O(log N) per pod whatever the cluster size. Only when
// the top has the CPU but lacks memory or pod slots does it scan the heap,
// and a workload that fits nowhere is not tried again until capacity frees
// up (capEpoch), like kube-scheduler's unschedulable queue.

// selector is one distinct workload nodeSelector and its heap.
type selector struct {
	id     int
	key    string
	labels map[string]string
	nodes  nodeHeap
}

// selectorFor returns the selector of a nodeSelector, adding it if new.
func (c *Cluster) selectorFor(labels map[string]string) *selector {
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		keys = append(keys, k+"="+v)
	}
	slices.Sort(keys)
	key := strings.Join(keys, ",")
	for _, s := range c.sels {
		if s.key == key {
			return s
		}
	}
	s := &selector{id: len(c.sels), key: key, labels: labels}
	s.nodes.id = s.id
	c.sels = append(c.sels, s)
	return s
}

func (s *selector) push(n *node)   { heap.Push(&s.nodes, n) }
func (s *selector) remove(n *node) { heap.Remove(&s.nodes, n.heapPos[s.id]) }

// nodeHeap is a heap of nodes that records each node's position in
// node.heapPos[id].
type nodeHeap struct {
	id    int
	items []*node
}

func (h *nodeHeap) Len() int           { return len(h.items) }
func (h *nodeHeap) Less(i, j int) bool { return better(h.items[i], h.items[j]) }
func (h *nodeHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].heapPos[h.id] = i
	h.items[j].heapPos[h.id] = j
}

func (h *nodeHeap) Push(x any) {
	n := x.(*node)
	n.heapPos[h.id] = len(h.items)
	h.items = append(h.items, n)
}

func (h *nodeHeap) Pop() any {
	last := len(h.items) - 1
	n := h.items[last]
	h.items[last] = nil
	h.items = h.items[:last]
	n.heapPos[h.id] = -1
	return n
}

// better is the scheduler's preference: more free CPU, more free memory,
// more free pod slots, then the random tiebreak, then group and index.
func better(a, b *node) bool {
	fa, fb := a.free(), b.free()
	switch {
	case fa.cpu != fb.cpu:
		return fa.cpu > fb.cpu
	case fa.mem != fb.mem:
		return fa.mem > fb.mem
	case fa.pods != fb.pods:
		return fa.pods > fb.pods
	case a.tie != b.tie:
		return a.tie > b.tie
	}
	return a.before(b)
}

// drawTie gives n a new random tiebreak. kube-scheduler's selectHost picks
// uniformly among the nodes with the best score; a node's tiebreak is
// drawn when it joins the heaps and again whenever its free capacity
// changes, so among nodes alike the top of a heap is any of them with
// equal chance. A tiebreak by name alone put the pod evicted from one node
// on the next node in name order, which is also the next one bootroll
// drains, so in the twin every such pod was evicted twice (the fidelity
// table's daemon-crash-while-staging row; docs/decisions.md).
func (c *Cluster) drawTie(n *node) { n.tie = c.tieRng.Uint64() }

// usedChanged restores the heaps after the node's free capacity changed.
func (c *Cluster) usedChanged(n *node) {
	c.drawTie(n)
	for _, s := range c.sels {
		if i := n.heapPos[s.id]; i >= 0 {
			heap.Fix(&s.nodes, i)
		}
	}
}

// pick returns the node to bind a pod with requests req and selector s
// to, or nil when none fits.
func (c *Cluster) pick(s *selector, req res) *node {
	if len(s.nodes.items) == 0 {
		return nil
	}
	top := s.nodes.items[0]
	free := top.free()
	if free.covers(req) {
		return top
	}
	if free.cpu < req.cpu {
		return nil
	}
	var best *node
	for _, n := range s.nodes.items {
		if n.free().covers(req) && (best == nil || better(n, best)) {
			best = n
		}
	}
	return best
}

// kick schedules a scheduling pass when pods are pending and none is
// scheduled yet.
func (c *Cluster) kick() {
	if c.pending > 0 && !c.sched.Pending() && c.started {
		c.sched = c.eng.After(ScheduleDelay, "cluster/schedule", c.schedulePass)
	}
}

// enqueue adds a pending pod to its workload's scheduling queue.
func (c *Cluster) enqueue(p *pod) {
	p.w.queue = append(p.w.queue, p)
	c.kick()
}

// schedulePass binds the pending pods, workload by workload in scenario
// order and each workload's pods in creation order. Pods of one workload
// are alike, so the first that fits nowhere ends the workload's turn.
func (c *Cluster) schedulePass() {
	for _, w := range c.wlOrder {
		if w.blocked && w.blockedAt == c.capEpoch {
			continue
		}
		for w.head < len(w.queue) {
			p := w.queue[w.head]
			if p.gone || p.terminating || p.node != nil {
				w.queue[w.head] = nil
				w.head++
				continue
			}
			n := c.pick(w.sel, w.req)
			if n == nil {
				if !w.blocked {
					c.trace("workload/unschedulable", "deployment/"+WorkloadNamespace+"/"+w.spec.Name, map[string]any{"pending": len(w.queue) - w.head})
				}
				w.blocked, w.blockedAt = true, c.capEpoch
				break
			}
			w.blocked = false
			w.queue[w.head] = nil
			w.head++
			c.bind(p, n)
		}
		if w.head == len(w.queue) {
			w.queue, w.head = w.queue[:0], 0
		}
	}
}

// place accounts a pod on a node.
func (c *Cluster) place(p *pod, n *node) {
	p.node = n
	p.nodeIdx = len(n.pods)
	n.pods = append(n.pods, p)
	n.used = n.used.plus(p.req)
	c.usedChanged(n)
	if p.w != nil && !p.terminating {
		c.pending--
	}
}

// unplace takes a pod off its node and frees its resources.
func (c *Cluster) unplace(p *pod) {
	n := p.node
	last := len(n.pods) - 1
	n.pods[p.nodeIdx] = n.pods[last]
	n.pods[p.nodeIdx].nodeIdx = p.nodeIdx
	n.pods[last] = nil
	n.pods = n.pods[:last]
	n.used = n.used.minus(p.req)
	if !n.gone {
		c.usedChanged(n)
		c.capEpoch++
		c.kick()
	}
}

// bind binds a pending pod to n, as the scheduler's Binding does, and
// starts it.
func (c *Cluster) bind(p *pod, n *node) {
	c.place(p, n)
	// One field, as the scheduler's Binding writes it.
	obj := &c.scratch
	*obj = corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name}}
	if err := c.c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, bindPatch(n.name)), apiserver.NoEcho); err != nil {
		must(err, "binding pod "+p.ns+"/"+p.name)
	}
	if c.tracing() {
		c.trace("pod/scheduled", "pod/"+p.ns+"/"+p.name, map[string]any{"node": n.name})
	}
	if n.host.kubeletRuns() {
		c.startPodAfter(p, PodStartup)
	}
}
