package fakekarpenter

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// stateNode is a node as Karpenter's cluster state sees it: a NodeClaim
// with its Node once registered, or a Node that no NodeClaim owns.
type stateNode struct {
	name  string // the Node's name; "" for a NodeClaim not launched yet
	claim *nodeClaim
	node  *corev1.Node
	pool  *nodePool // the NodePool of the node's (or claim's) label; nil if unknown
	pods  []*corev1.Pod

	// Derived from the above by derive, so that the decisions' inner
	// loops read sums instead of resource maps: the requests of pods[i],
	// the sums over the pods that hold resources (not terminal) and over
	// those of them that DaemonSets own, the pods that would have to move,
	// and the Node's allocatable.
	reqs    []res
	usedR   res
	dsR     res
	resched []*corev1.Pod
	alloc   res
}

// derive computes the derived fields from node and pods. A stateNode is
// not changed after derive: a change builds a new one, so that a command
// that keeps stateNodes across reconciles sees what it decided on.
func (sn *stateNode) derive() {
	sn.reqs = make([]res, len(sn.pods))
	sn.usedR, sn.dsR, sn.resched = res{}, res{}, nil
	for i, p := range sn.pods {
		r := podRequests(p)
		sn.reqs[i] = r
		if !terminal(p) {
			sn.usedR = sn.usedR.plus(r)
			if ownedByDaemonSet(p) {
				sn.dsR = sn.dsR.plus(r)
			}
		}
		if reschedulable(p) {
			sn.resched = append(sn.resched, p)
		}
	}
	if sn.node != nil {
		sn.alloc = fromList(sn.node.Status.Allocatable)
	}
}

// annotations are the Node's once it has registered, the NodeClaim's
// before: a NodeClaim's do-not-disrupt counts only until registration
// (which copies it to the Node).
func (sn *stateNode) annotations() map[string]string {
	if sn.node != nil {
		return sn.node.Annotations
	}
	if sn.claim != nil {
		return sn.claim.obj.GetAnnotations()
	}
	return nil
}

func (sn *stateNode) managed() bool { return sn.claim != nil }

func (sn *stateNode) initialized() bool {
	return sn.claim != nil && sn.claim.isTrue(ConditionInitialized)
}

func (sn *stateNode) deleting() bool {
	return (sn.claim != nil && sn.claim.deleting()) || (sn.node != nil && sn.node.DeletionTimestamp != nil)
}

func (sn *stateNode) ready() bool { return sn.node != nil && nodeReady(sn.node) }

// reschedulable returns the pods that would have to move; the caller must
// not modify the slice.
func (sn *stateNode) reschedulable() []*corev1.Pod { return sn.resched }

// used sums the requests of the pods that hold resources on the node.
func (sn *stateNode) used() res { return sn.usedR }

// podReq is a pod with its requests, read once.
type podReq struct {
	p *corev1.Pod
	r res
}

// withRequests pairs pods with their requests.
func withRequests(pods []*corev1.Pod, reqs []res) []podReq {
	out := make([]podReq, len(pods))
	for i, p := range pods {
		out[i] = podReq{p, reqs[i]}
	}
	return out
}

// snapshot is one consistent read of everything a decision needs.
type snapshot struct {
	now     time.Time
	pools   map[string]*nodePool
	poolSeq []*nodePool  // by name
	nodes   []*stateNode // by name; NodeClaims not launched come first, by claim name
	byName  map[string]*stateNode
	pending []*corev1.Pod // provisionable pods, by namespace and name
	// pendingReqs are the requests of pending, index for index.
	pendingReqs []res
	pdbs        []*policyv1.PodDisruptionBudget
	// pdbSelectors are the selectors of pdbs, index for index; nil for one
	// that has none or does not parse.
	pdbSelectors []labels.Selector
	// nominated holds the nodes the pending pods would schedule to; nil
	// until computed.
	nominated map[string]bool
	// sortedPending is pending sorted for packing; nil until computed.
	sortedPending []podReq
	// dests are the destinations with nothing excluded; nil until
	// computed. The snapshot serves one decision, during which k.queue
	// does not change (execute changes it last).
	dests []dest
	// gen is the kept state's generation (clusterState.gen), 0 for a full
	// listing: snapshots of the same non-zero gen hold the same objects.
	gen uint64
}

