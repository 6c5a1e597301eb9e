package twin

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file carries out the human and Karpenter actions of scenario
// events (delete or edit a pool, relabel, cordon or delete a node, change
// a PDB, install or remove Karpenter's CRDs) and the host and cluster
// faults beyond crashes, and keeps the controller to one process across
// overlapping restarts.

// actionState is the runner's state for this file.
type actionState struct {
	// ctrlStart is the pending start of the controller process after a
	// restart fault.
	ctrlStart *engine.Handle
}

// skipped traces an action or fault that has nothing to act on any more
// (a node Karpenter replaced, a pool deleted earlier): exploration puts
// actions at random times, so that is not an error of the run.
func (r *runner) skipped(kind, object, reason string) {
	r.tr.emit(kind+".skipped", object, map[string]any{"reason": reason})
}

// nodeGone reports, and traces, that the node an action names does not
// exist now.
func (r *runner) nodeGone(kind, node string) bool {
	if _, found := slices.BinarySearch(r.cl.Nodes(), node); found {
		return false
	}
	r.skipped(kind, "Node/"+node, "no such node now")
	return true
}

// action makes one of the events of this file.
func (r *runner) action(ev scenario.Event) error {
	c := r.api.AdminClient()
	switch {
	case ev.DeletePool != nil:
		e := ev.DeletePool
		r.tr.emit("scenario.deletePool", "BootcNodePool/"+e.Pool, nil)
		p := &v1alpha1.BootcNodePool{}
		p.Name = e.Pool
		if err := c.Delete(r.ctx, p); err != nil {
			if apierrors.IsNotFound(err) {
				r.skipped("scenario.deletePool", "BootcNodePool/"+e.Pool, "no such pool now")
				return nil
			}
			return fmt.Errorf("deletePool %s: %w", e.Pool, err)
		}
		return nil
	case ev.CreatePool != nil:
		pl := *ev.CreatePool
		pool := &v1alpha1.BootcNodePool{Spec: r.sc.PoolSpec(pl)}
		pool.Name = pl.Name
		r.tr.emit("scenario.createPool", "BootcNodePool/"+pl.Name, map[string]any{"image": pl.Image})
		if err := c.Create(r.ctx, pool); err != nil {
			if apierrors.IsAlreadyExists(err) {
				r.skipped("scenario.createPool", "BootcNodePool/"+pl.Name, "the pool exists")
				return nil
			}
			return fmt.Errorf("createPool %s: %w", pl.Name, err)
		}
		return nil
	case ev.SetPool != nil:
		return r.setPool(ev.SetPool)
	case ev.RelabelNode != nil:
		e := ev.RelabelNode
		if r.nodeGone("scenario.relabelNode", e.Node) {
			return nil
		}
		if e.Remove == nil {
			e.Remove = []string{}
		}
		r.tr.emit("scenario.relabelNode", "Node/"+e.Node, map[string]any{"set": joinLabels(e.Set), "remove": e.Remove})
		return r.cl.Relabel(r.ctx, e.Node, e.Set, e.Remove)
	case ev.AnnotateNode != nil:
		return r.adminAnnotate(ev.AnnotateNode)
	case ev.DeleteNode != nil:
		e := ev.DeleteNode
		if r.nodeGone("scenario.deleteNode", e.Node) {
			return nil
		}
		r.tr.emit("scenario.deleteNode", "Node/"+e.Node, nil)
		return r.cl.DeleteNode(r.ctx, e.Node)
	case ev.DeleteBootcNode != nil:
		e := ev.DeleteBootcNode
		bn := &v1alpha1.BootcNode{}
		bn.Name = e.Node
		err := c.Delete(r.ctx, bn)
		r.tr.emit("scenario.deleteBootcNode", "BootcNode/"+e.Node, map[string]any{"found": !apierrors.IsNotFound(err)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleteBootcNode %s: %w", e.Node, err)
		}
		return nil
	case ev.CordonNode != nil:
		return r.adminCordon("scenario.cordonNode", ev.CordonNode.Node, true)
	case ev.UncordonNode != nil:
		return r.adminCordon("scenario.uncordonNode", ev.UncordonNode.Node, false)
	case ev.SetPDB != nil:
		e := ev.SetPDB
		details := map[string]any{}
		if e.MaxUnavailable != nil {
			details["maxUnavailable"] = e.MaxUnavailable.String()
		}
		if e.MinAvailable != nil {
			details["minAvailable"] = e.MinAvailable.String()
		}
		r.tr.emit("scenario.setPDB", "Workload/"+e.Workload, details)
		return r.cl.SetPDB(r.ctx, e.Workload, scenario.PDB{MaxUnavailable: e.MaxUnavailable, MinAvailable: e.MinAvailable})
	case ev.DeletePDB != nil:
		e := ev.DeletePDB
		found, err := r.cl.DeletePDB(r.ctx, e.Workload)
		r.tr.emit("scenario.deletePDB", "Workload/"+e.Workload, map[string]any{"found": found})
		return err
	case ev.KarpenterCRDs != nil:
		if r.kp == nil {
			return fmt.Errorf("karpenterCRDs: the scenario has no karpenter section")
		}
		r.tr.emit("scenario.karpenterCRDs", "", map[string]any{"installed": ev.KarpenterCRDs.Installed})
		if ev.KarpenterCRDs.Installed {
			r.installKarpenter()
			return nil
		}
		return r.removeKarpenter()
	}
	return fmt.Errorf("event with no action")
}

// adminCordon cordons or uncordons a node as kubectl does. When that
// changes the Node, the invariants learn first that this is now the
// cordon bootroll must leave the node with; a kubectl cordon of a node
// that is cordoned already (by bootroll, say) changes nothing bootroll
// could see, so it changes nothing the invariants expect either.
func (r *runner) adminCordon(kind, node string, on bool) error {
	if r.nodeGone(kind, node) {
		return nil
	}
	var n corev1.Node
	if err := r.api.AdminClient().Get(r.ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return fmt.Errorf("%s %s: %w", kind, node, err)
	}
	changes := n.Spec.Unschedulable != on
	r.tr.emit(kind, "Node/"+node, map[string]any{"changes": changes})
	if !changes {
		return nil
	}
	r.w.SetIntendedCordon(node, on)
	return r.cl.SetUnschedulable(r.ctx, node, on)
}

// adminAnnotate changes a node's annotations as kubectl annotate does.
// The invariants learn first which of bootroll's protection annotations
// an operator now wants on the node (or off it), for the keys the action
// changes: bootroll must leave those as the operator left them.
func (r *runner) adminAnnotate(e *scenario.AnnotateNode) error {
	if r.nodeGone("scenario.annotateNode", e.Node) {
		return nil
	}
	var n corev1.Node
	if err := r.api.AdminClient().Get(r.ctx, client.ObjectKey{Name: e.Node}, &n); err != nil {
		return fmt.Errorf("annotate node %s: %w", e.Node, err)
	}
	remove := e.Remove
	if remove == nil {
		remove = []string{}
	}
	r.tr.emit("scenario.annotateNode", "Node/"+e.Node, map[string]any{"set": joinLabels(e.Set), "remove": remove})
	set, removed := e.Changes(n.Annotations)
	for _, k := range set {
		r.w.SetIntendedAnnotation(e.Node, k, true, r.eng.Now())
	}
	for _, k := range removed {
		r.w.SetIntendedAnnotation(e.Node, k, false, r.eng.Now())
	}
	return r.cl.Annotate(r.ctx, e.Node, e.Set, remove)
}

func joinLabels(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// setPool changes the fields of a pool's spec the event gives.
func (r *runner) setPool(e *scenario.SetPool) error {
	details := map[string]any{}
	var im *scenario.Image
	if e.Image != "" {
		if im = r.sc.Image(e.Image); im == nil {
			return fmt.Errorf("setPool: unknown image %q", e.Image)
		}
		details["image"], details["ref"] = e.Image, im.Ref
	}
	if e.NodeSelector != nil {
		details["nodeSelector"] = joinLabels(e.NodeSelector)
	}
	if e.MaxUnavailable != nil {
		details["maxUnavailable"] = e.MaxUnavailable.String()
	}
	if e.MaxStaging != nil {
		details["maxStaging"] = int(*e.MaxStaging)
	}
	if e.Paused != nil {
		details["paused"] = *e.Paused
	}
	if e.FailurePolicy != nil {
		details["failurePolicy"] = string(e.FailurePolicy.Action)
	}
	if e.Windows != nil {
		details["windows"] = len(*e.Windows)
	}
	if e.DrainTimeout != nil {
		details["drainTimeout"] = e.DrainTimeout.String()
	}
	if e.HealthTimeout != nil {
		details["healthTimeout"] = e.HealthTimeout.String()
	}
	r.tr.emit("scenario.setPool", "BootcNodePool/"+e.Pool, details)
	return r.updatePool(e.Pool, func(p *v1alpha1.BootcNodePool) {
		// The scenario's own conversion makes the new spec, so that a
		// field means the same as in bootroll.pools.
		r.sc.ApplySetPool(&p.Spec, e)
	})
}

// restartController is the controllerRestart fault. There is at most one
// controller process: a restart while the controller is down keeps it
// down until the later of its pending start and now+down.
func (r *runner) restartController(down time.Duration) {
	at := r.eng.Now().Add(down)
	if !r.controllerUp {
		pending := r.act.ctrlStart
		if pending.Pending() && !pending.When().Before(at) {
			r.tr.emit("fault.controllerRestart", "", map[string]any{"downFor": down.String(), "while": "down", "startsAt": pending.When().Sub(r.sc.Start).String()})
			return
		}
		pending.Cancel()
		r.tr.emit("fault.controllerRestart", "", map[string]any{"downFor": down.String(), "while": "down", "startsAt": at.Sub(r.sc.Start).String()})
		r.act.ctrlStart = r.eng.At(at, "fault/controller-start", r.startControllerOnce)
		return
	}
	r.tr.emit("fault.controllerRestart", "", map[string]any{"downFor": down.String()})
	r.stopController()
	if down <= 0 {
		r.startControllerOnce()
		return
	}
	r.act.ctrlStart = r.eng.At(at, "fault/controller-start", r.startControllerOnce)
}

// startControllerOnce starts the controller process unless one runs.
func (r *runner) startControllerOnce() {
	r.act.ctrlStart = nil
	if r.controllerUp {
		return
	}
	r.startController()
}

// hostFault injects the host and cluster faults of this file.
func (r *runner) hostFault(f scenario.Fault) error {
	each := func(kind string, t scenario.Target, details map[string]any, fn func(node string) error) error {
		nodes := r.targets(t)
		details["nodes"] = nodes
		r.tr.emit("fault."+kind, "", details)
		for _, n := range nodes {
			if r.nodeGone("fault."+kind, n) {
				continue
			}
			if err := fn(n); err != nil {
				return fmt.Errorf("%s %s: %w", kind, n, err)
			}
		}
		return nil
	}
	switch {
	case f.PowerCycle != nil:
		e := f.PowerCycle
		return each("powerCycle", e.Target, map[string]any{"offFor": e.OffFor.String()}, func(n string) error { return r.cl.PowerCycle(n, e.OffFor) })
	case f.ClockSkew != nil:
		e := f.ClockSkew
		details := map[string]any{"offset": e.Offset.String()}
		if e.For != nil {
			details["for"] = e.For.String()
		}
		return each("clockSkew", e.Target, details, func(n string) error {
			r.skew[n] = time.Duration(e.Offset)
			if e.For != nil {
				r.eng.After(*e.For, "fault/clock-synced", func() {
					if r.skew[n] == time.Duration(e.Offset) {
						delete(r.skew, n)
						r.tr.emit("node/clock-synced", "node/"+n, map[string]any{})
					}
				})
			}
			return nil
		})
	case f.LongReboot != nil:
		e := f.LongReboot
		return each("longReboot", e.Target, map[string]any{"duration": e.Duration.String()}, func(n string) error { return r.cl.LongReboot(n, e.Duration) })
	case f.BootFailure != nil:
		e := f.BootFailure
		return each("bootFailure", e.Target, map[string]any{"mode": string(e.Mode)}, func(n string) error { return r.cl.FailNextBoot(n, e.Mode) })
	case f.DiskFill != nil:
		e := f.DiskFill
		var d time.Duration
		details := map[string]any{"size": e.Size.String()}
		if e.For != nil {
			d = *e.For
			details["for"] = d.String()
		}
		return each("diskFill", e.Target, details, func(n string) error { _, err := r.cl.FillDisk(n, e.Size.Value(), d); return err })
	case f.NodeConditionAfterBoot != nil:
		e := f.NodeConditionAfterBoot
		details := map[string]any{"type": e.Type, "status": string(e.Status)}
		if e.For != nil {
			details["for"] = e.For.String()
		}
		return each("nodeConditionAfterBoot", e.Target, details, func(n string) error { return r.cl.ConditionAfterBoot(n, *e) })
	case f.DaemonSetNotReadyAfterBoot != nil:
		e := f.DaemonSetNotReadyAfterBoot
		details := map[string]any{"daemonSet": e.DaemonSet}
		if e.For != nil {
			details["for"] = e.For.String()
		}
		return each("daemonSetNotReadyAfterBoot", e.Target, details, func(n string) error { return r.cl.DaemonSetNotReadyAfterBoot(n, *e) })
	case f.ReadyFlapsAfterBoot != nil:
		e := f.ReadyFlapsAfterBoot
		return each("readyFlapsAfterBoot", e.Target, map[string]any{"flaps": e.Flaps, "ready": e.Ready.String(), "notReady": e.NotReady.String()},
			func(n string) error { return r.cl.ReadyFlapsAfterBoot(n, *e) })
	case f.RegistryOutage != nil:
		r.tr.emit("fault.registryOutage", "", map[string]any{"for": f.RegistryOutage.For.String()})
		r.cl.RegistryOutage(f.RegistryOutage.For)
		return nil
	case f.SlowPulls != nil:
		r.tr.emit("fault.slowPulls", "", map[string]any{"for": f.SlowPulls.For.String(), "factor": f.SlowPulls.Factor})
		r.cl.SlowPulls(f.SlowPulls.For, f.SlowPulls.Factor)
		return nil
	}
	return fmt.Errorf("fault with no kind")
}

// faultLasts is how long after its time a fault is still in effect.
func faultLasts(f scenario.Fault) time.Duration {
	switch {
	case f.ControllerRestart != nil:
		return f.ControllerRestart.DownFor
	case f.DaemonCrash != nil:
		return f.DaemonCrash.DownFor
	case f.NodeCrash != nil:
		return f.NodeCrash.DownFor
	case f.PowerCycle != nil:
		return f.PowerCycle.OffFor
	case f.LongReboot != nil:
		return f.LongReboot.Duration
	case f.ClockSkew != nil && f.ClockSkew.For != nil:
		return *f.ClockSkew.For
	case f.RegistryOutage != nil:
		return f.RegistryOutage.For
	case f.SlowPulls != nil:
		return f.SlowPulls.For
	case f.DiskFill != nil && f.DiskFill.For != nil:
		return *f.DiskFill.For
	}
	return 0
}

// addNodes adds nodes to a group. The nodes of a group that names a
// Karpenter NodePool get a NodeClaim, as the group's first nodes do, so
// that Karpenter manages them (until Karpenter is installed,
// installKarpenter gives them one).
func (r *runner) addNodes(e *scenario.AddNodes) error {
	names, err := r.cl.AddNodes(r.ctx, e.Group, e.Count)
	r.tr.emit("scenario.addNodes", "NodeGroup/"+e.Group, map[string]any{"count": e.Count, "nodes": names})
	if err != nil {
		return err
	}
	g := r.sc.NodeGroup(e.Group)
	if g == nil || g.Karpenter == nil || r.kp == nil || !r.kp.installed {
		return nil
	}
	for _, n := range names {
		if err := r.createExistingClaim(n, g.Karpenter.NodePool, g.BootImage); err != nil {
			return fmt.Errorf("addNodes: %w", err)
		}
	}
	return nil
}

// removeKarpenter removes Karpenter's CRDs as an uninstall that deletes
// them does: Karpenter stops first; the nodes it manages stay (its
// termination finalizer and the owner references to their NodeClaims are
// removed, as the uninstall guide's cleanup does, so that the garbage
// collector leaves them); every NodeClaim and NodePool goes with the
// CRDs.
func (r *runner) removeKarpenter() error {
	kp := r.kp
	if !kp.installed {
		return nil
	}
	for _, q := range kp.queues {
		q.ShutDown()
	}
	kp.queues, kp.ctrls, kp.installed = nil, nil, false
	c := r.api.AdminClient()
	var nodes corev1.NodeList
	if err := c.List(r.ctx, &nodes); err != nil {
		return fmt.Errorf("removing Karpenter: listing nodes: %w", err)
	}
	var orphaned []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		owned := slices.ContainsFunc(n.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == fakekarpenter.NodeClaimGVK.Kind })
		if !owned && !slices.Contains(n.Finalizers, fakekarpenter.FinalizerTermination) {
			continue
		}
		n.OwnerReferences = slices.DeleteFunc(n.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == fakekarpenter.NodeClaimGVK.Kind })
		n.Finalizers = slices.DeleteFunc(n.Finalizers, func(f string) bool { return f == fakekarpenter.FinalizerTermination })
		if err := c.Update(r.ctx, n); err != nil {
			return fmt.Errorf("removing Karpenter: releasing node %s: %w", n.Name, err)
		}
		orphaned = append(orphaned, n.Name)
	}
	for _, gvk := range karpenterGVKs {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := c.List(r.ctx, list); err != nil {
			return fmt.Errorf("removing Karpenter: listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			if len(u.GetFinalizers()) > 0 {
				u.SetFinalizers(nil)
				if err := c.Update(r.ctx, u); err != nil {
					return fmt.Errorf("removing Karpenter: releasing %s %s: %w", gvk.Kind, u.GetName(), err)
				}
			}
		}
	}
	for _, name := range karpenterCRDs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(karpenter.CRDGVK)
		u.SetName(name)
		if err := c.Delete(r.ctx, u); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("removing Karpenter: deleting CRD %s: %w", name, err)
		}
	}
	for _, gvk := range karpenterGVKs {
		if err := r.api.RemoveKind(gvk); err != nil {
			return fmt.Errorf("removing Karpenter: %w", err)
		}
	}
	r.tr.emit("karpenter.remove", "", map[string]any{"released": orphaned})
	return nil
}

