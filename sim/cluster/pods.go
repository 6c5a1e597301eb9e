package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

// pod is one pod the model created.
type pod struct {
	name, ns string
	uid      types.UID
	w        *workload  // nil for a DaemonSet pod
	ds       *daemonSet // nil for a workload pod
	seq      uint64     // creation order within the owner
	req      res
	node     *node // nil while pending
	nodeIdx  int   // position in node.pods

	started     bool // its containers ran: phase Running
	healthy     bool // Running, Ready and not terminating, as written
	terminating bool
	gone        bool
	awaitNode   bool // its grace ended while its node was down
	startAt     metav1.Time
	startH      *engine.Handle
	graceH      *engine.Handle
}

func (p *pod) key() types.NamespacedName { return types.NamespacedName{Namespace: p.ns, Name: p.name} }

// workload is a Deployment and the ReplicaSet-like controller of its pods,
// or, when its spec is unmanaged, a set of bare pods that nothing replaces.
type workload struct {
	spec     *scenario.Workload
	replicas int
	req      res
	sel      *selector
	pdbs     []*pdb
	pods     map[string]*pod // not gone
	active   int             // pods not terminating
	seq      uint64
	owner    metav1.OwnerReference

	queue     []*pod // pending pods in creation order, from head on
	head      int
	blocked   bool   // the last pass found no node for its next pod
	blockedAt uint64 // capEpoch of that pass
}

func (w *workload) podLabels() map[string]string { return map[string]string{LabelApp: w.spec.Name} }

// daemonSet is a DaemonSet and its controller.
type daemonSet struct {
	spec  *scenario.DaemonSet
	req   res
	seq   uint64
	owner metav1.OwnerReference
}

// pdb is a PodDisruptionBudget and its disruption controller's counts.
type pdb struct {
	name, ns   string
	spec       *scenario.PDB
	selector   map[string]string
	workloads  []*workload
	healthy    int
	generation int64
	dirty      bool
	allowed    bool // the DisruptionAllowed condition last written
	transition metav1.Time
	// refused is the error of the last refused eviction, for the counts
	// (desiredHealthy, healthy) in refusedFor (refusal).
	refused    *apierrors.StatusError
	refusedFor [2]int
}

func (b *pdb) expected() int {
	n := 0
	for _, w := range b.workloads {
		n += w.replicas
	}
	return n
}

// desired is the disruption controller's desiredHealthy: percentages are
// rounded up, for maxUnavailable too.
func (b *pdb) desired() int {
	exp := b.expected()
	if b.spec.MinAvailable != nil {
		v, _ := intstr.GetScaledValueFromIntOrPercent(b.spec.MinAvailable, exp, true)
		return v
	}
	if b.spec.MaxUnavailable != nil {
		v, _ := intstr.GetScaledValueFromIntOrPercent(b.spec.MaxUnavailable, exp, true)
		return max(exp-v, 0)
	}
	return 0
}

func (b *pdb) state() facts.PDBState {
	d := b.desired()
	return facts.PDBState{
		Namespace: b.ns, Name: b.name, Healthy: b.healthy, DesiredHealthy: d, ExpectedPods: b.expected(),
		DisruptionsAllowed: max(b.healthy-d, 0), Violated: b.healthy < d,
	}
}

// createOwner creates a Deployment, ReplicaSet or DaemonSet object when
// the scheme serves apps/v1 and returns the owner reference its pods carry;
// without apps/v1 the reference names an owner that does not exist.
func (c *Cluster) createOwner(ctx context.Context, obj client.Object, kind string) (metav1.OwnerReference, error) {
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: obj.GetName(), Controller: new(true), BlockOwnerDeletion: new(true)}
	if !c.apps {
		ref.UID = types.UID("twin-" + kind + "-" + obj.GetNamespace() + "-" + obj.GetName())
		return ref, nil
	}
	if err := c.c.Create(ctx, obj); err != nil {
		return ref, fmt.Errorf("cluster: creating %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	ref.UID = obj.GetUID()
	return ref, nil
}

func (c *Cluster) podTemplate(labels map[string]string, nodeSelector map[string]string, req map[string]resource.Quantity) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Containers:   []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{Requests: resourceList(req)}}},
		},
	}
}

