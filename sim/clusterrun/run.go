package clusterrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/invariant"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// Options configure a run on a cluster.
type Options struct {
	// Kubeconfig is the cluster's; with ClusterDir empty too, the run
	// starts a local cluster (internal/localcluster) in a directory of
	// its own and stops it at the end.
	Kubeconfig string
	// ClusterDir is the directory of a running `bootroll cluster up`.
	ClusterDir string
	// Repo is the bootroll checkout: its CRDs, bin/k8s, and the
	// controller it builds.
	Repo string
	// WorkDir receives the logs, kubeconfigs and the trace of the run;
	// empty: a new temporary directory, kept.
	WorkDir string
	// ExternalController uses a controller already deployed instead of
	// starting one.
	ExternalController bool
	// ExternalDaemon uses daemons already deployed (kind/overlay's
	// host-mode DaemonSet, which plays the hosts of its own hosts.yaml)
	// instead of starting the host-mode daemon.
	ExternalDaemon bool
	// ControllerBin is the controller binary; empty: go build it into
	// Repo/bin.
	ControllerBin string
	// BootrollBin is the bootroll binary that has the `daemon` command;
	// empty: this process's executable.
	BootrollBin string
	// Sets are the --set overrides the scenario was loaded with; the
	// daemon gets the file with them applied.
	Sets []string
	// Seed seeds the fault draws (default: the scenario's).
	Seed uint64
	// Settle is how long a converged run goes on (default twin.Settle).
	Settle time.Duration
	// Trace, when set, receives the JSONL trace of the watch events,
	// steps and violations.
	Trace io.Writer
	// APITrace, when set, receives the API-level lines of the twin's
	// trace format (twin.APILines: node.cordon, bootcnode.phase, ...) and
	// the real Karpenter's decisions (karpenter/disrupt, ...:
	// KarpenterDecisions), timed by the wall clock, for sim/fidelity.
	APITrace io.Writer
	// Progress receives one line per setup step.
	Progress io.Writer
	// Chaos says when faults are injected through Chaos Mesh objects
	// (default ChaosAuto: with an external controller on a cluster that
	// serves Chaos Mesh's API).
	Chaos ChaosMode
	// ChaosNamespace holds bootroll's pods and the Chaos Mesh objects
	// (default bootroll-system, as kind/overlay deploys it).
	ChaosNamespace string
	// APIServerAddress is the API server's address as the nodes reach it,
	// for Chaos Mesh partitions and latency (default: the first endpoint
	// of the default/kubernetes Service).
	APIServerAddress string
}

// Result is what a run on a cluster did: the same fields as the twin's
// result where they mean the same (verdict, violations, end), and the
// notices of what was skipped or approximated.
type Result struct {
	*twin.Result
	// Notices are the skipped and approximated parts of the scenario,
	// in plan order.
	Notices []Notice
	// Dir is the run's work directory (logs, kubeconfigs).
	Dir string
}

// pending is a timed action of the run loop (a restart after downFor,
// the end of a fault).
type pending struct {
	at time.Time
	fn func()
}

type runner struct {
	ctx  context.Context
	sc   *scenario.Scenario
	opts Options
	c    client.Client
	cfg  *rest.Config
	act  *actor
	obs  *Observer
	chk  *invariant.Checker
	w    *invariant.World
	rng  *rand.Rand

	start   time.Time
	events  chan apiserver.Event
	exits   chan string
	pend    []pending
	notices []Notice
	trace   *json.Encoder

	ctrl, daemon   *proc
	ctrlProxy      *Proxy
	daemonProxy    *Proxy
	ctrlDownUntil  time.Time
	ctrlFailedSeen time.Time // the ctrlProxy.LastFailed the checker was told
	crashed        map[string]bool
	quietAfter     time.Duration
	convergedSince time.Time
	nodes          map[string]string // existing Nodes and their group label
	daemonOK       bool
	chaosOn        bool            // faults go through Chaos Mesh objects
	chaosObjs      []client.Object // the Chaos Mesh objects created
	chaosN         int

	// ownKarpenter is set when the run started the local cluster without
	// Karpenter's process (and, with karpenter.installCRDsAt, without its
	// CRDs): the run installs Karpenter at the scenario's time, creates
	// the NodeClaims that adopt the Karpenter groups' nodes, and starts
	// karpenter-kwok (installKarpenter).
	ownKarpenter bool
	clusterDir   string
	kubeconfig   string
	objs         *Objects
	ca           cache.Cache
	// lateKinds are the Karpenter kinds to watch once their CRDs are
	// installed.
	lateKinds []client.Object
	// kd reads Karpenter's decisions from the watch.
	kd *KarpenterDecisions
}

