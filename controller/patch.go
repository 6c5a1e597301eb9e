package controller

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// bnPart names the part of a BootcNode a bootcNodePatch writes.
type bnPart int

const (
	// partRecord is the controller's part of the status: status.phase and
	// status.rollout. The daemon's part is never in the patch, so a daemon
	// newer than the controller keeps fields the controller does not know.
	partRecord bnPart = iota
	// partSpec is the spec, which only the controller writes.
	partSpec
)

// bootcNodePatch is a JSON merge patch of one part of a BootcNode, from
// the object read (from) to the object passed to Patch; with lock it
// carries from's resourceVersion as an optimistic lock.
//
// It sends what client.MergeFrom(from) would send for a change of that
// part, but diffs only the part: MergeFrom marshals and compares the whole
// object twice, which made it the largest cost of a node transition.
// Changes outside the part are not sent.
type bootcNodePatch struct {
	from *v1alpha1.BootcNode
	part bnPart
	lock bool
}

// recordPatch writes the controller's record (status.phase and
// status.rollout) under an optimistic lock.
func recordPatch(from *v1alpha1.BootcNode) bootcNodePatch {
	return bootcNodePatch{from: from, part: partRecord, lock: true}
}

// specPatch writes the spec, under an optimistic lock when lock is set.
func specPatch(from *v1alpha1.BootcNode, lock bool) bootcNodePatch {
	return bootcNodePatch{from: from, part: partSpec, lock: lock}
}

// controllerPart is the part of a BootcNode status the controller writes.
type controllerPart struct {
	Phase   v1alpha1.NodePhase     `json:"phase,omitempty"`
	Rollout v1alpha1.RolloutStatus `json:"rollout"`
}

func (p bootcNodePatch) Type() types.PatchType { return types.MergePatchType }

func (p bootcNodePatch) Data(obj client.Object) ([]byte, error) {
	bn, ok := obj.(*v1alpha1.BootcNode)
	if !ok {
		return nil, fmt.Errorf("BootcNode patch of a %T", obj)
	}
	if p.lock && p.from.ResourceVersion == "" {
		return nil, fmt.Errorf("BootcNode %s was read without a resourceVersion to lock on", bn.Name)
	}
	var before, after any
	key := "status"
	switch p.part {
	case partRecord:
		before = controllerPart{p.from.Status.Phase, p.from.Status.Rollout}
		after = controllerPart{bn.Status.Phase, bn.Status.Rollout}
	case partSpec:
		before, after, key = p.from.Spec, bn.Spec, "spec"
	default:
		return nil, fmt.Errorf("BootcNode patch of unknown part %d", p.part)
	}
	a, err := json.Marshal(before)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(after)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("diff the %s of BootcNode %s: %w", key, bn.Name, err)
	}
	doc := map[string]any{key: json.RawMessage(diff)}
	if p.lock {
		doc["metadata"] = map[string]string{"resourceVersion": p.from.ResourceVersion}
	}
	return json.Marshal(doc)
}

// nodePatch is a JSON merge patch of what bootroll changes on a Node (its
// annotations, spec.unschedulable and spec.taints) from the Node read
// (from) to the Node passed to Patch, locked on from's resourceVersion. It
// sends what client.MergeFromWithOptions(from, MergeFromWithOptimisticLock)
// would for a change of those fields, without marshalling and diffing the
// whole Node twice. Changes to other fields are not sent: extend nodePart
// before changing any other field of a Node.
type nodePatch struct{ from *corev1.Node }

type nodePart struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool           `json:"unschedulable"`
		Taints        []corev1.Taint `json:"taints"`
	} `json:"spec"`
}

func nodePartOf(n *corev1.Node) nodePart {
	var p nodePart
	p.Metadata.Annotations = n.Annotations
	p.Spec.Unschedulable = n.Spec.Unschedulable
	p.Spec.Taints = n.Spec.Taints
	return p
}

func (p nodePatch) Type() types.PatchType { return types.MergePatchType }

func (p nodePatch) Data(obj client.Object) ([]byte, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("Node patch of a %T", obj)
	}
	if p.from.ResourceVersion == "" {
		return nil, fmt.Errorf("node %s was read without a resourceVersion to lock on", n.Name)
	}
	a, err := json.Marshal(nodePartOf(p.from))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(nodePartOf(n))
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(a, b)
	if err != nil {
		return nil, fmt.Errorf("diff node %s: %w", n.Name, err)
	}
	// The lock goes into the diff's metadata.
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(diff, &doc); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if raw, ok := doc["metadata"]; ok {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
	}
	meta["resourceVersion"] = p.from.ResourceVersion
	mb, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	doc["metadata"] = mb
	return json.Marshal(doc)
}
