// Package cluster is the twin's model of the Kubernetes cluster around
// bootroll: Nodes with their Ready condition, a bootc host per node, the
// pods of Deployments and DaemonSets with a ReplicaSet-like and a
// DaemonSet-like controller, PodDisruptionBudgets and the eviction rules
// that enforce them, and a scheduler. It runs on the engine's virtual time,
// writes its objects through the API server's admin client, and follows
// the controller's writes (cordons, taints, deletions) through watch events.
//
// The model is single-threaded and deterministic: every decision is taken
// in event order, every random draw comes from the engine's source (the
// scheduler's tiebreaks from their own stream seeded from the run's seed,
// so that they leave every other draw as it was), and nothing depends on
// map iteration order.
//
// Simplifications, kept on purpose:
//   - a Node's Ready condition follows its host: the kubelet writes it at
//     once for a reboot; a crashed or power-cut node stays Ready in the
//     API until the node lifecycle controller's NodeMonitorGracePeriod
//     has passed (there are no heartbeats otherwise; the not-ready and
//     unreachable taints are not written, only their effect is modelled);
//   - pods on a node that goes down stay bound and turn unready; the node
//     lifecycle controller deletes the workload pods of a node NotReady
//     for NotReadyEvictionTimeout (taint-based eviction), and they finish
//     terminating when the node's kubelet runs again;
//   - DaemonSets do not follow relabelling: a node relabelled into or out
//     of a DaemonSet's selector keeps the DaemonSet pods it had;
//   - workload pods tolerate no taint (beyond the default 300 s of
//     not-ready and unreachable); DaemonSet pods tolerate every taint
//     and are bound to their node by their controller, not the scheduler;
//   - the scheduler binds to the node with the most free CPU (then memory,
//     then pod slots, then at random), which spreads like kube-scheduler's
//     LeastAllocated score on like nodes and, like its selectHost, picks
//     at random among nodes alike.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

// The timing of the model's own processes.
const (
	// ScheduleDelay is how long after a pod becomes pending (or capacity
	// frees up while pods are pending) the scheduler runs; pods that become
	// pending meanwhile are placed in the same pass.
	ScheduleDelay = time.Second
	// PodStartup is the time from binding, or from the node becoming Ready
	// again, until a pod is Running and Ready.
	PodStartup = 5 * time.Second
	// PodGrace is how long a deleted (evicted) pod takes to terminate.
	PodGrace = 2 * time.Second
	// ShutdownDelay is the time from a reboot request until the host goes
	// down; a reboot shorter than twice this goes down halfway instead.
	ShutdownDelay = 5 * time.Second
)

// Names the model uses for the objects it creates.
const (
	// WorkloadNamespace holds the Deployments, their pods and their PDBs.
	WorkloadNamespace = "default"
	// DaemonSetNamespace holds the DaemonSets and their pods.
	DaemonSetNamespace = "kube-system"
	// LabelApp carries the workload or DaemonSet name on its pods; PDBs
	// select on it.
	LabelApp = "app"
	// PodFinalizer is put on every pod the model creates, so that a deleted
	// pod stays (with a deletionTimestamp) for its grace period, as the
	// kubelet keeps it while it terminates.
	PodFinalizer = "twin.bootroll.dev/kubelet"
)

// ErrNotRunning is returned by host calls and CrashDaemon while the node's
// daemon is not running (the node is down, rebooting, removed, or the daemon
// crashed and has not started again).
var ErrNotRunning = errors.New("node daemon is not running")

// Hooks lets the runner observe the cluster; nil funcs are skipped.
type Hooks struct {
	// Trace records one trace event (kind like "node/reboot-start", object
	// like "node/workers-3"); details hold strings and integers.
	Trace func(kind, object string, details map[string]any)
	// DaemonRestarted is called when a node's daemon process starts: for
	// every node when Start and AddNodes create it, and after a reboot, a
	// daemon crash or a node crash. The runner then builds a fresh
	// nodedaemon.Daemon for the node and enqueues it.
	DaemonRestarted func(node string)
	// DaemonDown is called when the node's daemon stops (daemon crash,
	// reboot, node crash, node removal): the runner stops reconciling that
	// node's daemon until DaemonRestarted.
	DaemonDown func(node string)
	// HostChanged is called when what the host's Observe returns changes
	// other than through the daemon's own Host call, that is when a stage
	// finishes; the runner enqueues the node's daemon. It is only called
	// while the daemon runs.
	HostChanged func(node string)
	// Reboot is called at the instant a reboot is requested of a node's
	// host (the daemon's Apply or Reboot; a node crash is not a request),
	// with the digest references the node boots now (from) and will boot
	// next (to). The invariants judge the node's state at that instant.
	Reboot func(node, from, to string)
}

