package hostmode

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/scenario"
)

// ErrCrashed is what a daemon process's calls return once a
// daemonWriteCrash took it down: a dead process reads, writes and calls
// its host no more.
var ErrCrashed = errors.New("the daemon process crashed (daemonWriteCrash)")

// writeCrash is a daemonWriteCrash fault host mode plays, as the twin
// does (sim/twin gate.step): from its start to its window's end (or the
// end of the run) it counts each node's daemon's successful writes, and
// with hostCalls its successful host calls, and takes the daemon down
// right after the afterWrites-th (once per node) or after each with
// probability rate.
type writeCrash struct {
	name     string
	from, to time.Duration // to 0: no end
	f        scenario.DaemonWriteCrash
}

// writeCrashes are the daemonWriteCrash faults of a run and what they
// counted; nil when the scenario has none.
type writeCrashes struct {
	start time.Time
	seed  uint64

	mu     sync.Mutex
	faults []writeCrash
	counts map[string]*scenario.CrashCount // by fault name + "/" + node
	rngs   map[string]*rand.Rand           // per node
}

// step counts one step of node's daemon at now (a successful write, or a
// host call when hostCall) and reports the fault that crashes it right
// after, if one does.
func (w *writeCrashes) step(now time.Time, node string, hostCall bool) (fault string, down time.Duration, crash bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := now.Sub(w.start)
	for _, c := range w.faults {
		if at < c.from || (c.to > 0 && at >= c.to) || (hostCall && !c.f.HostCalls) {
			continue
		}
		key := c.name + "/" + node
		n := w.counts[key]
		if n == nil {
			n = &scenario.CrashCount{}
			w.counts[key] = n
		}
		if n.Step(c.f.AfterWrites, c.f.Rate, func() float64 { return w.rng(node).Float64() }) {
			return c.name, c.f.DownFor, true
		}
	}
	return "", 0, false
}

// rng is node's source for the rate draws. Called with w.mu held.
func (w *writeCrashes) rng(node string) *rand.Rand {
	r := w.rngs[node]
	if r == nil {
		r = NodeRand(w.seed, "daemonWriteCrash/"+node)
		w.rngs[node] = r
	}
	return r
}

// crashGate is one daemon process's side of the write crashes: its calls
// fail once it is dead, and each successful write or host call is a step
// that may kill it.
type crashGate struct {
	p    *player
	gen  int
	dead atomic.Bool
}

// stepped counts a successful call (what names it) and crashes the
// process when a fault says so.
func (g *crashGate) stepped(what string, hostCall bool) {
	w := g.p.e.crashes
	fault, down, crash := w.step(g.p.e.clk.Now(), g.p.name, hostCall)
	if !crash || g.dead.Swap(true) {
		return
	}
	g.p.log.Info("daemon crashed right after a write", "fault", fault, "after", what, "downFor", down.String())
	g.p.crashDaemonOf(g.gen, down)
}

// alive fails once the process is dead.
func (g *crashGate) alive(op string) error {
	if g.dead.Load() {
		return fmt.Errorf("%s on node %s: %w", op, g.p.name, ErrCrashed)
	}
	return nil
}

// client wraps the daemon's client: every call fails once the process
// is dead, and each successful write is a step.
func (g *crashGate) client(c client.Client) client.Client { return crashClient{Client: c, g: g} }

// crashClient is a daemon process's client behind its crashGate.
type crashClient struct {
	client.Client
	g *crashGate
}

// write makes one write of the process: refused when it is dead, a step
// when it succeeds.
func (g *crashGate) write(verb string, obj client.Object, call func() error) error {
	if err := g.alive(verb); err != nil {
		return err
	}
	if err := call(); err != nil {
		return err
	}
	g.stepped(fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()), false)
	return nil
}

func (c crashClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.g.alive("get"); err != nil {
		return err
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c crashClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.g.alive("list"); err != nil {
		return err
	}
	return c.Client.List(ctx, list, opts...)
}

func (c crashClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.g.write("create", obj, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c crashClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.g.write("update", obj, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c crashClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.g.write("patch", obj, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c crashClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.g.write("delete", obj, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c crashClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.g.write("deletecollection", obj, func() error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c crashClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c crashClient) SubResource(sub string) client.SubResourceClient {
	return crashSubResource{SubResourceClient: c.Client.SubResource(sub), sub: sub, g: c.g}
}

// crashSubResource is a subresource client behind a crashGate.
type crashSubResource struct {
	client.SubResourceClient
	sub string
	g   *crashGate
}

func (c crashSubResource) Get(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
	if err := c.g.alive("get/" + c.sub); err != nil {
		return err
	}
	return c.SubResourceClient.Get(ctx, obj, subResource, opts...)
}

func (c crashSubResource) Create(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceCreateOption) error {
	return c.g.write("create/"+c.sub, obj, func() error { return c.SubResourceClient.Create(ctx, obj, subResource, opts...) })
}

func (c crashSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return c.g.write("update/"+c.sub, obj, func() error { return c.SubResourceClient.Update(ctx, obj, opts...) })
}

func (c crashSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return c.g.write("patch/"+c.sub, obj, func() error { return c.SubResourceClient.Patch(ctx, obj, patch, opts...) })
}

// hold is nodedaemon.HostEdges.Hold: the loop's host calls fail once the
// process is dead, and each successful one is a step for the faults
// with hostCalls.
func (g *crashGate) hold(h *nodedaemon.AsyncHost, r *prefetch.Runner) (nodedaemon.Host, nodedaemon.Prefetcher) {
	var pf nodedaemon.Prefetcher
	if r != nil {
		pf = r
	}
	return crashHost{Host: h, g: g}, pf
}

// crashHost is the daemon's host behind a crashGate.
type crashHost struct {
	nodedaemon.Host
	g *crashGate
}

func (h crashHost) Observe(ctx context.Context) (nodedaemon.Observation, error) {
	if err := h.g.alive("host observe"); err != nil {
		return nodedaemon.Observation{}, err
	}
	return h.Host.Observe(ctx)
}

func (h crashHost) ShuttingDown(ctx context.Context) (bool, error) {
	if err := h.g.alive("host shutting-down"); err != nil {
		return false, err
	}
	return h.Host.ShuttingDown(ctx)
}

func (h crashHost) Stage(ctx context.Context, image string) error {
	return h.call("stage", func() error { return h.Host.Stage(ctx, image) })
}

func (h crashHost) Apply(ctx context.Context, image string) error {
	return h.call("apply", func() error { return h.Host.Apply(ctx, image) })
}

func (h crashHost) Rollback(ctx context.Context) error {
	return h.call("rollback", func() error { return h.Host.Rollback(ctx) })
}

func (h crashHost) Reboot(ctx context.Context) error {
	return h.call("reboot", func() error { return h.Host.Reboot(ctx) })
}

func (h crashHost) call(op string, f func() error) error {
	if err := h.g.alive("host " + op); err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	h.g.stepped("host/"+op, true)
	return nil
}
