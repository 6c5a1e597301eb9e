package fakekarpenter

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// Health is node repair as Karpenter v1.14 does it (the node.health
// controller, behind the NodeRepair feature gate): a node whose Ready
// condition has been False or Unknown for RepairToleration gets its
// NodeClaim deleted forcefully (drain deadline now), unless more than
// RepairUnhealthyPercent of its NodePool's nodes are unhealthy.
// do-not-disrupt is not checked and there is no do-not-repair. Under
// profile v1.15 repair is a disruption method instead and Health does
// nothing. Its key is a Node's name.
type Health struct{ k *Karpenter }

// Map enqueues a Node when it is created or its Ready status changes.
func (h *Health) Map(ev apiserver.Event) []reconcile.Request {
	n, ok := ev.Object.(*corev1.Node)
	if !ok || !h.enabled() {
		return nil
	}
	switch ev.Type {
	case apiserver.Added:
		return []reconcile.Request{request(n.Name)}
	case apiserver.Modified:
		old, ok := ev.Old.(*corev1.Node)
		if ok && readyStatus(old) != readyStatus(n) {
			return []reconcile.Request{request(n.Name)}
		}
	}
	return nil
}

func (h *Health) enabled() bool { return h.k.opts.NodeRepair && h.k.opts.Profile == ProfileV114 }

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	if c := readyCondition(n); c != nil {
		return c.Status
	}
	return ""
}

// Reconcile repairs the node once it has been unhealthy for the toleration.
func (h *Health) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	k := h.k
	if !h.enabled() {
		return reconcile.Result{}, nil
	}
	node, nc, err := k.nodeAndClaim(ctx, req.Name)
	if err != nil || nc == nil || nc.deleting() {
		return reconcile.Result{}, err
	}
	since, unhealthy := unhealthySince(node)
	if !unhealthy {
		return reconcile.Result{}, nil
	}
	now := k.now()
	if at := since.Add(k.opts.RepairToleration); now.Before(at) {
		return reconcile.Result{RequeueAfter: at.Sub(now)}, nil
	}
	pool := node.Labels[LabelNodePool]
	if tripped, err := k.repairTripped(ctx, pool); err != nil {
		return reconcile.Result{}, err
	} else if tripped {
		k.traceBlocked("repair", node.Name, fmt.Sprintf("more than %d%% of nodes in nodepool %q are unhealthy", RepairUnhealthyPercent, pool))
		return reconcile.Result{RequeueAfter: time.Minute}, nil
	}
	k.unblocked(node.Name)
	k.trace("karpenter/repair", "node/"+node.Name, map[string]any{"profile": k.opts.Profile, "unhealthyFor": now.Sub(since).String()})
	return reconcile.Result{}, k.disruptForcefully(ctx, nc, ReasonUnhealthy, "repair", &now)
}

// repairTripped reports whether more than RepairUnhealthyPercent (rounded
// up) of pool's nodes are unhealthy, which stops repair there.
func (k *Karpenter) repairTripped(ctx context.Context, pool string) (bool, error) {
	var list corev1.NodeList
	if err := k.c.List(ctx, &list, client.MatchingLabels{LabelNodePool: pool}); err != nil {
		return false, fmt.Errorf("listing the nodes of NodePool %s: %w", pool, err)
	}
	unhealthy := 0
	for i := range list.Items {
		if _, bad := unhealthySince(&list.Items[i]); bad {
			unhealthy++
		}
	}
	return unhealthy > (RepairUnhealthyPercent*len(list.Items)+99)/100, nil
}
