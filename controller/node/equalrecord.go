package node

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// equalRollout says what apiequality.Semantic.DeepEqual says of two
// rollout records, field by field: patchStatus compares the record with
// the one read before each write, and Semantic's reflective walk was
// more than a tenth of a record write's cost in the controller.
// TestEqualRolloutFields fails when a field is added to RolloutStatus,
// and TestEqualRolloutAsSemantic compares the two.
func equalRollout(a, b *v1alpha1.RolloutStatus) bool {
	return a.TargetImage == b.TargetImage &&
		equalTimePtr(a.PhaseSince, b.PhaseSince) &&
		equalBoolPtr(a.PriorUnschedulable, b.PriorUnschedulable) &&
		a.Cordoned == b.Cordoned &&
		slices.Equal(a.AddedAnnotations, b.AddedAnnotations) &&
		slices.Equal(a.AddedNodeClaimAnnotations, b.AddedNodeClaimAnnotations) &&
		equalTimePtr(a.ProtectUntil, b.ProtectUntil) &&
		equalTimePtr(a.SlotGrantedAt, b.SlotGrantedAt) &&
		equalTimePtr(a.DrainStartedAt, b.DrainStartedAt) &&
		equalTimePtr(a.RetryAfter, b.RetryAfter) &&
		a.Failures == b.Failures &&
		a.FailedImage == b.FailedImage &&
		a.RollbackTo == b.RollbackTo &&
		a.Reason == b.Reason &&
		a.Message == b.Message
}

// equalTimePtr compares pointers to times as Semantic does: both nil, or
// both set to the same instant (Semantic's a.UTC() == b.UTC(), which
// ignores the zone and the monotonic reading).
func equalTimePtr(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.UTC() == b.UTC()
}

func equalBoolPtr(a, b *bool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
