// Package clusterrun runs a scenario file on a real API server: the local
// control plane of internal/localcluster (kube-apiserver, etcd, the
// controller manager, the scheduler, KWOK and Karpenter's KWOK provider)
// or any cluster a kubeconfig names. It creates the scenario's nodes,
// workloads, PDBs and pools as real objects, starts the bootroll
// controller and the host-mode daemon as processes, carries out the
// scenario's events and the faults it can inject on wall-clock time,
// watches the API and feeds what it sees to the same invariant checker
// the twin uses (sim/invariant). What it cannot do it reports by name as
// skipped. See docs/cluster-target.md.
//
// Unlike the twin this package is all edge: it reads the wall clock,
// starts processes and goroutines. Its pure parts (the scenario's
// objects, the plan of steps, the conversion of watch events) are in
// objects.go, plan.go and observe.go and are tested without a cluster.
package clusterrun

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// GroupLabel is put on every Node the run creates or has Karpenter
// create, with the scenario node group's name: the host-mode daemon is
// started for the nodes that carry it (--nodes), so nodes of other runs
// or of the cluster are left alone.
const GroupLabel = "sim.bootroll.dev/group"

// KarpenterGroup is the Karpenter API group of NodePools and NodeClaims.
const KarpenterGroup = "karpenter.sh"

// KWOKNodeClass is the KWOKNodeClass `bootroll cluster up` creates, which
// a NodePool without a scenario node class launches from. A scenario's
// node classes become KWOKNodeClasses of their names (NodeClass).
const KWOKNodeClass = "default"

// NodeClass is the KWOKNodeClass of a scenario node class: its
// registrationDelay is the class's nodeRegistrationDelay, so a node the
// KWOK provider launches registers as late as the twin's does.
func NodeClass(nc scenario.NodeClass) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("karpenter.kwok.sh/v1alpha1")
	u.SetKind("KWOKNodeClass")
	u.SetName(nc.Name)
	// The CRD's pattern takes whole units only (^([0-9]+(s|m|h))+$).
	u.Object["spec"] = map[string]any{"nodeRegistrationDelay": fmt.Sprintf("%ds", int64(nc.RegistrationDelay.Round(time.Second)/time.Second))}
	return u
}

// nodeClassName is the KWOKNodeClass NodePool np launches from.
func nodeClassName(np scenario.KarpenterNodePool) string {
	if np.NodeClass != "" {
		return np.NodeClass
	}
	return KWOKNodeClass
}

// DaemonSelector is the --nodes selector of the host-mode daemon: every
// Node the run made.
const DaemonSelector = GroupLabel

// Objects are the objects a scenario starts with, in the order they are
// created.
type Objects struct {
	// Nodes are the static groups' Nodes (KWOK manages them).
	Nodes []*corev1.Node
	// NodePools are Karpenter NodePools; NodeClaims the claims of the
	// Karpenter groups' nodes, which Karpenter's KWOK provider launches.
	NodeClasses []*unstructured.Unstructured
	NodePools   []*unstructured.Unstructured
	NodeClaims  []*unstructured.Unstructured
	// KarpenterNodes are the Nodes the NodeClaims adopt when the run
	// starts Karpenter itself (AdoptedNode), one per NodeClaim, in the
	// same order; All leaves them out (the launch path has Karpenter's
	// KWOK provider make the Nodes).
	KarpenterNodes []*corev1.Node
	// AdoptingClaims are the NodeClaims that adopt them (AdoptingClaim).
	AdoptingClaims []*unstructured.Unstructured
	// Workloads are Deployments; BarePods the pods of unmanaged
	// workloads; DaemonSets and PDBs as named.
	Workloads  []*appsv1.Deployment
	BarePods   []*corev1.Pod
	DaemonSets []*appsv1.DaemonSet
	PDBs       []*policyv1.PodDisruptionBudget
	// Pools are the BootcNodePools.
	Pools []*v1alpha1.BootcNodePool
	// PinnedSets are the PinnedImageSets.
	PinnedSets []*v1alpha1.PinnedImageSet
}

