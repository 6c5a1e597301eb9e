package fakekarpenter

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var allNodes = []budgetSpec{{Nodes: "100%"}}

// TestConsolidatableTimerRestartedByPodEvent models "Timer: NodeClaim
// becomes Consolidatable when Initialized and `now - (lastPodEventTime or
// Initialized time) >= consolidateAfter`" and "`lastPodEventTime` updates
// when a non-DaemonSet pod binds, terminates or starts terminating (writes
// deduplicated to one per 10 s)".
func TestConsolidatableTimerRestartedByPodEvent(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "60s", budgets: allNodes})
	node := h.addNode("default")

	h.run(30 * time.Second)
	h.addPod("web-1", node) // binds at 30s
	h.run(5 * time.Second)
	h.deletePod("web-1") // terminates at 35s: within 10s of the last write
	h.run(5 * time.Second)
	h.addPod("agent", node, daemonSet) // a DaemonSet pod is no pod event
	lpe := h.claim(node).status.LastPodEventTime
	if lpe == nil || !lpe.Time.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("lastPodEventTime = %v, want %v (deduplicated, DaemonSet ignored)", lpe, t0.Add(30*time.Second))
	}

	h.run(60*time.Second - h.elapsed() + time.Second) // 61s: the timer from initialization would have run out
	if h.claim(node).isTrue(ConditionConsolidatable) {
		t.Fatalf("Consolidatable at %v although a pod event at 30s restarted the timer", h.elapsed())
	}
	h.run(90*time.Second - h.elapsed() - time.Second)
	if h.claim(node).isTrue(ConditionConsolidatable) {
		t.Fatalf("Consolidatable at %v, before 30s + consolidateAfter", h.elapsed())
	}
	h.run(time.Second)
	if !h.claim(node).isTrue(ConditionConsolidatable) {
		t.Fatalf("not Consolidatable at %v = 30s + consolidateAfter", h.elapsed())
	}
	h.runUntil(time.Minute, "the empty node deleted", func() bool { return h.gone(node) })
}

// TestEmptinessIgnoresDaemonSetAndTerminatingPods models "Empty = no
// "reschedulable" pods: DaemonSet pods, mirror pods, terminating and
// terminal pods do not count."
func TestEmptinessIgnoresDaemonSetAndTerminatingPods(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: allNodes})
	empty := h.addNode("default")
	busy := h.addNode("default")
	h.addPod("agent", empty, daemonSet)
	h.addPod("job", empty, succeeded)
	h.addPod("static", empty, func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: empty, UID: "n"}}
	})
	h.addPod("leaving", empty, withFinalizer)
	h.deletePod("leaving") // terminating for as long as the test runs
	h.addPod("web", busy)

	h.runUntil(time.Minute, "the node with only non-reschedulable pods disrupted", func() bool { return h.deleting(empty) })
	d := h.find("karpenter/disrupt", "node/"+empty)
	if len(d) != 1 || d[0].details["reason"] != ReasonEmpty {
		t.Errorf("disruption of %s: %v, want one for reason Empty", empty, d)
	}
	h.run(5 * time.Minute)
	if h.deleting(busy) {
		t.Errorf("the node running a workload pod was disrupted under WhenEmpty:\n%s", h.dump())
	}
	if !h.gone(empty) {
		t.Errorf("the empty node's termination did not finish (the terminating pod blocks only until stuck):\n%s", h.dump())
	}
}

