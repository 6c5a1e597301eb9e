// Package fidelity compares what the twin predicted with what a real
// cluster did for the same scenario: the verdicts side by side and, for
// each kind of event a rollout is made of (cordoned, drained, rebooted,
// verified, reaped by Karpenter, replaced), how many there were and how
// long each took from its cause.
//
// Events are read from the API-level lines of a JSONL trace (the dotted
// kinds: node.cordon, node.ready, node.created, node.deleting,
// bootcnode.phase, bootcnode.daemon), which the twin writes from its
// simulated API server's events and the cluster target from its watches,
// and from Karpenter's decisions (karpenter/disrupt), which the fake
// Karpenter traces and the cluster target reads from the NodeClaims'
// DisruptionReason (sim/clusterrun.KarpenterDecisions), so both sides are
// measured the same way. Lines of other kinds (the twin's host and
// Karpenter internals, node/..., other karpenter/... lines) are ignored.
package fidelity

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Line is one trace line.
type Line struct {
	T       time.Time      `json:"t"`
	Kind    string         `json:"kind"`
	Object  string         `json:"object"`
	Details map[string]any `json:"details"`
}

// MaxLineBytes bounds one trace line (a longer one is an error).
const MaxLineBytes = 1 << 20

// ReadTrace reads a JSONL trace. A malformed line is an error naming
// its line number.
func ReadTrace(r io.Reader) ([]Line, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	var out []Line
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var l Line
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	return out, nil
}

// Kind is a kind of event the table compares.
type Kind string

// The event kinds, in the table's order, and what each is measured from.
const (
	// Cordoned: bootroll cordoned a node for its update (node.cordon with
	// a slot), from the daemon reporting the image Staged
	// (status.daemon.phase): the wait for a slot and the take-up.
	Cordoned Kind = "cordoned"
	// Drained: the node drained and its daemon told to reboot: the daemon
	// reports Rebooting, from the cordon.
	Drained Kind = "drained"
	// Rebooted: the Node was Ready again after going NotReady in the
	// reboot, from the daemon reporting Rebooting.
	Rebooted Kind = "rebooted"
	// Verified: the BootcNode reached Updated, from the Node's Ready after
	// the reboot.
	Verified Kind = "verified"
	// Reaped: Karpenter deleted a Node without a replacement (emptiness,
	// delete consolidation, expiry, repair): a karpenter/disrupt line for
	// the node and no Node created between it and the deletion; from the
	// node's last uncordon or, never uncordoned, its creation.
	Reaped Kind = "reaped by Karpenter"
	// Replaced: Karpenter deleted a Node after launching its replacement
	// (replace consolidation, drift): a Node was created between the
	// karpenter/disrupt line and the deletion; from the disrupt line (the
	// replacement's launch, registration and initialization). A delete
	// decision is carried out at once (in the twin at the same instant, on
	// the cluster within about a second), so a node provisioned for the
	// pods of an earlier deletion rarely falls in between.
	Replaced Kind = "replaced"
)

// Kinds lists the kinds in the table's order.
var Kinds = []Kind{Cordoned, Drained, Rebooted, Verified, Reaped, Replaced}

// Events are the delays from cause to event, per kind, in the order the
// events happened.
type Events map[Kind][]time.Duration

// nodeState follows one node through the trace.
type nodeState struct {
	created, staged, cordoned, rebooting, readyAgain, uncordoned time.Time
	disrupted                                                    time.Time // Karpenter's decision
	wentNotReady, deleting                                       bool
	// daemon is the phase of the daemon's last report: a report that
	// repeats it (with another lastError, say) is not a new event.
	daemon any
}

