package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestTakeUp: one case per outcome of the take-up rule.
func TestTakeUp(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	slot := v1alpha1.Slot{Node: "n", Image: img("B"), Since: now}
	pool := func(mut func(*v1alpha1.BootcNodePool)) *v1alpha1.BootcNodePool {
		p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		p.Status.TargetImage = img("B")
		p.Status.Slots = []v1alpha1.Slot{slot}
		if mut != nil {
			mut(p)
		}
		return p
	}
	for _, c := range []struct {
		name    string
		fresh   *v1alpha1.BootcNodePool
		claimed bool
		blocker string
		want    string
	}{
		{"pool gone", nil, false, "", "skip: the pool is gone or being deleted"},
		{"pool being deleted", pool(func(p *v1alpha1.BootcNodePool) { p.DeletionTimestamp = &now }), false, "", "skip: the pool is gone or being deleted"},
		{"slot no longer listed", pool(func(p *v1alpha1.BootcNodePool) { p.Status.Slots = nil }), false, "", "skip: the slot is no longer in the pool's table"},
		{"slot listed with another grant time", pool(func(p *v1alpha1.BootcNodePool) { p.Status.Slots[0].Since = metav1.NewTime(now.Add(time.Second)) }), false, "", "skip: the slot is no longer in the pool's table"},
		{"halted on the slot's image", pool(func(p *v1alpha1.BootcNodePool) { p.Status.Halt = &v1alpha1.HaltRecord{Image: img("B")} }), false, "", "skip: the pool halted on " + img("B")},
		{"the Node may not take a slot now", pool(nil), true, "the Node is not Ready", "skip: the Node is not Ready wait=5s"},
		{"no NodeClaim", pool(nil), false, "", "writes: cordonRecord,node,draining"},
		{"a NodeClaim", pool(nil), true, "", "writes: cordonRecord,node,claim,draining"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := TakeUp(c.fresh, slot, c.claimed, c.blocker).String(); got != c.want {
				t.Errorf("TakeUp = %q, want %q", got, c.want)
			}
		})
	}
}
