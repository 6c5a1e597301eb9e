package twin

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
	"github.com/bootroll/bootroll/sim/scenario"
)

// karpenterRun is the fake Karpenter of a run: its reconcilers, each on
// its own engine queue, fed by the API server's watch.
type karpenterRun struct {
	k         *fakekarpenter.Karpenter
	ctrls     []fakekarpenter.Controller
	queues    []*engine.Queue
	installed bool
	// subscribed is set once dispatchKarpenter follows the API server's
	// watch; it stays across a removal and a new installation.
	subscribed bool
	prov       *cluster.KarpenterProvider
	// images is the boot image reference each node class launches now.
	images map[string]string
	// templateLabels are the labels setNodePoolLabels set on each
	// NodePool's template, kept for a NodePool made again when Karpenter
	// is installed again (as images are for the node classes).
	templateLabels map[string]map[string]string
	// hashes memoizes nodePoolHash by NodePool name.
	hashes map[string]string
}

// The CRD objects installing Karpenter creates.
var karpenterCRDs = []string{karpenter.NodeClaimCRD, "nodepools.karpenter.sh"}

// setupKarpenter serves the Karpenter kinds and the CRD kind before the
// cluster is built; until the CRDs are installed the Karpenter kinds are
// absent.
func (r *runner) setupKarpenter() error {
	if r.sc.Karpenter == nil {
		return nil
	}
	if err := r.api.RegisterUnstructured(karpenter.CRDGVK, schemaEmpty, false); err != nil {
		return err
	}
	if err := fakekarpenter.Register(r.api); err != nil {
		return err
	}
	for _, gvk := range karpenterGVKs {
		if err := r.api.RemoveKind(gvk); err != nil {
			return err
		}
	}
	r.kp = &karpenterRun{images: map[string]string{}}
	for _, nc := range r.sc.Karpenter.NodeClasses {
		if im := r.sc.Image(nc.BootImage); im != nil {
			r.kp.images[nc.Name] = im.Ref
		}
	}
	return nil
}

// startKarpenter installs Karpenter now or schedules its installation at
// karpenter.installCRDsAt. Call it after schedule.
func (r *runner) startKarpenter() {
	if r.kp == nil {
		return
	}
	k := r.sc.Karpenter
	if k.InstallCRDsAt == nil || *k.InstallCRDsAt <= 0 {
		r.installKarpenter()
		return
	}
	at := r.sc.Start.Add(*k.InstallCRDsAt)
	if at.After(r.quietAfter) {
		r.quietAfter = at
	}
	r.eng.At(at, "scenario/karpenter-install", r.installKarpenter)
}

// installKarpenter installs the CRDs, creates the NodePools and the
// NodeClaims of the existing Karpenter-managed nodes, and starts
// Karpenter's controllers.
func (r *runner) installKarpenter() {
	kp, sk := r.kp, r.sc.Karpenter
	if kp.installed {
		return
	}
	kp.installed = true
	kp.hashes = nil
	c := r.api.AdminClient()
	for _, gvk := range karpenterGVKs {
		if err := r.api.AddKind(gvk); err != nil {
			r.fail(fmt.Errorf("installing Karpenter: %w", err))
			return
		}
	}
	for _, name := range karpenterCRDs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(karpenter.CRDGVK)
		u.SetName(name)
		if err := c.Create(r.ctx, u); err != nil {
			r.fail(fmt.Errorf("installing Karpenter: creating CRD %s: %w", name, err))
			return
		}
	}
	r.tr.emit("karpenter.install", "", map[string]any{"version": string(sk.Version)})
	kp.prov = r.cl.KarpenterProvider()
	opts := fakekarpenter.Options{
		Clock:            r.eng.Clock(),
		Provider:         kp.prov,
		Profile:          string(sk.Version),
		NodeRepair:       sk.NodeRepair,
		RepairToleration: sk.RepairToleration,
		NodeClassImages:  func(nc string) string { return kp.images[nc] },
		Capacity:         kp.prov.Capacity,
		Trace: func(kind, object string, details map[string]any) {
			r.tr.emit(kind, object, details)
			seen := len(r.chk.Exceptions())
			r.chk.KarpenterTrace(kind, object, details, r.eng.Now())
			for _, v := range r.chk.Exceptions()[seen:] {
				r.tr.emit("invariant.exception", "", map[string]any{"invariant": v.Invariant, "objects": strings.Join(v.Objects, ","), "message": v.Message})
			}
		},
	}
	kp.k = fakekarpenter.New(c, opts)
	r.chk.SetKarpenter(kp.k.Stats)
	for _, np := range sk.NodePools {
		if set := kp.templateLabels[np.Name]; len(set) > 0 {
			np.Labels = maps.Clone(np.Labels)
			if np.Labels == nil {
				np.Labels = map[string]string{}
			}
			maps.Copy(np.Labels, set)
		}
		if err := c.Create(r.ctx, nodePoolObject(np)); err != nil {
			r.fail(fmt.Errorf("installing Karpenter: creating NodePool %s: %w", np.Name, err))
			return
		}
	}
	for _, m := range kp.prov.ExistingNodes() {
		if err := r.createExistingClaim(m.Node, m.NodePool, r.groupBoot(m.Node)); err != nil {
			r.fail(fmt.Errorf("installing Karpenter: %w", err))
			return
		}
	}
	kp.ctrls = kp.k.Controllers()
	for _, ct := range kp.ctrls {
		kp.queues = append(kp.queues, engine.NewQueue(r.eng, ct.Name, r.withLogger(ct.Reconciler), engine.QueueOptions{}))
	}
	if !kp.subscribed {
		r.api.Subscribe(r.dispatchKarpenter)
		kp.subscribed = true
	}
	for i, ct := range kp.ctrls {
		if ct.Start == nil {
			continue
		}
		reqs, err := ct.Start(r.ctx)
		if err != nil {
			r.fail(fmt.Errorf("starting %s: %w", ct.Name, err))
			return
		}
		for _, req := range reqs {
			kp.queues[i].Add(req)
		}
	}
}

