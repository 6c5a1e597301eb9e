package report

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/twin"
)

// PhaseColors are the fills of the phases in a timeline, by phase (the
// what-if report uses them too).
var PhaseColors = map[v1alpha1.NodePhase]string{
	v1alpha1.PhasePending:    "#c9ced6",
	v1alpha1.PhaseStaging:    "#8fb8de",
	v1alpha1.PhaseStaged:     "#4a7fb5",
	v1alpha1.PhaseDraining:   "#f0b64c",
	v1alpha1.PhaseRebooting:  "#e07b39",
	v1alpha1.PhaseVerifying:  "#c45ab3",
	v1alpha1.PhaseUpdated:    "#4caf6e",
	v1alpha1.PhaseDegraded:   "#b5a642",
	v1alpha1.PhaseFailed:     "#d64545",
	v1alpha1.PhaseRolledBack: "#7a4b2a",
}

// maxPoints bounds the samples drawn per chart; longer timelines are
// thinned.
const maxPoints = 1500

// chart geometry, in SVG user units.
const (
	chartW, chartH         = 960.0, 260.0
	padL, padR, padT, padB = 56.0, 16.0, 18.0, 40.0
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	smallH                 = 180.0
	smallPlotH             = smallH - padT - padB
)

type page struct {
	S          Summary
	Phases     []legend
	PhaseChart template.HTML
	CPUChart   template.HTML
	MemChart   template.HTML
	PendChart  template.HTML
	PDBChart   template.HTML
	KarpChart  template.HTML
	PoolCharts []poolChart
	Markers    []marker
	Title      string
}

type poolChart struct {
	Name  string
	Chart template.HTML
}

// marker is a timed event as the page lists it.
type marker struct {
	At, What string
}

// series is one line of a chart.
type series struct {
	label, color string
	dashed       bool
	val          func(twin.Sample) float64
}

type legend struct {
	Name, Color string
}

// HTML renders report.html.
func HTML(res *twin.Result, s Summary) ([]byte, error) {
	p := page{S: s, Title: fmt.Sprintf("bootroll twin: %s (seed %d)", s.Scenario, s.Seed)}
	for _, ph := range res.Phases {
		p.Phases = append(p.Phases, legend{string(ph), PhaseColors[ph]})
	}
	samples := thin(res.Timeline)
	end := res.End
	for _, m := range res.Markers {
		p.Markers = append(p.Markers, marker{At: clock(res.Start, m.At) + " (" + human(m.At) + " in)", What: m.What})
	}
	p.PhaseChart = template.HTML(phaseChart(res, samples, end))
	p.CPUChart = template.HTML(lineChart(res, samples, "CPU (cores)", "", []series{
		{label: "schedulable", color: "#2f6db5", val: func(s twin.Sample) float64 { return float64(s.SchedulableCPU) / 1000 }},
		{label: "requested by workloads", color: "#c45ab3", dashed: true, val: func(s twin.Sample) float64 { return float64(s.DemandCPU) / 1000 }},
	}))
	p.MemChart = template.HTML(lineChart(res, samples, "memory (GiB)", "", []series{
		{label: "schedulable", color: "#2f6db5", val: func(s twin.Sample) float64 { return float64(s.SchedulableMem) / (1 << 30) }},
		{label: "requested by workloads", color: "#c45ab3", dashed: true, val: func(s twin.Sample) float64 { return float64(s.DemandMem) / (1 << 30) }},
	}))
	p.PendChart = template.HTML(lineChart(res, samples, "pods", "", []series{
		{label: "workload pods pending", color: "#d64545", val: func(s twin.Sample) float64 { return float64(s.Pending) }},
	}))
	p.PDBChart = template.HTML(lineChart(res, samples, "evictions (total so far)", "", []series{
		{label: "refused by a PodDisruptionBudget", color: "#b5a642", val: func(s twin.Sample) float64 { return float64(s.EvictionsRefused) }},
	}))
	if res.Karpenter != nil {
		p.KarpChart = template.HTML(lineChart(res, samples, "nodes (total so far)", "", []series{
			{label: "launched by Karpenter", color: "#4caf6e", val: func(s twin.Sample) float64 { return float64(s.KarpenterLaunched) }},
			{label: "terminated by Karpenter", color: "#7a4b2a", dashed: true, val: func(s twin.Sample) float64 { return float64(s.KarpenterTerminated) }},
		}))
	}
	for _, name := range poolNames(samples) {
		at := func(s twin.Sample) *twin.PoolSample {
			for i := range s.Pools {
				if s.Pools[i].Name == name {
					return &s.Pools[i]
				}
			}
			return nil
		}
		p.PoolCharts = append(p.PoolCharts, poolChart{Name: name, Chart: template.HTML(lineChart(res, samples, "nodes", name, []series{
			{label: "unavailable because of bootroll", color: "#e07b39", val: func(s twin.Sample) float64 {
				if ps := at(s); ps != nil {
					return float64(ps.Unavailable)
				}
				return 0
			}},
			{label: "maxUnavailable", color: "#555", dashed: true, val: func(s twin.Sample) float64 {
				if ps := at(s); ps != nil && ps.MaxUnavailable >= 0 {
					return float64(ps.MaxUnavailable)
				}
				return 0
			}},
		}))})
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, p); err != nil {
		return nil, fmt.Errorf("rendering report.html: %w", err)
	}
	return b.Bytes(), nil
}

