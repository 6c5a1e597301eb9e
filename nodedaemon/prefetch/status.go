package prefetch

import (
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// Equal reports whether two progress reports say the same thing, so the
// daemon writes only changes.
func Equal(a, b []v1alpha1.PinnedSetProgress) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return equality.Semantic.DeepEqual(a, b)
}

// StatusPatch is the JSON merge patch that writes progress as the
// BootcNode's status.daemon.pinnedImages and nothing else. A merge patch
// replaces a list whole, so images and sets dropped from progress go; an
// empty progress removes the field.
func StatusPatch(progress []v1alpha1.PinnedSetProgress) ([]byte, error) {
	var v any
	if len(progress) > 0 {
		v = progress
	}
	return json.Marshal(map[string]any{"status": map[string]any{"daemon": map[string]any{"pinnedImages": v}}})
}

// The daemon's condition on its runtime, in status.daemon.conditions.
const (
	// ConditionAvailable says whether the container runtime answers on
	// its CRI socket, so that pinned images can be pulled.
	ConditionAvailable = v1alpha1.DaemonConditionPrefetchAvailable
	// ReasonRuntimeUnavailable: no runtime answers (the condition is
	// False); the message says what was tried. It is the reason pinned
	// images carry in a PinnedImageSet's failures for such a node.
	ReasonRuntimeUnavailable = v1alpha1.PinnedReasonRuntimeUnavailable
	// ReasonRuntimeAvailable: the runtime answers again (True).
	ReasonRuntimeAvailable = "RuntimeAvailable"
	// maxConditionMessage bounds the condition's message.
	maxConditionMessage = 1024
)

// Availability returns conds with ConditionAvailable set from err (nil:
// the runtime answered) at now, and whether that changed them. The
// condition is added only when the runtime fails to answer: while it has
// always answered the daemon writes nothing, and an absent condition
// stays absent.
func Availability(conds []metav1.Condition, err error, now time.Time, generation int64) ([]metav1.Condition, bool) {
	cur := meta.FindStatusCondition(conds, ConditionAvailable)
	if cur == nil && err == nil {
		return conds, false
	}
	want := metav1.Condition{
		Type: ConditionAvailable, Status: metav1.ConditionTrue, Reason: ReasonRuntimeAvailable,
		Message: "the container runtime answers on its CRI socket", ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
	}
	if err != nil {
		want.Status, want.Reason, want.Message = metav1.ConditionFalse, ReasonRuntimeUnavailable, shorten(err.Error(), "")
		if len(want.Message) > maxConditionMessage {
			want.Message = want.Message[:maxConditionMessage]
		}
	}
	if cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message {
		return conds, false
	}
	out := slices.Clone(conds)
	meta.SetStatusCondition(&out, want)
	return out, true
}

// ConditionsPatch is the JSON merge patch that writes conds as the
// BootcNode's status.daemon.conditions and nothing else (the daemon is
// their only writer; a merge patch replaces the list whole).
func ConditionsPatch(conds []metav1.Condition) ([]byte, error) {
	var v any
	if len(conds) > 0 {
		v = conds
	}
	return json.Marshal(map[string]any{"status": map[string]any{"daemon": map[string]any{"conditions": v}}})
}
