package fakekarpenter

import (
	"fmt"
	"testing"
)

// BenchmarkSnapshot measures one pod event and the snapshot after it,
// kept from watch events and by a full listing, and one disruption pass
// (snapshot and decisions), at 200 and 1,000 nodes with 4 pods each. The
// kept snapshot's cost grows with the cluster only by a copy of its node
// list; a full listing's with every object in it.
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{200, 1000} {
		h := newHarness(b, func(o *Options) { o.VerifySnapshot = false })
		h.createPool("default", poolOpts{consolidateAfter: "Never"})
		nodes := h.addNodes("default", n)
		for i, node := range nodes {
			for j := range 4 {
				h.addPod(fmt.Sprintf("p-%d-%d", i, j), node, requests("100m", "128Mi"))
			}
		}
		event := func(i int) {
			// A pod bound and deleted again: two events on one node.
			p := h.addPod(fmt.Sprintf("bench-%d", i), nodes[i%n], requests("100m", "128Mi"))
			if err := h.c.Delete(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("nodes=%d/event+kept", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				event(i)
				if _, err := h.k.snapshot(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/event+full", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				event(i)
				if _, err := h.k.fullSnapshot(ctx, false); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("nodes=%d/disruption-pass", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				event(i)
				if _, err := h.k.Disruption.Reconcile(ctx, DisruptionKey); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
