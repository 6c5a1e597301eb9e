// Package twin runs a scenario in the digital twin: it wires the engine,
// the simulated API server, the cluster model, the real reconcilers of
// controller/ and the real node daemon of nodedaemon/ the way the binaries
// wire them, drives the scenario's events and faults, checks the
// invariants after every engine event and returns what happened.
//
// A run is single-threaded and reads time and randomness only from the
// engine, so the same scenario and seed give a byte-identical trace.
//
// The watches are controller.Setup's, built from its exported mapping
// functions and controller-runtime's own handlers and predicates (see
// controllerWatches).
//
// Each controller process (the pool, node and PinnedImageSet reconcilers
// share one manager cache, as in production) and each daemon process reads
// through its own informer cache (sim/informer, wired in cache.go): watch
// events reach a cache after a delay drawn from the run's PRNG, in order
// per kind; a process's own writes show in its cache only when their event
// arrives; the watch handlers run then, not at write time; APIReader reads
// the store. A restart makes a new cache filled by a list. A reconcile
// occupies its worker for a drawn run time plus the latency of each API
// request it made. The profile (scenario field profile, Options.Profile)
// sets the delays: default (milliseconds), stale (a fifth of the events
// take seconds to tens of seconds) or instant (no caches, no durations:
// the twin before issue 11). API faults, watch faults and crashes after a
// write are drawn per request in cache.go.
//
// Known differences from a manager, kept on purpose:
//   - a reconcile runs to completion at one instant: its writes change the
//     store at the virtual time it starts, so an uncached read (APIReader,
//     the twin's own models) sees them at once. Their watch events leave
//     for the caches only once the latency of the reconcile's requests up
//     to and including the write has passed, so the caches see the writes
//     of one reconcile land at different times, and its duration keeps
//     its worker busy. Suspending a reconcile between two requests would
//     need a goroutine per reconcile, which the single-threaded engine
//     avoids;
//   - a re-list hands the handlers an update only for objects whose
//     resourceVersion changed (client-go's Replace hands over every
//     object, changed or not);
//   - objects of kinds the cache does not hold are read from the store
//     (a manager would start an informer for them on first use);
//   - a controller restart drops both queues and builds new reconcilers
//     with the same constructors; the daemons keep running.
package twin

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/fakekarpenter"
	"github.com/bootroll/bootroll/sim/invariant"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Options change how a scenario runs.
type Options struct {
	// Seed seeds the run's PRNG; 0 means the scenario's seed.
	Seed uint64
	// Trace receives the JSONL trace; nil writes none.
	Trace io.Writer
	// Profile overrides the scenario's profile (default, stale, instant)
	// when not empty.
	Profile string
	// Bench samples the Go heap every BenchSampleEvery events into
	// Result.PeakHeap. The sampling reads no simulated state and changes
	// nothing in the run.
	Bench bool
}

// GCPercent is the GOGC that bootroll scenario runs use unless GOGC is set
// in the environment: a twin run allocates fast and keeps little, so
// collecting less often trades heap for speed (bench-1000 when it was set:
// 7.2 s -> 6.0 s wall, peak heap 80 -> 192 MiB). It was 400 until issue
// 11's last measurements: on these 2-core VMs a page first touched costs
// more than a collection on the second core, and 200 was faster in wall
// time than 400 (bench-1000 1.73-1.84 s against 1.96-2.10 s, sys 0.3 s
// against 0.4 s; bench-10000 19.0-19.3 s, peak heap 1.3 GiB against 2.1
// GiB; 150 about the same as 200; see docs/twin-performance.md).
const GCPercent = 200

// SetGCPercent sets GCPercent as the process's GOGC unless GOGC is set in
// the environment. It returns the GOGC in force and what restores the
// previous setting.
func SetGCPercent() (gogc string, restore func()) {
	if v := os.Getenv("GOGC"); v != "" {
		return v, func() {}
	}
	prev := debug.SetGCPercent(GCPercent)
	return strconv.Itoa(GCPercent), func() { debug.SetGCPercent(prev) }
}

// BenchSampleEvery is how many engine events pass between heap samples
// of a bench run.
const BenchSampleEvery = 4096

// Settle is how long a converged run goes on before it stops, so that
// what follows convergence (a late flap, a leaked cordon) is seen. A run
// also goes on until the checker's pending deadlines are due
// (invariant.Checker.QuietUntil: every post-update protection deadline
// plus Karpenter's reaction time, cleanup and stranded-node bounds).
const Settle = time.Minute

// SecretNamespace is the controller's namespace in the twin.
const SecretNamespace = "bootroll-system"