// Extract finds the events of a trace.
func Extract(lines []Line) Events {
	ev := Events{}
	nodes := map[string]*nodeState{}
	state := func(name string) *nodeState {
		s := nodes[name]
		if s == nil {
			s = &nodeState{}
			nodes[name] = s
		}
		return s
	}
	var lastCreated time.Time // of any Node
	add := func(k Kind, from, to time.Time) {
		if from.IsZero() || to.Before(from) {
			return
		}
		ev[k] = append(ev[k], to.Sub(from))
	}
	for _, l := range lines {
		kind, name, ok := strings.Cut(l.Object, "/")
		if !ok {
			continue
		}
		switch {
		case l.Kind == "node.created" && kind == "Node":
			s := state(name)
			*s = nodeState{created: l.T}
			lastCreated = l.T
		case l.Kind == "karpenter/disrupt" && kind == "node":
			if s := state(name); s.disrupted.IsZero() && !s.deleting {
				s.disrupted = l.T
			}
		case l.Kind == "node.cordon" && kind == "Node":
			s := state(name)
			if l.Details["unschedulable"] == true {
				if _, slot := l.Details["slot"]; slot {
					s.cordoned = l.T
					add(Cordoned, s.staged, l.T)
				}
			} else {
				s.uncordoned = l.T
			}
		case l.Kind == "node.ready" && kind == "Node":
			s := state(name)
			if l.Details["ready"] == false {
				if !s.rebooting.IsZero() {
					s.wentNotReady = true
				}
			} else if s.wentNotReady {
				s.wentNotReady = false
				s.readyAgain = l.T
				add(Rebooted, s.rebooting, l.T)
				s.rebooting = time.Time{}
			}
		case l.Kind == "node.deleting" && kind == "Node":
			s := state(name)
			if s.deleting {
				continue
			}
			s.deleting = true
			switch {
			case s.disrupted.IsZero():
				// Not Karpenter's decision (an admin, the scenario).
			case !lastCreated.Before(s.disrupted):
				add(Replaced, s.disrupted, l.T)
			default:
				from := s.created
				if !s.uncordoned.IsZero() {
					from = s.uncordoned
				}
				add(Reaped, from, l.T)
			}
		case l.Kind == "bootcnode.created" && kind == "BootcNode":
			state(name).daemon = nil // a new record: its first report is new
		case l.Kind == "bootcnode.daemon" && kind == "BootcNode":
			s := state(name)
			phase := l.Details["phase"]
			if phase == s.daemon {
				// The same phase reported again: on the cluster a daemon
				// whose boot order was withdrawn during its host's
				// shutdown reports Rebooting again with "cannot be taken
				// back" (cluster-pool-deleted-mid-rollout), one drain.
				continue
			}
			s.daemon = phase
			switch phase {
			case "Staged":
				s.staged = l.T
			case "Rebooting":
				s.rebooting, s.wentNotReady = l.T, false
				add(Drained, s.cordoned, l.T)
			}
		case l.Kind == "bootcnode.phase" && kind == "BootcNode":
			s := state(name)
			if l.Details["to"] == "Updated" && l.Details["from"] != "Updated" {
				add(Verified, s.readyAgain, l.T)
				s.staged, s.cordoned, s.readyAgain = time.Time{}, time.Time{}, time.Time{}
			}
		}
	}
	return ev
}

// Stats summarises one kind's delays.
type Stats struct {
	Count          int
	Median, Max    time.Duration
	HasMedian      bool
	TotalEventTime time.Duration
}

