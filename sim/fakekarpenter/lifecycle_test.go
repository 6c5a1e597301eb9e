package fakekarpenter

import (
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestProvisionFromNodeClassImage models the KWOK provider line "It creates
// Node objects ... after the KWOKNodeClass `nodeRegistrationDelay`" with
// issue 4's "provisioning a replacement NodeClaim+Node (from the NodeClass
// boot image, which may be older than the pool image) when pods are
// pending": a pod that fits on no node gets a NodeClaim, launched with the
// NodeClass image and registered with Karpenter's finalizer and labels,
// while a pod that fits on an existing node gets none.
func TestProvisionFromNodeClassImage(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never"})
	h.addPod("big", "", requests("3", "1Gi"))
	h.run(time.Second)
	if got := h.find("karpenter/nodeclaim-created", ""); len(got) != 1 {
		t.Fatalf("NodeClaims created for one pending pod: %v\n%s", got, h.dump())
	}
	node := h.prov.launched[0]
	if got, want := h.prov.images[node], "quay.io/os@sha256:aaa"; got != want {
		t.Errorf("launched with image %q, want the NodeClass image %q", got, want)
	}
	nc := h.claim(node)
	for _, c := range []string{ConditionLaunched, ConditionRegistered, ConditionInitialized} {
		if !nc.isTrue(c) {
			t.Errorf("NodeClaim %s: %s is not True: %+v", node, c, nc.status.Conditions)
		}
	}
	n := h.node(node)
	if !slices.Contains(n.Finalizers, FinalizerTermination) || n.Labels[LabelNodePool] != "default" || n.Labels[LabelInitialized] != "true" {
		t.Errorf("registered node lacks Karpenter's finalizer or labels: %v %v", n.Finalizers, n.Labels)
	}

	// The pod is bound by the scheduler; a second one fits beside it.
	p := h.pod("big")
	p.Spec.NodeName = node
	if err := h.c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	h.addPod("small", "")
	h.run(30 * time.Second)
	if got := h.find("karpenter/nodeclaim-created", ""); len(got) != 1 {
		t.Errorf("a pod that fits on the existing node got a NodeClaim: %v", got)
	}
}

// TestStartupTaintsKeepNodeClaimUninitialized models "A NodeClaim becomes
// `Initialized` only when its Node is Ready, has its expected resources,
// and every taint listed in the NodePool's `startupTaints` has been
// removed" and "Uninitialized nodes are not candidates for consolidation
// or drift": an empty node with bootroll's os-not-ready startup taint is
// not consolidated however long it waits, and is once the taint goes.
func TestStartupTaintsKeepNodeClaimUninitialized(t *testing.T) {
	h := newHarness(t)
	taint := corev1.Taint{Key: "bootroll.dev/os-not-ready", Effect: corev1.TaintEffectNoSchedule}
	h.createPool("default", poolOpts{consolidateAfter: "0s", budgets: []budgetSpec{{Nodes: "100%"}}, startupTaints: []corev1.Taint{taint}})
	node := h.addNode("default")
	h.changeImage("default", "quay.io/os@sha256:bbb") // drifted too
	h.run(10 * time.Minute)
	nc := h.claim(node)
	if nc == nil || nc.deleting() {
		t.Fatalf("an uninitialized node was disrupted:\n%s", h.dump())
	}
	if c := nc.cond(ConditionInitialized); c == nil || c.Status == "True" || c.Reason != "StartupTaintsExist" {
		t.Errorf("Initialized = %+v, want not True with reason StartupTaintsExist", c)
	}
	if !hasTaint(h.node(node).Spec.Taints, taint) {
		t.Errorf("registration did not keep the startup taint: %v", h.node(node).Spec.Taints)
	}

	n := h.node(node)
	n.Spec.Taints = nil
	if err := h.c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if !h.claim(node).isTrue(ConditionInitialized) {
		t.Fatalf("NodeClaim not initialized once the startup taint went: %+v", h.claim(node).status.Conditions)
	}
	h.runUntil(time.Minute, "the empty node consolidated", func() bool { return h.gone(node) })
}

// TestLivenessRegistrationTimeout models "Liveness: a NodeClaim that does
// not launch in 5 min or register in 15 min is deleted; initialization
// itself has no such timeout".
func TestLivenessRegistrationTimeout(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never"})
	h.prov.defer_ = true
	node := h.addNode("default")
	h.run(RegistrationTimeout - time.Second)
	if h.deleting(node) {
		t.Fatalf("deleted before the registration timeout:\n%s", h.dump())
	}
	h.run(2 * time.Second)
	if !h.gone(node) {
		t.Fatalf("NodeClaim that never registered still there after 15m:\n%s", h.dump())
	}
	if !slices.Contains(h.prov.terminated, node) {
		t.Errorf("instance of the unregistered NodeClaim not terminated: %v", h.prov.terminated)
	}

	// A launch that keeps failing is given up after 5 minutes.
	h.prov.defer_ = false
	h.prov.launchErr = errors.New("insufficient capacity")
	failing := h.addNode("default")
	h.run(LaunchTimeout + 10*time.Second)
	if !h.gone(failing) {
		t.Fatalf("NodeClaim that never launched still there after 5m:\n%s", h.dump())
	}
}

// TestRegistrationWithoutOwnerReference models "A NodeClaim becomes
// `Initialized` only when its Node is Ready ..." for a Node the provider
// creates without an owner reference, after a restarted Karpenter forgot
// its launches: the Node is found by provider ID and registration adds the
// reference and the finalizer.
func TestRegistrationWithoutOwnerReference(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never"})
	h.prov.defer_, h.prov.noOwner = true, true
	node := h.addNode("default")
	clear(h.k.launched) // as after a restart
	if err := h.prov.registerDeferred(ctx, node); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if !h.claim(node).isTrue(ConditionInitialized) {
		t.Fatalf("not initialized: %+v", h.claim(node).status.Conditions)
	}
	if n := h.node(node); claimName(n) != node || !slices.Contains(n.Finalizers, FinalizerTermination) {
		t.Errorf("registration did not adopt the node: owners %v finalizers %v", n.OwnerReferences, n.Finalizers)
	}
}