// Cluster is the cluster model of one run. It is not safe for concurrent
// use.
type Cluster struct {
	// evictionsRefused counts evictions a PodDisruptionBudget refused.
	evictionsRefused uint64
	// pdbBlocked sums the closed intervals of nodes' pdbBlockedSince.
	pdbBlocked time.Duration
	eng        *engine.Engine
	tieRng     *rand.Rand
	api        *apiserver.Server
	c          client.Client // the admin client: neither counted nor faulted
	sc         *scenario.Scenario
	hooks      Hooks
	// clockOf is each node's clock offset (clockSkew), nil when every
	// clock is the cluster's: the kubelet stamps its node's and pods'
	// condition times with it (kubeletNow).
	clockOf func(node string) time.Duration
	// apps is set when the scheme serves apps/v1, so that Deployments,
	// ReplicaSets and DaemonSets exist as objects and own their pods.
	apps bool

	images    map[string]*scenario.Image // by digest
	groups    map[string]*group
	nodes     map[string]*node // every node ever created, removed ones too
	sorted    []string         // Nodes(), nil when stale
	sels      []*selector
	workloads map[string]*workload
	wlOrder   []*workload
	daemonSet []*daemonSet
	pdbs      []*pdb
	pods      map[types.NamespacedName]*pod

	pending  int    // workload pods not bound and not terminating
	capEpoch uint64 // counts capacity becoming free
	sched    *engine.Handle
	pdbFlush *engine.Handle

	schedCPU   int64
	schedMem   int64
	schedNodes int

	pullFault func(node, image string) error
	// statusDocs caches bootc status documents by what they show (bootc.go).
	statusDocs map[docKey][]byte
	started    bool

	// Registry faults (faults.go).
	outageUntil, slowUntil time.Time
	slowFactor             int

	// digestRefs memoises digestRef: parsing the reference was 1% of a
	// twin run, once per reboot and per host.
	digestRefs map[*scenario.Image]string

	pinned  map[string]*pinnedImage // the registry's pinned images (imagefs.go)
	starved []facts.StageStarvation // stagings that failed for lack of space

	// scratch is the Pod that bind and dropFinalizer hand the client: the
	// server keeps no reference to the object of a NoEcho patch, nor to
	// that of a Shared get (it gets the stored pod's fields), so one
	// serves every call; a new one was a KiB allocated per bind and per
	// pod finished.
	scratch corev1.Pod
	// scratchNode is the Node that writeNodeStatus reads the stored
	// Node into (Shared).
	scratchNode corev1.Node
}

// New builds the cluster model for sc on the engine and API server, and
// registers its eviction handler, which enforces PodDisruptionBudgets (429
// TooManyRequests when an eviction would violate one), and its watch. No
// object is created before Start.
// tieStream tells the scheduler's tiebreak stream from the engine's, which
// is seeded (seed, seed).
const tieStream = 0x5c4ed1e7

