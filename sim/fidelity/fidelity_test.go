package fidelity

import (
	"os"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func line(s int, kind, object string, details map[string]any) Line {
	return Line{T: at(s), Kind: kind, Object: object, Details: details}
}

// oneUpdate is one node's update and, later, Karpenter reaping it and
// replacing another.
func oneUpdate() []Line {
	return []Line{
		line(0, "node.created", "Node/a", map[string]any{"ready": true}),
		line(0, "node.created", "Node/b", map[string]any{"ready": true}),
		line(10, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Staged"}),
		line(25, "node.cordon", "Node/a", map[string]any{"unschedulable": true, "slot": "p"}),
		line(25, "bootcnode.phase", "BootcNode/a", map[string]any{"from": "Pending", "to": "Draining"}),
		line(70, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Rebooting"}),
		line(72, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Rebooting", "lastError": "a reboot already requested cannot be taken back: the host goes down"}), // the same drain
		line(75, "node.ready", "Node/a", map[string]any{"ready": false}),
		line(170, "node.ready", "Node/a", map[string]any{"ready": true}),
		line(200, "bootcnode.phase", "BootcNode/a", map[string]any{"from": "Draining", "to": "Updated"}),
		line(201, "node.cordon", "Node/a", map[string]any{"unschedulable": false}),
		line(300, "node.created", "Node/c", map[string]any{"ready": false}),
		line(1000, "karpenter/disrupt", "node/a", map[string]any{"decision": "delete"}),
		line(1000, "node.deleting", "Node/a", nil), // no node created since the decision: reaped
		line(1000, "node.deleting", "Node/a", nil), // counted once
		line(1040, "karpenter/disrupt", "node/c", map[string]any{"decision": "delete"}),
		line(1046, "node.deleting", "Node/c", nil),                           // created, not uncordoned: reaped 746 s after
		line(1047, "node.created", "Node/e", map[string]any{"ready": false}), // provisioned for c's pods: not c's replacement
		line(1070, "karpenter/disrupt", "node/b", map[string]any{"decision": "replace"}),
		line(1100, "node.created", "Node/d", map[string]any{"ready": false}),
		line(1130, "node.deleting", "Node/b", nil), // d created since the decision: replaced 60 s after it
		line(1200, "node.deleting", "Node/d", nil), // no decision (an admin): neither
	}
}

func TestExtract(t *testing.T) {
	ev := Extract(oneUpdate())
	want := map[Kind][]time.Duration{
		Cordoned: {15 * time.Second},
		Drained:  {45 * time.Second},
		Rebooted: {100 * time.Second},
		Verified: {30 * time.Second},
		Reaped:   {799 * time.Second, 746 * time.Second},
		Replaced: {60 * time.Second},
	}
	for _, k := range Kinds {
		if got := ev[k]; !equal(got, want[k]) {
			t.Errorf("%s = %v, want %v", k, got, want[k])
		}
	}
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCompareAndWrite(t *testing.T) {
	twin := Extract(oneUpdate())
	slow := oneUpdate()
	for i := range slow {
		if slow[i].Kind == "node.ready" && slow[i].Details["ready"] == true {
			slow[i].T = slow[i].T.Add(12 * time.Second) // a reboot 12 s longer on the cluster
		}
	}
	c := &Comparison{Scenario: "s", TwinVerdict: "PASS", ClusterVerdict: "PASS", Rows: Compare(twin, Extract(slow))}
	if c.Agrees() {
		t.Error("a reboot 12 s longer agrees within 10 s")
	}
	for _, r := range c.Rows {
		d, _ := r.Diff()
		switch r.Kind {
		case Rebooted:
			if d != 12*time.Second || r.Within(Tolerance) {
				t.Errorf("rebooted diff %v within %v", d, r.Within(Tolerance))
			}
		case Verified:
			if d != -12*time.Second {
				t.Errorf("verified diff %v, want -12s", d)
			}
		default:
			if !r.Within(Tolerance) {
				t.Errorf("%s not within: %+v", r.Kind, r)
			}
		}
	}
	var text, md strings.Builder
	if err := WriteText(&text, []*Comparison{c}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "rebooted") || !strings.Contains(text.String(), "+12s") || !strings.Contains(text.String(), "NO") {
		t.Errorf("text table:\n%s", text.String())
	}
	c.Skipped = []string{"nodeCrash: no host to crash"}
	if err := WriteMarkdown(&md, []*Comparison{c}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| s | PASS / PASS | cordoned | 1 | 15s |") || !strings.Contains(md.String(), "- s: nodeCrash: no host to crash") {
		t.Errorf("markdown:\n%s", md.String())
	}
	c.ClusterVerdict = "FAIL"
	if c.Agrees() {
		t.Error("different verdicts agree")
	}
}

// TestTwinTrace reads a trace the twin wrote (post-update-emptiness-
// reaping: three Karpenter nodes updated, one reaped empty after its
// post-update protection).
func TestTwinTrace(t *testing.T) {
	f, err := os.Open("testdata/post-update-emptiness-reaping.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, err := ReadTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	ev := Extract(lines)
	for k, n := range map[Kind]int{Cordoned: 3, Drained: 3, Rebooted: 3, Verified: 3, Reaped: 1, Replaced: 0} {
		if len(ev[k]) != n {
			t.Errorf("%s: %d events %v, want %d", k, len(ev[k]), ev[k], n)
		}
	}
	if d := ev[Reaped]; len(d) == 1 && d[0] < 5*time.Minute {
		t.Errorf("reaped %v after the uncordon, within the 5m post-update protection", d[0])
	}
}

func TestReadTraceNamesTheBadLine(t *testing.T) {
	_, err := ReadTrace(strings.NewReader(`{"t":"2026-01-05T00:00:00Z","kind":"x","object":"Node/a"}` + "\n{not json\n"))
	if err == nil || !strings.Contains(err.Error(), "trace line 2") {
		t.Errorf("err = %v, want one naming line 2", err)
	}
}

// A daemon report that repeats its phase is not a new event, but the first
// report to a record made again is (the pool deleted and created again).
func TestExtractRepeatedReports(t *testing.T) {
	ev := Extract([]Line{
		line(0, "node.created", "Node/a", map[string]any{"ready": true}),
		line(0, "bootcnode.created", "BootcNode/a", nil),
		line(10, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Staged"}),
		line(12, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Staged", "lastError": "x"}),
		line(20, "bootcnode.deleted", "BootcNode/a", nil),
		line(90, "bootcnode.created", "BootcNode/a", nil),
		line(91, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Staged"}),
		line(95, "node.cordon", "Node/a", map[string]any{"unschedulable": true, "slot": "p"}),
		line(100, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Rebooting"}),
		line(101, "bootcnode.daemon", "BootcNode/a", map[string]any{"phase": "Rebooting", "lastError": "a reboot already requested cannot be taken back: the host goes down"}),
		line(110, "node.ready", "Node/a", map[string]any{"ready": false}),
		line(140, "node.ready", "Node/a", map[string]any{"ready": true}),
	})
	for k, want := range map[Kind][]time.Duration{Cordoned: {4 * time.Second}, Drained: {5 * time.Second}, Rebooted: {40 * time.Second}} {
		if got := ev[k]; !equal(got, want) {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
}

// The twin's prediction over seeds: each run's median, then their median
// and range; a row is judged against it when it has seeds, against the
// scenario's seed otherwise, and the counts always come from that seed.
func TestSeeds(t *testing.T) {
	s := func(ds ...int) []time.Duration {
		var out []time.Duration
		for _, d := range ds {
			out = append(out, time.Duration(d)*time.Second)
		}
		return out
	}
	// A drain that waits out a PDB (15 s) or not (5 s) by a coin.
	runs := []Events{
		{Drained: s(5, 15, 15)}, // the scenario's seed: p50 15 s
		{Drained: s(5, 15, 5)},
		{Drained: s(5, 5, 5)},
		{},
		{Drained: s(5, 6, 5)},
	}
	got := SeedStats(runs, Drained)
	if want := (Seeds{Runs: 5, Saw: 4, Median: 5 * time.Second, Lo: 5 * time.Second, Hi: 15 * time.Second}); got != want {
		t.Errorf("SeedStats = %+v, want %+v", got, want)
	}
	if got := SeedStats(runs, Reaped); got != (Seeds{Runs: 5}) {
		t.Errorf("a kind no run saw: %+v", got)
	}

	rows := Compare(runs[0], Events{Drained: s(5, 5, 16)})
	var drained Row
	for _, r := range rows {
		if r.Kind == Drained {
			drained = r
		}
	}
	if d, _ := drained.Diff(); d != -10*time.Second || drained.Within(5*time.Second) {
		t.Fatalf("without seeds: Δ %v, within 5 s %v; want -10s, false", d, drained.Within(5*time.Second))
	}
	AddSeeds(rows, runs)
	for _, r := range rows {
		if r.Kind != Drained {
			continue
		}
		if d, ok := r.SeedsDiff(); !ok || d != 0 || !r.Within(5*time.Second) {
			t.Errorf("with seeds: Δ %v (%v), within 5 s %v; want 0s, true", d, ok, r.Within(5*time.Second))
		}
		r.Cluster = stats(s(15, 16, 17))
		if r.Within(5 * time.Second) {
			t.Error("a cluster median 10 s off the seeds' median is within 5 s")
		}
		r.Cluster = stats(s(5, 5))
		if r.Within(time.Minute) {
			t.Error("2 drains on the cluster against 3 in the scenario's seed: within")
		}
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, []*Comparison{{Scenario: "s", TwinVerdict: "PASS", ClusterVerdict: "PASS", Rows: rows}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "twin p50, 5 seeds [min–max]") || !strings.Contains(md.String(), "| drained | 3 | 15s | 15s | 5s [5s–15s] | 3 | 5s | 16s | -10s | 0s | yes |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