// pendingForPacking returns the pending pods sorted for packing.
func (s *snapshot) pendingForPacking() []podReq {
	if s.sortedPending == nil {
		s.sortedPending = sortForPacking(withRequests(s.pending, s.pendingReqs))
	}
	return s.sortedPending
}

// isNominated reports whether pending pods would schedule to sn, which then
// must not be disrupted (Karpenter nominates such nodes).
func (k *Karpenter) isNominated(s *snapshot, sn *stateNode) bool {
	if s.nominated == nil {
		s.nominated = map[string]bool{}
		packSorted(s.pendingForPacking(), k.destinations(s, nil), func(d *dest) { s.nominated[d.name] = true })
	}
	return s.nominated[sn.name]
}

// fullSnapshot reads the whole cluster through the client. trace says
// whether NodePools and NodeClaims that do not decode are traced.
func (k *Karpenter) fullSnapshot(ctx context.Context, trace bool) (*snapshot, error) {
	s := &snapshot{now: k.now(), pools: map[string]*nodePool{}, byName: map[string]*stateNode{}}
	pools, err := k.listPools(ctx, trace)
	if err != nil {
		return nil, err
	}
	for _, np := range pools {
		s.pools[np.name] = np
	}
	s.poolSeq = pools
	claims, err := k.listClaims(ctx)
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := k.c.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	nodeByName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		nodeByName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	var unlaunched []*stateNode
	for _, u := range claims {
		nc, err := parseClaim(u)
		if err != nil {
			if trace {
				k.trace("karpenter/invalid-nodeclaim", "nodeclaim/"+u.GetName(), map[string]any{"error": err.Error()})
			}
			continue
		}
		sn := &stateNode{name: nc.nodeName(), claim: nc, pool: s.pools[nc.pool()]}
		if sn.name == "" {
			unlaunched = append(unlaunched, sn)
			continue
		}
		if s.byName[sn.name] != nil {
			continue // two claims for one node: the first (by name) wins
		}
		if n := nodeByName[sn.name]; n != nil {
			sn.node = n
			if p := n.Labels[LabelNodePool]; p != "" {
				sn.pool = s.pools[p]
			}
		}
		s.byName[sn.name] = sn
	}
	for name, n := range nodeByName {
		if s.byName[name] == nil {
			s.byName[name] = &stateNode{name: name, node: n}
		}
	}
	s.nodes = unlaunched
	for _, name := range slices.Sorted(maps.Keys(s.byName)) {
		s.nodes = append(s.nodes, s.byName[name])
	}
	pods, err := k.listPods(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			if provisionable(p) {
				s.pending = append(s.pending, p)
				s.pendingReqs = append(s.pendingReqs, podRequests(p))
			}
			continue
		}
		if sn := s.byName[p.Spec.NodeName]; sn != nil {
			sn.pods = append(sn.pods, p)
		}
	}
	for _, sn := range s.nodes {
		sn.derive()
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := k.c.List(ctx, &pdbs); err != nil && !meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	for i := range pdbs.Items {
		s.pdbs = append(s.pdbs, &pdbs.Items[i])
	}
	slices.SortFunc(s.pdbs, func(a, b *policyv1.PodDisruptionBudget) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	for _, b := range s.pdbs {
		s.pdbSelectors = append(s.pdbSelectors, pdbSelector(b))
	}
	return s, nil
}

// pdbSelector is the selector of b, or nil when it has none, does not
// parse or is empty (such a PodDisruptionBudget matches no pod here).
func pdbSelector(b *policyv1.PodDisruptionBudget) labels.Selector {
	if b.Spec.Selector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	return sel
}

// provisionable reports whether p is a pending pod Karpenter provisions for.
func provisionable(p *corev1.Pod) bool {
	return p.Spec.NodeName == "" && active(p) && !ownedByDaemonSet(p) && !mirror(p)
}

// queued reports whether node is a candidate of a command in the
// orchestration queue.
func (k *Karpenter) queued(node string) bool {
	for _, q := range k.queue {
		if slices.Contains(q.candidates, node) {
			return true
		}
	}
	return false
}

// markedForDeletion reports whether sn is being deleted or is queued for
// disruption.
func (k *Karpenter) markedForDeletion(sn *stateNode) bool {
	return sn.deleting() || k.queued(sn.name)
}

// budgets maps each NodePool to the number of its nodes that may still be
// disrupted for reason: the most restrictive active budget, over the
// managed, initialized nodes that are not InstanceTerminating, less those
// that are disrupting (marked for deletion, or not Ready).
func (k *Karpenter) budgets(s *snapshot, reason string) map[string]int {
	num, disrupting := map[string]int{}, map[string]int{}
	for _, sn := range s.nodes {
		if !sn.managed() || sn.node == nil || !sn.initialized() || sn.claim.isTrue(ConditionInstanceTerminating) {
			continue
		}
		pool := sn.node.Labels[LabelNodePool]
		num[pool]++
		if !sn.ready() || k.markedForDeletion(sn) {
			disrupting[pool]++
		}
	}
	out := map[string]int{}
	for _, np := range s.poolSeq {
		out[np.name] = max(np.allowedDisruptions(s.now, num[np.name], reason)-disrupting[np.name], 0)
	}
	return out
}

// pdbBlocker returns why a PodDisruptionBudget keeps p from being evicted,
// or "".
func (s *snapshot) pdbBlocker(p *corev1.Pod) string {
	var matched []*policyv1.PodDisruptionBudget
	for i, b := range s.pdbs {
		if b.Namespace != p.Namespace {
			continue
		}
		sel := s.pdbSelectors[i]
		if sel == nil || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		matched = append(matched, b)
	}
	switch {
	case len(matched) > 1:
		return fmt.Sprintf("pod %s/%s has more than one PodDisruptionBudget", p.Namespace, p.Name)
	case len(matched) == 1 && matched[0].Status.DisruptionsAllowed == 0:
		return fmt.Sprintf("pdb %s/%s prevents pod evictions", matched[0].Namespace, matched[0].Name)
	}
	return ""
}

// podBlocker returns why the pods of sn block its disruption, or "": a pod
// with karpenter.sh/do-not-disrupt, or a PDB that blocks an eviction.
func (s *snapshot) podBlocker(sn *stateNode) string {
	for _, p := range sn.pods {
		if active(p) && p.Annotations[AnnotationDoNotDisrupt] == "true" {
			return fmt.Sprintf("pod %s/%s has the %s annotation", p.Namespace, p.Name, AnnotationDoNotDisrupt)
		}
	}
	for _, p := range sn.pods {
		if reschedulable(p) {
			if b := s.pdbBlocker(p); b != "" {
				return b
			}
		}
	}
	return ""
}

// dest is a place a pod may go in a scheduling simulation.
type dest struct {
	name   string
	labels map[string]string
	taints []corev1.Taint
	free   res
	sn     *stateNode // the node, for destinations; nil for others
}

func (d *dest) fits(p *corev1.Pod, r res) bool {
	if !d.free.covers(r) {
		return false
	}
	for k, v := range p.Spec.NodeSelector {
		if d.labels[k] != v {
			return false
		}
	}
	for _, t := range d.taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(p.Spec.Tolerations, t) {
			return false
		}
	}
	return true
}

