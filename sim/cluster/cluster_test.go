package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

var (
	t0  = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	ctx = context.Background()
)

const (
	digestV1  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digestV2  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	digestBad = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
	refV1     = "registry.example/os@" + digestV1
	refV2     = "registry.example/os@" + digestV2
	refBad    = "registry.example/os@" + digestBad
)

// baseYAML is a small cluster: four workers (workers-0 cordoned), a web
// workload that its PDB allows no disruption of, an api workload that may
// lose one pod, an unprotected batch workload and an agent DaemonSet.
const baseYAML = `
name: cluster-test
limit: 2h
images:
  - {name: v1, ref: "` + refV1 + `", size: 1Gi}
  - {name: v2, ref: "` + refV2 + `", size: 2Gi}
  - {name: bad, ref: "` + refBad + `", size: 100Mi, failsToBoot: true, bootFailure: %s}
host:
  pullBandwidth: 100Mi
  stageOverhead: 20s
  reboot: %s
  daemonStartup: 5s
nodeGroups:
  - name: workers
    count: %d
    labels: {pool: workers}
    capacity: {cpu: "4", memory: 8Gi}
    bootImage: v1
    cordoned: 1
workloads:
  - name: web
    replicas: 3
    requests: {cpu: "1", memory: 1Gi}
    nodeSelector: {pool: workers}
    pdb: {maxUnavailable: 0}
  - name: api
    replicas: 2
    requests: {cpu: 500m}
    pdb: {minAvailable: 1}
  - name: batch
    replicas: 3
    requests: {cpu: 500m}
daemonSets:
  - name: agent
    requests: {cpu: 100m}
`

type harness struct {
	t     testing.TB
	eng   *engine.Engine
	api   *apiserver.Server
	cl    *cluster.Cluster
	trace []string
	// restarted, down and changed count hook calls per node.
	restarted, down, changed map[string]int
	// onRestart, onDown and onChanged, when set, are called by the hooks
	// too.
	onRestart, onDown, onChanged func(node string)
}

type options struct {
	bootFailure string
	reboot      string
	workers     int
	seed        uint64
}

func newScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, policyv1.AddToScheme, appsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func newHarness(t testing.TB, o options) *harness {
	t.Helper()
	if o.bootFailure == "" {
		o.bootFailure = "FallBack"
	}
	if o.reboot == "" {
		o.reboot = "90s"
	}
	if o.workers == 0 {
		o.workers = 4
	}
	return newHarnessYAML(t, fmt.Sprintf(baseYAML, o.bootFailure, o.reboot, o.workers), o.seed)
}

// newHarnessYAML starts the cluster of a scenario on a fresh engine and
// API server, wired as the runner wires them.
func newHarnessYAML(t testing.TB, yaml string, seed uint64) *harness {
	t.Helper()
	if seed == 0 {
		seed = 1
	}
	sc, err := scenario.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	h := &harness{t: t, eng: engine.New(t0, seed), restarted: map[string]int{}, down: map[string]int{}, changed: map[string]int{}}
	h.api = apiserver.New(newScheme(t), h.eng.Clock())
	for _, ix := range index.All() {
		if err := h.api.IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			t.Fatal(err)
		}
	}
	h.cl, err = cluster.New(h.eng, h.api, sc, cluster.Hooks{
		Trace: func(kind, object string, details map[string]any) {
			h.trace = append(h.trace, fmt.Sprintf("%s %s %s %s", h.eng.Now().Sub(t0), kind, object, formatDetails(details)))
		},
		DaemonRestarted: func(n string) { h.restarted[n]++; call(h.onRestart, n) },
		DaemonDown:      func(n string) { h.down[n]++; call(h.onDown, n) },
		HostChanged:     func(n string) { h.changed[n]++; call(h.onChanged, n) },
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := h.cl.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return h
}

func call(fn func(string), node string) {
	if fn != nil {
		fn(node)
	}
}

func formatDetails(d map[string]any) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%v ", k, d[k])
	}
	return strings.TrimSpace(b.String())
}

// runFor runs the engine for d of virtual time.
func (h *harness) runFor(d time.Duration) { h.eng.RunUntil(h.eng.Now().Add(d)) }

