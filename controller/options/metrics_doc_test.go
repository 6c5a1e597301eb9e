package options

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// recorder is a prometheus.Registerer that keeps what is registered, so
// the test sees every metric NewMetrics makes, series or not (a vector
// with no series gathers nothing).
type recorder struct{ cs []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error   { r.cs = append(r.cs, c); return nil }
func (r *recorder) MustRegister(cs ...prometheus.Collector) { r.cs = append(r.cs, cs...) }
func (r *recorder) Unregister(prometheus.Collector) bool    { return false }

// docMetric is a metric as registered, or as README's metrics table lists it.
type docMetric struct {
	typ    string
	labels []string // sorted
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]*)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
	// A README table row: | `name` | type | `a`, `b` (or —) | meaning |
	readmeRow = regexp.MustCompile("^\\|\\s*`(bootroll_[a-z0-9_]+)`\\s*\\|\\s*([a-z]+)\\s*\\|([^|]*)\\|")
	backticks = regexp.MustCompile("`([a-zA-Z0-9_]+)`")
)

// registeredMetrics is every metric NewMetrics registers, with its type
// and label names.
func registeredMetrics(t *testing.T) map[string]docMetric {
	t.Helper()
	var r recorder
	NewMetrics(&r)
	got := map[string]docMetric{}
	for _, c := range r.cs {
		var typ string
		switch c.(type) {
		case *prometheus.GaugeVec, prometheus.Gauge:
			typ = "gauge"
		case *prometheus.CounterVec, prometheus.Counter:
			typ = "counter"
		case *prometheus.HistogramVec, prometheus.Histogram:
			typ = "histogram"
		case *prometheus.SummaryVec, prometheus.Summary:
			typ = "summary"
		default:
			t.Fatalf("NewMetrics registers a %T: teach this test its type", c)
		}
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			name, labels := descName.FindStringSubmatch(s), descLabels.FindStringSubmatch(s)
			if name == nil || labels == nil {
				t.Fatalf("cannot read the name and labels of %s", s)
			}
			var ls []string
			if labels[1] != "" {
				ls = strings.Split(labels[1], ",")
			}
			slices.Sort(ls)
			got[name[1]] = docMetric{typ: typ, labels: ls}
		}
	}
	return got
}

// readmeMetrics reads the bootroll_* rows of README's metrics tables.
func readmeMetrics(t *testing.T) map[string]docMetric {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]docMetric{}
	for line := range strings.SplitSeq(string(b), "\n") {
		m := readmeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var ls []string
		for _, l := range backticks.FindAllStringSubmatch(m[3], -1) {
			ls = append(ls, l[1])
		}
		slices.Sort(ls)
		if _, dup := doc[m[1]]; dup {
			t.Errorf("README lists %s twice", m[1])
		}
		doc[m[1]] = docMetric{typ: m[2], labels: ls}
	}
	return doc
}

// TestREADMEListsEveryMetric: README's metrics table names every metric
// the controller registers, with its type and exactly its labels, and no
// metric the controller does not register, so the list cannot go stale.
func TestREADMEListsEveryMetric(t *testing.T) {
	reg, doc := registeredMetrics(t), readmeMetrics(t)
	if len(reg) == 0 {
		t.Fatal("NewMetrics registered nothing")
	}
	for name, r := range reg {
		d, ok := doc[name]
		switch {
		case !ok:
			t.Errorf("README's metrics table has no row for %s (%s, labels %v)", name, r.typ, r.labels)
		case d.typ != r.typ:
			t.Errorf("README says %s is a %s; it is a %s", name, d.typ, r.typ)
		case !slices.Equal(d.labels, r.labels):
			t.Errorf("README gives %s the labels %v; it has %v", name, d.labels, r.labels)
		}
	}
	for name := range doc {
		if _, ok := reg[name]; !ok {
			t.Errorf("README lists %s, which NewMetrics does not register", name)
		}
	}
}
