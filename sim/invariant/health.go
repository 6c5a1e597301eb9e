package invariant

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file judges updated-healthy: a node bootroll records Updated at the
// end of its slot passes its pool's spec.healthChecks at that moment, as
// the API documents them, read here on its own from the watch events.

// HealthStale is how far back updated-healthy looks for a moment of the
// current boot at which the node passed its checks: the controller decides
// on cached state, which lags the API by up to the stale profile's and a
// watch fault's delivery delays (30s each), so a node that passed its
// checks and then failed one a moment before bootroll wrote Updated is no
// violation.
const HealthStale = 2 * time.Minute

// nodeHealth is what the World knows of a node for its health checks.
type nodeHealth struct {
	healthState
	// past are the states of the last HealthStale, oldest first, each
	// with the time it ended; kept only while some pool has checks.
	past []healthState
}

// healthState is a node's health-relevant state over a span of time.
type healthState struct {
	ready bool
	// readySince is when the Node last turned Ready, or booted while
	// Ready (a new status.nodeInfo.bootID), whichever is later, to the
	// second as the API records times.
	readySince time.Time
	bootID     string
	// conds are the Node's conditions other than Ready: type and status.
	conds []nodeCond
	// dsReady counts the Ready, not terminating pods bound to the node by
	// the namespace/name of the DaemonSet that controls them.
	dsReady map[string]int
	// until is when a past state ended.
	until time.Time
}

type nodeCond struct{ typ, status string }

// poolHealth is a pool's spec.healthChecks.
type poolHealth struct {
	ReadyFor   time.Duration
	Conditions []nodeCond
	// DaemonSets are namespace/name.
	DaemonSets []string
}

// any reports whether the pool asks for more than Ready.
func (h *poolHealth) any() bool {
	return h.ReadyFor > 0 || len(h.Conditions) > 0 || len(h.DaemonSets) > 0
}

// setHealthChecks takes spec.healthChecks.
func (p *Pool) setHealthChecks(c *v1alpha1.HealthChecks) {
	h := poolHealth{}
	if c.ReadyFor != nil {
		h.ReadyFor = c.ReadyFor.Duration
	}
	for _, k := range c.NodeConditions {
		h.Conditions = append(h.Conditions, nodeCond{k.Type, k.Status})
	}
	for _, d := range c.DaemonSets {
		h.DaemonSets = append(h.DaemonSets, d.Namespace+"/"+d.Name)
	}
	p.Health = h
}

// observeHealth takes the Node's conditions, boot ID and Ready
// transitions; wasReady is Ready before this event.
func (w *World) observeHealth(n *Node, o *corev1.Node, wasReady bool) {
	h := &n.health
	keep := w.keepHealthHistory()
	var before healthState
	if keep {
		before = h.snapshot()
	}
	h.conds = h.conds[:0]
	for _, c := range o.Status.Conditions {
		if c.Type != corev1.NodeReady {
			h.conds = append(h.conds, nodeCond{string(c.Type), string(c.Status)})
		}
	}
	boot := o.Status.NodeInfo.BootID
	newBoot := boot != h.bootID
	h.bootID, h.ready = boot, n.Ready
	switch {
	case !n.Ready:
		h.readySince = time.Time{}
	case (!wasReady || newBoot) && w.clock != nil:
		h.readySince = w.clock().Truncate(time.Second)
	}
	if keep && !before.same(&h.healthState) {
		w.remember(h, before)
	}
}

// countDaemonSetPod adds d to the count of a Ready DaemonSet pod on its
// node.
func (w *World) countDaemonSetPod(p podInfo, d int) {
	if p.ds == "" || !p.ready || p.terminating {
		return
	}
	h := &w.node(p.node).health
	if w.keepHealthHistory() {
		w.remember(h, h.snapshot())
	}
	if h.dsReady == nil {
		h.dsReady = map[string]int{}
	}
	h.dsReady[p.ds] += d
	if h.dsReady[p.ds] == 0 {
		delete(h.dsReady, p.ds)
	}
}