func (h *harness) node(name string) *corev1.Node {
	h.t.Helper()
	var n corev1.Node
	if err := h.api.Client().Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
		h.t.Fatalf("get node %s: %v", name, err)
	}
	return &n
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return p.Status.Phase == corev1.PodRunning && c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (h *harness) pods() []corev1.Pod {
	h.t.Helper()
	var l corev1.PodList
	if err := h.api.Client().List(ctx, &l); err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

func (h *harness) podsOf(app string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range h.pods() {
		if p.Labels[cluster.LabelApp] == app {
			out = append(out, p)
		}
	}
	return out
}

func (h *harness) evict(p *corev1.Pod) error {
	return h.api.Client().SubResource("eviction").Create(ctx, p, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}})
}

func (h *harness) cordon(name string, on bool) {
	h.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)
	if err := h.api.Client().Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) pdb(name string) facts.PDBState {
	for _, s := range h.cl.PDBStatus() {
		if s.Name == name {
			return s
		}
	}
	h.t.Fatalf("no PDB %s", name)
	return facts.PDBState{}
}

// stageErr stages image on node, lets what ends at once end, and returns
// how the stage ended: its LastStage error, "" for none.
func (h *harness) stageErr(node, image string) string {
	h.t.Helper()
	if err := h.cl.Host(node).Stage(ctx, image); err != nil {
		h.t.Fatalf("Stage %s on %s: %v", image, node, err)
	}
	h.eng.RunUntil(h.eng.Now())
	obs := h.observe(node)
	if obs.LastStage == nil {
		return ""
	}
	return obs.LastStage.Err
}

func (h *harness) observe(node string) nodedaemon.Observation {
	h.t.Helper()
	obs, err := h.cl.Host(node).Observe(ctx)
	if err != nil {
		h.t.Fatalf("Observe %s: %v", node, err)
	}
	return obs
}

func TestStartBuildsSettledCluster(t *testing.T) {
	h := newHarness(t, options{})
	if got, want := h.cl.Nodes(), []string{"workers-0", "workers-1", "workers-2", "workers-3"}; !slices.Equal(got, want) {
		t.Fatalf("Nodes = %v, want %v", got, want)
	}
	used := map[string]int64{}
	for _, name := range h.cl.Nodes() {
		n := h.node(name)
		if !ready(n) {
			t.Errorf("%s is not Ready", name)
		}
		if got, want := n.Spec.Unschedulable, name == "workers-0"; got != want {
			t.Errorf("%s unschedulable = %v, want %v", name, got, want)
		}
		if n.Status.NodeInfo.BootID != name+"-boot-1" {
			t.Errorf("%s bootID = %q", name, n.Status.NodeInfo.BootID)
		}
		if got := h.cl.Booted(name); got != refV1 {
			t.Errorf("Booted(%s) = %q, want %q", name, got, refV1)
		}
		if h.restarted[name] != 1 {
			t.Errorf("DaemonRestarted(%s) called %d times, want 1", name, h.restarted[name])
		}
	}
	agents := map[string]bool{}
	for _, p := range h.pods() {
		if !podReady(&p) {
			t.Errorf("pod %s is not Running and Ready", p.Name)
		}
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s is not bound", p.Name)
		}
		used[p.Spec.NodeName] += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		if p.Labels[cluster.LabelApp] == "agent" {
			agents[p.Spec.NodeName] = true
			continue
		}
		if p.Spec.NodeName == "workers-0" {
			t.Errorf("workload pod %s is on the cordoned node", p.Name)
		}
		if p.OwnerReferences[0].Kind != "ReplicaSet" || !*p.OwnerReferences[0].Controller {
			t.Errorf("pod %s owner = %+v", p.Name, p.OwnerReferences)
		}
	}
	if len(agents) != 4 {
		t.Errorf("agent pods on %d nodes, want 4", len(agents))
	}
	for name, cpu := range used {
		if cpu > 4000 {
			t.Errorf("%s has %dm CPU requested, more than its 4000m", name, cpu)
		}
	}
	if got := len(h.podsOf("web")) + len(h.podsOf("api")) + len(h.podsOf("batch")); got != 8 {
		t.Errorf("workload pods = %d, want 8", got)
	}
	if cpu, nodes := h.cl.SchedulableCapacity(); cpu != 12000 || nodes != 3 {
		t.Errorf("SchedulableCapacity = %d, %d; want 12000, 3", cpu, nodes)
	}
	if got := h.cl.PendingPods(); got != 0 {
		t.Errorf("PendingPods = %d, want 0", got)
	}
	want := facts.PDBState{Namespace: "default", Name: "web", Healthy: 3, DesiredHealthy: 3, ExpectedPods: 3}
	if got := h.pdb("web"); got != want {
		t.Errorf("web PDB = %+v, want %+v", got, want)
	}
	var obj policyv1.PodDisruptionBudget
	if err := h.api.Client().Get(ctx, client.ObjectKey{Namespace: "default", Name: "api"}, &obj); err != nil {
		t.Fatal(err)
	}
	if st := obj.Status; st.CurrentHealthy != 2 || st.DesiredHealthy != 1 || st.DisruptionsAllowed != 1 || st.ExpectedPods != 2 {
		t.Errorf("api PDB object status = %+v", st)
	}
}