// Run runs a scenario on a cluster.
func Run(ctx context.Context, sc *scenario.Scenario, opts Options) (res *Result, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.Seed == 0 {
		opts.Seed = sc.Seed
	}
	if opts.Settle <= 0 {
		opts.Settle = twin.Settle
	}
	if opts.WorkDir == "" {
		if opts.WorkDir, err = os.MkdirTemp("", "bootroll-cluster-run-"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, err
	}
	r := &runner{ctx: ctx, sc: sc, opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x6661756c74)),
		events: make(chan apiserver.Event, 1<<16), exits: make(chan string, 4), crashed: map[string]bool{}, nodes: map[string]string{}, kd: NewKarpenterDecisions()}
	if k := sc.Karpenter; k != nil && string(k.Version) == localcluster.KarpenterV114 && k.NodeRepair {
		// v1.14 repairs by deleting the NodeClaim, after the KWOK
		// provider's repair policy (karpenterRepairToleration).
		r.kd.RepairAfter = karpenterRepairToleration
	}
	if opts.Trace != nil {
		r.trace = json.NewEncoder(opts.Trace)
	}
	r.ownKarpenter = sc.Karpenter != nil && opts.Kubeconfig == "" && opts.ClusterDir == ""
	kubeconfig, stopCluster, err := r.cluster()
	if err != nil {
		return nil, err
	}
	defer stopCluster()
	r.kubeconfig = kubeconfig
	if r.cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	r.cfg.QPS, r.cfg.Burst = 200, 400
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := chaosv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if r.c, err = client.New(r.cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	r.act = newActor(r.c, sc)
	if opts.Kubeconfig != "" {
		if err := r.installCRDs(); err != nil {
			return nil, err
		}
	}
	if r.chaosOn, err = r.useChaos(); err != nil {
		return nil, err
	}
	if r.chaosOn {
		fmt.Fprintf(opts.Progress, "faults through Chaos Mesh objects in namespace %s\n", cmp.Or(opts.ChaosNamespace, "bootroll-system"))
		defer func() { r.removeChaos(r.chaosObjs) }()
	}
	steps, notices := Plan(sc, PlanOptions{Seed: opts.Seed, ExternalController: opts.ExternalController, ExternalDaemon: opts.ExternalDaemon, Chaos: r.chaosOn, OwnKarpenter: r.ownKarpenter})
	r.notices = notices
	for _, s := range steps {
		switch {
		case s.Skip != "":
			r.notices = append(r.notices, Notice{Name: s.Label(), Why: s.Skip})
		case s.Approx != "":
			r.notices = append(r.notices, Notice{Name: s.Label(), Why: s.Approx, Approx: true})
		}
		if s.Skip == "" {
			r.quietAfter = max(r.quietAfter, s.At)
			if f := s.Fault; f != nil && (f.Window != nil || !f.Span()) {
				r.quietAfter = max(r.quietAfter, s.Until)
			}
		}
	}
	if at := r.installAt(); r.ownKarpenter && at > 0 {
		r.quietAfter = max(r.quietAfter, at)
	}
	r.quietAfter = min(r.quietAfter, sc.Limit)

	// Proxies in front of the API server for the controller and the
	// daemon.
	if r.ctrlProxy, err = NewProxy("controller", r.cfg, opts.Seed); err != nil {
		return nil, err
	}
	defer r.ctrlProxy.Close()
	if r.daemonProxy, err = NewProxy("daemon", r.cfg, opts.Seed+1); err != nil {
		return nil, err
	}
	defer r.daemonProxy.Close()
	asked := func(key string) bool { return r.ctrlProxy.Asked(key) || r.daemonProxy.Asked(key) }
	refused := func() uint64 { return r.ctrlProxy.Refused() + r.daemonProxy.Refused() }
	r.obs = NewObserver(time.Now, asked, refused) // edge: the cluster's time is the wall clock
	r.kd.Asked = asked
	r.obs.crashed = r.crashed

	// The watch starts before anything is created; its events wait in
	// the channel until the checker exists, so it sees every object from
	// its creation.
	stopWatch, err := r.watch(scheme)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	if err := r.create(); err != nil {
		return nil, err
	}
	if !opts.ExternalController && opts.ControllerBin == "" {
		fmt.Fprintf(opts.Progress, "building the controller\n")
		if r.opts.ControllerBin, err = buildController(opts.Repo); err != nil {
			return nil, err
		}
	}

	// The scenario's time 0 is when the pools exist and the processes
	// start: the host-mode daemon times the host faults it plays from its
	// own start.
	r.start = time.Now() // edge: the run's start on the wall clock
	if r.chk, err = invariant.New(sc, r.obs.Sources(), r.start); err != nil {
		return nil, err
	}
	r.obs.Attach(r.chk)
	r.w = r.chk.World()
	r.act.intendCordon = r.w.SetIntendedCordon
	r.act.intendAnnotation = func(node, key string, present bool) {
		r.w.SetIntendedAnnotation(node, key, present, time.Now()) // edge: the checker's time is the wall clock
	}
	defer r.stopProcs()
	// Karpenter is installed at time 0, as in the twin, unless the
	// scenario installs it later (a step of the loop).
	if at := r.installAt(); r.ownKarpenter && at <= 0 {
		if err := r.installKarpenter(false); err != nil {
			return nil, err
		}
	} else if r.ownKarpenter {
		r.at(r.start.Add(at), func() {
			if err := r.installKarpenter(true); err != nil {
				r.notices = append(r.notices, Notice{Name: fmt.Sprintf("karpenter.installCRDsAt@%s", at), Why: "failed: " + err.Error()})
			}
		})
	}
	if err := r.startProcs(); err != nil {
		return nil, err
	}
	return r.loop(steps)
}

