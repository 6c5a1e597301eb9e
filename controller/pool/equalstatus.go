package pool

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// equalStatus reports whether two pool statuses are the same but for
// condition transition times, so an unchanged status is not written: what
// patch.EqualIgnoringTransitions (apiequality.Semantic, with the
// conditions compared apart) says, field by field without reflection. A
// pass compares its status with the one read, and a pool's slot table at
// 200 nodes and 20% made Semantic's reflective walk a few percent of a
// rollout's CPU. TestEqualStatusFields fails when a field is added to one
// of the types compared here, and TestEqualStatusAsSemantic compares the
// two.
func equalStatus(a, b *v1alpha1.BootcNodePoolStatus) bool {
	if len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		x.LastTransitionTime, y.LastTransitionTime = metav1.Time{}, metav1.Time{}
		if x != y {
			return false
		}
	}
	return a.ObservedGeneration == b.ObservedGeneration &&
		a.TargetImage == b.TargetImage &&
		a.TargetDigest == b.TargetDigest &&
		equalTimePtr(a.ResolvedAt, b.ResolvedAt) &&
		equalTimePtr(a.TargetSince, b.TargetSince) &&
		equalList(a.DeployedDigests, b.DeployedDigests, func(x, y *v1alpha1.DigestCount) bool { return *x == *y }) &&
		a.Nodes == b.Nodes &&
		a.UpdatedNodes == b.UpdatedNodes &&
		equalList(a.Phases, b.Phases, func(x, y *v1alpha1.PhaseCount) bool { return *x == *y }) &&
		equalList(a.Slots, b.Slots, equalSlot) &&
		equalList(a.Failures, b.Failures, equalFailure) &&
		equalHalt(a.Halt, b.Halt) &&
		equalHalt(a.LastHalt, b.LastHalt) &&
		a.Summary == b.Summary
}

// equalTime is apiequality.Semantic's comparison of times.
func equalTime(a, b metav1.Time) bool { return a.UTC() == b.UTC() }

// equalTimePtr compares pointers as Semantic does: both nil, or both set
// to equal times.
func equalTimePtr(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return equalTime(*a, *b)
}

// equalList compares lists as Semantic does: nil and empty are equal, else
// element by element.
func equalList[T any](a, b []T, eq func(x, y *T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !eq(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

func equalSlot(x, y *v1alpha1.Slot) bool {
	return x.Node == y.Node && x.Image == y.Image && equalTime(x.Since, y.Since) && x.UID == y.UID && x.Down == y.Down
}

func equalFailure(x, y *v1alpha1.NodeFailure) bool {
	return x.Node == y.Node && x.Image == y.Image && x.Reason == y.Reason && x.Message == y.Message && equalTime(x.Time, y.Time)
}

func equalHalt(a, b *v1alpha1.HaltRecord) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Image == b.Image && equalTime(a.Since, b.Since) && equalList(a.Failures, b.Failures, equalFailure)
}
