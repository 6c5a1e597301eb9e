package twin

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/informer"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file wires the informer caches (sim/informer) and the API faults:
// each controller process and each daemon process reads through its own
// cache and writes through a gate (apiserver.Gated) that draws the
// scenario's API faults, the requests' latency and the crashes after a
// write.

// Profiles of the caches: how late watch events reach them, and how long
// reconciles and requests take.
const (
	ProfileDefault = "default"
	ProfileStale   = "stale"
	ProfileInstant = "instant"
)

// timing is a profile's delays, each a uniform draw between its bounds.
type timing struct {
	// deliver is the delay from a write to its event reaching a cache;
	// under stale, staleShare of the events take staleDeliver instead.
	deliver, staleDeliver [2]time.Duration
	staleShare            float64
	// reconcile is a reconcile's own run time, request the latency of
	// one API request.
	reconcile, request [2]time.Duration
}

var timings = map[string]timing{
	ProfileDefault: {
		deliver:   [2]time.Duration{time.Millisecond, 20 * time.Millisecond},
		reconcile: [2]time.Duration{time.Millisecond, 5 * time.Millisecond},
		request:   [2]time.Duration{2 * time.Millisecond, 10 * time.Millisecond},
	},
	ProfileStale: {
		deliver:      [2]time.Duration{time.Millisecond, 20 * time.Millisecond},
		staleDeliver: [2]time.Duration{time.Second, 30 * time.Second},
		staleShare:   0.2,
		reconcile:    [2]time.Duration{time.Millisecond, 5 * time.Millisecond},
		request:      [2]time.Duration{2 * time.Millisecond, 10 * time.Millisecond},
	},
}

func uniform(rng *rand.Rand, b [2]time.Duration) time.Duration {
	if b[1] <= b[0] {
		return b[0]
	}
	return b[0] + time.Duration(rng.Int64N(int64(b[1]-b[0])))
}

// profile returns the run's profile: the options', else the scenario's.
func profile(sc *scenario.Scenario, opts Options) (string, error) {
	p := opts.Profile
	if p == "" {
		p = string(sc.Profile)
	}
	if p == "" {
		p = ProfileDefault
	}
	switch p {
	case ProfileDefault, ProfileStale, ProfileInstant:
		return p, nil
	}
	return "", fmt.Errorf("profile %q: want default, stale or instant", p)
}

// controllerKinds are the kinds the controller's manager cache holds, in
// the order its initial lists run: those it watches and those it reads
// through its client. Secrets and NodeClaims are read uncached
// (options.Options.APIReader).
func controllerKinds() []client.Object {
	return []client.Object{&v1alpha1.BootcNodePool{}, &corev1.Node{}, &v1alpha1.BootcNode{}, &v1alpha1.PinnedImageSet{}, &corev1.Pod{}}
}

// proc is one process's view of the API: its cache, its gate, and the
// client that combines them.
type proc struct {
	cache  *informer.Cache
	gate   *gate
	client client.Client
	// api is the process's uncached client (the manager's APIReader).
	api client.Client
}

