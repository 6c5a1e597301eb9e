package cluster

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/sim/scenario"
)

// This file is the faults that make a node fail a pool's health checks
// after a boot: a Node condition that goes bad, a DaemonSet pod that does
// not get Ready, and Ready that flaps. Each is armed on a node and takes
// effect when its next boot is up (any boot: a requested reboot or a
// crash's), for that boot only.

// health is what a node's next boot brings.
type health struct {
	conds  []scenario.NodeConditionAfterBoot
	ds     []scenario.DaemonSetNotReadyAfterBoot
	flaps  *scenario.ReadyFlapsAfterBoot
	active bool // anything armed
}

// ConditionAfterBoot arms a Node condition for the node's next boot.
func (c *Cluster) ConditionAfterBoot(node string, f scenario.NodeConditionAfterBoot) error {
	n, err := c.liveNode(node, "setting a Node condition after the next boot")
	if err != nil {
		return err
	}
	h := &n.host.healthNext
	h.conds, h.active = append(h.conds, f), true
	return nil
}

// DaemonSetNotReadyAfterBoot arms a DaemonSet pod held not Ready for the
// node's next boot.
func (c *Cluster) DaemonSetNotReadyAfterBoot(node string, f scenario.DaemonSetNotReadyAfterBoot) error {
	n, err := c.liveNode(node, "holding a DaemonSet pod not Ready after the next boot")
	if err != nil {
		return err
	}
	h := &n.host.healthNext
	h.ds, h.active = append(h.ds, f), true
	return nil
}

// ReadyFlapsAfterBoot arms Ready flaps for the node's next boot.
func (c *Cluster) ReadyFlapsAfterBoot(node string, f scenario.ReadyFlapsAfterBoot) error {
	n, err := c.liveNode(node, "flapping Ready after the next boot")
	if err != nil {
		return err
	}
	h := &n.host.healthNext
	h.flaps, h.active = &f, true
	return nil
}

// healthBoot ends the last boot's health faults and starts what this boot
// brings, before the Node is written Ready (the conditions go with that
// write, and the DaemonSet pods are held before they start).
func (h *host) healthBoot() {
	if h.dsHeld == nil && h.condH == nil && h.flapsLeft == 0 && !h.healthNext.active {
		return // nothing armed, nothing to end: the common case
	}
	for _, e := range h.condH {
		e.Cancel()
	}
	h.condH, h.dsHeld, h.flapsLeft, h.flapSpec = nil, nil, 0, nil
	n, now := h.n, h.c.eng.Now()
	stamp := h.c.kubeletNow(n.name) // the node problem detector's clock
	base := h.c.groupConditions(n.g, stamp)
	next := h.healthNext
	h.healthNext = health{}
	conds := slices.Clone(base)
	for _, f := range next.conds {
		conds = setCondition(conds, f.Type, corev1.ConditionStatus(f.Status), stamp)
		h.c.trace("node/condition", h.object(), map[string]any{"type": f.Type, "status": string(f.Status), "bootID": h.bootID()})
		if f.For != nil {
			typ := f.Type
			h.condH = append(h.condH, h.c.eng.After(*f.For, "node/condition/"+n.name, func() { h.restoreCondition(typ) }))
		}
	}
	n.conds = mergeTimes(n.conds, conds)
	for _, f := range next.ds {
		if h.dsHeld == nil {
			h.dsHeld = map[string]time.Time{}
		}
		var until time.Time
		details := map[string]any{"daemonSet": f.DaemonSet, "bootID": h.bootID()}
		if f.For != nil {
			until = now.Add(*f.For)
			details["for"] = f.For.String()
		}
		h.dsHeld[f.DaemonSet] = until
		h.c.trace("node/daemonset-held", h.object(), details)
	}
	if f := next.flaps; f != nil {
		h.flapsLeft, h.flapSpec = f.Flaps, f
	}
}

