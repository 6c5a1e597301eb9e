package scenario

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// PoolSpec is the BootcNodePool spec of a pool, with the image short name
// replaced by the image's ref. Options the scenario leaves out stay unset,
// so the controller's defaults apply.
func (s *Scenario) PoolSpec(p Pool) v1alpha1.BootcNodePoolSpec {
	spec := v1alpha1.BootcNodePoolSpec{
		NodeSelector: p.NodeSelector,
		Paused:       p.Paused,
		Rollout: v1alpha1.RolloutSpec{
			MaxUnavailable: p.MaxUnavailable,
			MaxStaging:     p.MaxStaging,
		},
		FailurePolicy: v1alpha1.FailurePolicy{
			Action:      v1alpha1.FailurePolicyAction(p.FailurePolicy.Action),
			MaxFailures: p.FailurePolicy.MaxFailures,
		},
		Karpenter: v1alpha1.KarpenterOptions{Protect: p.Karpenter.Protect},
	}
	if im := s.Image(p.Image); im != nil {
		spec.Image = v1alpha1.ImageReference(im.Ref)
	}
	if p.DrainTimeout != nil {
		spec.DrainTimeout = &metav1.Duration{Duration: *p.DrainTimeout}
	}
	if p.HealthTimeout != nil {
		spec.HealthTimeout = &metav1.Duration{Duration: *p.HealthTimeout}
	}
	if p.Karpenter.PostUpdateProtection != nil {
		spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: *p.Karpenter.PostUpdateProtection}
	}
	for _, w := range p.Windows {
		mw := v1alpha1.MaintenanceWindow{Start: w.Start, Duration: metav1.Duration{Duration: w.Duration}}
		for _, d := range w.Days {
			mw.Days = append(mw.Days, v1alpha1.Weekday(d))
		}
		spec.Windows = append(spec.Windows, mw)
	}
	return spec
}