// destinations returns the nodes pods can move to now, except those
// excluded: Ready, schedulable (not cordoned, not disrupted, not being
// deleted or queued) and, for managed nodes, initialized.
func (k *Karpenter) destinations(s *snapshot, exclude func(*stateNode) bool) []*dest {
	if s.dests == nil {
		s.dests = []dest{}
		for _, sn := range s.nodes {
			n := sn.node
			if n == nil {
				continue
			}
			if k.markedForDeletion(sn) || n.Spec.Unschedulable || !nodeReady(n) || hasTaint(n.Spec.Taints, disruptedTaint) {
				continue
			}
			if sn.managed() && !sn.initialized() {
				continue
			}
			s.dests = append(s.dests, dest{
				name: sn.name, labels: n.Labels, taints: n.Spec.Taints,
				free: sn.alloc.minus(sn.used()), sn: sn,
			})
		}
	}
	// One allocation for the copies: packing consumes their free room.
	buf := make([]dest, 0, len(s.dests))
	out := make([]*dest, 0, len(s.dests))
	for i := range s.dests {
		if exclude != nil && exclude(s.dests[i].sn) {
			continue
		}
		buf = append(buf, s.dests[i])
		out = append(out, &buf[len(buf)-1])
	}
	return out
}

// inflight returns the NodeClaims that are launching or initializing as
// destinations: their startup taints are expected to go.
func (k *Karpenter) inflight(s *snapshot) []*dest {
	var out []*dest
	for _, sn := range s.nodes {
		if !sn.managed() || sn.initialized() || sn.deleting() || sn.pool == nil {
			continue
		}
		alloc := fromList(sn.claim.status.Allocatable)
		if len(sn.claim.status.Allocatable) == 0 {
			alloc = k.newNodeCapacity(s, sn.pool)
		}
		out = append(out, &dest{
			name: "nodeclaim/" + sn.claim.name(), labels: sn.claim.obj.GetLabels(), taints: sn.claim.spec.Taints,
			free: alloc.minus(sn.used()),
		})
	}
	return out
}