// restoreCondition sets condition typ back to what the node's group
// says, or removes it, and writes the Node status.
func (h *host) restoreCondition(typ string) {
	n := h.n
	var want *corev1.NodeCondition
	for _, b := range h.c.groupConditions(n.g, h.c.kubeletNow(n.name)) {
		if b.Type == corev1.NodeConditionType(typ) {
			want = &b
		}
	}
	if want != nil {
		n.conds = setCondition(n.conds, typ, want.Status, h.c.kubeletNow(n.name))
	} else {
		n.conds = slices.DeleteFunc(n.conds, func(c corev1.NodeCondition) bool { return string(c.Type) == typ })
	}
	h.c.trace("node/condition-restored", h.object(), map[string]any{"type": typ})
	if h.state == hostUp || h.state == hostShuttingDown {
		h.c.writeConditions(n)
	}
}

// faultFlapDown turns a node NotReady for one flap of ReadyFlapsAfterBoot.
func (h *host) faultFlapDown() {
	h.flapH = nil
	if h.state != hostUp || h.flapsLeft <= 0 {
		return
	}
	h.flapsLeft--
	h.c.nodeDown(h.n, "KubeletNotReady")
	h.flapH = h.c.eng.After(h.flapSpec.NotReady, "node/flap/"+h.n.name, h.faultFlapUp)
}

// faultFlapUp ends a flap; another follows while any is left.
func (h *host) faultFlapUp() {
	h.flapH = nil
	if h.state != hostUp {
		return
	}
	h.c.nodeUp(h.n)
	if h.flapsLeft > 0 {
		h.flapH = h.c.eng.After(h.flapSpec.Ready, "node/flap/"+h.n.name, h.faultFlapDown)
	}
}

// groupConditions are the conditions a node of group g reports, sorted
// by type, each as of now (mergeTimes keeps earlier times).
func (c *Cluster) groupConditions(g *group, now time.Time) []corev1.NodeCondition {
	if len(g.spec.Conditions) == 0 {
		return nil
	}
	out := make([]corev1.NodeCondition, 0, len(g.spec.Conditions))
	for _, sc := range g.spec.Conditions {
		out = append(out, corev1.NodeCondition{Type: corev1.NodeConditionType(sc.Type), Status: corev1.ConditionStatus(sc.Status),
			Reason: "AsConfigured", LastTransitionTime: metav1.NewTime(now.Truncate(time.Second))})
	}
	slices.SortFunc(out, func(a, b corev1.NodeCondition) int { return strings.Compare(string(a.Type), string(b.Type)) })
	return out
}

// setCondition sets typ to status in conds (sorted by type), its
// transition time now when it changes.
func setCondition(conds []corev1.NodeCondition, typ string, status corev1.ConditionStatus, now time.Time) []corev1.NodeCondition {
	i, found := slices.BinarySearchFunc(conds, typ, func(c corev1.NodeCondition, t string) int { return strings.Compare(string(c.Type), t) })
	at := metav1.NewTime(now.Truncate(time.Second))
	if !found {
		return slices.Insert(conds, i, corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: status, Reason: "HealthFault", LastTransitionTime: at})
	}
	if conds[i].Status != status {
		conds[i].Status, conds[i].Reason, conds[i].LastTransitionTime = status, "HealthFault", at
	}
	return conds
}

// mergeTimes is next with the transition times of old kept where the
// status did not change.
func mergeTimes(old, next []corev1.NodeCondition) []corev1.NodeCondition {
	for i := range next {
		for _, o := range old {
			if o.Type == next[i].Type && o.Status == next[i].Status {
				next[i].LastTransitionTime, next[i].Reason = o.LastTransitionTime, o.Reason
			}
		}
	}
	return next
}

// conditions is the Node's condition list: Ready, then the others of n
// with their heartbeat now.
func (c *Cluster) conditions(n *node, ready corev1.NodeCondition, now metav1.Time) []corev1.NodeCondition {
	out := make([]corev1.NodeCondition, 0, 1+len(n.conds))
	out = append(out, ready)
	for _, k := range n.conds {
		k.LastHeartbeatTime = now
		out = append(out, k)
	}
	return out
}

// writeConditions writes the Node status with its conditions as they are
// now and Ready as last written.
func (c *Cluster) writeConditions(n *node) {
	c.writeNodeStatus(n, c.nodeStatus(n, n.ready, n.readyReason), "writing the conditions of node ")
}
