package fakekarpenter

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestBudgetAllowed models "`budgets`: default `[{nodes: "10%"}]`;
// percentages round UP".
func TestBudgetAllowed(t *testing.T) {
	for _, tc := range []struct {
		nodes string
		num   int
		want  int
	}{
		{"10%", 0, 0},
		{"10%", 1, 1},
		{"10%", 5, 1},
		{"10%", 10, 1},
		{"10%", 11, 2},
		{"34%", 3, 2},
		{"100%", 7, 7},
		{"0%", 7, 0},
		{"3", 100, 3},
		{"0", 5, 0},
	} {
		b, err := parseBudget(budgetSpec{Nodes: tc.nodes})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.allowed(tc.num); got != tc.want {
			t.Errorf("%s of %d nodes: got %d, want %d", tc.nodes, tc.num, got, tc.want)
		}
	}
	np, err := parsePool(newPoolObject())
	if err != nil {
		t.Fatal(err)
	}
	if got := np.allowedDisruptions(t0, 5, ReasonEmpty); got != 1 {
		t.Errorf("default budget of a 5-node pool: %d, want 1 (10%% rounded up)", got)
	}
	for _, bad := range []budgetSpec{{Nodes: "101%"}, {Nodes: "x"}, {Nodes: "1", Schedule: new("@daily")}} {
		if _, err := parseBudget(bad); err == nil {
			t.Errorf("budget %+v accepted", bad)
		}
	}
}

// TestBudgetSchedule models "optional cron `schedule` (UTC) + `duration`":
// a budget is active when its schedule hit within the last duration.
func TestBudgetSchedule(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		schedule, duration, now string
		want                    bool
	}{
		{"0 9 * * *", "8h", "2027-01-04T08:59:00Z", false},
		{"0 9 * * *", "8h", "2027-01-04T09:00:00Z", true},
		{"0 9 * * *", "8h", "2027-01-04T16:59:59Z", true},
		{"0 9 * * *", "8h", "2027-01-04T17:00:00Z", false},
		{"@daily", "1h", "2027-01-05T00:30:00Z", true},
		{"@daily", "1h", "2027-01-05T01:00:00Z", false},
		{"0 22 * * *", "4h", "2027-01-05T01:00:00Z", true},    // across midnight
		{"0 9 * * 1-5", "10h", "2027-01-09T12:00:00Z", false}, // a Saturday
		{"0 9 * * 1-5", "10h", "2027-01-08T12:00:00Z", true},  // a Friday
		{"*/15 * * * *", "5m", "2027-01-04T10:33:00Z", true},
		{"*/15 * * * *", "5m", "2027-01-04T10:36:00Z", false},
		{"0 0 1 * *", "24h", "2027-02-01T12:00:00Z", true},
		{"@weekly", "48h", "2027-01-04T12:00:00Z", true}, // Sunday midnight + 36h
		{"30 12 4 1 1", "1m", "2027-01-04T12:30:30Z", true},
	} {
		b, err := parseBudget(budgetSpec{Nodes: "0", Schedule: new(tc.schedule), Duration: new(tc.duration)})
		if err != nil {
			t.Fatalf("%s: %v", tc.schedule, err)
		}
		if got := b.active(at(tc.now)); got != tc.want {
			t.Errorf("%q for %s at %s: active %v, want %v", tc.schedule, tc.duration, tc.now, got, tc.want)
		}
	}
	for _, bad := range []string{"* * *", "60 * * * *", "a b c d e", "@sometimes", "5-1 * * * *"} {
		if _, err := parseCron(bad); err == nil {
			t.Errorf("schedule %q accepted", bad)
		}
	}
}

// TestBudgetMostRestrictiveAndReasons models "`reasons` ⊆ {Underutilized,
// Empty, Drifted} (+ Unhealthy in v1.15). The most restrictive active
// budget wins."
func TestBudgetMostRestrictiveAndReasons(t *testing.T) {
	u := newPoolObject()
	budgets, err := encode([]budgetSpec{
		{Nodes: "50%"},
		{Nodes: "1", Reasons: []string{ReasonDrifted}},
		{Nodes: "0", Reasons: []string{ReasonEmpty}, Schedule: new("0 9 * * *"), Duration: new("8h")},
	})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = map[string]any{"disruption": map[string]any{"budgets": budgets}}
	np, err := parsePool(u)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		reason string
		now    time.Time
		want   int
	}{
		{ReasonUnderutilized, t0, 5},
		{ReasonDrifted, t0, 1},
		{ReasonEmpty, t0, 0},                    // noon: the scheduled budget is active
		{ReasonEmpty, t0.Add(6 * time.Hour), 5}, // 18:00: it is not
		{ReasonUnhealthy, t0, 5},
	} {
		if got := np.allowedDisruptions(tc.now, 10, tc.reason); got != tc.want {
			t.Errorf("%s at %s: %d, want %d", tc.reason, tc.now.Format("15:04"), got, tc.want)
		}
	}
	if got := (&nodePool{}).allowedDisruptions(t0, 10, ReasonEmpty); got != math.MaxInt {
		t.Errorf("no budgets: %d, want unlimited", got)
	}
}

