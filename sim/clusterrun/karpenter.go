package clusterrun

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
)

// KarpenterRecord is one of the records the twin's fake Karpenter traces
// about its decisions (kind, object, details), which the invariant
// checker takes with KarpenterTrace (no-reap-while-updating, no-churn).
type KarpenterRecord struct {
	Kind, Object string
	Details      map[string]any
}

// KarpenterDecisions reads the real Karpenter's decisions from the watch
// events of NodeClaims and Nodes, as the records the fake Karpenter
// traces, so that the cluster target judges them with the same checker:
//
//   - karpenter/disrupt: a NodeClaim's DisruptionReason condition turns
//     True (Karpenter v1.15's disruption queue sets it, with the
//     karpenter.sh/disrupted taint, when it carries out a validated
//     command: emptiness, consolidation, drift, and repair, reason
//     Unhealthy); or a NodeClaim is deleted without one at or after its
//     creation plus expireAfter: an expiry (reason Expired, forceful),
//     which Karpenter's expiration controller does by deleting the claim.
//     A claim deleted otherwise (an admin, the run's removeNodes) is not
//     Karpenter's decision, as in the twin.
//
//   - karpenter/tainted: a Node gains the karpenter.sh/disrupted taint.
//
//   - karpenter/command-abandoned: a Node loses that taint and is not
//     deleted: Karpenter gave its command up (its disruption queue rolls
//     a failed command back by removing the taint and the NodeClaim's
//     DisruptionReason condition), and its decision about the node ends.
//     A NodeClaim whose DisruptionReason condition goes away is ready to
//     be reported again when Karpenter decides anew.
//
//   - karpenter/terminated: a Node is deleted.
//
//   - karpenter/evicted: a pod starts terminating (or is deleted) on a
//     Node that carries the karpenter.sh/disrupted taint, and bootroll
//     (the controller or the daemon, through the run's proxies: Asked)
//     did not ask for it. Karpenter's termination taints the Node before
//     it evicts, and evicts only pods of Nodes it terminates; this
//     covers its deletions at the drain deadline too (the twin's
//     karpenter/pod-deleted, which the checker judges the same way). A
//     pod that someone else removed from such a Node in the same moment
//     (a scale-down) would be counted as Karpenter's.
type KarpenterDecisions struct {
	// Asked, when set, reports whether bootroll asked to remove the pod
	// namespace/name; without it no karpenter/evicted record is made.
	Asked     func(key string) bool
	disrupted map[string]bool   // node -> it carries karpenter.sh/disrupted
	claimNode map[string]string // claim -> its Node (status.nodeName)
	reason    map[string]string // claim -> the DisruptionReason already reported
	deleting  map[string]bool
	// RepairAfter, when set, is the repair toleration of a Karpenter that
	// repairs without the disruption queue (v1.14: its node.health
	// controller deletes the NodeClaim, with no DisruptionReason): a
	// claim deleted otherwise unexplained while its Node has been not
	// Ready (False or Unknown) at least this long is that repair
	// (karpenter/repair, as the fake Karpenter traces it).
	RepairAfter time.Duration
	notReady    map[string]time.Time // node -> since when it is not Ready
}

// NewKarpenterDecisions returns an empty reader.
func NewKarpenterDecisions() *KarpenterDecisions {
	return &KarpenterDecisions{claimNode: map[string]string{}, reason: map[string]string{}, deleting: map[string]bool{}, notReady: map[string]time.Time{}, disrupted: map[string]bool{}}
}

// DecisionUnseen is the decision of a karpenter/disrupt record read from
// a DisruptionReason condition: whether Karpenter deletes the node or
// replaces it first is not in the condition (sim/fidelity tells them
// apart afterwards by whether a Node was created before the deletion).
const DecisionUnseen = "delete or replace"

// expirySlack is how much earlier than creation plus expireAfter a
// claim's deletion may be and still count as its expiry (the clocks of
// the API server and Karpenter are the same host's; timestamps have
// second precision).
const expirySlack = 2 * time.Second

// methodOf is the fake Karpenter's method name of a disruption reason.
func methodOf(reason string) string {
	switch reason {
	case fakekarpenter.ReasonEmpty:
		return fakekarpenter.MethodEmptiness
	case fakekarpenter.ReasonDrifted:
		return fakekarpenter.MethodDrift
	case fakekarpenter.ReasonUnhealthy:
		return fakekarpenter.MethodRepair
	case fakekarpenter.ReasonUnderutilized:
		return "consolidation"
	}
	return strings.ToLower(reason)
}