// createExistingClaim creates the NodeClaim through which Karpenter adopts
// an existing node of a group that names NodePool pool: the claim the node
// had, as far as Karpenter's initialization reads it. Its startupTaints
// are those of the NodePool the node still has: a node launched before
// Karpenter's CRDs were removed and not yet initialized keeps waiting for
// them to be removed (explorer seed 92131 of boot-image-skew: the claim
// made on reinstall was initialized at once, and Karpenter reaped the
// node bootroll was booting on the startup-taint path), while a node
// that has none is initialized as before, and registration adds none.
func (r *runner) createExistingClaim(node, pool, bootImage string) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fakekarpenter.NodeClaimGVK)
	u.SetName(node)
	u.SetLabels(map[string]string{fakekarpenter.LabelNodePool: pool})
	ann := map[string]string{cluster.AnnotationExistingNode: node}
	if im := r.sc.Image(bootImage); im != nil {
		ann[fakekarpenter.AnnotationBootImage] = im.Ref
	}
	// The hash Karpenter's NodePool hash controller gives a claim that has
	// none, so that a later template change drifts it (setNodePoolLabels),
	// as on a cluster.
	if h := r.nodePoolHash(pool); h != "" {
		ann[fakekarpenter.AnnotationNodePoolHash] = h
	}
	u.SetAnnotations(ann)
	u.SetFinalizers([]string{fakekarpenter.FinalizerTermination})
	var ncName string
	spec := map[string]any{}
	var n corev1.Node
	if err := r.api.AdminClient().Get(r.ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return fmt.Errorf("reading node %s to adopt it: %w", node, err)
	}
	for _, np := range r.sc.Karpenter.NodePools {
		if np.Name == pool {
			ncName = np.NodeClass
			if !np.ExpireAfter.Never {
				spec["expireAfter"] = np.ExpireAfter.Duration.String()
			}
			var startup []any
			for _, t := range np.StartupTaints {
				if slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && string(x.Effect) == string(t.Effect) }) {
					startup = append(startup, t.Object())
				}
			}
			if len(startup) > 0 {
				spec["startupTaints"] = startup
			}
		}
	}
	spec["nodeClassRef"] = map[string]any{"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": ncName}
	u.Object["spec"] = spec
	if err := r.api.AdminClient().Create(r.ctx, u); err != nil {
		return fmt.Errorf("creating the NodeClaim of node %s: %w", node, err)
	}
	return nil
}