// thin keeps at most maxPoints samples, always the first and the last.
func thin(in []twin.Sample) []twin.Sample {
	if len(in) <= maxPoints {
		return in
	}
	step := float64(len(in)-1) / float64(maxPoints-1)
	out := make([]twin.Sample, 0, maxPoints)
	for i := range maxPoints {
		out = append(out, in[int(math.Round(float64(i)*step))])
	}
	return out
}

func xOf(at, end time.Duration) float64 {
	if end <= 0 {
		return padL
	}
	return padL + plotW*float64(at)/float64(end)
}

// phaseChart draws nodes per phase as stacked step areas.
func phaseChart(res *twin.Result, samples []twin.Sample, end time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" role="img" aria-label="nodes per phase over time">`, chartW, chartH)
	top := 1
	for _, s := range samples {
		sum := 0
		for _, n := range s.Phases {
			sum += n
		}
		top = max(top, sum)
	}
	topN := niceTop(float64(top))
	yOf := func(v float64) float64 { return padT + plotH - plotH*v/topN }
	axes(&b, res.Start, end, topN, plotH, "nodes")
	haltBands(&b, samples, end, plotH, "")
	if len(samples) > 0 {
		cum := make([][]float64, len(samples))
		for i, s := range samples {
			cum[i] = make([]float64, len(s.Phases)+1)
			for k, n := range s.Phases {
				cum[i][k+1] = cum[i][k] + float64(n)
			}
		}
		for k, ph := range res.Phases {
			any := false
			for i := range samples {
				if samples[i].Phases[k] > 0 {
					any = true
					break
				}
			}
			if !any {
				continue
			}
			var d strings.Builder
			// Upper edge left to right as steps, lower edge back.
			fmt.Fprintf(&d, "M%.1f,%.1f", xOf(samples[0].At, end), yOf(cum[0][k+1]))
			for i := 1; i < len(samples); i++ {
				fmt.Fprintf(&d, "H%.1fV%.1f", xOf(samples[i].At, end), yOf(cum[i][k+1]))
			}
			fmt.Fprintf(&d, "H%.1fV%.1f", xOf(end, end), yOf(cum[len(samples)-1][k]))
			for i := len(samples) - 1; i >= 1; i-- {
				fmt.Fprintf(&d, "H%.1fV%.1f", xOf(samples[i].At, end), yOf(cum[i-1][k]))
			}
			fmt.Fprintf(&d, "H%.1fZ", xOf(samples[0].At, end))
			fmt.Fprintf(&b, `<path d="%s" fill="%s" stroke="none"><title>%s</title></path>`, d.String(), PhaseColors[ph], ph)
		}
	}
	eventMarks(&b, res, end, plotH)
	violationMarks(&b, res, end, plotH)
	b.WriteString(`</svg>`)
	return b.String()
}

