package rollout

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestStuckEvents: an event when a condition's reason becomes one that
// says the rollout is not moving, none while it stays, none for a
// healthy reason.
func TestStuckEvents(t *testing.T) {
	c := func(typ, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Reason: reason, Message: msg}
	}
	rolling := []metav1.Condition{c(v1alpha1.ConditionDegraded, v1alpha1.ReasonAsExpected, ""), c(v1alpha1.ConditionUpToDate, v1alpha1.ReasonRollingOut, "1/3 updated")}
	deferred := []metav1.Condition{c(v1alpha1.ConditionDegraded, v1alpha1.ReasonAsExpected, ""), c(v1alpha1.ConditionUpToDate, v1alpha1.ReasonSlotsDeferred, "n2 (the Node is not Ready)")}
	blocked := []metav1.Condition{c(v1alpha1.ConditionDegraded, v1alpha1.ReasonDrainsBlocked, "n1 (PDB web)"), c(v1alpha1.ConditionUpToDate, v1alpha1.ReasonSlotsDeferred, "n2 (the Node is not Ready)")}
	for _, tc := range []struct {
		name          string
		before, after []metav1.Condition
		want          []StuckEvent
	}{
		{"healthy", nil, rolling, nil},
		{"became deferred", rolling, deferred, []StuckEvent{{v1alpha1.ReasonSlotsDeferred, "n2 (the Node is not Ready)"}}},
		{"still deferred: no new event", deferred, deferred, nil},
		{"drains blocked too", deferred, blocked, []StuckEvent{{v1alpha1.ReasonDrainsBlocked, "n1 (PDB web)"}}},
		{"moving again", blocked, rolling, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StuckEvents(tc.before, tc.after)
			if len(got) != len(tc.want) {
				t.Fatalf("StuckEvents = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("StuckEvents = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
