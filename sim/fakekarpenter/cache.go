package fakekarpenter

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// clusterState is Karpenter's cluster state kept up to date from watch
// events (Observe), so that a snapshot costs what changed since the last
// one, not a listing and decoding of the whole cluster.
//
// Observe only records the latest object of each key; snapshot applies
// them. A snapshot is therefore frozen while a reconcile decides on it,
// as a listing was, even though the reconcile's own writes are observed
// at once. Objects are the API server's stored objects, which are never
// changed in place; stateNodes and nodePools are rebuilt, never changed,
// when what they derive from changes.
type clusterState struct {
	// following is set by the first Observe; until then every snapshot
	// is a full listing.
	following bool
	// seeded is set once a full listing has filled the state; events
	// before it are not needed.
	seeded bool
	// gen counts the applies that changed something: two incremental
	// snapshots of the same gen hold the same objects (snapshot.gen).
	gen uint64

	// What changed since the last snapshot: the latest object of each
	// key, nil when it was deleted.
	chPools  map[string]*unstructured.Unstructured
	chClaims map[string]*unstructured.Unstructured
	chNodes  map[string]*corev1.Node
	chPods   map[types.NamespacedName]*corev1.Pod
	chPDBs   map[types.NamespacedName]*policyv1.PodDisruptionBudget

	pools      map[string]*nodePool // decoded NodePools
	badPools   map[string]error     // NodePools that do not decode
	claims     map[string]*nodeClaim
	badClaims  map[string]error
	nodes      map[string]*corev1.Node
	pods       map[types.NamespacedName]*corev1.Pod
	podsOn     map[string]map[types.NamespacedName]*corev1.Pod // bound pods by node name
	pending    map[types.NamespacedName]*corev1.Pod            // provisionable pods
	pdbs       map[types.NamespacedName]*policyv1.PodDisruptionBudget
	claimsFor  map[string]map[string]bool // claim names by the node name they launched as
	unlaunched map[string]bool            // claims without a node name

	byName map[string]*stateNode // as in a snapshot

	// Sorted views, rebuilt when marked stale.
	poolSeq       []*nodePool
	names         []string // keys of byName, sorted
	unlaunchedSeq []*stateNode
	pendingSeq    []*corev1.Pod
	pendingReqs   []res
	pdbSeq        []*policyv1.PodDisruptionBudget
	pdbSelectors  []labels.Selector
	dirtyNames    map[string]bool
	namesStale    bool
	unlaunchStale bool
	pendingStale  bool
	pdbStale      bool
}

func newClusterState() *clusterState {
	return &clusterState{
		chPools:  map[string]*unstructured.Unstructured{},
		chClaims: map[string]*unstructured.Unstructured{},
		chNodes:  map[string]*corev1.Node{},
		chPods:   map[types.NamespacedName]*corev1.Pod{},
		chPDBs:   map[types.NamespacedName]*policyv1.PodDisruptionBudget{},
	}
}

// Observe keeps Karpenter's cluster state up to date with one watch
// event. The twin calls it with every event, before the controllers' Map
// functions, from the time Karpenter starts; once it has been called,
// Karpenter relies on getting every later event (a caller that never
// calls it gets a full listing at every decision instead).
func (k *Karpenter) Observe(ev apiserver.Event) {
	st := k.state
	st.following = true
	if !st.seeded {
		return // the seeding listing will read it
	}
	del := ev.Type == apiserver.Deleted
	switch o := ev.Object.(type) {
	case *corev1.Pod:
		key := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
		st.chPods[key] = keep(o, del)
	case *corev1.Node:
		st.chNodes[o.Name] = keep(o, del)
	case *policyv1.PodDisruptionBudget:
		key := types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
		st.chPDBs[key] = keep(o, del)
	case *unstructured.Unstructured:
		switch o.GroupVersionKind() {
		case NodeClaimGVK:
			st.chClaims[o.GetName()] = keep(o, del)
		case NodePoolGVK:
			st.chPools[o.GetName()] = keep(o, del)
		}
	}
}

// keep is o, or nil when it was deleted.
func keep[T any](o *T, deleted bool) *T {
	if deleted {
		return nil
	}
	return o
}

