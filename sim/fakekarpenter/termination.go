package fakekarpenter

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// Termination finalizes a Node that is being deleted: it deletes its
// NodeClaim if that is not being deleted yet, taints the Node
// karpenter.sh/disrupted:NoSchedule, drains it in tiers through the
// Eviction API (a PDB's 429 is retried), force-deletes pods at the drain
// deadline, and once the Node is drained (and at least MinDrain after its
// deletion) terminates the instance and removes the finalizer. Its key is
// the Node's name.
type Termination struct{ k *Karpenter }

// Map enqueues a Node for its events while it is being deleted, and for the
// events of pods on a node whose termination is under way.
func (t *Termination) Map(ev apiserver.Event) []reconcile.Request {
	switch o := ev.Object.(type) {
	case *corev1.Node:
		if o.DeletionTimestamp != nil && ev.Type != apiserver.Deleted {
			return []reconcile.Request{request(o.Name)}
		}
	case *corev1.Pod:
		if o.Spec.NodeName != "" && t.k.draining[o.Spec.NodeName] {
			return []reconcile.Request{request(o.Spec.NodeName)}
		}
	}
	return nil
}

// Reconcile advances the termination of one Node.
func (t *Termination) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	k := t.k
	node, err := k.getNode(ctx, req.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if node == nil || node.DeletionTimestamp == nil || !slices.Contains(node.Finalizers, FinalizerTermination) {
		delete(k.draining, req.Name)
		return reconcile.Result{}, nil
	}
	k.draining[node.Name] = true
	var nc *nodeClaim
	if name := k.claimOf(node); name != "" {
		if nc, err = k.getClaim(ctx, name); err != nil {
			return reconcile.Result{}, err
		}
		if nc != nil && !nc.deleting() {
			if err := k.c.Delete(ctx, nc.obj); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("deleting NodeClaim %s of deleted node %s: %w", name, node.Name, err)
			}
			if nc, err = k.getClaim(ctx, name); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if !hasTaint(node.Spec.Taints, disruptedTaint) {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
		if err := k.c.Update(ctx, node); err != nil {
			return reconcile.Result{}, fmt.Errorf("tainting node %s %s: %w", node.Name, TaintDisrupted, err)
		}
		k.trace("karpenter/tainted", "node/"+node.Name, map[string]any{"taint": TaintDisrupted})
	}
	now := k.now()
	deadline := drainDeadline(nc)
	drained, err := k.drain(ctx, node, deadline, now)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !drained {
		if nc != nil && nc.setCond(ConditionDrained, "Unknown", "Draining", "Draining", now) {
			if err := k.writeStatus(ctx, nc); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{RequeueAfter: DrainRequeue}, nil
	}
	if end := node.DeletionTimestamp.Add(MinDrain); now.Before(end) {
		return reconcile.Result{RequeueAfter: end.Sub(now)}, nil
	}
	if nc != nil && nc.setCond(ConditionDrained, "True", "Drained", "", now) {
		if err := k.writeStatus(ctx, nc); err != nil {
			return reconcile.Result{}, err
		}
	}
	if nc == nil || !nc.isTrue(ConditionInstanceTerminating) {
		if err := k.opts.Provider.Terminate(ctx, node.Name); err != nil {
			k.trace("karpenter/terminate-failed", "node/"+node.Name, map[string]any{"error": err.Error()})
			return reconcile.Result{RequeueAfter: InstanceTerminationRequeue}, nil
		}
		if nc != nil {
			nc.setCond(ConditionInstanceTerminating, "True", "InstanceTerminating", "", now)
			if err := k.writeStatus(ctx, nc); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	node.Finalizers = slices.DeleteFunc(node.Finalizers, func(f string) bool { return f == FinalizerTermination })
	if err := k.c.Update(ctx, node); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing the finalizer of node %s: %w", node.Name, err)
	}
	delete(k.draining, node.Name)
	k.unblocked(node.Name)
	k.stats.Terminated++
	k.trace("karpenter/terminated", "node/"+node.Name, map[string]any{"took": now.Sub(node.DeletionTimestamp.Time).String()})
	return reconcile.Result{}, nil
}

// drainDeadline is when nc's pods are force-deleted: the recorded
// termination timestamp, else deletion + terminationGracePeriod; nil when
// the drain may wait forever.
func drainDeadline(nc *nodeClaim) *time.Time {
	if nc == nil {
		return nil
	}
	if s, ok := nc.obj.GetAnnotations()[AnnotationTerminationTimestamp]; ok {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			return &t
		}
	}
	if nc.spec.TerminationGracePeriod == "" || nc.obj.GetDeletionTimestamp() == nil {
		return nil
	}
	tgp, err := time.ParseDuration(nc.spec.TerminationGracePeriod)
	if err != nil {
		return nil
	}
	t := nc.obj.GetDeletionTimestamp().Add(tgp)
	return &t
}

// drainable reports whether the drain waits for p: not terminal, not
// mirror, not tolerating the disrupted taint (DaemonSet pods usually do),
// and not stuck terminating.
func drainable(p *corev1.Pod, now time.Time) bool {
	if terminal(p) || mirror(p) || tolerates(p.Spec.Tolerations, disruptedTaint) {
		return false
	}
	return p.DeletionTimestamp == nil || now.Sub(p.DeletionTimestamp.Time) <= StuckTerminating
}

// tier is the drain order: non-critical pods, non-critical DaemonSet pods,
// critical pods, critical DaemonSet pods.
func tier(p *corev1.Pod) int {
	t := 0
	if ownedByDaemonSet(p) {
		t = 1
	}
	if critical(p) {
		t += 2
	}
	return t
}

// drain evicts the drainable pods of node's first non-empty tier and
// force-deletes those whose grace period would outlast the deadline. It
// reports whether the node is drained.
func (k *Karpenter) drain(ctx context.Context, node *corev1.Node, deadline *time.Time, now time.Time) (bool, error) {
	pods, err := k.podsOnNode(ctx, node.Name)
	if err != nil {
		return false, err
	}
	var tiers [4][]*corev1.Pod
	remaining := 0
	for _, p := range pods {
		if !drainable(p, now) {
			continue
		}
		remaining++
		if deadline != nil && !terminating(p) {
			grace := 30 * time.Second
			if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
				grace = time.Duration(*s) * time.Second
			}
			if !now.Before(deadline.Add(-grace)) {
				if err := k.c.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
					return false, fmt.Errorf("deleting pod %s/%s at the drain deadline of node %s: %w", p.Namespace, p.Name, node.Name, err)
				}
				k.trace("karpenter/pod-deleted", "pod/"+p.Namespace+"/"+p.Name, map[string]any{"node": node.Name, "reason": "drain deadline"})
				continue
			}
		}
		tiers[tier(p)] = append(tiers[tier(p)], p)
	}
	for _, group := range tiers {
		if len(group) == 0 {
			continue
		}
		for _, p := range group {
			if terminating(p) {
				continue
			}
			key := p.Namespace + "/" + p.Name
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			err := k.c.SubResource("eviction").Create(ctx, p, ev)
			switch {
			case err == nil:
				delete(k.evicting, key)
				k.trace("karpenter/evicted", "pod/"+key, map[string]any{"node": node.Name})
			case apierrors.IsNotFound(err):
			case apierrors.IsTooManyRequests(err):
				if k.evicting[key] != err.Error() {
					k.evicting[key] = err.Error()
					k.trace("karpenter/eviction-refused", "pod/"+key, map[string]any{"node": node.Name, "error": err.Error()})
				}
			default:
				k.trace("karpenter/eviction-failed", "pod/"+key, map[string]any{"node": node.Name, "error": err.Error()})
			}
		}
		break
	}
	return remaining == 0, nil
}
