package controller_test

import (
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
)

var karpenterCRDs = filepath.Join("..", "config", "testdata", "karpenter")

// crdInstallWait bounds the wait for Karpenter's CRDs installed mid-test to
// be served: envtest's default of 10s ran out on a loaded 2-core machine
// (CI of 2026-12-05, "waiting for CRDs to appear as API resources").
const crdInstallWait = time.Minute

func newClaim(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(karpenter.NodeClaimGVK)
	u.SetName(name)
	_ = unstructured.SetNestedMap(u.Object, map[string]any{
		"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
		"requirements": []any{map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}}},
	}, "spec")
	return u
}

// addClaimedNode creates a Node owned by NodeClaim claim (uid may be a
// made-up one when the claim does not exist).
func (h *harness) addClaimedNode(name, claim, uid string, mutate func(*corev1.Node)) {
	h.t.Helper()
	h.addNode(name, false)
	NewWithT(h.t).Eventually(func() error {
		n := h.node(name)
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim, UID: types.UID(uid)}}
		if mutate != nil {
			mutate(&n)
		}
		return k8s.Update(h.ctx, &n)
	}, 10*time.Second).Should(Succeed())
}

func (h *harness) claimAnnotations(name string) map[string]string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(karpenter.NodeClaimGVK)
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, u); err != nil {
		h.t.Fatalf("get NodeClaim %s: %v", name, err)
	}
	return u.GetAnnotations()
}