func TestEvictionHonoursPDB(t *testing.T) {
	h := newHarness(t, options{})
	web := h.podsOf("web")[0]
	if err := h.evict(&web); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s under maxUnavailable 0 = %v, want 429 TooManyRequests", web.Name, err)
	}
	var still corev1.Pod
	if err := h.api.Client().Get(ctx, client.ObjectKeyFromObject(&web), &still); err != nil || still.DeletionTimestamp != nil {
		t.Fatalf("refused pod after eviction: %v, deletionTimestamp %v", err, still.DeletionTimestamp)
	}

	// api may lose one of its two pods: the first eviction goes, the
	// second is refused until the replacement is Ready.
	api := h.podsOf("api")
	if err := h.evict(&api[0]); err != nil {
		t.Fatalf("first api eviction: %v", err)
	}
	if got := h.pdb("api"); got.Healthy != 1 || got.DisruptionsAllowed != 0 || got.Violated {
		t.Errorf("api PDB after one eviction = %+v", got)
	}
	if err := h.evict(&api[1]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second api eviction = %v, want 429", err)
	}
	h.runFor(time.Minute)
	if got := h.pdb("api"); got.Healthy != 2 || got.DisruptionsAllowed != 1 {
		t.Errorf("api PDB after the replacement started = %+v", got)
	}
	if err := h.evict(&api[1]); err != nil {
		t.Fatalf("api eviction after the replacement started: %v", err)
	}
	// A pod already terminating is evicted again without error.
	if err := h.evict(&api[1]); err != nil {
		t.Fatalf("evicting a terminating pod: %v", err)
	}
}

// TestPDBBlockedDrain: a node's drain is blocked from a refused eviction
// of one of its pods until an eviction of one of its pods is admitted or
// the node is uncordoned; an open interval counts until now.
func TestPDBBlockedDrain(t *testing.T) {
	h := newHarness(t, options{})
	api := h.podsOf("api")
	if err := h.evict(&api[0]); err != nil {
		t.Fatalf("first api eviction: %v", err)
	}
	if err := h.evict(&api[1]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second api eviction = %v, want 429", err)
	}
	h.runFor(2 * time.Second)
	// A second refusal of the same node's pod does not restart the clock.
	if err := h.evict(&api[1]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("third api eviction 2s later = %v, want 429", err)
	}
	h.runFor(3 * time.Second)
	if got := h.cl.PDBBlockedDrain(); got != 5*time.Second {
		t.Errorf("blocked 5s after the first refusal = %v, want 5s (open)", got)
	}
	h.runFor(time.Minute)
	if err := h.evict(&api[1]); err != nil {
		t.Fatalf("api eviction after the replacement started: %v", err)
	}
	h.runFor(time.Minute)
	if got := h.cl.PDBBlockedDrain(); got != 65*time.Second {
		t.Errorf("blocked after the admitted eviction = %v, want 1m5s (closed)", got)
	}

	// web's budget admits no eviction: the drain of its node is given up
	// (uncordoned) after 20s.
	web := h.podsOf("web")[0]
	h.cordon(web.Spec.NodeName, true)
	h.runFor(time.Second)
	if err := h.evict(&web); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s = %v, want 429", web.Name, err)
	}
	h.runFor(20 * time.Second)
	h.cordon(web.Spec.NodeName, false)
	h.runFor(time.Minute)
	if got := h.cl.PDBBlockedDrain(); got != 85*time.Second {
		t.Errorf("blocked after the uncordon = %v, want 1m25s", got)
	}
}

