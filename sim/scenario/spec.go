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

// ApplySetPool changes the fields of spec that a setPool event gives, each
// converted as PoolSpec converts bootroll.pools (so a field means the same
// in both); the others stay. The twin and the cluster target both apply
// setPool with it.
func (s *Scenario) ApplySetPool(spec *v1alpha1.BootcNodePoolSpec, e *SetPool) {
	pl := Pool{Name: e.Pool, Image: e.Image, NodeSelector: e.NodeSelector, RolloutSpec: e.RolloutSpec,
		DrainTimeout: e.DrainTimeout, HealthTimeout: e.HealthTimeout}
	if e.FailurePolicy != nil {
		pl.FailurePolicy = *e.FailurePolicy
	}
	if e.Windows != nil {
		pl.Windows = *e.Windows
	}
	n := s.PoolSpec(pl)
	if e.Image != "" {
		spec.Image = n.Image
	}
	if e.NodeSelector != nil {
		spec.NodeSelector = n.NodeSelector
	}
	if e.MaxUnavailable != nil {
		spec.Rollout.MaxUnavailable = n.Rollout.MaxUnavailable
	}
	if e.MaxStaging != nil {
		spec.Rollout.MaxStaging = n.Rollout.MaxStaging
	}
	if e.Paused != nil {
		spec.Paused = *e.Paused
	}
	if e.FailurePolicy != nil {
		spec.FailurePolicy = n.FailurePolicy
	}
	if e.Windows != nil {
		spec.Windows = n.Windows
	}
	if e.DrainTimeout != nil {
		spec.DrainTimeout = n.DrainTimeout
	}
	if e.HealthTimeout != nil {
		spec.HealthTimeout = n.HealthTimeout
	}
}
