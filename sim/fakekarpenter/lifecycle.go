package fakekarpenter

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// NodeClaimLifecycle takes a NodeClaim through launch, registration and
// initialization, keeps its Drifted and Consolidatable conditions, enforces
// the launch and registration timeouts, and finalizes it once deleted.
// Its key is the NodeClaim's name.
type NodeClaimLifecycle struct{ k *Karpenter }

// Map enqueues a NodeClaim for its own events, for every event of its Node
// (found through the Node's ownerReference, or the launch), and for every
// event of its NodePool (static drift, consolidateAfter).
func (l *NodeClaimLifecycle) Map(ev apiserver.Event) []reconcile.Request {
	switch o := ev.Object.(type) {
	case *corev1.Node:
		if name := l.k.claimOf(o); name != "" {
			return []reconcile.Request{request(name)}
		}
	case *unstructured.Unstructured:
		switch o.GroupVersionKind() {
		case NodeClaimGVK:
			return []reconcile.Request{request(o.GetName())}
		case NodePoolGVK:
			return l.claimsOf(o.GetName())
		}
	}
	return nil
}

// MapNodeClass returns the NodeClaims of nodeClass, for the twin to enqueue
// when the NodeClass's image changes (else drift shows within
// DriftRecheck).
func (l *NodeClaimLifecycle) MapNodeClass(ctx context.Context, nodeClass string) []reconcile.Request {
	list, err := l.k.listClaims(ctx)
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, u := range list {
		if name, _, _ := unstructured.NestedString(u.Object, "spec", "nodeClassRef", "name"); name == nodeClass {
			out = append(out, request(u.GetName()))
		}
	}
	return out
}

func (l *NodeClaimLifecycle) claimsOf(pool string) []reconcile.Request {
	list, err := l.k.listClaims(context.Background())
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, u := range list {
		if u.GetLabels()[LabelNodePool] == pool {
			out = append(out, request(u.GetName()))
		}
	}
	return out
}

// claimOf returns the name of n's NodeClaim: its owner, else the NodeClaim
// whose launch returned n's name (remembered, or found by provider ID).
func (k *Karpenter) claimOf(n *corev1.Node) string {
	if name := claimName(n); name != "" {
		return name
	}
	if name := k.launched[n.Name]; name != "" {
		return name
	}
	list, err := k.listClaims(context.Background())
	if err != nil {
		return ""
	}
	for _, u := range list {
		if id, _, _ := unstructured.NestedString(u.Object, "status", "providerID"); id == providerPrefix+n.Name {
			k.launched[n.Name] = u.GetName()
			return u.GetName()
		}
	}
	return ""
}

