package whatif

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// JSON encodes results.json.
func (r *Results) JSON() ([]byte, error) {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding results.json: %w", err)
	}
	return append(data, '\n'), nil
}

// CSV encodes results.csv: one row per grid point and metric, the axes'
// values as the first columns.
func (r *Results) CSV() ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	head := make([]string, 0, len(r.Axes)+8)
	for _, a := range r.Axes {
		head = append(head, a.Path)
	}
	head = append(head, "metric", "unit", "n", "p5", "p50", "p95", "min", "mean", "max")
	if err := w.Write(head); err != nil {
		return nil, err
	}
	units := map[string]string{}
	for _, m := range Metrics {
		units[m.Name] = m.Unit
	}
	for _, p := range r.Points {
		for _, s := range p.Metrics {
			row := append([]string{}, p.Values...)
			row = append(row, s.Metric, units[s.Metric], strconv.Itoa(s.N), num(s.P5), num(s.P50), num(s.P95), num(s.Min), num(s.Mean), num(s.Max))
			if err := w.Write(row); err != nil {
				return nil, err
			}
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("encoding results.csv: %w", err)
	}
	return buf.Bytes(), nil
}

func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// Write writes results.json, results.csv and report.html into dir,
// creating it.
func (r *Results) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	js, err := r.JSON()
	if err != nil {
		return err
	}
	cs, err := r.CSV()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return fmt.Errorf("writing results.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.csv"), cs, 0o644); err != nil {
		return fmt.Errorf("writing results.csv: %w", err)
	}
	return WriteReport(dir, r)
}

// Table prints one row per grid point with the key metrics; a metric no
// run measured shows as "-".
func (r *Results) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	var head []string
	for _, a := range r.Axes {
		head = append(head, axisLabel(a.Path))
	}
	head = append(head, "runs", "dur p50", "dur p95", "dur max", "min CPU% p50", "mean CPU% p50", "min mem% p50", "mean mem% p50", "unavail max", "PDB refused p50", "pending pod-min p50", "karp launch/reap/repl p50", "failed max", "violations", "ctrl writes p50")
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, p := range r.Points {
		row := append([]string{}, p.Values...)
		get := func(m Metric, f func(Stats) float64, format func(float64) string) string {
			s, ok := p.Get(m)
			if !ok {
				return "-"
			}
			return format(f(s))
		}
		p50 := func(s Stats) float64 { return s.P50 }
		p95 := func(s Stats) float64 { return s.P95 }
		mx := func(s Stats) float64 { return s.Max }
		karp := "-"
		if _, ok := p.Get(KarpenterLaunched); ok {
			karp = get(KarpenterLaunched, p50, count) + "/" + get(KarpenterReaped, p50, count) + "/" + get(KarpenterReplaced, p50, count)
		}
		violations := 0
		for _, v := range p.Violations {
			violations += v.Count
		}
		runs := fmt.Sprint(r.Seeds)
		if s, ok := p.Get(Duration); ok && s.N < r.Seeds {
			runs = fmt.Sprintf("%d (%d rolled)", r.Seeds, s.N)
		}
		row = append(row, runs,
			get(Duration, p50, dur), get(Duration, p95, dur), get(Duration, mx, dur),
			get(MinSchedCPUPct, p50, pct), get(MeanSchedCPUPct, p50, pct),
			get(MinSchedMemPct, p50, pct), get(MeanSchedMemPct, p50, pct),
			get(PeakUnavailable, mx, count), get(PDBRefusals, p50, count),
			get(PendingPodMinutes, p50, oneDecimal), karp,
			get(FailedNodes, mx, count), fmt.Sprint(violations), get(ControllerWrites, p50, count))
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	return tw.Flush()
}

// dur prints seconds for people: 1h02m, 12m30s, 45s.
func dur(s float64) string {
	t := int64(s + 0.5)
	switch {
	case t >= 3600:
		return fmt.Sprintf("%dh%02dm", t/3600, t%3600/60)
	case t >= 60:
		return fmt.Sprintf("%dm%02ds", t/60, t%60)
	default:
		return fmt.Sprintf("%ds", t)
	}
}

func pct(x float64) string        { return fmt.Sprintf("%.1f%%", x) }
func count(x float64) string      { return strconv.FormatFloat(x, 'f', -1, 64) }
func oneDecimal(x float64) string { return fmt.Sprintf("%.1f", x) }