// All lists every object in creation order: nodes first (so pods find
// room), then what runs on them, the pools last.
func (o *Objects) All() []client.Object {
	var out []client.Object
	for _, n := range o.Nodes {
		out = append(out, n)
	}
	for _, n := range o.NodePools {
		out = append(out, n)
	}
	for _, n := range o.NodeClaims {
		out = append(out, n)
	}
	for _, d := range o.DaemonSets {
		out = append(out, d)
	}
	for _, d := range o.Workloads {
		out = append(out, d)
	}
	for _, p := range o.BarePods {
		out = append(out, p)
	}
	for _, p := range o.PDBs {
		out = append(out, p)
	}
	for _, p := range o.PinnedSets {
		out = append(out, p)
	}
	for _, p := range o.Pools {
		out = append(out, p)
	}
	return out
}

// Build maps a scenario to the objects it starts with.
func Build(sc *scenario.Scenario) (*Objects, error) {
	o := &Objects{}
	for _, g := range sc.NodeGroups {
		for i := range g.Count {
			name := fmt.Sprintf("%s-%d", g.Name, i)
			if g.Karpenter != nil {
				np := karpenterPool(sc, g.Karpenter.NodePool)
				if np == nil {
					return nil, fmt.Errorf("nodeGroups %s: no karpenter.nodePools entry %q", g.Name, g.Karpenter.NodePool)
				}
				o.NodeClaims = append(o.NodeClaims, NodeClaim(name, g, np))
				o.KarpenterNodes = append(o.KarpenterNodes, AdoptedNode(name, g, np))
				o.AdoptingClaims = append(o.AdoptingClaims, AdoptingClaim(name, g, np))
				continue
			}
			o.Nodes = append(o.Nodes, Node(name, g, i < g.Cordoned))
		}
	}
	if sc.Karpenter != nil {
		for _, nc := range sc.Karpenter.NodeClasses {
			o.NodeClasses = append(o.NodeClasses, NodeClass(nc))
		}
		for _, np := range sc.Karpenter.NodePools {
			o.NodePools = append(o.NodePools, NodePool(np))
		}
	}
	for _, ds := range sc.DaemonSets {
		o.DaemonSets = append(o.DaemonSets, DaemonSet(ds))
	}
	for _, w := range sc.Workloads {
		if w.Unmanaged {
			for i := range w.Replicas {
				o.BarePods = append(o.BarePods, BarePod(w, i))
			}
		} else {
			o.Workloads = append(o.Workloads, Deployment(w))
		}
		if w.PDB != nil {
			o.PDBs = append(o.PDBs, PDB(w.Name, w.PDB.MinAvailable, w.PDB.MaxUnavailable))
		}
	}
	for _, ps := range sc.PinnedImageSets {
		o.PinnedSets = append(o.PinnedSets, PinnedSet(sc, ps))
	}
	for _, p := range sc.Bootroll.Pools {
		o.Pools = append(o.Pools, Pool(sc, p))
	}
	if sc.Karpenter != nil && string(sc.Karpenter.Version) == localcluster.KarpenterV114 {
		unregisteredV114(o)
	}
	return o, nil
}

// TaintUnregistered is the taint Karpenter's launched nodes carry until
// their NodeClaim registers them.
const TaintUnregistered = "karpenter.sh/unregistered"