// snapshot reads the cluster: from the state kept by Observe when it is
// followed, else by a full listing. With Options.VerifySnapshot the kept
// state is compared with a full listing every time.
func (k *Karpenter) snapshot(ctx context.Context) (*snapshot, error) {
	st := k.state
	if !st.following {
		return k.fullSnapshot(ctx, true)
	}
	if !st.seeded {
		if err := k.seed(ctx); err != nil {
			return nil, err
		}
	}
	s := k.incrementalSnapshot()
	if k.opts.VerifySnapshot {
		full, err := k.fullSnapshot(ctx, false)
		if err != nil {
			return nil, err
		}
		if a, b := renderSnapshot(s), renderSnapshot(full); a != b {
			k.mismatches++
			k.lastMismatch = diffLines(a, b)
		}
	}
	return s, nil
}

// SnapshotMismatches returns how many snapshots kept from watch events
// differed from a full listing (only counted with Options.VerifySnapshot),
// and the first differing lines of the last one.
func (k *Karpenter) SnapshotMismatches() (int, string) { return k.mismatches, k.lastMismatch }

// seed fills the state from a full listing, as an informer's initial list
// does; the changes observed before it are superseded.
func (k *Karpenter) seed(ctx context.Context) error {
	st := newClusterState()
	st.following = true
	claims, err := k.listClaims(ctx)
	if err != nil {
		return err
	}
	for _, u := range claims {
		st.chClaims[u.GetName()] = u
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(NodePoolGVK.GroupVersion().WithKind("NodePoolList"))
	if err := k.c.List(ctx, l); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing NodePools: %w", err)
	}
	for i := range l.Items {
		st.chPools[l.Items[i].GetName()] = &l.Items[i]
	}
	var nodes corev1.NodeList
	if err := k.c.List(ctx, &nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		st.chNodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	pods, err := k.listPods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		st.chPods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := k.c.List(ctx, &pdbs); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	for i := range pdbs.Items {
		b := &pdbs.Items[i]
		st.chPDBs[types.NamespacedName{Namespace: b.Namespace, Name: b.Name}] = b
	}
	st.pools, st.badPools = map[string]*nodePool{}, map[string]error{}
	st.claims, st.badClaims = map[string]*nodeClaim{}, map[string]error{}
	st.nodes = map[string]*corev1.Node{}
	st.pods, st.podsOn, st.pending = map[types.NamespacedName]*corev1.Pod{}, map[string]map[types.NamespacedName]*corev1.Pod{}, map[types.NamespacedName]*corev1.Pod{}
	st.pdbs = map[types.NamespacedName]*policyv1.PodDisruptionBudget{}
	st.claimsFor, st.unlaunched = map[string]map[string]bool{}, map[string]bool{}
	st.byName, st.dirtyNames = map[string]*stateNode{}, map[string]bool{}
	st.namesStale, st.unlaunchStale, st.pendingStale, st.pdbStale = true, true, true, true
	st.seeded = true
	// A new state's generations go on from the old one's, so that no
	// snapshot of it is taken for one of the old (deletable's memo).
	st.gen = k.state.gen + 1
	k.state = st
	return nil
}

// apply folds the observed changes into the state. Its cost is that of
// the changes (a NodePool change rebuilds every stateNode, as each points
// to its pool).
func (st *clusterState) apply() {
	if len(st.chPools)+len(st.chClaims)+len(st.chNodes)+len(st.chPods)+len(st.chPDBs) > 0 {
		st.gen++
	}
	if len(st.chPools) > 0 {
		for name, u := range st.chPools {
			delete(st.pools, name)
			delete(st.badPools, name)
			if u == nil {
				continue
			}
			if np, err := parsePool(u); err != nil {
				st.badPools[name] = err
			} else {
				st.pools[name] = np
			}
		}
		clear(st.chPools)
		st.poolSeq = slices.SortedFunc(maps.Values(st.pools), func(a, b *nodePool) int { return strings.Compare(a.name, b.name) })
		for name := range st.byName {
			st.dirtyNames[name] = true
		}
		st.unlaunchStale = true
	}
	for name, u := range st.chClaims {
		if old := st.claims[name]; old != nil {
			if n := old.nodeName(); n == "" {
				delete(st.unlaunched, name)
				st.unlaunchStale = true
			} else {
				delete(st.claimsFor[n], name)
				if len(st.claimsFor[n]) == 0 {
					delete(st.claimsFor, n)
				}
				st.dirtyNames[n] = true
			}
		}
		delete(st.claims, name)
		delete(st.badClaims, name)
		if u == nil {
			continue
		}
		nc, err := parseClaim(u)
		if err != nil {
			st.badClaims[name] = err
			continue
		}
		st.claims[name] = nc
		if n := nc.nodeName(); n == "" {
			st.unlaunched[name] = true
			st.unlaunchStale = true
		} else {
			if st.claimsFor[n] == nil {
				st.claimsFor[n] = map[string]bool{}
			}
			st.claimsFor[n][name] = true
			st.dirtyNames[n] = true
		}
	}
	clear(st.chClaims)
	for name, n := range st.chNodes {
		if n == nil {
			delete(st.nodes, name)
		} else {
			st.nodes[name] = n
		}
		st.dirtyNames[name] = true
	}
	clear(st.chNodes)
	for key, p := range st.chPods {
		if old := st.pods[key]; old != nil {
			if n := old.Spec.NodeName; n != "" {
				delete(st.podsOn[n], key)
				if len(st.podsOn[n]) == 0 {
					delete(st.podsOn, n)
				}
				st.dirtyNames[n] = true
			} else if st.pending[key] != nil {
				delete(st.pending, key)
				st.pendingStale = true
			}
		}
		delete(st.pods, key)
		if p == nil {
			continue
		}
		st.pods[key] = p
		if n := p.Spec.NodeName; n != "" {
			if st.podsOn[n] == nil {
				st.podsOn[n] = map[types.NamespacedName]*corev1.Pod{}
			}
			st.podsOn[n][key] = p
			st.dirtyNames[n] = true
		} else if provisionable(p) {
			st.pending[key] = p
			st.pendingStale = true
		}
	}
	clear(st.chPods)
	for key, b := range st.chPDBs {
		if b == nil {
			delete(st.pdbs, key)
		} else {
			st.pdbs[key] = b
		}
		st.pdbStale = true
	}
	clear(st.chPDBs)

	for name := range st.dirtyNames {
		sn := st.build(name)
		_, had := st.byName[name]
		switch {
		case sn == nil && had:
			delete(st.byName, name)
			st.namesStale = true
		case sn != nil:
			st.byName[name] = sn
			st.namesStale = st.namesStale || !had
		}
	}
	clear(st.dirtyNames)
	if st.namesStale {
		st.names = slices.Sorted(maps.Keys(st.byName))
		st.namesStale = false
	}
	if st.unlaunchStale {
		st.unlaunchedSeq = nil
		for _, name := range slices.Sorted(maps.Keys(st.unlaunched)) {
			nc := st.claims[name]
			sn := &stateNode{claim: nc, pool: st.pools[nc.pool()]}
			sn.derive()
			st.unlaunchedSeq = append(st.unlaunchedSeq, sn)
		}
		st.unlaunchStale = false
	}
	if st.pendingStale {
		st.pendingSeq = sortPods(slices.Collect(maps.Values(st.pending)))
		st.pendingReqs = make([]res, len(st.pendingSeq))
		for i, p := range st.pendingSeq {
			st.pendingReqs[i] = podRequests(p)
		}
		st.pendingStale = false
	}
	if st.pdbStale {
		st.pdbSeq = slices.SortedFunc(maps.Values(st.pdbs), func(a, b *policyv1.PodDisruptionBudget) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
		})
		st.pdbSelectors = make([]labels.Selector, len(st.pdbSeq))
		for i, b := range st.pdbSeq {
			st.pdbSelectors[i] = pdbSelector(b)
		}
		st.pdbStale = false
	}
}