// Result is what one run did.
type Result struct {
	// Scenario is the scenario's name, File the file it came from.
	Scenario string
	File     string
	Seed     uint64
	Start    time.Time
	// End is the virtual time since Start when the run stopped; Limit is
	// the scenario's limit.
	End   time.Duration
	Limit time.Duration
	// Events is how many engine events ran.
	Events uint64
	// Converged reports whether every pool was UpToDate or Halted with a
	// reason when the run stopped; ConvergedAt is since when.
	Converged   bool
	ConvergedAt time.Duration
	// Violations are the failed invariants and expectations, in the
	// order they happened; Counts counts them per name, including those
	// past the recording bound.
	Violations []invariant.Violation
	Counts     map[string]int
	// Exceptions are the documented exceptions of the invariants seen
	// (a forceful Karpenter expiry of a node in a slot); not violations.
	Exceptions []invariant.Violation
	// Pools are the pools at the end, sorted by name.
	Pools []PoolResult
	// FirstSlot is when the first node entered a reboot slot
	// (HasFirstSlot false: none did); LastUpdate when the last node
	// finished its update.
	HasFirstSlot bool
	FirstSlot    time.Duration
	LastUpdate   time.Duration
	// NodeUpdates are the durations from slot grant to Updated of every
	// node update, sorted.
	NodeUpdates []time.Duration
	// Timeline samples the cluster at phase, readiness and cordon changes.
	Timeline []Sample
	// Phases names the columns of Sample.Phases.
	Phases []v1alpha1.NodePhase
	// Reconciles counts reconciles per queue: by controller name (controller.Controllers) and "daemon".
	Reconciles map[string]uint64
	// Enqueued counts the requests each controller watch handed its
	// queue ("<controller>/<kind>"), before the queue's dedup.
	Enqueued map[string]uint64
	// Requests counts the API requests of the controller and daemons.
	Requests []apiserver.VerbCount
	// Recorded counts the controller's Kubernetes events by type/reason.
	Recorded map[string]int
	// Writes counts the successful writes each kind of process made
	// ("controller" or "daemon", then "verb Kind", e.g. "patch/status
	// BootcNode"), as the API server served them through the process's
	// gate; empty under the instant profile, which has no gates.
	Writes map[string]map[string]uint64
	// Reboots is the number of reboots of all nodes.
	Reboots int
	// PeakHeap is the largest heap seen in a bench run, in bytes.
	PeakHeap uint64
	// Gauges are the capacity and pending-pod measurements of the run
	// (bootroll whatif).
	Gauges Gauges
	// EvictionsRefused counts the evictions PodDisruptionBudgets refused
	// (anyone's).
	EvictionsRefused uint64
	// PDBBlockedDrain is the node-time drains spent blocked by
	// PodDisruptionBudgets (cluster.PDBBlockedDrain).
	PDBBlockedDrain time.Duration
	// Karpenter is what the fake Karpenter did; nil without Karpenter.
	Karpenter *fakekarpenter.Stats
	// Markers are the scenario's timed events, in their order: when and
	// what (the action's name, e.g. setPoolImage, and its pool or node).
	Markers []Marker
}

// Gauges are read after every engine event from the first reboot slot to
// the end of the run (before the first slot the cluster is still placing
// its workloads): each value holds from one event to the next, so the
// areas are exact integrals over virtual time. Window is zero when no
// node ever got a slot.
type Gauges struct {
	Window time.Duration
	// Schedulable CPU in millicores: the lowest and highest seen, and its
	// integral in millicore-seconds.
	MinSchedulableCPU, MaxSchedulableCPU int64
	SchedulableCPUArea                   float64
	// Schedulable memory in bytes: the same, in byte-seconds.
	MinSchedulableMem, MaxSchedulableMem int64
	SchedulableMemArea                   float64
	// PeakInSlot is the most nodes unavailable because of bootroll at once.
	PeakInSlot int
	// Workload pods not bound to a node: the most at once, and the
	// integral in pod-seconds.
	PeakPending int
	PendingArea float64
}

// gauge is the running state of Result.Gauges.
type gauge struct {
	Gauges
	// seen says a reading was taken; last is its time in Unix
	// nanoseconds. Virtual times lie well inside the years int64 Unix
	// nanoseconds cover (1678-2262), so differences of them are what
	// Time.Sub gives, without its overflow check, which was a good part
	// of observe's cost.
	seen     bool
	last     int64
	cpu, mem int64
	pending  int
}

// observe reads the gauges after an event at now.
func (g *gauge) observe(now time.Time, cpu, mem int64, pending, inSlot int) {
	t := now.UnixNano()
	if !g.seen {
		g.seen = true
		g.MinSchedulableCPU, g.MaxSchedulableCPU = cpu, cpu
		g.MinSchedulableMem, g.MaxSchedulableMem = mem, mem
	} else if t > g.last { // (many events share an instant)
		dt := time.Duration(t - g.last)
		secs := dt.Seconds()
		g.SchedulableCPUArea += float64(g.cpu) * secs
		g.SchedulableMemArea += float64(g.mem) * secs
		g.PendingArea += float64(g.pending) * secs
		g.Window += dt
	}
	g.last, g.cpu, g.mem, g.pending = t, cpu, mem, pending
	g.MinSchedulableCPU = min(g.MinSchedulableCPU, cpu)
	g.MaxSchedulableCPU = max(g.MaxSchedulableCPU, cpu)
	g.MinSchedulableMem = min(g.MinSchedulableMem, mem)
	g.MaxSchedulableMem = max(g.MaxSchedulableMem, mem)
	g.PeakPending = max(g.PeakPending, pending)
	g.PeakInSlot = max(g.PeakInSlot, inSlot)
}

// PoolResult is a pool at the end of a run.
type PoolResult struct {
	Name         string
	Nodes        int
	Updated      int
	Failed       int
	Phases       map[v1alpha1.NodePhase]int
	UpToDate     bool
	Halted       bool
	HaltedReason string
	Summary      string
	TargetImage  string
}

// Sample is the cluster at one moment of the timeline.
type Sample struct {
	At time.Duration
	// Phases counts BootcNodes per phase, in Result.Phases order.
	Phases []int
	// InSlot counts nodes unavailable because of bootroll.
	InSlot int
	// SchedulableCPU (millicores) and SchedulableNodes are the capacity
	// pods can be scheduled on.
	SchedulableCPU   int64
	SchedulableNodes int
	// SchedulableMem is the allocatable memory (bytes) of those nodes.
	SchedulableMem int64
	// DemandCPU (millicores) and DemandMem (bytes) are what the workload
	// pods not terminating request, bound or pending.
	DemandCPU, DemandMem int64
	// Pending counts workload pods not bound to a node.
	Pending int
	// EvictionsRefused counts, so far, the evictions PodDisruptionBudgets
	// refused (anyone's).
	EvictionsRefused uint64
	// KarpenterLaunched and KarpenterTerminated count, so far, the
	// NodeClaims the fake Karpenter launched and the nodes whose
	// termination it finished.
	KarpenterLaunched, KarpenterTerminated int
	// Pools are the live pools, sorted by name.
	Pools []PoolSample
}

