package fakekarpenter

import (
	"testing"
	"time"
)

// TestDriftReplaceThenDelete models "Static drift (NodePool template hash vs
// NodeClaim `karpenter.sh/nodepool-hash`), requirements drift, provider
// drift (e.g. machine image changed); rechecked every 5 min.
// Replace-then-delete, oldest first, within the Drifted budget. Node-level
// do-not-disrupt blocks it".
func TestDriftReplaceThenDelete(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never", budgets: []budgetSpec{{Nodes: "1"}}})
	a := h.addNode("default")
	h.addPod("web-a", a, requests("3", "1Gi")) // fits on no other node
	h.run(time.Minute)
	b := h.addNode("default")
	h.addPod("web-b", b, requests("3", "1Gi"))
	protected := h.addNode("default")
	h.addPod("web-c", protected, requests("3", "1Gi"))
	h.annotateNode(protected, AnnotationDoNotDisrupt, "true")

	// The NodeClass now boots a newer image; without an event each
	// NodeClaim notices within DriftRecheck. Replacements boot slowly.
	h.images["default"] = "quay.io/os@sha256:bbb"
	h.prov.ready = false
	changed := h.elapsed()
	h.runUntil(DriftRecheck+PollingPeriod, "a replacement for the oldest drifted node", func() bool {
		return len(h.find("karpenter/disrupt", "node/"+a)) > 0
	})
	da := h.find("karpenter/disrupt", "node/"+a)
	if da[0].details["decision"] != "replace" {
		t.Fatalf("disruption of %s: %v, want replace", a, da)
	}
	repl := da[0].details["replacements"].(string)
	if got := h.prov.images[repl]; got != "quay.io/os@sha256:bbb" {
		t.Errorf("replacement %s launched with %q, want the new NodeClass image", repl, got)
	}
	h.run(2 * time.Minute)
	if h.deleting(a) {
		t.Fatalf("%s deleted before its replacement initialized:\n%s", a, h.dump())
	}
	if !hasTaint(h.node(a).Spec.Taints, disruptedTaint) {
		t.Errorf("the candidate is not tainted %s while its replacement launches", TaintDisrupted)
	}
	for _, n := range []string{b, protected} {
		if d := h.find("karpenter/drifted", "nodeclaim/"+n); len(d) != 1 || d[0].at-changed > DriftRecheck {
			t.Errorf("%s drifted %v, want within %v of the image change", n, d, DriftRecheck)
		}
	}
	if len(h.find("karpenter/disrupt", "node/"+b)) != 0 {
		t.Fatalf("%s disrupted while %s's command used the Drifted budget of 1", b, a)
	}

	h.prov.ready = true
	h.setReady(repl, true)
	h.runUntil(time.Minute, "the replaced node deleted", func() bool { return h.gone(a) })
	h.runUntil(5*time.Minute, "the next drifted node replaced", func() bool { return h.gone(b) })
	h.run(10 * time.Minute)
	if h.deleting(protected) {
		t.Fatalf("drift disrupted a do-not-disrupt node:\n%s", h.dump())
	}
	if bl := h.find("karpenter/blocked", "node/"+protected); len(bl) != 1 || bl[0].details["method"] != MethodDrift {
		t.Errorf("blocked decisions for %s: %v", protected, bl)
	}
	// b's pod fits on a's (empty) replacement, so b is deleted without
	// one: replacements are launched only for pods that fit nowhere.
	if st := h.k.Stats(); st.Disrupted(ReasonDrifted) != 2 || st.Replaced[ReasonDrifted] != 1 || st.Replacements[ReasonDrifted] != 1 {
		t.Errorf("stats %+v, want two drifted nodes disrupted, one replaced", st)
	}
}

// TestStaticDrift models "Static drift (NodePool template hash vs NodeClaim
// `karpenter.sh/nodepool-hash`)": a changed template drifts the NodeClaims
// at once (the NodePool event enqueues them).
func TestStaticDrift(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never"})
	node := h.addNode("default")
	u := newPoolObject()
	if err := h.c.Get(ctx, clientKey("default"), u); err != nil {
		t.Fatal(err)
	}
	u.Object["spec"].(map[string]any)["template"].(map[string]any)["metadata"] = map[string]any{"labels": map[string]any{"team": "b"}}
	if err := h.c.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if c := h.claim(node).cond(ConditionDrifted); c == nil || c.Reason != "NodePoolDrifted" {
		t.Fatalf("Drifted = %+v, want NodePoolDrifted", c)
	}
}

// TestDriftOldestFirst models "Replace-then-delete, oldest first, within the
// Drifted budget": the NodeClaim that drifted first goes first, whatever
// the names.
func TestDriftOldestFirst(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never", budgets: []budgetSpec{{Nodes: "0", Reasons: []string{ReasonDrifted}}}})
	first, second := h.addNode("default"), h.addNode("default")
	h.addPod("web-1", first, requests("3", "1Gi"))
	h.addPod("web-2", second, requests("3", "1Gi"))
	h.images["default"] = "quay.io/os@sha256:bbb"
	lifecycle := h.queues["karpenter.nodeclaim.lifecycle"]
	lifecycle.Add(request(second)) // second notices the drift first
	h.run(time.Minute)
	lifecycle.Add(request(first))
	h.run(time.Minute)
	if !h.claim(first).isTrue(ConditionDrifted) || !h.claim(second).isTrue(ConditionDrifted) {
		t.Fatalf("both should have drifted:\n%s", h.dump())
	}
	h.setBudgets("default", []budgetSpec{{Nodes: "1"}})
	h.runUntil(time.Minute, "a drifted node disrupted", func() bool { return len(h.find("karpenter/disrupt", "")) > 0 })
	if d := h.find("karpenter/disrupt", ""); d[0].object != "node/"+second {
		t.Errorf("disrupted %s first, want %s, which drifted first", d[0].object, second)
	}
}
