package fakekarpenter

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestExpiryForcefulIgnoresDoNotDisrupt models "At `creationTimestamp +
// expireAfter` the NodeClaim is deleted directly: no budget, no
// do-not-disrupt check, no replacement first. The drain honours PDBs and
// do-not-disrupt pods only until the terminationGracePeriod deadline."
func TestExpiryForcefulIgnoresDoNotDisrupt(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{consolidateAfter: "Never", expireAfter: "1h", tgp: "10m", budgets: []budgetSpec{{Nodes: "0"}}})
	node := h.addNode("default")
	h.annotateNode(node, AnnotationDoNotDisrupt, "true")
	h.annotateClaim(node, AnnotationDoNotDisrupt, "true")
	h.addPod("guarded", node) // a PDB refuses its eviction
	h.refuse["default/guarded"] = true

	h.run(time.Hour - time.Second)
	if h.deleting(node) {
		t.Fatalf("deleted before expireAfter:\n%s", h.dump())
	}
	h.run(time.Second)
	if !h.deleting(node) {
		t.Fatalf("not deleted at creation + expireAfter:\n%s", h.dump())
	}
	d := h.find("karpenter/disrupt", "node/"+node)
	if len(d) != 1 || d[0].details["reason"] != ReasonExpired || d[0].details["decision"] != "delete" {
		t.Fatalf("disruption: %v, want a forceful delete for reason Expired", d)
	}
	if c := h.claim(node).cond(ConditionDisruptionReason); c == nil || c.Reason != ReasonExpired {
		t.Errorf("DisruptionReason = %+v, want Expired", c)
	}
	if got := h.find("karpenter/nodeclaim-created", ""); len(got) != 1 {
		t.Errorf("a replacement was launched for an expired node: %v", got)
	}

	// The PDB holds the pod until the deadline less its grace period (30 s).
	h.run(10*time.Minute - 31*time.Second)
	if h.pod("guarded") == nil || h.gone(node) {
		t.Fatalf("the blocked pod or the node went before the drain deadline:\n%s", h.dump())
	}
	h.runUntil(time.Minute, "the node terminated after the drain deadline", func() bool { return h.gone(node) })
	if got := h.find("karpenter/pod-deleted", "pod/default/guarded"); len(got) != 1 || got[0].at != time.Hour+10*time.Minute-30*time.Second {
		t.Errorf("pod force-deleted %v, want at 1h + 10m - 30s", got)
	}
	if k := h.k.Stats(); k.Deleted[ReasonExpired] != 1 || k.Terminated != 1 {
		t.Errorf("stats %+v, want one Expired deletion and one termination", k)
	}
}

// TestRepairV114 models "v1.14: feature gate `NodeRepair` (default off). A
// node condition matching a provider policy for longer than its toleration
// (KWOK provider: Ready False/Unknown for 10 min; AWS: 30 min) gets its
// NodeClaim deleted forcefully. Stops when more than 20% of the pool's nodes
// are unhealthy (rounded up). do-not-disrupt is NOT checked. There is no
// do-not-repair."
func TestRepairV114(t *testing.T) {
	repair := func(o *Options) { o.Profile, o.NodeRepair = ProfileV114, true }

	t.Run("forceful after the toleration, protection ignored", func(t *testing.T) {
		h := newHarness(t, repair)
		h.createPool("default", poolOpts{consolidateAfter: "Never", budgets: []budgetSpec{{Nodes: "0"}}})
		nodes := h.addNodes("default", 5)
		sick := nodes[2]
		for _, a := range []string{AnnotationDoNotDisrupt, AnnotationDoNotRepair} {
			h.annotateNode(sick, a, "true")
			h.annotateClaim(sick, a, "true")
		}
		h.addPod("guarded", sick)
		h.refuse["default/guarded"] = true
		h.setReady(sick, false) // a reboot that takes too long
		h.run(DefaultRepairToleration - time.Second)
		if h.deleting(sick) {
			t.Fatalf("repaired before the toleration:\n%s", h.dump())
		}
		h.run(time.Second)
		if !h.deleting(sick) {
			t.Fatalf("not repaired after the toleration:\n%s", h.dump())
		}
		// Forceful: the PDB-blocked pod is deleted at once, no eviction.
		h.runUntil(10*time.Second, "the node terminated", func() bool { return h.gone(sick) })
		if slices.Contains(h.evicts, "default/guarded") || len(h.find("karpenter/pod-deleted", "pod/default/guarded")) != 1 {
			t.Errorf("the pod was not force-deleted: evictions %v\n%s", h.evicts, h.dump())
		}
		if d := h.find("karpenter/disrupt", "node/"+sick); len(d) != 1 || d[0].details["reason"] != ReasonUnhealthy {
			t.Errorf("disruption %v, want Unhealthy", d)
		}
	})
	t.Run("feature gate off", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.Profile = ProfileV114 })
		h.createPool("default", poolOpts{consolidateAfter: "Never"})
		node := h.addNode("default")
		h.setReady(node, false)
		h.run(time.Hour)
		if h.deleting(node) {
			t.Fatalf("repaired with NodeRepair off:\n%s", h.dump())
		}
	})
	t.Run("stops above 20% unhealthy", func(t *testing.T) {
		h := newHarness(t, repair)
		h.createPool("default", poolOpts{consolidateAfter: "Never"})
		nodes := h.addNodes("default", 5) // 20% of 5 is 1
		h.setReady(nodes[0], false)
		h.setReady(nodes[1], false)
		h.run(time.Hour)
		for _, n := range nodes {
			if h.deleting(n) {
				t.Fatalf("repaired %s with 2 of 5 nodes unhealthy:\n%s", n, h.dump())
			}
		}
		if b := h.find("karpenter/blocked", "node/"+nodes[0]); len(b) != 1 || !strings.Contains(b[0].details["blocker"].(string), "20%") {
			t.Errorf("blocked decisions: %v", b)
		}
		h.setReady(nodes[1], true) // 1 of 5: repair resumes
		h.runUntil(2*time.Minute, "the remaining unhealthy node repaired", func() bool { return h.deleting(nodes[0]) })
	})
}