// unregisteredV114 prepares the objects for Karpenter v1.14, which
// registers a claim's Node only when it carries karpenter.sh/unregistered
// ("missing taint prevents registration-related race conditions on
// Karpenter-managed nodes"; v1.15 registers it without): the adopted
// nodes carry it from the setup on, as a node the provider launched does,
// and every pod tolerates it, so that the workloads run on them before
// Karpenter is installed, as in the twin. Karpenter removes it when it
// registers the node.
func unregisteredV114(o *Objects) {
	for _, n := range o.KarpenterNodes {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintUnregistered, Effect: corev1.TaintEffectNoExecute})
	}
	tol := corev1.Toleration{Key: TaintUnregistered, Operator: corev1.TolerationOpExists}
	for _, d := range o.Workloads {
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, tol)
	}
	for _, d := range o.DaemonSets {
		d.Spec.Template.Spec.Tolerations = append(d.Spec.Template.Spec.Tolerations, tol)
	}
	for _, p := range o.BarePods {
		p.Spec.Tolerations = append(p.Spec.Tolerations, tol)
	}
}

func karpenterPool(sc *scenario.Scenario, name string) *scenario.KarpenterNodePool {
	if sc.Karpenter == nil {
		return nil
	}
	for i := range sc.Karpenter.NodePools {
		if sc.Karpenter.NodePools[i].Name == name {
			return &sc.Karpenter.NodePools[i]
		}
	}
	return nil
}

// Node is a static group's Node for KWOK: the annotation that makes kwok
// manage it, the group's labels and taints, its capacity as both capacity
// and allocatable (pods defaults to 110), and the admin's cordon.
func Node(name string, g scenario.NodeGroup, cordoned bool) *corev1.Node {
	labels := maps.Clone(g.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[GroupLabel] = g.Name
	labels[corev1.LabelHostname] = name
	labels[corev1.LabelOSStable] = "linux"
	labels[corev1.LabelArchStable] = "amd64"
	labels["type"] = "kwok"
	// One zone for every node, as in the twin, which has no zones: the
	// scheduler's default topology spread counts zones, and nodes without
	// the label would be preferred over the Karpenter nodes that have it.
	if _, ok := labels[corev1.LabelTopologyZone]; !ok {
		labels[corev1.LabelTopologyZone] = KWOKZone
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{localcluster.KWOKNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{Unschedulable: cordoned, Taints: taints(g.Taints)},
		Status: corev1.NodeStatus{
			Capacity:    resources(g.Capacity),
			Allocatable: resources(g.Capacity),
			NodeInfo:    corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux", KubeletVersion: "fake"},
		},
	}
	return n
}

func taints(ts []scenario.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range ts {
		out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	return out
}

func resources(c map[string]resource.Quantity) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")}
	for k, v := range c {
		out[corev1.ResourceName(k)] = v.DeepCopy()
	}
	return out
}

// NodePool is a Karpenter NodePool (karpenter.sh/v1) launching from the
// KWOKNodeClass, with the scenario's labels, startup taints, disruption
// settings and budgets.
func NodePool(np scenario.KarpenterNodePool) *unstructured.Unstructured {
	// Nodes Karpenter launches for pending pods carry the group label
	// too (the NodePool's name), so the host-mode daemon plays them.
	labels := map[string]any{GroupLabel: np.Name}
	for k, v := range np.Labels {
		labels[k] = v
	}
	budgets := twin.NodePoolBudgets(np)
	spec := map[string]any{
		"template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{
				"requirements": []any{
					map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}},
					map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}},
					map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
					// The zone of every other node (Node): the twin has no zones.
					map[string]any{"key": corev1.LabelTopologyZone, "operator": "In", "values": []any{zoneOf(np.Labels)}},
				},
				"nodeClassRef": map[string]any{"name": nodeClassName(np), "kind": "KWOKNodeClass", "group": "karpenter.kwok.sh"},
				"expireAfter":  neverString(np.ExpireAfter),
			},
		},
		"disruption": map[string]any{
			"consolidationPolicy": string(np.ConsolidationPolicy),
			"consolidateAfter":    neverString(np.ConsolidateAfter),
			"budgets":             budgets,
		},
	}
	if len(np.StartupTaints) > 0 {
		var ts []any
		for _, t := range np.StartupTaints {
			ts = append(ts, t.Object())
		}
		spec["template"].(map[string]any)["spec"].(map[string]any)["startupTaints"] = ts
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(KarpenterGroup + "/v1")
	u.SetKind("NodePool")
	u.SetName(np.Name)
	return u
}

