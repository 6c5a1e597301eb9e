package twin_test

import (
	"testing"

	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// BenchmarkRollout1000 runs the 1,000-node rollout of make bench:
// maxUnavailable 10%, workloads on every node.
func BenchmarkRollout1000(b *testing.B) { benchRollout(b, "../../scenarios/bench/bench-1000.yaml") }

// BenchmarkRollout10000 runs the 10,000-node rollout of make bench (about
// a minute an iteration: run it with -benchtime 1x). Its ns/event next to
// BenchmarkRollout1000's shows whether the cost of an event grows with
// the cluster.
func BenchmarkRollout10000(b *testing.B) { benchRollout(b, "../../scenarios/bench/bench-10000.yaml") }

// BenchmarkPool200Static runs one run of the 200-node scenario of make
// whatif-bench (issue 14's sweep runs it 250 times): its ns/op times 250,
// halved for two cores, is the sweep's floor.
func BenchmarkPool200Static(b *testing.B) {
	benchRollout(b, "../../scenarios/whatif/pool-200-static.yaml")
}

func benchRollout(b *testing.B, file string) {
	sc, err := scenario.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	// The GOGC that bootroll scenario run uses, so both figures agree.
	_, restore := twin.SetGCPercent()
	defer restore()
	var events uint64
	for b.Loop() {
		res, err := twin.Run(sc, twin.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !res.Passed() {
			b.Fatalf("%s failed: %v", sc.Name, res.Violations)
		}
		events = res.Events
	}
	b.ReportMetric(float64(events), "events/op")
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/(float64(events)*float64(b.N)), "ns/event")
}