// installAt is the scenario's karpenter.installCRDsAt, 0 when absent.
func (r *runner) installAt() time.Duration {
	if k := r.sc.Karpenter; k != nil && k.InstallCRDsAt != nil {
		return *k.InstallCRDsAt
	}
	return 0
}

// applyNodeClasses creates the scenario's KWOKNodeClasses, or updates the
// ones that exist (cluster up's default).
func (r *runner) applyNodeClasses() error {
	for _, nc := range r.objs.NodeClasses {
		want := nc.DeepCopy()
		err := r.c.Create(r.ctx, want)
		if apierrors.IsAlreadyExists(err) {
			have := nc.DeepCopy()
			if err = r.c.Get(r.ctx, client.ObjectKeyFromObject(nc), have); err == nil {
				have.Object["spec"] = nc.Object["spec"]
				err = r.c.Update(r.ctx, have)
			}
		}
		if err != nil {
			return fmt.Errorf("creating KWOKNodeClass %s: %w", nc.GetName(), err)
		}
	}
	return nil
}

// installKarpenter installs Karpenter as the twin does at its install
// time (time 0, or karpenter.installCRDsAt): Karpenter's CRDs when the
// cluster started without them (then the watches of NodeClaims and
// NodePools), the scenario's NodePools, a NodeClaim per Karpenter group
// node that adopts the node (marked launched, so the claim's expireAfter
// counts from now, as in the twin), and then the karpenter-kwok process,
// with NodeRepair when the scenario asks for it. Karpenter's readiness
// is not waited for.
func (r *runner) installKarpenter(crds bool) error {
	if crds {
		if err := localcluster.InstallKarpenter(r.ctx, r.kubeconfig, r.karpenterVersion()); err != nil {
			return fmt.Errorf("installing Karpenter: %w", err)
		}
		if err := r.watchLate(); err != nil {
			return err
		}
	}
	if err := r.applyNodeClasses(); err != nil {
		return err
	}
	for _, np := range r.objs.NodePools {
		if err := r.c.Create(r.ctx, np.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating NodePool %s: %w", np.GetName(), err)
		}
	}
	now := metav1.Now() // edge: the claims' launch time is the wall clock
	for i, nc := range r.objs.NodeClaims {
		node := r.objs.KarpenterNodes[i]
		claim := r.objs.AdoptingClaims[i].DeepCopy()
		if err := r.c.Create(r.ctx, claim); err != nil {
			return fmt.Errorf("creating NodeClaim %s: %w", nc.GetName(), err)
		}
		b, err := json.Marshal(AdoptingStatus(node, now))
		if err != nil {
			return err
		}
		if err := r.c.Status().Patch(r.ctx, claim, client.RawPatch(types.MergePatchType, b)); err != nil {
			return fmt.Errorf("marking NodeClaim %s launched: %w", nc.GetName(), err)
		}
	}
	gates := ""
	if r.sc.Karpenter.NodeRepair {
		gates = "NodeRepair=true"
	}
	p, err := localcluster.StartKarpenter(r.ctx, localcluster.StartKarpenterOptions{Dir: r.clusterDir, BinDir: filepath.Join(r.opts.Repo, "bin", "k8s"), FeatureGates: gates, Version: r.karpenterVersion()})
	if err != nil {
		return fmt.Errorf("starting Karpenter: %w", err)
	}
	r.emit("karpenter.install", "", map[string]any{"crds": crds, "claims": len(r.objs.NodeClaims), "featureGates": gates, "pid": p.PID})
	fmt.Fprintf(r.opts.Progress, "Karpenter installed at %s: %d NodeClaim(s) adopting nodes, karpenter-kwok started (pid %d, log %s)\n", time.Since(r.start).Round(time.Millisecond), len(r.objs.NodeClaims), p.PID, p.Log) // edge: progress timed by the wall clock
	return nil
}

// karpenterVersion is the scenario's karpenter.version, the Karpenter a
// local cluster the run starts runs ("" without karpenter).
func (r *runner) karpenterVersion() string {
	if r.sc.Karpenter == nil {
		return ""
	}
	return string(r.sc.Karpenter.Version)
}