// setNodeClassImage changes the boot image a node class launches, as an
// operator bumps it; a running Karpenter looks at the NodeClaims of the
// class at once (it watches its NodeClasses), so drift shows without
// waiting for DriftRecheck.
func (r *runner) setNodeClassImage(e *scenario.SetNodeClassImage) error {
	im := r.sc.Image(e.Image)
	if r.kp == nil || im == nil {
		return fmt.Errorf("setNodeClassImage: no Karpenter or no image %q", e.Image)
	}
	r.kp.images[e.NodeClass] = im.Ref
	r.tr.emit("scenario.setNodeClassImage", "NodeClass/"+e.NodeClass, map[string]any{"image": im.Ref})
	if !r.kp.installed {
		return nil
	}
	for i, ct := range r.kp.ctrls {
		if ct.Reconciler == r.kp.k.Lifecycle {
			for _, req := range r.kp.k.Lifecycle.MapNodeClass(r.ctx, e.NodeClass) {
				r.kp.queues[i].Add(req)
			}
		}
	}
	return nil
}

// setNodePoolLabels sets labels of a NodePool's node template, as an
// operator edits it: the fake Karpenter's NodeClaim lifecycle sees the
// NodePool change and marks the claims of the old template Drifted.
func (r *runner) setNodePoolLabels(e *scenario.SetNodePoolLabels) error {
	r.tr.emit("scenario.setNodePoolLabels", "NodePool/"+e.NodePool, map[string]any{"set": e.Set})
	if r.kp == nil {
		return fmt.Errorf("setNodePoolLabels: the scenario has no Karpenter")
	}
	if r.kp.templateLabels == nil {
		r.kp.templateLabels = map[string]map[string]string{}
	}
	if r.kp.templateLabels[e.NodePool] == nil {
		r.kp.templateLabels[e.NodePool] = map[string]string{}
	}
	maps.Copy(r.kp.templateLabels[e.NodePool], e.Set)
	if !r.kp.installed {
		// No NodePool to edit until Karpenter's CRDs are installed (again):
		// it is made then with these labels.
		return nil
	}
	c := r.api.AdminClient()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fakekarpenter.NodePoolGVK)
	if err := c.Get(r.ctx, client.ObjectKey{Name: e.NodePool}, u); err != nil {
		return fmt.Errorf("setNodePoolLabels: %w", err)
	}
	labels, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, e.Set)
	if err := unstructured.SetNestedStringMap(u.Object, labels, "spec", "template", "metadata", "labels"); err != nil {
		return fmt.Errorf("setNodePoolLabels: %w", err)
	}
	if err := c.Update(r.ctx, u); err != nil {
		return fmt.Errorf("setNodePoolLabels: updating NodePool %s: %w", e.NodePool, err)
	}
	delete(r.kp.hashes, e.NodePool)
	return nil
}

