package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/sim/scenario"
)

// This file is the cloud provider of the fake Karpenter on the cluster
// model (fakekarpenter.Provider): Launch starts a host booting the
// NodeClass image and registers its Node after RegistrationDelay;
// Terminate ends the host (the Node object is Karpenter's to delete).

// AnnotationExistingNode, on a NodeClaim, names a node that exists already
// (a scenario node group with karpenter.nodePool): launching the claim
// adopts that node instead of starting a new one.
const AnnotationExistingNode = "twin.bootroll.dev/existing-node"

// RegistrationDelay is the time from a launch until the Node registers,
// Ready (boot and kubelet start are folded into it), for a NodeClaim whose
// class the scenario does not name; a scenario's node classes have their
// own (karpenter.nodeClasses[].registrationDelay, by default the same).
const RegistrationDelay = 30 * time.Second

// KarpenterProvider launches and terminates the nodes of the fake
// Karpenter's NodeClaims.
type KarpenterProvider struct {
	c      *Cluster
	groups map[string]*group // by NodePool
}

// KarpenterProvider returns the cluster's provider for the fake Karpenter.
func (c *Cluster) KarpenterProvider() *KarpenterProvider {
	return &KarpenterProvider{c: c, groups: map[string]*group{}}
}

// ManagedNode is an existing node of a Karpenter NodePool.
type ManagedNode struct{ Node, NodePool string }

// ExistingNodes lists the live nodes of the node groups that name a
// Karpenter NodePool, sorted by name.
func (p *KarpenterProvider) ExistingNodes() []ManagedNode {
	var out []ManagedNode
	for _, name := range p.c.Nodes() {
		n := p.c.nodes[name]
		if k := n.g.spec.Karpenter; k != nil {
			out = append(out, ManagedNode{Node: name, NodePool: k.NodePool})
		}
	}
	return out
}

// groupFor returns the node group Karpenter's nodes of pool join: the
// first scenario group that names the pool, else a group of its own
// named after the pool.
func (p *KarpenterProvider) groupFor(pool string) *group {
	if g := p.groups[pool]; g != nil {
		return g
	}
	for i := range p.c.sc.NodeGroups {
		if k := p.c.sc.NodeGroups[i].Karpenter; k != nil && k.NodePool == pool {
			g := p.c.groups[p.c.sc.NodeGroups[i].Name]
			p.groups[pool] = g
			return g
		}
	}
	spec := &scenario.NodeGroup{Name: pool, Karpenter: &scenario.NodeGroupKarpenter{NodePool: pool}}
	if k := p.c.sc.Karpenter; k != nil {
		for i := range k.NodePools {
			if k.NodePools[i].Name == pool {
				spec.Capacity = maps.Clone(k.NodePools[i].Capacity)
				spec.Labels = maps.Clone(k.NodePools[i].Labels)
			}
		}
	}
	if spec.Capacity == nil {
		spec.Capacity = map[string]resource.Quantity{}
	}
	for k, v := range map[string]string{"cpu": "4", "memory": "16Gi", "pods": "110"} {
		if _, ok := spec.Capacity[k]; !ok {
			spec.Capacity[k] = resource.MustParse(v)
		}
	}
	name := pool
	for p.c.groups[name] != nil {
		name += "-kp"
	}
	spec.Name = name
	im := &p.c.sc.Images[0]
	spec.BootImage = im.Name
	g := &group{spec: spec, boot: im, alloc: allocatable(spec.Capacity)}
	p.c.groups[name] = g
	p.groups[pool] = g
	return g
}

// Capacity is the allocatable of the nodes launched for pool.
func (p *KarpenterProvider) Capacity(pool string) corev1.ResourceList {
	a := p.groupFor(pool).alloc
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(a.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(a.mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(a.pods, resource.DecimalSI),
	}
}

// Launch implements fakekarpenter.Provider.
func (p *KarpenterProvider) Launch(ctx context.Context, claim *unstructured.Unstructured, bootImage string) (string, error) {
	if name := claim.GetAnnotations()[AnnotationExistingNode]; name != "" {
		if n := p.c.nodes[name]; n == nil || n.gone {
			return "", fmt.Errorf("adopting node %s: no such node", name)
		}
		return name, nil
	}
	pool := claim.GetLabels()["karpenter.sh/nodepool"]
	g := p.groupFor(pool)
	im := g.boot
	if bootImage != "" {
		if x := p.c.sc.Image(bootImage); x != nil {
			im = x
		} else if x := p.c.imageFor(bootImage); x != nil {
			im = x
		}
	}
	var spec struct {
		Taints        []corev1.Taint `json:"taints"`
		StartupTaints []corev1.Taint `json:"startupTaints"`
		NodeClassRef  struct {
			Name string `json:"name"`
		} `json:"nodeClassRef"`
	}
	if raw, err := json.Marshal(claim.Object["spec"]); err == nil {
		_ = json.Unmarshal(raw, &spec)
	}
	labels := maps.Clone(claim.GetLabels())
	taints := append(slices.Clone(spec.Taints), spec.StartupTaints...)
	i := g.next
	g.next++
	name := scenario.NodeName(g.spec.Name, i)
	p.c.trace("node/launched", "node/"+name, map[string]any{"nodeclaim": claim.GetName(), "image": im.Name})
	p.c.eng.After(p.registrationDelay(spec.NodeClassRef.Name), "karpenter/register/"+name, func() {
		boot, dec := g.boot, g.decorate
		g.boot = im
		g.decorate = func(obj *corev1.Node) {
			maps.Copy(obj.Labels, labels)
			obj.Spec.Taints = append(obj.Spec.Taints, taints...)
		}
		n, err := p.c.createNode(context.Background(), g, i, false)
		g.boot, g.decorate = boot, dec
		if err != nil {
			p.c.trace("node/launch-failed", "node/"+name, map[string]any{"error": err.Error()})
			return
		}
		n.host.startDaemon()
	})
	return name, nil
}

// registrationDelay is the scenario's registrationDelay of node class
// class, or RegistrationDelay for a class the scenario does not have.
func (p *KarpenterProvider) registrationDelay(class string) time.Duration {
	if k := p.c.sc.Karpenter; k != nil {
		for _, nc := range k.NodeClasses {
			if nc.Name == class {
				return nc.RegistrationDelay
			}
		}
	}
	return RegistrationDelay
}

// Terminate implements fakekarpenter.Provider: the instance goes away;
// the Node object stays until Karpenter removes its finalizer.
func (p *KarpenterProvider) Terminate(_ context.Context, nodeName string) error {
	n := p.c.nodes[nodeName]
	if n == nil || n.gone {
		return nil
	}
	if n.host.state != hostRemoved {
		n.host.remove()
		p.c.trace("node/instance-terminated", "node/"+nodeName, nil)
	}
	return nil
}