// cluster returns the kubeconfig of the cluster to run on, starting a
// local one when none is given.
func (r *runner) cluster() (string, func(), error) {
	o := r.opts
	switch {
	case o.Kubeconfig != "":
		return o.Kubeconfig, func() {}, nil
	case o.ClusterDir != "":
		return filepath.Join(o.ClusterDir, "kubeconfig"), func() {}, nil
	}
	dir := filepath.Join(o.WorkDir, "cluster")
	r.clusterDir = dir
	fmt.Fprintf(o.Progress, "starting a local cluster in %s\n", dir)
	mode := localcluster.KarpenterStarted
	switch {
	case r.ownKarpenter && r.installAt() > 0:
		mode = localcluster.KarpenterAbsent
	case r.ownKarpenter:
		mode = localcluster.KarpenterDeferred
	}
	st, err := localcluster.Up(r.ctx, localcluster.Options{Dir: dir, BinDir: filepath.Join(o.Repo, "bin", "k8s"), Repo: o.Repo, Progress: o.Progress, Karpenter: mode, KarpenterVersion: r.karpenterVersion()})
	if err != nil {
		return "", nil, fmt.Errorf("starting the local cluster: %w", err)
	}
	return st.Kubeconfig, func() {
		if err := localcluster.Down(localcluster.DownOptions{Dir: dir, Progress: o.Progress}); err != nil {
			fmt.Fprintf(o.Progress, "stopping the local cluster: %v\n", err)
		}
	}, nil
}

// installCRDs creates bootroll's CRDs on a cluster that lacks them and
// waits until they serve.
func (r *runner) installCRDs() error {
	crds, err := localcluster.ReadManifests(os.DirFS(r.opts.Repo), localcluster.BootrollCRDDir+"/*.yaml")
	if err != nil {
		return fmt.Errorf("bootroll's CRDs in %s: %w", r.opts.Repo, err)
	}
	for _, crd := range crds {
		if err := r.c.Create(r.ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", crd.GetName(), err)
		}
	}
	deadline := time.Now().Add(time.Minute) // edge: a real cluster, waited for on the wall clock
	for {
		var l v1alpha1.BootcNodePoolList
		err := r.c.List(r.ctx, &l)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) { // edge: a real cluster, waited for on the wall clock
			return fmt.Errorf("bootroll's CRDs do not serve: %w", err)
		}
		time.Sleep(200 * time.Millisecond) // edge: polling the API server
	}
}

// watch starts informers on the kinds the checker reads and sends their
// events to the loop.
func (r *runner) watch(scheme *runtime.Scheme) (func(), error) {
	ca, err := cache.New(r.cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(r.ctx)
	kinds := []client.Object{&corev1.Node{}, &corev1.Pod{}, &policyv1.PodDisruptionBudget{},
		&v1alpha1.BootcNodePool{}, &v1alpha1.BootcNode{}, &v1alpha1.PinnedImageSet{}}
	for _, k := range []string{"NodeClaim", "NodePool"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: KarpenterGroup, Version: "v1", Kind: k})
		if r.ownKarpenter && r.installAt() > 0 {
			r.lateKinds = append(r.lateKinds, u)
			continue
		}
		if _, err := r.c.RESTMapper().RESTMapping(u.GroupVersionKind().GroupKind(), "v1"); err != nil {
			r.notices = append(r.notices, Notice{Name: "watch " + k, Why: "Karpenter's CRDs are not installed on this cluster"})
			continue
		}
		kinds = append(kinds, u)
	}
	for _, k := range kinds {
		if err := r.inform(ctx, ca, k); err != nil {
			cancel()
			return nil, err
		}
	}
	go ca.Start(ctx) //nolint:errcheck // edge: the informers' goroutine; cancel stops it
	if !ca.WaitForCacheSync(ctx) {
		cancel()
		return nil, errors.New("the watches did not sync")
	}
	r.ca = ca
	return cancel, nil
}

// inform sends the events of kind k's informer to the loop.
func (r *runner) inform(ctx context.Context, ca cache.Cache, k client.Object) error {
	send := func(t apiserver.EventType, old, obj any) {
		if ev, ok := Convert(t, old, obj); ok {
			r.events <- ev
		}
	}
	inf, err := ca.GetInformer(ctx, k)
	if err != nil {
		return fmt.Errorf("watching %T: %w", k, err)
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { send(apiserver.Added, nil, obj) },
		UpdateFunc: func(old, obj any) { send(apiserver.Modified, old, obj) },
		DeleteFunc: func(obj any) { send(apiserver.Deleted, nil, obj) },
	})
	return err
}

// watchLate starts the watches of the Karpenter kinds whose CRDs were
// installed during the run (the informer cache runs already; a new
// informer starts and syncs at once).
func (r *runner) watchLate() error {
	for _, k := range r.lateKinds {
		if err := r.inform(r.ctx, r.ca, k); err != nil {
			return err
		}
	}
	r.lateKinds = nil
	return nil
}