// groupBoot is the boot image of the node group of node, for the nodes
// the group creates itself (at the start or by addNodes events), not
// those Karpenter launched into it.
func (r *runner) groupBoot(node string) string {
	for _, g := range r.sc.NodeGroups {
		rest, ok := strings.CutPrefix(node, g.Name+"-")
		i, err := strconv.Atoi(rest)
		if !ok || err != nil || i < 0 || scenario.NodeName(g.Name, i) != node {
			continue
		}
		own := g.Count
		for _, ev := range r.sc.Events {
			if ev.AddNodes != nil && ev.AddNodes.Group == g.Name {
				own += ev.AddNodes.Count
			}
		}
		if i < own {
			return g.BootImage
		}
	}
	return ""
}

// dispatchKarpenter feeds a watch event to Karpenter's cluster state and
// queues.
func (r *runner) dispatchKarpenter(ev apiserver.Event) {
	if r.kp.installed {
		r.kp.k.Observe(ev)
	}
	for i, ct := range r.kp.ctrls {
		if ct.Map == nil {
			continue
		}
		for _, req := range ct.Map(ev) {
			r.kp.queues[i].Add(req)
		}
	}
}

// NodePoolBudgets is the disruption.budgets list of a scenario NodePool's
// object (nil when it has none); the cluster target builds its NodePools
// with it too.
func NodePoolBudgets(np scenario.KarpenterNodePool) []any {
	var budgets []any
	for _, b := range np.Budgets {
		m := map[string]any{"nodes": b.Nodes.String()}
		if b.Schedule != "" {
			m["schedule"] = b.Schedule
		}
		if b.Duration != nil {
			m["duration"] = b.Duration.String()
		}
		if len(b.Reasons) > 0 {
			var rs []any
			for _, x := range b.Reasons {
				rs = append(rs, string(x))
			}
			m["reasons"] = rs
		}
		budgets = append(budgets, m)
	}
	return budgets
}

// nodePoolHash is the karpenter.sh/nodepool-hash of NodePool pool as the
// API server holds it, "" when it cannot be read; computed once per
// NodePool object (kp.hashes, emptied when a NodePool is made or edited).
func (r *runner) nodePoolHash(pool string) string {
	if h, ok := r.kp.hashes[pool]; ok {
		return h
	}
	np := &unstructured.Unstructured{}
	np.SetGroupVersionKind(fakekarpenter.NodePoolGVK)
	h := ""
	if err := r.api.AdminClient().Get(r.ctx, client.ObjectKey{Name: pool}, np); err == nil {
		h, _ = fakekarpenter.NodePoolHash(np)
	}
	if r.kp.hashes == nil {
		r.kp.hashes = map[string]string{}
	}
	r.kp.hashes[pool] = h
	return h
}

// nodePoolObject is the NodePool of a scenario entry.
func nodePoolObject(np scenario.KarpenterNodePool) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fakekarpenter.NodePoolGVK)
	u.SetName(np.Name)
	taints := func(ts []scenario.Taint) []any {
		var out []any
		for _, t := range ts {
			out = append(out, t.Object())
		}
		return out
	}
	never := func(d scenario.NeverDuration) string {
		if d.Never {
			return "Never"
		}
		return d.Duration.String()
	}
	tspec := map[string]any{
		"nodeClassRef": map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": np.NodeClass},
		"expireAfter":  never(np.ExpireAfter),
	}
	if st := taints(np.StartupTaints); len(st) > 0 {
		tspec["startupTaints"] = st
	}
	labels := map[string]any{}
	for k, v := range np.Labels {
		labels[k] = v
	}
	budgets := NodePoolBudgets(np)
	disruption := map[string]any{
		"consolidationPolicy": string(np.ConsolidationPolicy),
		"consolidateAfter":    never(np.ConsolidateAfter),
	}
	if len(budgets) > 0 {
		disruption["budgets"] = budgets
	}
	u.Object["spec"] = map[string]any{
		"disruption": disruption,
		"template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec":     tspec,
		},
	}
	return u
}

var (
	karpenterGVKs = []schemaGVK{fakekarpenter.NodePoolGVK, fakekarpenter.NodeClaimGVK}
)

type schemaGVK = schema.GroupVersionKind

var schemaEmpty = schema.GroupVersionKind{}
