package fakekarpenter

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// PodEvents keeps each NodeClaim's lastPodEventTime, which restarts its
// consolidation timer. Its key is a Node's name.
type PodEvents struct{ k *Karpenter }

// Map enqueues the pod's node when a non-DaemonSet pod binds to it (is
// created bound, or gets a nodeName), becomes terminal, starts terminating
// or is deleted.
func (p *PodEvents) Map(ev apiserver.Event) []reconcile.Request {
	pod, ok := ev.Object.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" || ownedByDaemonSet(pod) {
		return nil
	}
	switch ev.Type {
	case apiserver.Added, apiserver.Deleted:
		return []reconcile.Request{request(pod.Spec.NodeName)}
	case apiserver.Modified:
		old, ok := ev.Old.(*corev1.Pod)
		if !ok {
			return nil
		}
		if old.Spec.NodeName == "" || (!terminal(old) && terminal(pod)) || (old.DeletionTimestamp == nil && pod.DeletionTimestamp != nil) {
			return []reconcile.Request{request(pod.Spec.NodeName)}
		}
	}
	return nil
}

// Reconcile sets lastPodEventTime of the node's NodeClaim to now, unless it
// was set less than PodEventDedupe ago.
func (p *PodEvents) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	k := p.k
	_, nc, err := k.nodeAndClaim(ctx, req.Name)
	if err != nil || nc == nil {
		return reconcile.Result{}, err
	}
	now := k.now()
	if last := nc.status.LastPodEventTime; last != nil && !last.IsZero() && now.Sub(last.Time) < PodEventDedupe {
		return reconcile.Result{}, nil
	}
	t := metav1.NewTime(now.Truncate(time.Second))
	nc.status.LastPodEventTime = &t
	return reconcile.Result{}, k.writeStatus(ctx, nc)
}