// newProc makes the API view of a process: who is "controller" or
// "daemon" (node names the daemon's node); only restricts a daemon's cache
// to its own object.
func (r *runner) newProc(who, node string, kinds []client.Object, only *client.ObjectKey, handle func(apiserver.Event)) (*proc, error) {
	g := &gate{r: r, who: who, node: node}
	store := apiserver.NewMirror(r.api.AdminClient().Scheme(), r.eng.Clock())
	if only == nil {
		for _, ix := range index.All() {
			if err := store.IndexField(r.ctx, ix.Object, ix.Field, ix.Extract); err != nil {
				return nil, fmt.Errorf("indexing the %s cache: %w", who, err)
			}
		}
	}
	name := who
	if node != "" {
		name = who + "/" + node
	}
	t := r.timing
	rng := r.eng.Rand()
	c, err := informer.New(informer.Options{
		Name:   name,
		Engine: r.eng,
		Source: r.api,
		Store:  store,
		Kinds:  kinds,
		Only:   only,
		Delay: func() time.Duration {
			if t.staleShare > 0 && rng.Float64() < t.staleShare {
				return uniform(rng, t.staleDeliver)
			}
			return uniform(rng, t.deliver)
		},
		Fault:     func(kind string) informer.WatchFault { return r.watchFault(who, name, kind) },
		Transform: transformFor(who),
		Handle:    handle,
		Trace: func(what, kind string, fields map[string]any) {
			if fields == nil {
				fields = map[string]any{}
			}
			fields["cache"] = name
			r.tr.emit(what, kind, fields)
		},
	})
	if err != nil {
		return nil, err
	}
	api := apiserver.Gated(r.api.Client(), g)
	return &proc{cache: c, gate: g, client: informer.NewClient(c, api), api: api}, nil
}

// duration is how long a reconcile of p occupied its worker: a drawn run
// time plus the latency of the API requests it made.
func (p *proc) duration(r *runner) time.Duration {
	return uniform(r.eng.Rand(), r.timing.reconcile) + p.gate.takeLatency()
}

// cacheReader reads the current controller process's cache, or the store
// under the instant profile; the controller's watch map functions read it.
type cacheReader struct{ r *runner }

func (c cacheReader) reader() client.Reader {
	if c.r.ctrl != nil {
		return c.r.ctrl.cache.Store().AdminClient()
	}
	return c.r.api.AdminClient()
}

// Get honours client.UnsafeDisableDeepCopy as the controller's cached
// client does (informer.NewClient): the object read shares its maps,
// slices and pointers with the cache's (apiserver.Shared).
func (c cacheReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if len(opts) > 0 && informer.NoDeepCopy(opts) {
		return c.reader().Get(ctx, key, obj, informer.SharedGet...)
	}
	return c.reader().Get(ctx, key, obj, opts...)
}

func (c cacheReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader().List(ctx, list, opts...)
}

// apiFault is a scenario fault that is in effect over a span.
type apiFault struct {
	index    int
	from, to time.Time
	f        scenario.Fault
	// counts are the crash faults' counts of successful steps while in
	// effect: the controller's, or per daemon node.
	counts map[string]*scenario.CrashCount
}

func (a *apiFault) active(now time.Time) bool { return !now.Before(a.from) && now.Before(a.to) }

func hits(who scenario.FaultWho, proc string) bool {
	return who == "" || who == "all" || string(who) == proc
}

// scheduleAPIFault takes the scenario's fault i when it is one of the
// span faults of this file, and reports whether it was.
func (r *runner) scheduleAPIFault(i int, f scenario.Fault) bool {
	if !f.Span() {
		return false
	}
	start := r.sc.Start
	a := &apiFault{index: i, f: f, to: start.Add(r.sc.Limit), counts: map[string]*scenario.CrashCount{}}
	switch {
	case f.At != nil:
		a.from = start.Add(*f.At)
	case f.Window != nil:
		a.from, a.to = start.Add(f.Window.From), start.Add(f.Window.To)
		if a.to.After(r.quietAfter) {
			r.quietAfter = a.to
		}
	}
	if a.from.After(r.quietAfter) {
		r.quietAfter = a.from
	}
	r.apiFaults = append(r.apiFaults, a)
	r.eng.At(a.from, fmt.Sprintf("scenario/fault/%d", i), func() {
		r.tr.emit("fault.begin", "", map[string]any{"fault": i, "until": a.to.Sub(start).String()})
	})
	return true
}