// TestBudgetRoundsUpAndNotReadyNodesDisrupt models "Budget accounting:
// counts managed, initialized nodes not InstanceTerminating; a node is
// "disrupting" when marked for deletion OR its Ready condition is not True.
// So a node rebooting for an OS update consumes Karpenter's budget." With
// the default 10% of 5 nodes (1, rounded up), one NotReady node stops
// emptiness; once it is Ready again the empty nodes go one at a time.
func TestBudgetRoundsUpAndNotReadyNodesDisrupt(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s"}) // default budget
	nodes := h.addNodes("default", 5)
	h.setReady(nodes[0], false) // rebooting for an OS update
	h.run(3 * time.Minute)
	for _, n := range nodes {
		if h.deleting(n) {
			t.Fatalf("node %s disrupted while another was NotReady and the budget is 1:\n%s", n, h.dump())
		}
	}
	if b := h.find("karpenter/blocked", "node/"+nodes[1]); len(b) != 1 || b[0].details["blocker"] != budgetBlocker(ReasonEmpty, "default") {
		t.Errorf("blocked decisions: %v, want the Empty budget", b)
	}

	h.setReady(nodes[0], true)
	maxDeleting := 0
	h.runUntil(10*time.Minute, "the empty nodes deleted", func() bool {
		deleting, gone := 0, 0
		for _, n := range nodes {
			switch {
			case h.gone(n):
				gone++
			case h.deleting(n):
				deleting++
			}
		}
		maxDeleting = max(maxDeleting, deleting)
		// The budget counts the remaining nodes: 10% of 1 is still 1.
		return gone == len(nodes)
	})
	if maxDeleting != 1 {
		t.Errorf("at most %d nodes deleting at once, want 1", maxDeleting)
	}
	for _, d := range h.find("karpenter/disruption-considered", "") {
		if strings.Contains(d.object, ",") {
			t.Errorf("a command for several nodes: %v", d)
		}
	}
}

// TestBudgetScheduleWindowBlocks models "optional cron `schedule` (UTC) +
// `duration`" and "The most restrictive active budget wins": a budget of 0
// from 09:00 for 8h holds an empty node until 17:00 UTC.
func TestBudgetScheduleWindowBlocks(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: []budgetSpec{
		{Nodes: "100%"},
		{Nodes: "0", Schedule: new("0 9 * * *"), Duration: new("8h")},
	}})
	node := h.addNode("default") // at 12:00 UTC
	h.run(5*time.Hour - time.Minute)
	if h.deleting(node) {
		t.Fatalf("disrupted inside the blocking window:\n%s", h.dump())
	}
	h.runUntil(2*time.Minute, "the node disrupted after 17:00", func() bool { return h.deleting(node) })
	if d := h.find("karpenter/disrupt", "node/"+node); len(d) != 1 || d[0].at < 5*time.Hour {
		t.Errorf("disruptions %v, want one after 17:00 UTC (5h)", d)
	}
}

// TestBudgetReasonsFilter models "`reasons` ⊆ {Underutilized, Empty,
// Drifted}": a budget of 0 for reason Empty stops emptiness but not drift.
func TestBudgetReasonsFilter(t *testing.T) {
	h := newHarness(t)
	h.createPool("default", poolOpts{policy: WhenEmpty, consolidateAfter: "0s", budgets: []budgetSpec{
		{Nodes: "100%"},
		{Nodes: "0", Reasons: []string{ReasonEmpty}},
	}})
	empty := h.addNode("default")
	drifted := h.addNode("default")
	h.addPod("web", drifted)
	h.changeImage("default", "quay.io/os@sha256:bbb")
	h.runUntil(time.Minute, "the drifted node replaced", func() bool { return h.deleting(drifted) })
	h.run(5 * time.Minute)
	if h.deleting(empty) {
		t.Fatalf("the empty node was disrupted although the Empty budget is 0:\n%s", h.dump())
	}
	if b := h.find("karpenter/blocked", "node/"+empty); len(b) == 0 || b[0].details["blocker"] != budgetBlocker(ReasonEmpty, "default") {
		t.Errorf("blocked decisions for the empty node: %v", b)
	}
}