func TestEvictionReschedulesElsewhere(t *testing.T) {
	h := newHarness(t, options{})
	var before []string
	for _, b := range h.podsOf("batch") {
		before = append(before, b.Name)
	}
	victim := h.podsOf("batch")[0]
	from := victim.Spec.NodeName
	h.cordon(from, true) // as the controller does before it drains
	if cpu, nodes := h.cl.SchedulableCapacity(); cpu != 8000 || nodes != 2 {
		t.Errorf("SchedulableCapacity after cordon = %d, %d; want 8000, 2", cpu, nodes)
	}
	if err := h.evict(&victim); err != nil {
		t.Fatalf("evict %s: %v", victim.Name, err)
	}
	var p corev1.Pod
	if err := h.api.Client().Get(ctx, client.ObjectKeyFromObject(&victim), &p); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("evicted pod right after the eviction: %v, deletionTimestamp %v; want terminating", err, p.DeletionTimestamp)
	}
	if got := h.cl.PendingPods(); got != 1 {
		t.Errorf("PendingPods right after the eviction = %d, want 1 (the replacement)", got)
	}
	h.runFor(time.Minute)
	if err := h.api.Client().Get(ctx, client.ObjectKeyFromObject(&victim), &p); !apierrors.IsNotFound(err) {
		t.Fatalf("evicted pod a minute later: %v, want NotFound", err)
	}
	batch := h.podsOf("batch")
	if len(batch) != 3 {
		t.Fatalf("batch pods = %d, want 3", len(batch))
	}
	// The replacement (the one pod not there before) runs on an
	// uncordoned node other than the victim's; the scheduler may have put
	// another batch pod beside the victim (ties are random), so only the
	// replacement is placed by this test.
	replacements := 0
	for _, b := range batch {
		if !podReady(&b) || b.Spec.NodeName == "workers-0" {
			t.Errorf("batch pod %s on %q, ready %v; want Ready on an uncordoned node", b.Name, b.Spec.NodeName, podReady(&b))
		}
		if slices.Contains(before, b.Name) {
			continue
		}
		replacements++
		if b.Spec.NodeName == from {
			t.Errorf("replacement batch pod %s on %q, the node its predecessor was evicted from", b.Name, b.Spec.NodeName)
		}
	}
	if replacements != 1 {
		t.Errorf("batch pods not there before the eviction = %d, want 1 (the replacement)", replacements)
	}
	if !slices.ContainsFunc(h.trace, func(l string) bool { return strings.Contains(l, "pod/evicted pod/default/"+victim.Name) }) {
		t.Errorf("trace has no eviction of %s:\n%s", victim.Name, strings.Join(h.trace, "\n"))
	}
}

func TestPendingPodsWaitForCapacity(t *testing.T) {
	h := newHarness(t, options{})
	// 3 nodes x 3.9 free CPU after the agents; web takes 1 CPU a pod.
	if err := h.cl.ScaleWorkload(ctx, "web", 12); err != nil {
		t.Fatal(err)
	}
	h.runFor(time.Minute)
	pending := h.cl.PendingPods()
	if pending == 0 {
		t.Fatal("no pod pending after scaling beyond capacity")
	}
	if got := h.pdb("web"); got.ExpectedPods != 12 || !got.Violated {
		t.Errorf("web PDB after scale-up = %+v, want 12 expected and violated", got)
	}
	h.cordon("workers-0", false)
	h.runFor(time.Minute)
	if got := h.cl.PendingPods(); got >= pending {
		t.Errorf("PendingPods after uncordon = %d, want fewer than %d", got, pending)
	}
	onZero := 0
	for _, p := range h.podsOf("web") {
		if p.Spec.NodeName == "workers-0" {
			onZero++
		}
	}
	if onZero == 0 {
		t.Error("no web pod went to the uncordoned workers-0")
	}
	if err := h.cl.ScaleWorkload(ctx, "web", 2); err != nil {
		t.Fatal(err)
	}
	h.runFor(time.Minute)
	if got := len(h.podsOf("web")); got != 2 {
		t.Errorf("web pods after scale-down = %d, want 2", got)
	}
	if got := h.cl.PendingPods(); got != 0 {
		t.Errorf("PendingPods after scale-down = %d, want 0", got)
	}
}