func neverString(d scenario.NeverDuration) string {
	if d.Never {
		return "Never"
	}
	return d.Duration.String()
}

// NodeClaim is the claim of one node of a Karpenter group: Karpenter's
// KWOK provider launches it as a KWOK Node. The claim carries the group's
// labels and the run's group label, and requests the group's capacity so
// that the provider picks an instance type that holds it.
func NodeClaim(name string, g scenario.NodeGroup, np *scenario.KarpenterNodePool) *unstructured.Unstructured {
	labels := map[string]any{GroupLabel: g.Name, "karpenter.sh/nodepool": np.Name}
	for k, v := range np.Labels {
		labels[k] = v
	}
	for k, v := range g.Labels {
		labels[k] = v
	}
	req := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(g.Capacity)) {
		q := g.Capacity[k]
		if k == "cpu" || k == "memory" {
			req[k] = q.String()
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"requirements": []any{
			map[string]any{"key": "kubernetes.io/arch", "operator": "In", "values": []any{"amd64"}},
			map[string]any{"key": "kubernetes.io/os", "operator": "In", "values": []any{"linux"}},
			map[string]any{"key": "karpenter.sh/capacity-type", "operator": "In", "values": []any{"on-demand"}},
			// The KWOK provider launches a claim only with an instance type.
			map[string]any{"key": corev1.LabelInstanceTypeStable, "operator": "In", "values": []any{InstanceType(g.Capacity["cpu"], g.Capacity["memory"])}},
		},
		"resources":    map[string]any{"requests": req},
		"nodeClassRef": map[string]any{"name": nodeClassName(*np), "kind": "KWOKNodeClass", "group": "karpenter.kwok.sh"},
		"expireAfter":  neverString(np.ExpireAfter),
	}}}
	u.SetAPIVersion(KarpenterGroup + "/v1")
	u.SetKind("NodeClaim")
	u.SetName(name)
	u.Object["metadata"].(map[string]any)["labels"] = labels
	return u
}

// KWOKZone is the zone of the KWOK provider's offerings (instance_types.json:
// test-zone-a to d) that every node of a run is in, static, adopted or
// launched, unless the scenario's labels name another: the twin has no
// zones, and kube-scheduler's default topology spread (by zone and by
// host) places pods on nodes of one zone as the twin spreads them. Found
// on the expiry scenario: with the zone on the Karpenter nodes only, the
// scheduler put every pod on the static nodes and Karpenter reaped an
// empty Karpenter node the twin had given a pod.
const KWOKZone = "test-zone-a"

// zoneOf is the zone labels name, or KWOKZone.
func zoneOf(labels map[string]string) string {
	if z := labels[corev1.LabelTopologyZone]; z != "" {
		return z
	}
	return KWOKZone
}

// KWOKProviderPrefix is the provider ID prefix of Karpenter's KWOK
// provider: it finds a claim's instance as the Node named by the rest.
const KWOKProviderPrefix = "kwok://"

// karpenterNodeLabels are the labels Karpenter's KWOK provider puts on a
// Node it launches for a claim of group g in NodePool np, and that an
// adopted node carries from its creation: the NodePool, the instance
// type, capacity type and zone (Karpenter's disruption takes a node as a
// candidate only with a known instance type and offering).
func karpenterNodeLabels(g scenario.NodeGroup, np *scenario.KarpenterNodePool) map[string]string {
	return map[string]string{
		"karpenter.sh/nodepool":        np.Name,
		corev1.LabelInstanceTypeStable: InstanceType(g.Capacity["cpu"], g.Capacity["memory"]),
		"karpenter.sh/capacity-type":   "on-demand",
		corev1.LabelTopologyZone:       zoneOf(np.Labels),
		corev1.LabelArchStable:         "amd64",
		corev1.LabelOSStable:           "linux",
	}
}

