package clusterrun

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// actor carries out a scenario's events on the real API, as an admin
// (directly, not through the processes' proxies).
type actor struct {
	c  client.Client
	sc *scenario.Scenario
	// next is the next node index of each group (addNodes continues the
	// numbering; removeNodes takes the highest first).
	next map[string]int
	// gone are the nodes removeNodes deleted.
	gone map[string]bool
	// intendCordon and intendAnnotation, when set, are told, before an
	// operator's cordon, uncordon or annotation change is written, what
	// it changes (the cordon, each of bootroll's protection annotations
	// set or removed), as the twin tells its invariants
	// (invariant.World.SetIntendedCordon, SetIntendedAnnotation).
	intendCordon     func(node string, on bool)
	intendAnnotation func(node, key string, present bool)
}

func newActor(c client.Client, sc *scenario.Scenario) *actor {
	a := &actor{c: c, sc: sc, next: map[string]int{}, gone: map[string]bool{}}
	for _, g := range sc.NodeGroups {
		a.next[g.Name] = g.Count
	}
	return a
}

// errSkip reports an event that has nothing to act on now (a node
// already gone), as the twin traces "skipped".
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

func notFoundSkip(err error, what string) error {
	if apierrors.IsNotFound(err) {
		return errSkip{"no such " + what + " now"}
	}
	return err
}

// mergePatch sends a JSON merge patch.
func (a *actor) mergePatch(ctx context.Context, obj client.Object, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return a.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, b))
}

func poolRef(name string) *v1alpha1.BootcNodePool {
	p := &v1alpha1.BootcNodePool{}
	p.Name = name
	return p
}

func nodeRef(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// labelPatch is a merge patch of a map: set, and null for each removed key.
func labelPatch(set map[string]string, remove []string) map[string]any {
	m := map[string]any{}
	for k, v := range set {
		m[k] = v
	}
	for _, k := range remove {
		m[k] = nil
	}
	return m
}

// nodeName is the Node a scenario node name means: the Node of that
// name, or, for a Karpenter group's node, the Node Karpenter's KWOK
// provider launched for the NodeClaim of that name (it names Nodes
// kwok-<claim>-<random>-<n>).
func (a *actor) nodeName(ctx context.Context, name string) string {
	var n corev1.Node
	if err := a.c.Get(ctx, client.ObjectKey{Name: name}, &n); err == nil || !apierrors.IsNotFound(err) {
		return name
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(KarpenterGroup + "/v1")
	u.SetKind("NodeClaim")
	if err := a.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return name
	}
	if node, _, _ := unstructured.NestedString(u.Object, "status", "nodeName"); node != "" {
		return node
	}
	return name
}

// Do carries out one event.
func (a *actor) Do(ctx context.Context, ev *scenario.Event) error {
	ev = a.resolved(ctx, ev)
	switch {
	case ev.SetPoolImage != nil:
		e := ev.SetPoolImage
		return notFoundSkip(a.mergePatch(ctx, poolRef(e.Pool), map[string]any{"spec": map[string]any{"image": PinnedRef(a.sc, e.Image)}}), "pool")
	case ev.Pause != nil:
		e := ev.Pause
		return notFoundSkip(a.mergePatch(ctx, poolRef(e.Pool), map[string]any{"spec": map[string]any{"paused": e.Paused}}), "pool")
	case ev.SetPool != nil:
		return a.setPool(ctx, ev.SetPool)
	case ev.CreatePool != nil:
		err := a.c.Create(ctx, Pool(a.sc, *ev.CreatePool))
		if apierrors.IsAlreadyExists(err) {
			return errSkip{"the pool exists"}
		}
		return err
	case ev.DeletePool != nil:
		return notFoundSkip(a.c.Delete(ctx, poolRef(ev.DeletePool.Pool)), "pool")
	case ev.RelabelNode != nil:
		e := ev.RelabelNode
		return notFoundSkip(a.mergePatch(ctx, nodeRef(e.Node), map[string]any{"metadata": map[string]any{"labels": labelPatch(e.Set, e.Remove)}}), "node")
	case ev.AnnotateNode != nil:
		e := ev.AnnotateNode
		if err := a.intendAnnotations(ctx, e); err != nil {
			return err
		}
		return notFoundSkip(a.mergePatch(ctx, nodeRef(e.Node), map[string]any{"metadata": map[string]any{"annotations": labelPatch(e.Set, e.Remove)}}), "node")
	case ev.DeleteNode != nil:
		return notFoundSkip(a.c.Delete(ctx, nodeRef(ev.DeleteNode.Node)), "node")
	case ev.DeleteBootcNode != nil:
		bn := &v1alpha1.BootcNode{}
		bn.Name = ev.DeleteBootcNode.Node
		return notFoundSkip(a.c.Delete(ctx, bn), "BootcNode")
	case ev.CordonNode != nil:
		if err := a.intendCordonOf(ctx, ev.CordonNode.Node, true); err != nil {
			return err
		}
		return notFoundSkip(a.mergePatch(ctx, nodeRef(ev.CordonNode.Node), map[string]any{"spec": map[string]any{"unschedulable": true}}), "node")
	case ev.UncordonNode != nil:
		if err := a.intendCordonOf(ctx, ev.UncordonNode.Node, false); err != nil {
			return err
		}
		return notFoundSkip(a.mergePatch(ctx, nodeRef(ev.UncordonNode.Node), map[string]any{"spec": map[string]any{"unschedulable": nil}}), "node")
	case ev.SetPDB != nil:
		e := ev.SetPDB
		want := PDB(e.Workload, e.MinAvailable, e.MaxUnavailable)
		var cur policyv1.PodDisruptionBudget
		err := a.c.Get(ctx, client.ObjectKeyFromObject(want), &cur)
		if apierrors.IsNotFound(err) {
			return a.c.Create(ctx, want)
		}
		if err != nil {
			return err
		}
		cur.Spec.MinAvailable, cur.Spec.MaxUnavailable = e.MinAvailable, e.MaxUnavailable
		return a.c.Update(ctx, &cur)
	case ev.DeletePDB != nil:
		p := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: ev.DeletePDB.Workload, Namespace: cluster.WorkloadNamespace}}
		return notFoundSkip(a.c.Delete(ctx, p), "PodDisruptionBudget")
	case ev.ScaleWorkload != nil:
		e := ev.ScaleWorkload
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: e.Workload, Namespace: cluster.WorkloadNamespace}}
		return notFoundSkip(a.mergePatch(ctx, d, map[string]any{"spec": map[string]any{"replicas": e.Replicas}}), "Deployment")
	case ev.AddNodes != nil:
		return a.addNodes(ctx, ev.AddNodes)
	case ev.RemoveNodes != nil:
		return a.removeNodes(ctx, ev.RemoveNodes)
	case ev.SetPinnedImages != nil:
		e := ev.SetPinnedImages
		s := &v1alpha1.PinnedImageSet{}
		s.Name = e.Set
		return notFoundSkip(a.mergePatch(ctx, s, map[string]any{"spec": map[string]any{"images": PinnedRefs(e.Images)}}), "PinnedImageSet")
	case ev.KarpenterCRDs != nil:
		return a.karpenterCRDs(ctx, ev.KarpenterCRDs.Installed)
	case ev.SetNodePoolLabels != nil:
		e := ev.SetNodePoolLabels
		np := &unstructured.Unstructured{}
		np.SetGroupVersionKind(schema.GroupVersionKind{Group: KarpenterGroup, Version: "v1", Kind: "NodePool"})
		np.SetName(e.NodePool)
		return notFoundSkip(a.mergePatch(ctx, np, map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"labels": labelPatch(e.Set, nil)}}}}), "NodePool")
	}
	name, _ := ev.Action()
	return errSkip{"the cluster target does not carry out " + name}
}