// newNodeCapacity is what a new node of np offers pods: its allocatable
// less the DaemonSet pods seen on the pool's nodes (the most on any one).
func (k *Karpenter) newNodeCapacity(s *snapshot, np *nodePool) res {
	var overhead res
	for _, sn := range s.nodes {
		if sn.pool != np || sn.node == nil {
			continue
		}
		ds := sn.dsR
		if ds.cpu > overhead.cpu || (ds.cpu == overhead.cpu && ds.mem > overhead.mem) {
			overhead = ds
		}
	}
	return fromList(k.opts.Capacity(np.name)).minus(overhead)
}

// sortForPacking orders pods largest first (cpu, then memory), then by
// namespace and name.
func sortForPacking(pods []podReq) []podReq {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b podReq) int {
		ra, rb := a.r, b.r
		return cmp.Or(cmp.Compare(rb.cpu, ra.cpu), cmp.Compare(rb.mem, ra.mem),
			strings.Compare(a.p.Namespace, b.p.Namespace), strings.Compare(a.p.Name, b.p.Name))
	})
	return out
}

// pack places pods first-fit, largest first, on dests (consuming their free
// resources) and returns the pods that fit nowhere.
func pack(pods []podReq, dests []*dest) []podReq {
	return packSorted(sortForPacking(pods), dests, nil)
}

// packSorted is pack of pods already sorted for packing, calling placedOn
// (when not nil) for each pod placed.
func packSorted(pods []podReq, dests []*dest, placedOn func(*dest)) []podReq {
	var left []podReq
	for _, pr := range pods {
		p, r := pr.p, pr.r
		placed := false
		for _, d := range dests {
			if d.fits(p, r) {
				d.free = d.free.minus(r)
				placed = true
				if placedOn != nil {
					placedOn(d)
				}
				break
			}
		}
		if !placed {
			left = append(left, pr)
		}
	}
	return left
}

// plannedClaim is a NodeClaim a decision wants to create.
type plannedClaim struct {
	pool     *nodePool
	dest     *dest
	pods     []*corev1.Pod
	requests res
}

// poolLabels are the labels a node of np gets, with the values the first
// pod asks for among a requirement's values.
func poolLabels(np *nodePool, p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, r := range np.spec.Template.Spec.Requirements {
		if r.Operator != string(corev1.NodeSelectorOpIn) || len(r.Values) == 0 {
			continue
		}
		v := r.Values[0]
		if want, ok := p.Spec.NodeSelector[r.Key]; ok && slices.Contains(r.Values, want) {
			v = want
		}
		out[r.Key] = v
	}
	for k, v := range np.spec.Template.Metadata.Labels {
		out[k] = v
	}
	out[LabelNodePool] = np.name
	return out
}

