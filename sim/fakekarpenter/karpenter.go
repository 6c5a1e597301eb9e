package fakekarpenter

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// The Karpenter kinds, served as unstructured objects.
var (
	NodePoolGVK  = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}
	NodeClaimGVK = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}
)

// Labels, annotations, taints and finalizers Karpenter reads or writes.
const (
	LabelNodePool    = "karpenter.sh/nodepool"
	LabelRegistered  = "karpenter.sh/registered"
	LabelInitialized = "karpenter.sh/initialized"

	AnnotationDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	AnnotationDoNotRepair  = "karpenter.sh/do-not-repair"
	// AnnotationTerminationTimestamp is the drain deadline Karpenter puts
	// on a NodeClaim being deleted (deletion + terminationGracePeriod, or
	// now for a forceful repair).
	AnnotationTerminationTimestamp = "karpenter.sh/nodeclaim-termination-timestamp"
	// AnnotationNodePoolHash is the hash of the NodePool template the
	// NodeClaim was made from; a different hash is static drift.
	AnnotationNodePoolHash = "karpenter.sh/nodepool-hash"
	// AnnotationBootImage records the NodeClass boot image a NodeClaim was
	// launched with (the model's stand-in for the provider's image ID).
	AnnotationBootImage = "twin.bootroll.dev/boot-image"

	FinalizerTermination = "karpenter.sh/termination"
	TaintDisrupted       = "karpenter.sh/disrupted"
)

// NodeClaim condition types.
const (
	ConditionLaunched            = "Launched"
	ConditionRegistered          = "Registered"
	ConditionInitialized         = "Initialized"
	ConditionConsolidatable      = "Consolidatable"
	ConditionDrifted             = "Drifted"
	ConditionDisruptionReason    = "DisruptionReason"
	ConditionDrained             = "Drained"
	ConditionInstanceTerminating = "InstanceTerminating"
)

// Disruption reasons: of budgets, of the DisruptionReason condition and of
// the counters.
const (
	ReasonEmpty         = "Empty"
	ReasonUnderutilized = "Underutilized"
	ReasonDrifted       = "Drifted"
	ReasonExpired       = "Expired"
	ReasonUnhealthy     = "Unhealthy"
)

// Consolidation policies.
const (
	WhenEmpty                = "WhenEmpty"
	WhenEmptyOrUnderutilized = "WhenEmptyOrUnderutilized"
)

// Profiles: the Karpenter versions the model can behave as.
const (
	ProfileV114 = "v1.14"
	ProfileV115 = "v1.15"
)

// Karpenter's timings (reference/karpenter.md).
const (
	// PollingPeriod is how often the disruption loop looks for work when
	// the last pass did nothing.
	PollingPeriod = 10 * time.Second
	// ValidationDelay is how long a consolidation or emptiness command
	// waits before it is validated again and executed.
	ValidationDelay = 15 * time.Second
	// PodEventDedupe is the shortest interval between two writes of a
	// NodeClaim's lastPodEventTime.
	PodEventDedupe = 10 * time.Second
	// LaunchTimeout and RegistrationTimeout are the liveness limits: a
	// NodeClaim that does not launch or register in time is deleted.
	LaunchTimeout       = 5 * time.Minute
	RegistrationTimeout = 15 * time.Minute
	// DriftRecheck is how often a NodeClaim is checked for drift without
	// an event.
	DriftRecheck = 5 * time.Minute
	// MinDrain is the least time a node's termination takes from its
	// deletion to the instance being deleted.
	MinDrain = 5 * time.Second
	// DrainRequeue is how often a drain that is not done is retried.
	DrainRequeue = time.Second
	// InstanceTerminationRequeue is the retry of a failed instance delete.
	InstanceTerminationRequeue = 5 * time.Second
	// StuckTerminating is how long a terminating pod blocks a drain.
	StuckTerminating = time.Minute
	// ReplacementTimeout bounds how long a command waits for its
	// replacements to initialize before it is abandoned.
	ReplacementTimeout = 10 * time.Minute
	// DefaultRepairToleration is the KWOK provider's repair policy: Ready
	// False or Unknown for this long.
	DefaultRepairToleration = 10 * time.Minute
	// DefaultExpireAfter is the NodePool default of expireAfter.
	DefaultExpireAfter = 720 * time.Hour
	// RepairUnhealthyPercent stops repair in a NodePool when more than this
	// share (rounded up) of its nodes is unhealthy.
	RepairUnhealthyPercent = 20
)

