package rollout

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// StuckEvent is a Warning Event for a reason a pool's rollout is not
// moving.
type StuckEvent struct {
	Reason, Message string
}

// stuckReasons are the condition reasons that say a rollout is not moving
// (or something in it is wrong), by condition type.
var stuckReasons = map[string][]string{
	v1alpha1.ConditionDegraded: {v1alpha1.ReasonResolveFailed, v1alpha1.ReasonNodeConflict, v1alpha1.ReasonNodesFailed,
		v1alpha1.ReasonDrainsBlocked, v1alpha1.ReasonDaemonErrors, v1alpha1.ReasonNodesDegraded},
	v1alpha1.ConditionHalted:   {v1alpha1.ReasonMaxFailures, v1alpha1.ReasonRemainingFailed},
	v1alpha1.ConditionUpToDate: {v1alpha1.ReasonNoSlots, v1alpha1.ReasonSlotsDeferred},
}

// StuckEvents returns an event for each condition whose reason became one
// that says the rollout is not moving, from before to after: once per
// change of reason, not on every pass.
func StuckEvents(before, after []metav1.Condition) []StuckEvent {
	var out []StuckEvent
	for _, t := range []string{v1alpha1.ConditionHalted, v1alpha1.ConditionDegraded, v1alpha1.ConditionUpToDate} {
		now := meta.FindStatusCondition(after, t)
		if now == nil || !slices.Contains(stuckReasons[t], now.Reason) {
			continue
		}
		if was := meta.FindStatusCondition(before, t); was != nil && was.Reason == now.Reason {
			continue
		}
		out = append(out, StuckEvent{Reason: now.Reason, Message: now.Message})
	}
	return out
}