// Reconcile moves one NodeClaim along its lifecycle.
func (l *NodeClaimLifecycle) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	k := l.k
	nc, err := k.getClaim(ctx, req.Name)
	if err != nil || nc == nil {
		return reconcile.Result{}, err
	}
	if nc.deleting() {
		return k.finalizeClaim(ctx, nc)
	}
	now := k.now()
	before, _ := encode(nc.status)
	var wait requeue
	np, err := k.getPool(ctx, nc.pool())
	if err != nil {
		return reconcile.Result{}, err
	}
	age := now.Sub(nc.obj.GetCreationTimestamp().Time)

	// Launch.
	if !nc.isTrue(ConditionLaunched) {
		img := nc.obj.GetAnnotations()[AnnotationBootImage]
		if img == "" {
			// Created by someone else: launch with the NodeClass image of
			// now, and record it.
			if img = k.image(nc.spec.NodeClassRef.Name); img != "" {
				u := nc.obj.DeepCopy()
				a := maps.Clone(u.GetAnnotations())
				if a == nil {
					a = map[string]string{}
				}
				a[AnnotationBootImage] = img
				u.SetAnnotations(a)
				if err := k.c.Update(ctx, u); err != nil {
					return reconcile.Result{}, fmt.Errorf("recording the boot image of NodeClaim %s: %w", nc.name(), err)
				}
				nc.obj = u
			}
		}
		alloc := k.opts.Capacity(nc.pool())
		nc.status.Capacity, nc.status.Allocatable = alloc, alloc
		launch := nc.obj.DeepCopy()
		st, err := encode(nc.status)
		if err != nil {
			return reconcile.Result{}, err
		}
		launch.Object["status"] = st
		name, err := k.opts.Provider.Launch(ctx, launch, img)
		if err != nil {
			if age >= LaunchTimeout {
				return reconcile.Result{}, k.liveness(ctx, nc, "launch", err.Error())
			}
			nc.setCond(ConditionLaunched, "False", "LaunchFailed", err.Error(), now)
			k.trace("karpenter/launch-failed", "nodeclaim/"+nc.name(), map[string]any{"error": err.Error()})
			if err := k.writeStatus(ctx, nc); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{RequeueAfter: min(InstanceTerminationRequeue, LaunchTimeout-age)}, nil
		}
		nc.status.ProviderID = providerPrefix + name
		nc.status.ImageID = img
		nc.setCond(ConditionLaunched, "True", "Launched", "", now)
		k.launched[name] = nc.name()
		details := map[string]any{"node": name, "nodepool": nc.pool()}
		if img != "" {
			details["image"] = img
		}
		k.trace("karpenter/launched", "nodeclaim/"+nc.name(), details)
		// Record the launch at once: a retry must not launch twice.
		if err := k.writeStatus(ctx, nc); err != nil {
			return reconcile.Result{}, err
		}
		before, _ = encode(nc.status)
	}

	// Registration.
	node, err := k.getNode(ctx, nc.nodeName())
	if err != nil {
		return reconcile.Result{}, err
	}
	if !nc.isTrue(ConditionRegistered) {
		if node == nil {
			if age >= RegistrationTimeout {
				return reconcile.Result{}, k.liveness(ctx, nc, "registration", "the Node did not register")
			}
			nc.setCond(ConditionRegistered, "Unknown", "NodeNotFound", "Node not registered with cluster", now)
			wait.at(RegistrationTimeout - age)
		} else {
			if err := k.register(ctx, nc, node); err != nil {
				return reconcile.Result{}, err
			}
			nc.status.NodeName = node.Name
			nc.setCond(ConditionRegistered, "True", "Registered", "", now)
			k.launched[node.Name] = nc.name()
			k.trace("karpenter/registered", "nodeclaim/"+nc.name(), map[string]any{"node": node.Name})
		}
	}

	// Initialization.
	if nc.isTrue(ConditionRegistered) && !nc.isTrue(ConditionInitialized) && node != nil {
		switch t, has := startupTaint(node, nc.spec.StartupTaints); {
		case !nodeReady(node):
			nc.setCond(ConditionInitialized, "Unknown", "NodeNotReady", "Node status is NotReady", now)
		case has:
			nc.setCond(ConditionInitialized, "Unknown", "StartupTaintsExist", fmt.Sprintf("StartupTaint %q still exists", t.ToString()), now)
		default:
			if node.Labels[LabelInitialized] != "true" {
				node.Labels = maps.Clone(node.Labels)
				node.Labels[LabelInitialized] = "true"
				if err := k.c.Update(ctx, node); err != nil {
					return reconcile.Result{}, fmt.Errorf("labelling node %s initialized: %w", node.Name, err)
				}
			}
			nc.setCond(ConditionInitialized, "True", "Initialized", "", now)
			k.trace("karpenter/initialized", "nodeclaim/"+nc.name(), map[string]any{"node": node.Name})
		}
	}

	// Drift.
	if nc.isTrue(ConditionLaunched) {
		if reason := k.driftReason(nc, np); reason != "" {
			if nc.setCond(ConditionDrifted, "True", reason, "", now) {
				k.trace("karpenter/drifted", "nodeclaim/"+nc.name(), map[string]any{"reason": reason, "node": nc.nodeName()})
			}
		} else {
			nc.clearCond(ConditionDrifted)
		}
		wait.at(DriftRecheck)
	}

	// Consolidatable.
	wait.at(k.consolidatable(nc, np, now))

	if after, _ := encode(nc.status); !reflect.DeepEqual(before, after) {
		if err := k.writeStatus(ctx, nc); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: wait.d}, nil
}

