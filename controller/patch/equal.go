package patch

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EqualIgnoringTransitions compares two statuses (of a struct type S
// with a Conditions field, reached by conds) ignoring condition transition
// times, so an unchanged object is not written. It copies the structs
// shallowly: nothing is deep-copied.
func EqualIgnoringTransitions[S any](a, b *S, conds func(*S) *[]metav1.Condition) bool {
	ca, cb := *conds(a), *conds(b)
	if len(ca) != len(cb) {
		return false
	}
	for i := range ca {
		x, y := ca[i], cb[i]
		x.LastTransitionTime, y.LastTransitionTime = metav1.Time{}, metav1.Time{}
		if x != y {
			return false
		}
	}
	sa, sb := *a, *b
	*conds(&sa), *conds(&sb) = nil, nil
	return apiequality.Semantic.DeepEqual(sa, sb)
}