// Marker is a moment of the run worth a line on a timeline.
type Marker struct {
	At   time.Duration
	What string
}

// markers names the scenario's timed events: the action's YAML key and,
// when it has one, the pool or node it acts on.
func markers(evs []scenario.Event) []Marker {
	out := make([]Marker, 0, len(evs))
	for i := range evs {
		what, v := evs[i].Action()
		if what == "" {
			what = "event"
		}
		if rv := reflect.Indirect(reflect.ValueOf(v)); rv.Kind() == reflect.Struct {
			for _, f := range []string{"Pool", "Node", "Name"} {
				if fv := rv.FieldByName(f); fv.Kind() == reflect.String && fv.String() != "" {
					what += " " + fv.String()
					break
				}
			}
		}
		out = append(out, Marker{At: evs[i].At, What: what})
	}
	return out
}

// PoolSample is one pool at one moment of the timeline.
type PoolSample struct {
	Name string
	// Unavailable counts the pool's member nodes unavailable because of
	// bootroll; MaxUnavailable is its bound (spec.rollout.maxUnavailable
	// of its current members), -1 when the spec's value is invalid.
	Unavailable, MaxUnavailable int
	Halted                      bool
}

// Passed reports whether every invariant and expectation held.
func (r *Result) Passed() bool { return len(r.Violations) == 0 }

// Caught reports whether the invariant or expectation name was violated.
func (r *Result) Caught(name string) bool { return r.Counts[name] > 0 }

// FirstAt is the time of the first violation of invariant name, or 0.
func (r *Result) FirstAt(name string) time.Duration {
	for _, v := range r.Violations {
		if v.Invariant == name {
			return v.At
		}
	}
	return 0
}

// runner is one run's wiring.
type runner struct {
	sc   *scenario.Scenario
	opts Options
	eng  *engine.Engine
	api  *apiserver.Server
	cl   *cluster.Cluster
	chk  *invariant.Checker
	w    *invariant.World
	tr   *tracer
	rec  *recorder
	// ctx carries a discarding logger into every reconcile, as the
	// manager's context carries its logger.
	ctx context.Context

	ctrlOpts options.Options
	// profile is the run's cache profile and timing its delays
	// (timings[profile], looked up once: a reconcile and each of its
	// requests draw from it); ctrl is the running controller
	// process's cache and client (nil under the instant profile or while
	// no controller runs); apiFaults are the span faults of cache.go.
	profile   string
	timing    timing
	ctrl      *proc
	apiFaults []*apiFault
	// landsAfter is how long after now the write being served reaches
	// the server: the latency of its reconcile's requests so far
	// (cache.go); its watch events leave for the caches then.
	landsAfter time.Duration
	// ctrls are the controller's controllers (controller.Controllers),
	// watches their watches, and queues their work queues by name while
	// the controller runs.
	ctrls        []controller.Controller
	queues       map[string]*engine.Queue
	watches      watchSet
	controllerUp bool
	// ctrlInitialList is set while a new controller process's initial
	// lists reach its watches (event.CreateEvent's IsInInitialList).
	ctrlInitialList bool
	daemons         map[string]*daemonProc
	// skew is each node's clock offset (clockSkew faults); its daemon
	// reads nodeClock when the scenario has any.
	skew map[string]time.Duration
	kp   *karpenterRun // karpenter.go; nil without a karpenter section
	act  actionState   // actions.go

	reconciles map[string]uint64
	// writes counts served writes per process kind, verb and object
	// type (countWrite; Result.Writes).
	writes map[writeKey]uint64
	// quietAfter is the virtual time after which no scenario event or
	// fault is still to come or still in effect.
	quietAfter time.Time

	convergedSince time.Time
	settle         *engine.Handle
	violationsSeen int

	slotStart    map[string]time.Time
	firstSlot    time.Time
	lastUpdate   time.Time
	nodeUpdates  []time.Duration
	timeline     []Sample
	sampleDirty  bool
	sampleSpace  time.Duration
	peakHeap     uint64
	eventCounter uint64
	gauge        gauge

	err error
}

// runScheme is the scheme of every run (client-go's types and bootroll's),
// built once per process: a scheme is only read once built, and building
// it cost about 7 million instructions a run.
var runScheme = sync.OnceValues(func() (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("building the scheme: %w", err)
	}
	return scheme, nil
})