// requeue keeps the earliest positive requeue.
type requeue struct{ d time.Duration }

func (r *requeue) at(d time.Duration) {
	if d > 0 && (r.d == 0 || d < r.d) {
		r.d = d
	}
}

// consolidatable sets or clears the Consolidatable condition and returns
// when it should be looked at again (0 for never).
func (k *Karpenter) consolidatable(nc *nodeClaim, np *nodePool, now time.Time) time.Duration {
	init := nc.cond(ConditionInitialized)
	if np == nil || np.consolidateAfter == nil || init == nil || init.Status != "True" {
		nc.clearCond(ConditionConsolidatable)
		return 0
	}
	base := init.LastTransitionTime.Time
	if nc.status.LastPodEventTime != nil && !nc.status.LastPodEventTime.IsZero() {
		base = nc.status.LastPodEventTime.Time
	}
	at := base.Add(*np.consolidateAfter)
	if now.Before(at) {
		nc.clearCond(ConditionConsolidatable)
		return at.Sub(now)
	}
	nc.setCond(ConditionConsolidatable, "True", "Consolidatable", "", now)
	return 0
}

// driftReason says why nc has drifted from its NodePool or NodeClass, or "".
func (k *Karpenter) driftReason(nc *nodeClaim, np *nodePool) string {
	if np == nil {
		return ""
	}
	ann := nc.obj.GetAnnotations()
	if was := ann[AnnotationBootImage]; was != "" {
		if now := k.image(nc.spec.NodeClassRef.Name); now != "" && now != was {
			return "ImageDrift"
		}
	}
	if h := ann[AnnotationNodePoolHash]; h != "" && h != np.hash {
		return "NodePoolDrifted"
	}
	return ""
}

