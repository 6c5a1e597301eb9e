package fakekarpenter

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// Expiry deletes a NodeClaim at creationTimestamp + expireAfter: directly,
// with no budget, no do-not-disrupt check and no replacement first. Its
// key is the NodeClaim's name.
type Expiry struct{ k *Karpenter }

// Map enqueues a NodeClaim when it is created.
func (e *Expiry) Map(ev apiserver.Event) []reconcile.Request {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type == apiserver.Added && u.GroupVersionKind() == NodeClaimGVK {
		return []reconcile.Request{request(u.GetName())}
	}
	return nil
}

// Reconcile expires the NodeClaim when its time has come.
func (e *Expiry) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	k := e.k
	nc, err := k.getClaim(ctx, req.Name)
	if err != nil || nc == nil || nc.deleting() {
		return reconcile.Result{}, err
	}
	spec := nc.spec.ExpireAfter
	if spec == "" {
		spec = DefaultExpireAfter.String()
	}
	d, err := parseNillableDuration(spec)
	if err != nil || d == nil {
		return reconcile.Result{}, nil
	}
	now := k.now()
	at := nc.obj.GetCreationTimestamp().Add(*d)
	if now.Before(at) {
		return reconcile.Result{RequeueAfter: at.Sub(now)}, nil
	}
	return reconcile.Result{}, k.disruptForcefully(ctx, nc, ReasonExpired, "expiration", nil)
}

// disruptForcefully deletes nc at once for reason: the DisruptionReason
// condition, an optional drain deadline (now, for a forceful repair), then
// the deletion.
func (k *Karpenter) disruptForcefully(ctx context.Context, nc *nodeClaim, reason, method string, deadline *time.Time) error {
	now := k.now()
	if deadline != nil {
		u := nc.obj.DeepCopy()
		a := u.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationTerminationTimestamp] = deadline.UTC().Format(time.RFC3339)
		u.SetAnnotations(a)
		if err := k.c.Update(ctx, u); err != nil {
			return fmt.Errorf("setting the drain deadline of NodeClaim %s: %w", nc.name(), err)
		}
		nc.obj = u
	}
	if nc.setCond(ConditionDisruptionReason, "True", reason, "", now) {
		if err := k.writeStatus(ctx, nc); err != nil {
			return err
		}
	}
	if err := k.c.Delete(ctx, nc.obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s (%s): %w", nc.name(), reason, err)
	}
	k.stats.Deleted[reason]++
	object := "node/" + nc.nodeName()
	if nc.nodeName() == "" {
		object = "nodeclaim/" + nc.name()
	}
	k.trace("karpenter/disrupt", object, map[string]any{
		"method": method, "reason": reason, "decision": "delete", "nodeclaim": nc.name(), "forceful": true,
	})
	return nil
}

// unhealthySince returns when n's Ready condition became False or Unknown,
// and false when it is True or missing.
func unhealthySince(n *corev1.Node) (time.Time, bool) {
	c := readyCondition(n)
	if c == nil || c.Status == corev1.ConditionTrue {
		return time.Time{}, false
	}
	return c.LastTransitionTime.Time, true
}