// watchFault draws what the span watch faults do to one event of kind
// on its way to the cache of proc (named name).
func (r *runner) watchFault(who, name, kind string) informer.WatchFault {
	var out informer.WatchFault
	now := r.eng.Now()
	rng := r.eng.Rand()
	for _, a := range r.apiFaults {
		w := a.f.WatchFaults
		if w == nil || !a.active(now) || !hits(w.Who, who) {
			continue
		}
		if w.Drop > 0 && rng.Float64() < w.Drop {
			out.Drop = true
			if w.RelistAfter != nil {
				out.RelistAfter = w.RelistAfter.Sample(rng)
			} else {
				out.RelistAfter = uniform(rng, [2]time.Duration{time.Second, 10 * time.Second})
			}
			r.tr.emit("fault.watchDrop", kind, map[string]any{"fault": a.index, "cache": name, "relistAfter": out.RelistAfter.String()})
			return out
		}
		if w.Delay > 0 {
			out.Extra += time.Duration(rng.Int64N(int64(w.Delay) + 1))
		}
	}
	return out
}

// gate is a process's apiserver.Gate: it draws the API faults in effect,
// adds up the latency of the requests of the reconcile under way, and
// crashes the process after a write when a crash fault says so.
type gate struct {
	r       *runner
	who     string // "controller" or "daemon"
	node    string
	dead    bool
	latency time.Duration
}

var _ apiserver.Gate = (*gate)(nil)

func (g *gate) takeLatency() time.Duration {
	l := g.latency
	g.latency = 0
	return l
}

// nodeOf is the node a request is for when it is for a Node or a
// BootcNode (both named after their node), else "".
func nodeOf(req apiserver.Request) string {
	switch req.Object.(type) {
	case *corev1.Node, *v1alpha1.BootcNode:
		return req.ObjectName()
	}
	return ""
}

// objectRef names a request's object as Kind/name for the trace.
func objectRef(o any) string {
	co, ok := o.(client.Object)
	if !ok {
		return ""
	}
	return kindName(co) + "/" + co.GetName()
}

// kindName is the Go type name of an object, e.g. "BootcNode".
func kindName(o any) string { return typeName(reflect.TypeOf(o)) }

// typeName is kindName for an object of type t.
func typeName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "?"
	}
	return t.Name()
}

// Client-go's answer to a 429 that carries Retry-After, as
// kube-apiserver's priority and fairness sends it and the cluster target's
// proxy does for injected ones (Retry-After: 1): rest.Request waits that
// long and sends the request again, up to maxRetries (10) times, before
// its caller sees the error.
const (
	clientRetries   = 10
	retryAfterDelay = time.Second
)

// Before draws the request's latency and its API fault, if any. A
// request throttled with tooManyRequests is sent again by the process's
// client (clientRetries, retryAfterDelay), each attempt drawn afresh; the
// waits and the attempts' latencies add up, and only the last attempt's
// 429 reaches the caller. Returning the first 429 at once made the twin's
// controller see far more failed requests than on a cluster under the
// same fault (docs/fidelity.md).
func (g *gate) Before(req apiserver.Request) apiserver.Decision {
	if g.dead {
		return apiserver.Decision{Err: apiserver.ErrCrashed}
	}
	var waited time.Duration
	for retry := 0; ; retry++ {
		d, throttled := g.attempt(req)
		if throttled && retry < clientRetries {
			waited += d.Latency + retryAfterDelay
			continue
		}
		d.Latency += waited
		g.latency += d.Latency
		// The write reaches the server once the requests before it and
		// its own latency have passed: its watch events leave then
		// (Served resets it).
		if d.Err == nil && (!d.Timeout || d.Applied) {
			g.r.landsAfter = g.latency
		}
		return d
	}
}

