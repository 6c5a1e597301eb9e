package pool

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A status that differs only in condition transition times is not written
// again; any other difference is.
func TestEqualStatusIgnoresOnlyTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	base := func() *v1alpha1.BootcNodePoolStatus {
		return &v1alpha1.BootcNodePoolStatus{
			Nodes: 3, Summary: "1/3 updated",
			Slots:      []v1alpha1.Slot{{Node: "a", Image: "img", Since: t0}},
			Conditions: []metav1.Condition{{Type: "UpToDate", Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "1/3 updated", LastTransitionTime: t0}},
		}
	}
	tests := []struct {
		name   string
		change func(*v1alpha1.BootcNodePoolStatus)
		equal  bool
	}{
		{"identical", func(*v1alpha1.BootcNodePoolStatus) {}, true},
		{"transition time only", func(s *v1alpha1.BootcNodePoolStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
		}, true},
		{"slot removed", func(s *v1alpha1.BootcNodePoolStatus) { s.Slots = nil }, false},
		{"conditions removed", func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions = nil }, false},
		{"condition message", func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions[0].Message = "2/3 updated" }, false},
		{"condition added", func(s *v1alpha1.BootcNodePoolStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Halted"})
		}, false},
		{"slot since", func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[0].Since = metav1.NewTime(t0.Add(time.Second)) }, false},
		{"summary", func(s *v1alpha1.BootcNodePoolStatus) { s.Summary = "2/3 updated" }, false},
		{"nil and empty lists", func(s *v1alpha1.BootcNodePoolStatus) { s.Phases = []v1alpha1.PhaseCount{} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.change(b)
			if got := equalStatus(a, b); got != tt.equal {
				t.Errorf("equalStatus = %v, want %v", got, tt.equal)
			}
			if a.Conditions[0].LastTransitionTime != t0 {
				t.Errorf("equalStatus changed its argument")
			}
		})
	}
}
