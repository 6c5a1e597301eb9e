// Package patch builds the controller's JSON merge patches of BootcNodes
// and Nodes: each diffs only the part the controller writes, field by
// field, and carries the resourceVersion read as an optimistic lock.
package patch

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

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
// part, but diffs only the part, field by field (mergeDiff): MergeFrom
// marshals the whole object twice and decodes both encodings to diff them,
// which made it the largest cost of a node transition. Changes outside the
// part are not sent.
type bootcNodePatch struct {
	from *v1alpha1.BootcNode
	part bnPart
	lock bool
}

// recordPatch writes the controller's record (status.phase and
// status.rollout) under an optimistic lock.
func Record(from *v1alpha1.BootcNode) client.Patch {
	return bootcNodePatch{from: from, part: partRecord, lock: true}
}

// specPatch writes the spec, under an optimistic lock when lock is set.
func Spec(from *v1alpha1.BootcNode, lock bool) client.Patch {
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
	buf := make([]byte, 0, 256)
	buf = append(buf, '{')
	if p.lock {
		buf = append(buf, `"metadata":{`...)
		buf = append(appendLock(buf, p.from.ResourceVersion), ',')
	}
	var err error
	key := "status"
	switch p.part {
	case partRecord:
		buf = append(buf, `"status":`...)
		buf = appendRecordDiff(buf, p.from.Status.Phase, bn.Status.Phase, &p.from.Status.Rollout, &bn.Status.Rollout)
	case partSpec:
		key = "spec"
		buf = append(buf, `"spec":`...)
		buf, err = appendMergeDiff(buf, p.from.Spec, bn.Spec)
	default:
		return nil, fmt.Errorf("BootcNode patch of unknown part %d", p.part)
	}
	if err != nil {
		return nil, fmt.Errorf("diff the %s of BootcNode %s: %w", key, bn.Name, err)
	}
	return append(buf, '}'), nil
}

// appendLock appends the last member of a patch's metadata, the
// resourceVersion rv, and closes the metadata: it makes the patch an
// optimistic lock, which the server refuses with a conflict when the
// object changed since rv was read.
func appendLock(buf []byte, rv string) []byte {
	buf = append(buf, `"resourceVersion":`...)
	buf, _ = appendJSONString(buf, rv) // a string always encodes
	return append(buf, '}')
}

// nodePatch is a JSON merge patch of what bootroll changes on a Node (its
// annotations, spec.unschedulable and spec.taints) from the Node read
// (from) to the Node passed to Patch, locked on from's resourceVersion. It
// sends what client.MergeFromWithOptions(from, MergeFromWithOptimisticLock)
// would for a change of those fields, without marshalling and diffing the
// whole Node twice. Changes to other fields are not sent: extend nodeMeta
// or nodeSpec before changing any other field of a Node.
type nodePatch struct{ from *corev1.Node }

// Node is the nodePatch from the Node read (from).
func Node(from *corev1.Node) client.Patch { return nodePatch{from: from} }

// nodeMeta and nodeSpec are the parts of a Node's metadata and spec a
// nodePatch writes.
type nodeMeta struct {
	Annotations map[string]string `json:"annotations"`
}

type nodeSpec struct {
	Unschedulable bool           `json:"unschedulable"`
	Taints        []corev1.Taint `json:"taints"`
}

func (p nodePatch) Type() types.PatchType { return types.MergePatchType }

// Data is {"metadata":{<the annotations' diff>,"resourceVersion":...},
// "spec":<the diff of unschedulable and taints>}, the spec left out when
// it has no change: the keys in json.Marshal's order.
func (p nodePatch) Data(obj client.Object) ([]byte, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("Node patch of a %T", obj)
	}
	if p.from.ResourceVersion == "" {
		return nil, fmt.Errorf("node %s was read without a resourceVersion to lock on", n.Name)
	}
	buf := make([]byte, 0, 256)
	buf = append(buf, `{"metadata":{`...)
	buf, wrote, err := appendMembers(buf, reflect.ValueOf(nodeMeta{p.from.Annotations}), reflect.ValueOf(nodeMeta{n.Annotations}), true)
	if err != nil {
		return nil, fmt.Errorf("diff node %s: %w", n.Name, err)
	}
	if wrote {
		buf = append(buf, ',')
	}
	buf = appendLock(buf, p.from.ResourceVersion)
	spec := len(buf)
	buf = append(buf, `,"spec":`...)
	buf, wrote, err = appendObjectDiff(buf, reflect.ValueOf(nodeSpec{p.from.Spec.Unschedulable, p.from.Spec.Taints}), reflect.ValueOf(nodeSpec{n.Spec.Unschedulable, n.Spec.Taints}))
	if err != nil {
		return nil, fmt.Errorf("diff node %s: %w", n.Name, err)
	}
	if !wrote {
		buf = buf[:spec]
	}
	return append(buf, '}'), nil
}

// RemoveFinalizer removes bootroll's finalizer from obj, locked on the
// version read so no other finalizer is dropped.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	before := obj.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(obj, v1alpha1.Finalizer) {
		return nil
	}
	if err := c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("remove finalizer %s from %s: %w", v1alpha1.Finalizer, obj.GetName(), err)
	}
	return nil
}
