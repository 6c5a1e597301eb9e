package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestSelectsIsPoolSelector: Selects answers what the pool's selector
// (PoolSelector, labels.SelectorFromSet) matches, for every pair of these
// selectors and label sets, and nothing for a pool without a selector or
// being deleted.
func TestSelectsIsPoolSelector(t *testing.T) {
	sels := []map[string]string{nil, {}, {"pool": "a"}, {"pool": "a", "zone": "z1"}, {"pool": ""}, {"other": "x"}}
	sets := []map[string]string{nil, {}, {"pool": "a"}, {"pool": "b"}, {"pool": "a", "zone": "z1"}, {"pool": "a", "zone": "z2", "x": "y"}, {"pool": ""}, {"zone": "z1"}}
	now := metav1.Now()
	for _, deleting := range []bool{false, true} {
		for _, sel := range sels {
			p := &v1alpha1.BootcNodePool{Spec: v1alpha1.BootcNodePoolSpec{NodeSelector: sel}}
			if deleting {
				p.DeletionTimestamp = &now
			}
			for _, set := range sets {
				n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: set}}
				ps := PoolSelector(p)
				want := ps != nil && ps.Matches(labels.Set(set))
				if got := Selects(p, n); got != want {
					t.Errorf("selector %v (deleting %v), labels %v: Selects %v, the selector matches: %v", sel, deleting, set, got, want)
				}
			}
		}
	}
}