// TestCordonDoesNotProtect models "**Cordon does not protect a node**:
// Karpenter never reads `spec.unschedulable`; a cordoned, drained node is
// an emptiness candidate."
func TestCordonDoesNotProtect(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "30s", budgets: allNodes})
	node := h.addNode("default")
	h.addPod("web", node)
	h.cordon(node)
	h.run(10 * time.Second)
	h.deletePod("web") // drained, as bootroll's drain leaves it
	drained := h.elapsed()
	h.runUntil(2*time.Minute, "the cordoned, drained node deleted", func() bool { return h.gone(node) })
	d := h.find("karpenter/disrupt", "node/"+node)
	if len(d) != 1 || d[0].details["reason"] != ReasonEmpty {
		t.Fatalf("disruption: %v, want one for reason Empty", d)
	}
	// About consolidateAfter after the last eviction, plus polling and
	// validation (reference/control-plane.md measured 30-40 s for 10 s).
	if took := d[0].at - drained; took < 30*time.Second || took > 30*time.Second+PollingPeriod+ValidationDelay {
		t.Errorf("disrupted %v after the drain, want consolidateAfter (30s) + up to %v", took, PollingPeriod+ValidationDelay)
	}
}

// TestDoNotDisruptNodeBlocksEmptiness models "Blocks graceful disruption
// (consolidation, emptiness, drift): node or NodeClaim annotation
// `karpenter.sh/do-not-disrupt: "true"`".
func TestDoNotDisruptNodeBlocksEmptiness(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: allNodes})
	protected := h.addNode("default")
	other := h.addNode("default")
	h.annotateNode(protected, AnnotationDoNotDisrupt, "true")
	h.runUntil(time.Minute, "the unprotected empty node deleted", func() bool { return h.gone(other) })
	h.run(5 * time.Minute)
	if h.deleting(protected) {
		t.Fatalf("the do-not-disrupt node was disrupted:\n%s", h.dump())
	}
	b := h.find("karpenter/blocked", "node/"+protected)
	if len(b) != 1 || !strings.Contains(b[0].details["blocker"].(string), AnnotationDoNotDisrupt) {
		t.Errorf("blocked decisions for %s: %v, want one naming %s", protected, b, AnnotationDoNotDisrupt)
	}

	// Removing the annotation makes it a candidate again.
	h.annotateNode(protected, AnnotationDoNotDisrupt, "false")
	h.runUntil(time.Minute, "the node deleted once unprotected", func() bool { return h.gone(protected) })
}

// TestDoNotDisruptPodBlocksConsolidation models "any pod with
// `karpenter.sh/do-not-disrupt: "true"`" and "a PDB that blocks eviction"
// among the blockers of graceful disruption, here of WhenEmptyOrUnderutilized
// consolidation of a node whose pods would fit elsewhere.
func TestDoNotDisruptPodBlocksConsolidation(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "0s", budgets: allNodes}) // WhenEmptyOrUnderutilized by default
	a := h.addNode("default")
	b := h.addNode("default")
	h.addPod("pinned", a, doNotDisrupt)
	h.addPod("web", b)

	// Either node's pod fits on the other; only b may go.
	h.runUntil(2*time.Minute, "the underutilized node without a blocking pod consolidated", func() bool { return h.gone(b) })
	d := h.find("karpenter/disrupt", "node/"+b)
	if len(d) != 1 || d[0].details["reason"] != ReasonUnderutilized || d[0].details["method"] != MethodSingleNode {
		t.Errorf("disruption of %s: %v, want single-node consolidation (Underutilized)", b, d)
	}
	if h.deleting(a) {
		t.Fatalf("the node with a do-not-disrupt pod was disrupted")
	}
	if bl := h.find("karpenter/blocked", "node/"+a); len(bl) == 0 || !strings.Contains(bl[0].details["blocker"].(string), "pod default/pinned") {
		t.Errorf("blocked decisions for %s: %v, want one naming the pod", a, bl)
	}
}