// currentNode reads node for an operator's change; not found is a skip.
func (a *actor) currentNode(ctx context.Context, node string) (*corev1.Node, error) {
	var n corev1.Node
	if err := a.c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return nil, notFoundSkip(err, "node")
	}
	return &n, nil
}

// intendCordonOf tells intendCordon of a cordon (on) or uncordon that
// changes the Node (as the twin's adminCordon: one of a node cordoned
// already changes nothing the invariants expect).
func (a *actor) intendCordonOf(ctx context.Context, node string, on bool) error {
	if a.intendCordon == nil {
		return nil
	}
	n, err := a.currentNode(ctx, node)
	if err != nil {
		return err
	}
	if n.Spec.Unschedulable != on {
		a.intendCordon(node, on)
	}
	return nil
}

// intendAnnotations tells intendAnnotation of each key e sets to a new
// value or removes from the Node (as the twin's adminAnnotate).
func (a *actor) intendAnnotations(ctx context.Context, e *scenario.AnnotateNode) error {
	if a.intendAnnotation == nil {
		return nil
	}
	n, err := a.currentNode(ctx, e.Node)
	if err != nil {
		return err
	}
	set, removed := e.Changes(n.Annotations)
	for _, k := range set {
		a.intendAnnotation(e.Node, k, true)
	}
	for _, k := range removed {
		a.intendAnnotation(e.Node, k, false)
	}
	return nil
}

