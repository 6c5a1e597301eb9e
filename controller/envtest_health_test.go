package controller_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
)

// daemonSetPod creates the pod of DaemonSet default/ds on node (the owner
// need not exist: no garbage collector runs here), Ready or not.
func (h *harness) daemonSetPod(node, ds string, ready bool) *corev1.Pod {
	h.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s", ds, node), Namespace: "default", Labels: h.label,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, UID: "ds-" + types.UID(ds), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := k8s.Create(h.ctx, p); err != nil {
		h.t.Fatalf("create pod: %v", err)
	}
	h.setPodReady(p, ready)
	return p
}

// setPodReady writes the pod Running, with its Ready condition.
func (h *harness) setPodReady(p *corev1.Pod, ready bool) {
	h.t.Helper()
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	// The kubelet stamps the transition; the check counts a pod Ready
	// only since the node's reboot.
	at := metav1.NewTime(h.clk.Now())
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: at}}}
	if err := k8s.Status().Update(h.ctx, p); err != nil {
		h.t.Fatalf("set pod status: %v", err)
	}
}

// TestHealthChecksHoldVerification: a pool that requires a Ready pod of
// DaemonSet default/cni on each node holds a rebooted node in Verifying,
// its message naming the DaemonSet, until that pod is Ready, and then
// finishes it; a node whose pod never gets Ready fails with HealthTimeout,
// the message naming the DaemonSet. The planted SkipHealthChecks finishes
// the node with its pod not Ready, which shows the test can fail.
func TestHealthChecksHoldVerification(t *testing.T) {
	for _, tc := range []struct {
		name    string
		to      rollout.TestOnly
		timeout time.Duration
		readyAt bool // the pod gets Ready once the node is held
		// readyBefore: the pod is Ready from before the reboot and its
		// condition never changes (a reboot shorter than the node
		// lifecycle controller's grace period): it does not count.
		readyBefore bool
		want        v1alpha1.NodePhase
	}{
		{name: "held-until-ready", timeout: 2 * time.Minute, readyAt: true, want: v1alpha1.PhaseUpdated},
		{name: "never-ready", timeout: 15 * time.Second, want: v1alpha1.PhaseFailed},
		{name: "ready-before-reboot", timeout: 15 * time.Second, readyBefore: true, want: v1alpha1.PhaseFailed},
		{name: "planted-skip-health-checks", to: rollout.TestOnly{SkipHealthChecks: true}, timeout: 2 * time.Minute, want: v1alpha1.PhaseUpdated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			prefix := fmt.Sprintf("health%d", len(tc.name))
			h := newHarness(t, prefix, 1, clock.RealClock{})
			h.withTestOnly(tc.to)
			node := prefix + "-0"
			pod := h.daemonSetPod(node, "cni", tc.readyBefore)
			held := "DaemonSet default/cni: pod cni-" + node + " not Ready"
			if tc.readyBefore {
				held = "DaemonSet default/cni: pod cni-" + node + " Ready since before the reboot"
			}
			v2 := digestRef("v2")
			h.pool(prefix, v2, intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
				p.Spec.HealthTimeout = &metav1.Duration{Duration: tc.timeout}
				p.Spec.HealthChecks.DaemonSets = []v1alpha1.DaemonSetCheck{{Namespace: "default", Name: "cni"}}
			})
			bn := func() v1alpha1.BootcNode {
				var b v1alpha1.BootcNode
				_ = k8s.Get(h.ctx, client.ObjectKey{Name: node}, &b)
				return b
			}
			booted := func() bool {
				b := bn()
				return b.Status.Booted != nil && b.Status.Booted.Digest == imageref.Digest(v2)
			}
			g.Eventually(booted, 60*time.Second, 100*time.Millisecond).Should(BeTrue())
			if tc.to.SkipHealthChecks {
				g.Eventually(func() v1alpha1.NodePhase { return bn().Status.Phase }, 20*time.Second, 100*time.Millisecond).Should(Equal(tc.want),
					"the planted bug finishes the node with its DaemonSet pod not Ready")
				return
			}
			// Booted and Ready, but held: the pod is not Ready.
			g.Eventually(func() string { return bn().Status.Rollout.Message }, 20*time.Second, 100*time.Millisecond).
				Should(ContainSubstring(held))
			g.Expect(rollout.NodeReady(ptr.To(h.node(node)))).To(BeTrue())
			g.Consistently(func() v1alpha1.NodePhase { return bn().Status.Phase }, 3*time.Second, 100*time.Millisecond).Should(Equal(v1alpha1.PhaseVerifying))
			if tc.readyAt {
				h.setPodReady(pod, true)
				// Found on the next health poll (the node reconciler does
				// not watch Pods).
				g.Eventually(func() v1alpha1.NodePhase { return bn().Status.Phase }, rollout.HealthPoll+10*time.Second, 100*time.Millisecond).Should(Equal(tc.want))
				g.Expect(bn().Status.Rollout.Message).To(ContainSubstring("passed the pool's health checks"))
				return
			}
			g.Eventually(func() v1alpha1.NodePhase { return bn().Status.Phase }, tc.timeout+20*time.Second, 100*time.Millisecond).Should(Equal(tc.want))
			b := bn()
			g.Expect(b.Status.Rollout.Reason).To(Equal("HealthTimeout"))
			g.Expect(b.Status.Rollout.Message).To(ContainSubstring(held))
		})
	}
}
