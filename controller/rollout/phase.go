package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// HoldsSlot reports whether a node in phase p is inside its reboot slot.
func HoldsSlot(p v1alpha1.NodePhase) bool {
	return p == v1alpha1.PhaseDraining || p == v1alpha1.PhaseRebooting || p == v1alpha1.PhaseVerifying
}

// Waiting reports whether a stored phase is that of a node waiting for its
// turn: Pending, nothing stored yet, or the Staging and Staged an older
// bootroll stored.
func Waiting(p v1alpha1.NodePhase) bool {
	switch p {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseStaging, v1alpha1.PhaseStaged:
		return true
	}
	return false
}

// Done reports whether a node in phase p has a verdict on its last
// attempt that keeps it out of the rollout of that image: Failed or
// RolledBack.
func Done(p v1alpha1.NodePhase) bool {
	return p == v1alpha1.PhaseFailed || p == v1alpha1.PhaseRolledBack
}

// StagingPhase is the phase the controller stores for a node outside a
// slot: Pending (waiting for its turn: staging or staged, which are
// derived from the daemon's report, see ObservedPhase, and never stored),
// Updated when it runs its desired image, or Degraded while its staging
// fails.
func StagingPhase(bn *v1alpha1.BootcNode) (v1alpha1.NodePhase, string, string) {
	target := imageref.Digest(bn.Spec.DesiredImage)
	d := bn.Status.Daemon
	switch {
	case bn.Spec.DesiredImage == "":
		return v1alpha1.PhasePending, "", ""
	case DigestOfHost(bn.Status.Booted) == target:
		return v1alpha1.PhaseUpdated, "", ""
	case DigestOfHost(bn.Status.Staged) != target && d.Phase == v1alpha1.DaemonError && d.StageAttempts > 0:
		return v1alpha1.PhaseDegraded, "StageFailed", fmt.Sprintf("staging failed %d time(s), retrying with backoff: %s", d.StageAttempts, d.LastError)
	default:
		return v1alpha1.PhasePending, "", ""
	}
}

// ObservedPhase is a record's phase as people and the pool read it: the
// stored phase, except that a node waiting for its turn (stored Pending)
// is Staging while its daemon stages the desired image and Staged once the
// image is staged. Those two are a pure function of the daemon's report,
// so they are derived here and never written back (DESIGN.md section 2:
// what can be derived is derived); records written by an older bootroll
// that stored them read the same way.
func ObservedPhase(bn *v1alpha1.BootcNode) v1alpha1.NodePhase {
	if !Waiting(bn.Status.Phase) {
		return bn.Status.Phase
	}
	target := imageref.Digest(bn.Spec.DesiredImage)
	switch {
	case target == "" || DigestOfHost(bn.Status.Booted) == target:
		return v1alpha1.PhasePending
	case DigestOfHost(bn.Status.Staged) == target:
		return v1alpha1.PhaseStaged
	case bn.Status.Daemon.Phase == v1alpha1.DaemonStaging:
		return v1alpha1.PhaseStaging
	}
	return v1alpha1.PhasePending
}

// DigestOfHost is the digest of a deployment the daemon reported, or "".
func DigestOfHost(h *v1alpha1.HostImage) string {
	if h == nil {
		return ""
	}
	return h.Digest
}

// NodeReady reports whether the kubelet reports the Node Ready.
func NodeReady(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionTrue }

// NodeNotReady reports whether the kubelet reports the Node NotReady
// (Ready=False): the host is up, unlike Unknown.
func NodeNotReady(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionFalse }

// readyStatus is the status of the Node's Ready condition, "" without one.
func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// HasTaint reports whether the Node carries a taint with key.
func HasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// DurationOr is d, or def when d is unset or not positive.
func DurationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}
