package invariant

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSameSelector checks that selectors sameSelector calls the same make
// the same labels.Selector, and that the others it tells apart do not.
func TestSameSelector(t *testing.T) {
	sels := []*metav1.LabelSelector{
		nil,
		{},
		{MatchLabels: map[string]string{}},
		{MatchLabels: map[string]string{"app": "web"}},
		{MatchLabels: map[string]string{"app": "db"}},
		{MatchLabels: map[string]string{"app": "web", "tier": "a"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists, Values: []string{}}}},
	}
	made := func(s *metav1.LabelSelector) string {
		if s == nil {
			return "<nil>"
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return "error " + err.Error()
		}
		return sel.String()
	}
	for i, a := range sels {
		for j, b := range sels {
			if sameSelector(a, b) && made(a) != made(b) {
				t.Errorf("selectors %d and %d: sameSelector says the same, they make %q and %q", i, j, made(a), made(b))
			}
			if i == j && !sameSelector(a, b.DeepCopy()) {
				t.Errorf("selector %d: not the same as its copy", i)
			}
		}
	}
}
