package options

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// Metrics are the controller's Prometheus metrics. Each reconciler gets the
// same *Metrics from its constructor; the twin passes one on its own
// registry so runs do not share state.
type Metrics struct {
	Nodes         *prometheus.GaugeVec
	SlotsInUse    *prometheus.GaugeVec
	SlotsMax      *prometheus.GaugeVec
	DrainSeconds  *prometheus.HistogramVec
	RebootSeconds *prometheus.HistogramVec
	Failures      *prometheus.CounterVec
	PinnedNodes   *prometheus.GaugeVec
	// Halted is 1 while a pool's rollout of its target is halted.
	Halted *prometheus.GaugeVec
	// ViewMismatches counts rows where a pool's incrementally kept row
	// table differed from a full rebuild: a bug, which the rebuild repairs.
	ViewMismatches *prometheus.CounterVec
	// DeadlineRetries counts failed node reconciles retried after a second
	// (node.ConflictRetry) because the Node is owed something by a
	// deadline: controller-runtime's reconcile error counter does not see
	// them, as the error is not returned to the workqueue.
	DeadlineRetries *prometheus.CounterVec

	// phases holds each pool's Nodes gauges in the order of
	// v1alpha1.AllPhases (SetPoolPhases), until ForgetPool: a pass sets
	// them all every second, and looking each up by its labels (hashing
	// them under the vector's lock) was 1% of a twin run.
	mu     sync.Mutex
	phases map[string][]prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	buckets := []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600}
	m := &Metrics{
		Nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bootroll_pool_nodes", Help: "Nodes of a pool per phase.",
		}, []string{"pool", "phase"}),
		SlotsInUse: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bootroll_pool_slots_in_use", Help: "Reboot slots held now.",
		}, []string{"pool"}),
		SlotsMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bootroll_pool_slots_max", Help: "Reboot slots allowed by maxUnavailable.",
		}, []string{"pool"}),
		DrainSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bootroll_drain_duration_seconds", Help: "Time from cordon to an empty node (or drain timeout).", Buckets: buckets,
		}, []string{"pool", "result"}),
		RebootSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bootroll_reboot_duration_seconds", Help: "Time from reboot request to a verified node.", Buckets: buckets,
		}, []string{"pool", "result"}),
		Failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootroll_node_failures_total", Help: "Node update failures by reason.",
		}, []string{"pool", "reason"}),
		PinnedNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bootroll_pinnedimageset_nodes", Help: "Nodes of a PinnedImageSet by state (done, pulling, failed).",
		}, []string{"set", "state"}),
		Halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "bootroll_pool_halted", Help: "1 while the pool's rollout of its target image is halted (maxFailures reached, or every node left failed it), else 0.",
		}, []string{"pool"}),
		ViewMismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootroll_pool_view_mismatches_total", Help: "Nodes whose row in a pool's incrementally kept table differed from a full rebuild (a controller bug; the rebuild repairs it).",
		}, []string{"pool"}),
		DeadlineRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootroll_node_deadline_retries_total", Help: "Failed node reconciles (API errors) retried after a second rather than the workqueue's backoff, because the Node is owed its release, the take-up of a granted slot, the end of its slot or the end of its post-update protection by a deadline; the error is logged.",
		}, []string{"pool", "owed"}),
	}
	if reg != nil {
		reg.MustRegister(m.Nodes, m.SlotsInUse, m.SlotsMax, m.DrainSeconds, m.RebootSeconds, m.Failures, m.PinnedNodes, m.Halted, m.ViewMismatches, m.DeadlineRetries)
	}
	return m
}

// SetPoolPhases sets the pool's node gauge of every phase of
// v1alpha1.AllPhases: the count in phases, 0 for a phase absent from it, so
// a phase that empties reads 0 rather than its last count.
func (m *Metrics) SetPoolPhases(pool string, phases []v1alpha1.PhaseCount) {
	m.mu.Lock()
	gauges := m.phases[pool]
	if gauges == nil {
		for _, ph := range v1alpha1.AllPhases {
			gauges = append(gauges, m.Nodes.WithLabelValues(pool, string(ph)))
		}
		if m.phases == nil {
			m.phases = map[string][]prometheus.Gauge{}
		}
		m.phases[pool] = gauges
	}
	m.mu.Unlock()
	for i, ph := range v1alpha1.AllPhases {
		n := int32(0)
		for _, pc := range phases {
			if pc.Phase == ph {
				n = pc.Nodes
				break
			}
		}
		gauges[i].Set(float64(n))
	}
}

// ForgetPool deletes every series of a pool (a pool being deleted), so a
// deleted pool leaves no gauge behind.
func (m *Metrics) ForgetPool(pool string) {
	m.mu.Lock()
	delete(m.phases, pool) // the series go: a pool made again gets new ones
	m.mu.Unlock()
	l := prometheus.Labels{"pool": pool}
	m.Nodes.DeletePartialMatch(l)
	m.SlotsInUse.DeletePartialMatch(l)
	m.SlotsMax.DeletePartialMatch(l)
	m.DrainSeconds.DeletePartialMatch(l)
	m.RebootSeconds.DeletePartialMatch(l)
	m.Failures.DeletePartialMatch(l)
	m.Halted.DeletePartialMatch(l)
	m.ViewMismatches.DeletePartialMatch(l)
	m.DeadlineRetries.DeletePartialMatch(l)
}
