package fakekarpenter

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

var ctx = context.Background()

var dumpTraces = flag.Bool("dump", false, "log the Karpenter trace of every test")

// t0 is a Monday noon, UTC.
var t0 = time.Date(2027, 1, 4, 12, 0, 0, 0, time.UTC)

// traceRec is one trace record.
type traceRec struct {
	at      time.Duration
	kind    string
	object  string
	details map[string]any
}

func (r traceRec) String() string {
	keys := slices.Sorted(maps.Keys(r.details))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, r.details[k])
	}
	return fmt.Sprintf("%v %s %s %s", r.at, r.kind, r.object, strings.Join(parts, " "))
}

// harness runs a Karpenter on the twin's engine and API server, wired the
// way the twin wires it: one queue per controller, fed by Map.
type harness struct {
	t      testing.TB
	eng    *engine.Engine
	api    *apiserver.Server
	c      client.Client
	k      *Karpenter
	prov   *fakeProvider
	images map[string]string
	traces []traceRec
	// refuse names pods ("ns/name") whose evictions get 429.
	refuse map[string]bool
	evicts []string
	queues map[string]*engine.Queue
}

type harnessOption func(*Options)

func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	eng := engine.New(t0, 1)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	api := apiserver.New(scheme, eng.Clock())
	if err := Register(api); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, eng: eng, api: api, c: api.AdminClient(), images: map[string]string{"default": "quay.io/os@sha256:aaa"}, refuse: map[string]bool{}, queues: map[string]*engine.Queue{}}
	h.prov = &fakeProvider{c: h.c, ready: true}
	api.SetEvictionHandler(func(ctx context.Context, pod *corev1.Pod, _ *policyv1.Eviction) error {
		key := pod.Namespace + "/" + pod.Name
		if h.refuse[key] {
			return apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		h.evicts = append(h.evicts, key)
		return h.c.Delete(ctx, pod)
	})
	o := Options{
		Clock:           eng.Clock(),
		Provider:        h.prov,
		NodeClassImages: func(nc string) string { return h.images[nc] },
		Trace: func(kind, object string, details map[string]any) {
			h.traces = append(h.traces, traceRec{at: eng.Now().Sub(t0), kind: kind, object: object, details: details})
		},
		// Every harness test checks the snapshot kept from watch events
		// against a full listing at every decision.
		VerifySnapshot: true,
	}
	for _, f := range opts {
		f(&o)
	}
	h.k = New(h.c, o)
	t.Cleanup(func() {
		if *dumpTraces {
			t.Log("\n" + h.dump())
		}
		if n, diff := h.k.SnapshotMismatches(); n > 0 {
			t.Errorf("%d snapshots kept from watch events differed from a full listing; the last:\n%s", n, diff)
		}
	})
	api.Subscribe(h.k.Observe)
	for _, ctl := range h.k.Controllers() {
		q := engine.NewQueue(eng, ctl.Name, ctl.Reconciler, engine.QueueOptions{})
		h.queues[ctl.Name] = q
		api.Subscribe(func(ev apiserver.Event) {
			for _, r := range ctl.Map(ev) {
				q.Add(r)
			}
		})
		if ctl.Start != nil {
			reqs, err := ctl.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				q.Add(r)
			}
		}
	}
	return h
}

// settle runs every event due now.
func (h *harness) settle() { h.eng.RunUntil(h.eng.Now()) }

// run advances virtual time by d.
func (h *harness) run(d time.Duration) { h.eng.RunUntil(h.eng.Now().Add(d)) }

// runUntil advances time in steps of one second until cond holds, failing
// after limit.
func (h *harness) runUntil(limit time.Duration, what string, cond func() bool) {
	h.t.Helper()
	end := h.eng.Now().Add(limit)
	for !cond() {
		if !h.eng.Now().Before(end) {
			h.t.Fatalf("%s: not within %v (at %v)\ntrace:\n%s", what, limit, h.eng.Now().Sub(t0), h.dump())
		}
		h.run(time.Second)
	}
}

func (h *harness) elapsed() time.Duration { return h.eng.Now().Sub(t0) }