func TestStageTakesSizeOverBandwidth(t *testing.T) {
	h := newHarness(t, options{})
	host := func() nodedaemon.Host { return h.cl.Host("workers-1") }
	if err := host().Stage(ctx, refV2); err != nil {
		t.Fatalf("Stage: %v", err)
	}
	// 2Gi at 100Mi/s is 20.48s, plus the 20s overhead.
	done := t0.Add(40*time.Second + 480*time.Millisecond)
	h.eng.RunUntil(done.Add(-time.Millisecond))
	if obs := h.observe("workers-1"); !obs.Staging || obs.Staged != nil || obs.LastStage != nil {
		t.Fatalf("before the end: %+v, want staging, nothing staged", obs)
	}
	if h.changed["workers-1"] != 0 {
		t.Errorf("HostChanged before the stage ended")
	}
	h.eng.RunUntil(done)
	obs := h.observe("workers-1")
	if obs.Staging || obs.Staged == nil || obs.Staged.Digest != digestV2 || obs.Staged.Image != refV2 {
		t.Fatalf("at the end: %+v, want %s staged", obs, refV2)
	}
	if obs.LastStage == nil || obs.LastStage.Image != refV2 || obs.LastStage.Err != "" {
		t.Errorf("LastStage = %+v, want success for %s", obs.LastStage, refV2)
	}
	if h.changed["workers-1"] != 1 {
		t.Errorf("HostChanged called %d times, want 1", h.changed["workers-1"])
	}

	unknown := "registry.example/os@sha256:" + strings.Repeat("9", 64)
	if got := h.stageErr("workers-2", unknown); !strings.Contains(got, "manifest unknown") {
		t.Fatalf("Stage of an unknown image ended with %q, want manifest unknown", got)
	}
	if obs := h.observe("workers-2"); obs.Staging || obs.Staged != nil {
		t.Errorf("after a failed stage: %+v, want nothing staged", obs)
	}
}

func TestApplyReboots(t *testing.T) {
	h := newHarness(t, options{})
	const n = "workers-1"
	host := func() nodedaemon.Host { return h.cl.Host(n) }
	if err := host().Stage(ctx, refV2); err != nil {
		t.Fatal(err)
	}
	h.runFor(time.Minute)
	if err := host().Apply(ctx, refV1); err == nil {
		t.Error("Apply of an image that is not staged succeeded")
	}
	start := h.eng.Now()
	for range 2 { // idempotent
		if err := host().Apply(ctx, refV2); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	}
	if !h.cl.Unavailable(n) || !ready(h.node(n)) {
		t.Errorf("right after Apply: Unavailable %v, Ready %v; want unavailable (reboot under way) and still Ready", h.cl.Unavailable(n), ready(h.node(n)))
	}
	h.eng.RunUntil(start.Add(cluster.ShutdownDelay))
	if ready(h.node(n)) || h.down[n] != 1 {
		t.Fatalf("after the shutdown delay: Ready %v, DaemonDown %d; want NotReady and the daemon down", ready(h.node(n)), h.down[n])
	}
	if _, err := host().Observe(ctx); !errors.Is(err, cluster.ErrNotRunning) {
		t.Errorf("Observe while down = %v, want ErrNotRunning", err)
	}
	for _, p := range h.pods() {
		if p.Spec.NodeName == n && podReady(&p) {
			t.Errorf("pod %s on the rebooting node is Ready", p.Name)
		}
	}
	h.eng.RunUntil(start.Add(90 * time.Second))
	node := h.node(n)
	if !ready(node) || node.Status.NodeInfo.BootID != n+"-boot-2" {
		t.Fatalf("90s after Apply: Ready %v, bootID %q; want Ready with a new boot ID", ready(node), node.Status.NodeInfo.BootID)
	}
	if h.restarted[n] != 1 {
		t.Errorf("the daemon restarted before host.daemonStartup")
	}
	h.eng.RunUntil(start.Add(95 * time.Second))
	if h.restarted[n] != 2 {
		t.Fatalf("DaemonRestarted(%s) = %d after the reboot, want 2", n, h.restarted[n])
	}
	obs := h.observe(n)
	if obs.Booted.Digest != digestV2 || obs.Rollback == nil || obs.Rollback.Digest != digestV1 || obs.Staged != nil || obs.BootID != n+"-boot-2" {
		t.Errorf("after the reboot: %+v", obs)
	}
	if h.cl.Booted(n) != refV2 || h.cl.Reboots(n) != 1 || h.cl.RebootsFor(n, "v2") != 1 || h.cl.RebootsFor(n, refV2) != 1 || h.cl.RebootsFor(n, "v1") != 0 {
		t.Errorf("Booted %q, Reboots %d, RebootsFor v2 %d", h.cl.Booted(n), h.cl.Reboots(n), h.cl.RebootsFor(n, "v2"))
	}
	h.runFor(10 * time.Second)
	if h.cl.Unavailable(n) {
		t.Error("node still unavailable after the reboot")
	}
	for _, p := range h.pods() {
		if p.Spec.NodeName == n && !podReady(&p) {
			t.Errorf("pod %s is not Ready again after the reboot", p.Name)
		}
	}

	// A rollback boots the previous image.
	if err := host().Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if obs := h.observe(n); !obs.RollbackQueued {
		t.Errorf("RollbackQueued = false after Rollback")
	}
	if err := host().Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	h.runFor(2 * time.Minute)
	if got := h.cl.Booted(n); got != refV1 || h.cl.RebootsFor(n, "v1") != 1 || h.cl.Reboots(n) != 2 {
		t.Errorf("after the rollback reboot: Booted %q, RebootsFor v1 %d, Reboots %d", got, h.cl.RebootsFor(n, "v1"), h.cl.Reboots(n))
	}
}