// keepHealthHistory reports whether any live pool has health checks (and
// the World has a clock): only then is a node's past state kept.
func (w *World) keepHealthHistory() bool {
	if w.clock == nil {
		return false
	}
	for _, p := range w.poolList {
		if p.Health.any() {
			return true
		}
	}
	return false
}

// snapshot copies the current state.
func (h *nodeHealth) snapshot() healthState {
	s := h.healthState
	s.conds = slices.Clone(h.conds)
	s.dsReady = maps.Clone(h.dsReady)
	return s
}

// same reports whether s and t are the same state.
func (s *healthState) same(t *healthState) bool {
	return s.ready == t.ready && s.readySince.Equal(t.readySince) && s.bootID == t.bootID && slices.Equal(s.conds, t.conds) && maps.Equal(s.dsReady, t.dsReady)
}

// remember records before as a past state that ends now, and forgets
// those that ended more than HealthStale ago.
func (w *World) remember(h *nodeHealth, before healthState) {
	now := w.clock()
	before.until = now
	h.past = append(h.past, before)
	i := 0
	for i < len(h.past) && now.Sub(h.past[i].until) > HealthStale {
		i++
	}
	h.past = slices.Delete(h.past, 0, i)
}

// daemonSetOf is namespace/name of the DaemonSet that controls p, "".
func daemonSetOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return p.Namespace + "/" + o.Name
		}
	}
	return ""
}

// podReady reports whether p's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// unhealthy says which of the pool's checks n does not pass at now, ""
// when it passes them now, or passed them at the end of a state of its
// current boot that ended at most HealthStale ago.
func unhealthy(n *Node, h *poolHealth, now time.Time) string {
	why := h.unmet(&n.health.healthState, now)
	if why == "" {
		return ""
	}
	for i := range n.health.past {
		s := &n.health.past[i]
		if s.bootID == n.health.bootID && now.Sub(s.until) <= HealthStale && h.unmet(s, s.until) == "" {
			return ""
		}
	}
	return why
}

// unmet says which checks state s does not pass at time at, "" for none.
func (h *poolHealth) unmet(s *healthState, at time.Time) string {
	if !s.ready {
		return "the Node is not Ready"
	}
	var why []string
	if h.ReadyFor > 0 {
		if since := s.readySince; since.IsZero() || at.Sub(since) < h.ReadyFor {
			why = append(why, fmt.Sprintf("Ready since %s, less than readyFor %s", since.Format(time.RFC3339), h.ReadyFor))
		}
	}
	for _, want := range h.Conditions {
		got := "not reported"
		for _, c := range s.conds {
			if c.typ == want.typ {
				got = c.status
			}
		}
		if got != want.status {
			why = append(why, fmt.Sprintf("condition %s is %s, want %s", want.typ, got, want.status))
		}
	}
	for _, ds := range h.DaemonSets {
		if s.dsReady[ds] == 0 {
			why = append(why, fmt.Sprintf("no Ready pod of DaemonSet %s on it", ds))
		}
	}
	return strings.Join(why, "; ")
}

// checkUpdatedHealthy judges a BootcNode's phase change: from a slot phase
// (Draining, Rebooting, Verifying) into Updated, the node must pass its
// pool's health checks.
func (c *Checker) checkUpdatedHealthy(n *Node, from, to v1alpha1.NodePhase) {
	if !c.enabled[scenario.InvUpdatedHealthy] || to != v1alpha1.PhaseUpdated || !holdsSlot(from) {
		return
	}
	p := c.world.pools[n.BootcPool]
	if p == nil || !p.live || !p.Health.any() {
		return
	}
	now := c.now()
	if why := unhealthy(n, &p.Health, now); why != "" {
		c.record(Violation{Invariant: string(scenario.InvUpdatedHealthy), At: now.Sub(c.start), Objects: []string{"BootcNode/" + n.Name, "BootcNodePool/" + p.Name},
			Message: fmt.Sprintf("node %s recorded Updated while it fails pool %s's health checks: %s", n.Name, p.Name, why)})
	}
}