func (h *harness) dump() string {
	var b strings.Builder
	for _, r := range h.traces {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// find returns the trace records of kind about object ("" for any).
func (h *harness) find(kind, object string) []traceRec {
	var out []traceRec
	for _, r := range h.traces {
		if r.kind == kind && (object == "" || r.object == object) {
			out = append(out, r)
		}
	}
	return out
}

// poolOpts are the NodePool fields tests set; empty means the default.
type poolOpts struct {
	policy           string
	consolidateAfter string
	budgets          []budgetSpec
	expireAfter      string
	tgp              string
	startupTaints    []corev1.Taint
	annotations      map[string]string
}

func (h *harness) createPool(name string, o poolOpts) {
	h.t.Helper()
	var spec poolSpec
	spec.Disruption.ConsolidationPolicy = o.policy
	if o.consolidateAfter != "" {
		spec.Disruption.ConsolidateAfter = &o.consolidateAfter
	}
	spec.Disruption.Budgets = o.budgets
	spec.Template.Metadata.Annotations = o.annotations
	spec.Template.Spec.NodeClassRef = nodeClassRef{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	spec.Template.Spec.ExpireAfter = o.expireAfter
	spec.Template.Spec.TerminationGracePeriod = o.tgp
	spec.Template.Spec.StartupTaints = o.startupTaints
	content, err := encode(spec)
	if err != nil {
		h.t.Fatal(err)
	}
	u := newPoolObject()
	u.SetName(name)
	u.Object["spec"] = content
	if err := h.c.Create(ctx, u); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

// updatePool changes a NodePool's spec.disruption.budgets.
func (h *harness) setBudgets(pool string, budgets []budgetSpec) {
	h.t.Helper()
	u := newPoolObject()
	if err := h.c.Get(ctx, client.ObjectKey{Name: pool}, u); err != nil {
		h.t.Fatal(err)
	}
	v, err := encode(budgets)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, v, "spec", "disruption", "budgets"); err != nil {
		h.t.Fatal(err)
	}
	if err := h.c.Update(ctx, u); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

// addNode creates a NodeClaim of pool as the provisioner would and lets it
// launch, register and (if the provider makes Ready nodes without startup
// taints) initialize. It returns the node's name.
func (h *harness) addNode(pool string) string {
	h.t.Helper()
	np, err := h.k.getPool(ctx, pool)
	if err != nil || np == nil {
		h.t.Fatalf("NodePool %s: %v", pool, err)
	}
	u, err := h.k.createClaim(ctx, &plannedClaim{pool: np, dest: &dest{labels: poolLabels(np, &corev1.Pod{})}}, "test")
	if err != nil {
		h.t.Fatal(err)
	}
	h.settle()
	return u.GetName()
}

func (h *harness) addNodes(pool string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = h.addNode(pool)
	}
	return out
}

func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	n, err := h.k.getNode(ctx, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) claim(name string) *nodeClaim {
	h.t.Helper()
	nc, err := h.k.getClaim(ctx, name)
	if err != nil {
		h.t.Fatal(err)
	}
	return nc
}

// gone reports whether the node and its NodeClaim (same name) are gone.
func (h *harness) gone(name string) bool { return h.node(name) == nil && h.claim(name) == nil }

// deleting reports whether the NodeClaim is gone or being deleted.
func (h *harness) deleting(name string) bool {
	nc := h.claim(name)
	return nc == nil || nc.deleting()
}

func (h *harness) annotateNode(name, key, value string) {
	h.t.Helper()
	n := h.node(name)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[key] = value
	if err := h.c.Update(ctx, n); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

func (h *harness) annotateClaim(name, key, value string) {
	h.t.Helper()
	nc := h.claim(name)
	a := nc.obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	nc.obj.SetAnnotations(a)
	if err := h.c.Update(ctx, nc.obj); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

// setReady writes the node's Ready condition, as its kubelet would.
func (h *harness) setReady(name string, ready bool) {
	h.t.Helper()
	n := h.node(name)
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: st, Reason: "Kubelet",
		LastTransitionTime: metav1.NewTime(h.eng.Now().Truncate(time.Second)),
	}}
	if err := h.c.Status().Update(ctx, n); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

func (h *harness) cordon(name string) {
	h.t.Helper()
	n := h.node(name)
	n.Spec.Unschedulable = true
	if err := h.c.Update(ctx, n); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

// podOpt changes a pod before it is created.
type podOpt func(*corev1.Pod)

func daemonSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid"}}
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}

func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{AnnotationDoNotDisrupt: "true"}
}

func succeeded(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }

func criticalPod(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }

// withFinalizer keeps a deleted pod terminating until the finalizer goes.
func withFinalizer(p *corev1.Pod) { p.Finalizers = []string{"test/hold"} }

func requests(cpu, mem string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		}
	}
}

// addPod creates a Running pod bound to node ("" for pending), owned by a
// ReplicaSet unless an option says otherwise, requesting 1 CPU and 1Gi.
func (h *harness) addPod(name, node string, opts ...podOpt) *corev1.Pod {
	h.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, Labels: map[string]string{"app": "web"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid"}},
		},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Image: "app"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if node == "" {
		p.Status.Phase = corev1.PodPending
	}
	requests("1", "1Gi")(p)
	for _, o := range opts {
		o(p)
	}
	if err := h.c.Create(ctx, p); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
	return p
}

func (h *harness) deletePod(name string) {
	h.t.Helper()
	if err := h.c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}); err != nil {
		h.t.Fatal(err)
	}
	h.settle()
}