// Provider is the cloud provider: the twin's cluster model implements it.
//
// Launch starts an instance for claim, booting bootImage (the NodeClass
// image recorded on the claim), and returns the name its Node will have.
// claim's status carries the capacity and allocatable the Node should
// report and its labels, taints and startup taints those the kubelet
// registers with. The Node may appear at once or later (registration), and
// should carry an ownerReference to the NodeClaim and the label
// karpenter.sh/nodepool; Karpenter's registration adds what is missing.
// An error is a failed launch, retried until LaunchTimeout.
//
// Terminate deletes the instance of nodeName. It must not delete the Node
// object: Karpenter removes its finalizer after Terminate returns. An
// error is retried after InstanceTerminationRequeue.
type Provider interface {
	Launch(ctx context.Context, claim *unstructured.Unstructured, bootImage string) (nodeName string, err error)
	Terminate(ctx context.Context, nodeName string) error
}

// Options are the edges and settings of a Karpenter.
type Options struct {
	// Clock is read for every decision; required.
	Clock clock.PassiveClock
	// Provider launches and terminates instances; required.
	Provider Provider
	// Profile is ProfileV114 or ProfileV115 (the default).
	Profile string
	// NodeRepair is the NodeRepair feature gate (default off, in both
	// profiles).
	NodeRepair bool
	// RepairToleration is how long Ready must be False or Unknown before
	// repair; default DefaultRepairToleration.
	RepairToleration time.Duration
	// NodeClassImages returns the boot image a NodeClass launches now; a
	// change is drift. nil, or "", means no image is known.
	NodeClassImages func(nodeClass string) string
	// Capacity returns the allocatable resources of a node launched for a
	// NodePool (the model has one instance type per pool); default 4 CPU,
	// 16Gi memory, 110 pods.
	Capacity func(nodePool string) corev1.ResourceList
	// VerifySnapshot, for tests, compares every snapshot kept from watch
	// events (Observe) with a full listing of the cluster and counts
	// those that differ (SnapshotMismatches). It costs a full listing per
	// decision.
	VerifySnapshot bool
	// Trace, when set, records the model's decisions: kind like
	// "karpenter/disrupt", object like "node/x"; details hold strings,
	// integers and booleans.
	Trace func(kind, object string, details map[string]any)
}

// Stats counts what Karpenter did, for the twin's invariants (no-churn).
// Maps are keyed by disruption reason.
type Stats struct {
	// Launched counts NodeClaims created, for pending pods and as
	// replacements.
	Launched int
	// Replacements counts replacement NodeClaims launched by disruption
	// commands.
	Replacements map[string]int
	// Replaced counts nodes disrupted after replacements were launched for
	// them.
	Replaced map[string]int
	// Deleted counts nodes disrupted without a replacement (emptiness,
	// delete-consolidation, expiry, forceful repair).
	Deleted map[string]int
	// Terminated counts nodes whose termination finished.
	Terminated int
}

// Disrupted returns the number of nodes disrupted for reason, replaced or
// deleted.
func (s Stats) Disrupted(reason string) int { return s.Replaced[reason] + s.Deleted[reason] }

// Karpenter is the fake Karpenter: its reconcilers share one client, one
// clock and the in-memory state of the disruption orchestration queue. It
// is not safe for concurrent use.
type Karpenter struct {
	c    client.Client
	opts Options

	// deletableMemo keeps single-node consolidation's packing answers
	// while the snapshot and the queue stay the same (deletable).
	deletableMemo deletableMemo

	// The reconcilers, each with its own queue in the twin.
	Provisioner   *Provisioner
	Lifecycle     *NodeClaimLifecycle
	PodEvents     *PodEvents
	Disruption    *Disruption
	Orchestration *Orchestration
	Expiry        *Expiry
	Health        *Health
	Termination   *Termination

	stats    Stats
	queue    []*queuedCommand  // orchestration queue, in the order added
	blocked  map[string]string // last blocker traced, by method and node
	evicting map[string]string // last eviction refusal traced, by pod
	launched map[string]string // NodeClaim by the node name its launch returned
	draining map[string]bool   // nodes whose termination is under way

	state        *clusterState // kept from watch events by Observe
	mismatches   int           // snapshots that differed from a full listing
	lastMismatch string
}