// Run runs the scenario and returns what happened. An error means the run
// could not be made (a setting the twin does not support, a failure of
// the model); violated invariants are in the Result.
func Run(sc *scenario.Scenario, opts Options) (*Result, error) {
	seed := opts.Seed
	if seed == 0 {
		seed = sc.Seed
	}
	to := testOnly(sc.Bootroll.TestOnly)
	prof, err := profile(sc, opts)
	if err != nil {
		return nil, err
	}
	eng := engine.New(sc.Start, seed)
	scheme, err := runScheme()
	if err != nil {
		return nil, err
	}
	api := apiserver.New(scheme, eng.Clock())
	ctx := logf.IntoContext(context.Background(), logr.Discard())
	for _, ix := range index.All() {
		if err := api.IndexField(ctx, ix.Object, ix.Field, ix.Extract); err != nil {
			return nil, fmt.Errorf("registering index %s: %w", ix.Field, err)
		}
	}
	r := &runner{
		sc: sc, opts: opts, eng: eng, api: api, ctx: ctx, profile: prof, timing: timings[prof],
		tr:          newTracer(opts.Trace, eng),
		daemons:     map[string]*daemonProc{},
		reconciles:  map[string]uint64{},
		slotStart:   map[string]time.Time{},
		sampleSpace: max(time.Second, sc.Limit/3000),
	}
	if slices.ContainsFunc(sc.Faults, func(f scenario.Fault) bool { return f.ClockSkew != nil }) {
		r.skew = map[string]time.Duration{}
	}
	r.rec = &recorder{t: r.tr, counts: map[string]int{}}
	r.ctrlOpts = options.Options{
		Clock:           eng.Clock(),
		Resolver:        newRegistry(sc),
		Recorder:        r.rec,
		Metrics:         options.NewMetrics(nil),
		SecretNamespace: SecretNamespace,
		Feed:            poolfeed.New(),
		TestOnly:        to,
	}
	var cl *cluster.Cluster
	chk, err := invariant.New(sc, invariant.Sources{
		Now:    eng.Now,
		Booted: func(node string) string { return cl.Booted(node) },
		PDBs:   func() []facts.PDBState { return cl.PDBStatus() },
		// Pod deletes count too: a drain that deletes instead of evicting
		// (testOnly.deleteInsteadOfEvict) must be blamed as well.
		PodRemovals:      api.PodRemovals,
		EvictionsRefused: func() uint64 { return cl.EvictionsRefused() },
	}, eng.Now())
	if err != nil {
		return nil, err
	}
	r.chk, r.w = chk, chk.World()
	r.w.OnPhase = r.onPhase

	// Subscribers, in this order: the invariants' view, the trace, the
	// watches that enqueue reconciles.
	api.Subscribe(chk.Observe)
	if r.tr != nil {
		api.Subscribe(r.tr.traceWrite)
	}
	api.Subscribe(r.dispatch)
	r.ctrls = controller.Controllers(cacheReader{r}, r.ctrlOpts.Feed)
	r.watches = newWatchSet(controllerWatches(r.ctrls, func(name string) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return queueRef{func() *engine.Queue { return r.queues[name] }}
	}))

	if err := r.setupKarpenter(); err != nil {
		return nil, fmt.Errorf("serving Karpenter's kinds: %w", err)
	}
	hooks := cluster.Hooks{
		DaemonRestarted: r.daemonStarted,
		DaemonDown:      r.daemonDown,
		HostChanged:     r.hostChanged,
		Reboot:          chk.Reboot,
	}
	if r.tr != nil {
		hooks.Trace = r.tr.emit
	}
	cl, err = cluster.New(eng, api, sc, hooks)
	if err != nil {
		return nil, fmt.Errorf("building the cluster model: %w", err)
	}
	r.cl = cl
	if r.skew != nil {
		cl.SetNodeClocks(func(node string) time.Duration { return r.skew[node] })
	}
	if err := cl.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the cluster model: %w", err)
	}
	for _, p := range sc.Bootroll.Pools {
		pool := &v1alpha1.BootcNodePool{Spec: sc.PoolSpec(p)}
		pool.Name = p.Name
		if err := api.AdminClient().Create(ctx, pool); err != nil {
			return nil, fmt.Errorf("creating pool %s: %w", p.Name, err)
		}
	}
	r.startController()
	r.schedule()
	if err := r.setupPinned(); err != nil {
		return nil, err
	}
	r.startKarpenter()
	eng.OnEvent(r.afterEvent)
	// Convergence is judged after events; one when the last fault ends
	// makes sure it is judged then even in a world where nothing else
	// happens any more (a pool deleted for good, say).
	eng.At(r.quietAfter, "twin/quiet", func() {})
	eng.RunUntil(sc.Start.Add(sc.Limit))
	if r.err != nil {
		return nil, r.err
	}
	return r.finish()
}

// testOnly maps the scenario's deliberately broken controller settings to
// rollout.TestOnly, one field each: every setting the schema publishes
// works. The daemons' settings (noStagingReserve, forgetLastReboot) are
// applied by configureDaemon.
func testOnly(t scenario.TestOnly) rollout.TestOnly {
	return rollout.TestOnly{
		IgnoreSlotLimit:         t.IgnoreSlotLimit,
		SkipUncordon:            t.SkipUncordon,
		DeleteInsteadOfEvict:    t.DeleteInsteadOfEvict,
		SkipKarpenterProtection: t.SkipKarpenterProtection,
		KeepAnnotations:         t.KeepAnnotations,
		ForgetSlotsOnRestart:    t.ForgetSlotsOnRestart,
		NoHealthTimeout:         t.NoHealthTimeout,
		SkipHealthChecks:        t.SkipHealthChecks,
		VerifyOnCache:           t.VerifyOnCache,
		ForgetDownOnLeft:        t.ForgetDownOnLeft,
		SettleOnOrderedAt:       t.SettleOnOrderedAt,
		FreeSlotBeforeVerify:    t.FreeSlotBeforeVerify,
		KeepBootOrder:           t.KeepBootOrder,
		CountSlotsFromCache:     t.CountSlotsFromCache,
		ForgetPriorCordon:       t.ForgetPriorCordon,
		HaltFromLiveRecords:     t.HaltFromLiveRecords,
		SkipCleanupOnDelete:     t.SkipCleanupOnDelete,
		DropAnnotationOwnership: t.DropAnnotationOwnership,
		IgnoreWindows:           t.IgnoreWindows,
	}
}

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
}

// withLogger runs a reconciler with the run's context, so that the
// controller's logf.FromContext finds a discarding logger.
func (r *runner) withLogger(rec reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
		return rec.Reconcile(r.ctx, req)
	})
}