// AdoptedNode is the Node of a Karpenter group's node when the run
// starts Karpenter itself: a KWOK Node that exists from the setup on, as
// the twin's Karpenter-managed nodes do, with the labels and the provider
// ID (kwok://<name>) of a node the KWOK provider launched, so that the
// NodeClaim of the same name (AdoptingClaim), created when Karpenter is
// installed, registers it instead of launching another.
func AdoptedNode(name string, g scenario.NodeGroup, np *scenario.KarpenterNodePool) *corev1.Node {
	n := Node(name, g, false)
	for k, v := range np.Labels {
		n.Labels[k] = v
	}
	for k, v := range g.Labels {
		n.Labels[k] = v
	}
	for k, v := range karpenterNodeLabels(g, np) {
		n.Labels[k] = v
	}
	n.Spec.ProviderID = KWOKProviderPrefix + name
	return n
}

// AdoptingClaim is the NodeClaim that adopts AdoptedNode(name, g, np):
// NodeClaim's spec, with the node's Karpenter labels.
func AdoptingClaim(name string, g scenario.NodeGroup, np *scenario.KarpenterNodePool) *unstructured.Unstructured {
	u := NodeClaim(name, g, np)
	labels := u.GetLabels()
	for k, v := range karpenterNodeLabels(g, np) {
		labels[k] = v
	}
	u.SetLabels(labels)
	return u
}

// AdoptingStatus is the status merge patch that marks an adopting claim
// launched on node (the condition Launched, the provider ID, capacity
// and allocatable), written before Karpenter starts: Karpenter's launch
// step skips a claim whose Launched condition is set, and registration
// finds the Node by the provider ID.
func AdoptingStatus(node *corev1.Node, now metav1.Time) map[string]any {
	res := map[string]any{}
	for k, v := range node.Status.Allocatable {
		res[string(k)] = v.String()
	}
	return map[string]any{"status": map[string]any{
		"providerID":  node.Spec.ProviderID,
		"capacity":    res,
		"allocatable": res,
		"conditions": []any{map[string]any{
			"type": "Launched", "status": "True", "reason": "Launched", "message": "",
			"lastTransitionTime": now.UTC().Format("2006-01-02T15:04:05Z"),
		}},
	}}
}

func podTemplate(labels, nodeSelector map[string]string, req map[string]resource.Quantity) corev1.PodTemplateSpec {
	rl := corev1.ResourceList{}
	for k, v := range req {
		rl[corev1.ResourceName(k)] = v.DeepCopy()
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector: nodeSelector,
			Containers:   []corev1.Container{{Name: "main", Image: "registry.example/app:1", Resources: corev1.ResourceRequirements{Requests: rl}}},
			// KWOK nodes carry kwok's own taint when Karpenter's provider
			// makes them; the pods go there as they would in the twin.
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}},
			// As the twin's pods: a drained pod goes at once.
			TerminationGracePeriodSeconds: new(int64(0)),
		},
	}
}

// Deployment is a managed workload.
func Deployment(w scenario.Workload) *appsv1.Deployment {
	labels := map[string]string{cluster.LabelApp: w.Name}
	tmpl := podTemplate(labels, w.NodeSelector, w.Requests)
	if w.EmptyDir {
		tmpl.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: cluster.WorkloadNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(w.Replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: tmpl,
		},
	}
}

// BarePod is pod i of an unmanaged workload: no owner.
func BarePod(w scenario.Workload, i int) *corev1.Pod {
	labels := map[string]string{cluster.LabelApp: w.Name}
	tmpl := podTemplate(labels, w.NodeSelector, w.Requests)
	if w.EmptyDir {
		tmpl.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name + "-" + strconv.Itoa(i), Namespace: cluster.WorkloadNamespace, Labels: labels},
		Spec:       tmpl.Spec,
	}
}