// TestPDBBlocksConsolidation models "a PDB that blocks eviction" among the
// blockers of graceful disruption.
func TestPDBBlocksConsolidation(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "0s", budgets: allNodes})
	a := h.addNode("default")
	b := h.addNode("default")
	h.addPod("web-1", a)
	h.addPod("web-2", b)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: new(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	if err := h.c.Create(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 2, DesiredHealthy: 2, ExpectedPods: 2}
	if err := h.c.Status().Update(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	h.run(5 * time.Minute)
	if h.deleting(a) || h.deleting(b) {
		t.Fatalf("a node was consolidated although the PDB allows no disruption:\n%s", h.dump())
	}
	if bl := h.find("karpenter/blocked", ""); len(bl) != 2 || bl[0].details["blocker"] != "pdb default/web prevents pod evictions" {
		t.Errorf("blocked decisions: %v, want both nodes blocked by the PDB", bl)
	}
}

// TestDoNotDisruptNodeClaimOnlyUntilRegistered models "(the NodeClaim's
// copy counts only until the node registers)": registration copies the
// NodeClaim's annotations to the Node, after which only the Node's count.
func TestDoNotDisruptNodeClaimOnlyUntilRegistered(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: allNodes})

	h.prov.defer_ = true
	early := h.addNode("default")
	h.annotateClaim(early, AnnotationDoNotDisrupt, "true") // before registration
	if err := h.prov.registerDeferred(ctx, early); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.prov.defer_ = false
	late := h.addNode("default")
	h.annotateClaim(late, AnnotationDoNotDisrupt, "true") // after registration: too late

	h.runUntil(time.Minute, "the node annotated on its NodeClaim after registration deleted", func() bool { return h.gone(late) })
	h.run(3 * time.Minute)
	if h.deleting(early) {
		t.Fatalf("the node whose NodeClaim was annotated before registration was disrupted:\n%s", h.dump())
	}
	if got := h.node(early).Annotations[AnnotationDoNotDisrupt]; got != "true" {
		t.Errorf("registration did not copy do-not-disrupt to the Node: %q", got)
	}
}

// TestOneMethodPerPassAndValidation models "Disruption loop: singleton,
// polls every 10 s, one method acts per pass, in the order [Repair
// (v1.15)], Emptiness, StaticDrift, Drift, MultiNode, SingleNode; commands
// re-validated after 15 s before they execute."
func TestOneMethodPerPassAndValidation(t *testing.T) {
	t.Run("a pod within the 15 s saves the node", func(t *testing.T) {
		h := newHarness(t)
		h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: allNodes})
		node := h.addNode("default")
		h.runUntil(time.Minute, "an emptiness command", func() bool {
			return len(h.find("karpenter/disruption-considered", "node/"+node)) > 0
		})
		h.run(ValidationDelay / 2)
		h.addPod("web", node) // the scheduler binds a pod meanwhile
		h.run(5 * time.Minute)
		if h.deleting(node) {
			t.Fatalf("a node that got a pod during validation was disrupted:\n%s", h.dump())
		}
		if v := h.find("karpenter/validation-failed", "node/"+node); len(v) != 1 {
			t.Errorf("validation failures: %v, want one", v)
		}
	})
	t.Run("emptiness acts before drift, in an earlier pass", func(t *testing.T) {
		h := newHarness(t)
		h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: allNodes})
		empty := h.addNode("default")
		drifted := h.addNode("default")
		h.addPod("web", drifted)
		h.changeImage("default", "quay.io/os@sha256:bbb")
		h.runUntil(2*time.Minute, "both disrupted", func() bool { return h.deleting(empty) && h.deleting(drifted) })
		var order []string
		var at []time.Duration
		for _, r := range h.find("karpenter/disrupt", "") {
			order = append(order, r.details["method"].(string))
			at = append(at, r.at)
		}
		if len(order) != 2 || order[0] != MethodEmptiness || order[1] != MethodDrift || at[0] == at[1] {
			t.Fatalf("disruptions %v at %v, want emptiness then drift in separate passes\n%s", order, at, h.dump())
		}
		// The drifted node was a candidate in the pass that found the
		// empty one, yet drift waited for emptiness's command.
		if c := h.find("karpenter/disruption-considered", "node/"+empty); len(c) != 1 || c[0].at >= at[0] || at[0]-c[0].at != ValidationDelay {
			t.Errorf("emptiness considered %v, want once, %v before it acted", c, ValidationDelay)
		}
	})
}
