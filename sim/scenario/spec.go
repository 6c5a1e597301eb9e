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
		NodeSelector:  p.NodeSelector,
		Paused:        p.Paused,
		Rollout:       *p.RolloutSpec.DeepCopy(),
		FailurePolicy: *p.FailurePolicy.DeepCopy(),
		Karpenter:     *p.Karpenter.DeepCopy(),
		Drain:         p.Drain,
		HealthChecks:  *p.HealthChecks.DeepCopy(),
	}
	for _, w := range p.Windows {
		spec.Windows = append(spec.Windows, *w.DeepCopy())
	}
	if im := s.Image(p.Image); im != nil {
		spec.Image = v1alpha1.ImageReference(im.Ref)
	}
	if p.DrainTimeout != nil {
		spec.DrainTimeout = &metav1.Duration{Duration: p.DrainTimeout.Duration}
	}
	if p.HealthTimeout != nil {
		spec.HealthTimeout = &metav1.Duration{Duration: p.HealthTimeout.Duration}
	}
	return spec
}
