package whatif

import "html/template"

// reportTemplate is report.html: no scripts, no external resources, the
// charts inline SVG.
var reportTemplate = template.Must(template.New("whatif").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1240px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; } h3 { font-size: 13px; margin: 14px 0 2px; font-weight: normal; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #ddd; padding: 3px 6px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; text-align: center; font-weight: 600; font-size: 11px; } td.v { text-align: left; font-weight: bold; }
td small { color: #666; white-space: nowrap; }
.charts { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 12px 20px; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -2px; }
figure { margin: 0; } svg { width: 100%; height: auto; display: block; }
code { font-size: 12px; } dl { font-size: 13px; } dt { font-weight: bold; float: left; width: 9em; } dd { margin-left: 10em; }
</style>
</head>
<body>
<h1 class="name">{{.Title}}</h1>
<dl>
<dt>scenario</dt><dd><code>{{.R.File}}</code> (<span class="name">{{.R.Scenario}}</span>)</dd>
{{range $i, $a := .R.Axes}}<dt>{{if $i}}and vary{{else}}vary{{end}}</dt><dd><code>{{$a.Path}}</code> = {{range $k, $v := $a.Values}}{{if $k}}, {{end}}<code data-axis="{{$i}}" data-value="{{$k}}">{{$v}}</code>{{end}}</dd>
{{end}}<dt>fixed overrides</dt><dd>{{range .R.Sets}}<code data-set>{{.}}</code> {{else}}none{{end}}</dd>
<dt>seeds</dt><dd><span data-field="seeds">{{.R.Seeds}}</span> per point, <span data-field="firstSeed">{{.R.FirstSeed}}</span> to <span data-field="lastSeed">{{.LastSeed}}</span>; <span data-field="runs">{{.R.Runs}}</span> runs</dd>
</dl>
<p class="note">Per grid point, over its seeds: the median (p50, bold) and below it the 5th to 95th percentile (nearest rank).
Durations are virtual time; <code>-</code> is a metric no run of the point measured.
Definitions of the metrics are in <code>results.json</code>; the same numbers are in <code>results.csv</code>.</p>

<h2>Grid points</h2>
<div style="overflow-x:auto"><table>
<tr>{{range .R.Axes}}<th><code>{{.Path}}</code></th>{{end}}{{range .Columns}}<th title="{{.Name}}">{{.Label}}<br><small>{{.Unit}}</small></th>{{end}}</tr>
{{range .Rows}}{{$i := .Index}}<tr data-row="{{$i}}">{{range $k, $v := .Values}}<td class="v" data-point="{{$i}}" data-axis="{{$k}}">{{$v}}</td>{{end}}{{range .Cells}}{{if .Has}}<td><b data-point="{{$i}}" data-metric="{{.Metric}}" data-stat="p50">{{.P50}}</b><br><small><span data-point="{{$i}}" data-metric="{{.Metric}}" data-stat="p5">{{.P5}}</span> – <span data-point="{{$i}}" data-metric="{{.Metric}}" data-stat="p95">{{.P95}}</span></small></td>{{else}}<td data-point="{{$i}}" data-metric="{{.Metric}}" data-stat="none">-</td>{{end}}{{end}}</tr>
{{end}}</table></div>

<h2>Metrics against <code>{{(index .R.Axes 0).Path}}</code></h2>
<p class="note">Line: p50 over the seeds; band: p5 to p95. Hover a point for its numbers.</p>
{{if .Legend}}<div class="legend">lines by <code>{{.LegendAxis}}</code>: {{range .Legend}}<span class="name"><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}</div>{{end}}
<div class="charts">
{{range .Charts}}<figure class="chart">{{.}}</figure>
{{end}}</div>

<h2>Median runs</h2>
{{if .Timelines}}<p>For each point, the run of median rollout duration, replayed from its seed: nodes per phase (stacked) and, as a dark line, nodes in a reboot slot.</p>
<div class="legend">{{range .Phases}}<span><i style="background:{{.Color}}"></i>{{.Name}}</span>{{end}}<span><i style="background:#222"></i>in a reboot slot</span></div>
{{range .Timelines}}<figure class="timeline" data-timeline="{{.Index}}"><h3>{{template "label" .Label}}: seed <span data-point="{{.Index}}" data-field="medianSeed">{{.Seed}}</span>{{if .HasDur}}, rollout duration <span data-point="{{.Index}}" data-metric="rolloutDuration" data-stat="p50">{{.Duration}}</span>{{end}}</h3>
{{.Chart}}</figure>
{{end}}{{else}}<p>No timelines: no run of any point got a reboot slot, or the results were written without replaying the median runs.</p>{{end}}

<h2>Violations</h2>
{{if .Violations}}<table>
<tr><th>point</th><th>seed</th><th>invariant</th><th>count</th><th>first at</th><th>replay</th></tr>
{{range .Violations}}<tr><td class="v">{{template "label" .Label}}</td><td><span data-point="{{.Index}}" data-violation="{{.K}}" data-field="seed">{{.V.Seed}}</span></td><td>{{.V.Invariant}}</td><td><span data-point="{{.Index}}" data-violation="{{.K}}" data-field="count">{{.V.Count}}</span></td><td><span data-point="{{.Index}}" data-violation="{{.K}}" data-field="atSeconds">{{.At}}</span></td><td><code>{{.V.Replay}}</code></td></tr>
{{end}}</table>{{else}}<p>None: every run of every point held its invariants and expectations.</p>{{end}}
</body>
</html>
{{define "label"}}{{range $k, $p := .}}{{if $k}}, {{end}}{{$p.Name}}=<span data-point="{{$p.Index}}" data-axis="{{$p.K}}">{{$p.Value}}</span>{{end}}{{end}}`))
