package whatif

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/report"
)

// report.html is drawn from a *Results alone (WriteReport), so a sweep and
// a merge of shards give the same page. Every number taken from the
// results carries a hook the browser test reads: data-point (the point's
// index), data-metric (the metric's name) and data-stat (p5, p50 or p95),
// or data-field for the sweep's own numbers. Numbers are shown by unit
// (show): seconds as 1h02m05s rounded to the second, percentages with one
// decimal and a %, millicores as cores with two decimals, anything else
// as a whole number or with one decimal.

// tableMetrics are the table's columns, when some point measured them.
var tableMetrics = []Metric{Duration, MinSchedCPUPct, MeanSchedCPUPct, MinSchedMemPct, MeanSchedMemPct, PeakUnavailable, PDBRefusals, PeakPending,
	PendingPodMinutes, KarpenterLaunched, KarpenterReaped, KarpenterReplaced, FailedNodes, Violations, ControllerWrites}

// columnLabels are the table's headers (the metric's name is their
// tooltip).
var columnLabels = map[Metric]string{
	Duration: "rollout duration", MinSchedCPUPct: "min schedulable CPU", MeanSchedCPUPct: "mean schedulable CPU",
	MinSchedMemPct: "min schedulable memory", MeanSchedMemPct: "mean schedulable memory",
	PeakUnavailable: "peak nodes unavailable", PDBRefusals: "PDB-refused evictions", PeakPending: "peak pending pods",
	PendingPodMinutes: "pending pod-minutes", KarpenterLaunched: "Karpenter launched", KarpenterReaped: "Karpenter reaped",
	KarpenterReplaced: "Karpenter replaced", FailedNodes: "failed nodes", Violations: "violations", ControllerWrites: "controller writes",
}

// seriesColors colour the lines of a chart, one per value of the other
// axes.
var seriesColors = []string{"#2f6db5", "#e07b39", "#4caf6e", "#c45ab3", "#d64545", "#7a4b2a", "#4a9fb5", "#8a8a2a"}

// WriteReport writes report.html of res into dir (which must exist).
func WriteReport(dir string, res *Results) error {
	page, err := Report(res)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.html"), page, 0o644); err != nil {
		return fmt.Errorf("writing report.html: %w", err)
	}
	return nil
}

type reportPage struct {
	R          *Results
	Title      string
	LastSeed   uint64
	Columns    []column
	Rows       []row
	Charts     []template.HTML
	Legend     []swatch
	LegendAxis string
	Phases     []swatch
	Timelines  []timelineView
	Violations []violationRow
}

type column struct{ Name, Label, Unit string }

type row struct {
	Index  int
	Values []string
	Cells  []cell
}

// labelPart is one axis=value of a point's label; the value carries the
// point's hook.
type labelPart struct {
	Index, K    int
	Name, Value string
}

type cell struct {
	Metric         string
	Has            bool
	P50, P5, P95   string
	rawP50, rawP95 float64
}

type swatch struct{ Name, Color string }

type timelineView struct {
	Index    int
	Label    []labelPart
	Seed     uint64
	Duration string
	HasDur   bool
	Chart    template.HTML
}

type violationRow struct {
	Index int
	K     int
	Label []labelPart
	V     RunViolation
	At    string
}

