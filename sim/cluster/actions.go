package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/scenario"
)

// This file is what people and the cluster's own controllers do to nodes
// beyond the scenario's node groups: an admin deleting, cordoning or
// relabelling a Node, changing a PodDisruptionBudget, and the node
// lifecycle controller evicting the pods of a node that stays NotReady.

// NotReadyEvictionTimeout is how long the pods of a NotReady node stay
// bound before the node lifecycle controller evicts them: Kubernetes adds
// the not-ready and unreachable NoExecute taints to such a node and the
// DefaultTolerationSeconds admission plugin gives every pod a toleration
// of them for 300 s (--default-not-ready-toleration-seconds and
// --default-unreachable-toleration-seconds, both 300 by default), after
// which taint-based eviction deletes the pod.
const NotReadyEvictionTimeout = 300 * time.Second

// NodeMonitorGracePeriod is how long a node whose kubelet stopped posting
// its status (a crash, a power cut) still shows Ready before the node
// lifecycle controller marks it Ready=Unknown and its pods not ready:
// kube-controller-manager's --node-monitor-grace-period, 50 s by default
// since Kubernetes v1.32 (40 s before).
const NodeMonitorGracePeriod = 50 * time.Second

// ReasonNodeStatusUnknown is the Ready condition's reason once the node
// lifecycle controller gave up on the kubelet.
const ReasonNodeStatusUnknown = "NodeStatusUnknown"

// kubeletStopped starts the node lifecycle controller's grace period for a
// node whose kubelet died without a word: the API keeps saying Ready, and
// the pods Running and Ready, until NodeMonitorGracePeriod has passed;
// then the node turns Ready=Unknown, its pods not ready, and the eviction
// clock (NotReadyEvictionTimeout) starts. A node that comes back first is
// never seen NotReady.
func (c *Cluster) kubeletStopped(n *node) {
	if n.graceH.Pending() || !n.ready {
		return
	}
	n.graceH = c.eng.After(NodeMonitorGracePeriod, "node-lifecycle/unknown/"+n.name, func() {
		n.graceH = nil
		if n.gone || n.host.kubeletRuns() {
			return
		}
		c.nodeDown(n, ReasonNodeStatusUnknown)
	})
}

// defaultTolerations are the tolerations the DefaultTolerationSeconds
// admission plugin adds to a pod that has none of its own.
func defaultTolerations() []corev1.Toleration {
	secs := int64(NotReadyEvictionTimeout / time.Second)
	return []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs},
	}
}

// notReadyEviction starts the node lifecycle controller's clock for a node
// that just turned NotReady: NotReadyEvictionTimeout later, if the node is
// still NotReady, its workload pods are deleted (they then terminate once
// the node's kubelet runs again, and their controllers replace them at
// once). DaemonSet pods tolerate the taints for good and stay.
func (c *Cluster) notReadyEviction(n *node) {
	if n.evictH.Pending() {
		return
	}
	n.evictH = c.eng.After(NotReadyEvictionTimeout, "node-lifecycle/evict/"+n.name, func() {
		n.evictH = nil
		if n.gone || n.ready {
			return
		}
		var evicted []string
		for _, p := range slices.Clone(n.pods) {
			if p.w == nil || p.terminating || p.gone {
				continue
			}
			err := c.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns}})
			if err != nil {
				must(err, "evicting pod "+p.ns+"/"+p.name+" from NotReady node "+n.name)
			}
			evicted = append(evicted, p.name)
			c.terminate(p)
		}
		if len(evicted) > 0 {
			c.trace("node-lifecycle/evict", "node/"+n.name, map[string]any{"pods": evicted, "after": NotReadyEvictionTimeout.String()})
		}
	})
}

// liveNode returns the node named name, or an error when it does not
// exist (any more); what says what was being done.
func (c *Cluster) liveNode(name, what string) (*node, error) {
	n := c.nodes[name]
	if n == nil || n.gone {
		return nil, fmt.Errorf("cluster: %s: no node %q", what, name)
	}
	return n, nil
}

// DeleteNode deletes a Node as an admin's kubectl delete node does. A Node
// without finalizers goes at once and the pod garbage collector deletes
// its pods (their controllers replace them); one with finalizers
// (Karpenter's termination finalizer) stays, being deleted, until their
// owner removes them.
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	n, err := c.liveNode(name, "deleting a node")
	if err != nil {
		return err
	}
	if err := c.c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster: deleting node %s: %w", name, err)
	}
	if err := c.c.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{}); apierrors.IsNotFound(err) {
		c.nodeGone(n)
	}
	return nil
}