// create makes the scenario's objects: nodes, workloads, PDBs, then,
// once the workloads are running (bounded), the pools.
func (r *runner) create() error {
	objs, err := Build(r.sc)
	if err != nil {
		return err
	}
	for _, ns := range []string{"bootroll-system"} {
		n := &corev1.Namespace{}
		n.Name = ns
		if err := r.c.Create(r.ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	r.objs = objs
	pools := objs.Pools
	all := *objs
	all.Pools = nil
	if r.ownKarpenter {
		// The Karpenter groups' nodes exist from the start, as plain
		// KWOK Nodes; their NodePools and NodeClaims come when Karpenter
		// is installed (installKarpenter).
		all.Nodes = append(slices.Clone(all.Nodes), objs.KarpenterNodes...)
		all.NodePools, all.NodeClaims = nil, nil
	}
	if !r.ownKarpenter {
		if err := r.applyNodeClasses(); err != nil {
			return err
		}
	}
	// The nodes first, and Ready before any pod is scheduled, as in the
	// twin at time 0: a pod created while some nodes are still NotReady
	// (or carry the node lifecycle controller's not-ready taint) lands on
	// the others, and a node left empty is reaped by Karpenter's
	// emptiness where the twin's is not.
	nodes := all.Nodes
	rest := all
	rest.Nodes = nil
	for _, n := range nodes {
		if err := r.c.Create(r.ctx, n); err != nil {
			return fmt.Errorf("creating %T %s: %w", n, n.GetName(), err)
		}
	}
	r.waitNodesReady(nodes, time.Minute)
	for _, o := range rest.All() {
		if err := r.c.Create(r.ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	fmt.Fprintf(r.opts.Progress, "created %d node(s), %d node claim(s), %d workload(s), %d PDB(s)\n", len(all.Nodes), len(all.NodeClaims), len(objs.Workloads), len(objs.PDBs))
	r.waitWorkloads(objs.Workloads, 2*time.Minute)
	for _, p := range pools {
		if err := r.c.Create(r.ctx, p); err != nil {
			return fmt.Errorf("creating pool %s: %w", p.Name, err)
		}
	}
	return nil
}

// waitNodesReady waits until the nodes are Ready and free of the taints
// that keep the scheduler off a node that is not (node.kubernetes.io/
// not-ready and unreachable), at most for d.
func (r *runner) waitNodesReady(nodes []*corev1.Node, d time.Duration) {
	r.waitAll("nodes not all Ready", d, 200*time.Millisecond, len(nodes), func(i int) bool {
		var cur corev1.Node
		return r.c.Get(r.ctx, client.ObjectKeyFromObject(nodes[i]), &cur) == nil && schedulable(&cur)
	})
}

// schedulable reports whether n is Ready without the not-ready and
// unreachable taints.
func schedulable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitWorkloads waits until the Deployments have their replicas ready,
// at most for d.
func (r *runner) waitWorkloads(deps []*appsv1.Deployment, d time.Duration) {
	r.waitAll("workloads not all ready", d, 500*time.Millisecond, len(deps), func(i int) bool {
		var cur appsv1.Deployment
		return r.c.Get(r.ctx, client.ObjectKeyFromObject(deps[i]), &cur) == nil && cur.Status.ReadyReplicas >= *deps[i].Spec.Replicas
	})
}

// waitAll polls every interval until ok holds for each of the n items, at
// most for d; after that it says what (not) and goes on.
func (r *runner) waitAll(not string, d, interval time.Duration, n int, ok func(i int) bool) {
	deadline := time.Now().Add(d)     // edge: a real cluster, waited for on the wall clock
	for time.Now().Before(deadline) { // edge: a real cluster, waited for on the wall clock
		done := true
		for i := range n {
			if !ok(i) {
				done = false
				break
			}
		}
		if done {
			return
		}
		time.Sleep(interval) // edge: polling
	}
	fmt.Fprintf(r.opts.Progress, "%s after %s; going on\n", not, d)
}

// drain applies the watch events that are waiting.
func (r *runner) drain() {
	for {
		select {
		case ev := <-r.events:
			r.apply(ev)
		default:
			return
		}
	}
}

// apiLine writes one line to Options.APITrace, if set.
func (r *runner) apiLine(kind, object string, details map[string]any) {
	w := r.opts.APITrace
	if w == nil {
		return
	}
	if details == nil {
		details = map[string]any{}
	}
	now := time.Now().UTC()            // edge: the trace's time is the wall clock
	json.NewEncoder(w).Encode(struct { //nolint:errcheck // best effort, as Trace
		T       time.Time      `json:"t"`
		Kind    string         `json:"kind"`
		Object  string         `json:"object"`
		Details map[string]any `json:"details"`
	}{now, kind, object, details})
}

func (r *runner) apply(ev apiserver.Event) {
	if n, ok := ev.Object.(*corev1.Node); ok {
		if ev.Type == apiserver.Deleted {
			delete(r.nodes, n.Name)
		} else {
			r.nodes[n.Name] = n.Labels[GroupLabel]
		}
	}
	r.obs.Apply(ev)
	if t := r.ctrlProxy.LastFailed(); t.After(r.ctrlFailedSeen) {
		// The checker's repair exemption restarts its reaction bound at
		// the controller's last request failed on purpose, as in the twin.
		r.ctrlFailedSeen = t
		r.chk.ControllerRequestFailed(t, "")
		// And per node, for the cleanup of a node the API server refused
		// the controller's requests for (Checker.cleanupRefused). Sorted:
		// the checker keeps the latest per node either way.
		on := r.ctrlProxy.FailedOn()
		for _, node := range slices.Sorted(maps.Keys(on)) {
			r.chk.ControllerRequestFailed(on[node], node)
		}
	}
	// Karpenter's decisions, as the twin's fake Karpenter traces them; in
	// the API trace too, where sim/fidelity reads them.
	for _, rec := range r.kd.Observe(ev) {
		r.emit(rec.Kind, rec.Object, rec.Details)
		r.chk.KarpenterTrace(rec.Kind, rec.Object, rec.Details, time.Now()) // edge: the checker's time is the wall clock
		r.apiLine(rec.Kind, rec.Object, rec.Details)
	}
	r.chk.Check(time.Now()) // edge: the checker's time is the wall clock
	if r.opts.APITrace != nil {
		twin.APILines(ev, r.apiLine)
	}
	if r.trace != nil {
		r.trace.Encode(map[string]any{"at": time.Since(r.start).Round(time.Millisecond).String(), "watch": string(ev.Type), //nolint:errcheck // edge: the trace is timed by the wall clock; best effort
			"object": kindOf(ev.Object) + "/" + ev.Object.GetName(), "rv": ev.Object.GetResourceVersion()})
	}
}

func kindOf(o client.Object) string {
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u.GetKind()
	}
	switch o.(type) {
	case *corev1.Node:
		return "Node"
	case *corev1.Pod:
		return "Pod"
	case *policyv1.PodDisruptionBudget:
		return "PodDisruptionBudget"
	case *v1alpha1.BootcNode:
		return "BootcNode"
	case *v1alpha1.BootcNodePool:
		return "BootcNodePool"
	case *v1alpha1.PinnedImageSet:
		return "PinnedImageSet"
	}
	return fmt.Sprintf("%T", o)
}

func (r *runner) emit(kind, object string, details map[string]any) {
	if r.trace == nil {
		return
	}
	m := map[string]any{"at": time.Since(r.start).Round(time.Millisecond).String(), "kind": kind} // edge: the trace is timed by the wall clock
	if object != "" {
		m["object"] = object
	}
	for k, v := range details {
		m[k] = v
	}
	r.trace.Encode(m) //nolint:errcheck // best effort
}

// startProcs starts the controller (unless external) and the host-mode
// daemon, each behind its proxy.
func (r *runner) startProcs() error {
	dir := r.opts.WorkDir
	ck := filepath.Join(dir, "controller.kubeconfig")
	dk := filepath.Join(dir, "daemon.kubeconfig")
	if err := r.ctrlProxy.WriteKubeconfig(ck); err != nil {
		return err
	}
	if err := r.daemonProxy.WriteKubeconfig(dk); err != nil {
		return err
	}
	if !r.opts.ExternalController {
		r.ctrl = &proc{name: "controller", bin: r.opts.ControllerBin, args: ControllerCommand(ck), log: filepath.Join(dir, "controller.log"), exits: r.exits}
		if err := r.ctrl.start(); err != nil {
			return err
		}
		fmt.Fprintf(r.opts.Progress, "controller started (log %s)\n", r.ctrl.log)
	}
	if r.opts.ExternalDaemon {
		r.daemonOK = true
		fmt.Fprintf(r.opts.Progress, "daemon: the one deployed in the cluster\n")
		return nil
	}
	bin := r.opts.BootrollBin
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	ok, why := daemonAvailable(bin)
	if !ok {
		r.notices = append(r.notices, Notice{Name: "daemon", Why: why + "; no node stages or reboots"})
		return nil
	}
	file, err := r.scenarioFile()
	if err != nil {
		return err
	}
	r.daemon = &proc{name: "daemon", bin: bin, args: DaemonCommand(file, dk), log: filepath.Join(dir, "daemon.log"), exits: r.exits}
	if err := r.daemon.start(); err != nil {
		return err
	}
	r.daemonOK = true
	fmt.Fprintf(r.opts.Progress, "host-mode daemon started (log %s)\n", r.daemon.log)
	return nil
}

// scenarioFile is the scenario file for the daemon: the file itself, or
// with the run's --set overrides applied, written to the work directory.
func (r *runner) scenarioFile() (string, error) {
	if len(r.opts.Sets) == 0 {
		return filepath.Abs(r.sc.File)
	}
	data, err := os.ReadFile(r.sc.File)
	if err != nil {
		return "", err
	}
	out, err := scenario.ApplySets(r.sc.File, data, r.opts.Sets)
	if err != nil {
		return "", err
	}
	path := filepath.Join(r.opts.WorkDir, "scenario.yaml")
	return path, os.WriteFile(path, out, 0o644)
}

func (r *runner) stopProcs() {
	if r.daemon != nil {
		r.daemon.stop(5 * time.Second)
	}
	if r.ctrl != nil {
		r.ctrl.stop(5 * time.Second)
	}
}

func (r *runner) controllerUp() bool {
	return r.opts.ExternalController || r.ctrl != nil && r.ctrl.running()
}

// at schedules fn at t.
func (r *runner) at(t time.Time, fn func()) {
	r.pend = append(r.pend, pending{t, fn})
	sort.SliceStable(r.pend, func(i, j int) bool { return r.pend[i].at.Before(r.pend[j].at) })
}

// loop drives the steps on the wall clock, applies the watch events and
// checks convergence until the run settles or reaches the limit.
func (r *runner) loop(steps []Step) (*Result, error) {
	limit := r.start.Add(r.sc.Limit)
	for _, s := range steps {
		if s.Skip != "" {
			continue
		}
		s := s
		r.at(r.start.Add(s.At), func() { r.step(s) })
	}
	tick := time.NewTicker(time.Second) // edge: the run's periodic checks
	defer tick.Stop()
	for {
		now := time.Now() // edge: the run loop plays the scenario on the wall clock
		for len(r.pend) > 0 && !r.pend[0].at.After(now) {
			p := r.pend[0]
			r.pend = r.pend[1:]
			p.fn()
		}
		if !now.Before(limit) || r.settled(now) {
			break
		}
		wait := limit.Sub(now)
		if len(r.pend) > 0 {
			wait = min(wait, r.pend[0].at.Sub(now))
		}
		timer := time.NewTimer(wait) // edge: the run loop sleeps until the next step on the wall clock
		select {
		case ev := <-r.events:
			r.apply(ev)
		case c := <-r.ctrlProxy.Crashes():
			r.crashController(c)
		case name := <-r.exits:
			r.notices = append(r.notices, Notice{Name: name, Why: fmt.Sprintf("the %s exited by itself at %s (see its log); started again", name, time.Since(r.start).Round(time.Second))}) // edge: a notice timed by the wall clock
			r.restart(name)
		case <-tick.C:
			r.chk.Check(time.Now()) // edge: the checker's time is the wall clock
		case <-timer.C:
		case <-r.ctx.Done():
			timer.Stop()
			return nil, r.ctx.Err()
		}
		timer.Stop()
	}
	r.drain()
	return r.finish(), nil
}

// downController kills the controller (SIGKILL, as a crash) and starts
// a new one down later, unless a later restart is already due (then
// that one stands); label names the fault in notices.
func (r *runner) downController(label string, now time.Time, down time.Duration) {
	r.ctrl.kill()
	r.chk.ControllerRunning(false)
	r.ctrlDownUntil = maxTime(r.ctrlDownUntil, now.Add(down))
	r.at(r.ctrlDownUntil, func() {
		if r.ctrl.running() || time.Now().Before(r.ctrlDownUntil) { // edge: process restarts are timed on the wall clock
			return
		}
		if err := r.ctrl.start(); err != nil {
			r.notices = append(r.notices, Notice{Name: label, Why: "restart failed: " + err.Error()})
			return
		}
		r.ctrlProxy.Revive()
		r.chk.ControllerRunning(true)
	})
}

// crashController carries out a controllerCrash the controller's API
// proxy reports: the process is killed right away (the proxy refuses its
// requests meanwhile) and starts again after the fault's downFor.
func (r *runner) crashController(c Crash) {
	now := time.Now() // edge: the run loop plays the scenario on the wall clock
	r.emit("fault.controllerCrash", "", map[string]any{"fault": c.Fault, "afterVerb": c.Verb, "object": c.Object, "downFor": c.DownFor.String()})
	r.downController(c.Fault, now, c.DownFor)
}

// restart starts a process that died by itself again.
func (r *runner) restart(name string) {
	p := r.ctrl
	if name == "daemon" {
		p = r.daemon
	}
	if p == nil {
		return
	}
	p.killed = true
	if err := p.start(); err != nil {
		r.notices = append(r.notices, Notice{Name: name, Why: "could not start again: " + err.Error()})
	}
}

// settled reports whether the run can stop: converged as the twin judges
// it, for Settle, with nothing the checker waits for pending.
func (r *runner) settled(now time.Time) bool {
	converged := r.w.AllConverged() && now.Sub(r.start) >= r.quietAfter && r.controllerUp() && r.w.InSlot() == 0 && r.chk.PinnedSettled()
	if !converged {
		r.convergedSince = time.Time{}
		return false
	}
	if r.convergedSince.IsZero() {
		r.convergedSince = now
		r.emit("run.converged", "", nil)
	}
	return now.Sub(r.convergedSince) >= r.opts.Settle && !r.chk.QuietUntil().After(now)
}

// step carries out one event or fault.
func (r *runner) step(s Step) {
	r.emit("step."+s.Name, "", map[string]any{"at": s.At.String()})
	if s.Event != nil {
		if err := r.act.Do(r.ctx, s.Event); err != nil {
			var sk errSkip
			if errors.As(err, &sk) {
				r.emit("step.skipped", "", map[string]any{"name": s.Name, "reason": sk.why})
				return
			}
			r.notices = append(r.notices, Notice{Name: s.Label(), Why: "failed: " + err.Error()})
		}
		return
	}
	if s.Chaos {
		r.injectChaos(s)
		return
	}
	f := s.Fault
	now := time.Now() // edge: the run loop plays the scenario on the wall clock
	switch {
	case f.ControllerRestart != nil:
		r.downController(s.Label(), now, f.ControllerRestart.DownFor)
	case f.ControllerCrash != nil:
		// The controller's API proxy crashes it (Proxy.ArmCrash); the
		// loop takes the crash (crashController).
		r.ctrlProxy.ArmCrash(s.Label(), *f.ControllerCrash)
		r.at(r.start.Add(s.Until), func() { r.ctrlProxy.DisarmCrash(s.Label()) })
	case f.DaemonCrash != nil:
		// Played by the host-mode daemon itself, node by node, from the
		// scenario file (sim/hostmode planFaults): killing its process
		// would restart every node's daemon and lose the hosts' reboots
		// in flight.
	case f.NodeCrash != nil, f.PowerCycle != nil:
		t := f.NodeCrash
		var target scenario.Target
		down := time.Duration(0)
		if t != nil {
			target, down = t.Target, t.DownFor
		} else {
			target, down = f.PowerCycle.Target, f.PowerCycle.OffFor
		}
		if target.Node != "" {
			target.Node = r.act.nodeName(r.ctx, target.Node)
		}
		for _, node := range Targets(target, r.nodes, r.rng) {
			r.crashed[node] = true
			if err := r.act.annotateRebooting(r.ctx, node, true); err != nil {
				delete(r.crashed, node)
				r.emit("step.skipped", "Node/"+node, map[string]any{"reason": err.Error()})
				continue
			}
			r.at(now.Add(down), func() {
				r.act.annotateRebooting(r.ctx, node, false)                             //nolint:errcheck // the node may be gone
				r.at(time.Now().Add(5*time.Second), func() { delete(r.crashed, node) }) // edge: the run loop plays the scenario on the wall clock
			})
		}
	case f.APIErrors != nil:
		e := f.APIErrors
		for _, p := range []*Proxy{r.ctrlProxy, r.daemonProxy} {
			p.SetFault(e)
			r.at(r.start.Add(s.Until), func() { p.SetFault(nil) })
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// finish runs the end-of-run checks and builds the result.
func (r *runner) finish() *Result {
	now := time.Now() // edge: the run loop plays the scenario on the wall clock
	out := invariant.Outcome{End: now.Sub(r.start)}
	if !r.convergedSince.IsZero() {
		out.Converged, out.ConvergedAt = true, r.convergedSince.Sub(r.start)
	}
	r.chk.Check(now)
	r.chk.Finish(out)
	res := &twin.Result{
		Scenario: r.sc.Name, File: r.sc.File, Seed: r.opts.Seed, Start: r.start,
		End: out.End, Limit: r.sc.Limit, Converged: out.Converged, ConvergedAt: out.ConvergedAt,
		Violations: r.chk.Violations(), Exceptions: r.chk.Exceptions(), Counts: map[string]int{},
		Reboots: r.obs.Reboots, Phases: v1alpha1.AllPhases,
	}
	for _, v := range res.Violations {
		res.Counts[v.Invariant] = r.chk.Count(v.Invariant)
		r.emit("violation", "", map[string]any{"invariant": v.Invariant, "message": v.Message, "objects": v.Objects})
	}
	res.Pools = twin.PoolResults(r.w)
	cs, cf := r.ctrlProxy.Counts()
	ds, df := r.daemonProxy.Counts()
	r.emit("run.end", "", map[string]any{"converged": out.Converged, "reboots": r.obs.Reboots,
		"controllerRequests": cs, "controllerFailedOnPurpose": cf, "daemonRequests": ds, "daemonFailedOnPurpose": df})
	return &Result{Result: res, Notices: r.notices, Dir: r.opts.WorkDir}
}
