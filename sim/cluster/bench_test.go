package cluster_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/index"
)

// benchYAML has nodes of 4 CPUs running 3 one-CPU pods each, under a PDB
// that allows 10% of them to be disrupted, and a DaemonSet.
const benchYAML = `
name: bench
limit: 100h
images:
  - {name: v1, ref: "` + refV1 + `", size: 1Gi}
nodeGroups:
  - name: workers
    count: %d
    labels: {pool: workers}
    capacity: {cpu: "4", memory: 16Gi}
    bootImage: v1
workloads:
  - name: web
    replicas: %d
    requests: {cpu: "1", memory: 1Gi}
    nodeSelector: {pool: workers}
    pdb: {maxUnavailable: 10%%}
daemonSets:
  - name: agent
`

// benchScheduleAndEvict measures one eviction and everything it causes:
// the PDB check, the graceful termination, the replacement pod, its
// scheduling and start, and the PDB status writes. Each op evicts a pod of
// the next node in turn and runs the engine until the replacement runs.
func benchScheduleAndEvict(b *testing.B, nodes int) {
	h := newHarnessYAML(b, fmt.Sprintf(benchYAML, nodes, 3*nodes), 1)
	h.trace = nil
	traced := 0
	names := h.cl.Nodes()
	events := h.eng.EventsRun()
	var ops int
	for b.Loop() {
		node := names[ops%len(names)]
		ops++
		var pods corev1.PodList
		if err := h.api.Client().List(ctx, &pods, client.MatchingFields{index.PodNode: node}); err != nil {
			b.Fatal(err)
		}
		evicted := false
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Labels["app"] == "web" && p.DeletionTimestamp == nil {
				if err := h.evict(p); err != nil {
					b.Fatalf("evict %s: %v", p.Name, err)
				}
				evicted = true
				break
			}
		}
		if !evicted {
			b.Fatalf("no web pod left on %s", node)
		}
		h.runFor(10 * time.Second)
		traced += len(h.trace)
		h.trace = h.trace[:0]
	}
	if got := h.cl.PendingPods(); got != 0 {
		b.Fatalf("PendingPods = %d after the run, want 0", got)
	}
	if st := h.pdb("web"); st.Healthy != 3*nodes {
		b.Fatalf("web PDB after the run = %+v, want all %d healthy", st, 3*nodes)
	}
	b.ReportMetric(float64(h.eng.EventsRun()-events)/float64(ops), "events/op")
	b.ReportMetric(float64(traced)/float64(ops), "traces/op")
}

func BenchmarkScheduleAndEvict1k(b *testing.B)  { benchScheduleAndEvict(b, 1000) }
func BenchmarkScheduleAndEvict10k(b *testing.B) { benchScheduleAndEvict(b, 10000) }

// TestScheduleScales checks that the cluster of the benchmark starts
// settled at 10,000 nodes.
func TestScheduleScales(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 nodes")
	}
	const nodes = 10000
	h := newHarnessYAML(t, fmt.Sprintf(benchYAML, nodes, 3*nodes), 1)
	if got := len(h.cl.Nodes()); got != nodes {
		t.Fatalf("Nodes = %d, want %d", got, nodes)
	}
	if cpu, n := h.cl.SchedulableCapacity(); cpu != 4000*nodes || n != nodes {
		t.Errorf("SchedulableCapacity = %d, %d", cpu, n)
	}
	if got := h.cl.PendingPods(); got != 0 {
		t.Errorf("PendingPods = %d, want 0", got)
	}
}