// startController starts a controller process: new reconcilers built by
// the controller's constructors, empty queues, and the informers' initial
// list delivered as create events. A controller still running is stopped
// first: there is one controller process at a time.
func (r *runner) startController() {
	if r.controllerUp {
		r.stopController()
	}
	// A new process knows nothing: its feed fills from the initial lists
	// delivered below.
	r.ctrlOpts.Feed.Reset()
	if r.profile == ProfileInstant {
		r.startInstantController()
		return
	}
	p, err := r.newProc("controller", "", controllerKinds(), nil, r.dispatchController)
	if err != nil {
		r.fail(fmt.Errorf("controller start: %w", err))
		return
	}
	r.ctrl = p
	opts := r.ctrlOpts
	opts.APIReader = p.api
	qo := engine.QueueOptions{Duration: func() time.Duration { return p.duration(r) }}
	r.startQueues(p.client, opts, qo)
	r.controllerUp = true
	r.controllerRunning(true)
	r.tr.emit("controller.start", "", map[string]any{"profile": r.profile})
	// The manager starts its workers once the caches have synced: the
	// initial lists reach the handlers first, as initial-list events
	// (queued at controller-runtime's LowPriority).
	r.ctrlInitialList = true
	err = p.cache.Sync()
	r.ctrlInitialList = false
	if err != nil {
		r.fail(fmt.Errorf("controller start: %w", err))
	}
}

// startQueues builds a work queue for each controller, its reconciler
// built by the controller's own constructor on client c.
func (r *runner) startQueues(c client.Client, opts options.Options, qo engine.QueueOptions) {
	r.queues = make(map[string]*engine.Queue, len(r.ctrls))
	for _, ctl := range r.ctrls {
		q := qo
		q.MaxConcurrentReconciles = ctl.Workers
		r.queues[ctl.Name] = engine.NewQueue(r.eng, ctl.Name, r.withLogger(ctl.New(c, opts)), q)
	}
}

// startInstantController starts a controller process under the instant
// profile: the reconcilers read the store and the initial lists are
// delivered at once.
func (r *runner) startInstantController() {
	r.startQueues(r.api.Client(), r.ctrlOpts, engine.QueueOptions{})
	r.controllerUp = true
	r.controllerRunning(true)
	r.tr.emit("controller.start", "", nil)
	c := r.api.AdminClient()
	var pools v1alpha1.BootcNodePoolList
	var nodes corev1.NodeList
	var bns v1alpha1.BootcNodeList
	if err := c.List(r.ctx, &pools); err != nil {
		r.fail(fmt.Errorf("controller start: list pools: %w", err))
		return
	}
	if err := c.List(r.ctx, &nodes); err != nil {
		r.fail(fmt.Errorf("controller start: list nodes: %w", err))
		return
	}
	if err := c.List(r.ctx, &bns); err != nil {
		r.fail(fmt.Errorf("controller start: list BootcNodes: %w", err))
		return
	}
	r.ctrlInitialList = true
	defer func() { r.ctrlInitialList = false }()
	for i := range pools.Items {
		r.dispatchController(apiserver.Event{Type: apiserver.Added, Object: &pools.Items[i]})
	}
	for i := range nodes.Items {
		r.dispatchController(apiserver.Event{Type: apiserver.Added, Object: &nodes.Items[i]})
	}
	for i := range bns.Items {
		r.dispatchController(apiserver.Event{Type: apiserver.Added, Object: &bns.Items[i]})
	}
	r.listPinnedSets()
}

// controllerRunning tells the checker the controller process started or
// stopped: its time-bound checks count the time the controller runs.
func (r *runner) controllerRunning(up bool) {
	if r.chk != nil {
		r.chk.ControllerRunning(up)
	}
}

// stopController stops the controller process: its queues drop every
// pending key, and watch events are lost until the next start.
func (r *runner) stopController() {
	for _, ctl := range r.ctrls {
		if q := r.queues[ctl.Name]; q != nil {
			r.reconciles[q.Name()] += q.Stats().Reconciles
			q.ShutDown()
		}
	}
	r.queues = nil
	if r.ctrl != nil {
		r.ctrl.gate.dead = true
		r.ctrl.cache.Close()
		r.ctrl = nil
	}
	r.controllerUp = false
	r.controllerRunning(false)
	r.tr.emit("controller.stop", "", nil)
}

// dispatch routes a watch event to the controller's watches and to the
// daemon of the node it concerns.
func (r *runner) dispatch(ev apiserver.Event) {
	switch {
	case r.ctrl != nil:
		r.ctrl.cache.ObserveAfter(ev, r.landsAfter)
	case r.profile == ProfileInstant:
		r.dispatchController(ev)
	}
	switch o := ev.Object.(type) {
	case *v1alpha1.BootcNode:
		// The daemon watches its own BootcNode only, through the same
		// predicates as the daemon binary (spec changes), and caches it
		// alone.
		if d := r.daemons[o.Name]; d != nil {
			if d.proc != nil {
				d.proc.cache.ObserveAfter(ev, r.landsAfter)
			} else {
				d.deliver(r.ctx, ev)
			}
		}
	case *corev1.Node:
		switch ev.Type {
		case apiserver.Deleted:
			r.daemonDown(o.Name)
			r.sampleDirty = true
		case apiserver.Added:
			r.sampleDirty = true
		case apiserver.Modified:
			// Schedulable capacity changes with readiness and cordons.
			old := ev.Old.(*corev1.Node)
			if old.Spec.Unschedulable != o.Spec.Unschedulable || ready(old) != ready(o) {
				r.sampleDirty = true
			}
		}
	}
}