// startupTaint returns a startup taint the node still has.
func startupTaint(n *corev1.Node, startup []corev1.Taint) (corev1.Taint, bool) {
	for _, t := range startup {
		if hasTaint(n.Spec.Taints, t) {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

// register syncs the Node with its NodeClaim as Karpenter's registration
// does: the termination finalizer, the owner reference, the NodeClaim's
// labels and annotations, its taints and startup taints.
func (k *Karpenter) register(ctx context.Context, nc *nodeClaim, n *corev1.Node) error {
	stored := n.DeepCopy()
	if !slices.Contains(n.Finalizers, FinalizerTermination) {
		n.Finalizers = append(n.Finalizers, FinalizerTermination)
	}
	if claimName(n) == "" {
		n.OwnerReferences = append(n.OwnerReferences, metav1.OwnerReference{
			APIVersion: NodeClaimGVK.GroupVersion().String(), Kind: NodeClaimGVK.Kind,
			Name: nc.name(), UID: nc.obj.GetUID(), BlockOwnerDeletion: new(true),
		})
	}
	n.Labels = maps.Clone(n.Labels)
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	maps.Copy(n.Labels, nc.obj.GetLabels())
	n.Labels[LabelRegistered] = "true"
	if ann := nc.obj.GetAnnotations(); len(ann) > 0 {
		n.Annotations = maps.Clone(n.Annotations)
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		maps.Copy(n.Annotations, ann)
	}
	for _, t := range append(slices.Clone(nc.spec.Taints), nc.spec.StartupTaints...) {
		if !slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect }) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	if reflect.DeepEqual(stored, n) {
		return nil
	}
	if err := k.c.Update(ctx, n); err != nil {
		return fmt.Errorf("registering node %s: %w", n.Name, err)
	}
	return nil
}

// liveness deletes a NodeClaim that did not launch or register in time.
func (k *Karpenter) liveness(ctx context.Context, nc *nodeClaim, stage, why string) error {
	k.trace("karpenter/liveness", "nodeclaim/"+nc.name(), map[string]any{"stage": stage, "reason": why})
	if err := k.c.Delete(ctx, nc.obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s after its %s timed out: %w", nc.name(), stage, err)
	}
	return nil
}

// finalizeClaim runs when a NodeClaim is being deleted: it records the
// drain deadline, deletes the Node and waits for its termination, makes
// sure the instance is gone, and removes the finalizer.
func (k *Karpenter) finalizeClaim(ctx context.Context, nc *nodeClaim) (reconcile.Result, error) {
	if !slices.Contains(nc.obj.GetFinalizers(), FinalizerTermination) {
		return reconcile.Result{}, nil
	}
	ann := nc.obj.GetAnnotations()
	if _, ok := ann[AnnotationTerminationTimestamp]; !ok && nc.spec.TerminationGracePeriod != "" {
		if tgp, err := time.ParseDuration(nc.spec.TerminationGracePeriod); err == nil {
			u := nc.obj.DeepCopy()
			a := maps.Clone(ann)
			if a == nil {
				a = map[string]string{}
			}
			a[AnnotationTerminationTimestamp] = nc.obj.GetDeletionTimestamp().Add(tgp).UTC().Format(time.RFC3339)
			u.SetAnnotations(a)
			if err := k.c.Update(ctx, u); err != nil {
				return reconcile.Result{}, fmt.Errorf("recording the drain deadline of NodeClaim %s: %w", nc.name(), err)
			}
			nc.obj = u
		}
	}
	name := nc.nodeName()
	if name != "" {
		node, err := k.getNode(ctx, name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if node != nil {
			if node.DeletionTimestamp == nil {
				if err := k.c.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
					return reconcile.Result{}, fmt.Errorf("deleting node %s of NodeClaim %s: %w", name, nc.name(), err)
				}
			}
			// The Node's termination drains it; its removal requeues us.
			return reconcile.Result{}, nil
		}
	}
	if nc.isTrue(ConditionLaunched) && !nc.isTrue(ConditionInstanceTerminating) {
		if err := k.opts.Provider.Terminate(ctx, name); err != nil {
			k.trace("karpenter/terminate-failed", "nodeclaim/"+nc.name(), map[string]any{"error": err.Error()})
			return reconcile.Result{RequeueAfter: InstanceTerminationRequeue}, nil
		}
		nc.setCond(ConditionInstanceTerminating, "True", "InstanceTerminating", "", k.now())
		if err := k.writeStatus(ctx, nc); err != nil {
			return reconcile.Result{}, err
		}
	}
	u := nc.obj.DeepCopy()
	u.SetFinalizers(slices.DeleteFunc(slices.Clone(u.GetFinalizers()), func(f string) bool { return f == FinalizerTermination }))
	if err := k.c.Update(ctx, u); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("removing the finalizer of NodeClaim %s: %w", nc.name(), err)
	}
	delete(k.launched, name)
	k.trace("karpenter/nodeclaim-deleted", "nodeclaim/"+nc.name(), map[string]any{"node": name})
	return reconcile.Result{}, nil
}

// nodeAndClaim reads the Node name and the NodeClaim that owns it; nc is
// nil when either is gone or no NodeClaim owns the Node.
func (k *Karpenter) nodeAndClaim(ctx context.Context, name string) (*corev1.Node, *nodeClaim, error) {
	node, err := k.getNode(ctx, name)
	if err != nil || node == nil {
		return node, nil, err
	}
	claim := k.claimOf(node)
	if claim == "" {
		return node, nil, nil
	}
	nc, err := k.getClaim(ctx, claim)
	return node, nc, err
}

// getNode reads a Node; nil, nil when name is empty or it does not exist.
func (k *Karpenter) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	if name == "" {
		return nil, nil
	}
	var n corev1.Node
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return &n, nil
}

// getPool reads and decodes a NodePool; nil, nil when it does not exist or
// does not decode.
func (k *Karpenter) getPool(ctx context.Context, name string) (*nodePool, error) {
	if name == "" {
		return nil, nil
	}
	u := newPoolObject()
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		if client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading NodePool %s: %w", name, err)
	}
	np, err := parsePool(u)
	if err != nil {
		k.trace("karpenter/invalid-nodepool", "nodepool/"+name, map[string]any{"error": err.Error()})
		return nil, nil
	}
	return np, nil
}
