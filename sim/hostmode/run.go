package hostmode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Options configure a host-mode run.
type Options struct {
	// Scenario drives the simulated hosts: images, host timings, boot
	// failures.
	Scenario *scenario.Scenario
	// Seed seeds each node's source of randomness (NodeRand).
	Seed uint64
	// Selector picks the Nodes to play, each from when it appears until
	// it is gone; Node, when set instead, plays the one Node of that name.
	Selector labels.Selector
	Node     string
	// Config reaches the API server.
	Config *rest.Config
	// Clock is the hosts' and the daemons' time.
	Clock clock.Clock
	// Log is the logger.
	Log logr.Logger
	// Resync is the daemons' nodedaemon.Config.Resync; 0 means
	// nodedaemon.DefaultResync.
	Resync time.Duration
	// Concurrency is how many daemons reconcile at once (each node one at
	// a time); 0 means 8.
	Concurrency int
	// Ready, when set, is called once the manager's caches have synced.
	Ready func()
}

// Run plays the selected Nodes until ctx ends: a manager with one
// controller that starts a player for each selected Node that exists and
// ends it when the Node is gone, and one that hands each played node's
// BootcNode requests to its daemon, fed by the watches of
// nodedaemon.Watches.
func Run(ctx context.Context, o Options) error {
	if o.Scenario == nil || len(o.Scenario.Images) == 0 {
		return errors.New("host mode needs a scenario with images")
	}
	if (o.Selector == nil) == (o.Node == "") {
		return errors.New("host mode plays the Nodes of a selector or one named Node: give exactly one")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{} // edge: host mode runs on wall-clock time
	}
	if o.Resync == 0 {
		o.Resync = nodedaemon.DefaultResync
	}
	if o.Concurrency == 0 {
		o.Concurrency = 8
	}
	if to := DaemonTestOnly(o.Scenario); to != (nodedaemon.TestOnly{}) {
		o.Log.Info("WARNING: the scenario's bootroll.testOnly breaks every daemon this process plays on purpose (a negative control)", "testOnly", fmt.Sprintf("%+v", to))
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	nodeCache := cache.ByObject{Label: o.Selector}
	bnCache := cache.ByObject{}
	if o.Node != "" {
		nodeCache = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", o.Node)}
		bnCache = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", o.Node)}
	}
	mgr, err := ctrl.NewManager(o.Config, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Node{}: nodeCache, &v1alpha1.BootcNode{}: bnCache}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 o.Log,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	wakeC := make(chan event.GenericEvent, 1024)
	e := &env{
		sc: o.Scenario, seed: o.Seed, clk: o.Clock, log: o.Log,
		api: clientNodeAPI{mgr.GetClient()}, client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		resync: o.Resync, retry: time.Second,
		wake: func(node string) {
			ev := event.GenericEvent{Object: wakeObject(node)}
			select {
			case wakeC <- ev:
			default:
				go func() { // edge: never block the caller on a full channel
					select {
					case wakeC <- ev:
					case <-ctx.Done():
					}
				}()
			}
		},
	}
	ps := &players{e: e, ctx: ctx, byName: map[string]*player{}}
	faults := planFaults(o.Scenario, o.Seed)
	e.crashes = faults.crashes(o.Clock.Now(), o.Seed)
	for _, name := range faults.skipped {
		o.Log.Info("fault not played by host mode (another target must inject it, or it is skipped)", "fault", name)
	}
	mgr.Add(runnable(func(ctx context.Context) error { faults.run(ctx, o.Clock, ps); return nil }))

	opts := controller.Options{MaxConcurrentReconciles: o.Concurrency, SkipNameValidation: ptr.To(true)}
	if err := ctrl.NewControllerManagedBy(mgr).Named("hostmode-nodes").For(&corev1.Node{}).
		WithOptions(opts).Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		var n corev1.Node
		err := mgr.GetClient().Get(ctx, req.NamespacedName, &n)
		switch {
		case apierrors.IsNotFound(err):
			ps.end(req.Name)
			return reconcile.Result{}, nil
		case err != nil:
			return reconcile.Result{}, err
		}
		ps.ensure(&n)
		return reconcile.Result{}, nil
	})); err != nil {
		return fmt.Errorf("create node controller: %w", err)
	}

	b := ctrl.NewControllerManagedBy(mgr).Named("hostmode-daemons").WithOptions(opts)
	for _, w := range nodedaemon.Watches("") {
		switch {
		case w.Wake:
			b = b.WatchesRawSource(source.Channel(wakeC, w.Handler))
		case w.For:
			b = b.For(w.Object, builder.WithPredicates(ps.predicate(w)))
		default:
			b = b.Watches(w.Object, w.Handler, builder.WithPredicates(ps.predicate(w)))
		}
	}
	if err := b.Complete(ps); err != nil {
		return fmt.Errorf("create daemon controller: %w", err)
	}
	if o.Ready != nil {
		mgr.Add(runnable(func(ctx context.Context) error {
			if mgr.GetCache().WaitForCacheSync(ctx) {
				o.Ready()
			}
			return nil
		}))
	}
	err = mgr.Start(ctx)
	ps.endAll()
	return err
}

// wakeObject is the object of a node's wake watch (nodedaemon.Watches).
func wakeObject(node string) client.Object {
	for _, w := range nodedaemon.Watches(node) {
		if w.Wake {
			return w.Object
		}
	}
	panic("nodedaemon.Watches has no wake watch")
}

type runnable func(ctx context.Context) error

func (r runnable) Start(ctx context.Context) error { return r(ctx) }

// players are the played nodes by name.
type players struct {
	e   *env
	ctx context.Context

	mu     sync.Mutex
	byName map[string]*player
}

func (ps *players) ensure(n *corev1.Node) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.byName[n.Name] == nil {
		ps.byName[n.Name] = newPlayer(ps.ctx, ps.e, n)
	}
}

func (ps *players) end(name string) {
	ps.mu.Lock()
	p := ps.byName[name]
	delete(ps.byName, name)
	ps.mu.Unlock()
	if p != nil {
		p.log.Info("node gone: stopped playing it")
		p.end()
	}
}

func (ps *players) endAll() {
	ps.mu.Lock()
	all := ps.byName
	ps.byName = map[string]*player{}
	ps.mu.Unlock()
	for _, p := range all {
		p.end()
	}
}

func (ps *players) get(name string) *player {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.byName[name]
}

// names are the played nodes' names, sorted.
func (ps *players) names() []string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]string, 0, len(ps.byName))
	for n := range ps.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Reconcile hands a request to the daemon of the node it names.
func (ps *players) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := ps.get(req.Name)
	if p == nil {
		return reconcile.Result{}, nil
	}
	return p.Reconcile(ctx, req)
}

// predicate passes an event of w's kind when the object is a played
// node's and the predicates of that node's watch of the same kind
// (nodedaemon.Watches) pass it.
func (ps *players) predicate(w nodedaemon.Watch) predicate.Predicate {
	preds := func(obj client.Object) []predicate.Predicate {
		if obj == nil || ps.get(obj.GetName()) == nil {
			return nil
		}
		for _, nw := range nodedaemon.Watches(obj.GetName()) {
			if nw.For == w.For && nw.Wake == w.Wake {
				return nw.Predicates
			}
		}
		return nil
	}
	all := func(obj client.Object, pass func(predicate.Predicate) bool) bool {
		ok := false
		for _, p := range preds(obj) {
			if !pass(p) {
				return false
			}
			ok = true
		}
		return ok
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			return all(e.Object, func(p predicate.Predicate) bool { return p.Create(e) })
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			return all(e.ObjectNew, func(p predicate.Predicate) bool { return p.Update(e) })
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			return all(e.Object, func(p predicate.Predicate) bool { return p.Delete(e) })
		},
		GenericFunc: func(e event.GenericEvent) bool {
			return all(e.Object, func(p predicate.Predicate) bool { return p.Generic(e) })
		},
	}
}

var _ handler.EventHandler = &handler.EnqueueRequestForObject{}
