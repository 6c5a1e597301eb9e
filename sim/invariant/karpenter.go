package invariant

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootroll/bootroll/fakekarpenter"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file holds the invariants about the fake Karpenter:
// no-reap-while-updating, from Karpenter's decisions as they happen, and
// no-churn, from its counters at the end of the run.

// ExceptionForceful names the documented exception of
// no-reap-while-updating: an expiry, which Karpenter carries out without
// looking at do-not-disrupt (reference/karpenter.md, Expiry), so bootroll
// cannot prevent it. Exceptions are recorded, not violations.
const ExceptionForceful = "forceful"

// karpenterState is the checker's view of Karpenter.
type karpenterState struct {
	stats func() fakekarpenter.Stats
	// expired are the nodes whose NodeClaim expired while they held a
	// slot: the drain that follows is part of the exception.
	expired    map[string]bool
	exceptions []Violation
	reported   map[string]bool // node + "\x00" + what, reported once
}

// SetKarpenter gives the checker Karpenter's counters; without it
// no-churn has nothing to check.
func (c *Checker) SetKarpenter(stats func() fakekarpenter.Stats) {
	c.kstate().stats = stats
}

func (c *Checker) kstate() *karpenterState {
	if c.karp == nil {
		c.karp = &karpenterState{expired: map[string]bool{}, reported: map[string]bool{}}
	}
	return c.karp
}

// Exceptions returns the documented exceptions seen (forceful expiries
// of nodes in a slot), in the order they happened.
func (c *Checker) Exceptions() []Violation {
	if c.karp == nil {
		return nil
	}
	return c.karp.exceptions
}

// inSlot reports whether the node holds a bootroll slot: the slot marker,
// or a slot phase of its BootcNode.
func (c *Checker) inSlot(node string) bool {
	n := c.world.Node(node)
	return n != nil && n.Exists && (n.Marked || holdsSlot(n.Phase))
}

// KarpenterTrace takes one of the fake Karpenter's trace records (its
// Options.Trace) at virtual time now: a disruption, the disrupted taint or
// an eviction of a node that holds a slot violates no-reap-while-updating,
// unless it is an expiry (recorded as a forceful exception).
func (c *Checker) KarpenterTrace(kind, object string, details map[string]any, now time.Time) {
	ks := c.kstate()
	at := now.Sub(c.start)
	node := strings.TrimPrefix(object, "node/")
	switch kind {
	case "karpenter/disrupt":
		if !strings.HasPrefix(object, "node/") {
			return
		}
		reason, _ := details["reason"].(string)
		forceful, _ := details["forceful"].(bool)
		if !c.inSlot(node) {
			return
		}
		if reason == fakekarpenter.ReasonExpired && forceful {
			ks.expired[node] = true
			ks.exceptions = append(ks.exceptions, Violation{Invariant: ExceptionForceful, At: at, Objects: []string{"Node/" + node},
				Message: fmt.Sprintf("NodeClaim of node %s expired while the node held a bootroll slot: Karpenter deletes it forcefully, without checking do-not-disrupt (documented, not preventable)", node)})
			return
		}
		c.reapViolation(node, "disrupt", at, fmt.Sprintf("Karpenter disrupted node %s (method %v, reason %s, decision %v) while it held a bootroll slot", node, details["method"], reason, details["decision"]))
	case "karpenter/repair":
		if c.inSlot(node) {
			c.reapViolation(node, "repair", at, fmt.Sprintf("Karpenter repairs node %s (profile %v, unhealthy for %v) while it holds a bootroll slot", node, details["profile"], details["unhealthyFor"]))
		}
	case "karpenter/tainted":
		if c.inSlot(node) && !ks.expired[node] {
			c.reapViolation(node, "taint", at, fmt.Sprintf("Karpenter put the %s taint on node %s while it held a bootroll slot", fakekarpenter.TaintDisrupted, node))
		}
	case "karpenter/evicted", "karpenter/pod-deleted":
		node, _ := details["node"].(string)
		if node != "" && c.inSlot(node) && !ks.expired[node] {
			c.reapViolation(node, "evict", at, fmt.Sprintf("Karpenter evicted or deleted %s from node %s while the node held a bootroll slot", object, node))
		}
	}
}

func (c *Checker) reapViolation(node, what string, at time.Duration, msg string) {
	if !c.enabled[scenario.InvNoReapWhileUpdating] {
		return
	}
	key := node + "\x00" + what
	if c.kstate().reported[key] {
		return
	}
	c.kstate().reported[key] = true
	c.record(Violation{Invariant: string(scenario.InvNoReapWhileUpdating), At: at, Objects: []string{"Node/" + node}, Message: msg})
}

// churnReasons are the disruption reasons no-churn counts: every one but
// expiry, which is Karpenter's own schedule and not caused by an update.
var churnReasons = []string{fakekarpenter.ReasonEmpty, fakekarpenter.ReasonUnderutilized, fakekarpenter.ReasonDrifted, fakekarpenter.ReasonUnhealthy}

// ChurnBound is the number of nodes Karpenter may replace or delete in a
// run (the scenario format has no field for it yet).
const ChurnBound = 0

// finishKarpenter checks no-churn at the end of the run.
func (c *Checker) finishKarpenter(at time.Duration) {
	if !c.enabled[scenario.InvNoChurn] || c.karp == nil || c.karp.stats == nil {
		return
	}
	st := c.karp.stats()
	total := 0
	var parts []string
	for _, r := range churnReasons {
		if n := st.Disrupted(r); n > 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%s %d", r, n))
		}
	}
	slices.Sort(parts)
	if total > ChurnBound {
		c.record(Violation{Invariant: string(scenario.InvNoChurn), At: at, Objects: []string{"NodePool/*"},
			Message: fmt.Sprintf("Karpenter replaced or deleted %d node(s) (%s); the bound is %d", total, strings.Join(parts, ", "), ChurnBound)})
	}
}