// Report renders report.html of res.
func Report(res *Results) ([]byte, error) {
	p := reportPage{R: res, Title: "bootroll whatif: " + res.Scenario, LastSeed: res.FirstSeed + uint64(max(res.Seeds, 1)) - 1}
	info := metricInfo(res)
	var cols []Metric
	for _, m := range tableMetrics {
		for i := range res.Points {
			if _, ok := res.Points[i].Get(m); ok {
				cols = append(cols, m)
				break
			}
		}
	}
	for _, m := range cols {
		p.Columns = append(p.Columns, column{Metrics[m].Name, columnLabels[m], info[Metrics[m].Name].Unit})
	}
	for i := range res.Points {
		pt := &res.Points[i]
		r := row{Index: i, Values: pt.Values}
		for _, m := range cols {
			s, ok := pt.Get(m)
			unit := info[Metrics[m].Name].Unit
			r.Cells = append(r.Cells, cell{Metric: Metrics[m].Name, Has: ok, P50: show(unit, s.P50), P5: show(unit, s.P5), P95: show(unit, s.P95)})
		}
		p.Rows = append(p.Rows, r)
		for k, v := range pt.Violations {
			p.Violations = append(p.Violations, violationRow{Index: i, K: k, Label: labelParts(res, i), V: v, At: show("s", v.AtSeconds)})
		}
		if t := pt.MedianRun; t != nil {
			tv := timelineView{Index: i, Label: labelParts(res, i), Seed: t.Seed, Chart: template.HTML(timelineChart(t))}
			if t.RolloutDurationSeconds != nil {
				tv.HasDur, tv.Duration = true, show("s", *t.RolloutDurationSeconds)
			}
			p.Timelines = append(p.Timelines, tv)
		}
	}
	seen := map[string]bool{}
	for _, pt := range res.Points {
		if t := pt.MedianRun; t != nil {
			for _, ph := range t.Phases {
				seen[ph] = true
			}
		}
	}
	for _, ph := range []string{"Pending", "Staging", "Staged", "Draining", "Rebooting", "Verifying", "Updated", "Degraded", "Failed", "RolledBack"} {
		if seen[ph] {
			p.Phases = append(p.Phases, swatch{ph, report.PhaseColors[v1alpha1.NodePhase(ph)]})
		}
	}
	for _, mi := range res.Metrics {
		if svg, ok := metricChart(res, mi); ok {
			p.Charts = append(p.Charts, template.HTML(svg))
		}
	}
	if len(res.Axes) > 1 {
		names := seriesNames(res)
		for j, n := range names {
			p.Legend = append(p.Legend, swatch{n, seriesColors[j%len(seriesColors)]})
		}
		var paths []string
		for _, a := range res.Axes[1:] {
			paths = append(paths, a.Path)
		}
		p.LegendAxis = strings.Join(paths, " / ")
	}
	var b bytes.Buffer
	if err := reportTemplate.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("rendering report.html: %w", err)
	}
	return b.Bytes(), nil
}

// metricInfo indexes the results' metric descriptions by name (results
// read back from results.json carry their own).
func metricInfo(res *Results) map[string]MetricInfo {
	m := map[string]MetricInfo{}
	for _, mi := range Metrics {
		m[mi.Name] = mi
	}
	for _, mi := range res.Metrics {
		m[mi.Name] = mi
	}
	return m
}