func New(eng *engine.Engine, api *apiserver.Server, sc *scenario.Scenario, hooks Hooks) (*Cluster, error) {
	c := &Cluster{
		// The scheduler's tiebreaks (drawTie): a stream of their own.
		tieRng:    rand.New(rand.NewPCG(eng.Seed(), eng.Seed()^tieStream)),
		eng:       eng,
		api:       api,
		c:         api.AdminClient(),
		sc:        sc,
		hooks:     hooks,
		images:    map[string]*scenario.Image{},
		groups:    map[string]*group{},
		nodes:     map[string]*node{},
		workloads: map[string]*workload{},
		pods:      map[types.NamespacedName]*pod{},
	}
	c.apps = c.c.Scheme().Recognizes(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	for i := range sc.Images {
		im := &sc.Images[i]
		if im.Digest == "" {
			return nil, fmt.Errorf("cluster: image %q has no digest", im.Name)
		}
		c.images[im.Digest] = im
	}
	for i := range sc.NodeGroups {
		g := &sc.NodeGroups[i]
		boot := sc.Image(g.BootImage)
		if boot == nil {
			return nil, fmt.Errorf("cluster: node group %q: boot image %q is not among the images", g.Name, g.BootImage)
		}
		c.groups[g.Name] = &group{spec: g, boot: boot, alloc: allocatable(g.Capacity), next: g.Count}
	}
	for i := range sc.Workloads {
		ws := &sc.Workloads[i]
		w := &workload{spec: ws, replicas: ws.Replicas, req: requests(ws.Requests), sel: c.selectorFor(ws.NodeSelector), pods: map[string]*pod{}}
		c.workloads[ws.Name] = w
		c.wlOrder = append(c.wlOrder, w)
		if ws.PDB != nil {
			c.pdbs = append(c.pdbs, &pdb{name: ws.Name, ns: WorkloadNamespace, spec: ws.PDB, selector: map[string]string{LabelApp: ws.Name}})
		}
	}
	// A PDB covers every workload whose pod labels its selector matches.
	for _, b := range c.pdbs {
		for _, w := range c.wlOrder {
			if subset(b.selector, w.podLabels()) {
				b.workloads = append(b.workloads, w)
				w.pdbs = append(w.pdbs, b)
			}
		}
	}
	for i := range sc.DaemonSets {
		ds := &sc.DaemonSets[i]
		c.daemonSet = append(c.daemonSet, &daemonSet{spec: ds, req: requests(ds.Requests)})
	}
	api.SetEvictionHandler(c.evict)
	api.Subscribe(c.onEvent)
	return c, nil
}

// Start creates the initial cluster: the DaemonSets and Deployments, the
// Nodes (Ready, the lowest-numbered `cordoned` of each group cordoned), a
// DaemonSet pod on every node each DaemonSet selects, the PDBs, and the
// workloads' pods, placed by the scheduler. The cluster starts settled:
// placed pods are Running and Ready at once, and every daemon runs
// (DaemonRestarted is called for each node, in name order).
func (c *Cluster) Start(ctx context.Context) error {
	if c.started {
		return errors.New("cluster: Start called twice")
	}
	c.started = true
	for _, ds := range c.daemonSet {
		if err := c.createDaemonSet(ctx, ds); err != nil {
			return err
		}
	}
	for _, w := range c.wlOrder {
		if err := c.createWorkload(ctx, w); err != nil {
			return err
		}
	}
	for i := range c.sc.NodeGroups {
		g := c.groups[c.sc.NodeGroups[i].Name]
		for j := range g.spec.Count {
			if _, err := c.createNode(ctx, g, j, true); err != nil {
				return err
			}
		}
		c.trace("nodegroup/created", "nodegroup/"+g.spec.Name, map[string]any{"nodes": g.spec.Count, "cordoned": min(g.spec.Cordoned, g.spec.Count)})
	}
	for _, b := range c.pdbs {
		if err := c.createPDB(ctx, b); err != nil {
			return err
		}
	}
	for _, w := range c.wlOrder {
		placed := 0
		for range w.replicas {
			p := c.newWorkloadPod(w)
			if n := c.pick(w.sel, w.req); n != nil {
				c.place(p, n)
				p.started = true
				placed++
			}
			if err := c.createPod(ctx, p, p.started); err != nil {
				return err
			}
			if p.node == nil {
				c.enqueue(p)
			} else {
				c.setHealthy(p, true)
			}
		}
		c.trace("workload/created", "deployment/"+WorkloadNamespace+"/"+w.spec.Name, map[string]any{"replicas": w.replicas, "pending": w.replicas - placed})
	}
	c.flushPDBs()
	for _, name := range c.Nodes() {
		c.nodes[name].host.startDaemon()
	}
	return nil
}

// Nodes returns the names of the nodes that exist, sorted.
func (c *Cluster) Nodes() []string {
	if c.sorted == nil {
		c.sorted = make([]string, 0, len(c.nodes))
		for name, n := range c.nodes {
			if !n.gone {
				c.sorted = append(c.sorted, name)
			}
		}
		slices.Sort(c.sorted)
	}
	return slices.Clone(c.sorted)
}

// SetPullFault sets a hook consulted when a stage starts; a non-nil error
// fails the stage at once with that error (a registry outage, an auth
// failure). nil removes it.
func (c *Cluster) SetPullFault(fn func(node, image string) error) { c.pullFault = fn }

// Reboots returns the number of completed requested reboots of a node
// (boots after Apply or Reboot, whatever they booted). Boots after a node
// crash are not counted.
func (c *Cluster) Reboots(node string) int {
	if n := c.nodes[node]; n != nil {
		return n.host.reboots
	}
	return 0
}

// RebootsFor returns how many reboots were requested for a node to boot
// image: a short name, a digest reference or a digest. Repeated requests in
// one boot (idempotent Apply) count once.
func (c *Cluster) RebootsFor(node, image string) int {
	if n := c.nodes[node]; n != nil {
		return n.host.requestedFor[c.digestOf(image)]
	}
	return 0
}

// Booted returns the digest reference the node booted last, "" for an
// unknown node.
func (c *Cluster) Booted(node string) string {
	if n := c.nodes[node]; n != nil {
		return n.host.booted.ref
	}
	return ""
}

// Unavailable reports whether a node cannot run pods now: it is NotReady,
// a reboot is in progress (from the request on), it is down after a crash,
// or it was removed.
func (c *Cluster) Unavailable(node string) bool {
	n := c.nodes[node]
	return n == nil || n.gone || n.host.state != hostUp || !n.ready
}

// SchedulableCapacity returns the allocatable CPU (millicores) and the
// number of the nodes the scheduler may bind workload pods to: Ready, not
// cordoned, not being deleted, and without NoSchedule or NoExecute taints.
func (c *Cluster) SchedulableCapacity() (cpuMilli int64, nodes int) {
	return c.schedCPU, c.schedNodes
}

// SchedulableMemory returns the allocatable memory (bytes) of the nodes
// SchedulableCapacity counts.
func (c *Cluster) SchedulableMemory() int64 { return c.schedMem }

// Demand returns the CPU (millicores) and memory (bytes) the workload pods
// not terminating request, bound or pending: what the workloads ask the
// schedulable capacity for. DaemonSet pods are not counted (capacity is
// allocatable, which they share on every node). Cost: one step per
// workload.
func (c *Cluster) Demand() (cpuMilli, memBytes int64) {
	for _, w := range c.workloads {
		cpuMilli += int64(w.active) * w.req.cpu
		memBytes += int64(w.active) * w.req.mem
	}
	return cpuMilli, memBytes
}

// PendingPods returns the number of workload pods not bound to a node.
func (c *Cluster) PendingPods() int { return c.pending }

// EvictionsRefused returns how many evictions PodDisruptionBudgets have
// refused so far (anyone's).
func (c *Cluster) EvictionsRefused() uint64 { return c.evictionsRefused }

// PDBBlockedDrain returns the node-time that drains have spent blocked by
// PodDisruptionBudgets so far: for each node, from an eviction of one of
// its pods that a PDB refused until the next eviction of one of its pods
// is admitted, the node is uncordoned (the drain given up) or it is
// deleted; an interval still open counts until now. Cost: one step per
// node.
func (c *Cluster) PDBBlockedDrain() time.Duration {
	d := c.pdbBlocked
	now := c.eng.Now()
	for _, n := range c.nodes {
		if !n.pdbBlockedSince.IsZero() {
			d += now.Sub(n.pdbBlockedSince)
		}
	}
	return d
}

// blocked opens n's PDB-blocked interval unless one is open.
func (c *Cluster) blocked(n *node) {
	if n != nil && n.pdbBlockedSince.IsZero() {
		n.pdbBlockedSince = c.eng.Now()
	}
}

// unblock closes n's PDB-blocked interval, if one is open.
func (c *Cluster) unblock(n *node) {
	if n != nil && !n.pdbBlockedSince.IsZero() {
		c.pdbBlocked += c.eng.Now().Sub(n.pdbBlockedSince)
		n.pdbBlockedSince = time.Time{}
	}
}

// PDBStatus returns the state of every PDB, sorted by namespace and name.
func (c *Cluster) PDBStatus() []facts.PDBState {
	out := make([]facts.PDBState, 0, len(c.pdbs))
	for _, b := range c.pdbs {
		out = append(out, b.state())
	}
	slices.SortFunc(out, func(a, b facts.PDBState) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out
}

// onEvent follows the writes of the controller and of the model itself:
// Node schedulability and deletion, pod deletion. The model's own state is
// updated before it writes, so handling an event twice is harmless.
func (c *Cluster) onEvent(ev apiserver.Event) {
	switch o := ev.Object.(type) {
	case *corev1.Node:
		n := c.nodes[o.Name]
		if n == nil || n.gone || n.uid != "" && o.UID != n.uid {
			return
		}
		if ev.Type == apiserver.Deleted {
			c.nodeGone(n)
			return
		}
		c.syncNode(n, o)
	case *corev1.Pod:
		p := c.pods[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}]
		if p == nil || p.uid != "" && o.UID != p.uid {
			return
		}
		switch {
		case ev.Type == apiserver.Deleted:
			c.podGone(p)
		case o.DeletionTimestamp != nil:
			c.terminate(p)
		}
	}
}

// digestOf normalises an image named by short name, digest reference or
// digest to its digest.
func (c *Cluster) digestOf(image string) string {
	if strings.HasPrefix(image, "sha256:") {
		return image
	}
	if d := imageref.Digest(image); d != "" {
		return d
	}
	if im := c.sc.Image(image); im != nil {
		return im.Digest
	}
	for _, im := range c.sc.Images {
		if im.Ref == image {
			return im.Digest
		}
	}
	return image
}

// imageFor returns the scenario image a stage or apply names: by digest
// for a digest reference, else by ref.
func (c *Cluster) imageFor(ref string) *scenario.Image {
	if d := imageref.Digest(ref); d != "" {
		return c.images[d]
	}
	for i := range c.sc.Images {
		if c.sc.Images[i].Ref == ref {
			return &c.sc.Images[i]
		}
	}
	return nil
}

// digestRef returns the digest reference of an image: its ref when that is
// one, else the ref's repository with the digest.
func (c *Cluster) digestRef(im *scenario.Image) string {
	if ref, ok := c.digestRefs[im]; ok {
		return ref
	}
	ref := im.Ref
	if !imageref.IsDigest(ref) {
		var err error
		if ref, err = imageref.WithDigest(im.Ref, im.Digest); err != nil {
			panic(err) // the scenario loader validated both
		}
	}
	if c.digestRefs == nil {
		c.digestRefs = map[*scenario.Image]string{}
	}
	c.digestRefs[im] = ref
	return ref
}

// tracing reports whether trace writes anywhere: a hot path builds its
// details only then.
func (c *Cluster) tracing() bool { return c.hooks.Trace != nil }

func (c *Cluster) trace(kind, object string, details map[string]any) {
	if c.tracing() {
		c.hooks.Trace(kind, object, details)
	}
}

// must stops the run on a failed admin write: the admin client is neither
// faulted nor raced, so a failure is a bug in the model. NotFound is
// tolerated, since another party may have deleted the object.
func must(err error, what string) {
	if err != nil && !apierrors.IsNotFound(err) {
		panic(fmt.Sprintf("sim/cluster: %s: %v", what, err))
	}
}

// res is an amount of the resources the scheduler counts.
type res struct{ cpu, mem, pods int64 }

func (a res) plus(b res) res  { return res{a.cpu + b.cpu, a.mem + b.mem, a.pods + b.pods} }
func (a res) minus(b res) res { return res{a.cpu - b.cpu, a.mem - b.mem, a.pods - b.pods} }
func (a res) covers(b res) bool {
	return a.cpu >= b.cpu && a.mem >= b.mem && a.pods >= b.pods
}

// allocatable reads a node group's capacity; pods defaults to 110.
func allocatable(m map[string]resource.Quantity) res {
	r := res{pods: 110}
	if q, ok := m[string(corev1.ResourceCPU)]; ok {
		r.cpu = q.MilliValue()
	}
	if q, ok := m[string(corev1.ResourceMemory)]; ok {
		r.mem = q.Value()
	}
	if q, ok := m[string(corev1.ResourcePods)]; ok {
		r.pods = q.Value()
	}
	return r
}

// requests reads a pod's requests; every pod takes one pod slot.
func requests(m map[string]resource.Quantity) res {
	r := res{pods: 1}
	if q, ok := m[string(corev1.ResourceCPU)]; ok {
		r.cpu = q.MilliValue()
	}
	if q, ok := m[string(corev1.ResourceMemory)]; ok {
		r.mem = q.Value()
	}
	return r
}

func resourceList(m map[string]resource.Quantity) corev1.ResourceList {
	if len(m) == 0 {
		return nil
	}
	out := make(corev1.ResourceList, len(m))
	for k, q := range m {
		out[corev1.ResourceName(k)] = q.DeepCopy()
	}
	return out
}

// subset reports whether every label of sel is in l.
func subset(sel, l map[string]string) bool {
	for k, v := range sel {
		if got, ok := l[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// SetNodeClocks gives each node's clock offset from the cluster's (a
// clockSkew fault): the simulated kubelet stamps the node's conditions
// and its pods' with its node's clock, as a real one does.
func (c *Cluster) SetNodeClocks(offset func(node string) time.Duration) { c.clockOf = offset }

// kubeletNow is the time on node's clock, to the second: what its
// kubelet writes into conditions.
func (c *Cluster) kubeletNow(node string) time.Time {
	t := c.eng.Now()
	if c.clockOf != nil {
		t = t.Add(c.clockOf(node))
	}
	return t.Truncate(time.Second)
}
