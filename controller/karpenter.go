package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/patch"
	"github.com/bootroll/bootroll/controller/rollout"
)

// NodeClaimGVK is Karpenter's NodeClaim. It is read as unstructured so the
// controller has no Karpenter Go dependency and runs with or without the CRD.
var NodeClaimGVK = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}

// CRDGVK is CustomResourceDefinition, read as unstructured so no scheme
// needs the apiextensions types.
var CRDGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// NodeClaimCRD is the name of the NodeClaim CustomResourceDefinition.
const NodeClaimCRD = "nodeclaims.karpenter.sh"

// protectAnnotations are put on Nodes and NodeClaims in a slot.
var protectAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}

// NodeClaim conditions under which Karpenter is disrupting the node.
var disruptingConditions = []string{"DisruptionReason", "InstanceTerminating", "Rebooting"}

// nodeClaimName returns the name of the NodeClaim that owns a Node, or "".
func nodeClaimName(n *corev1.Node) string {
	for _, o := range n.OwnerReferences {
		if o.Kind == NodeClaimGVK.Kind && strings.HasPrefix(o.APIVersion, NodeClaimGVK.Group+"/") {
			return o.Name
		}
	}
	return ""
}

// claimLookup is what is known about a Node's NodeClaim.
type claimLookup struct {
	// Managed is true when the Node is owned by a NodeClaim.
	Managed bool
	// Absent is true when Karpenter is not installed (no NodeClaim CRD).
	Absent bool
	// Missing is true when the CRD exists but the NodeClaim does not: the
	// node is then unsafe to touch.
	Missing bool
	Claim   *unstructured.Unstructured
}

// lookupClaim reads the Node's NodeClaim. A missing CRD is not an error; a
// stale REST mapping (the CRD was removed and installed again) is refreshed.
func (r *NodeReconciler) lookupClaim(ctx context.Context, n *corev1.Node) (claimLookup, error) {
	return lookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
}

func lookupClaim(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, n *corev1.Node) (claimLookup, error) {
	name := nodeClaimName(n)
	if name == "" {
		return claimLookup{}, nil
	}
	out := claimLookup{Managed: true}
	get := func() error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(NodeClaimGVK)
		if err := reader.Get(ctx, types.NamespacedName{Name: name}, u); err != nil {
			return err
		}
		out.Claim = u
		return nil
	}
	err := get()
	if err == nil {
		return out, nil
	}
	if !noKind(err) && !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("get NodeClaim %s of node %s: %w", name, n.Name, err)
	}
	// Is Karpenter installed at all?
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(CRDGVK)
	if cerr := reader.Get(ctx, types.NamespacedName{Name: NodeClaimCRD}, crd); cerr != nil {
		if apierrors.IsNotFound(cerr) || noKind(cerr) {
			out.Absent = true
			return out, nil
		}
		return out, fmt.Errorf("look for the NodeClaim CRD: %w", cerr)
	}
	if noKind(err) {
		// The CRD is there but the mapping is not: refresh and retry once.
		if rm, ok := mapper.(meta.ResettableRESTMapper); ok {
			rm.Reset()
		}
		if err = get(); err == nil {
			return out, nil
		}
		if !apierrors.IsNotFound(err) && !noKind(err) {
			return out, fmt.Errorf("get NodeClaim %s of node %s: %w", name, n.Name, err)
		}
	}
	out.Missing = true
	return out, nil
}

func noKind(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	var nrm *meta.NoResourceMatchError
	var nkm *meta.NoKindMatchError
	return errors.As(err, &nrm) || errors.As(err, &nkm)
}

// disruptedBy reports why Karpenter is disrupting a node ("" when it is not).
func disruptedBy(n *corev1.Node, cl claimLookup) string {
	for _, t := range n.Spec.Taints {
		if t.Key == v1alpha1.KarpenterDisruptedTaint {
			return "the Node has the " + v1alpha1.KarpenterDisruptedTaint + " taint"
		}
	}
	if cl.Claim == nil {
		return ""
	}
	if cl.Claim.GetDeletionTimestamp() != nil {
		return "its NodeClaim " + cl.Claim.GetName() + " is being deleted"
	}
	conds, _, _ := unstructured.NestedSlice(cl.Claim.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if t, _ := m["type"].(string); slices.Contains(disruptingConditions, t) && m["status"] == "True" {
			return "its NodeClaim " + cl.Claim.GetName() + " has condition " + t
		}
	}
	return ""
}