// SetUnschedulable cordons (true) or uncordons (false) a node as kubectl
// cordon and uncordon do: a patch of spec.unschedulable and nothing else
// (kubectl adds no annotation of its own).
func (c *Cluster) SetUnschedulable(ctx context.Context, name string, unschedulable bool) error {
	if _, err := c.liveNode(name, "cordoning a node"); err != nil {
		return err
	}
	obj := &corev1.Node{}
	if err := c.c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return fmt.Errorf("cluster: cordoning node %s: %w", name, err)
	}
	patch := client.MergeFrom(obj.DeepCopy())
	obj.Spec.Unschedulable = unschedulable
	if err := c.c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("cluster: cordoning node %s: %w", name, err)
	}
	return nil
}

// Relabel sets and removes a node's labels, as kubectl label.
func (c *Cluster) Relabel(ctx context.Context, name string, set map[string]string, remove []string) error {
	return c.editMeta(ctx, name, "relabelling", func(o *corev1.Node) *map[string]string { return &o.Labels }, set, remove)
}

// Annotate sets and removes a node's annotations, as kubectl annotate.
func (c *Cluster) Annotate(ctx context.Context, name string, set map[string]string, remove []string) error {
	return c.editMeta(ctx, name, "annotating", func(o *corev1.Node) *map[string]string { return &o.Annotations }, set, remove)
}

// editMeta sets and removes keys of one of a live node's metadata maps
// (field picks it) with a merge patch; doing names the edit in errors.
func (c *Cluster) editMeta(ctx context.Context, name, doing string, field func(*corev1.Node) *map[string]string, set map[string]string, remove []string) error {
	if _, err := c.liveNode(name, doing+" a node"); err != nil {
		return err
	}
	obj := &corev1.Node{}
	if err := c.c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return fmt.Errorf("cluster: %s node %s: %w", doing, name, err)
	}
	patch := client.MergeFrom(obj.DeepCopy())
	m := field(obj)
	if *m == nil {
		*m = map[string]string{}
	}
	maps.Copy(*m, set)
	for _, k := range remove {
		delete(*m, k)
	}
	if err := c.c.Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("cluster: %s node %s: %w", doing, name, err)
	}
	return nil
}

// SetPDB gives a workload a PodDisruptionBudget with this budget: it
// creates the PDB when the workload has none, else it changes its spec.
func (c *Cluster) SetPDB(ctx context.Context, workload string, spec scenario.PDB) error {
	w := c.workloads[workload]
	if w == nil {
		return fmt.Errorf("cluster: setting the PDB of workload %q: no such workload", workload)
	}
	sp := spec
	for _, b := range c.pdbs {
		if b.name != workload || b.ns != WorkloadNamespace {
			continue
		}
		obj := &policyv1.PodDisruptionBudget{}
		if err := c.c.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: b.name}, obj); err != nil {
			return fmt.Errorf("cluster: setting PodDisruptionBudget %s/%s: %w", b.ns, b.name, err)
		}
		obj.Spec.MinAvailable, obj.Spec.MaxUnavailable = sp.MinAvailable, sp.MaxUnavailable
		if err := c.c.Update(ctx, obj); err != nil {
			return fmt.Errorf("cluster: setting PodDisruptionBudget %s/%s: %w", b.ns, b.name, err)
		}
		b.spec, b.generation = &sp, obj.Generation
		c.markPDB(b)
		return nil
	}
	b := &pdb{name: workload, ns: WorkloadNamespace, spec: &sp, selector: w.podLabels()}
	for _, x := range c.wlOrder {
		if subset(b.selector, x.podLabels()) {
			b.workloads = append(b.workloads, x)
			for _, p := range x.pods {
				if p.healthy {
					b.healthy++
				}
			}
		}
	}
	if err := c.createPDB(ctx, b); err != nil {
		return err
	}
	c.pdbs = append(c.pdbs, b)
	for _, x := range b.workloads {
		x.pdbs = append(x.pdbs, b)
	}
	return nil
}

// DeletePDB deletes a workload's PodDisruptionBudget; it reports whether
// there was one.
func (c *Cluster) DeletePDB(ctx context.Context, workload string) (bool, error) {
	if c.workloads[workload] == nil {
		return false, fmt.Errorf("cluster: deleting the PDB of workload %q: no such workload", workload)
	}
	i := slices.IndexFunc(c.pdbs, func(b *pdb) bool { return b.name == workload && b.ns == WorkloadNamespace })
	if i < 0 {
		return false, nil
	}
	b := c.pdbs[i]
	if err := c.c.Delete(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns}}); err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("cluster: deleting PodDisruptionBudget %s/%s: %w", b.ns, b.name, err)
	}
	c.pdbs = slices.Delete(c.pdbs, i, i+1)
	for _, w := range b.workloads {
		w.pdbs = slices.DeleteFunc(w.pdbs, func(x *pdb) bool { return x == b })
	}
	b.generation = 0 // flushPDBs skips it
	return true, nil
}
