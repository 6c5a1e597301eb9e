package fakekarpenter

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestDeterministic runs the same mixed run twice and wants the same trace:
// DESIGN.md section 1, "the same scenario and seed produce a byte-identical
// trace", which the reference's behaviours must not break through map
// order.
func TestDeterministic(t *testing.T) {
	run := func() string {
		h := newHarness(t, func(o *Options) { o.NodeRepair = true })
		h.createPool("a", poolOpts{consolidateAfter: "20s", budgets: []budgetSpec{{Nodes: "50%"}}, expireAfter: "2h", tgp: "5m"})
		h.createPool("b", poolOpts{policy: WhenEmpty, consolidateAfter: "0s"})
		nodes := append(h.addNodes("a", 6), h.addNodes("b", 3)...)
		for i, n := range nodes {
			for j := range i % 3 {
				h.addPod(fmt.Sprintf("p-%d-%d", i, j), n, requests("1", "512Mi"))
			}
		}
		h.addPod("agent", nodes[0], daemonSet)
		h.setReady(nodes[1], false)
		for i := range 8 {
			h.addPod(fmt.Sprintf("pending-%d", i), "", requests("2", "1Gi"))
		}
		h.run(30 * time.Minute)
		h.changeImage("default", "quay.io/os@sha256:ccc")
		h.run(3 * time.Hour)
		var pods corev1.PodList
		if err := h.c.List(ctx, &pods); err != nil {
			t.Fatal(err)
		}
		return h.dump() + fmt.Sprintf("%+v pods=%d", h.k.Stats(), len(pods.Items))
	}
	a, b := run(), run()
	if a != b {
		t.Fatalf("two runs differ:\n--- first\n%s\n--- second\n%s", a, b)
	}
	if len(a) < 1000 {
		t.Errorf("the run did too little to be a test:\n%s", a)
	}
}
