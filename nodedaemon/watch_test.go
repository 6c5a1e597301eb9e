package nodedaemon

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// The daemon wakes for its own BootcNode's creation, deletion and spec
// changes, never for status writes or other nodes' objects.
func TestWatchPredicates(t *testing.T) {
	bn := func(name string, gen int64, phase v1alpha1.NodePhase) *v1alpha1.BootcNode {
		return &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen}, Status: v1alpha1.BootcNodeStatus{Phase: phase}}
	}
	tests := []struct {
		name string
		ev   func(p predicate.Predicate) bool
		want bool
	}{
		{"own created", func(p predicate.Predicate) bool { return p.Create(event.CreateEvent{Object: bn("n1", 1, "")}) }, true},
		{"own spec changed", func(p predicate.Predicate) bool {
			return p.Update(event.UpdateEvent{ObjectOld: bn("n1", 1, ""), ObjectNew: bn("n1", 2, "")})
		}, true},
		{"own status written", func(p predicate.Predicate) bool {
			return p.Update(event.UpdateEvent{ObjectOld: bn("n1", 2, v1alpha1.PhaseStaging), ObjectNew: bn("n1", 2, v1alpha1.PhaseStaged)})
		}, false},
		{"own deleted", func(p predicate.Predicate) bool { return p.Delete(event.DeleteEvent{Object: bn("n1", 2, "")}) }, true},
		{"other node's spec changed", func(p predicate.Predicate) bool {
			return p.Update(event.UpdateEvent{ObjectOld: bn("n2", 1, ""), ObjectNew: bn("n2", 2, "")})
		}, false},
	}
	for _, tt := range tests {
		got := true
		for _, p := range WatchPredicates("n1") {
			got = got && tt.ev(p)
		}
		if got != tt.want {
			t.Errorf("%s: wakes the daemon = %v, want %v", tt.name, got, tt.want)
		}
	}
}