func TestBootFailure(t *testing.T) {
	for _, tc := range []struct {
		failure   string
		wantBoot  string
		wantReady bool
	}{
		{"FallBack", refV1, true},
		{"NeverReady", refBad, false},
	} {
		t.Run(tc.failure, func(t *testing.T) {
			h := newHarness(t, options{bootFailure: tc.failure})
			const n = "workers-2"
			host := func() nodedaemon.Host { return h.cl.Host(n) }
			if err := host().Stage(ctx, refBad); err != nil {
				t.Fatal(err)
			}
			h.runFor(time.Minute)
			if err := host().Apply(ctx, refBad); err != nil {
				t.Fatal(err)
			}
			h.runFor(5 * time.Minute)
			node := h.node(n)
			if got := h.cl.Booted(n); got != tc.wantBoot || ready(node) != tc.wantReady || h.cl.Unavailable(n) == tc.wantReady {
				t.Fatalf("after the reboot: Booted %q, Ready %v, Unavailable %v; want %q, %v", got, ready(node), h.cl.Unavailable(n), tc.wantBoot, tc.wantReady)
			}
			if h.cl.RebootsFor(n, "bad") != 1 {
				t.Errorf("RebootsFor bad = %d, want 1", h.cl.RebootsFor(n, "bad"))
			}
			if !tc.wantReady {
				if h.restarted[n] != 1 {
					t.Errorf("the daemon of a node that never got Ready restarted")
				}
				// A power cycle falls back to the previous deployment.
				if err := h.cl.CrashNode(ctx, n, time.Minute); err != nil {
					t.Fatal(err)
				}
				h.runFor(2 * time.Minute)
				if got := h.cl.Booted(n); got != refV1 || !ready(h.node(n)) {
					t.Fatalf("after a power cycle: Booted %q, Ready %v; want %q and Ready", got, ready(h.node(n)), refV1)
				}
			}
			obs := h.observe(n)
			if obs.Booted.Digest != digestV1 || obs.Staged != nil || obs.BootID == n+"-boot-1" {
				t.Errorf("observation: %+v, want v1 booted, nothing staged, a new boot ID", obs)
			}
		})
	}
}

