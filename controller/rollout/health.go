package rollout

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// HealthPoll is how often a node waiting for a DaemonSet pod to be Ready
// is looked at again: the node reconciler does not watch Pods (every pod
// of the cluster would wake it), so it polls while such a check is unmet.
// Node changes (conditions, Ready) wake it through its Node watch.
const HealthPoll = 10 * time.Second

// Health is a node's health after its reboot (NodeHealth).
type Health struct {
	// Healthy: the Node is Ready and passes every check of the pool.
	Healthy bool
	// Unmet names the first check not passed, for status messages and a
	// HealthTimeout's message, and stays the same while that check is
	// unmet: "Node not Ready", "Ready for less than 2m0s",
	// "condition NetworkUnavailable is True, want False", "DaemonSet
	// kube-system/calico-node: pod calico-node-x not Ready".
	Unmet string
	// Wait is when to look again when unmet (0: on the next change of the
	// Node, or the caller's own poll).
	Wait time.Duration
}

// NodeHealth decides whether Node n passes checks at now: Ready (always),
// Ready without a break for checks.readyFor counted from the Ready
// condition's lastTransitionTime but not from before since (the reboot),
// the named conditions, and a Ready pod of each named DaemonSet among
// pods (the pods bound to the node; others are ignored). Checks are
// judged in that order and the first unmet one is named.
func NodeHealth(checks *v1alpha1.HealthChecks, n *corev1.Node, pods []corev1.Pod, since, now time.Time) Health {
	ready := nodeCondition(n, corev1.NodeReady)
	if ready == nil || ready.Status != corev1.ConditionTrue {
		return Health{Unmet: "Node not Ready"}
	}
	if checks == nil {
		return Health{Healthy: true}
	}
	if checks.ReadyFor != nil && checks.ReadyFor.Duration > 0 {
		from := ready.LastTransitionTime.Time
		if from.Before(since) {
			from = since
		}
		if up := now.Sub(from); up < checks.ReadyFor.Duration {
			return Health{Unmet: fmt.Sprintf("Ready for less than %s", checks.ReadyFor.Duration), Wait: checks.ReadyFor.Duration - up}
		}
	}
	for _, c := range checks.NodeConditions {
		got := nodeCondition(n, corev1.NodeConditionType(c.Type))
		switch {
		case got == nil:
			return Health{Unmet: fmt.Sprintf("condition %s not reported, want %s", c.Type, c.Status)}
		case string(got.Status) != c.Status:
			return Health{Unmet: fmt.Sprintf("condition %s is %s, want %s", c.Type, got.Status, c.Status)}
		}
	}
	for _, ds := range checks.DaemonSets {
		if why := daemonSetPodReady(ds, n.Name, pods, since); why != "" {
			return Health{Unmet: fmt.Sprintf("DaemonSet %s/%s: %s", ds.Namespace, ds.Name, why), Wait: HealthPoll}
		}
	}
	return Health{Healthy: true}
}

// NeedsPods reports whether checks read the pods on the node.
func NeedsPods(checks *v1alpha1.HealthChecks) bool {
	return checks != nil && len(checks.DaemonSets) > 0
}

// HasHealthChecks reports whether checks asks for more than Ready.
func HasHealthChecks(checks *v1alpha1.HealthChecks) bool {
	return checks != nil && (checks.ReadyFor != nil || len(checks.NodeConditions) > 0 || len(checks.DaemonSets) > 0)
}

// daemonSetPodReady is "" when a pod of ds on node became Ready after
// since (the reboot), and else why not. A Ready condition that has not
// changed since before the reboot is the last boot's: a reboot shorter
// than the node lifecycle controller's grace period leaves it True until
// the kubelet of the new boot restarts the pod's containers.
func daemonSetPodReady(ds v1alpha1.DaemonSetCheck, node string, pods []corev1.Pod, since time.Time) string {
	why := "no pod on the node"
	for i := range pods {
		p := &pods[i]
		if p.Namespace != ds.Namespace || p.Spec.NodeName != node || !ownedByDaemonSet(p, ds.Name) {
			continue
		}
		ready := podReady(p)
		switch {
		case p.DeletionTimestamp == nil && ready != nil && !ready.LastTransitionTime.Time.Before(since.Truncate(time.Second)):
			return ""
		case p.DeletionTimestamp == nil && ready != nil:
			why = fmt.Sprintf("pod %s Ready since before the reboot (%s)", p.Name, ready.LastTransitionTime.UTC().Format(time.RFC3339))
		default:
			why = fmt.Sprintf("pod %s not Ready", p.Name)
		}
	}
	return why
}

// ownedByDaemonSet reports whether p's controller is the DaemonSet name
// (of p's namespace).
func ownedByDaemonSet(p *corev1.Pod, name string) bool {
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" && o.Name == name {
			return true
		}
	}
	return false
}

// podReady is the pod's Ready condition when it is True, else nil.
func podReady(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// nodeCondition is the Node's condition of type t, or nil.
func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	if n == nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