// lineChart draws values over time as step lines, with the halts (of pool,
// or of any pool when pool is ""), the scenario's timed events and the
// violations.
func lineChart(res *twin.Result, samples []twin.Sample, yTitle, pool string, ss []series) string {
	end := res.End
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %g %g" role="img" aria-label="%s over time">`, chartW, smallH, template.HTMLEscapeString(yTitle))
	top := 1.0
	for _, s := range samples {
		for _, sr := range ss {
			top = math.Max(top, sr.val(s))
		}
	}
	topN := niceTop(top)
	axes(&b, res.Start, end, topN, smallPlotH, yTitle)
	haltBands(&b, samples, end, smallPlotH, pool)
	if len(samples) > 0 {
		yOf := func(v float64) float64 { return padT + smallPlotH - smallPlotH*v/topN }
		for _, sr := range ss {
			var d strings.Builder
			fmt.Fprintf(&d, "M%.1f,%.1f", xOf(samples[0].At, end), yOf(sr.val(samples[0])))
			for i := 1; i < len(samples); i++ {
				fmt.Fprintf(&d, "H%.1fV%.1f", xOf(samples[i].At, end), yOf(sr.val(samples[i])))
			}
			fmt.Fprintf(&d, "H%.1f", xOf(end, end))
			dash := ""
			if sr.dashed {
				dash = ` stroke-dasharray="6,3"`
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.5"%s><title>%s</title></path>`, d.String(), sr.color, dash, template.HTMLEscapeString(sr.label))
		}
	}
	// The legend, top right.
	x := padL + plotW - 8
	for i := len(ss) - 1; i >= 0; i-- {
		sr := ss[i]
		fmt.Fprintf(&b, `<text x="%.1f" y="%g" font-size="11" text-anchor="end" fill="%s">%s</text>`, x, padT-5, sr.color, template.HTMLEscapeString(sr.label))
		x -= 7*float64(len(sr.label)) + 18
	}
	eventMarks(&b, res, end, smallPlotH)
	violationMarks(&b, res, end, smallPlotH)
	b.WriteString(`</svg>`)
	return b.String()
}

// haltBands shades the spans in which pool (any pool when "") was halted.
func haltBands(b *strings.Builder, samples []twin.Sample, end time.Duration, h float64, pool string) {
	halted := func(s twin.Sample) bool {
		for _, p := range s.Pools {
			if p.Halted && (pool == "" || p.Name == pool) {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(samples); i++ {
		if !halted(samples[i]) {
			continue
		}
		j := i
		for j+1 < len(samples) && halted(samples[j+1]) {
			j++
		}
		to := end
		if j+1 < len(samples) {
			to = samples[j+1].At
		}
		x0, x1 := xOf(samples[i].At, end), xOf(to, end)
		fmt.Fprintf(b, `<rect x="%.1f" y="%g" width="%.1f" height="%g" fill="#d64545" fill-opacity="0.12"><title>halted from +%s to +%s</title></rect>`,
			x0, padT, math.Max(x1-x0, 1), h, human(samples[i].At), human(to))
		i = j
	}
}

// eventMarks draws a grey line with a number at each timed event of the
// scenario (the page lists them by number).
func eventMarks(b *strings.Builder, res *twin.Result, end time.Duration, h float64) {
	for i, m := range res.Markers {
		if m.At > end {
			continue
		}
		x := xOf(m.At, end)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#666" stroke-width="1" stroke-dasharray="1,2"><title>%s at +%s</title></line>`,
			x, padT, x, padT+h, template.HTMLEscapeString(m.What), human(m.At))
		fmt.Fprintf(b, `<text x="%.1f" y="%g" font-size="10" text-anchor="middle" fill="#666">%d</text>`, x, padT+10, i+1)
	}
}

// poolNames lists the pools the samples name, in the order first seen.
func poolNames(samples []twin.Sample) []string {
	var out []string
	for _, s := range samples {
		for _, p := range s.Pools {
			if !slices.Contains(out, p.Name) {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// violationMarks draws a red line at each violation.
func violationMarks(b *strings.Builder, res *twin.Result, end time.Duration, h float64) {
	for _, v := range res.Violations {
		x := xOf(min(v.At, end), end)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#d00" stroke-width="1" stroke-dasharray="3,2"><title>%s at %s</title></line>`,
			x, padT, x, padT+h, template.HTMLEscapeString(v.Invariant), v.At)
	}
}

// axes draws the frame, time-of-day ticks along x (start is the zero of
// the timeline) with the axis title, and value ticks along y.
func axes(b *strings.Builder, start time.Time, end time.Duration, top, h float64, label string) {
	fmt.Fprintf(b, `<rect x="%g" y="%g" width="%g" height="%g" fill="#fafafa" stroke="#bbb"/>`, padL, padT, plotW, h)
	step := TimeStep(end)
	for t := time.Duration(0); t <= end && step > 0; t += step {
		x := xOf(t, end)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#e4e4e4"/>`, x, padT, x, padT+h)
		fmt.Fprintf(b, `<text x="%.1f" y="%g" font-size="11" text-anchor="middle" fill="#555">%s</text>`, x, padT+h+14, tick(start, t, step))
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11" text-anchor="middle" fill="#333">time of day (UTC) from %s; ticks every %s</text>`,
		padL+plotW/2, padT+h+32, start.UTC().Format("2006-01-02 15:04:05"), human(step))
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := padT + h - h*float64(i)/4
		fmt.Fprintf(b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#e4e4e4"/>`, padL, y, padL+plotW, y)
		fmt.Fprintf(b, `<text x="%g" y="%.1f" font-size="11" text-anchor="end" fill="#555">%s</text>`, padL-6, y+4, trimFloat(v))
	}
	fmt.Fprintf(b, `<text x="%g" y="%g" font-size="11" fill="#333">%s</text>`, padL, padT-2, template.HTMLEscapeString(label))
}

// TimeStep picks a tick spacing giving at most ten ticks over end.
func TimeStep(end time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
		5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour} {
		if end/s <= 10 {
			return s
		}
	}
	return end / 10
}

// tick is the time of day of start+t, with seconds when the ticks are
// less than a minute apart.
func tick(start time.Time, t, step time.Duration) string {
	if step < time.Minute {
		return start.Add(t).UTC().Format("15:04:05")
	}
	return start.Add(t).UTC().Format("15:04")
}

// clock is the time of day of start+t, to the second.
func clock(start time.Time, t time.Duration) string {
	return start.Add(t).UTC().Format("15:04:05")
}

// human rounds a duration for people: "45s", "23m 8s", "2h 5m".
func human(d time.Duration) string {
	switch d = d.Round(time.Second); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// niceTop returns the top of a value axis with four ticks: four times a
// whole step of 1, 2, 3 or 5 times a power of ten, at least v.
func niceTop(v float64) float64 {
	step := math.Max(1, math.Ceil(v/4))
	p := math.Pow(10, math.Floor(math.Log10(step)))
	for _, m := range []float64{1, 2, 3, 5, 10} {
		if m*p >= step {
			return 4 * m * p
		}
	}
	return 40 * p
}

func secs(f *float64) string {
	if f == nil {
		return "—"
	}
	return human(time.Duration(*f * float64(time.Second)))
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"secs":  secs,
	"dur":   func(f float64) string { return secs(&f) },
	"upper": strings.ToUpper,
	"inc":   func(i int) int { return i + 1 },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1000px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.pass { color: #1a7f37; font-weight: bold; } .fail { color: #c62828; font-weight: bold; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -2px; }
svg { width: 100%; height: auto; }
code { font-size: 12px; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p>Verdict: <span class="{{.S.Verdict}}">{{upper .S.Verdict}}</span>
 · virtual {{dur .S.VirtualSeconds}} (limit {{dur .S.LimitSeconds}})
 · {{.S.Events}} events · wall {{printf "%.2f" .S.WallSeconds}}s
 · converged {{if .S.Converged}}at {{secs .S.ConvergedAtSeconds}}{{else}}no{{end}}</p>
{{with .S.File}}<p><code>{{.}}</code> · seed {{$.S.Seed}}</p>{{end}}
<p>Overrides: {{if .S.Overrides}}{{range .S.Overrides}}<code>--set {{.}}</code> {{end}}{{else}}none (the file as written){{end}}</p>
<p>Evictions refused by PodDisruptionBudgets: {{.S.EvictionsRefused}} (drains blocked {{dur .S.PDBBlockedDrainSeconds}} in all) · most pods pending at once: {{.S.PeakPending}}{{with .S.Karpenter}} · Karpenter: {{.Launched}} launched, {{.Replaced}} replaced, {{.Deleted}} deleted, {{.Terminated}} terminated{{end}}</p>
<p>Every chart: time of day along the bottom (UTC); red bands are halts; dotted grey lines are the scenario's timed events (numbered as in the list below); dashed red lines are violations.</p>

<h2>Nodes per phase</h2>
<div class="legend">{{range .Phases}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}<span><i style="background:#d00"></i>violation</span></div>
{{.PhaseChart}}
<h2>CPU: schedulable capacity and what workloads request</h2>
{{.CPUChart}}
<h2>Memory: schedulable capacity and what workloads request</h2>
{{.MemChart}}
<h2>Pending pods</h2>
{{.PendChart}}
<h2>Evictions refused by PodDisruptionBudgets</h2>
{{.PDBChart}}
{{with .KarpChart}}<h2>Karpenter: nodes launched and terminated</h2>
{{.}}{{end}}
{{range .PoolCharts}}<h2>Pool {{.Name}}: nodes unavailable and maxUnavailable</h2>
{{.Chart}}
{{end}}
<h2>Timed events</h2>
{{if .Markers}}<table>
<tr><th>#</th><th>at</th><th>event</th></tr>
{{range $i, $m := .Markers}}<tr><td>{{inc $i}}</td><td>{{$m.At}}</td><td>{{$m.What}}</td></tr>
{{end}}</table>{{else}}<p>None.</p>{{end}}

<h2>Violations</h2>
{{if .S.Violations}}<table>
<tr><th>invariant</th><th>at</th><th>objects</th><th>message</th></tr>
{{range .S.Violations}}<tr><td>{{.Invariant}}</td><td>{{.At}}</td><td>{{range .Objects}}{{.}}<br>{{end}}</td><td>{{.Message}}</td></tr>
{{end}}</table>{{else}}<p>None: every invariant and expectation held.</p>{{end}}

<h2>Pools</h2>
<table>
<tr><th>pool</th><th>nodes</th><th>updated</th><th>failed</th><th>UpToDate</th><th>Halted</th><th>summary</th><th>target</th></tr>
{{range .S.Pools}}<tr><td>{{.Name}}</td><td>{{.Nodes}}</td><td>{{.Updated}}</td><td>{{.Failed}}</td><td>{{.UpToDate}}</td><td>{{.Halted}}{{with .HaltedReason}} ({{.}}){{end}}</td><td>{{.Summary}}</td><td><code>{{.TargetImage}}</code></td></tr>
{{end}}</table>

<h2>Timings</h2>
<table>
<tr><th>time to first slot</th><td>{{secs .S.Timings.TimeToFirstSlot}}</td></tr>
<tr><th>rollout duration</th><td>{{secs .S.Timings.RolloutDuration}}</td></tr>
<tr><th>node updates</th><td>{{.S.Timings.NodeUpdate.Count}}</td></tr>
<tr><th>node update p50 / p90 / max</th><td>{{dur .S.Timings.NodeUpdate.P50}} / {{dur .S.Timings.NodeUpdate.P90}} / {{dur .S.Timings.NodeUpdate.Max}}</td></tr>
<tr><th>reboots</th><td>{{.S.Reboots}}</td></tr>
</table>
</body>
</html>
`))