func TestCrashDaemonMidStage(t *testing.T) {
	h := newHarness(t, options{})
	const n = "workers-3"
	if err := h.cl.Host(n).Stage(ctx, refV2); err != nil {
		t.Fatal(err)
	}
	h.runFor(10 * time.Second)
	if err := h.cl.CrashDaemon(n); err != nil {
		t.Fatal(err)
	}
	if h.down[n] != 1 {
		t.Errorf("DaemonDown = %d, want 1", h.down[n])
	}
	if err := h.cl.CrashDaemon(n); !errors.Is(err, cluster.ErrNotRunning) {
		t.Errorf("second CrashDaemon = %v, want ErrNotRunning", err)
	}
	if err := h.cl.Host(n).Stage(ctx, refV2); !errors.Is(err, cluster.ErrNotRunning) {
		t.Errorf("Stage while the daemon is down = %v, want ErrNotRunning", err)
	}
	h.runFor(5 * time.Second)
	if h.restarted[n] != 2 {
		t.Fatalf("DaemonRestarted = %d, want 2", h.restarted[n])
	}
	h.runFor(time.Minute) // past the end the stage would have had
	if obs := h.observe(n); obs.Staging || obs.Staged != nil || obs.LastStage != nil {
		t.Errorf("after the crash: %+v, want nothing staged and no stage known", obs)
	}
	if h.changed[n] != 0 {
		t.Errorf("HostChanged called for an aborted stage")
	}
	if h.cl.Unavailable(n) {
		t.Error("a daemon crash made the node unavailable")
	}
}