func (r *runner) dispatchController(ev apiserver.Event) {
	if !r.controllerUp {
		return
	}
	if n, ok := ev.Object.(*corev1.Node); ok && r.w != nil {
		// What reached the controller's cache, and when: the judges
		// time the controller's reactions from it.
		r.w.ControllerCacheNode(n, r.eng.Now())
	}
	r.watches.deliver(r.ctx, ev, r.ctrlInitialList)
}

// daemonStarted starts the node daemon of node: a new process, so a new
// Daemon (nothing remembered), a new cache of its own BootcNode and an
// empty queue with its BootcNode queued, as its informer's initial list
// would.
func (r *runner) daemonStarted(node string) {
	r.daemonDown(node)
	p := &daemonProc{}
	q := queueRef{func() *engine.Queue { return p.queue }}
	// The daemon binary's watches (nodedaemon.Watches): its own
	// BootcNode's spec changes, and the wake-up at the end of a stage or
	// pull (the cluster model's HostChanged hook, hostChanged).
	for _, w := range nodedaemon.Watches(node) {
		if w.Wake {
			p.wake = func() { w.Handler.Generic(r.ctx, event.GenericEvent{Object: w.Object}, q) }
			continue
		}
		typ := reflect.TypeOf(w.Object)
		p.watches = append(p.watches, watch{
			name:       "daemon/" + node + "/" + typ.Elem().Name(),
			typ:        typ,
			predicates: w.Predicates,
			handler:    w.Handler,
			queue:      q,
		})
	}
	c := r.api.Client()
	var qo engine.QueueOptions
	if r.profile != ProfileInstant {
		pr, err := r.newProc("daemon", node, []client.Object{&v1alpha1.BootcNode{}}, &client.ObjectKey{Name: node},
			func(ev apiserver.Event) { p.deliver(r.ctx, ev) })
		if err != nil {
			r.fail(fmt.Errorf("daemon %s start: %w", node, err))
			return
		}
		p.proc, c = pr, pr.client
		qo.Duration = func() time.Duration { return pr.duration(r) }
	}
	host, ok := r.cl.DaemonEdges(node)
	if !ok {
		r.fail(fmt.Errorf("daemon %s start: the cluster model has no such node", node))
		return
	}
	if p.proc != nil {
		// A crash after a write (cache.go) takes the daemon down in the
		// cluster model, whose host then refuses the rest of the
		// reconcile's actions (ErrNotRunning), as a dead process takes
		// none; a crash can also fall right after a host call
		// (daemonWriteCrash with hostCalls).
		hold := host.Hold
		host.Hold = func(a *nodedaemon.AsyncHost, pr *prefetch.Runner) (nodedaemon.Host, nodedaemon.Prefetcher) {
			h, pf := hold(a, pr)
			return steppedHost{Host: h, g: p.proc.gate}, pf
		}
	}
	d := nodedaemon.Wire(nodedaemon.Edges{
		Node:   node,
		Client: c,
		// The twin reads the daemon's Node through its client, as it did
		// before the daemon's wiring was shared.
		APIReader: c,
		Clock:     r.daemonClock(node),
		Log:       logr.Discard(),
		Host:      host,
	}, r.daemonConfig())
	p.queue = engine.NewQueue(r.eng, "daemon", d, qo)
	r.daemons[node] = p
	if p.proc != nil {
		if err := p.proc.cache.Sync(); err != nil {
			r.fail(fmt.Errorf("daemon %s start: %w", node, err))
			return
		}
	}
	p.queue.Add(request(node))
}

// steppedHost tells the daemon's gate of each successful host call, so a
// crash fault can take the process down right after one.
type steppedHost struct {
	nodedaemon.Host
	g *gate
}

func (h steppedHost) Stage(ctx context.Context, image string) error {
	return h.called("host/stage", h.Host.Stage(ctx, image))
}

func (h steppedHost) Apply(ctx context.Context, image string) error {
	return h.called("host/apply", h.Host.Apply(ctx, image))
}

func (h steppedHost) Rollback(ctx context.Context) error {
	return h.called("host/rollback", h.Host.Rollback(ctx))
}

func (h steppedHost) Reboot(ctx context.Context) error {
	return h.called("host/reboot", h.Host.Reboot(ctx))
}

// called passes a successful host call (hostCall, e.g. "host/stage") on
// to the gate.
func (h steppedHost) called(hostCall string, err error) error {
	if err == nil {
		h.g.HostCalled(hostCall)
	}
	return err
}

// daemonProc is one running daemon process: its work queue, the watches
// that feed it and its wake-up (nodedaemon.Watches), and its cache and
// client (nil under the instant profile).
type daemonProc struct {
	queue   *engine.Queue
	watches []watch
	wake    func()
	proc    *proc
}

// deliver hands an API server event to the process's watches.
func (p *daemonProc) deliver(ctx context.Context, ev apiserver.Event) {
	for i := range p.watches {
		p.watches[i].deliver(ctx, ev, false)
	}
}

// daemonDown stops the daemon of node, dropping what its queue and cache
// held.
func (r *runner) daemonDown(node string) {
	if p := r.daemons[node]; p != nil {
		r.reconciles["daemon"] += p.queue.Stats().Reconciles
		p.queue.ShutDown()
		if p.proc != nil {
			p.proc.gate.dead = true
			p.proc.cache.Close()
		}
		delete(r.daemons, node)
	}
}

// hostChanged wakes the daemon of node: the host finished a stage or
// booted, which the real daemon learns from its next look at the host.
func (r *runner) hostChanged(node string) {
	if p := r.daemons[node]; p != nil && p.wake != nil {
		p.wake()
	}
}

func (r *runner) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.eng.Stop()
}