func (c *Cluster) createWorkload(ctx context.Context, w *workload) error {
	if w.spec.Unmanaged {
		return nil // bare pods: no Deployment, no ReplicaSet, no owner
	}
	name := w.spec.Name
	sel := &metav1.LabelSelector{MatchLabels: w.podLabels()}
	tmpl := c.podTemplate(w.podLabels(), w.spec.NodeSelector, w.spec.Requests)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: WorkloadNamespace},
		Spec:       appsv1.DeploymentSpec{Replicas: new(int32(w.replicas)), Selector: sel, Template: tmpl},
	}
	depRef, err := c.createOwner(ctx, dep, "Deployment")
	if err != nil {
		return err
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-rs", Namespace: WorkloadNamespace, Labels: w.podLabels(), OwnerReferences: []metav1.OwnerReference{depRef}},
		Spec:       appsv1.ReplicaSetSpec{Replicas: new(int32(w.replicas)), Selector: sel, Template: tmpl},
	}
	w.owner, err = c.createOwner(ctx, rs, "ReplicaSet")
	return err
}

func (c *Cluster) createDaemonSet(ctx context.Context, ds *daemonSet) error {
	labels := map[string]string{LabelApp: ds.spec.Name}
	obj := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: ds.spec.Name, Namespace: DaemonSetNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: c.podTemplate(labels, ds.spec.NodeSelector, ds.spec.Requests),
		},
	}
	var err error
	ds.owner, err = c.createOwner(ctx, obj, "DaemonSet")
	return err
}

func (c *Cluster) createPDB(ctx context.Context, b *pdb) error {
	obj := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: b.spec.MinAvailable, MaxUnavailable: b.spec.MaxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: b.selector},
		},
	}
	if err := c.c.Create(ctx, obj); err != nil {
		return fmt.Errorf("cluster: creating PodDisruptionBudget %s/%s: %w", b.ns, b.name, err)
	}
	b.generation = obj.Generation
	b.transition = metav1.NewTime(c.eng.Now().Truncate(time.Second))
	b.allowed = b.state().DisruptionsAllowed > 0
	c.markPDB(b)
	return nil
}

// newWorkloadPod adds a pending pod to a workload's model; the caller
// creates its object.
func (c *Cluster) newWorkloadPod(w *workload) *pod {
	w.seq++
	p := &pod{name: podName(w.spec.Name, w.seq), ns: WorkloadNamespace, w: w, seq: w.seq, req: w.req}
	c.pods[p.key()] = p
	w.pods[p.name] = p
	w.active++
	c.pending++
	return p
}

// podName is the name of an owner's seq-th pod: what fmt.Sprintf("%s-%d")
// gives, without its formatting, once per pod created.
func podName(owner string, seq uint64) string {
	return owner + "-" + strconv.FormatUint(seq, 10)
}