// TestKarpenter runs in order: without Karpenter's CRDs, then with them
// installed mid-test, so the controller must pick the CRD up without a restart.
func TestKarpenter(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "kp", 0, clock.RealClock{})

	// 1. No NodeClaim CRD: a node that claims a NodeClaim owner is updated
	// with Node annotations only; a missing CRD is not an error.
	h.addClaimedNode("kp-nocrd", "claim-nocrd", "00000000-0000-0000-0000-000000000001", nil)
	h.pool("kp", digestRef("v2"), intstr.FromInt32(1))
	sawProtected := false
	g.Eventually(func() error {
		n := h.node("kp-nocrd")
		if n.Annotations[v1alpha1.KarpenterDoNotDisrupt] == "true" && n.Annotations[v1alpha1.KarpenterDoNotRepair] == "true" && n.Spec.Unschedulable {
			sawProtected = true
		}
		return h.allOn(digestRef("v2"))()
	}, 60*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(sawProtected).To(BeTrue(), "the Node carried do-not-disrupt and do-not-repair while cordoned")
	// postUpdateProtection unset: a node with a NodeClaim keeps the
	// protection for the default 5m after its update, uncordoned.
	g.Eventually(func() bool { return h.node("kp-nocrd").Spec.Unschedulable }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
	g.Expect(h.node("kp-nocrd").Annotations).To(HaveKeyWithValue(v1alpha1.KarpenterDoNotDisrupt, "true"))
	ro := h.bootcNodes()["kp-nocrd"].Status.Rollout
	g.Expect(ro.ProtectUntil).NotTo(BeNil())
	g.Expect(ro.ProtectUntil.Sub(ro.PhaseSince.Time)).To(BeNumerically("~", 5*time.Minute, 5*time.Second))
	// 0s turns it off (the CRD accepts it) for the rest of this test.
	g.Eventually(func() error {
		var p v1alpha1.BootcNodePool
		if err := k8s.Get(h.ctx, client.ObjectKey{Name: "kp"}, &p); err != nil {
			return err
		}
		p.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{}
		return k8s.Update(h.ctx, &p)
	}, 10*time.Second).Should(Succeed())

	// 2. Install Karpenter's real CRDs while the controller runs.
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{karpenterCRDs}, ErrorIfPathMissing: true, MaxTime: crdInstallWait})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = envtest.UninstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds}) })

	claim := newClaim("claim-a")
	g.Expect(k8s.Create(h.ctx, claim)).To(Succeed())
	// The NodeClaim already has do-not-repair from someone else: it stays.
	g.Eventually(func() error {
		u := claimObj(h, "claim-a")
		u.SetAnnotations(map[string]string{v1alpha1.KarpenterDoNotRepair: "true"})
		return k8s.Update(h.ctx, u, client.FieldOwner("someone-else"))
	}, 10*time.Second).Should(Succeed())
	h.addClaimedNode("kp-a", "claim-a", string(claim.GetUID()), func(n *corev1.Node) {
		// A foreign annotation on the Node, set before the update.
		n.Annotations = map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true"}
	})
	// A node whose NodeClaim does not exist: unsafe, deferred.
	h.addClaimedNode("kp-missing", "claim-gone", "00000000-0000-0000-0000-000000000002", nil)
	// A node that Karpenter is disrupting: skipped until the taint goes.
	h.addClaimedNode("kp-disrupted", "claim-gone-too", "00000000-0000-0000-0000-000000000003", nil)
	dclaim := newClaim("claim-d")
	g.Expect(k8s.Create(h.ctx, dclaim)).To(Succeed())
	g.Eventually(func() error {
		n := h.node("kp-disrupted")
		n.OwnerReferences[0].Name, n.OwnerReferences[0].UID = "claim-d", dclaim.GetUID()
		n.Spec.Taints = []corev1.Taint{{Key: v1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule}}
		return k8s.Update(h.ctx, &n)
	}, 10*time.Second).Should(Succeed())

	sawClaim := false
	g.Eventually(func() v1alpha1.NodePhase {
		if a := h.claimAnnotations("claim-a"); a[v1alpha1.KarpenterDoNotDisrupt] == "true" {
			sawClaim = true
		}
		bn := h.bootcNodes()["kp-a"]
		return bn.Status.Phase
	}, 60*time.Second, 50*time.Millisecond).Should(Equal(v1alpha1.PhaseUpdated))
	g.Expect(sawClaim).To(BeTrue(), "the NodeClaim carried do-not-disrupt during the update")
	// The slot ends on the record first (still cordoned), then the
	// NodeClaim and the Node are given back, in that order, and the
	// ownership is cleared in a second record write: once the record says
	// so, both are given back (checked before that, the Node may not be
	// yet).
	g.Eventually(func() []string { return h.bootcNodes()["kp-a"].Status.Rollout.AddedAnnotations }, 10*time.Second).Should(BeEmpty())
	g.Expect(h.claimAnnotations("claim-a")).NotTo(HaveKey(v1alpha1.KarpenterDoNotDisrupt))
	g.Expect(h.claimAnnotations("claim-a")).To(HaveKeyWithValue(v1alpha1.KarpenterDoNotRepair, "true"), "a NodeClaim annotation someone else set stays")
	g.Expect(h.node("kp-a").Annotations).To(HaveKeyWithValue(v1alpha1.KarpenterDoNotDisrupt, "true"), "a Node annotation someone else set stays")
	g.Expect(h.node("kp-a").Annotations).NotTo(HaveKey(v1alpha1.KarpenterDoNotRepair))

	// The deferred and the disrupted node never got a slot.
	g.Consistently(func() []v1alpha1.NodePhase {
		bns := h.bootcNodes()
		m, d := bns["kp-missing"], bns["kp-disrupted"]
		return []v1alpha1.NodePhase{rollout.ObservedPhase(&m), rollout.ObservedPhase(&d)}
	}, 2*time.Second, 100*time.Millisecond).Should(HaveEach(v1alpha1.PhaseStaged))
	g.Expect(h.node("kp-missing").Spec.Unschedulable).To(BeFalse())

	// Karpenter gives up on the disruption: the node is updated.
	g.Eventually(func() error {
		n := h.node("kp-disrupted")
		n.Spec.Taints = nil
		return k8s.Update(h.ctx, &n)
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func() v1alpha1.NodePhase { return h.bootcNodes()["kp-disrupted"].Status.Phase }, 60*time.Second, 100*time.Millisecond).Should(Equal(v1alpha1.PhaseUpdated))
	// The slot ends on the record first (Updated, still cordoned); the
	// claim loses its protection right after.
	g.Eventually(func() map[string]string { return h.claimAnnotations("claim-d") }, 10*time.Second, 50*time.Millisecond).Should(BeEmpty())

	// 3. An SSA writer takes shared ownership of an annotation during the
	// update: bootroll leaves it.
	claimB := newClaim("claim-b")
	g.Expect(k8s.Create(h.ctx, claimB)).To(Succeed())
	h.addClaimedNode("kp-b", "claim-b", string(claimB.GetUID()), nil)
	g.Eventually(func() string { return h.claimAnnotations("claim-b")[v1alpha1.KarpenterDoNotRepair] }, 60*time.Second, 20*time.Millisecond).Should(Equal("true"))
	apply := &unstructured.Unstructured{}
	apply.SetGroupVersionKind(karpenter.NodeClaimGVK)
	apply.SetName("claim-b")
	apply.SetAnnotations(map[string]string{v1alpha1.KarpenterDoNotRepair: "true"})
	g.Expect(k8s.Patch(h.ctx, apply, client.Apply, client.FieldOwner("ops-team"), client.ForceOwnership)).To(Succeed())
	g.Eventually(func() v1alpha1.NodePhase { return h.bootcNodes()["kp-b"].Status.Phase }, 60*time.Second, 100*time.Millisecond).Should(Equal(v1alpha1.PhaseUpdated))
	g.Eventually(func() map[string]string { return h.claimAnnotations("claim-b") }, 10*time.Second).ShouldNot(HaveKey(v1alpha1.KarpenterDoNotDisrupt))
	g.Expect(h.claimAnnotations("claim-b")).To(HaveKeyWithValue(v1alpha1.KarpenterDoNotRepair, "true"))
}

