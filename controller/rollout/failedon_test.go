package rollout

import (
	"testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestFailedOnRollback: a record whose rollback failed (Failed, having
// been ordered back to rollbackTo) failed that image too, and the pool
// does not direct it there; a rollback that worked (RolledBack) and a
// record directed elsewhere since (rollbackTo cleared) are directable
// (explorer seed 92018 of rollback-on-failed-boot).
func TestFailedOnRollback(t *testing.T) {
	v1, bad, v3 := img("A"), img("B"), img("C")
	// rollbackTo as the daemon's report spelled it: another spelling of
	// the repository than the pool's target, the same digest.
	v1Tagged := "registry.example/os:v1@" + dig("A")
	id := func(s string) string { return s }
	for _, tc := range []struct {
		name       string
		phase      v1alpha1.NodePhase
		rollbackTo string
		target     string
		failedOn   bool
	}{
		{"failed rollback, pool back on its image", v1alpha1.PhaseFailed, v1, v1, true},
		{"failed rollback, another spelling", v1alpha1.PhaseFailed, v1Tagged, v1, true},
		{"failed rollback, the failed image", v1alpha1.PhaseFailed, v1, bad, true},
		{"failed rollback, a new image", v1alpha1.PhaseFailed, v1, v3, false},
		{"rollback worked", v1alpha1.PhaseRolledBack, v1, v1, false},
		{"no rollback recorded", v1alpha1.PhaseFailed, "", v1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bn := &v1alpha1.BootcNode{}
			bn.Spec.DesiredImage = bad
			bn.Status.Phase = tc.phase
			bn.Status.Rollout.FailedImage = bad
			bn.Status.Rollout.RollbackTo = tc.rollbackTo
			var f Facts
			f.SetFrom(bn, id)
			digest := tc.target[len("registry.example/os@"):]
			if got := f.FailedOn(tc.target, digest); got != tc.failedOn {
				t.Errorf("FailedOn(%s) = %v, want %v", tc.target, got, tc.failedOn)
			}
			if got, want := Directable(f.Phase, f.Desired, tc.target, f.FailedOn(tc.target, digest)), !tc.failedOn && tc.target != bad; got != want {
				t.Errorf("Directable to %s = %v, want %v", tc.target, got, want)
			}
		})
	}
}