// createPod creates the pod's object: bound when it is placed, Running and
// Ready when running is set.
func (c *Cluster) createPod(ctx context.Context, p *pod, running bool) error {
	var labels, nodeSelector map[string]string
	var req map[string]resource.Quantity
	owner := metav1.OwnerReference{}
	var tolerations []corev1.Toleration
	if p.w != nil {
		labels, nodeSelector, req, owner = p.w.podLabels(), p.w.spec.NodeSelector, p.w.spec.Requests, p.w.owner
		tolerations = defaultTolerations()
	} else {
		labels, nodeSelector, req, owner = map[string]string{LabelApp: p.ds.spec.Name}, p.ds.spec.NodeSelector, p.ds.spec.Requests, p.ds.owner
		tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	tmpl := c.podTemplate(labels, nodeSelector, req)
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.name, Namespace: p.ns, Labels: labels,
			Finalizers: []string{PodFinalizer}, OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec:   tmpl.Spec,
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if w := p.w; w != nil && w.spec.Unmanaged {
		obj.OwnerReferences = nil
	}
	if w := p.w; w != nil && w.spec.EmptyDir {
		obj.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	obj.Spec.Tolerations = tolerations
	obj.Spec.TerminationGracePeriodSeconds = new(int64(PodGrace / time.Second))
	if p.node != nil {
		obj.Spec.NodeName = p.node.name
	}
	if running {
		p.startAt = metav1.NewTime(c.eng.Now().Truncate(time.Second))
		obj.Status = c.podStatus(p, true)
	}
	if err := c.c.Create(ctx, obj, apiserver.NoEcho); err != nil {
		return fmt.Errorf("cluster: creating pod %s/%s: %w", p.ns, p.name, err)
	}
	p.uid = obj.UID
	return nil
}

// createDaemonPod creates the DaemonSet's pod on n, bound at once; it
// starts after PodStartup, or at once for the initial cluster.
func (c *Cluster) createDaemonPod(ctx context.Context, ds *daemonSet, n *node, running bool) error {
	ds.seq++
	p := &pod{name: podName(ds.spec.Name, ds.seq), ns: DaemonSetNamespace, ds: ds, seq: ds.seq, req: ds.req}
	c.pods[p.key()] = p
	c.place(p, n)
	p.started = running
	if err := c.createPod(ctx, p, running); err != nil {
		return err
	}
	if running {
		c.setHealthy(p, true)
	} else if n.host.kubeletRuns() {
		c.startPodAfter(p, PodStartup)
	}
	return nil
}

func (c *Cluster) podStatus(p *pod, ready bool) corev1.PodStatus {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	node := ""
	if p.node != nil {
		node = p.node.name
	}
	now := metav1.NewTime(c.kubeletNow(node)) // the kubelet's clock
	start := p.startAt
	return corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: st, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: st, LastTransitionTime: now},
		},
		StartTime: &start,
	}
}

// writePodStatus writes the pod Running, Ready or not.
func (c *Cluster) writePodStatus(p *pod, ready bool) {
	obj := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns}, Status: c.podStatus(p, ready)}
	if err := c.c.Status().Update(context.Background(), obj, apiserver.NoEcho); err != nil {
		must(err, "writing the status of pod "+p.ns+"/"+p.name)
	}
}

// startPodAfter starts the pod's containers after d, unless it is
// started already.
func (c *Cluster) startPodAfter(p *pod, d time.Duration) {
	if p.startH.Pending() {
		return
	}
	if p.ds != nil && p.node != nil {
		// A DaemonSet pod held not Ready by a health fault (health.go).
		if until, held := p.node.host.dsHeld[p.ds.spec.Name]; held {
			if until.IsZero() {
				return
			}
			d = max(d, until.Sub(c.eng.Now()))
		}
	}
	p.startH = c.eng.After(d, "pod/start/"+p.ns+"/"+p.name, func() {
		p.startH = nil
		if p.gone || p.terminating || p.node == nil || !p.node.host.kubeletRuns() {
			return
		}
		if !p.started {
			p.started = true
			p.startAt = metav1.NewTime(c.eng.Now().Truncate(time.Second))
		}
		c.writePodStatus(p, true)
		c.setHealthy(p, true)
	})
}

// setHealthy updates the counts of the PDBs covering the pod.
func (c *Cluster) setHealthy(p *pod, healthy bool) {
	if p.healthy == healthy {
		return
	}
	p.healthy = healthy
	if p.w == nil {
		return
	}
	d := 1
	if !healthy {
		d = -1
	}
	for _, b := range p.w.pdbs {
		b.healthy += d
		c.markPDB(b)
	}
}

// leave does the bookkeeping of a pod that stops counting for its owner:
// unhealthy, no longer pending, no longer active.
func (c *Cluster) leave(p *pod) {
	p.terminating = true
	p.startH.Cancel()
	c.setHealthy(p, false)
	if w := p.w; w != nil {
		if p.node == nil {
			c.pending--
		}
		w.active--
		if w.spec.Unmanaged {
			w.replicas-- // no controller replaces a bare pod
			for _, b := range w.pdbs {
				c.markPDB(b)
			}
		}
	}
}

// terminate handles a pod that got a deletionTimestamp (an eviction or a
// delete): it stops counting, its controller replaces it at once, and it
// finishes terminating after its grace period (at once when unbound).
func (c *Cluster) terminate(p *pod) {
	if p.terminating || p.gone {
		return
	}
	c.leave(p)
	grace := PodGrace
	if p.node == nil {
		grace = 0
	}
	p.graceH = c.eng.After(grace, "pod/terminate/"+p.ns+"/"+p.name, func() {
		p.graceH = nil
		c.finishPod(p)
	})
	if p.w != nil {
		c.reconcileWorkload(p.w)
	}
}