// compatible reports whether a node of np could take p: its node selector
// is met by the pool's labels or requirements, and it tolerates the pool's
// taints (not its startup taints).
func compatible(np *nodePool, p *corev1.Pod) bool {
	lbl := poolLabels(np, p)
	for k, v := range p.Spec.NodeSelector {
		if lbl[k] != v {
			return false
		}
	}
	for _, t := range np.spec.Template.Spec.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerates(p.Spec.Tolerations, t) {
			return false
		}
	}
	return true
}

// plan packs pods onto new NodeClaims: each pod goes on a claim already
// planned if it fits, else on a new one of the first compatible NodePool
// (highest weight, then name) whose limits allow it. It returns the plans
// and the pods no NodePool can take.
func (k *Karpenter) plan(s *snapshot, pods []podReq) ([]*plannedClaim, []podReq) {
	order := slices.Clone(s.poolSeq)
	slices.SortStableFunc(order, func(a, b *nodePool) int { return cmp.Compare(b.weight, a.weight) })
	var plans []*plannedClaim
	var left []podReq
	added := map[string]res{} // capacity planned per pool in this pass
	for _, pr := range sortForPacking(pods) {
		p, r := pr.p, pr.r
		placed := false
		for _, pl := range plans {
			if pl.dest.fits(p, r) {
				pl.dest.free = pl.dest.free.minus(r)
				pl.pods = append(pl.pods, p)
				pl.requests = pl.requests.plus(r)
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		for _, np := range order {
			if np.obj.GetDeletionTimestamp() != nil || !compatible(np, p) {
				continue
			}
			capacity := fromList(k.opts.Capacity(np.name))
			if !k.withinLimits(s, np, added[np.name].plus(capacity)) {
				continue
			}
			d := &dest{name: "new/" + np.name, labels: poolLabels(np, p), taints: np.spec.Template.Spec.Taints, free: k.newNodeCapacity(s, np)}
			if !d.fits(p, r) {
				continue
			}
			d.free = d.free.minus(r)
			added[np.name] = added[np.name].plus(capacity)
			plans = append(plans, &plannedClaim{pool: np, dest: d, pods: []*corev1.Pod{p}, requests: r})
			placed = true
			break
		}
		if !placed {
			left = append(left, pr)
		}
	}
	return plans, left
}

// withinLimits reports whether np's cpu and memory limits allow its
// NodeClaims' capacity plus extra.
func (k *Karpenter) withinLimits(s *snapshot, np *nodePool, extra res) bool {
	if len(np.spec.Limits) == 0 {
		return true
	}
	total := extra
	for _, sn := range s.nodes {
		if sn.managed() && sn.claim.pool() == np.name {
			c := sn.claim.status.Capacity
			if len(c) == 0 {
				c = k.opts.Capacity(np.name)
			}
			total = total.plus(fromList(c))
		}
	}
	if q, ok := np.spec.Limits[corev1.ResourceCPU]; ok && total.cpu > q.MilliValue() {
		return false
	}
	if q, ok := np.spec.Limits[corev1.ResourceMemory]; ok && total.mem > q.Value() {
		return false
	}
	return true
}

// simulate reports where the reschedulable pods of the candidates would
// go if they were removed: onto the other nodes (after the pending pods),
// else onto new NodeClaims. ok is false when some pod fits nowhere.
func (k *Karpenter) simulate(s *snapshot, cands ...*stateNode) (plans []*plannedClaim, ok bool) {
	dests := k.destinations(s, func(sn *stateNode) bool { return slices.Contains(cands, sn) })
	packSorted(s.pendingForPacking(), dests, nil)
	var pods []podReq
	for _, c := range cands {
		for i, p := range c.pods {
			if reschedulable(p) {
				pods = append(pods, podReq{p, c.reqs[i]})
			}
		}
	}
	left := pack(pods, dests)
	if len(left) == 0 {
		return nil, true
	}
	plans, unplaced := k.plan(s, left)
	return plans, len(unplaced) == 0
}