func stats(ds []time.Duration) Stats {
	s := Stats{Count: len(ds)}
	if len(ds) == 0 {
		return s
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	s.Median, s.Max, s.HasMedian = sorted[(len(sorted)-1)/2], sorted[len(sorted)-1], true
	for _, d := range ds {
		s.TotalEventTime += d
	}
	return s
}

// Row compares one kind of event.
type Row struct {
	Kind          Kind
	Twin, Cluster Stats
	// TwinSeeds is the twin's median delay of the kind over runs with
	// several seeds (AddSeeds); its Runs is 0 when there were none.
	TwinSeeds Seeds
}

// Seeds summarises one kind over twin runs with different seeds: the
// median delay of each run that saw the kind, and the median, least and
// greatest of those. A delay that turns on a coin neither target controls
// (kube-scheduler picks at random among equally good nodes) differs from
// run to run on both; the median over seeds is the twin's typical
// prediction, where one seed is one draw (docs/fidelity.md).
type Seeds struct {
	Runs, Saw      int // runs; runs that saw the kind
	Median, Lo, Hi time.Duration
}

// SeedStats summarises kind k over runs (one Events per seed).
func SeedStats(runs []Events, k Kind) Seeds {
	s := Seeds{Runs: len(runs)}
	var meds []time.Duration
	for _, ev := range runs {
		if st := stats(ev[k]); st.HasMedian {
			meds = append(meds, st.Median)
		}
	}
	if s.Saw = len(meds); s.Saw > 0 {
		slices.Sort(meds)
		s.Median, s.Lo, s.Hi = meds[(len(meds)-1)/2], meds[0], meds[len(meds)-1]
	}
	return s
}

// AddSeeds sets each row's TwinSeeds from the twin's runs over several
// seeds (one Events per seed).
func AddSeeds(rows []Row, runs []Events) {
	for i := range rows {
		rows[i].TwinSeeds = SeedStats(runs, rows[i].Kind)
	}
}

// Diff is the cluster's median delay less the twin's (the run with the
// scenario's seed); ok is false when either side has none.
func (r Row) Diff() (time.Duration, bool) {
	if !r.Twin.HasMedian || !r.Cluster.HasMedian {
		return 0, false
	}
	return r.Cluster.Median - r.Twin.Median, true
}

// SeedsDiff is the cluster's median delay less the twin's median over
// seeds; ok is false without seeds, or when either side has none.
func (r Row) SeedsDiff() (time.Duration, bool) {
	if r.TwinSeeds.Saw == 0 || !r.Cluster.HasMedian {
		return 0, false
	}
	return r.Cluster.Median - r.TwinSeeds.Median, true
}

// Within reports whether the row meets the goal: the same count in the
// run with the scenario's seed, and the cluster's median within tol of
// the twin's, over seeds when the row has them (a kind neither side saw
// meets it).
func (r Row) Within(tol time.Duration) bool {
	if r.Twin.Count != r.Cluster.Count {
		return false
	}
	d, ok := r.Diff()
	if r.TwinSeeds.Runs > 0 {
		// The seeds include the scenario's: a kind the cluster saw was
		// seen by some seed (the counts agree).
		d, ok = r.SeedsDiff()
	}
	return !ok || (d <= tol && d >= -tol)
}

// Comparison is one scenario run on both targets.
type Comparison struct {
	Scenario                    string
	TwinVerdict, ClusterVerdict string
	// TwinWall and ClusterWall are how long each run took (wall clock).
	TwinWall, ClusterWall time.Duration
	Rows                  []Row
	// Skipped are the cluster target's faults and events it could not
	// inject, as it reported them.
	Skipped []string
}

// Compare builds the rows of a comparison from both traces' events.
func Compare(twin, cluster Events) []Row {
	rows := make([]Row, 0, len(Kinds))
	for _, k := range Kinds {
		rows = append(rows, Row{Kind: k, Twin: stats(twin[k]), Cluster: stats(cluster[k])})
	}
	return rows
}

// Tolerance is the goal for each kind's delay.
const Tolerance = 10 * time.Second

// Agrees reports whether the verdicts match and every row is within
// Tolerance.
func (c *Comparison) Agrees() bool {
	if c.TwinVerdict != c.ClusterVerdict {
		return false
	}
	for _, r := range c.Rows {
		if !r.Within(Tolerance) {
			return false
		}
	}
	return true
}

// WriteText prints comparisons as aligned tables, one per scenario.
func WriteText(w io.Writer, cs []*Comparison) error {
	var b strings.Builder
	for _, c := range cs {
		same := "same"
		if c.TwinVerdict != c.ClusterVerdict {
			same = "DIFFERENT"
		}
		fmt.Fprintf(&b, "%s: verdict twin %s, cluster %s (%s); wall twin %s, cluster %s\n", c.Scenario, c.TwinVerdict, c.ClusterVerdict, same,
			round(c.TwinWall), round(c.ClusterWall))
		fmt.Fprintf(&b, "  %-20s %6s %9s %9s %-26s %8s %9s %9s %9s %11s  %s\n", "event", "twin n", "twin p50", "twin max", seedsHeader(c), "real n", "real p50", "real max", "Δ p50", "Δ vs seeds", "within 10s")
		for _, r := range c.Rows {
			fmt.Fprintf(&b, "  %-20s %6d %9s %9s %-26s %8d %9s %9s %9s %11s  %s\n", r.Kind, r.Twin.Count, med(r.Twin), mx(r.Twin), seeds(r.TwinSeeds),
				r.Cluster.Count, med(r.Cluster), mx(r.Cluster), diff(r), seedsDiff(r), yes(r.Within(Tolerance)))
		}
		for _, s := range c.Skipped {
			fmt.Fprintf(&b, "  skipped on the cluster: %s\n", s)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes the comparisons as the table of docs/fidelity.md.
func WriteMarkdown(w io.Writer, cs []*Comparison) error {
	var b strings.Builder
	header := "twin p50 over seeds"
	if len(cs) > 0 {
		header = seedsHeader(cs[0])
	}
	b.WriteString("| scenario | verdict twin / cluster | event | twin n | twin p50 | twin max | " + header + " | cluster n | cluster p50 | cluster max | Δ p50 | Δ vs seeds | within 10 s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		for i, r := range c.Rows {
			name, verdict := "", ""
			if i == 0 {
				name, verdict = c.Scenario, c.TwinVerdict+" / "+c.ClusterVerdict
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", name, verdict, r.Kind,
				r.Twin.Count, med(r.Twin), mx(r.Twin), seeds(r.TwinSeeds), r.Cluster.Count, med(r.Cluster), mx(r.Cluster), diff(r), seedsDiff(r), yes(r.Within(Tolerance)))
		}
	}
	skipped := map[string]bool{}
	for _, c := range cs {
		for _, s := range c.Skipped {
			skipped[c.Scenario+": "+s] = true
		}
	}
	if len(skipped) > 0 {
		b.WriteString("\nNot injected on the cluster:\n\n")
		keys := make([]string, 0, len(skipped))
		for k := range skipped {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "- %s\n", k)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// seedsHeader names the seeds column after the number of runs.
func seedsHeader(c *Comparison) string {
	for _, r := range c.Rows {
		if r.TwinSeeds.Runs > 0 {
			return fmt.Sprintf("twin p50, %d seeds [min–max]", r.TwinSeeds.Runs)
		}
	}
	return "twin p50 over seeds"
}

// seeds is a row's twin median over seeds with its range.
func seeds(s Seeds) string {
	switch {
	case s.Runs == 0:
		return "—"
	case s.Saw == 0:
		return "none"
	case s.Lo == s.Hi || round(s.Lo) == round(s.Hi):
		return round(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", round(s.Median), round(s.Lo), round(s.Hi))
}

func seedsDiff(r Row) string {
	d, ok := r.SeedsDiff()
	if !ok {
		return "—"
	}
	return signed(d)
}

func round(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

func med(s Stats) string {
	if !s.HasMedian {
		return "—"
	}
	return round(s.Median)
}

func mx(s Stats) string {
	if !s.HasMedian {
		return "—"
	}
	return round(s.Max)
}

func diff(r Row) string {
	d, ok := r.Diff()
	if !ok {
		return "—"
	}
	return signed(d)
}

// signed is a difference with its sign, "0s" for none.
func signed(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	if r := round(d); r != "0s" && d != 0 {
		return sign + r
	}
	return "0s"
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}
