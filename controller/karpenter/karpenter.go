// Package karpenter is what bootroll knows of Karpenter: a Node's
// NodeClaim and whether Karpenter is disrupting it (SlotBlocker), and the
// protection annotations bootroll adds and removes without taking those
// someone else set (Protect, Unprotect). NodeClaims and CRDs are read as
// unstructured: the controller has no Karpenter Go dependency and runs
// with or without its CRDs.
package karpenter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
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

// ProtectAnnotations are put on Nodes and NodeClaims in a slot.
var ProtectAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}

// NodeClaim conditions under which Karpenter is disrupting the node.
var disruptingConditions = []string{"DisruptionReason", "InstanceTerminating", "Rebooting"}

// ClaimName returns the name of the NodeClaim that owns a Node, or "".
func ClaimName(n *corev1.Node) string {
	for _, o := range n.OwnerReferences {
		if o.Kind == NodeClaimGVK.Kind && strings.HasPrefix(o.APIVersion, NodeClaimGVK.Group+"/") {
			return o.Name
		}
	}
	return ""
}

// Claim is what is known about a Node's NodeClaim.
type Claim struct {
	// Managed is true when the Node is owned by a NodeClaim.
	Managed bool
	// Absent is true when Karpenter is not installed (no NodeClaim CRD).
	Absent bool
	// Missing is true when the CRD exists but the NodeClaim does not: the
	// node is then unsafe to touch.
	Missing bool
	Claim   *unstructured.Unstructured
}

func LookupClaim(ctx context.Context, reader client.Reader, mapper meta.RESTMapper, n *corev1.Node) (Claim, error) {
	name := ClaimName(n)
	if name == "" {
		return Claim{}, nil
	}
	out := Claim{Managed: true}
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
	if !NoKind(err) && !apierrors.IsNotFound(err) {
		return out, fmt.Errorf("get NodeClaim %s of node %s: %w", name, n.Name, err)
	}
	// Is Karpenter installed at all?
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(CRDGVK)
	if cerr := reader.Get(ctx, types.NamespacedName{Name: NodeClaimCRD}, crd); cerr != nil {
		if apierrors.IsNotFound(cerr) || NoKind(cerr) {
			out.Absent = true
			return out, nil
		}
		return out, fmt.Errorf("look for the NodeClaim CRD: %w", cerr)
	}
	if NoKind(err) {
		// The CRD is there but the mapping is not: refresh and retry once.
		if rm, ok := mapper.(meta.ResettableRESTMapper); ok {
			rm.Reset()
		}
		if err = get(); err == nil {
			return out, nil
		}
		if !apierrors.IsNotFound(err) && !NoKind(err) {
			return out, fmt.Errorf("get NodeClaim %s of node %s: %w", name, n.Name, err)
		}
	}
	out.Missing = true
	return out, nil
}

func NoKind(err error) bool {
	if meta.IsNoMatchError(err) {
		return true
	}
	var nrm *meta.NoResourceMatchError
	var nkm *meta.NoKindMatchError
	return errors.As(err, &nrm) || errors.As(err, &nkm)
}

// DisruptedBy reports why Karpenter is disrupting a node ("" when it is not).
func DisruptedBy(n *corev1.Node, cl Claim) string {
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
	cl, err := LookupClaim(ctx, reader, mapper, n)
	if err != nil {
		return "", err
	}
	if cl.Missing {
		return "its NodeClaim " + ClaimName(n) + " cannot be found (unsafe: Karpenter may be replacing it)", nil
	}
	if !cl.Managed || cl.Absent {
		// No NodeClaim owns the node, or Karpenter's CRDs are gone: no
		// Karpenter disrupts it, and a karpenter.sh/disrupted taint left
		// behind (Karpenter removed mid-disruption) is stale; it would
		// keep the node from its update for good.
		return "", nil
	}
	return DisruptedBy(n, cl), nil
}

// Protect adds the Karpenter protection annotations that are not there yet
// to m (the Node about to be patched) and returns the keys bootroll added.
func Protect(annotations map[string]string) (map[string]string, []string) {
	if annotations == nil {
		annotations = map[string]string{}
	}
	var added []string
	for _, k := range ProtectAnnotations {
		if _, ok := annotations[k]; !ok {
			annotations[k] = "true"
			added = append(added, k)
		}
	}
	return annotations, added
}

// ForeignOwned reports whether a field manager other than bootroll's owns
// field key of obj by its managedFields (an annotation key, or a field
// name such as a Node's unschedulable): someone else wrote it, and it
// stays as they left it.
func ForeignOwned(obj client.Object, key string) bool {
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

// Unprotect removes from annotations the keys bootroll added, except those
// another party has written since (unless ignoreOthers, the test-only
// DropAnnotationOwnership).
func Unprotect(obj client.Object, annotations map[string]string, added []string, ignoreOthers bool) {
	for _, k := range added {
		if ignoreOthers || !ForeignOwned(obj, k) {
			delete(annotations, k)
		}
	}
}

func MergeKeys(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
