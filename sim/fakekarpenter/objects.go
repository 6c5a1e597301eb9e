package fakekarpenter

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/internal/podorder"
)

// nodeClassRef names a NodeClass.
type nodeClassRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Name  string `json:"name"`
}

// requirement is a NodeSelectorRequirement of a NodePool or NodeClaim.
type requirement struct {
	Key       string   `json:"key"`
	Operator  string   `json:"operator"`
	Values    []string `json:"values,omitempty"`
	MinValues *int64   `json:"minValues,omitempty"`
}

// claimSpec is NodeClaim.spec, and NodePool.spec.template.spec without
// resources.
type claimSpec struct {
	NodeClassRef           nodeClassRef    `json:"nodeClassRef"`
	Requirements           []requirement   `json:"requirements,omitempty"`
	Resources              *claimResources `json:"resources,omitempty"`
	Taints                 []corev1.Taint  `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint  `json:"startupTaints,omitempty"`
	ExpireAfter            string          `json:"expireAfter,omitempty"`
	TerminationGracePeriod string          `json:"terminationGracePeriod,omitempty"`
}

type claimResources struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// condition is a NodeClaim status condition.
type condition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason"`
	Message            string      `json:"message"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	ObservedGeneration int64       `json:"observedGeneration,omitempty"`
}

// claimStatus is NodeClaim.status.
type claimStatus struct {
	NodeName         string              `json:"nodeName,omitempty"`
	ProviderID       string              `json:"providerID,omitempty"`
	ImageID          string              `json:"imageID,omitempty"`
	Capacity         corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable      corev1.ResourceList `json:"allocatable,omitempty"`
	LastPodEventTime *metav1.Time        `json:"lastPodEventTime,omitempty"`
	Conditions       []condition         `json:"conditions,omitempty"`
}

// budgetSpec is one NodePool disruption budget.
type budgetSpec struct {
	Nodes    string   `json:"nodes"`
	Schedule *string  `json:"schedule,omitempty"`
	Duration *string  `json:"duration,omitempty"`
	Reasons  []string `json:"reasons,omitempty"`
}

type poolTemplate struct {
	Metadata struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec claimSpec `json:"spec"`
}

type poolSpec struct {
	Weight     *int32 `json:"weight,omitempty"`
	Disruption struct {
		ConsolidationPolicy string       `json:"consolidationPolicy,omitempty"`
		ConsolidateAfter    *string      `json:"consolidateAfter,omitempty"`
		Budgets             []budgetSpec `json:"budgets,omitempty"`
	} `json:"disruption"`
	Limits   corev1.ResourceList `json:"limits,omitempty"`
	Template poolTemplate        `json:"template"`
}

// nodePool is a NodePool with Karpenter's defaults applied.
type nodePool struct {
	name             string
	obj              *unstructured.Unstructured
	spec             poolSpec
	weight           int32
	policy           string
	consolidateAfter *time.Duration // nil: Never
	budgets          []budget
	expireAfter      string
	hash             string
}

// nodeClaim is a NodeClaim read from the API, with its spec and status
// decoded. obj is the object as read: writes start from it.
type nodeClaim struct {
	obj    *unstructured.Unstructured
	spec   claimSpec
	status claimStatus
	// Read from obj's metadata once: writes through a nodeClaim replace
	// obj with the stored result of a status update, which keeps them.
	nm, poolName string
	del          bool
}

// decode converts a JSON-like value into out.
func decode(in any, out any) error {
	if in == nil {
		return nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// encode converts in into a JSON-like value of unstructured content.
func encode(in any) (any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var out any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func newClaimObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(NodeClaimGVK)
	return u
}

func newPoolObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(NodePoolGVK)
	return u
}

// parseClaim decodes a NodeClaim.
func parseClaim(u *unstructured.Unstructured) (*nodeClaim, error) {
	nc := &nodeClaim{obj: u, nm: u.GetName(), poolName: u.GetLabels()[LabelNodePool], del: u.GetDeletionTimestamp() != nil}
	if err := decode(u.Object["spec"], &nc.spec); err != nil {
		return nil, fmt.Errorf("decoding the spec of NodeClaim %s: %w", u.GetName(), err)
	}
	if err := decode(u.Object["status"], &nc.status); err != nil {
		return nil, fmt.Errorf("decoding the status of NodeClaim %s: %w", u.GetName(), err)
	}
	return nc, nil
}

// NodePoolHash is the karpenter.sh/nodepool-hash of NodePool u's template,
// which Karpenter's NodePool hash controller writes on the NodeClaims of
// the pool that carry none (an adopted node's claim): from then on a
// change of the template is static drift for them too.
func NodePoolHash(u *unstructured.Unstructured) (string, error) {
	np, err := parsePool(u)
	if err != nil {
		return "", err
	}
	return np.hash, nil
}

// parsePool decodes a NodePool and applies the CRD's defaults.
func parsePool(u *unstructured.Unstructured) (*nodePool, error) {
	np := &nodePool{name: u.GetName(), obj: u}
	if err := decode(u.Object["spec"], &np.spec); err != nil {
		return nil, fmt.Errorf("decoding the spec of NodePool %s: %w", u.GetName(), err)
	}
	d := &np.spec.Disruption
	if np.spec.Weight != nil {
		np.weight = *np.spec.Weight
	}
	np.policy = d.ConsolidationPolicy
	if np.policy == "" {
		np.policy = WhenEmptyOrUnderutilized
	}
	after := "0s"
	if d.ConsolidateAfter != nil {
		after = *d.ConsolidateAfter
	}
	ca, err := parseNillableDuration(after)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: spec.disruption.consolidateAfter: %w", u.GetName(), err)
	}
	np.consolidateAfter = ca
	specs := d.Budgets
	if len(specs) == 0 {
		specs = []budgetSpec{{Nodes: "10%"}}
	}
	for i, b := range specs {
		pb, err := parseBudget(b)
		if err != nil {
			return nil, fmt.Errorf("NodePool %s: spec.disruption.budgets[%d]: %w", u.GetName(), i, err)
		}
		np.budgets = append(np.budgets, pb)
	}
	np.expireAfter = np.spec.Template.Spec.ExpireAfter
	if np.expireAfter == "" {
		np.expireAfter = DefaultExpireAfter.String()
	}
	np.hash = templateHash(&np.spec.Template)
	return np, nil
}

// templateHash is the hash of the parts of a NodePool template whose change
// is static drift: its labels, annotations, taints, startup taints and
// NodeClass. Requirements, expireAfter and terminationGracePeriod are left
// out.
func templateHash(t *poolTemplate) string {
	b, _ := json.Marshal(struct {
		Labels        map[string]string
		Annotations   map[string]string
		Taints        []corev1.Taint
		StartupTaints []corev1.Taint
		NodeClassRef  nodeClassRef
	}{t.Metadata.Labels, t.Metadata.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef})
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 10)
}

// parseNillableDuration parses a Karpenter duration: "Never" is nil.
func parseNillableDuration(s string) (*time.Duration, error) {
	if s == "Never" {
		return nil, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("%q is neither a duration nor Never", s)
	}
	return &d, nil
}

// claimName returns the name of the NodeClaim that owns n, or "".
func claimName(n *corev1.Node) string {
	for _, o := range n.OwnerReferences {
		if o.Kind == NodeClaimGVK.Kind && strings.HasPrefix(o.APIVersion, NodeClaimGVK.Group+"/") {
			return o.Name
		}
	}
	return ""
}

// providerPrefix is the provider ID scheme of the model's instances.
const providerPrefix = "twin://"

// nodeName is the name of the claim's Node: where registration found it,
// or what the launch returned.
func (nc *nodeClaim) nodeName() string {
	if nc.status.NodeName != "" {
		return nc.status.NodeName
	}
	return strings.TrimPrefix(nc.status.ProviderID, providerPrefix)
}

func (nc *nodeClaim) name() string   { return nc.nm }
func (nc *nodeClaim) pool() string   { return nc.poolName }
func (nc *nodeClaim) deleting() bool { return nc.del }

// cond returns the condition of type t, or nil.
func (nc *nodeClaim) cond(t string) *condition {
	for i := range nc.status.Conditions {
		if nc.status.Conditions[i].Type == t {
			return &nc.status.Conditions[i]
		}
	}
	return nil
}

// isTrue reports whether condition t is True.
func (nc *nodeClaim) isTrue(t string) bool {
	c := nc.cond(t)
	return c != nil && c.Status == string(metav1.ConditionTrue)
}

// setCond sets condition t and reports whether that changed it. The
// transition time moves only when the status does.
func (nc *nodeClaim) setCond(t, status, reason, message string, now time.Time) bool {
	if reason == "" {
		reason = t
	}
	ts := metav1.NewTime(now.Truncate(time.Second))
	if c := nc.cond(t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == message {
			return false
		}
		if c.Status != status {
			c.LastTransitionTime = ts
		}
		c.Status, c.Reason, c.Message = status, reason, message
		c.ObservedGeneration = nc.obj.GetGeneration()
		return true
	}
	nc.status.Conditions = append(nc.status.Conditions, condition{
		Type: t, Status: status, Reason: reason, Message: message,
		LastTransitionTime: ts, ObservedGeneration: nc.obj.GetGeneration(),
	})
	return true
}

// clearCond removes condition t and reports whether it was there.
func (nc *nodeClaim) clearCond(t string) bool {
	n := len(nc.status.Conditions)
	nc.status.Conditions = slices.DeleteFunc(nc.status.Conditions, func(c condition) bool { return c.Type == t })
	return len(nc.status.Conditions) != n
}

// writeStatus stores nc.status with an optimistic lock.
func (k *Karpenter) writeStatus(ctx context.Context, nc *nodeClaim) error {
	st, err := encode(nc.status)
	if err != nil {
		return fmt.Errorf("encoding the status of NodeClaim %s: %w", nc.name(), err)
	}
	u := nc.obj.DeepCopy()
	u.Object["status"] = st
	if err := k.c.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("writing the status of NodeClaim %s: %w", nc.name(), err)
	}
	nc.obj = u
	return nil
}

// getClaim reads a NodeClaim; nil, nil when it does not exist.
func (k *Karpenter) getClaim(ctx context.Context, name string) (*nodeClaim, error) {
	u := newClaimObject()
	if err := k.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		if client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading NodeClaim %s: %w", name, err)
	}
	return parseClaim(u)
}

// listClaims lists the NodeClaims, sorted by name.
func (k *Karpenter) listClaims(ctx context.Context) ([]*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(NodeClaimGVK.GroupVersion().WithKind("NodeClaimList"))
	if err := k.c.List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // the CRD is not installed
		}
		return nil, fmt.Errorf("listing NodeClaims: %w", err)
	}
	out := make([]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// listPools lists and decodes the NodePools, sorted by name. A NodePool
// that does not decode is skipped and traced.
func (k *Karpenter) listPools(ctx context.Context, trace bool) ([]*nodePool, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(NodePoolGVK.GroupVersion().WithKind("NodePoolList"))
	if err := k.c.List(ctx, l); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	var out []*nodePool
	for i := range l.Items {
		np, err := parsePool(&l.Items[i])
		if err != nil {
			if !trace {
				continue
			}
			k.trace("karpenter/invalid-nodepool", "nodepool/"+l.Items[i].GetName(), map[string]any{"error": err.Error()})
			continue
		}
		out = append(out, np)
	}
	slices.SortFunc(out, func(a, b *nodePool) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// Pod helpers.

// ownedByDaemonSet reports whether p is a DaemonSet pod.
func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// mirror reports whether p is a static (mirror) pod, owned by its Node.
func mirror(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "Node" {
			return true
		}
	}
	return false
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// active reports whether p is neither terminal nor terminating.
func active(p *corev1.Pod) bool { return !terminal(p) && !terminating(p) }

// reschedulable reports whether p would have to move if its node went:
// DaemonSet, mirror, terminating and terminal pods would not.
func reschedulable(p *corev1.Pod) bool { return active(p) && !ownedByDaemonSet(p) && !mirror(p) }

// critical reports whether p has a system-critical priority class.
func critical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
}

// tolerates reports whether tolerations tolerate taint.
func tolerates(tolerations []corev1.Toleration, taint corev1.Taint) bool {
	for _, t := range tolerations {
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key == "" && t.Operator == corev1.TolerationOpExists {
			return true
		}
		if t.Key != taint.Key {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			return true
		case corev1.TolerationOpEqual, "":
			if t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}

// podRequests is what a pod asks of a node.
type res struct{ cpu, mem, pods int64 }

func (a res) plus(b res) res  { return res{a.cpu + b.cpu, a.mem + b.mem, a.pods + b.pods} }
func (a res) minus(b res) res { return res{a.cpu - b.cpu, a.mem - b.mem, a.pods - b.pods} }
func (a res) covers(b res) bool {
	return a.cpu >= b.cpu && a.mem >= b.mem && a.pods >= b.pods
}

// podRequests sums the container requests of p (cpu in millicores, memory
// in bytes) and counts the pod.
func podRequests(p *corev1.Pod) res {
	r := res{pods: 1}
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			r.cpu += q.MilliValue()
		}
		if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
			r.mem += q.Value()
		}
	}
	return r
}

// fromList reads cpu, memory and pods of a resource list; a missing pods
// count is 110, kubelet's default.
func fromList(l corev1.ResourceList) res {
	r := res{pods: 110}
	if q, ok := l[corev1.ResourceCPU]; ok {
		r.cpu = q.MilliValue()
	}
	if q, ok := l[corev1.ResourceMemory]; ok {
		r.mem = q.Value()
	}
	if q, ok := l[corev1.ResourcePods]; ok {
		r.pods = q.Value()
	}
	return r
}

func (a res) list() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(a.cpu, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(a.mem, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(a.pods, resource.DecimalSI),
	}
}

// Node helpers.

// readyCondition returns n's Ready condition, or nil.
func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	c := readyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
}

var disruptedTaint = corev1.Taint{Key: TaintDisrupted, Effect: corev1.TaintEffectNoSchedule}

// listPods lists every pod, sorted by namespace and name.
func (k *Karpenter) listPods(ctx context.Context, opts ...client.ListOption) ([]*corev1.Pod, error) {
	var l corev1.PodList
	if err := k.c.List(ctx, &l, opts...); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return podorder.ByName(l.Items), nil
}

// podsOnNode lists the pods bound to node, through the spec.nodeName index
// when the client has one.
func (k *Karpenter) podsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error) {
	pods, err := k.listPods(ctx, client.MatchingFields{"spec.nodeName": node})
	if err == nil {
		return pods, nil
	}
	all, err2 := k.listPods(ctx)
	if err2 != nil {
		return nil, err2
	}
	return slices.DeleteFunc(all, func(p *corev1.Pod) bool { return p.Spec.NodeName != node }), nil
}