// show prints a value of a unit for people; see the rules at the top.
func show(unit string, v float64) string {
	switch unit {
	case "s":
		return clock(v)
	case "%":
		return strconv.FormatFloat(v, 'f', 1, 64) + "%"
	case "millicores":
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + " cores"
	}
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// clock prints seconds rounded to the second as 1h02m05s, 12m30s or 45s
// (time.ParseDuration reads it back).
func clock(s float64) string {
	t := int64(math.Round(s))
	switch {
	case t >= 3600:
		return fmt.Sprintf("%dh%02dm%02ds", t/3600, t%3600/60, t%60)
	case t >= 60:
		return fmt.Sprintf("%dm%02ds", t/60, t%60)
	default:
		return fmt.Sprintf("%ds", t)
	}
}

// pointLabel names a point by its axes' values.
func pointLabel(res *Results, i int) string {
	parts := make([]string, len(res.Points[i].Values))
	for k, v := range res.Points[i].Values {
		parts[k] = axisLabel(res.Axes[k].Path) + "=" + v
	}
	return strings.Join(parts, ", ")
}

func labelParts(res *Results, i int) []labelPart {
	parts := make([]labelPart, len(res.Points[i].Values))
	for k, v := range res.Points[i].Values {
		parts[k] = labelPart{Index: i, K: k, Name: axisLabel(res.Axes[k].Path), Value: v}
	}
	return parts
}

// stride is the number of points per value of the first axis: the
// product of the other axes' lengths (the last axis varies fastest).
func stride(res *Results) int {
	n := 1
	for _, a := range res.Axes[1:] {
		n *= len(a.Values)
	}
	return n
}

// seriesNames name the lines of a chart: the other axes' values of the
// points j = 0..stride-1.
func seriesNames(res *Results) []string {
	n := stride(res)
	names := make([]string, n)
	for j := range n {
		if j < len(res.Points) {
			names[j] = strings.Join(res.Points[j].Values[1:], " / ")
		}
	}
	return names
}

// chart geometry, in SVG user units.
const (
	mW, mH                     = 600.0, 320.0
	mPadL, mPadR, mPadT, mPadB = 70.0, 16.0, 28.0, 52.0
	mPlotW, mPlotH             = mW - mPadL - mPadR, mH - mPadT - mPadB
)

// axisScale turns a unit into the y axis's unit and the factor values are
// divided by: long durations in minutes, millicores in cores, memory past
// 10 GiB in GiB and past 10 TiB in TiB (a 200-node pool's memory is
// millions of MiB, a tick label wider than the margin).
func axisScale(unit string, top float64) (string, float64) {
	switch {
	case unit == "s" && top >= 180:
		return "min", 60
	case unit == "millicores":
		return "cores", 1000
	case unit == "MiB" && top >= 10<<20:
		return "TiB", 1 << 20
	case unit == "MiB" && top >= 10<<10:
		return "GiB", 1 << 10
	}
	return unit, 1
}

// metricChart draws a metric against the first axis's values: per value
// of the other axes, a p5–p95 band and the p50 line. ok is false when no
// point measured the metric.
func metricChart(res *Results, mi MetricInfo) (string, bool) {
	if len(res.Axes) == 0 {
		return "", false
	}
	nx := len(res.Axes[0].Values)
	ns := stride(res)
	top, any := 0.0, false
	for i := range res.Points {
		for _, s := range res.Points[i].Metrics {
			if s.Metric == mi.Name {
				top, any = math.Max(top, s.P95), true
			}
		}
	}
	if !any {
		return "", false
	}
	yUnit, div := axisScale(mi.Unit, top)
	topN := niceTop(top / div)
	if mi.Unit == "%" && top <= 100 {
		topN = 100
	}
	xOf := func(i int) float64 { return mPadL + mPlotW*(float64(i)+0.5)/float64(nx) }
	yOf := func(v float64) float64 { return mPadT + mPlotH - mPlotH*(v/div)/topN }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" role="img" aria-label="%s against %s" data-chart="%s">`,
		mW, mH, esc(mi.Name), esc(res.Axes[0].Path), esc(mi.Name))
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="#fafafa" stroke="#bbb"/>`, mPadL, mPadT, mPlotW, mPlotH)
	for i := 0; i <= 4; i++ {
		v := topN * float64(i) / 4
		y := mPadT + mPlotH - mPlotH*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#e4e4e4"/>`, mPadL, y, mPadL+mPlotW, y)
		fmt.Fprintf(&b, `<text class="tick" x="%g" y="%.1f" font-size="11" text-anchor="end" fill="#555">%s</text>`, mPadL-6, y+4, tickLabel(v))
	}
	for i, v := range res.Axes[0].Values {
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%g" font-size="11" text-anchor="middle" fill="#555">%s</text>`, xOf(i), mPadT+mPlotH+16, esc(v))
	}
	// Axis titles: x below the ticks, y turned along the axis.
	fmt.Fprintf(&b, `<text class="name" x="%g" y="%g" font-size="12" text-anchor="middle" fill="#333">%s</text>`, mPadL+mPlotW/2, mH-10, esc(res.Axes[0].Path))
	fmt.Fprintf(&b, `<text class="name" x="%g" y="%g" font-size="12" text-anchor="middle" fill="#333" transform="rotate(-90 %g %g)">%s (%s)</text>`,
		16.0, mPadT+mPlotH/2, 16.0, mPadT+mPlotH/2, esc(mi.Name), esc(yUnit))
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="13" font-weight="bold" fill="#222">%s</text>`, mPadL, mPadT-10, esc(mi.Name))
	for j := range ns {
		color := seriesColors[j%len(seriesColors)]
		// Runs of consecutive x with the metric measured: a band and a
		// line each.
		var seg []int
		flush := func() {
			if len(seg) == 0 {
				return
			}
			var band, line strings.Builder
			for k, i := range seg {
				s, _ := res.Points[i*ns+j].getName(mi.Name)
				fmt.Fprintf(&band, "%s%.1f,%.1f", pick(k == 0, "M", "L"), xOf(i), yOf(s.P95))
				fmt.Fprintf(&line, "%s%.1f,%.1f", pick(k == 0, "M", "L"), xOf(i), yOf(s.P50))
			}
			for k := len(seg) - 1; k >= 0; k-- {
				s, _ := res.Points[seg[k]*ns+j].getName(mi.Name)
				fmt.Fprintf(&band, "L%.1f,%.1f", xOf(seg[k]), yOf(s.P5))
			}
			band.WriteString("Z")
			fmt.Fprintf(&b, `<path class="band" d="%s" fill="%s" fill-opacity="0.18" stroke="%s" stroke-opacity="0.4" stroke-width="0.8"/>`, band.String(), color, color)
			if len(seg) > 1 {
				fmt.Fprintf(&b, `<path class="p50" d="%s" fill="none" stroke="%s" stroke-width="2"/>`, line.String(), color)
			}
			seg = seg[:0]
		}
		for i := range nx {
			pi := i*ns + j
			if pi >= len(res.Points) {
				break
			}
			if _, ok := res.Points[pi].getName(mi.Name); ok {
				seg = append(seg, i)
			} else {
				flush()
			}
		}
		flush()
		for i := range nx {
			pi := i*ns + j
			if pi >= len(res.Points) {
				break
			}
			s, ok := res.Points[pi].getName(mi.Name)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" data-point="%d" data-metric="%s" data-stat="p50 p5 p95"><title>%s: p50 %s, p5–p95 %s – %s</title></circle>`,
				xOf(i), yOf(s.P50), color, pi, esc(mi.Name), esc(pointLabel(res, pi)), show(mi.Unit, s.P50), show(mi.Unit, s.P5), show(mi.Unit, s.P95))
		}
	}
	b.WriteString(`</svg>`)
	return b.String(), true
}