func claimObj(h *harness, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(karpenter.NodeClaimGVK)
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, u); err != nil {
		h.t.Fatalf("get NodeClaim %s: %v", name, err)
	}
	return u
}

func TestOSNotReadyFastPath(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "skew", 0, clock.RealClock{})
	h.addNode("skew-old", false)
	h.addNode("skew-busy", false)
	g.Eventually(func() error {
		for _, name := range []string{"skew-old", "skew-busy"} {
			n := h.node(name)
			n.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule}}
			if err := k8s.Update(h.ctx, &n); err != nil {
				return err
			}
		}
		return nil
	}, 10*time.Second).Should(Succeed())
	h.pods("skew-busy", 1, "web")
	// maxUnavailable 0: no slot at all, so only the fast path can update.
	h.pool("skew", digestRef("v2"), intstr.FromInt32(0))
	everCordoned := false
	g.Eventually(func() v1alpha1.NodePhase {
		if h.node("skew-old").Spec.Unschedulable {
			everCordoned = true
		}
		return h.bootcNodes()["skew-old"].Status.Phase
	}, 60*time.Second, 20*time.Millisecond).Should(Equal(v1alpha1.PhaseUpdated))
	g.Expect(everCordoned).To(BeFalse(), "the fast path neither cordons nor drains")
	// The record says Updated first; the taint goes in the next write.
	g.Eventually(func() []corev1.Taint { return h.node("skew-old").Spec.Taints }, 10*time.Second, 20*time.Millisecond).Should(BeEmpty(), "the startup taint goes once the target booted")
	h.mu.Lock()
	g.Expect(h.reboots["skew-old"]).To(Equal(1))
	h.mu.Unlock()
	// A tainted node that runs workloads is not rebooted under them.
	bn := h.bootcNodes()["skew-busy"]
	g.Expect(bn.Status.Rollout.Reason).To(Equal("OSNotReadyWithWorkloads"))
	h.mu.Lock()
	g.Expect(h.reboots["skew-busy"]).To(Equal(0))
	h.mu.Unlock()
	var pod corev1.Pod
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Namespace: "default", Name: "skew-busy-web-0"}, &pod)).To(Succeed())

	// A node that joins already on the target loses the taint at once.
	h.addNode("skew-new", false)
	h.mu.Lock()
	h.hosts["skew-new"].booted = &v1alpha1.HostImage{Image: digestRef("v2"), Digest: imageref.Digest(digestRef("v2"))}
	h.mu.Unlock()
	g.Eventually(func() error {
		n := h.node("skew-new")
		n.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule}}
		return k8s.Update(h.ctx, &n)
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func() []corev1.Taint { return h.node("skew-new").Spec.Taints }, 30*time.Second, 100*time.Millisecond).Should(BeEmpty())
	h.mu.Lock()
	g.Expect(h.reboots["skew-new"]).To(Equal(0))
	h.mu.Unlock()
}

func TestPostUpdateProtection(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "pup", 1, clock.RealClock{})
	h.pool("pup", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: 3 * time.Second}
	})
	g.Eventually(func() v1alpha1.NodePhase { return h.bootcNodes()["pup-0"].Status.Phase }, 60*time.Second, 50*time.Millisecond).Should(Equal(v1alpha1.PhaseUpdated))
	// Uncordoned but still protected: the node is empty right after its
	// drain. (The slot ends on the record first, still cordoned; the Node
	// is given back by the next write.)
	g.Eventually(func() bool { return h.node("pup-0").Spec.Unschedulable }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
	g.Expect(h.node("pup-0").Annotations).To(HaveKeyWithValue(v1alpha1.KarpenterDoNotDisrupt, "true"))
	// The protection ends when the time is up (no pods came back).
	g.Eventually(func() map[string]string { return h.node("pup-0").Annotations }, 20*time.Second, 100*time.Millisecond).ShouldNot(HaveKey(v1alpha1.KarpenterDoNotDisrupt))
	g.Expect(h.node("pup-0").Annotations).NotTo(HaveKey(v1alpha1.KarpenterDoNotRepair))
}