// SlotBlocker says why a node must not be given a reboot slot now, or "".
// It is used by the pool reconciler for each candidate it is about to pick.
// A node that is not Ready is blocked, unless downOnFailed: it is down on
// an image of bootroll's that failed, its kubelet reports it NotReady
// (Ready=False, not Unknown: the host is up) and it has staged the new
// target, so booting that target is how it recovers (DESIGN §4: a new
// image retargets the failed and unavailable nodes too).
func SlotBlocker(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, n *corev1.Node, downOnFailed bool) (string, error) {
	if why := rollout.NodeBlocker(n, downOnFailed); why != "" {
		return why, nil
	}
	cl, err := lookupClaim(ctx, reader, mapper, n)
	if err != nil {
		return "", err
	}
	if cl.Missing {
		return "its NodeClaim " + nodeClaimName(n) + " cannot be found (unsafe: Karpenter may be replacing it)", nil
	}
	if !cl.Managed || cl.Absent {
		// No NodeClaim owns the node, or Karpenter's CRDs are gone: no
		// Karpenter disrupts it, and a karpenter.sh/disrupted taint left
		// behind (Karpenter removed mid-disruption) is stale; it would
		// keep the node from its update for good.
		return "", nil
	}
	return disruptedBy(n, cl), nil
}

// protect adds the Karpenter protection annotations that are not there yet
// to m (the Node about to be patched) and returns the keys bootroll added.
func protect(annotations map[string]string) (map[string]string, []string) {
	if annotations == nil {
		annotations = map[string]string{}
	}
	var added []string
	for _, k := range protectAnnotations {
		if _, ok := annotations[k]; !ok {
			annotations[k] = "true"
			added = append(added, k)
		}
	}
	return annotations, added
}

// foreignOwned reports whether a field manager other than bootroll's has
// written annotation key on obj: then someone else wants it and it stays.
func foreignOwned(obj client.Object, key string) bool {
	needle := `"f:` + key + `"`
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == v1alpha1.FieldManager || mf.FieldsV1 == nil {
			continue
		}
		if strings.Contains(string(mf.FieldsV1.Raw), needle) {
			return true
		}
	}
	return false
}

// unprotect removes from annotations the keys bootroll added, except those
// another party has written since (unless ignoreOthers, the test-only
// DropAnnotationOwnership).
func unprotect(obj client.Object, annotations map[string]string, added []string, ignoreOthers bool) {
	for _, k := range added {
		if ignoreOthers || !foreignOwned(obj, k) {
			delete(annotations, k)
		}
	}
}

// protectClaim adds the protection annotations to the NodeClaim and
// records which ones bootroll added.
func (r *NodeReconciler) protectClaim(ctx context.Context, s *nodeStep) error {
	ro := &s.bn.Status.Rollout
	cl, err := r.lookupClaim(ctx, s.node)
	if err != nil || cl.Claim == nil {
		return err
	}
	orig := cl.Claim.DeepCopy()
	ann, added := protect(cl.Claim.GetAnnotations())
	if r.opts.TestOnly.DropAnnotationOwnership && len(added) > 0 {
		added = protectAnnotations // claims the ones that were there before
	}
	if len(added) == 0 {
		return nil
	}
	// Record first: a crash after the patch must not forget what we added.
	// When the record already lists them (the claim lost them, or this
	// reconcile reads a stale record of a slot that has ended since),
	// nothing is written, so nothing is locked: check that the record is
	// the current one before the claim is annotated, or a slot given back
	// meanwhile would leave the annotations behind for good (envtest
	// TestPoolDeletionCleansUp, now and then under load).
	merged := mergeKeys(ro.AddedNodeClaimAnnotations, added)
	if slices.Equal(merged, ro.AddedNodeClaimAnnotations) {
		if err := r.current(ctx, s); err != nil {
			return fmt.Errorf("before protecting NodeClaim %s: %w", cl.Claim.GetName(), err)
		}
	}
	ro.AddedNodeClaimAnnotations = merged
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	cl.Claim.SetAnnotations(ann)
	if err := r.client.Patch(ctx, cl.Claim, client.MergeFrom(orig), client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("protect NodeClaim %s: %w", cl.Claim.GetName(), err)
	}
	return nil
}

// unprotectClaim removes the NodeClaim annotations bootroll added.
func (r *NodeReconciler) unprotectClaim(ctx context.Context, s *nodeStep) error {
	ro := &s.bn.Status.Rollout
	if len(ro.AddedNodeClaimAnnotations) == 0 {
		return nil
	}
	cl, err := r.lookupClaim(ctx, s.node)
	if err != nil {
		return err
	}
	if cl.Claim != nil {
		orig := cl.Claim.DeepCopy()
		ann := cl.Claim.GetAnnotations()
		if !r.opts.TestOnly.KeepAnnotations {
			unprotect(cl.Claim, ann, ro.AddedNodeClaimAnnotations, r.opts.TestOnly.DropAnnotationOwnership)
		}
		cl.Claim.SetAnnotations(ann)
		if err := r.client.Patch(ctx, cl.Claim, client.MergeFrom(orig), client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("unprotect NodeClaim %s: %w", cl.Claim.GetName(), err)
		}
	}
	ro.AddedNodeClaimAnnotations = nil
	return nil
}

