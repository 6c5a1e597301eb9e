package controller

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// recordPatch is a JSON merge patch of the controller's part of a
// BootcNode status (status.phase and status.rollout) from the object read
// (from) to the object passed to Patch, locked to the resourceVersion read.
//
// It sends what client.MergeFromWithOptions(from, MergeFromWithOptimisticLock)
// would send for a change of those fields, but diffs only them: that diff
// marshals and compares the whole object twice, which made it the largest
// cost of a node transition. The daemon's part of the status is never in
// the patch, so a daemon newer than the controller keeps fields the
// controller does not know.
type recordPatch struct{ from *v1alpha1.BootcNode }

// controllerPart is the part of a BootcNode status the controller writes.
type controllerPart struct {
	Phase   v1alpha1.NodePhase     `json:"phase,omitempty"`
	Rollout v1alpha1.RolloutStatus `json:"rollout"`
}

func (p recordPatch) Type() types.PatchType { return types.MergePatchType }

func (p recordPatch) Data(obj client.Object) ([]byte, error) {
	bn, ok := obj.(*v1alpha1.BootcNode)
	if !ok {
		return nil, fmt.Errorf("recordPatch: %T is not a *BootcNode", obj)
	}
	if p.from.ResourceVersion == "" {
		return nil, fmt.Errorf("recordPatch: BootcNode %s was read without a resourceVersion to lock on", bn.Name)
	}
	before, err := json.Marshal(controllerPart{p.from.Status.Phase, p.from.Status.Rollout})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(controllerPart{bn.Status.Phase, bn.Status.Rollout})
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, fmt.Errorf("diff the status of BootcNode %s: %w", bn.Name, err)
	}
	return json.Marshal(struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status json.RawMessage `json:"status"`
	}{Metadata: struct {
		ResourceVersion string `json:"resourceVersion"`
	}{p.from.ResourceVersion}, Status: diff})
}