func (a *actor) setPool(ctx context.Context, e *scenario.SetPool) error {
	var p v1alpha1.BootcNodePool
	if err := a.c.Get(ctx, client.ObjectKey{Name: e.Pool}, &p); err != nil {
		return notFoundSkip(err, "pool")
	}
	a.sc.ApplySetPool(&p.Spec, e)
	if e.Image != "" {
		// Pinned to the digest: the real controller would look a tag up
		// at a registry that does not exist (PinnedRef).
		p.Spec.Image = v1alpha1.ImageReference(PinnedRef(a.sc, e.Image))
	}
	return a.c.Update(ctx, &p)
}

func (a *actor) addNodes(ctx context.Context, e *scenario.AddNodes) error {
	g := a.sc.NodeGroup(e.Group)
	if g == nil {
		return fmt.Errorf("addNodes: no node group %q", e.Group)
	}
	for range e.Count {
		name := fmt.Sprintf("%s-%d", g.Name, a.next[g.Name])
		a.next[g.Name]++
		var obj client.Object
		if g.Karpenter != nil {
			np := karpenterPool(a.sc, g.Karpenter.NodePool)
			if np == nil {
				return fmt.Errorf("addNodes: no NodePool %q", g.Karpenter.NodePool)
			}
			obj = NodeClaim(name, *g, np)
		} else {
			obj = Node(name, *g, false)
		}
		if err := a.c.Create(ctx, obj); err != nil {
			return fmt.Errorf("addNodes: %s: %w", name, err)
		}
	}
	return nil
}

// removeNodes deletes the group's highest-numbered nodes that still
// exist (the Nodes; Karpenter's NodeClaims go with theirs).
func (a *actor) removeNodes(ctx context.Context, e *scenario.RemoveNodes) error {
	var nodes corev1.NodeList
	if err := a.c.List(ctx, &nodes, client.MatchingLabels{GroupLabel: e.Group}); err != nil {
		return err
	}
	var names []string
	for _, n := range nodes.Items {
		if n.DeletionTimestamp == nil {
			names = append(names, n.Name)
		}
	}
	slices.SortFunc(names, func(x, y string) int { return nodeIndex(y) - nodeIndex(x) })
	for i, name := range names {
		if i == e.Count {
			break
		}
		if err := a.c.Delete(ctx, nodeRef(name)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

func nodeIndex(name string) int {
	i := strings.LastIndexByte(name, '-')
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return -1
	}
	return n
}

// karpenterCRDs installs or removes Karpenter's CRDs (those `bootroll
// cluster up` installs). Removing them deletes every NodePool and
// NodeClaim with them; the karpenter-kwok process keeps running.
func (a *actor) karpenterCRDs(ctx context.Context, installed bool) error {
	crds, err := localcluster.ReadManifests(localcluster.Manifests, localcluster.KarpenterCRDs)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if installed {
			if err := a.c.Create(ctx, crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("installing %s: %w", crd.GetName(), err)
			}
			continue
		}
		if err := a.c.Delete(ctx, crd.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing %s: %w", crd.GetName(), err)
		}
	}
	return nil
}

// Targets picks the nodes a fault hits: the named node, or count of the
// group's nodes (nodes maps each existing Node to its group label) drawn
// with rng.
func Targets(t scenario.Target, nodes map[string]string, rng *rand.Rand) []string {
	if t.Node != "" {
		return []string{t.Node}
	}
	var group []string
	for n, g := range nodes {
		if g == t.Group {
			group = append(group, n)
		}
	}
	slices.Sort(group)
	rng.Shuffle(len(group), func(i, j int) { group[i], group[j] = group[j], group[i] })
	return group[:min(max(t.Count, 1), len(group))]
}

// annotateRebooting sets or clears the KWOK node-rebooting annotation,
// which makes the Node NotReady while it is set.
func (a *actor) annotateRebooting(ctx context.Context, node string, on bool) error {
	var v any
	if on {
		v = "true"
	}
	return a.mergePatch(ctx, nodeRef(node), map[string]any{"metadata": map[string]any{"annotations": map[string]any{localcluster.RebootingAnnotation: v}}})
}

// resolved is a copy of ev with the node it names resolved (nodeName);
// the scenario is left as it is.
func (a *actor) resolved(ctx context.Context, ev *scenario.Event) *scenario.Event {
	c := *ev
	switch {
	case c.RelabelNode != nil:
		x := *c.RelabelNode
		x.Node = a.nodeName(ctx, x.Node)
		c.RelabelNode = &x
	case c.AnnotateNode != nil:
		x := *c.AnnotateNode
		x.Node = a.nodeName(ctx, x.Node)
		c.AnnotateNode = &x
	case c.DeleteNode != nil, c.CordonNode != nil, c.UncordonNode != nil:
		for _, p := range []**scenario.NodeRef{&c.DeleteNode, &c.CordonNode, &c.UncordonNode} {
			if *p != nil {
				x := **p
				x.Node = a.nodeName(ctx, x.Node)
				*p = &x
			}
		}
	}
	return &c
}