// TestRepairV115 models "v1.15: repair is the first disruption method,
// paced by the `Unhealthy` budget, replacement launched first;
// `karpenter.sh/do-not-repair: "true"` on the Node or NodeClaim vetoes
// repair; node-level do-not-disrupt is ignored by repair".
func TestRepairV115(t *testing.T) {
	repair := func(o *Options) { o.Profile, o.NodeRepair = ProfileV115, true }
	for _, on := range []string{"Node", "NodeClaim"} {
		t.Run("do-not-repair on the "+on+" vetoes", func(t *testing.T) {
			h := newHarness(t, repair)
			h.createPool("default", poolOpts{consolidateAfter: "Never", budgets: allNodes})
			nodes := h.addNodes("default", 5)
			sick := nodes[0]
			if on == "Node" {
				h.annotateNode(sick, AnnotationDoNotRepair, "true")
			} else {
				// Before registration: the NodeClaim's annotations are
				// copied to the Node.
				h.prov.defer_ = true
				sick = h.addNode("default")
				h.annotateClaim(sick, AnnotationDoNotRepair, "true")
				if err := h.prov.registerDeferred(ctx, sick); err != nil {
					t.Fatal(err)
				}
				h.settle()
			}
			h.setReady(sick, false)
			h.run(time.Hour)
			if h.deleting(sick) {
				t.Fatalf("repaired despite do-not-repair on the %s:\n%s", on, h.dump())
			}
		})
	}
	t.Run("do-not-disrupt ignored, replacement first", func(t *testing.T) {
		h := newHarness(t, repair)
		h.createPool("default", poolOpts{consolidateAfter: "Never", budgets: allNodes})
		sick := h.addNode("default")
		h.annotateNode(sick, AnnotationDoNotDisrupt, "true")
		h.addPod("web", sick, requests("3", "1Gi")) // fits on no other node
		others := h.addNodes("default", 4)
		for i, n := range others {
			h.addPod(fmt.Sprintf("filler-%d", i), n, requests("3", "1Gi"))
		}
		h.setReady(sick, false)
		h.runUntil(DefaultRepairToleration+time.Minute, "the unhealthy node replaced", func() bool { return h.deleting(sick) })
		d := h.find("karpenter/disrupt", "node/"+sick)
		if len(d) != 1 || d[0].details["method"] != MethodRepair || d[0].details["decision"] != "replace" {
			t.Fatalf("disruption %v, want a repair that replaces", d)
		}
		r := h.find("karpenter/replaced", "node/"+sick)
		created := h.find("karpenter/nodeclaim-created", "nodeclaim/"+d[0].details["replacements"].(string))
		if len(r) != 1 || len(created) != 1 || created[0].at > r[0].at {
			t.Errorf("replacement %v, deletion %v: want the replacement launched before the deletion", created, r)
		}
		if st := h.k.Stats(); st.Replaced[ReasonUnhealthy] != 1 || st.Replacements[ReasonUnhealthy] != 1 {
			t.Errorf("stats %+v, want one Unhealthy replacement", st)
		}
	})
	t.Run("the Unhealthy budget counts the NotReady node itself", func(t *testing.T) {
		h := newHarness(t, repair)
		h.createPool("default", poolOpts{consolidateAfter: "Never"}) // 10% of 5 = 1
		nodes := h.addNodes("default", 5)
		h.setReady(nodes[0], false)
		h.run(time.Hour)
		if h.deleting(nodes[0]) {
			t.Fatalf("repaired although the NotReady node uses the whole budget:\n%s", h.dump())
		}
		if b := h.find("karpenter/blocked", "node/"+nodes[0]); len(b) != 1 || b[0].details["blocker"] != budgetBlocker(ReasonUnhealthy, "default") {
			t.Errorf("blocked decisions %v, want the Unhealthy budget", b)
		}
	})
}
