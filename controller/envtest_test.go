package controller_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/nodedaemon"
)

var (
	cfg    *rest.Config
	k8s    client.Client
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if testing.Short() {
			os.Exit(m.Run()) // unit tests only; envtest tests skip themselves
		}
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test`, which builds kube-apiserver and etcd into bin/k8s")
		os.Exit(1)
	}
	logf.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	cfg, err = env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start envtest:", err)
		os.Exit(1)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func zapLevel() zapLevelT { return zapLevelT(0) }

// digestRef returns a digest reference for a short image name.
func digestRef(name string) string {
	h := fmt.Sprintf("%x", name)
	for len(h) < 64 {
		h += "0"
	}
	return "registry.example/os@sha256:" + h[:64]
}

// harness is one test's controller manager plus a fake fleet: a fake
// kubelet that finishes pod deletions and flips Ready across reboots, and
// the real node daemon (nodedaemon.Daemon) on a fake bootc host per node.
type harness struct {
	t      *testing.T
	prefix string
	label  map[string]string

	mu      sync.Mutex
	hosts   map[string]*fakeHost
	daemons map[string]*nodedaemon.Daemon
	failing map[string]bool // digests that fail to boot
	sick    map[string]bool // digests that boot but leave the Node NotReady
	noSpace map[string]bool // pinned images that fit on no node
	reboots map[string]int  // node -> reboots done
	maxCord int             // most nodes cordoned by bootroll at once
	// unprotected lists the reboots that started while their Node was not
	// cordoned with bootroll's slot marker ("node: why").
	unprotected []string
	// rebootTicks is how many world ticks (50 ms) a reboot takes; 0 means 4.
	rebootTicks int
	stopMgr     context.CancelFunc
	mgrDone     chan struct{}
	ctx         context.Context
	clk         clock.PassiveClock
	opts        options.Options
	stopWorld   context.CancelFunc
	events      *eventLog
}

// eventLog records the Events the controller emits, per object.
type eventLog struct {
	mu      sync.Mutex
	reasons map[string][]string
}

func (e *eventLog) Eventf(obj runtime.Object, _, reason, _ string, _ ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reasons == nil {
		e.reasons = map[string][]string{}
	}
	name := obj.(client.Object).GetName()
	e.reasons[name] = append(e.reasons[name], reason)
}

func (e *eventLog) of(name string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reasons[name]...)
}

func newHarness(t *testing.T, prefix string, nodes int, clk clock.PassiveClock) *harness {
	t.Helper()
	return newHarnessWith(t, prefix, nodes, func(h *harness) {
		if clk != nil {
			h.clk = clk
		}
	})
}

// newHarnessWith is newHarness with the harness's settings changed by
// configure before the nodes are made (the clock is RealClock unless it
// sets one).
func newHarnessWith(t *testing.T, prefix string, nodes int, configure func(*harness)) *harness {
	t.Helper()
	if cfg == nil {
		t.Skip("needs a real API server (KUBEBUILDER_ASSETS); run make test")
	}
	h := &harness{t: t, prefix: prefix, label: map[string]string{"bootroll-test": prefix},
		hosts: map[string]*fakeHost{}, daemons: map[string]*nodedaemon.Daemon{}, failing: map[string]bool{}, sick: map[string]bool{}, noSpace: map[string]bool{}, reboots: map[string]int{}, clk: clock.RealClock{}}
	configure(h)
	clk := h.clk
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	h.stopWorld = cancel
	for i := 0; i < nodes; i++ {
		h.addNode(fmt.Sprintf("%s-%d", prefix, i), false)
	}
	h.events = &eventLog{}
	h.opts = options.Options{Clock: clk, Resolver: &resolve.Registry{Insecure: true}, Metrics: options.NewMetrics(nil), Recorder: h.events, SecretNamespace: "default"}
	h.startManager()
	go h.world()
	t.Cleanup(func() {
		if t.Failed() {
			h.dump()
		}
		h.stopManager()
		cancel()
	})
	return h
}

func (h *harness) addNode(name string, cordoned bool) {
	h.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: h.label}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	if err := k8s.Create(h.ctx, n); err != nil {
		h.t.Fatalf("create node %s: %v", name, err)
	}
	setReady(h.t, h.ctx, name, true)
	host := &fakeHost{booted: &v1alpha1.HostImage{Image: digestRef("v1"), Digest: imageref.Digest(digestRef("v1"))}, bootID: "boot-0", ticks: h.rebootTicks}
	h.mu.Lock()
	h.hosts[name] = host
	d := nodedaemon.New(name, k8s, host, clock.RealClock{}, logr.Discard())
	d.Prefetch = &fakePrefetch{h: h}
	h.daemons[name] = d
	h.mu.Unlock()
}

func setReady(t *testing.T, ctx context.Context, name string, ready bool) {
	t.Helper()
	for i := 0; i < 10; i++ {
		var n corev1.Node
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			if apierrors.IsNotFound(err) || ctx.Err() != nil {
				return
			}
			t.Errorf("get node %s: %v", name, err)
			return
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, Reason: "Test", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		err := k8s.Status().Update(ctx, &n)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Errorf("set node %s ready=%v: %v", name, ready, err)
			return
		}
	}
}

func (h *harness) startManager() {
	h.t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: ctrlConfig()})
	if err != nil {
		h.t.Fatalf("manager: %v", err)
	}
	if err := controller.Setup(mgr, h.opts); err != nil {
		h.t.Fatalf("setup: %v", err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.stopMgr = cancel
	h.mgrDone = make(chan struct{})
	go func() {
		defer close(h.mgrDone)
		if err := mgr.Start(ctx); err != nil {
			h.t.Errorf("manager: %v", err)
		}
	}()
}

func (h *harness) stopManager() {
	if h.stopMgr != nil {
		h.stopMgr()
		<-h.mgrDone
		h.stopMgr = nil
	}
}

// world plays the kubelets and daemons: every 50 ms it finishes pod
// deletions, runs each node's daemon and advances reboots, and records how
// many nodes bootroll has cordoned at once.
func (h *harness) world() {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
		}
		h.step()
	}
}

func (h *harness) step() {
	ctx := h.ctx
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.MatchingLabels(h.label)); err == nil {
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp != nil {
				_ = k8s.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
			}
		}
	}
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes, client.MatchingLabels(h.label)); err != nil {
		return
	}
	cordoned := 0
	for _, n := range nodes.Items {
		if _, ok := n.Annotations[v1alpha1.AnnotationSlot]; ok && n.Spec.Unschedulable {
			cordoned++
		}
	}
	h.mu.Lock()
	if cordoned > h.maxCord {
		h.maxCord = cordoned
	}
	names := make([]string, 0, len(h.hosts))
	for n := range h.hosts {
		names = append(names, n)
	}
	h.mu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		h.mu.Lock()
		host, d := h.hosts[name], h.daemons[name]
		h.mu.Unlock()
		if host.advance(h) {
			h.mu.Lock()
			h.reboots[name]++
			h.mu.Unlock()
		}
		was := host.isRebooting()
		_, _ = d.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		if !was && host.isRebooting() {
			h.checkProtected(name)
		}
	}
}

// checkProtected records a reboot of node that starts while the Node is
// not cordoned with bootroll's slot marker.
func (h *harness) checkProtected(name string) {
	var n corev1.Node
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, &n); err != nil {
		return
	}
	if _, marked := n.Annotations[v1alpha1.AnnotationSlot]; !marked || !n.Spec.Unschedulable {
		h.mu.Lock()
		h.unprotected = append(h.unprotected, fmt.Sprintf("%s (unschedulable=%v, marked=%v)", name, n.Spec.Unschedulable, marked))
		h.mu.Unlock()
	}
}

// fakeHost is a bootc host: Stage stages at once; Apply starts a reboot
// that the world finishes on a later tick (the Node is NotReady meanwhile).
type fakeHost struct {
	mu        sync.Mutex
	booted    *v1alpha1.HostImage
	staged    *v1alpha1.HostImage
	rollback  *v1alpha1.HostImage
	bootID    string
	boots     int
	rebooting int // ticks left
	ticks     int // a reboot's ticks; 0 means 4
	// rollbackQueued: a bootc rollback was run; the rollback deployment
	// boots next.
	rollbackQueued bool
	stageErr       string
	last           *nodedaemon.StageResult
}

func (f *fakeHost) Observe(context.Context) (nodedaemon.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rebooting > 0 {
		return nodedaemon.Observation{}, fmt.Errorf("host is rebooting")
	}
	return nodedaemon.Observation{Booted: f.booted.DeepCopy(), Staged: f.staged.DeepCopy(), Rollback: f.rollback.DeepCopy(), RollbackQueued: f.rollbackQueued, BootID: f.bootID, LastStage: f.last}, nil
}

func (f *fakeHost) Stage(_ context.Context, image string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stageErr != "" {
		f.last = &nodedaemon.StageResult{Image: image, Err: f.stageErr}
		return fmt.Errorf("%s", f.stageErr)
	}
	f.staged = &v1alpha1.HostImage{Image: image, Digest: imageref.Digest(image)}
	f.last = &nodedaemon.StageResult{Image: image}
	return nil
}

func (f *fakeHost) Apply(context.Context, string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rebooting == 0 {
		f.rebooting = f.rebootTicks()
	}
	return nil
}

func (f *fakeHost) rebootTicks() int { return max(f.ticks, 4) }

func (f *fakeHost) isRebooting() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rebooting > 0
}

func (f *fakeHost) Rollback(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rollback != nil {
		f.rollbackQueued = !f.rollbackQueued
	}
	return nil
}
func (f *fakeHost) Reboot(context.Context) error { return f.Apply(context.Background(), "") }

// ShuttingDown: the host is going down while a reboot is under way.
func (f *fakeHost) ShuttingDown(context.Context) (bool, error) { return f.isRebooting(), nil }

// advance moves a reboot on; it reports true when a reboot completed.
func (f *fakeHost) advance(h *harness) bool {
	f.mu.Lock()
	if f.rebooting == 0 {
		f.mu.Unlock()
		return false
	}
	name := ""
	h.mu.Lock()
	for n, x := range h.hosts {
		if x == f {
			name = n
		}
	}
	failing := f.staged != nil && h.failing[f.staged.Digest]
	h.mu.Unlock()
	f.rebooting--
	if f.rebooting == f.rebootTicks()-1 {
		f.mu.Unlock()
		setReady(h.t, h.ctx, name, false)
		return false
	}
	if f.rebooting > 0 {
		f.mu.Unlock()
		return false
	}
	f.boots++
	f.bootID = fmt.Sprintf("boot-%d", f.boots)
	switch {
	case f.rollbackQueued:
		f.rollback, f.booted = f.booted, f.rollback
		f.rollbackQueued = false
	case f.staged != nil && !failing:
		f.rollback, f.booted = f.booted, f.staged
	}
	f.staged = nil
	f.last = nil
	h.mu.Lock()
	sick := h.sick[f.booted.Digest]
	h.mu.Unlock()
	f.mu.Unlock()
	setReady(h.t, h.ctx, name, !sick)
	return true
}

func (h *harness) pool(name, image string, maxUnavailable intstr.IntOrString, mutate ...func(*v1alpha1.BootcNodePool)) *v1alpha1.BootcNodePool {
	h.t.Helper()
	p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.BootcNodePoolSpec{
		NodeSelector: h.label, Image: v1alpha1.ImageReference(image),
		Rollout:      v1alpha1.RolloutSpec{MaxUnavailable: &maxUnavailable},
		DrainTimeout: &metav1.Duration{Duration: 20 * time.Second}, HealthTimeout: &metav1.Duration{Duration: 20 * time.Second},
	}}
	for _, m := range mutate {
		m(p)
	}
	if err := k8s.Create(h.ctx, p); err != nil {
		h.t.Fatalf("create pool %s: %v", name, err)
	}
	h.t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	return p
}

// dump logs the pools and BootcNodes of a failed test.
func (h *harness) dump() {
	var pools v1alpha1.BootcNodePoolList
	_ = k8s.List(context.Background(), &pools)
	for _, p := range pools.Items {
		h.t.Logf("pool %s: target=%s summary=%q slots=%v conditions=%+v", p.Name, p.Status.TargetImage, p.Status.Summary, p.Status.Slots, p.Status.Conditions)
	}
	for name, bn := range h.bootcNodes() {
		h.t.Logf("bootcnode %s: spec=%+v phase=%s rollout=%+v daemon=%+v booted=%v staged=%v", name, bn.Spec, bn.Status.Phase, bn.Status.Rollout, bn.Status.Daemon, bn.Status.Booted, bn.Status.Staged)
	}
}

func (h *harness) bootcNodes() map[string]v1alpha1.BootcNode {
	var l v1alpha1.BootcNodeList
	if err := k8s.List(h.ctx, &l); err != nil {
		h.t.Fatalf("list BootcNodes: %v", err)
	}
	out := map[string]v1alpha1.BootcNode{}
	for _, bn := range l.Items {
		if _, ok := h.hosts[bn.Name]; ok {
			out[bn.Name] = bn
		}
	}
	return out
}

func (h *harness) node(name string) corev1.Node {
	var n corev1.Node
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, &n); err != nil {
		h.t.Fatalf("get node %s: %v", name, err)
	}
	return n
}

// allOn reports whether every node of the harness boots digest and is
// Updated, uncordoned by bootroll.
func (h *harness) allOn(ref string) func() error {
	return func() error {
		bns := h.bootcNodes()
		if len(bns) != len(h.hosts) {
			return fmt.Errorf("%d BootcNodes for %d nodes", len(bns), len(h.hosts))
		}
		for name, bn := range bns {
			if bn.Status.Phase != v1alpha1.PhaseUpdated || bn.Status.Booted == nil || bn.Status.Booted.Digest != imageref.Digest(ref) {
				return fmt.Errorf("%s: phase %s booted %v (%s)", name, bn.Status.Phase, bn.Status.Booted, bn.Status.Rollout.Message)
			}
			if _, ok := h.node(name).Annotations[v1alpha1.AnnotationSlot]; ok {
				return fmt.Errorf("%s still carries the slot marker", name)
			}
		}
		return nil
	}
}

func (h *harness) pods(node string, n int, app string) {
	for i := 0; i < n; i++ {
		// A ReplicaSet's pod (the owner need not exist: no garbage
		// collector runs here), which the drain evicts without spec.drain.force.
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, app, i), Namespace: "default", Labels: mergeLabels(h.label, map[string]string{"app": app}),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app, UID: "rs-" + types.UID(app), Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := k8s.Create(h.ctx, p); err != nil {
			h.t.Fatalf("create pod: %v", err)
		}
		// No kubelet here: report the pod Running and Ready, as the
		// Eviction API checks PDBs only for healthy running pods.
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := k8s.Status().Update(h.ctx, p); err != nil {
			h.t.Fatalf("set pod status: %v", err)
		}
	}
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func TestRolloutRespectsMaxUnavailable(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "mu", 6, clock.RealClock{})
	for i := 0; i < 6; i++ {
		h.pods(fmt.Sprintf("mu-%d", i), 2, "web")
	}
	h.pool("mu", digestRef("v2"), intstr.FromInt32(2))
	g.Eventually(h.allOn(digestRef("v2")), 60*time.Second, 200*time.Millisecond).Should(Succeed())
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.maxCord > 2 || h.maxCord == 0 {
		t.Errorf("at most %d nodes were cordoned by bootroll at once, want 1..2", h.maxCord)
	}
	for name, n := range h.reboots {
		if n != 1 {
			t.Errorf("node %s rebooted %d times, want 1", name, n)
		}
	}
	for i := 0; i < 6; i++ {
		if n := h.node(fmt.Sprintf("mu-%d", i)); n.Spec.Unschedulable {
			t.Errorf("node %s left cordoned", n.Name)
		}
	}
	var pool v1alpha1.BootcNodePool
	g.Eventually(func() string {
		_ = k8s.Get(h.ctx, client.ObjectKey{Name: "mu"}, &pool)
		return pool.Status.Summary
	}, 10*time.Second).Should(Equal("6/6 updated"))
	g.Expect(meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.ConditionUpToDate)).To(BeTrue())
	g.Expect(pool.Status.Slots).To(BeEmpty())
	g.Expect(pool.Status.DeployedDigests).To(Equal([]v1alpha1.DigestCount{{Digest: imageref.Digest(digestRef("v2")), Nodes: 6}}))

	// Each node transition is an Event, in order.
	for i := 0; i < 6; i++ {
		g.Eventually(func() []string { return h.events.of(fmt.Sprintf("mu-%d", i)) }, 10*time.Second, 50*time.Millisecond).Should(ContainElements("SlotGranted", "Cordoned", "Drained", "Rebooting", "Updated", "Uncordoned"))
	}
	// And the metrics saw the whole rollout.
	m := h.opts.Metrics
	g.Eventually(func() float64 {
		return testutil.ToFloat64(m.Nodes.WithLabelValues("mu", string(v1alpha1.PhaseUpdated)))
	}, 10*time.Second).Should(Equal(6.0))
	g.Expect(testutil.ToFloat64(m.SlotsMax.WithLabelValues("mu"))).To(Equal(2.0))
	g.Expect(testutil.CollectAndCount(m.RebootSeconds)).To(Equal(1))
	g.Expect(histCount(t, m.RebootSeconds.WithLabelValues("mu", "ok"))).To(Equal(uint64(6)))
	g.Expect(histCount(t, m.DrainSeconds.WithLabelValues("mu", "drained"))).To(Equal(uint64(6)))
}

// blockingPDB creates a PDB with maxUnavailable 0 over the harness's pods
// of app, healthy of them, and writes the status the PDB controller (not
// running in envtest) would: no disruption allowed.
func (h *harness) blockingPDB(app string, healthy int32) {
	h.t.Helper()
	g := NewWithT(h.t)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: h.prefix + "-" + app, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app, "bootroll-test": h.prefix}}}}
	g.Expect(k8s.Create(h.ctx, pdb)).To(Succeed())
	h.t.Cleanup(func() { _ = k8s.Delete(context.Background(), pdb) })
	g.Eventually(func() error {
		var p policyv1.PodDisruptionBudget
		if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(pdb), &p); err != nil {
			return err
		}
		p.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: p.Generation, DisruptionsAllowed: 0, CurrentHealthy: healthy, DesiredHealthy: healthy, ExpectedPods: healthy}
		return k8s.Status().Update(h.ctx, &p)
	}, 10*time.Second).Should(Succeed())
}

func histCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestPDBBlocksDrainUntilTimeout(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "pdb", 1, clock.RealClock{})
	h.pods("pdb-0", 1, "db")
	h.blockingPDB("db", 1)

	h.pool("pdb", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})
	// First the node is cordoned and the drain is blocked.
	g.Eventually(func() v1alpha1.NodePhase { bn := h.bootcNodes()["pdb-0"]; return bn.Status.Phase }, 30*time.Second, 100*time.Millisecond).Should(Equal(v1alpha1.PhaseDraining))
	g.Eventually(func() bool { return h.node("pdb-0").Spec.Unschedulable }, 10*time.Second, 100*time.Millisecond).Should(BeTrue())
	// Then the drain times out: the slot is released and the node uncordoned.
	g.Eventually(func() string { bn := h.bootcNodes()["pdb-0"]; return bn.Status.Rollout.Reason }, 20*time.Second, 100*time.Millisecond).Should(Equal("DrainTimeout"))
	bn := h.bootcNodes()["pdb-0"]
	g.Expect(bn.Status.Phase).To(Equal(v1alpha1.PhasePending), "back to waiting for a slot")
	g.Expect(rollout.ObservedPhase(&bn)).To(Equal(v1alpha1.PhaseStaged), "still staged")
	g.Expect(bn.Status.Rollout.Message).To(ContainSubstring("default/pdb-0-db-0"))
	g.Expect(bn.Status.Rollout.RetryAfter).NotTo(BeNil())
	// The slot ends on the record first; the Node is given back next.
	g.Eventually(func() bool { return h.node("pdb-0").Spec.Unschedulable }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
	g.Expect(h.node("pdb-0").Annotations).NotTo(HaveKey(v1alpha1.AnnotationSlot))
	// The pool drops the slot at its next pass (within rollout.PoolStatusDebounce).
	g.Eventually(func() []v1alpha1.Slot {
		var pool v1alpha1.BootcNodePool
		_ = k8s.Get(h.ctx, client.ObjectKey{Name: "pdb"}, &pool)
		return pool.Status.Slots
	}, 10*time.Second, 100*time.Millisecond).Should(BeEmpty())
	// The pod was never evicted, and no cordon flapping: the node stays
	// uncordoned for the whole backoff.
	var pod corev1.Pod
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Namespace: "default", Name: "pdb-0-db-0"}, &pod)).To(Succeed())
	g.Consistently(func() bool { return h.node("pdb-0").Spec.Unschedulable }, 3*time.Second, 100*time.Millisecond).Should(BeFalse())
	h.mu.Lock()
	g.Expect(h.reboots["pdb-0"]).To(Equal(0))
	h.mu.Unlock()
}

func TestPriorCordonKept(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "cord", 0, clock.RealClock{})
	h.addNode("cord-0", true)
	h.addNode("cord-1", false)
	h.pool("cord", digestRef("v2"), intstr.FromInt32(1))
	g.Eventually(h.allOn(digestRef("v2")), 60*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Expect(h.node("cord-0").Spec.Unschedulable).To(BeTrue(), "a node cordoned before the rollout must stay cordoned")
	g.Expect(h.node("cord-1").Spec.Unschedulable).To(BeFalse())
}

// TestAdminCordonDuringSlotKept: an admin uncordons a node while it
// verifies and cordons it again (kubectl's merge patches, under its own
// field manager): bootroll's release, which restores the cordon state from
// before the slot, leaves that cordon (managedFields show it is not
// bootroll's), and removes its slot marker (explorer seeds 94019, 94277).
func TestAdminCordonDuringSlotKept(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "acd", 1, clock.RealClock{})
	slow := digestRef("slow-to-ready")
	h.mu.Lock()
	h.sick[imageref.Digest(slow)] = true // boots, NotReady until told
	h.mu.Unlock()
	h.pool("acd", slow, intstr.FromInt32(1))
	g.Eventually(func() v1alpha1.NodePhase { bn := h.bootcNodes()["acd-0"]; return bn.Status.Phase }, 60*time.Second, 100*time.Millisecond).
		Should(Equal(v1alpha1.PhaseVerifying))
	kubectl := func(unschedulable bool) {
		t.Helper()
		data := `{"spec":{"unschedulable":null}}`
		if unschedulable {
			data = `{"spec":{"unschedulable":true}}`
		}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "acd-0"}}
		g.Expect(k8s.Patch(h.ctx, n, client.RawPatch(types.StrategicMergePatchType, []byte(data)), client.FieldOwner("kubectl-cordon"))).To(Succeed())
	}
	kubectl(false)
	kubectl(true)
	setReady(t, h.ctx, "acd-0", true)
	g.Eventually(func() v1alpha1.NodePhase { bn := h.bootcNodes()["acd-0"]; return bn.Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(v1alpha1.PhaseUpdated))
	g.Eventually(func() map[string]string { return h.node("acd-0").Annotations }, 10*time.Second, 100*time.Millisecond).
		ShouldNot(HaveKey(v1alpha1.AnnotationSlot))
	g.Consistently(func() bool { return h.node("acd-0").Spec.Unschedulable }, 2*time.Second, 100*time.Millisecond).
		Should(BeTrue(), "the admin's cordon, written during the slot, must stay")
}

func TestControllerRestartMidRollout(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "rs", 4, clock.RealClock{})
	for i := 0; i < 4; i++ {
		h.pods(fmt.Sprintf("rs-%d", i), 1, "web")
	}
	h.pool("rs", digestRef("v2"), intstr.FromInt32(1))
	// Stop the controller as soon as a node is in its slot.
	g.Eventually(func() bool {
		for _, bn := range h.bootcNodes() {
			if bn.Status.Phase == v1alpha1.PhaseRebooting || bn.Status.Phase == v1alpha1.PhaseDraining {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond).Should(BeTrue())
	h.stopManager()
	time.Sleep(500 * time.Millisecond) // the fleet goes on without a controller
	h.startManager()
	g.Eventually(h.allOn(digestRef("v2")), 60*time.Second, 200*time.Millisecond).Should(Succeed())
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, n := range h.reboots {
		g.Expect(n).To(Equal(1), "node %s rebooted %d times", name, n)
	}
	g.Expect(h.maxCord).To(Equal(1))
}

func TestFailedNodeHaltsAndNewImageRecovers(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "fail", 3, clock.RealClock{})
	bad, good := digestRef("bad"), digestRef("v3")
	h.mu.Lock()
	h.failing[imageref.Digest(bad)] = true
	h.mu.Unlock()
	p := h.pool("fail", bad, intstr.FromInt32(1))
	var pool v1alpha1.BootcNodePool
	g.Eventually(func() bool {
		_ = k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &pool)
		return meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.ConditionHalted)
	}, 60*time.Second, 200*time.Millisecond).Should(BeTrue())
	c := meta.FindStatusCondition(pool.Status.Conditions, v1alpha1.ConditionHalted)
	g.Expect(c.Reason).To(Equal(v1alpha1.ReasonMaxFailures))
	g.Expect(c.Message).To(ContainSubstring("BootFailed"))
	failed := ""
	for name, bn := range h.bootcNodes() {
		if bn.Status.Phase == v1alpha1.PhaseFailed {
			failed = name
			g.Expect(bn.Status.Rollout.FailedImage).To(Equal(bad))
			g.Expect(c.Message).To(ContainSubstring(name))
		}
	}
	g.Expect(failed).NotTo(BeEmpty())
	// Halted: no other node gets a slot.
	g.Consistently(func() int {
		n := 0
		for _, bn := range h.bootcNodes() {
			if bn.Status.Phase == v1alpha1.PhaseDraining || bn.Status.Phase == v1alpha1.PhaseRebooting {
				n++
			}
		}
		return n
	}, 2*time.Second, 100*time.Millisecond).Should(Equal(0))
	g.Expect(h.node(failed).Spec.Unschedulable).To(BeFalse(), "a failed node running its old image is uncordoned")

	// A fixed image recovers the pool with no manual step.
	h.setPoolImage(p.Name, good)
	g.Eventually(h.allOn(good), 60*time.Second, 200*time.Millisecond).Should(Succeed())
	bn := h.bootcNodes()[failed]
	g.Expect(bn.Status.Rollout.FailedImage).To(Equal(bad), "the failed image stays visible for debugging")
	g.Eventually(func() bool {
		_ = k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &pool)
		return meta.IsStatusConditionFalse(pool.Status.Conditions, v1alpha1.ConditionHalted)
	}, 10*time.Second, 100*time.Millisecond).Should(BeTrue())
}
