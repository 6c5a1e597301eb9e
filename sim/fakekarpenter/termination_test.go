package fakekarpenter

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestTermination models "Finalizer `karpenter.sh/termination` on Node and
// NodeClaim. Taint `karpenter.sh/disrupted:NoSchedule` is added ... Drain in
// tiers: non-critical pods, non-critical DaemonSet pods, critical pods,
// critical DaemonSet pods; evictions get 429 when a PDB blocks; pods are
// force-deleted at the TGP deadline. Minimum drain 5 s; then volumes, then
// the instance is deleted".
func TestTermination(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never", tgp: "2m"})
	node := h.addNode("default")
	if n, nc := h.node(node), h.claim(node); !slices.Contains(n.Finalizers, FinalizerTermination) || !slices.Contains(nc.obj.GetFinalizers(), FinalizerTermination) {
		t.Fatalf("finalizers: node %v, NodeClaim %v", n.Finalizers, nc.obj.GetFinalizers())
	}
	h.addPod("web", node)
	h.addPod("guarded", node)
	h.refuse["default/guarded"] = true
	h.addPod("dns", node, criticalPod)
	h.addPod("agent", node, daemonSet) // tolerates the taint: not drained

	if err := h.c.Delete(ctx, h.claim(node).obj); err != nil {
		t.Fatal(err)
	}
	h.settle()
	n := h.node(node)
	if n.DeletionTimestamp == nil || !hasTaint(n.Spec.Taints, corev1.Taint{Key: TaintDisrupted, Effect: corev1.TaintEffectNoSchedule}) {
		t.Fatalf("node after its NodeClaim's deletion: deleting=%v taints=%v", n.DeletionTimestamp != nil, n.Spec.Taints)
	}
	if got := h.claim(node).obj.GetAnnotations()[AnnotationTerminationTimestamp]; got != t0.Add(2*time.Minute).Format(time.RFC3339) {
		t.Errorf("termination timestamp %q, want deletion + TGP", got)
	}
	// First tier: the evictable pod goes, the PDB-blocked one is refused
	// (and retried); the critical pod waits for the first tier.
	if h.pod("web") != nil || h.pod("guarded") == nil || h.pod("dns") == nil {
		t.Fatalf("after the first drain pass: web %v guarded %v dns %v", h.pod("web") != nil, h.pod("guarded") != nil, h.pod("dns") != nil)
	}
	h.run(time.Minute)
	if h.pod("dns") == nil || h.pod("guarded") == nil || h.gone(node) {
		t.Fatalf("the drain went past the blocked first tier")
	}
	if r := h.find("karpenter/eviction-refused", "pod/default/guarded"); len(r) != 1 {
		t.Errorf("refused evictions traced %v, want one (deduplicated)", r)
	}
	// At deadline - grace (30 s) the blocked pod is deleted; the critical
	// pod is deleted too (its grace would outlast the deadline) and the
	// node terminates.
	h.runUntil(2*time.Minute, "the node terminated", func() bool { return h.gone(node) })
	if got := h.find("karpenter/pod-deleted", "pod/default/guarded"); len(got) != 1 || got[0].at != 90*time.Second {
		t.Errorf("blocked pod force-deleted %v, want at 1m30s", got)
	}
	if !slices.Contains(h.prov.terminated, node) {
		t.Errorf("instance not terminated: %v", h.prov.terminated)
	}
	if tr := h.find("karpenter/terminated", "node/"+node); len(tr) != 1 {
		t.Errorf("terminations traced: %v", tr)
	}
}

// TestTerminationTiersAndMinDrain models "Drain in tiers: non-critical
// pods, non-critical DaemonSet pods, critical pods, critical DaemonSet pods"
// and "Minimum drain 5 s".
func TestTerminationTiersAndMinDrain(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never"})
	node := h.addNode("default")
	h.addPod("web", node, withFinalizer)
	h.addPod("dns", node, criticalPod)
	h.addPod("logs", node, func(p *corev1.Pod) { daemonSet(p); p.Spec.Tolerations = nil }) // a DaemonSet pod that does not tolerate the taint
	if err := h.c.Delete(ctx, h.node(node)); err != nil {                                  // deleting the Node deletes its NodeClaim too
		t.Fatal(err)
	}
	h.settle()
	if !h.deleting(node) {
		t.Fatalf("deleting the Node did not delete its NodeClaim")
	}
	if want := []string{"default/web"}; !slices.Equal(h.evicts, want) {
		t.Fatalf("first evictions %v, want %v", h.evicts, want)
	}
	h.evicts = nil
	h.run(3 * time.Second)
	if len(h.evicts) != 0 {
		t.Fatalf("evicted %v while the first tier's pod is still terminating", h.evicts)
	}
	p := h.pod("web")
	p.Finalizers = nil // the kubelet finishes it
	if err := h.c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	h.run(time.Second)
	h.run(time.Second)
	if want := []string{"default/logs", "default/dns"}; !slices.Equal(h.evicts, want) {
		t.Errorf("evictions %v, want %v (tier by tier)", h.evicts, want)
	}
	h.runUntil(10*time.Second, "the node terminated", func() bool { return h.gone(node) })
	if tr := h.find("karpenter/terminated", "node/"+node); len(tr) != 1 || tr[0].at < MinDrain {
		t.Errorf("terminated %v, want not before %v", tr, MinDrain)
	}
}