// afterEvent runs after every engine event: invariants, timeline,
// convergence.
func (r *runner) afterEvent(string) {
	now := r.eng.Now()
	r.chk.Check(now)
	if vs := r.chk.Violations(); len(vs) > r.violationsSeen {
		for _, v := range vs[r.violationsSeen:] {
			r.tr.traceViolation(v)
		}
		r.violationsSeen = len(vs)
	}
	if r.sampleDirty || r.samplesStale() {
		r.sample(now)
	}
	if !r.firstSlot.IsZero() {
		cpu, _ := r.cl.SchedulableCapacity()
		r.gauge.observe(now, cpu, r.cl.SchedulableMemory(), r.cl.PendingPods(), r.w.InSlot())
	}
	r.watchConvergence(now)
	if r.opts.Bench {
		r.eventCounter++
		if r.eventCounter%BenchSampleEvery == 0 {
			r.sampleHeap()
		}
	}
}

// sampleHeap records the heap size. It reads no simulated state.
func (r *runner) sampleHeap() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.peakHeap = max(r.peakHeap, ms.HeapAlloc)
}

// converged reports whether the run is done: every pool converged, no
// scenario event or fault to come or in effect, the controller up and no
// node unavailable because of bootroll.
func (r *runner) converged(now time.Time) bool {
	return r.w.AllConverged() && !now.Before(r.quietAfter) && r.controllerUp && r.w.InSlot() == 0 && r.chk.PinnedSettled()
}

// watchConvergence stops the run Settle after it converged, or later when
// the checker has deadlines pending then (Checker.QuietUntil), unless it
// stops being converged in between.
func (r *runner) watchConvergence(now time.Time) {
	if !r.converged(now) {
		if !r.convergedSince.IsZero() {
			r.convergedSince = time.Time{}
			r.settle.Cancel()
			r.settle = nil
		}
		return
	}
	if !r.convergedSince.IsZero() {
		return
	}
	r.convergedSince = now
	r.tr.emit("twin.converged", "", nil)
	r.settle = r.eng.After(Settle, "twin/settle", r.settled)
}

// settled stops a run that is still converged Settle after it converged,
// once nothing the checker waits for is pending.
func (r *runner) settled() {
	now := r.eng.Now()
	if !r.converged(now) {
		return
	}
	if q := r.chk.QuietUntil(); q.After(now) {
		r.settle = r.eng.At(q, "twin/settle", r.settled)
		return
	}
	r.eng.Stop()
}

// samplesStale reports whether the timeline's last sample no longer shows
// the pending pods, the evictions PDBs refused or Karpenter's launches and
// terminations: these change without a phase or a cordon changing (a pod
// waits for capacity, a drain retries), and the report draws them. Close
// samples are coalesced (sampleSpace), so this adds at most one sample a
// spacing.
func (r *runner) samplesStale() bool {
	n := len(r.timeline)
	if n == 0 {
		return false
	}
	last := &r.timeline[n-1]
	if last.Pending != r.cl.PendingPods() || last.EvictionsRefused != r.cl.EvictionsRefused() {
		return true
	}
	if r.kp != nil && r.kp.k != nil {
		launched, terminated := r.kp.k.Launches()
		return last.KarpenterLaunched != launched || last.KarpenterTerminated != terminated
	}
	return false
}

// onPhase follows BootcNode phase changes for the timeline and timings.
func (r *runner) onPhase(node string, from, to v1alpha1.NodePhase) {
	r.sampleDirty = true
	now := r.eng.Now()
	switch to {
	case v1alpha1.PhaseDraining:
		if r.firstSlot.IsZero() {
			r.firstSlot = now
		}
		if _, ok := r.slotStart[node]; !ok {
			r.slotStart[node] = now
		}
	case v1alpha1.PhaseUpdated:
		if t, ok := r.slotStart[node]; ok {
			r.nodeUpdates = append(r.nodeUpdates, now.Sub(t))
			delete(r.slotStart, node)
		}
		r.lastUpdate = now
	case v1alpha1.PhaseFailed, "":
		delete(r.slotStart, node)
	}
}

// sample records the state after the phase changes of this event. Changes
// less than sampleSpace after the last sample update that sample in place,
// which bounds the timeline to limit/sampleSpace samples while every change
// shows, at most sampleSpace early.
func (r *runner) sample(now time.Time) {
	cpu, nodes := r.cl.SchedulableCapacity()
	dcpu, dmem := r.cl.Demand()
	s := Sample{
		At:               now.Sub(r.sc.Start),
		Phases:           r.w.PhaseCounts(),
		InSlot:           r.w.InSlot(),
		SchedulableCPU:   cpu,
		SchedulableNodes: nodes,
		SchedulableMem:   r.cl.SchedulableMemory(),
		DemandCPU:        dcpu,
		DemandMem:        dmem,
		Pending:          r.cl.PendingPods(),
		EvictionsRefused: r.cl.EvictionsRefused(),
	}
	if r.kp != nil && r.kp.k != nil {
		s.KarpenterLaunched, s.KarpenterTerminated = r.kp.k.Launches()
	}
	for _, p := range r.w.Pools() {
		bound, err := invariant.MaxUnavailableBound(p.MaxUnavailable, p.Members)
		if err != nil {
			bound = -1
		}
		s.Pools = append(s.Pools, PoolSample{Name: p.Name, Unavailable: p.Unavailable, MaxUnavailable: bound, Halted: p.Halted})
	}
	if n := len(r.timeline); n > 0 && s.At-r.timeline[n-1].At < r.sampleSpace {
		s.At = r.timeline[n-1].At
		r.timeline[n-1] = s
	} else {
		r.timeline = append(r.timeline, s)
	}
	r.sampleDirty = false
}