// attempt draws one attempt of a request: its latency and the API fault
// that fails it, if any; throttled says the fault was tooManyRequests.
func (g *gate) attempt(req apiserver.Request) (d apiserver.Decision, throttled bool) {
	r := g.r
	rng := r.eng.Rand()
	d = apiserver.Decision{Latency: uniform(rng, r.timing.request)}
	now := r.eng.Now()
	for _, a := range r.apiFaults {
		e := a.f.APIErrors
		if e == nil || !a.active(now) || !hits(e.Who, g.who) || !verbHit(e.Verbs, req) {
			continue
		}
		if e.Latency != nil {
			d.Latency += e.Latency.Sample(rng)
		}
		if d.Err != nil || d.Timeout || e.Rate <= 0 || rng.Float64() >= e.Rate {
			continue
		}
		codes := e.CodesFor(req.Write())
		if len(codes) == 0 {
			continue // conflict, on a read
		}
		code := codes[rng.IntN(len(codes))]
		fields := map[string]any{"fault": a.index, "verb": req.Verb, "code": string(code), "who": g.who}
		if g.node != "" {
			fields["node"] = g.node
		}
		switch code {
		case "timeout":
			d.Timeout = true
			d.Applied = req.Write() && rng.IntN(2) == 0
			fields["applied"] = d.Applied
		case "conflict":
			d.Err = apiserver.FaultError(409, req)
		case "tooManyRequests":
			d.Err = apiserver.FaultError(429, req)
			throttled = true
		default:
			d.Err = apiserver.FaultError(500, req)
		}
		r.tr.emit("fault.apiError", objectRef(req.Object), fields)
		if g.who == "controller" && r.chk != nil {
			// The checker's repair exemption restarts its reaction
			// bound here (invariant.Checker.ControllerRequestFailed).
			r.chk.ControllerRequestFailed(now, nodeOf(req))
		}
	}
	return d, throttled
}

func verbHit(verbs []string, req apiserver.Request) bool {
	if len(verbs) == 0 {
		return true
	}
	for _, v := range verbs {
		if req.MatchesVerb(v) {
			return true
		}
	}
	return false
}

// Served counts successful writes for the crash faults and crashes the
// process when one says so: the process is gone at once (every later
// request of the reconcile under way fails), and starts again after the
// fault's downFor.
func (g *gate) Served(req apiserver.Request, err error) {
	g.r.landsAfter = 0
	if err != nil || !req.Write() || g.dead {
		return
	}
	g.r.countWrite(g.who, req)
	g.step(req.Verb, req.Object, false)
}

// HostCalled is a daemon's successful call to its host (hostCall names
// it): a step for the daemonWriteCrash faults that count host calls.
func (g *gate) HostCalled(hostCall string) {
	if !g.dead {
		g.step(hostCall, nil, true)
	}
}

// step counts one step of the process (a successful write of obj, or a
// host call) for the crash faults in effect and crashes the process when
// one says so.
func (g *gate) step(verb string, obj any, hostCall bool) {
	r := g.r
	now := r.eng.Now()
	rng := r.eng.Rand()
	for _, a := range r.apiFaults {
		if !a.active(now) {
			continue
		}
		var afterWrites int
		var rate float64
		var down time.Duration
		switch {
		case g.who == "controller" && a.f.ControllerCrash != nil:
			c := a.f.ControllerCrash
			afterWrites, rate, down = c.AfterWrites, c.Rate, c.DownFor
		case g.who == "daemon" && a.f.DaemonWriteCrash != nil && (!hostCall || a.f.DaemonWriteCrash.HostCalls):
			c := a.f.DaemonWriteCrash
			afterWrites, rate, down = c.AfterWrites, c.Rate, c.DownFor
		default:
			continue
		}
		c := a.counts[g.node]
		if c == nil {
			c = &scenario.CrashCount{}
			a.counts[g.node] = c
		}
		if c.Step(afterWrites, rate, rng.Float64) {
			// The object is named only for the crash's trace line.
			object := "Node/" + g.node
			if !hostCall {
				object = objectRef(obj)
			}
			g.crash(a.index, verb, object, down)
			return
		}
	}
}