// Observe returns the records that the event shows.
func (k *KarpenterDecisions) Observe(ev apiserver.Event) []KarpenterRecord {
	switch o := ev.Object.(type) {
	case *corev1.Node:
		if ev.Type == apiserver.Deleted {
			delete(k.notReady, o.Name)
			delete(k.disrupted, o.Name)
			return []KarpenterRecord{{Kind: "karpenter/terminated", Object: "node/" + o.Name, Details: map[string]any{}}}
		}
		k.observeReady(o)
		tainted := hasDisruptedTaint(o)
		was := k.disrupted[o.Name]
		if tainted {
			k.disrupted[o.Name] = true
		} else {
			delete(k.disrupted, o.Name)
		}
		switch {
		case tainted && !was:
			return []KarpenterRecord{{Kind: "karpenter/tainted", Object: "node/" + o.Name, Details: map[string]any{}}}
		case was && !tainted && o.DeletionTimestamp == nil:
			return []KarpenterRecord{{Kind: "karpenter/command-abandoned", Object: "node/" + o.Name, Details: map[string]any{"reason": "the karpenter.sh/disrupted taint was removed"}}}
		}
	case *corev1.Pod:
		key, removed := PodRemoval(ev)
		if !removed || k.Asked == nil || !k.disrupted[o.Spec.NodeName] || k.Asked(key) {
			return nil
		}
		return []KarpenterRecord{{Kind: "karpenter/evicted", Object: "pod/" + key, Details: map[string]any{"node": o.Spec.NodeName}}}
	case *unstructured.Unstructured:
		if o.GetKind() != "NodeClaim" {
			return nil
		}
		return k.claim(ev.Type, o)
	}
	return nil
}

func (k *KarpenterDecisions) claim(t apiserver.EventType, u *unstructured.Unstructured) []KarpenterRecord {
	name := u.GetName()
	if n, _, _ := unstructured.NestedString(u.Object, "status", "nodeName"); n != "" {
		k.claimNode[name] = n
	}
	node := k.claimNode[name]
	if t == apiserver.Deleted {
		delete(k.claimNode, name)
		delete(k.reason, name)
		delete(k.deleting, name)
		return nil
	}
	if node == "" {
		return nil
	}
	var out []KarpenterRecord
	if r := disruptionReason(u); r == "" && k.reason[name] != "" && u.GetDeletionTimestamp() == nil {
		delete(k.reason, name) // a command rolled back: the next one is a new decision
	}
	if r := disruptionReason(u); r != "" && k.reason[name] != r {
		k.reason[name] = r
		out = append(out, KarpenterRecord{Kind: "karpenter/disrupt", Object: "node/" + node, Details: map[string]any{
			"method": methodOf(r), "reason": r, "decision": DecisionUnseen, "nodeclaim": name}})
	}
	if del := u.GetDeletionTimestamp(); del != nil && !k.deleting[name] {
		k.deleting[name] = true
		switch since, down := k.notReady[node]; {
		case k.reason[name] != "":
		case expired(u, del.Time):
			out = append(out, KarpenterRecord{Kind: "karpenter/disrupt", Object: "node/" + node, Details: map[string]any{
				"method": "expiration", "reason": fakekarpenter.ReasonExpired, "decision": "delete", "nodeclaim": name, "forceful": true}})
		case k.RepairAfter > 0 && down && !del.Add(expirySlack).Before(since.Add(k.RepairAfter)):
			out = append(out, KarpenterRecord{Kind: "karpenter/repair", Object: "node/" + node, Details: map[string]any{
				"profile": "v1.14", "unhealthyFor": del.Sub(since).Round(time.Second).String(), "nodeclaim": name}})
		}
	}
	return out
}

// observeReady keeps since when a Node is not Ready: its Ready
// condition's lastTransitionTime while the condition is not True.
func (k *KarpenterDecisions) observeReady(n *corev1.Node) {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			delete(k.notReady, n.Name)
		} else if _, ok := k.notReady[n.Name]; !ok {
			since := c.LastTransitionTime.Time
			if since.IsZero() {
				since = time.Now() // edge: no transition time; seen not Ready now (wall clock, as the run's)
			}
			k.notReady[n.Name] = since
		}
		return
	}
}

// disruptionReason is the reason of the claim's DisruptionReason
// condition when it is True.
func disruptionReason(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == fakekarpenter.ConditionDisruptionReason && m["status"] == "True" {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}

// expired reports whether a claim deleted at del had reached its
// creation plus spec.expireAfter.
func expired(u *unstructured.Unstructured, del time.Time) bool {
	s, _, _ := unstructured.NestedString(u.Object, "spec", "expireAfter")
	d, err := time.ParseDuration(s)
	if err != nil { // Never, or none
		return false
	}
	return !del.Add(expirySlack).Before(u.GetCreationTimestamp().Add(d))
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == fakekarpenter.TaintDisrupted {
			return true
		}
	}
	return false
}