// checkPoolViews reports a violation, invariant.PoolViewConsistent, when a pool
// reconciler's kept row table ever differed from a full rebuild
// (bootroll_pool_view_mismatches_total): the controller repairs it, but it
// is a bug in its change tracking that the twin, which delivers every event
// at once, must never see.
func (r *runner) checkPoolViews(at time.Duration) error {
	for _, p := range r.sc.Bootroll.Pools {
		var m dto.Metric
		if err := r.ctrlOpts.Metrics.ViewMismatches.WithLabelValues(p.Name).Write(&m); err != nil {
			return err
		}
		if n := m.GetCounter().GetValue(); n > 0 {
			r.chk.Report(invariant.Violation{Invariant: invariant.PoolViewConsistent, At: at, Objects: []string{"BootcNodePool/" + p.Name},
				Message: fmt.Sprintf("the pool reconciler's incrementally kept rows differed from a full rebuild on %v row(s) (a controller bug; see its error log)", n)})
		}
	}
	return nil
}

// finish runs the end-of-run checks and assembles the result.
func (r *runner) finish() (*Result, error) {
	now := r.eng.Now()
	start := r.sc.Start
	if r.opts.Bench {
		r.sampleHeap()
	}
	if err := r.checkPoolViews(now.Sub(start)); err != nil {
		return nil, err
	}
	out := invariant.Outcome{End: now.Sub(start)}
	if !r.convergedSince.IsZero() && r.converged(now) {
		out.Converged, out.ConvergedAt = true, r.convergedSince.Sub(start)
	}
	r.chk.Finish(out)
	for _, v := range r.chk.Violations()[r.violationsSeen:] {
		r.tr.traceViolation(v)
	}
	r.tr.emit("twin.end", "", map[string]any{"converged": out.Converged, "events": r.eng.EventsRun()})
	if err := r.tr.flush(); err != nil {
		return nil, err
	}
	r.sample(now)
	if !r.firstSlot.IsZero() {
		cpu, _ := r.cl.SchedulableCapacity()
		r.gauge.observe(now, cpu, r.cl.SchedulableMemory(), r.cl.PendingPods(), r.w.InSlot())
	}
	for _, ctl := range r.ctrls {
		if q := r.queues[ctl.Name]; q != nil {
			r.reconciles[q.Name()] += q.Stats().Reconciles
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.daemons)) {
		r.reconciles["daemon"] += r.daemons[name].queue.Stats().Reconciles
	}
	res := &Result{
		Markers:     markers(r.sc.Events),
		Scenario:    r.sc.Name,
		File:        r.sc.File,
		Seed:        r.eng.Seed(),
		Start:       start,
		End:         out.End,
		Limit:       r.sc.Limit,
		Events:      r.eng.EventsRun(),
		Converged:   out.Converged,
		ConvergedAt: out.ConvergedAt,
		Violations:  r.chk.Violations(),
		Exceptions:  r.chk.Exceptions(),
		Counts:      map[string]int{},
		Timeline:    r.timeline,
		Phases:      v1alpha1.AllPhases,
		Reconciles:  r.reconciles,
		Enqueued:    map[string]uint64{},
		Requests:    r.api.Counts(),
		Recorded:    r.rec.counts,
		Writes:      r.writeCounts(),
		NodeUpdates: slices.Clone(r.nodeUpdates),
		PeakHeap:    r.peakHeap,
		Gauges:      r.gauge.Gauges,

		EvictionsRefused: r.cl.EvictionsRefused(),
		PDBBlockedDrain:  r.cl.PDBBlockedDrain(),
	}
	if r.kp != nil && r.kp.k != nil {
		st := r.kp.k.Stats()
		res.Karpenter = &st
	}
	slices.Sort(res.NodeUpdates)
	for _, w := range r.watches.all {
		if w.counted != nil {
			res.Enqueued[w.name] = w.counted.n
		}
	}
	for _, v := range res.Violations {
		res.Counts[v.Invariant] = r.chk.Count(v.Invariant)
	}
	if !r.firstSlot.IsZero() {
		res.HasFirstSlot, res.FirstSlot = true, r.firstSlot.Sub(start)
	}
	if !r.lastUpdate.IsZero() {
		res.LastUpdate = r.lastUpdate.Sub(start)
	}
	for _, node := range r.cl.Nodes() {
		res.Reboots += r.cl.Reboots(node)
	}
	res.Pools = PoolResults(r.w)
	return res, nil
}

// PoolResults summarises every pool of w as a run's result does (the
// cluster target summarises its own world with it too).
func PoolResults(w *invariant.World) []PoolResult {
	var out []PoolResult
	for _, p := range w.Pools() {
		pr := PoolResult{Name: p.Name, Phases: map[v1alpha1.NodePhase]int{}, UpToDate: p.UpToDate, Halted: p.Halted,
			HaltedReason: p.HaltedReason, Summary: p.Summary, TargetImage: p.TargetImage}
		for _, name := range w.Members(p.Name) {
			pr.Nodes++
			n := w.Node(name)
			if !n.HasBootcNode {
				continue
			}
			pr.Phases[n.Phase]++
			switch n.Phase {
			case v1alpha1.PhaseUpdated:
				pr.Updated++
			case v1alpha1.PhaseFailed:
				pr.Failed++
			}
		}
		out = append(out, pr)
	}
	return out
}

// daemonClock is the clock a node's daemon reads: the engine's, or, when
// the scenario has a clockSkew fault, the node's own (nodeClock).
func (r *runner) daemonClock(node string) clock.PassiveClock {
	if r.skew == nil {
		return r.eng.Clock()
	}
	return nodeClock{r: r, node: node}
}

// nodeClock is a node's clock: the engine's, off by the node's clockSkew.
type nodeClock struct {
	r    *runner
	node string
}

func (c nodeClock) Now() time.Time                  { return c.r.eng.Now().Add(c.r.skew[c.node]) }
func (c nodeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