// New returns a Karpenter that works through c. It panics without a Clock
// or a Provider, or with an unknown Profile.
func New(c client.Client, opts Options) *Karpenter {
	if opts.Clock == nil || opts.Provider == nil {
		panic("fakekarpenter: New needs Options.Clock and Options.Provider")
	}
	switch opts.Profile {
	case "":
		opts.Profile = ProfileV115
	case ProfileV114, ProfileV115:
	default:
		panic(fmt.Sprintf("fakekarpenter: unknown profile %q (want %q or %q)", opts.Profile, ProfileV114, ProfileV115))
	}
	if opts.RepairToleration <= 0 {
		opts.RepairToleration = DefaultRepairToleration
	}
	if opts.Capacity == nil {
		opts.Capacity = func(string) corev1.ResourceList {
			return corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("16Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			}
		}
	}
	k := &Karpenter{
		c:        c,
		opts:     opts,
		stats:    Stats{Replacements: map[string]int{}, Replaced: map[string]int{}, Deleted: map[string]int{}},
		blocked:  map[string]string{},
		evicting: map[string]string{},
		launched: map[string]string{},
		draining: map[string]bool{},
		state:    newClusterState(),
	}
	k.Provisioner = &Provisioner{k: k}
	k.Lifecycle = &NodeClaimLifecycle{k: k}
	k.PodEvents = &PodEvents{k: k}
	k.Disruption = &Disruption{k: k}
	k.Orchestration = &Orchestration{k: k}
	k.Expiry = &Expiry{k: k}
	k.Health = &Health{k: k}
	k.Termination = &Termination{k: k}
	return k
}

// Register serves the NodePool and NodeClaim kinds (cluster-scoped,
// unstructured, with a status subresource) on s, as installing Karpenter's
// CRDs does.
func Register(s *apiserver.Server) error {
	for _, gvk := range []schema.GroupVersionKind{NodePoolGVK, NodeClaimGVK} {
		if err := s.RegisterUnstructured(gvk, schema.GroupVersionKind{}, false); err != nil {
			return fmt.Errorf("registering %s: %w", gvk.Kind, err)
		}
	}
	return nil
}

// Launches returns Stats().Launched and Stats().Terminated without
// copying the per-reason counts (read at every timeline sample).
func (k *Karpenter) Launches() (launched, terminated int) {
	return k.stats.Launched, k.stats.Terminated
}

// Stats returns a copy of the counters.
func (k *Karpenter) Stats() Stats {
	return Stats{
		Launched:     k.stats.Launched,
		Replacements: maps.Clone(k.stats.Replacements),
		Replaced:     maps.Clone(k.stats.Replaced),
		Deleted:      maps.Clone(k.stats.Deleted),
		Terminated:   k.stats.Terminated,
	}
}

// Controller is one reconciler with the way a manager would feed it: the
// twin gives each its own queue, calls Map with every watch event and adds
// the requests it returns, and adds Start's requests (nil: none) when
// Karpenter starts, as an informer's initial list would.
type Controller struct {
	Name       string
	Reconciler reconcile.Reconciler
	Map        func(ev apiserver.Event) []reconcile.Request
	Start      func(ctx context.Context) ([]reconcile.Request, error)
}

// Controllers returns k's reconcilers in a fixed order.
func (k *Karpenter) Controllers() []Controller {
	claims := func(ctx context.Context) ([]reconcile.Request, error) {
		list, err := k.listClaims(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]reconcile.Request, 0, len(list))
		for _, u := range list {
			out = append(out, request(u.GetName()))
		}
		return out, nil
	}
	nodes := func(ctx context.Context) ([]reconcile.Request, error) {
		var list corev1.NodeList
		if err := k.c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, request(list.Items[i].Name))
		}
		return out, nil
	}
	singleton := func(key reconcile.Request) func(context.Context) ([]reconcile.Request, error) {
		return func(context.Context) ([]reconcile.Request, error) { return []reconcile.Request{key}, nil }
	}
	return []Controller{
		{Name: "karpenter.provisioner", Reconciler: k.Provisioner, Map: k.Provisioner.Map, Start: singleton(ProvisionerKey)},
		{Name: "karpenter.nodeclaim.lifecycle", Reconciler: k.Lifecycle, Map: k.Lifecycle.Map, Start: claims},
		{Name: "karpenter.nodeclaim.podevents", Reconciler: k.PodEvents, Map: k.PodEvents.Map},
		{Name: "karpenter.nodeclaim.expiration", Reconciler: k.Expiry, Map: k.Expiry.Map, Start: claims},
		{Name: "karpenter.node.health", Reconciler: k.Health, Map: k.Health.Map, Start: nodes},
		{Name: "karpenter.node.termination", Reconciler: k.Termination, Map: k.Termination.Map, Start: nodes},
		{Name: "karpenter.disruption", Reconciler: k.Disruption, Map: k.Disruption.Map, Start: singleton(DisruptionKey)},
		{Name: "karpenter.disruption.queue", Reconciler: k.Orchestration, Map: k.Orchestration.Map, Start: singleton(OrchestrationKey)},
	}
}

// now is the clock's time, without a monotonic reading.
func (k *Karpenter) now() time.Time { return k.opts.Clock.Now().Round(0) }

// trace records one decision.
func (k *Karpenter) trace(kind, object string, details map[string]any) {
	if k.opts.Trace != nil {
		k.opts.Trace(kind, object, details)
	}
}

// traceBlocked records that method could not disrupt node because of
// blocker, once until the blocker changes.
func (k *Karpenter) traceBlocked(method, node, blocker string) {
	key := method + "/" + node
	if k.blocked[key] == blocker {
		return
	}
	k.blocked[key] = blocker
	k.trace("karpenter/blocked", "node/"+node, map[string]any{"method": method, "blocker": blocker})
}

// unblocked forgets the blockers traced for node.
func (k *Karpenter) unblocked(node string) {
	for _, m := range methodNames {
		delete(k.blocked, m+"/"+node)
	}
}

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}
}