func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	var p corev1.Pod
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		h.t.Fatal(err)
	}
	return &p
}

// changeImage changes the NodeClass boot image and enqueues its NodeClaims,
// as the twin does when it changes a NodeClass.
func (h *harness) changeImage(nodeClass, image string) {
	h.images[nodeClass] = image
	for _, r := range h.k.Lifecycle.MapNodeClass(ctx, nodeClass) {
		h.queues["karpenter.nodeclaim.lifecycle"].Add(r)
	}
	h.settle()
}

// fakeProvider creates and deletes Node objects through the client, as
// the KWOK provider does.
type fakeProvider struct {
	c          client.Client
	ready      bool // nodes are Ready when created
	defer_     bool // Launch does not create the Node; registerDeferred does
	noOwner    bool // the Node is created without an owner reference
	launchErr  error
	launched   []string
	terminated []string
	images     map[string]string // node → boot image
	pending    map[string]*unstructured.Unstructured
}

func (p *fakeProvider) Launch(ctx context.Context, claim *unstructured.Unstructured, bootImage string) (string, error) {
	if p.launchErr != nil {
		return "", p.launchErr
	}
	name := claim.GetName()
	p.launched = append(p.launched, name)
	if p.images == nil {
		p.images = map[string]string{}
	}
	p.images[name] = bootImage
	if p.defer_ {
		if p.pending == nil {
			p.pending = map[string]*unstructured.Unstructured{}
		}
		p.pending[name] = claim.DeepCopy()
		return name, nil
	}
	return name, p.createNode(ctx, claim, bootImage)
}

// createNode registers the Node of a claim whose launch was deferred.
func (p *fakeProvider) registerDeferred(ctx context.Context, name string) error {
	claim := p.pending[name]
	delete(p.pending, name)
	return p.createNode(ctx, claim, p.images[name])
}

func (p *fakeProvider) createNode(ctx context.Context, claim *unstructured.Unstructured, bootImage string) error {
	var spec claimSpec
	var status claimStatus
	if err := decode(claim.Object["spec"], &spec); err != nil {
		return err
	}
	if err := decode(claim.Object["status"], &status); err != nil {
		return err
	}
	readyStatus := corev1.ConditionFalse
	if p.ready {
		readyStatus = corev1.ConditionTrue
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   claim.GetName(),
			Labels: claim.GetLabels(),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: claim.GetName(), UID: claim.GetUID(),
			}},
		},
		Spec: corev1.NodeSpec{ProviderID: providerPrefix + claim.GetName(), Taints: append(slices.Clone(spec.Taints), spec.StartupTaints...)},
		Status: corev1.NodeStatus{
			Capacity: status.Capacity, Allocatable: status.Allocatable,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: readyStatus, Reason: "KubeletReady"}},
			NodeInfo:   corev1.NodeSystemInfo{OSImage: bootImage},
		},
	}
	if p.noOwner {
		n.OwnerReferences = nil
	}
	return p.c.Create(ctx, n)
}

func (p *fakeProvider) Terminate(ctx context.Context, node string) error {
	p.terminated = append(p.terminated, node)
	// The pod garbage collector removes the pods of a gone node.
	var pods corev1.PodList
	if err := p.c.List(ctx, &pods); err != nil {
		return err
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == node {
			pd := &pods.Items[i]
			pd.Finalizers = nil
			_ = p.c.Update(ctx, pd)
			_ = p.c.Delete(ctx, pd)
		}
	}
	return nil
}

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }
