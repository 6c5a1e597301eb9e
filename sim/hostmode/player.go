package hostmode

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// nodeAPI is what a player writes on its Node: annotations (a nil value
// removes one) and status.nodeInfo.bootID.
type nodeAPI interface {
	Annotate(ctx context.Context, node string, set map[string]*string) error
	SetBootID(ctx context.Context, node, bootID string) error
}

// clientNodeAPI writes with JSON merge patches through a client.
type clientNodeAPI struct{ c client.Client }

func (a clientNodeAPI) Annotate(ctx context.Context, node string, set map[string]*string) error {
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": set}})
	if err != nil {
		return err
	}
	n := &corev1.Node{}
	n.Name = node
	if err := a.c.Patch(ctx, n, client.RawPatch(types.MergePatchType, data), client.FieldOwner(fieldOwner)); err != nil {
		return fmt.Errorf("annotate Node %s: %w", node, err)
	}
	return nil
}

func (a clientNodeAPI) SetBootID(ctx context.Context, node, bootID string) error {
	data, err := json.Marshal(map[string]any{"status": map[string]any{"nodeInfo": map[string]any{"bootID": bootID}}})
	if err != nil {
		return err
	}
	n := &corev1.Node{}
	n.Name = node
	if err := a.c.Status().Patch(ctx, n, client.RawPatch(types.MergePatchType, data), client.FieldOwner(fieldOwner)); err != nil {
		return fmt.Errorf("set status.nodeInfo.bootID of Node %s: %w", node, err)
	}
	return nil
}

// fieldOwner is the field manager of host mode's writes to Nodes.
const fieldOwner = "bootroll-hostmode"

// env is what every player shares.
type env struct {
	sc        *scenario.Scenario
	seed      uint64
	clk       clock.Clock
	log       logr.Logger
	api       nodeAPI
	client    client.Client
	apiReader client.Reader
	resync    time.Duration
	// wake wakes the daemon of a node (the wake watch of
	// nodedaemon.Watches); it must not block.
	wake func(node string)
	// retry is the pause between tries of a failed Node write.
	retry time.Duration
	// crashes are the daemonWriteCrash faults; nil when there are none.
	crashes *writeCrashes
}

// player plays one Node: its simulated host and the daemon process on
// it, which stops for a reboot and starts again after the boot.
type player struct {
	e    *env
	name string
	host *Host
	ctx  context.Context
	stop context.CancelFunc
	log  logr.Logger

	mu sync.Mutex
	// daemon is the running daemon process; nil while it is down.
	daemon *nodedaemon.Daemon
	// gen counts daemon processes: a wake of an earlier one is dropped.
	gen        int
	procCancel context.CancelFunc
	// flapCancel ends the flapping of this boot.
	flapCancel context.CancelFunc
}

// newPlayer starts playing node: it decides the host's first state,
// writes it on the Node, and starts the daemon, at once on a host that
// runs already (a Node the setup made has no boot ID yet: it gets one),
// after host.daemonStartup on one that boots now (a reboot an earlier
// process played and died in).
func newPlayer(parent context.Context, e *env, node *corev1.Node) *player {
	ctx, stop := context.WithCancel(parent)
	p := &player{e: e, name: node.Name, ctx: ctx, stop: stop, log: e.log.WithValues("node", node.Name)}
	in := InitialState(e.sc, node)
	rng := NodeRand(e.seed, node.Name)
	bootID := node.Status.NodeInfo.BootID
	_, booted := node.Annotations[localcluster.RebootingAnnotation]
	if bootID == "" || booted {
		// A reboot an earlier process played (and died in) is over: as
		// after a crash, the staged deployment is gone and the boot new,
		// and the daemon takes host.daemonStartup to start.
		bootID = newBootID(rng)
	}
	p.host = NewHost(node.Name, e.sc, e.clk, rng, in.Booted, in.Ref, bootID, available(in.Group), p.rebootRequested)
	if in.Rollback != nil {
		p.host.SetRollback(in.Rollback, in.RollbackRef)
	}
	p.log.Info("playing node", "booted", in.Ref, "from", in.From, "bootID", bootID)
	go func() { // edge: the host's life beside the daemon loop
		set := map[string]*string{AnnotationBooted: &in.Ref}
		if in.Rollback != nil {
			set[AnnotationRollback] = &in.RollbackRef
		}
		if _, ok := node.Annotations[localcluster.RebootingAnnotation]; ok {
			set[localcluster.RebootingAnnotation] = nil
		}
		if !p.write(func(ctx context.Context) error { return e.api.Annotate(ctx, p.name, set) }) {
			return
		}
		if node.Status.NodeInfo.BootID != bootID && !p.write(func(ctx context.Context) error { return e.api.SetBootID(ctx, p.name, bootID) }) {
			return
		}
		if booted {
			p.startDaemonAfter(e.sc.Host.DaemonStartup)
			return
		}
		// A node that runs already has its daemon running, as the twin
		// starts the daemons of the nodes that exist at time 0 (and of
		// nodes created later) at once: started after host.daemonStartup,
		// every cluster run began 5 s behind the twin's, and a timed
		// event landed in another part of the rollout (the first reboots
		// of cluster-pool-deleted-mid-rollout were still shutting down
		// when the pool was deleted at 15 s; in the twin they were down).
		p.startDaemon()
	}()
	return p
}

// write tries w until it succeeds or the player stops; it reports
// whether it succeeded.
func (p *player) write(w func(ctx context.Context) error) bool {
	for {
		err := w(p.ctx)
		if err == nil {
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		p.log.Info("writing the Node failed; trying again", "error", err.Error(), "in", p.e.retry)
		if !p.sleep(p.ctx, p.e.retry) {
			return false
		}
	}
}

// sleep waits d on the clock; false when ctx ended first.
func (p *player) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-p.e.clk.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// startDaemonAfter starts a new daemon process after a draw of dist.
func (p *player) startDaemonAfter(dist scenario.Distribution) {
	p.host.mu.Lock()
	wait := dist.Sample(p.host.rng)
	p.host.mu.Unlock()
	if !p.sleep(p.ctx, wait) {
		return
	}
	p.startDaemon()
}

// DaemonTestOnly is the deliberately broken daemon behaviour the
// scenario asks for (bootroll.testOnly.forgetLastReboot), so that a
// negative control runs on a real cluster as in the twin
// (sim/twin.daemonConfig does the same mapping). Host mode simulates no
// image service, so bootroll.testOnly.noStagingReserve has nothing to
// break here.
func DaemonTestOnly(sc *scenario.Scenario) nodedaemon.TestOnly {
	return nodedaemon.TestOnly{ForgetLastReboot: sc.Bootroll.TestOnly.ForgetLastReboot}
}

// startDaemon starts a daemon process: nodedaemon.Wire over the
// production adapters over the simulated host, with no memory of the
// one before. Pinned images are not simulated (no image service).
func (p *player) startDaemon() {
	p.mu.Lock()
	if p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.gen++
	gen := p.gen
	procCtx, cancel := context.WithCancel(p.ctx)
	p.procCancel = cancel
	c := p.e.client
	var hold func(*nodedaemon.AsyncHost, *prefetch.Runner) (nodedaemon.Host, nodedaemon.Prefetcher)
	if p.e.crashes != nil {
		// The process dies right after a write (or host call) when a
		// daemonWriteCrash says so: its later calls fail, as in the twin.
		g := &crashGate{p: p, gen: gen}
		c, hold = g.client(c), g.hold
	}
	p.daemon = nodedaemon.Wire(nodedaemon.Edges{
		Node:      p.name,
		Client:    c,
		APIReader: p.e.apiReader,
		Clock:     p.e.clk,
		Log:       p.e.log.WithName("daemon").WithValues("node", p.name),
		Host: nodedaemon.HostEdges{
			Bootc:     p.host,
			BootID:    p.host.BootID,
			Statfs:    p.host.Statfs,
			StageSize: p.host.StageSize,
			Context:   procCtx,
			Hold:      hold,
			Wake: func() {
				p.mu.Lock()
				current := p.gen == gen && p.daemon != nil
				p.mu.Unlock()
				if current {
					p.e.wake(p.name)
				}
			},
		},
	}, nodedaemon.Config{Resync: p.e.resync, StagingReserve: 0, TestOnly: DaemonTestOnly(p.e.sc)})
	p.mu.Unlock()
	p.log.Info("daemon started")
	p.e.wake(p.name)
}

// stopDaemon stops the daemon process: its background stage ends, and
// the requests for it are dropped until the next one starts.
func (p *player) stopDaemon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.daemon = nil
	if p.procCancel != nil {
		p.procCancel()
		p.procCancel = nil
	}
	if p.flapCancel != nil {
		p.flapCancel()
		p.flapCancel = nil
	}
}