// finishPod removes the finalizer of a terminating pod, which removes it,
// once the kubelet of its node runs.
func (c *Cluster) finishPod(p *pod) {
	if p.gone {
		return
	}
	if n := p.node; n != nil && !n.gone && !n.host.kubeletRuns() {
		p.awaitNode = true
		return
	}
	p.awaitNode = false
	c.dropFinalizer(p)
	c.podGone(p)
}

// dropFinalizer removes the model's finalizer from the pod's object.
func (c *Cluster) dropFinalizer(p *pod) {
	ctx := context.Background()
	obj := &c.scratch
	if err := c.c.Get(ctx, p.key(), obj, apiserver.Shared); err != nil {
		must(err, "reading pod "+p.ns+"/"+p.name)
		return
	}
	// A merge patch of the finalizers, locked on the version read, as the
	// kubelet's status manager finishes a pod: it writes one field, not
	// the whole pod. obj shares the stored pod's slices: a new one.
	rest := slices.DeleteFunc(slices.Clone(obj.Finalizers), func(f string) bool { return f == PodFinalizer })
	if err := c.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, finalizerPatch(rest, obj.ResourceVersion)), apiserver.NoEcho); err != nil {
		must(err, "finishing pod "+p.ns+"/"+p.name)
	}
}

// finalizerPatch is the merge patch that sets metadata.finalizers to rest
// (null when rest is nil) locked on resourceVersion rv: byte for byte what
// json.Marshal gives for the map of it (TestPatchesAsJSONMarshal), without
// its reflection, once per pod that finishes.
func finalizerPatch(rest []string, rv string) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"metadata":{"finalizers":`...)
	if rest == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, f := range rest {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, f)
		}
		b = append(b, ']')
	}
	b = append(b, `,"resourceVersion":`...)
	b = appendJSONString(b, rv)
	return append(b, "}}"...)
}

// bindPatch is the merge patch that sets spec.nodeName: byte for byte
// what json.Marshal gives for the map of it (TestPatchesAsJSONMarshal).
func bindPatch(node string) []byte {
	b := make([]byte, 0, 32+len(node))
	b = append(b, `{"spec":{"nodeName":`...)
	b = appendJSONString(b, node)
	return append(b, "}}"...)
}

// appendJSONString appends s quoted as encoding/json quotes it: printable
// ASCII without '"', '\\', '<', '>' and '&' is copied, anything else goes
// through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			must(err, "encoding a string") // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// forceDelete deletes a pod at once, as the pod garbage collector does
// for pods of a deleted node.
func (c *Cluster) forceDelete(p *pod) {
	if p.gone {
		return
	}
	if !p.terminating {
		c.leave(p)
		if p.w != nil {
			defer c.reconcileWorkload(p.w)
		}
	}
	c.dropFinalizer(p)
	err := c.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns}})
	if err != nil {
		must(err, "deleting pod "+p.ns+"/"+p.name)
	}
	c.podGone(p)
}

// podGone takes a removed pod out of the model. A DaemonSet pod is created
// again on its node if the node is still there.
func (c *Cluster) podGone(p *pod) {
	if p.gone {
		return
	}
	wasActive := !p.terminating
	if wasActive {
		c.leave(p)
	}
	p.gone = true
	p.graceH.Cancel()
	delete(c.pods, p.key())
	n := p.node
	if n != nil {
		c.unplace(p)
	}
	switch {
	case p.w != nil:
		delete(p.w.pods, p.name)
		if wasActive {
			c.reconcileWorkload(p.w)
		}
	case p.ds != nil && n != nil && !n.gone && !n.deleting:
		if err := c.createDaemonPod(context.Background(), p.ds, n, false); err != nil {
			must(err, "recreating a pod of DaemonSet "+p.ds.spec.Name)
		}
	}
}

// reconcileWorkload is the ReplicaSet controller: it creates pending pods
// up to the replica count and deletes the surplus (unbound first, then not
// ready, then the newest). For an unmanaged workload, whose replica count
// follows its pods (leave), it only creates the pods a scale-up asks for.
func (c *Cluster) reconcileWorkload(w *workload) {
	ctx := context.Background()
	for w.active < w.replicas {
		p := c.newWorkloadPod(w)
		if err := c.createPod(ctx, p, false); err != nil {
			must(err, "creating a pod of workload "+w.spec.Name)
		}
		c.enqueue(p)
	}
	if w.active <= w.replicas {
		return
	}
	active := scaleDownOrder(w)
	for _, p := range active[:w.active-w.replicas] {
		if err := c.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns}}); err != nil {
			must(err, "scaling down pod "+p.ns+"/"+p.name)
		}
		c.terminate(p)
	}
}

// ScaleWorkload sets a workload's replica count: its Deployment and
// ReplicaSet objects, its PDBs' expected pods, and its pods.
func (c *Cluster) ScaleWorkload(ctx context.Context, name string, replicas int) error {
	w := c.workloads[name]
	if w == nil {
		return fmt.Errorf("cluster: scaling workload %q: no such workload", name)
	}
	if replicas < 0 {
		return fmt.Errorf("cluster: scaling workload %q to %d replicas", name, replicas)
	}
	from := w.replicas
	if w.spec.Unmanaged {
		c.scaleBare(w, replicas)
		return nil
	}
	w.replicas = replicas
	if c.apps {
		for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.ReplicaSet{}} {
			key := client.ObjectKey{Namespace: WorkloadNamespace, Name: name}
			if _, ok := obj.(*appsv1.ReplicaSet); ok {
				key.Name = w.owner.Name
			}
			if err := c.c.Get(ctx, key, obj); err != nil {
				return fmt.Errorf("cluster: scaling workload %q: %w", name, err)
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				o.Spec.Replicas = new(int32(replicas))
			case *appsv1.ReplicaSet:
				o.Spec.Replicas = new(int32(replicas))
			}
			if err := c.c.Update(ctx, obj); err != nil {
				return fmt.Errorf("cluster: scaling workload %q: %w", name, err)
			}
		}
	}
	for _, b := range w.pdbs {
		c.markPDB(b)
	}
	c.trace("workload/scaled", "deployment/"+WorkloadNamespace+"/"+name, map[string]any{"from": from, "to": replicas})
	c.reconcileWorkload(w)
	return nil
}

// scaleBare scales an unmanaged workload as a person would: kubectl run
// for each pod to add, kubectl delete for each to remove (unbound first,
// then not ready, then the newest). Each pod removed lowers the replica
// count as it leaves.
func (c *Cluster) scaleBare(w *workload, replicas int) {
	from := w.replicas
	c.trace("workload/scaled", "pods/"+WorkloadNamespace+"/"+w.spec.Name, map[string]any{"from": from, "to": replicas, "unmanaged": true})
	if replicas >= from {
		w.replicas = replicas
		c.reconcileWorkload(w)
		return
	}
	active := scaleDownOrder(w)
	for _, p := range active[:from-replicas] {
		if err := c.c.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns}}); err != nil {
			must(err, "deleting bare pod "+p.ns+"/"+p.name)
		}
		c.terminate(p)
	}
}

// scaleDownRank orders the pods a scale-down removes first: unbound, then
// not ready, then the rest.
func scaleDownRank(p *pod) int {
	switch {
	case p.node == nil:
		return 0
	case !p.healthy:
		return 1
	}
	return 2
}

// evict is the eviction subresource: it honours the PDBs that cover the
// pod as kube-apiserver does (unhealthyPodEvictionPolicy IfHealthyBudget),
// and on admission deletes the pod, which then terminates gracefully.
func (c *Cluster) evict(ctx context.Context, obj *corev1.Pod, ev *policyv1.Eviction) error {
	var opts []client.DeleteOption
	if do := ev.DeleteOptions; do != nil && do.Preconditions != nil {
		opts = append(opts, client.Preconditions(*do.Preconditions))
	}
	p := c.pods[types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}]
	if p == nil || p.uid != obj.UID {
		return c.c.Delete(ctx, obj, opts...)
	}
	if p.terminating {
		return nil
	}
	var pdbs []*pdb
	if p.w != nil {
		pdbs = p.w.pdbs
	}
	if len(pdbs) > 1 {
		return apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	}
	// Pods that are not running yet may go whatever the budget says.
	if len(pdbs) == 1 && p.started {
		b := pdbs[0]
		desired := b.desired() // the budget's DesiredHealthy (state), without the rest of its state
		need := desired
		if p.healthy {
			need++
		}
		if b.healthy < need {
			c.evictionsRefused++
			c.blocked(p.node)
			if c.tracing() { // a refusal is retried every few seconds: no details built for nobody
				c.trace("pod/evict-refused", "pod/"+p.ns+"/"+p.name, map[string]any{"pdb": b.ns + "/" + b.name, "healthy": b.healthy, "desiredHealthy": desired})
			}
			return b.refusal(desired)
		}
	}
	if err := c.c.Delete(ctx, obj, opts...); err != nil {
		return err
	}
	c.unblock(p.node)
	if c.tracing() {
		details := map[string]any{}
		if p.node != nil {
			details["node"] = p.node.name
		}
		c.trace("pod/evicted", "pod/"+p.ns+"/"+p.name, details)
	}
	c.terminate(p)
	return nil
}

// refusal is the error of an eviction the budget refuses while it needs
// desired healthy pods. A drain the budget blocks is refused again every
// few seconds with the same counts, so the error is built once per counts
// and handed to every such caller: callers only read an error (a real
// client decodes a fresh one per response; nothing in bootroll or the
// twin writes into one).
func (b *pdb) refusal(desired int) error {
	if b.refused == nil || b.refusedFor != [2]int{desired, b.healthy} {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{
			Type: policyv1.DisruptionBudgetCause,
			// "The disruption budget %s needs %d healthy pods and has %d currently", without fmt.
			Message: "The disruption budget " + b.name + " needs " + strconv.Itoa(desired) +
				" healthy pods and has " + strconv.Itoa(b.healthy) + " currently",
		}}
		b.refused, b.refusedFor = err, [2]int{desired, b.healthy}
	}
	return b.refused
}

// markPDB schedules a write of the PDB's status.
func (c *Cluster) markPDB(b *pdb) {
	b.dirty = true
	if !c.pdbFlush.Pending() {
		c.pdbFlush = c.eng.After(0, "cluster/pdb-status", c.flushPDBs)
	}
}

// flushPDBs writes the status of every PDB whose counts changed.
func (c *Cluster) flushPDBs() {
	c.pdbFlush.Cancel()
	for _, b := range c.pdbs {
		if !b.dirty || b.generation == 0 {
			continue
		}
		b.dirty = false
		st := b.state()
		allowed := st.DisruptionsAllowed > 0
		if allowed != b.allowed {
			b.allowed = allowed
			b.transition = metav1.NewTime(c.eng.Now().Truncate(time.Second))
		}
		cond := metav1.Condition{
			Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
			ObservedGeneration: b.generation, LastTransitionTime: b.transition,
		}
		if !allowed {
			cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
		}
		obj := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: b.name, Namespace: b.ns},
			Status: policyv1.PodDisruptionBudgetStatus{
				ObservedGeneration: b.generation,
				DisruptionsAllowed: int32(st.DisruptionsAllowed),
				CurrentHealthy:     int32(st.Healthy),
				DesiredHealthy:     int32(st.DesiredHealthy),
				ExpectedPods:       int32(st.ExpectedPods),
				Conditions:         []metav1.Condition{cond},
			},
		}
		if err := c.c.Status().Update(context.Background(), obj, apiserver.NoEcho); err != nil {
			must(err, "writing the status of PodDisruptionBudget "+b.ns+"/"+b.name)
		}
	}
}

// scaleDownOrder returns w's pods that are not terminating, in the order a
// scale-down removes them (as the ReplicaSet controller ranks them, newest
// first among equals).
func scaleDownOrder(w *workload) []*pod {
	var active []*pod
	for _, p := range w.pods {
		if !p.terminating {
			active = append(active, p)
		}
	}
	slices.SortFunc(active, func(a, b *pod) int {
		if c := cmp.Compare(scaleDownRank(a), scaleDownRank(b)); c != 0 {
			return c
		}
		return cmp.Compare(b.seq, a.seq)
	})
	return active
}
