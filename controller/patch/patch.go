// Package patch builds the controller's JSON merge patches of BootcNodes
// and Nodes: each diffs only the part the controller writes, field by
// field, and carries the resourceVersion read as an optimistic lock.
package patch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

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
// or nodeSpec, and Data's diff of them (appendAnnotationsDiff,
// appendNodeSpecDiff), before changing any other field of a Node.
type nodePatch struct{ from *corev1.Node }

// Node is the nodePatch from the Node read (from).
func Node(from *corev1.Node) client.Patch { return nodePatch{from: from} }

// nodeMeta and nodeSpec are the parts of a Node's metadata and spec a
// nodePatch writes. Data diffs them by hand; appendMergeDiff of them is
// its reference in the tests (TestNodePatchAsMergeDiff).
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
	buf, wrote, err := appendAnnotationsDiff(buf, p.from.Annotations, n.Annotations)
	if err != nil {
		return nil, fmt.Errorf("diff node %s: %w", n.Name, err)
	}
	if wrote {
		buf = append(buf, ',')
	}
	buf = appendLock(buf, p.from.ResourceVersion)
	buf, err = appendNodeSpecDiff(buf, &p.from.Spec, &n.Spec)
	if err != nil {
		return nil, fmt.Errorf("diff node %s: %w", n.Name, err)
	}
	return append(buf, '}'), nil
}

// appendAnnotationsDiff appends the "annotations" member of a nodePatch's
// metadata, from a to b, and says whether it did: what appendMembers
// gives for nodeMeta, written out (TestNodePatchAsMergeDiff). Both maps
// set, the keys changed, added (with their values) and removed (null);
// a map set whole on a Node that had none; null for a Node whose
// annotations went.
func appendAnnotationsDiff(buf []byte, a, b map[string]string) (_ []byte, wrote bool, err error) {
	start := len(buf)
	buf = append(buf, `"annotations":`...)
	value := len(buf)
	switch {
	case a != nil && b != nil:
		buf, err = appendStringMapDiff(buf, a, b)
	case b != nil:
		buf, err = appendJSON(buf, b)
	case a != nil:
		buf = append(buf, "null"...)
	}
	if err != nil || len(buf) == value {
		return buf[:start], false, err
	}
	return buf, true, nil
}

// appendNodeSpecDiff appends the "spec" member of a nodePatch, the diff
// of spec.taints and spec.unschedulable from a to b, after a comma;
// nothing when neither changed. It is what appendObjectDiff gives for
// nodeSpec, written out (TestNodePatchAsMergeDiff): the taints, a list,
// are sent whole when their JSON changed.
func appendNodeSpecDiff(buf []byte, a, b *corev1.NodeSpec) ([]byte, error) {
	start := len(buf)
	buf = append(buf, `,"spec":{`...)
	members := len(buf)
	if !sameTaints(a.Taints, b.Taints) {
		jb, err := json.Marshal(b.Taints)
		if err != nil {
			return nil, err
		}
		ja, err := json.Marshal(a.Taints)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(ja, jb) {
			buf = append(append(buf, `"taints":`...), jb...)
		}
	}
	if a.Unschedulable != b.Unschedulable {
		if len(buf) > members {
			buf = append(buf, ',')
		}
		buf = strconv.AppendBool(append(buf, `"unschedulable":`...), b.Unschedulable)
	}
	if len(buf) == members {
		return buf[:start], nil
	}
	return append(buf, '}'), nil
}

// sameTaints is reflect.DeepEqual of two lists of taints, the common
// case of none on either side first.
func sameTaints(a, b []corev1.Taint) bool {
	if len(a) == 0 && len(b) == 0 {
		return (a == nil) == (b == nil)
	}
	return reflect.DeepEqual(a, b)
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