func mergeKeys(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// grantCordon is what the pool reconciler writes on a
// node it grants a slot to: the cordon and slot marker, and the protection
// annotations bootroll adds to the Node and to its NodeClaim.
type grantCordon struct {
	pool      string
	node      *corev1.Node
	claim     *unstructured.Unstructured
	nodeKeys  []string
	claimKeys []string
}

// planGrantCordon records on b (the BootcNode about to be told of its slot)
// the cordon of node n and the protection annotations bootroll adds, as
// drain does, and returns what to write once b is written.
func (r *PoolReconciler) planGrantCordon(ctx context.Context, pool *v1alpha1.BootcNodePool, n *corev1.Node, b *v1alpha1.BootcNode, now time.Time) (grantCordon, error) {
	ro := &b.Status.Rollout
	// The state to give back is read from the API server, not the cache
	// (which may not show an admin's cordon yet); the cordon patch is
	// locked on this read.
	var fresh corev1.Node
	if err := r.reader.Get(ctx, types.NamespacedName{Name: n.Name}, &fresh); err != nil {
		return grantCordon{}, fmt.Errorf("re-read node %s before its slot: %w", n.Name, err)
	}
	n = &fresh
	g := grantCordon{pool: pool.Name, node: n}
	if ro.Cordoned {
		// A grant recorded before (its Node patch failed, or the
		// controller stopped): the cordon and the recorded keys go on
		// again, the missing ones only; what bootroll owns stays as
		// recorded. No record write locks this Node patch, so the record
		// must be the current one: the node reconciler may have given the
		// grant back since.
		var cur v1alpha1.BootcNode
		if err := r.reader.Get(ctx, types.NamespacedName{Name: b.Name}, &cur); err != nil {
			return grantCordon{}, fmt.Errorf("re-read BootcNode %s before its slot: %w", b.Name, err)
		}
		if cur.ResourceVersion != b.ResourceVersion {
			return grantCordon{}, apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("bootcnodes").GroupResource(), b.Name,
				fmt.Errorf("the cached record is stale (%s, current %s)", b.ResourceVersion, cur.ResourceVersion))
		}
		g.nodeKeys = ro.AddedAnnotations
		if len(ro.AddedNodeClaimAnnotations) > 0 {
			cl, err := lookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
			if err != nil {
				return grantCordon{}, err
			}
			g.claim, g.claimKeys = cl.Claim, ro.AddedNodeClaimAnnotations
		}
		return g, nil
	}
	if _, ours := n.Annotations[v1alpha1.AnnotationSlot]; !ours && !r.opts.TestOnly.ForgetPriorCordon {
		ro.PriorUnschedulable = ptr.To(n.Spec.Unschedulable)
	}
	if !r.opts.TestOnly.SkipKarpenterProtection && (pool.Spec.Karpenter.Protect == nil || *pool.Spec.Karpenter.Protect) {
		claimAll := r.opts.TestOnly.DropAnnotationOwnership
		_, g.nodeKeys = protect(maps.Clone(n.Annotations))
		if claimAll && len(g.nodeKeys) > 0 {
			g.nodeKeys = protectAnnotations // test-only: claims the ones that were there before
		}
		cl, err := lookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
		if err != nil {
			return grantCordon{}, err
		}
		if cl.Claim != nil {
			g.claim = cl.Claim
			_, g.claimKeys = protect(maps.Clone(cl.Claim.GetAnnotations()))
			if claimAll && len(g.claimKeys) > 0 {
				g.claimKeys = protectAnnotations
			}
		}
		ro.AddedAnnotations = mergeKeys(ro.AddedAnnotations, g.nodeKeys)
		ro.AddedNodeClaimAnnotations = mergeKeys(ro.AddedNodeClaimAnnotations, g.claimKeys)
	}
	ro.ProtectUntil = nil
	ro.Cordoned = true
	ro.DrainStartedAt = &metav1.Time{Time: now}
	return g, nil
}

// apply cordons the Node with the slot marker and the planned annotations
// in one patch, then annotates the NodeClaim. Only missing keys are added;
// a Node or NodeClaim that is gone is not an error (the node reconciler
// gives the slot back).
func (g grantCordon) apply(ctx context.Context, c client.Client) error {
	if g.node != nil {
		m := g.node.DeepCopy()
		m.Spec.Unschedulable = true
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1alpha1.AnnotationSlot] = g.pool
		for _, k := range g.nodeKeys {
			if _, ok := m.Annotations[k]; !ok {
				m.Annotations[k] = "true"
			}
		}
		if err := c.Patch(ctx, m, patch.Node(g.node), client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordon node %s: %w", g.node.Name, err)
		}
	}
	if g.claim != nil && len(g.claimKeys) > 0 {
		orig := g.claim.DeepCopy()
		ann := g.claim.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		for _, k := range g.claimKeys {
			if _, ok := ann[k]; !ok {
				ann[k] = "true"
			}
		}
		g.claim.SetAnnotations(ann)
		if err := c.Patch(ctx, g.claim, client.MergeFrom(orig), client.FieldOwner(v1alpha1.FieldManager)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("annotate NodeClaim %s: %w", g.claim.GetName(), err)
		}
	}
	return nil
}
