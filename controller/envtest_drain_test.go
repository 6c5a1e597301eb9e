package controller_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestDrainNeedsOptIns: on the real API server, a pod with no controller
// and a pod with emptyDir data block the drain (DrainBlocked, naming the
// pods and the spec.drain fields to set) and nothing is evicted, as
// kubectl drain refuses; with the opt-ins the drain evicts them with
// their own grace period, waits for the terminating pod, and the update
// finishes.
func TestDrainNeedsOptIns(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "optin", 1, clock.RealClock{})
	h.pods("optin-0", 1, "web")
	// The bare pod carries no harness label, so the harness's kubelet does
	// not finish it: the test sees it terminating, then finishes it.
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "optin-0-bare", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "optin-0", TerminationGracePeriodSeconds: ptr.To[int64](77), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	scratch := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "optin-0-scratch", Namespace: "default", Labels: h.label,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "scratch", UID: "rs-scratch", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: "optin-0", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}}}}
	for _, p := range []*corev1.Pod{bare, scratch} {
		g.Expect(k8s.Create(h.ctx, p)).To(Succeed())
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		g.Expect(k8s.Status().Update(h.ctx, p)).To(Succeed())
	}
	t.Cleanup(func() {
		_ = k8s.Delete(h.ctx, bare, client.GracePeriodSeconds(0))
	})

	pool := h.pool("optin", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: time.Minute}
	})
	g.Eventually(func() string { bn := h.bootcNodes()["optin-0"]; return bn.Status.Rollout.Reason }, 30*time.Second, 100*time.Millisecond).Should(Equal("DrainBlocked"))
	bn := h.bootcNodes()["optin-0"]
	g.Expect(bn.Status.Phase).To(Equal(v1alpha1.PhaseDraining))
	g.Expect(bn.Status.Rollout.Message).To(Equal("drain blocked: default/optin-0-bare (no controller recreates it: set spec.drain.force), " +
		"default/optin-0-scratch (emptyDir data would be lost: set spec.drain.deleteEmptyDirData)"))
	g.Expect(h.node("optin-0").Spec.Unschedulable).To(BeTrue())
	// Nothing is evicted while the drain cannot finish, the ReplicaSet's
	// pod that needs no opt-in included.
	g.Consistently(func() []string {
		var out []string
		for _, name := range []string{"optin-0-web-0", "optin-0-bare", "optin-0-scratch"} {
			var p corev1.Pod
			if err := k8s.Get(h.ctx, client.ObjectKey{Namespace: "default", Name: name}, &p); err != nil || p.DeletionTimestamp != nil {
				out = append(out, name)
			}
		}
		return out
	}, 2*time.Second, 100*time.Millisecond).Should(BeEmpty())
	var fresh v1alpha1.BootcNodePool
	g.Expect(k8s.Get(h.ctx, client.ObjectKeyFromObject(pool), &fresh)).To(Succeed())
	t.Logf("pool while blocked: summary=%q conditions=%+v", fresh.Status.Summary, fresh.Status.Conditions)

	// The opt-ins: the pods are evicted, the bare one with its own grace
	// period, and the drain waits while it terminates.
	fresh.Spec.Drain = v1alpha1.DrainSpec{Force: true, DeleteEmptyDirData: true}
	g.Expect(k8s.Update(h.ctx, &fresh)).To(Succeed())
	g.Eventually(func() *int64 {
		var p corev1.Pod
		if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(bare), &p); err != nil || p.DeletionTimestamp == nil {
			return nil
		}
		return p.DeletionGracePeriodSeconds
	}, 30*time.Second, 100*time.Millisecond).Should(Equal(ptr.To[int64](77)))
	g.Consistently(func() v1alpha1.NodePhase { bn := h.bootcNodes()["optin-0"]; return bn.Status.Phase }, time.Second, 100*time.Millisecond).Should(Equal(v1alpha1.PhaseDraining))
	g.Expect(k8s.Delete(h.ctx, bare, client.GracePeriodSeconds(0))).To(Succeed()) // the kubelet's end of the grace period
	g.Eventually(h.allOn(digestRef("v2")), 60*time.Second, 200*time.Millisecond).Should(Succeed())
}