func TestCrashNode(t *testing.T) {
	h := newHarness(t, options{})
	var n string
	for _, p := range h.podsOf("web") {
		n = p.Spec.NodeName
		break
	}
	if err := h.cl.CrashNode(ctx, n, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Nobody tells the API at once: the Node stays Ready until the node
	// lifecycle controller's grace period has passed.
	if !ready(h.node(n)) || !h.cl.Unavailable(n) || h.down[n] != 1 {
		t.Fatalf("right after the crash: Ready %v, Unavailable %v, DaemonDown %d; want still Ready in the API, unavailable, daemon down", ready(h.node(n)), h.cl.Unavailable(n), h.down[n])
	}
	h.runFor(cluster.NodeMonitorGracePeriod)
	if ready(h.node(n)) {
		t.Fatalf("Ready %v after the grace period, want Unknown", ready(h.node(n)))
	}
	if got := h.pdb("web"); !got.Violated {
		t.Errorf("web PDB with a pod on a crashed node = %+v, want violated", got)
	}
	h.runFor(3*time.Minute - cluster.NodeMonitorGracePeriod)
	if !ready(h.node(n)) || h.node(n).Status.NodeInfo.BootID != n+"-boot-2" || h.cl.Booted(n) != refV1 {
		t.Fatalf("after downFor: Ready %v, bootID %q", ready(h.node(n)), h.node(n).Status.NodeInfo.BootID)
	}
	h.runFor(10 * time.Second)
	if got := h.pdb("web"); got.Violated || got.Healthy != 3 {
		t.Errorf("web PDB after the node came back = %+v", got)
	}
	if h.restarted[n] != 2 || h.cl.Reboots(n) != 0 {
		t.Errorf("DaemonRestarted %d, Reboots %d; want 2, 0", h.restarted[n], h.cl.Reboots(n))
	}
}

func TestAddAndRemoveNodes(t *testing.T) {
	h := newHarness(t, options{})
	added, err := h.cl.AddNodes(ctx, "workers", 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"workers-4", "workers-5"}; !slices.Equal(added, want) {
		t.Fatalf("AddNodes = %v, want %v", added, want)
	}
	for _, n := range added {
		if !ready(h.node(n)) || h.restarted[n] != 1 {
			t.Errorf("%s: Ready %v, DaemonRestarted %d", n, ready(h.node(n)), h.restarted[n])
		}
	}
	if _, nodes := h.cl.SchedulableCapacity(); nodes != 5 {
		t.Errorf("schedulable nodes = %d, want 5", nodes)
	}
	removed, err := h.cl.RemoveNodes(ctx, "workers", 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"workers-5", "workers-4", "workers-3"}; !slices.Equal(removed, want) {
		t.Fatalf("RemoveNodes = %v, want %v", removed, want)
	}
	if got, want := h.cl.Nodes(), []string{"workers-0", "workers-1", "workers-2"}; !slices.Equal(got, want) {
		t.Fatalf("Nodes = %v, want %v", got, want)
	}
	if h.down["workers-3"] != 1 {
		t.Errorf("DaemonDown(workers-3) = %d, want 1", h.down["workers-3"])
	}
	h.runFor(time.Minute)
	for _, p := range h.pods() {
		if slices.Contains(removed, p.Spec.NodeName) {
			t.Errorf("pod %s is still on removed node %s", p.Name, p.Spec.NodeName)
		}
	}
	if got := len(h.podsOf("web")) + len(h.podsOf("api")) + len(h.podsOf("batch")); got != 8 {
		t.Errorf("workload pods after the removal = %d, want 8", got)
	}
	if got := h.cl.PendingPods(); got != 0 {
		t.Errorf("PendingPods = %d, want 0", got)
	}
	if _, nodes := h.cl.SchedulableCapacity(); nodes != 2 {
		t.Errorf("schedulable nodes = %d, want 2", nodes)
	}
}

// chaos drives a cluster through random reboots, crashes and evictions,
// all drawn from the engine's source, and returns its trace.
func chaos(t *testing.T, seed uint64) []string {
	h := newHarness(t, options{seed: seed, reboot: "{dist: uniform, min: 60s, max: 180s}"})
	r := h.eng.Rand()
	nodes := h.cl.Nodes()
	for i := range 30 {
		at := time.Duration(r.IntN(3600)) * time.Second
		n := nodes[r.IntN(len(nodes))]
		kind := r.IntN(4)
		h.eng.After(at, fmt.Sprintf("chaos/%d", i), func() {
			host := func() nodedaemon.Host { return h.cl.Host(n) }
			switch kind {
			case 0:
				_ = host().Stage(ctx, refV2)
			case 1:
				if err := host().Apply(ctx, refV2); err != nil {
					_ = host().Reboot(ctx)
				}
			case 2:
				_ = h.cl.CrashNode(ctx, n, time.Duration(1+r.IntN(300))*time.Second)
			case 3:
				for _, p := range h.pods() {
					if p.Spec.NodeName == n {
						_ = h.evict(&p)
					}
				}
			}
		})
	}
	h.eng.RunUntil(t0.Add(2 * time.Hour))
	return h.trace
}

func TestSameSeedSameTrace(t *testing.T) {
	a, b := chaos(t, 7), chaos(t, 7)
	if !slices.Equal(a, b) {
		t.Fatalf("two runs with seed 7 differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if len(a) < 30 {
		t.Errorf("trace has only %d lines:\n%s", len(a), strings.Join(a, "\n"))
	}
	if c := chaos(t, 8); slices.Equal(a, c) {
		t.Error("seeds 7 and 8 gave the same trace")
	}
}

// TestSchedulerBreaksTiesAtRandom: among nodes alike, the scheduler picks
// any with equal chance, as kube-scheduler's selectHost does, and the
// same seed picks the same. A tiebreak by name put a pod evicted from one
// node on the next node in name order, the next one bootroll drains.
func TestSchedulerBreaksTiesAtRandom(t *testing.T) {
	placement := func(seed uint64) string {
		h := newHarness(t, options{seed: seed, workers: 6})
		var on []string
		for _, w := range []string{"web", "api", "batch"} {
			for _, p := range h.podsOf(w) {
				on = append(on, p.Name+"@"+p.Spec.NodeName)
			}
		}
		return strings.Join(on, " ")
	}
	firstWeb := map[string]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		got := placement(seed)
		if again := placement(seed); again != got {
			t.Fatalf("seed %d placed the pods two ways:\n%s\n%s", seed, got, again)
		}
		h := newHarness(t, options{seed: seed, workers: 6})
		firstWeb[h.podsOf("web")[0].Spec.NodeName]++
	}
	// web-0 is the first pod placed, on 5 uncordoned nodes alike: by name
	// it always went to workers-1. Over 40 seeds each node should get it
	// about 8 times; fewer than 3 distinct nodes would mean a fixed order.
	if len(firstWeb) < 3 {
		t.Errorf("the first web pod went to %v over 40 seeds; want it spread over the 5 nodes alike", firstWeb)
	}
	for n, k := range firstWeb {
		if k > 20 {
			t.Errorf("the first web pod went to %s in %d of 40 seeds (%v); want about 8", n, k, firstWeb)
		}
	}
}