func (p *PointStats) getName(name string) (Stats, bool) {
	for _, s := range p.Metrics {
		if s.Metric == name {
			return s, true
		}
	}
	return Stats{}, false
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// timeline geometry.
const (
	tW, tH                     = 960.0, 170.0
	tPadL, tPadR, tPadT, tPadB = 56.0, 16.0, 12.0, 40.0
	tPlotW, tPlotH             = tW - tPadL - tPadR, tH - tPadT - tPadB
)

// timelineChart draws a median run's nodes per phase as stacked step
// areas, with the nodes in a reboot slot as a dark step line (sim/report's
// phase chart, small).
func timelineChart(t *Timeline) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %g %g" role="img" aria-label="nodes per phase over time, seed %d">`, tW, tH, t.Seed)
	end := math.Max(t.EndSeconds, 1)
	xOf := func(s float64) float64 { return tPadL + tPlotW*s/end }
	top := 1
	for _, s := range t.Samples {
		n := 0
		for _, c := range s.Phases {
			n += c
		}
		top = max(top, n)
	}
	topN := niceTop(float64(top))
	yOf := func(v float64) float64 { return tPadT + tPlotH - tPlotH*v/topN }
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="#fafafa" stroke="#bbb"/>`, tPadL, tPadT, tPlotW, tPlotH)
	step := report.TimeStep(time.Duration(end * float64(time.Second))).Seconds()
	for s := 0.0; s <= end; s += step {
		x := xOf(s)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#e4e4e4"/>`, x, tPadT, x, tPadT+tPlotH)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%g" font-size="11" text-anchor="middle" fill="#555">%s</text>`, x, tPadT+tPlotH+14, tickClock(s))
	}
	for i := 0; i <= 2; i++ {
		v := topN * float64(i) / 2
		y := yOf(v)
		fmt.Fprintf(&b, `<text class="tick" x="%g" y="%.1f" font-size="11" text-anchor="end" fill="#555">%s</text>`, tPadL-6, y+4, tickLabel(v))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11" text-anchor="middle" fill="#333">virtual time since the start</text>`, tPadL+tPlotW/2, tH-6)
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11" text-anchor="middle" fill="#333" transform="rotate(-90 %g %g)">nodes</text>`, 14.0, tPadT+tPlotH/2, 14.0, tPadT+tPlotH/2)
	n := len(t.Samples)
	if n > 0 {
		cum := make([][]float64, n)
		for i, s := range t.Samples {
			cum[i] = make([]float64, len(s.Phases)+1)
			for k, c := range s.Phases {
				cum[i][k+1] = cum[i][k] + float64(c)
			}
		}
		for k, ph := range t.Phases {
			var d strings.Builder
			fmt.Fprintf(&d, "M%.1f,%.1f", xOf(t.Samples[0].AtSeconds), yOf(cum[0][k+1]))
			for i := 1; i < n; i++ {
				fmt.Fprintf(&d, "H%.1fV%.1f", xOf(t.Samples[i].AtSeconds), yOf(cum[i][k+1]))
			}
			fmt.Fprintf(&d, "H%.1fV%.1f", xOf(end), yOf(cum[n-1][k]))
			for i := n - 1; i >= 1; i-- {
				fmt.Fprintf(&d, "H%.1fV%.1f", xOf(t.Samples[i].AtSeconds), yOf(cum[i-1][k]))
			}
			fmt.Fprintf(&d, "H%.1fZ", xOf(t.Samples[0].AtSeconds))
			fmt.Fprintf(&b, `<path d="%s" fill="%s" stroke="none"><title>%s</title></path>`, d.String(), report.PhaseColors[v1alpha1.NodePhase(ph)], esc(ph))
		}
		var d strings.Builder
		fmt.Fprintf(&d, "M%.1f,%.1f", xOf(t.Samples[0].AtSeconds), yOf(float64(t.Samples[0].InSlot)))
		for i := 1; i < n; i++ {
			fmt.Fprintf(&d, "H%.1fV%.1f", xOf(t.Samples[i].AtSeconds), yOf(float64(t.Samples[i].InSlot)))
		}
		fmt.Fprintf(&d, "H%.1f", xOf(end))
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="#222" stroke-width="1.2"><title>nodes in a reboot slot</title></path>`, d.String())
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// tickClock prints a tick's time: 0, 45s, 5m, 1h30m.
func tickClock(s float64) string {
	t := int64(math.Round(s))
	switch {
	case t == 0:
		return "0"
	case t%3600 == 0:
		return fmt.Sprintf("%dh", t/3600)
	case t >= 3600:
		return fmt.Sprintf("%dh%02dm", t/3600, t%3600/60)
	case t%60 == 0:
		return fmt.Sprintf("%dm", t/60)
	case t >= 60:
		return fmt.Sprintf("%dm%02ds", t/60, t%60)
	}
	return fmt.Sprintf("%ds", t)
}

// tickLabel prints a value axis's tick in at most about five characters,
// so that it stays inside the chart's left margin: 950, 12.5k, 3M.
func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimFloat(v/1e6) + "M"
	case a >= 1e4:
		return trimFloat(v/1e3) + "k"
	}
	return trimFloat(v)
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// niceTop returns the top of a value axis with four ticks: four times a
// step of 1, 2, 2.5 or 5 times a power of ten, at least v (and above 0).
func niceTop(v float64) float64 {
	if v <= 0 {
		return 1
	}
	step := v / 4
	p := math.Pow(10, math.Floor(math.Log10(step)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= step*(1-1e-9) {
			return 4 * m * p
		}
	}
	return 40 * p
}