// DaemonSet runs on every node it selects; it tolerates every taint, as
// the twin's do.
func DaemonSet(ds scenario.DaemonSet) *appsv1.DaemonSet {
	labels := map[string]string{cluster.LabelApp: ds.Name}
	tmpl := podTemplate(labels, ds.NodeSelector, ds.Requests)
	tmpl.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: cluster.DaemonSetNamespace},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl},
	}
}

// PDB is a workload's PodDisruptionBudget.
func PDB(workload string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: workload, Namespace: cluster.WorkloadNamespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: minAvailable, MaxUnavailable: maxUnavailable,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{cluster.LabelApp: workload}},
		},
	}
}

// Pool is a BootcNodePool built as the twin builds it (sc.PoolSpec), with
// one difference: a tag reference is pinned to the scenario's digest,
// because the real controller resolves tags at a registry and the
// scenario's registries do not exist.
func Pool(sc *scenario.Scenario, p scenario.Pool) *v1alpha1.BootcNodePool {
	pool := &v1alpha1.BootcNodePool{Spec: sc.PoolSpec(p)}
	pool.Name = p.Name
	pool.Spec.Image = v1alpha1.ImageReference(PinnedRef(sc, p.Image))
	return pool
}

// PinnedRef is the digest reference of a scenario image: its ref when
// that is one, else the ref pinned to the image's digest.
func PinnedRef(sc *scenario.Scenario, short string) string {
	im := sc.Image(short)
	if im == nil {
		return ""
	}
	if imageref.IsDigest(im.Ref) {
		return im.Ref
	}
	p, err := imageref.WithDigest(im.Ref, im.Digest)
	if err != nil {
		return im.Ref // the loader validated both; keep the ref
	}
	return p
}

// PinnedSet is a PinnedImageSet of the scenario.
func PinnedSet(sc *scenario.Scenario, ps scenario.PinnedImageSet) *v1alpha1.PinnedImageSet {
	obj := &v1alpha1.PinnedImageSet{}
	obj.Name = ps.Name
	obj.Spec.Pool = ps.Pool
	obj.Spec.NodeSelector = ps.NodeSelector
	obj.Spec.Images = PinnedRefs(ps.Images)
	obj.Spec.Concurrency = ps.Concurrency
	return obj
}

// PinnedRefs are the digest references of pinned images.
func PinnedRefs(ims []scenario.PinnedImage) []v1alpha1.DigestReference {
	out := make([]v1alpha1.DigestReference, 0, len(ims))
	for _, im := range ims {
		out = append(out, v1alpha1.DigestReference(im.Ref))
	}
	return out
}

// kwokSizes are the CPU counts of Karpenter's KWOK instance types
// (sigs.k8s.io/karpenter/kwok/cloudprovider/instance_types.json, v1.15.0);
// each comes in families c, s and m with 2, 4 and 8 GiB per CPU.
var kwokSizes = []int64{1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256}

// InstanceType is the smallest amd64 Linux instance type of Karpenter's
// KWOK provider with at least cpu and memory: the fewest CPUs, then the
// least memory per CPU.
func InstanceType(cpu, memory resource.Quantity) string {
	const gi = int64(1) << 30
	for _, n := range kwokSizes {
		if resource.NewQuantity(n, resource.DecimalSI).Cmp(cpu) < 0 {
			continue
		}
		for _, f := range []struct {
			name   string
			perCPU int64
		}{{"c", 2}, {"s", 4}, {"m", 8}} {
			if resource.NewQuantity(n*f.perCPU*gi, resource.BinarySI).Cmp(memory) >= 0 {
				return fmt.Sprintf("%s-%dx-amd64-linux", f.name, n)
			}
		}
	}
	return "m-256x-amd64-linux"
}