// build returns the stateNode of the node name, as a full listing builds
// it, or nil when there is none: the NodeClaim first by name that launched
// as name, with its Node, or a Node that no NodeClaim owns; with the pods
// bound to name.
func (st *clusterState) build(name string) *stateNode {
	var sn *stateNode
	node := st.nodes[name]
	if cs := st.claimsFor[name]; len(cs) > 0 {
		nc := st.claims[minKey(cs)]
		sn = &stateNode{name: name, claim: nc, pool: st.pools[nc.pool()]}
		if node != nil {
			sn.node = node
			if p := node.Labels[LabelNodePool]; p != "" {
				sn.pool = st.pools[p]
			}
		}
	} else if node != nil {
		sn = &stateNode{name: name, node: node}
	} else {
		return nil
	}
	if pods := st.podsOn[name]; len(pods) > 0 {
		sn.pods = sortPods(slices.Collect(maps.Values(pods)))
	}
	sn.derive()
	return sn
}

func minKey(m map[string]bool) string {
	first := true
	var out string
	for k := range m {
		if first || k < out {
			out, first = k, false
		}
	}
	return out
}

// sortPods sorts pods by namespace and name, in place.
func sortPods(pods []*corev1.Pod) []*corev1.Pod {
	slices.SortFunc(pods, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return pods
}

// incrementalSnapshot applies the observed changes and returns the
// snapshot of the state, tracing the NodePools and NodeClaims that do not
// decode as a full listing does.
func (k *Karpenter) incrementalSnapshot() *snapshot {
	st := k.state
	st.apply()
	for _, name := range slices.Sorted(maps.Keys(st.badPools)) {
		k.trace("karpenter/invalid-nodepool", "nodepool/"+name, map[string]any{"error": st.badPools[name].Error()})
	}
	for _, name := range slices.Sorted(maps.Keys(st.badClaims)) {
		k.trace("karpenter/invalid-nodeclaim", "nodeclaim/"+name, map[string]any{"error": st.badClaims[name].Error()})
	}
	s := &snapshot{
		now: k.now(), pools: st.pools, poolSeq: st.poolSeq, byName: st.byName,
		pending: st.pendingSeq, pendingReqs: st.pendingReqs, pdbs: st.pdbSeq,
		gen: st.gen,
	}
	s.nodes = make([]*stateNode, 0, len(st.unlaunchedSeq)+len(st.names))
	s.nodes = append(s.nodes, st.unlaunchedSeq...)
	for _, name := range st.names {
		s.nodes = append(s.nodes, st.byName[name])
	}
	s.pdbSelectors = st.pdbSelectors
	return s
}

// renderSnapshot writes out what decisions read from s, one line per
// item, for comparing a kept snapshot with a full listing: objects by
// name and resourceVersion, decoded NodeClaims and NodePools in full, and
// the derived sums.
func renderSnapshot(s *snapshot) string {
	var b strings.Builder
	rv := func(o interface{ GetResourceVersion() string }) string { return o.GetResourceVersion() }
	for _, np := range s.poolSeq {
		after := "Never"
		if np.consolidateAfter != nil {
			after = np.consolidateAfter.String()
		}
		fmt.Fprintf(&b, "pool %s rv=%s %s w=%d %s %s %d %s %s\n", np.name, rv(np.obj), js(np.spec), np.weight, np.policy,
			after, len(np.budgets), np.expireAfter, np.hash)
	}
	if len(s.pools) != len(s.poolSeq) {
		fmt.Fprintf(&b, "pools map has %d, sequence %d\n", len(s.pools), len(s.poolSeq))
	}
	for _, sn := range s.nodes {
		fmt.Fprintf(&b, "node %q", sn.name)
		if s.byName[sn.name] != sn && sn.name != "" {
			b.WriteString(" not-in-byName")
		}
		if sn.claim != nil {
			fmt.Fprintf(&b, " claim=%s rv=%s %s %s %v spec=%s status=%s", sn.claim.name(), rv(sn.claim.obj), sn.claim.pool(),
				sn.claim.nodeName(), sn.claim.deleting(), js(sn.claim.spec), js(sn.claim.status))
		}
		if sn.node != nil {
			fmt.Fprintf(&b, " node rv=%s", rv(sn.node))
		}
		if sn.pool != nil {
			fmt.Fprintf(&b, " pool=%s", sn.pool.name)
		}
		fmt.Fprintf(&b, " used=%v ds=%v alloc=%v resched=%d\n", sn.usedR, sn.dsR, sn.alloc, len(sn.resched))
		for i, p := range sn.pods {
			fmt.Fprintf(&b, "  pod %s/%s rv=%s %v\n", p.Namespace, p.Name, p.ResourceVersion, sn.reqs[i])
		}
	}
	if n := len(s.nodes); len(s.byName) > n {
		fmt.Fprintf(&b, "byName has %d, nodes %d\n", len(s.byName), n)
	}
	for i, p := range s.pending {
		fmt.Fprintf(&b, "pending %s/%s rv=%s %v\n", p.Namespace, p.Name, p.ResourceVersion, s.pendingReqs[i])
	}
	for i, p := range s.pdbs {
		fmt.Fprintf(&b, "pdb %s/%s rv=%s %v\n", p.Namespace, p.Name, p.ResourceVersion, s.pdbSelectors[i])
	}
	return b.String()
}

// js is v as JSON, for renderSnapshot.
func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// diffLines returns the first lines where a and b differ.
func diffLines(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(la), len(lb)) && len(out) < 6; i++ {
		x, y := "", ""
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			out = append(out, "kept: "+x, "full: "+y)
		}
	}
	return strings.Join(out, "\n")
}
