package twin_test

import (
	"testing"

	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// BenchmarkRollout1000 runs the 1,000-node rollout of make bench:
// maxUnavailable 10%, workloads on every node.
func BenchmarkRollout1000(b *testing.B) {
	sc, err := scenario.Load("../../scenarios/bench/bench-1000.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var events uint64
	for b.Loop() {
		res, err := twin.Run(sc, twin.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Passed() {
			b.Fatalf("bench-1000 failed: %v", res.Violations)
		}
		events = res.Events
	}
	b.ReportMetric(float64(events), "events/op")
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