func (g *gate) crash(fault int, verb, object string, down time.Duration) {
	g.dead = true
	r := g.r
	fields := map[string]any{"fault": fault, "afterVerb": verb, "object": object, "downFor": down.String()}
	if g.who == "controller" {
		r.tr.emit("fault.controllerCrash", "", fields)
		r.stopController()
		// A new process, in an event of its own (the crashed reconcile is
		// still on the stack), and never a second one: a start already
		// pending for later stands (see restartController).
		at := r.eng.Now().Add(max(down, 0))
		if p := r.act.ctrlStart; p.Pending() && !p.When().Before(at) {
			return
		}
		r.act.ctrlStart.Cancel()
		r.act.ctrlStart = r.eng.At(at, "fault/controller-start", r.startControllerOnce)
		return
	}
	r.tr.emit("fault.daemonWriteCrash", "Node/"+g.node, fields)
	if err := r.cl.CrashDaemonFor(g.node, down); err != nil {
		// The host is going away under the daemon: the process ends
		// anyway.
		r.tr.emit("fault.skipped", "Node/"+g.node, map[string]any{"reason": err.Error()})
		r.daemonDown(g.node)
	}
}

// writeKey is what Result.Writes counts a served write under: the
// process kind, the verb and the object's Go type, whose name (kindName)
// finish looks up once per key rather than once per write.
type writeKey struct {
	who, verb string
	typ       reflect.Type
}

// countWrite counts a served write of a process of kind who (Result.Writes).
func (r *runner) countWrite(who string, req apiserver.Request) {
	if r.writes == nil {
		r.writes = map[writeKey]uint64{}
	}
	r.writes[writeKey{who: who, verb: req.Verb, typ: reflect.TypeOf(req.Object)}]++
}

// writeCounts returns the writes counted as Result.Writes: per process
// kind, per "verb Kind"; nil when none was counted.
func (r *runner) writeCounts() map[string]map[string]uint64 {
	if r.writes == nil {
		return nil
	}
	out := map[string]map[string]uint64{}
	for k, n := range r.writes {
		m := out[k.who]
		if m == nil {
			m = map[string]uint64{}
			out[k.who] = m
		}
		m[k.verb+" "+typeName(k.typ)] += n
	}
	return out
}

// transformFor is the cache transform of a process: the controller's
// cache holds Pods and Nodes trimmed as the manager's cache does
// (options.TrimPod, options.TrimNode) and every other object without its
// managedFields (options.CacheOptions' DefaultTransform), so the twin runs
// the controller on the objects it reads in production; the daemons'
// caches hold their BootcNode whole, as theirs do.
func transformFor(who string) func(client.Object) client.Object {
	if who != "controller" {
		return nil
	}
	return func(o client.Object) client.Object {
		var out any = o
		switch o.(type) {
		case *corev1.Pod:
			out, _ = options.TrimPod(o)
		case *corev1.Node:
			out, _ = options.TrimNode(o)
		default:
			out = withoutManagedFields(o)
		}
		return out.(client.Object)
	}
}

// withoutManagedFields returns o without metadata.managedFields, as
// controller-runtime's cache.TransformStripManagedFields leaves it, but
// without modifying o (the API server's store holds it): a typed object
// is copied shallowly, an unstructured one down to its metadata map.
func withoutManagedFields(o client.Object) client.Object {
	if len(o.GetManagedFields()) == 0 {
		return o
	}
	if u, ok := o.(*unstructured.Unstructured); ok {
		out := &unstructured.Unstructured{Object: maps.Clone(u.Object)}
		if md, ok := u.Object["metadata"].(map[string]any); ok {
			md = maps.Clone(md)
			delete(md, "managedFields")
			out.Object["metadata"] = md
		}
		return out
	}
	v := reflect.New(reflect.TypeOf(o).Elem())
	v.Elem().Set(reflect.ValueOf(o).Elem())
	out := v.Interface().(client.Object)
	out.SetManagedFields(nil)
	return out
}
