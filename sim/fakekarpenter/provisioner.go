package fakekarpenter

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// ProvisionerKey is the Provisioner's only key.
var ProvisionerKey = request("provisioner")

// BatchIdleDuration is how long a pending pod waits before the
// Provisioner acts on it (Karpenter's batching window, which also gives
// the scheduler its first try).
const BatchIdleDuration = time.Second

// Provisioner creates NodeClaims for pending pods that fit nowhere: not on
// a Ready, schedulable node's free capacity, nor on a NodeClaim that is
// still launching or initializing. A pod is provisioned for once it has
// been pending BatchIdleDuration. It is a singleton.
type Provisioner struct {
	k    *Karpenter
	seen map[types.UID]time.Time // when each pending pod was first seen
}

// Map enqueues ProvisionerKey for a pod that is pending (created or
// updated unbound and active, not a DaemonSet pod), for a NodeClaim that
// is deleted (its capacity is gone) and for every NodePool event.
func (p *Provisioner) Map(ev apiserver.Event) []reconcile.Request {
	switch o := ev.Object.(type) {
	case *corev1.Pod:
		if ev.Type != apiserver.Deleted && provisionable(o) {
			return []reconcile.Request{ProvisionerKey}
		}
	case *unstructured.Unstructured:
		gvk := o.GroupVersionKind()
		if gvk == NodePoolGVK || (gvk == NodeClaimGVK && ev.Type == apiserver.Deleted) {
			return []reconcile.Request{ProvisionerKey}
		}
	}
	return nil
}

// Reconcile provisions for the pending pods. While pods are pending it
// looks again every PollingPeriod.
func (p *Provisioner) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	k := p.k
	s, err := k.snapshot(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(s.pending) == 0 {
		clear(p.seen)
		return reconcile.Result{}, nil
	}
	now := k.now()
	if p.seen == nil {
		p.seen = map[types.UID]time.Time{}
	}
	pending := map[types.UID]bool{}
	var wait requeue
	var ready []*corev1.Pod
	for _, pod := range s.pending {
		pending[pod.UID] = true
		first, ok := p.seen[pod.UID]
		if !ok {
			first = now
			p.seen[pod.UID] = now
		}
		if d := first.Add(BatchIdleDuration).Sub(now); d > 0 {
			wait.at(d)
			continue
		}
		ready = append(ready, pod)
	}
	for uid := range p.seen {
		if !pending[uid] {
			delete(p.seen, uid)
		}
	}
	if len(ready) == 0 {
		return reconcile.Result{RequeueAfter: wait.d}, nil
	}
	// The pods still batching are packed first, so that their room is
	// not taken twice.
	dests := append(k.destinations(s, nil), k.inflight(s)...)
	left := packSorted(s.pendingForPacking(), dests, nil)
	left = slices.DeleteFunc(left, func(p podReq) bool { return !slices.Contains(ready, p.p) })
	plans, _ := k.plan(s, left)
	for _, pl := range plans {
		if _, err := k.createClaim(ctx, pl, "provisioning"); err != nil {
			return reconcile.Result{}, err
		}
	}
	wait.at(PollingPeriod)
	return reconcile.Result{RequeueAfter: wait.d}, nil
}

// image is the boot image NodeClass nodeClass launches now.
func (k *Karpenter) image(nodeClass string) string {
	if k.opts.NodeClassImages == nil {
		return ""
	}
	return k.opts.NodeClassImages(nodeClass)
}

// createClaim creates the NodeClaim of a plan, from its NodePool's
// template, recording the NodeClass boot image and the template hash.
func (k *Karpenter) createClaim(ctx context.Context, pl *plannedClaim, why string) (*unstructured.Unstructured, error) {
	np := pl.pool
	t := &np.spec.Template
	u := newClaimObject()
	u.SetGenerateName(np.name + "-")
	u.SetLabels(maps.Clone(pl.dest.labels))
	ann := maps.Clone(t.Metadata.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationNodePoolHash] = np.hash
	img := k.image(t.Spec.NodeClassRef.Name)
	if img != "" {
		ann[AnnotationBootImage] = img
	}
	u.SetAnnotations(ann)
	u.SetFinalizers([]string{FinalizerTermination})
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: NodePoolGVK.GroupVersion().String(), Kind: NodePoolGVK.Kind,
		Name: np.name, UID: np.obj.GetUID(), BlockOwnerDeletion: new(true),
	}})
	spec := t.Spec
	spec.Requirements = append(append([]requirement(nil), t.Spec.Requirements...),
		requirement{Key: LabelNodePool, Operator: string(corev1.NodeSelectorOpIn), Values: []string{np.name}})
	spec.Resources = &claimResources{Requests: pl.requests.list()}
	spec.ExpireAfter = np.expireAfter
	content, err := encode(spec)
	if err != nil {
		return nil, fmt.Errorf("encoding a NodeClaim spec for NodePool %s: %w", np.name, err)
	}
	u.Object["spec"] = content
	if err := k.c.Create(ctx, u); err != nil {
		return nil, fmt.Errorf("creating a NodeClaim for NodePool %s: %w", np.name, err)
	}
	k.stats.Launched++
	details := map[string]any{"nodepool": np.name, "for": why, "pods": len(pl.pods)}
	if img != "" {
		details["image"] = img
	}
	k.trace("karpenter/nodeclaim-created", "nodeclaim/"+u.GetName(), details)
	return u, nil
}