// crashDaemon kills the node's daemon process, as a daemonCrash fault
// does in the twin (sim/cluster CrashDaemonFor): what it kept in memory
// is lost and its background stage ends, and its pod starts it again
// after downFor, taking host.daemonStartup to run, when the host is up
// and no daemon runs (a reboot in the meantime starts one after its
// boot, as all the node's pods start again then). A daemon that is not
// running is not crashed.
func (p *player) crashDaemon(downFor time.Duration) {
	if !p.daemonRunning() {
		p.log.Info("daemon crash: the daemon is not running")
		return
	}
	p.stopDaemon()
	p.log.Info("daemon crashed", "downFor", downFor.String())
	go func() { // edge: the restart on the clock beside the daemon loop
		if !p.sleep(p.ctx, downFor) {
			return
		}
		if p.daemonRunning() || !p.host.Up() {
			return
		}
		p.startDaemonAfter(p.e.sc.Host.DaemonStartup)
	}()
}

// crashDaemonOf crashes the daemon process gen, if it still runs.
func (p *player) crashDaemonOf(gen int, downFor time.Duration) {
	p.mu.Lock()
	current := p.gen == gen && p.daemon != nil
	p.mu.Unlock()
	if current {
		p.crashDaemon(downFor)
	}
}

// daemonRunning reports whether a daemon process runs now.
func (p *player) daemonRunning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.daemon != nil
}

// Reconcile hands a request to the running daemon process; while it is
// down, requests are dropped (its start wakes it).
func (p *player) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p.mu.Lock()
	d := p.daemon
	p.mu.Unlock()
	if d == nil {
		return reconcile.Result{}, nil
	}
	return d.Reconcile(ctx, req)
}

// end stops playing the node (its Node is gone).
func (p *player) end() {
	p.stopDaemon()
	p.stop()
}

// rebootRequested is the host's onReboot: `systemctl reboot` ran.
func (p *player) rebootRequested() {
	go p.reboot() // edge: the reboot runs on the clock beside the daemon loop
}

// reboot plays a reboot as the twin does: the host shuts down for
// cluster.ShutdownDelay (at most half the reboot; the Node stays Ready and
// the daemon runs), then the daemon goes down and the Node is annotated
// rebooting (NotReady through the KWOK stage) for the rest of the
// reboot's length; it comes back with a new boot ID and the image the
// boot booted, Ready unless the boot failed so, and the daemon starts
// again after host.daemonStartup.
func (p *player) reboot() {
	total, up := p.host.ShutDown()
	down := min(cluster.ShutdownDelay, total/2)
	if !p.sleep(p.ctx, down) {
		return
	}
	p.stopDaemon()
	yes := "true"
	p.log.Info("rebooting", "for", total.String())
	if !p.write(func(ctx context.Context) error {
		return p.e.api.Annotate(ctx, p.name, map[string]*string{localcluster.RebootingAnnotation: &yes})
	}) {
		return
	}
	if !p.sleep(p.ctx, total-down) {
		return
	}
	outcome, bootID := up()
	booted, rollback := p.host.Booted()
	p.log.Info("booted", "image", booted, "outcome", outcome, "bootID", bootID)
	// The boot ID first, while the annotation keeps KWOK's node stages
	// off the Node: they would write back the boot ID they read.
	if !p.write(func(ctx context.Context) error { return p.e.api.SetBootID(ctx, p.name, bootID) }) {
		return
	}
	set := map[string]*string{AnnotationBooted: &booted, AnnotationRollback: nil}
	if rollback != "" {
		set[AnnotationRollback] = &rollback
	}
	if outcome.Ready() {
		set[localcluster.RebootingAnnotation] = nil
	}
	if !p.write(func(ctx context.Context) error { return p.e.api.Annotate(ctx, p.name, set) }) {
		return
	}
	if outcome == Flapping {
		ctx, cancel := context.WithCancel(p.ctx)
		p.mu.Lock()
		p.flapCancel = cancel
		p.mu.Unlock()
		go p.flap(ctx) // edge: flaps on the clock
	}
	if outcome.DaemonRuns() {
		p.startDaemonAfter(p.e.sc.Host.DaemonStartup)
	}
}

// flap turns the Node NotReady and Ready again, over and over, until ctx
// ends (the next reboot): a Flapping image.
func (p *player) flap(ctx context.Context) {
	yes := "true"
	for {
		if !p.sleep(ctx, cluster.FlapReady) {
			return
		}
		if !p.write(func(c context.Context) error {
			return p.e.api.Annotate(c, p.name, map[string]*string{localcluster.RebootingAnnotation: &yes})
		}) {
			return
		}
		if !p.sleep(ctx, cluster.FlapNotReady) {
			return
		}
		if !p.write(func(c context.Context) error {
			return p.e.api.Annotate(c, p.name, map[string]*string{localcluster.RebootingAnnotation: nil})
		}) {
			return
		}
	}
}
