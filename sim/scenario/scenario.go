// Package scenario is the scenario file format of the twin: its Go types, a
// strict loader that reports every error with file, line and field, --set
// overrides for sweeps and negative controls, and the JSON Schema shipped in
// scenarios/schema.json.
//
// The types carry their rules in struct tags that the decoder, the --set
// path resolver and the schema generator all read:
//
//	json:"name,omitempty"  the YAML key (camelCase)
//	required:"true"        the key must be present
//	default:"<yaml>"       the value used when the key is absent
//	pattern:"<name>"       a string must match the named pattern (patterns)
//	minimum, maximum       bounds of a number
//	minItems:"n"           a list needs at least n items
//	oneOf:"<group>"        exactly one key of the group must be present
//
// Doc comments of the types and fields become the schema's descriptions
// through the generated docs.go; after changing them run
//
//	go test ./sim/scenario -run 'TestDocs|TestSchema' -update
//
// which rewrites docs.go and scenarios/schema.json.
package scenario

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// Scenario is one scenario file: the cluster to build, the bootroll objects
// to apply, what happens over virtual time, and what must hold.
type Scenario struct {
	// Name identifies the scenario in traces and reports; a DNS label.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// Description says in prose what the scenario exercises.
	Description string `json:"description,omitempty"`

	// Seed seeds the run's PRNG when the command line gives none. Default 1.
	Seed uint64 `json:"seed,omitempty" default:"1"`

	// Limit is the virtual-time limit of a run, measured from start; every
	// event, fault and expectation must fall before it.
	Limit time.Duration `json:"limit" required:"true"`

	// Start is the virtual wall-clock time at which the run begins (RFC 3339);
	// maintenance windows and budget schedules are evaluated against it. It is
	// converted to UTC. Default 2026-01-05T00:00:00Z, a Monday.
	Start time.Time `json:"start,omitempty" default:"2026-01-05T00:00:00Z"`

	// Images are the OS images the scenario refers to by short name.
	Images []Image `json:"images" required:"true" minItems:"1"`

	// Host sets the timing distributions of the simulated hosts.
	Host Host `json:"host,omitempty"`

	// NodeGroups are the nodes that exist at the start.
	NodeGroups []NodeGroup `json:"nodeGroups,omitempty"`

	// Workloads are the Deployments (with optional PDBs) that run on the nodes.
	Workloads []Workload `json:"workloads,omitempty"`

	// DaemonSets run one pod on every node they select; drains leave them.
	DaemonSets []DaemonSet `json:"daemonSets,omitempty"`

	// Bootroll holds the bootroll objects applied at the start.
	Bootroll Bootroll `json:"bootroll,omitempty"`

	// Karpenter, when present, runs the fake Karpenter with these NodePools.
	Karpenter *Karpenter `json:"karpenter,omitempty"`

	// PinnedImageSets are the PinnedImageSet objects applied at the start.
	PinnedImageSets []PinnedImageSet `json:"pinnedImageSets,omitempty"`

	// Events are changes made at fixed virtual times; events at the same time
	// happen in file order.
	Events []Event `json:"events,omitempty"`

	// Faults are failures injected at a fixed time or at a time drawn from
	// the seeded PRNG inside a window.
	Faults []Fault `json:"faults,omitempty"`

	// Profile sets how the informer caches behave: default (watch events
	// reach each cache milliseconds after the write), stale (up to tens of
	// seconds) or instant (no caches: reads see the store, handlers run at
	// write time and a reconcile takes no time; the twin before issue 11).
	// Default default.
	Profile Profile `json:"profile,omitempty" default:"default"`

	// Expect says what must hold at and after the end of the run.
	Expect Expect `json:"expect,omitempty"`

	// NegativeControls are variants of this scenario, made with --set
	// overrides, that must each be caught by the named invariant. A control
	// runs as the scenario with its set applied after the command line's; at
	// load time every control's overrides must give a valid scenario.
	NegativeControls []NegativeControl `json:"negativeControls,omitempty"`

	// File is the file the scenario was read from; it is not part of the
	// format.
	File string `json:"-"`
}

// Image is an OS image that pools and node groups refer to by name.
type Image struct {
	// Name is the short name that pools, node groups, events and
	// expectations use for the image.
	Name string `json:"name" required:"true" pattern:"shortName"`

	// Ref is the reference a pool's spec.image carries: a digest reference
	// (registry/repo@sha256:<64 hex>) or a tag reference that the simulated
	// registry resolves to digest.
	Ref string `json:"ref" required:"true" pattern:"imageRef"`

	// Digest is what ref resolves to, "sha256:<64 hex>". For a digest
	// reference it must equal the reference's digest and defaults to it; for a
	// tag reference the default is the SHA-256 of Ref.
	Digest string `json:"digest,omitempty" pattern:"digest"`

	// Size is the compressed image size; with host.pullBandwidth it sets how
	// long staging takes, and it counts against the node's image filesystem.
	Size resource.Quantity `json:"size" required:"true"`

	// FailsToBoot makes every boot into this image fail in the way
	// bootFailure says.
	FailsToBoot bool `json:"failsToBoot,omitempty"`

	// BootFailure is how a boot into the image fails when failsToBoot is set:
	// FallBack (the bootloader returns to the previous deployment, so the node
	// comes back Ready on the old digest), NeverReady (the node stays
	// NotReady until something else reboots it), Flapping (the node comes
	// up Ready on the new image with its daemon running, then flaps
	// NotReady and Ready), NetworkNotReady (the node boots the new image
	// and its daemon runs, but the kubelet reports NotReady because the
	// container network never comes up, so a Rollback can run) or
	// CrashLoop (the new image panics before it is Ready and reboots,
	// until the bootloader's boot counter runs out and it falls back to
	// the previous deployment). Default FallBack.
	BootFailure BootFailure `json:"bootFailure,omitempty" default:"FallBack"`
}

// BootFailure is how a failing boot shows itself: FallBack, NeverReady,
// Flapping, NetworkNotReady or CrashLoop.
type BootFailure string

// The ways a boot fails.
const (
	BootFallBack   BootFailure = "FallBack"
	BootNeverReady BootFailure = "NeverReady"
	BootFlapping   BootFailure = "Flapping"
	BootCrashLoop  BootFailure = "CrashLoop"
	// BootNetworkNotReady is a boot whose node stays NotReady while its
	// daemon runs.
	BootNetworkNotReady BootFailure = "NetworkNotReady"
)

func (BootFailure) enumValues() []string {
	return []string{string(BootFallBack), string(BootNeverReady), string(BootFlapping), string(BootNetworkNotReady), string(BootCrashLoop)}
}

// Host is the timing model of the simulated hosts.
type Host struct {
	// PullBandwidth is each node's download rate from the registry, in bytes
	// per second. Default 100Mi.
	PullBandwidth resource.Quantity `json:"pullBandwidth,omitempty" default:"100Mi"`

	// StageOverhead is the staging time beyond the download (unpacking and
	// writing the deployment). Default fixed 20s.
	StageOverhead Distribution `json:"stageOverhead,omitempty" default:"20s"`

	// Reboot is the time from the reboot request until the node is Ready
	// again. Default uniform 60s to 180s.
	Reboot Distribution `json:"reboot,omitempty" default:"{dist: uniform, min: 60s, max: 180s}"`

	// DaemonStartup is the time the node daemon takes to run after a boot or a
	// daemon crash. Default fixed 5s.
	DaemonStartup Distribution `json:"daemonStartup,omitempty" default:"5s"`
}

// Distribution is a random duration drawn from the run's seeded PRNG. A bare
// duration ("90s") is shorthand for {dist: fixed, value: 90s}.
type Distribution struct {
	// Dist is the family: fixed (value), uniform (min, max), normal (mean,
	// stddev) or lognormal (median, sigma). Normal and lognormal samples are
	// clamped to [min, max] when min or max is given.
	Dist DistKind `json:"dist" required:"true"`

	// Value is the duration of a fixed distribution.
	Value time.Duration `json:"value,omitempty"`

	// Min is the lower bound of a uniform distribution, or the lower clamp of
	// a normal or lognormal one.
	Min time.Duration `json:"min,omitempty"`

	// Max is the upper bound of a uniform distribution, or the upper clamp of
	// a normal or lognormal one (no clamp when absent).
	Max time.Duration `json:"max,omitempty"`

	// Mean is the mean of a normal distribution.
	Mean time.Duration `json:"mean,omitempty"`

	// Stddev is the standard deviation of a normal distribution.
	Stddev time.Duration `json:"stddev,omitempty"`

	// Median is the median of a lognormal distribution, e^mu.
	Median time.Duration `json:"median,omitempty"`

	// Sigma is the standard deviation of the logarithm of a lognormal
	// distribution (dimensionless).
	Sigma float64 `json:"sigma,omitempty" minimum:"0"`
}

// DistKind names a distribution family.
type DistKind string

// The distribution families.
const (
	DistFixed     DistKind = "fixed"
	DistUniform   DistKind = "uniform"
	DistNormal    DistKind = "normal"
	DistLognormal DistKind = "lognormal"
)

func (DistKind) enumValues() []string {
	return []string{string(DistFixed), string(DistUniform), string(DistNormal), string(DistLognormal)}
}

// NodeGroup is a set of like nodes that exist at the start.
type NodeGroup struct {
	// Name names the group; its nodes are <name>-<i> with i counted from 0,
	// and nodes added later continue the numbering.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// Count is how many nodes the group has at the start. All groups
	// together, with the nodes events add, have at most MaxNodes.
	Count int `json:"count" required:"true" minimum:"0" maximum:"100000"`

	// Labels are the labels of every node in the group.
	Labels map[string]string `json:"labels,omitempty"`

	// Taints are the taints every node of the group starts with.
	Taints []Taint `json:"taints,omitempty"`

	// Capacity is each node's allocatable resources; cpu and memory are
	// required, pods defaults to 110.
	Capacity map[string]resource.Quantity `json:"capacity" required:"true"`

	// BootImage is the short name of the image the nodes boot at the start.
	BootImage string `json:"bootImage" required:"true"`

	// Cordoned is how many of the group's nodes (the lowest-numbered) start
	// cordoned by the admin; bootroll must leave them cordoned.
	Cordoned int `json:"cordoned,omitempty" minimum:"0"`

	// ImageFsCapacity is the size of each node's image filesystem. Default
	// 100Gi.
	ImageFsCapacity resource.Quantity `json:"imageFsCapacity,omitempty" default:"100Gi"`

	// ImageFsUsed is how much of the image filesystem is in use at the start.
	// Default 0.
	ImageFsUsed resource.Quantity `json:"imageFsUsed,omitempty" default:"0"`

	// Karpenter, when present, makes the group's nodes Karpenter-managed:
	// each has a NodeClaim of the named NodePool.
	Karpenter *NodeGroupKarpenter `json:"karpenter,omitempty"`

	// Conditions are Node conditions besides Ready that the nodes report
	// (a node problem detector's, NetworkUnavailable), for the pools'
	// healthChecks.nodeConditions. Default none.
	Conditions []NodeCondition `json:"conditions,omitempty"`
}

// NodeCondition is a Node condition a node reports.
type NodeCondition struct {
	// Type is the condition type, e.g. NetworkUnavailable; not Ready.
	Type string `json:"type" required:"true"`

	// Status is True, False or Unknown.
	Status ConditionStatus `json:"status" required:"true"`
}

// ConditionStatus is a condition's status: True, False or Unknown.
type ConditionStatus string

func (ConditionStatus) enumValues() []string { return []string{"True", "False", "Unknown"} }

// NodeGroupKarpenter ties a node group to a fake Karpenter NodePool.
type NodeGroupKarpenter struct {
	// NodePool is the name of an entry in karpenter.nodePools.
	NodePool string `json:"nodePool" required:"true"`
}

// Taint is a node taint.
type Taint struct {
	// Key is the taint key.
	Key string `json:"key" required:"true"`

	// Value is the taint value.
	Value string `json:"value,omitempty"`

	// Effect is NoSchedule, PreferNoSchedule or NoExecute.
	Effect TaintEffect `json:"effect" required:"true"`
}

// Object is the taint as a Karpenter NodePool or NodeClaim spec lists it,
// with no value key when it has none (Karpenter's CRD refuses an empty
// value).
func (t Taint) Object() map[string]any {
	m := map[string]any{"key": t.Key, "effect": string(t.Effect)}
	if t.Value != "" {
		m["value"] = t.Value
	}
	return m
}

// TaintEffect is a taint's effect.
type TaintEffect string

func (TaintEffect) enumValues() []string {
	return []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}
}

// Workload is a Deployment with an optional PodDisruptionBudget.
type Workload struct {
	// Name names the Deployment, its pods and its PDB.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// Replicas is the number of pods at the start. All workloads together
	// have at most MaxWorkloadPods.
	Replicas int `json:"replicas" required:"true" minimum:"0" maximum:"500000"`

	// Requests are each pod's resource requests.
	Requests map[string]resource.Quantity `json:"requests,omitempty"`

	// NodeSelector restricts the pods to nodes with these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// PDB, when present, is the workload's PodDisruptionBudget.
	PDB *PDB `json:"pdb,omitempty"`

	// Unmanaged makes the pods bare pods that no controller owns (as
	// kubectl run makes): there is no Deployment, nothing recreates a pod
	// that goes (the replica count follows the pods that are left), and a
	// drain evicts them only with the pool's drain.force. Scaling it
	// creates or deletes bare pods, as a person would; a PDB over it counts
	// the pods that exist.
	Unmanaged bool `json:"unmanaged,omitempty"`

	// EmptyDir gives each pod an emptyDir volume; a drain evicts such pods
	// only with the pool's drain.deleteEmptyDirData.
	EmptyDir bool `json:"emptyDir,omitempty"`
}

// PDB is a PodDisruptionBudget over a workload's pods; exactly one of
// maxUnavailable and minAvailable is given.
type PDB struct {
	// MaxUnavailable is how many pods may be unavailable: an integer or a
	// percentage.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty" oneOf:"budget"`

	// MinAvailable is how many pods must stay available: an integer or a
	// percentage.
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty" oneOf:"budget"`
}

// DaemonSet runs one pod on each node it selects.
type DaemonSet struct {
	// Name names the DaemonSet.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// Requests are each pod's resource requests.
	Requests map[string]resource.Quantity `json:"requests,omitempty"`

	// NodeSelector restricts the DaemonSet to nodes with these labels.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// Bootroll holds the bootroll objects of a scenario and the deliberately
// broken controller and daemon settings of negative controls.
type Bootroll struct {
	// Pools are the BootcNodePool objects.
	Pools []Pool `json:"pools,omitempty"`

	// TestOnly breaks the controller or the node daemons on purpose, for
	// negative controls; every setting must be caught by the invariant its
	// description names.
	TestOnly TestOnly `json:"testOnly,omitempty"`
}

// Pool is a BootcNodePool. Options left out are left out of the object too,
// so the controller's own defaults apply (see api/v1alpha1).
type Pool struct {
	// Name names the BootcNodePool.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// NodeSelector selects the pool's nodes by label; it must not be empty.
	NodeSelector map[string]string `json:"nodeSelector" required:"true"`

	// Image is the short name of the image the pool rolls out; spec.image is
	// set to that image's ref.
	Image string `json:"image" required:"true"`

	// RolloutSpec is spec.rollout, written beside image: maxUnavailable and
	// maxStaging.
	v1alpha1.RolloutSpec `json:",inline"`

	// Paused stops new staging and new reboot slots.
	Paused bool `json:"paused,omitempty"`

	// DrainTimeout bounds a drain (controller default 10m).
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// HealthTimeout bounds the time from the reboot request until the node
	// is healthy on the desired digest (controller default 15m).
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`

	// Windows are daily maintenance windows in UTC; when any is given,
	// reboot slots are only handed out inside one.
	Windows []v1alpha1.MaintenanceWindow `json:"windows,omitempty"`

	// FailurePolicy says what to do with nodes that fail their update.
	FailurePolicy v1alpha1.FailurePolicy `json:"failurePolicy,omitempty"`

	// Karpenter configures protection of Karpenter-managed nodes.
	Karpenter v1alpha1.KarpenterOptions `json:"karpenter,omitempty"`

	// Drain holds the drain's opt-ins: force (evict pods no controller
	// owns) and deleteEmptyDirData (evict pods with emptyDir volumes).
	Drain v1alpha1.DrainSpec `json:"drain,omitempty"`

	// HealthChecks are spec.healthChecks: readyFor, nodeConditions and
	// daemonSets (the scenario's DaemonSets are in namespace kube-system).
	HealthChecks v1alpha1.HealthChecks `json:"healthChecks,omitempty"`
}

// TestOnly holds deliberately broken controller and node daemon settings.
// They exist only so negative controls can show that each invariant
// catches the bug it is meant to catch; production never sets them.
type TestOnly struct {
	// IgnoreSlotLimit hands out reboot slots without counting them against
	// maxUnavailable; caught by max-unavailable.
	IgnoreSlotLimit bool `json:"ignoreSlotLimit,omitempty"`

	// DeleteInsteadOfEvict drains by deleting pods instead of going through
	// the Eviction API, so PDBs are not honoured; caught by pdb-respected.
	DeleteInsteadOfEvict bool `json:"deleteInsteadOfEvict,omitempty"`

	// SkipKarpenterProtection never sets do-not-disrupt or do-not-repair,
	// so Karpenter may reap a node in its slot; caught by
	// no-reap-while-updating.
	SkipKarpenterProtection bool `json:"skipKarpenterProtection,omitempty"`

	// SkipUncordon leaves updated nodes cordoned; caught by no-leaked-cordon.
	SkipUncordon bool `json:"skipUncordon,omitempty"`

	// KeepAnnotations never removes the Karpenter annotations bootroll
	// added (do-not-disrupt, do-not-repair) from Nodes and NodeClaims;
	// caught by no-leaked-annotation.
	KeepAnnotations bool `json:"keepAnnotations,omitempty"`

	// ForgetSlotsOnRestart makes a restarted controller ignore the slot
	// table it finds on its first pass of a pool, so it hands the held
	// slots out again and more than maxUnavailable nodes are down; caught
	// by max-unavailable (with a controller restart mid-rollout).
	ForgetSlotsOnRestart bool `json:"forgetSlotsOnRestart,omitempty"`

	// NoHealthTimeout never fails a node that does not come back healthy, so
	// a bad image stalls the rollout; caught by converges.
	NoHealthTimeout bool `json:"noHealthTimeout,omitempty"`

	// SkipHealthChecks verifies a node on Ready alone, ignoring its pool's
	// healthChecks, so a node whose checks fail counts as Updated; caught
	// by updated-healthy.
	SkipHealthChecks bool `json:"skipHealthChecks,omitempty"`

	// VerifyOnCache takes a node's verdict on the cached Node and pods
	// alone, so a node whose cache still shows it passing its checks after
	// the API server no longer does counts as Updated; caught by
	// updated-healthy (with a stale cache).
	VerifyOnCache bool `json:"verifyOnCache,omitempty"`

	// ForgetDownOnLeft retargets a node that is down on the image its
	// pool leaves, never failed on it, as a healthy one: it can take no
	// slot while down, so nothing brings it back; caught by final-images
	// (the pool stalls on it).
	ForgetDownOnLeft bool `json:"forgetDownOnLeft,omitempty"`

	// SettleOnOrderedAt lets the release of a record deleted mid-reboot
	// call a boot order voided by a new desired image settled at once,
	// though the node is still down in the reboot the daemon asked for
	// it, so the node is given back mid-reboot; caught by
	// no-reap-while-updating (with Karpenter repair).
	SettleOnOrderedAt bool `json:"settleOnOrderedAt,omitempty"`

	// FreeSlotBeforeVerify gives a node's reboot slot back as soon as its
	// reboot is requested, before it is verified, so more nodes than
	// maxUnavailable are down at once; caught by max-unavailable.
	FreeSlotBeforeVerify bool `json:"freeSlotBeforeVerify,omitempty"`

	// KeepBootOrder never withdraws a boot order and carries a node's last
	// one over to each new desired image the pool gives it, so the next
	// slot's cordon lets the daemon boot the new image before the drain;
	// caught by no-unprotected-reboot.
	KeepBootOrder bool `json:"keepBootOrder,omitempty"`

	// CountSlotsFromCache writes the pool's slot table without the
	// optimistic lock, from what a possibly stale cache said, so two passes
	// hand out the same free slot, and a node takes up a slot its cached
	// pool shows without reading the table afresh; caught by
	// max-unavailable (with stale caches).
	CountSlotsFromCache bool `json:"countSlotsFromCache,omitempty"`

	// ForgetPriorCordon does not record a Node's cordon state before
	// bootroll cordons it, so a node an admin had cordoned is uncordoned
	// after its update; caught by cleanup.
	ForgetPriorCordon bool `json:"forgetPriorCordon,omitempty"`

	// HaltFromLiveRecords computes a pool's halt from the live BootcNodes
	// only (the old behaviour), so deleting the failed node lifts the halt
	// and the bad image rolls on; caught by halt-is-final.
	HaltFromLiveRecords bool `json:"haltFromLiveRecords,omitempty"`

	// SkipCleanupOnDelete removes bootroll's finalizers without undoing
	// anything, so a deleted pool or BootcNode leaves its Nodes cordoned
	// and annotated; caught by cleanup.
	SkipCleanupOnDelete bool `json:"skipCleanupOnDelete,omitempty"`

	// DropAnnotationOwnership records every Karpenter protection
	// annotation as bootroll's, also one that was there before, so bootroll
	// removes annotations it did not add; caught by cleanup.
	DropAnnotationOwnership bool `json:"dropAnnotationOwnership,omitempty"`

	// IgnoreWindows hands out reboot slots whether or not one of the
	// pool's maintenance windows is open; caught by grant-in-window.
	IgnoreWindows bool `json:"ignoreWindows,omitempty"`

	// NoStagingReserve runs the node daemons with no OS staging reserve, so
	// pinned-image pulls may take the room the next OS image needs; caught
	// by os-staging-not-starved.
	NoStagingReserve bool `json:"noStagingReserve,omitempty"`

	// ForgetLastReboot makes a (re)started node daemon disregard the reboot
	// it recorded in status.daemon.lastReboot, so a node whose new image
	// failed to boot is staged and rebooted into it again; caught by
	// no-double-reboot.
	ForgetLastReboot bool `json:"forgetLastReboot,omitempty"`
}

// Karpenter configures the fake Karpenter.
type Karpenter struct {
	// Version is the behaviour profile of Karpenter's disruption and repair:
	// v1.14 (no do-not-repair) or v1.15. Default v1.15.
	Version KarpenterVersion `json:"version,omitempty" default:"v1.15"`

	// NodeRepair turns on the NodeRepair feature gate (off by default, as in
	// Karpenter).
	NodeRepair bool `json:"nodeRepair,omitempty"`

	// RepairToleration is how long a node may be NotReady before repair
	// acts on it. Default 10m, the KWOK provider's policy.
	RepairToleration time.Duration `json:"repairToleration,omitempty" default:"10m"`

	// InstallCRDsAt is when Karpenter's CRDs are installed; absent means they
	// are installed at the start.
	InstallCRDsAt *time.Duration `json:"installCRDsAt,omitempty"`

	// NodeClasses are the node classes NodePools launch nodes from.
	NodeClasses []NodeClass `json:"nodeClasses,omitempty"`

	// NodePools are the Karpenter NodePools.
	NodePools []KarpenterNodePool `json:"nodePools,omitempty"`
}

// KarpenterVersion is a Karpenter behaviour profile: v1.14 or v1.15.
type KarpenterVersion string

func (KarpenterVersion) enumValues() []string { return []string{"v1.14", "v1.15"} }

// NodeClass is a Karpenter node class; its boot image is what new nodes
// boot, which can differ from a pool's image (boot-image skew).
type NodeClass struct {
	// Name names the node class.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// BootImage is the short name of the image nodes launched from this class
	// boot first.
	BootImage string `json:"bootImage" required:"true"`

	// RegistrationDelay is how long a node launched from this class takes
	// from its NodeClaim's launch until its Node registers Ready (the
	// instance's boot and kubelet start); 0s registers at once, as KWOK's
	// default does. On --target cluster it is the KWOKNodeClass's
	// nodeRegistrationDelay.
	RegistrationDelay time.Duration `json:"registrationDelay,omitempty" default:"30s"`
}

// KarpenterNodePool is a Karpenter NodePool; defaults are Karpenter's own.
type KarpenterNodePool struct {
	// Name names the NodePool.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// NodeClass names the node class new nodes launch from; it may be left
	// out when there is exactly one.
	NodeClass string `json:"nodeClass,omitempty"`

	// Labels are put on the nodes this NodePool launches.
	Labels map[string]string `json:"labels,omitempty"`

	// Capacity is the allocatable resources of the nodes this NodePool
	// launches.
	Capacity map[string]resource.Quantity `json:"capacity,omitempty"`

	// StartupTaints are put on new nodes and must be removed by another agent
	// before Karpenter considers the node initialized.
	StartupTaints []Taint `json:"startupTaints,omitempty"`

	// ConsolidationPolicy is WhenEmpty or WhenEmptyOrUnderutilized. Default
	// WhenEmptyOrUnderutilized.
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty" default:"WhenEmptyOrUnderutilized"`

	// ConsolidateAfter is how long a node must see no pod events before it
	// can be consolidated, or Never. Default 0s.
	ConsolidateAfter NeverDuration `json:"consolidateAfter,omitempty" default:"0s"`

	// ExpireAfter is the age at which a node is deleted, or Never. Default
	// 720h.
	ExpireAfter NeverDuration `json:"expireAfter,omitempty" default:"720h"`

	// Budgets are the disruption budgets; the most restrictive active one
	// wins. Default one budget of 10% of the nodes.
	Budgets []Budget `json:"budgets,omitempty" default:"[{nodes: 10%}]"`
}

// ConsolidationPolicy is WhenEmpty or WhenEmptyOrUnderutilized.
type ConsolidationPolicy string

func (ConsolidationPolicy) enumValues() []string {
	return []string{"WhenEmpty", "WhenEmptyOrUnderutilized"}
}

// Budget is a Karpenter disruption budget.
type Budget struct {
	// Nodes is how many nodes may be disrupted at once: an integer or a
	// percentage (rounded up).
	Nodes intstr.IntOrString `json:"nodes" required:"true"`

	// Schedule is a cron schedule (UTC) at which the budget becomes active;
	// absent means always active. Requires duration.
	Schedule string `json:"schedule,omitempty"`

	// Duration is how long the budget stays active each time its schedule
	// fires.
	Duration *time.Duration `json:"duration,omitempty"`

	// Reasons limits the budget to these disruption reasons; empty means all.
	Reasons []DisruptionReason `json:"reasons,omitempty"`
}

// DisruptionReason is a Karpenter disruption reason: Underutilized, Empty,
// Drifted, or (v1.15) Unhealthy.
type DisruptionReason string

func (DisruptionReason) enumValues() []string {
	return []string{"Underutilized", "Empty", "Drifted", "Unhealthy"}
}

// NeverDuration is a duration or the word Never, as Karpenter's
// consolidateAfter and expireAfter are.
type NeverDuration struct {
	// Duration is the duration when Never is false.
	Duration time.Duration

	// Never is true for the value "Never".
	Never bool
}

// PinnedImageSet is a PinnedImageSet object: container images every selected
// node must prefetch and keep.
type PinnedImageSet struct {
	// Name names the PinnedImageSet.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// Pool selects the nodes of this bootroll pool.
	Pool string `json:"pool,omitempty" oneOf:"selector"`

	// NodeSelector selects nodes by label.
	NodeSelector map[string]string `json:"nodeSelector,omitempty" oneOf:"selector"`

	// Images are the container images to pin.
	Images []PinnedImage `json:"images" required:"true" minItems:"1"`

	// Concurrency is the set's spec.concurrency (controller default 2).
	Concurrency *int32 `json:"concurrency,omitempty" minimum:"1" maximum:"16"`

	// At is when the set is created, from the start of the run; absent
	// creates it at the start.
	At *time.Duration `json:"at,omitempty"`
}

// PinnedImage is a container image to prefetch.
type PinnedImage struct {
	// Ref is a digest reference, registry/repo@sha256:<64 hex>.
	Ref string `json:"ref" required:"true" pattern:"digestRef"`

	// Size is the compressed image size.
	Size resource.Quantity `json:"size" required:"true"`

	// Layers are the image's layers, by name; a layer that another image
	// already brought to the node is not downloaded again and is stored
	// once. What size holds beyond the layers is the image's own. Absent:
	// the image is one layer of its own.
	Layers []Layer `json:"layers,omitempty"`

	// SizeUnknown makes the daemon unable to read the image's size from its
	// manifest (say the registry is reachable only through a containerd
	// mirror), so the prefetch manager assumes its estimate (1Gi) and the
	// space check before the pull can be wrong: the pull may then run out
	// of space in containerd.
	SizeUnknown bool `json:"sizeUnknown,omitempty"`
}

// Layer is one layer of a pinned image.
type Layer struct {
	// Name identifies the layer across images (its digest, or any name).
	Name string `json:"name" required:"true"`

	// Size is the layer's compressed size.
	Size resource.Quantity `json:"size" required:"true"`
}

// Event is a change made at a fixed virtual time; exactly one action is
// given.
type Event struct {
	// At is the virtual time of the event, from the start of the run.
	At time.Duration `json:"at" required:"true"`

	// SetPoolImage changes a pool's image.
	SetPoolImage *SetPoolImage `json:"setPoolImage,omitempty" oneOf:"action"`

	// Pause pauses or resumes a pool.
	Pause *Pause `json:"pause,omitempty" oneOf:"action"`

	// ScaleWorkload changes a workload's replica count.
	ScaleWorkload *ScaleWorkload `json:"scaleWorkload,omitempty" oneOf:"action"`

	// AddNodes adds nodes to a node group.
	AddNodes *AddNodes `json:"addNodes,omitempty" oneOf:"action"`

	// RemoveNodes deletes nodes of a node group.
	RemoveNodes *RemoveNodes `json:"removeNodes,omitempty" oneOf:"action"`

	// SetPinnedImages replaces the images of a PinnedImageSet.
	SetPinnedImages *SetPinnedImages `json:"setPinnedImages,omitempty" oneOf:"action"`

	// SetNodeClassImage changes the boot image of a Karpenter node class.
	SetNodeClassImage *SetNodeClassImage `json:"setNodeClassImage,omitempty" oneOf:"action"`

	// SetNodePoolLabels changes the labels of a Karpenter NodePool's node
	// template (static drift).
	SetNodePoolLabels *SetNodePoolLabels `json:"setNodePoolLabels,omitempty" oneOf:"action"`

	// human and Karpenter actions (helper actions)

	// DeletePool deletes a BootcNodePool, as kubectl delete does.
	DeletePool *DeletePool `json:"deletePool,omitempty" oneOf:"action"`

	// CreatePool creates a BootcNodePool, as kubectl apply does: a new
	// pool, or one deleted earlier created again.
	CreatePool *Pool `json:"createPool,omitempty" oneOf:"action"`

	// SetPool changes the fields of a pool's spec that it gives.
	SetPool *SetPool `json:"setPool,omitempty" oneOf:"action"`

	// RelabelNode sets and removes labels of a node, which may move it
	// into or out of a pool.
	RelabelNode *RelabelNode `json:"relabelNode,omitempty" oneOf:"action"`

	// AnnotateNode sets and removes annotations of a node, as kubectl
	// annotate does: for example an operator's
	// karpenter.sh/do-not-disrupt, which bootroll must leave alone.
	AnnotateNode *AnnotateNode `json:"annotateNode,omitempty" oneOf:"action"`

	// DeleteNode deletes a Node object, as an admin's kubectl delete node.
	DeleteNode *NodeRef `json:"deleteNode,omitempty" oneOf:"action"`

	// DeleteBootcNode deletes a node's BootcNode object.
	DeleteBootcNode *NodeRef `json:"deleteBootcNode,omitempty" oneOf:"action"`

	// CordonNode cordons a node by hand, as kubectl cordon does.
	CordonNode *NodeRef `json:"cordonNode,omitempty" oneOf:"action"`

	// UncordonNode uncordons a node by hand, as kubectl uncordon does.
	UncordonNode *NodeRef `json:"uncordonNode,omitempty" oneOf:"action"`

	// SetPDB creates or changes a workload's PodDisruptionBudget.
	SetPDB *SetPDB `json:"setPDB,omitempty" oneOf:"action"`

	// DeletePDB deletes a workload's PodDisruptionBudget.
	DeletePDB *DeletePDB `json:"deletePDB,omitempty" oneOf:"action"`

	// KarpenterCRDs installs or removes Karpenter's CRDs (and with them
	// Karpenter).
	KarpenterCRDs *KarpenterCRDs `json:"karpenterCRDs,omitempty" oneOf:"action"`
}

// DeletePool deletes a BootcNodePool; its finalizers, if the controller
// sets any, run as they would in a cluster.
type DeletePool struct {
	// Pool is the pool's name.
	Pool string `json:"pool" required:"true"`
}

// SetPool changes a pool's spec as an operator's kubectl edit does: only
// the fields given change, the others keep their value. Setting image
// back to the previous one is a revert; two setPool events in a row a
// flip-flop.
type SetPool struct {
	// Pool is the pool's name.
	Pool string `json:"pool" required:"true"`

	// Image is the short name of the new image.
	Image string `json:"image,omitempty"`

	// NodeSelector replaces the pool's node selector; it must not be
	// empty.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// RolloutSpec holds the new maxUnavailable and maxStaging, written
	// beside pool.
	v1alpha1.RolloutSpec `json:",inline"`

	// Paused pauses (true) or resumes (false) the pool.
	Paused *bool `json:"paused,omitempty"`

	// FailurePolicy replaces the pool's failure policy.
	FailurePolicy *v1alpha1.FailurePolicy `json:"failurePolicy,omitempty"`

	// Windows replaces the pool's maintenance windows; an empty list
	// removes them.
	Windows *[]v1alpha1.MaintenanceWindow `json:"windows,omitempty"`

	// DrainTimeout is the new drain timeout.
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// HealthTimeout is the new health timeout.
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`
}

// RelabelNode changes a node's labels as kubectl label does.
type RelabelNode struct {
	// Node is the node's name, <group>-<i>.
	Node string `json:"node" required:"true"`

	// Set are labels to add or change.
	Set map[string]string `json:"set,omitempty"`

	// Remove are label keys to remove.
	Remove []string `json:"remove,omitempty"`
}

// AnnotateNode changes a node's annotations as kubectl annotate does.
type AnnotateNode struct {
	// Node is the node's name, <group>-<i>.
	Node string `json:"node" required:"true"`

	// Set are annotations to add or change.
	Set map[string]string `json:"set,omitempty"`

	// Remove are annotation keys to remove.
	Remove []string `json:"remove,omitempty"`
}

// Changes returns the keys e changes on a Node with annotations cur: set,
// the keys of Set (sorted) that cur lacks or holds another value for, and
// removed, the keys of Remove that cur holds. An operator's intent is what
// the action changes (the twin and the cluster target tell the invariants
// of those only).
func (e *AnnotateNode) Changes(cur map[string]string) (set, removed []string) {
	for _, k := range slices.Sorted(maps.Keys(e.Set)) {
		if v, ok := cur[k]; !ok || v != e.Set[k] {
			set = append(set, k)
		}
	}
	for _, k := range e.Remove {
		if _, ok := cur[k]; ok {
			removed = append(removed, k)
		}
	}
	return set, removed
}

// NodeRef names the node an action acts on.
type NodeRef struct {
	// Node is the node's name, <group>-<i>.
	Node string `json:"node" required:"true"`
}

// SetPDB creates a workload's PodDisruptionBudget, or replaces its budget;
// exactly one of maxUnavailable and minAvailable is given.
type SetPDB struct {
	// Workload is the workload's name.
	Workload string `json:"workload" required:"true"`

	// MaxUnavailable is how many pods may be unavailable: an integer or a
	// percentage.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty" oneOf:"budget"`

	// MinAvailable is how many pods must stay available: an integer or a
	// percentage.
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty" oneOf:"budget"`
}

// DeletePDB deletes a workload's PodDisruptionBudget.
type DeletePDB struct {
	// Workload is the workload's name.
	Workload string `json:"workload" required:"true"`
}

// KarpenterCRDs installs or removes Karpenter's CRDs. Removing them, as a
// helm uninstall with CRDs does, deletes every NodePool and NodeClaim
// (their finalizers are dropped, the nodes stay) and stops Karpenter;
// installing them again starts Karpenter as karpenter.installCRDsAt does.
type KarpenterCRDs struct {
	// Installed is true to install, false to remove.
	Installed bool `json:"installed" required:"true"`
}

// SetNodeClassImage changes the boot image a Karpenter node class launches
// nodes from, as an operator bumps an EC2NodeClass's AMI: Karpenter marks
// the NodeClaims launched from the old image Drifted and replaces them
// (drift honours do-not-disrupt and the NodePool's budgets), and new nodes
// boot the new image.
type SetNodeClassImage struct {
	// NodeClass is the node class's name (karpenter.nodeClasses).
	NodeClass string `json:"nodeClass" required:"true"`

	// Image is the short name of the new boot image.
	Image string `json:"image" required:"true"`
}

// SetNodePoolLabels sets labels of a Karpenter NodePool's node template
// (spec.template.metadata.labels), as an operator edits the NodePool:
// Karpenter marks the NodeClaims made from the old template Drifted
// (static drift) and replaces them, within the NodePool's Drifted budget
// and honouring do-not-disrupt; new nodes carry the new labels.
type SetNodePoolLabels struct {
	// NodePool is the NodePool's name (karpenter.nodePools).
	NodePool string `json:"nodePool" required:"true"`

	// Set are labels to add or change on the template.
	Set map[string]string `json:"set" required:"true"`
}

// SetPinnedImages replaces a PinnedImageSet's spec.images: images left out
// are removed from the set, new ones added.
type SetPinnedImages struct {
	// Set is the PinnedImageSet's name.
	Set string `json:"set" required:"true"`

	// Images are the set's new images.
	Images []PinnedImage `json:"images" required:"true" minItems:"1"`
}

// SetPoolImage changes a pool's spec.image.
type SetPoolImage struct {
	// Pool is the pool's name.
	Pool string `json:"pool" required:"true"`

	// Image is the short name of the new image.
	Image string `json:"image" required:"true"`
}

// Pause sets a pool's spec.paused.
type Pause struct {
	// Pool is the pool's name.
	Pool string `json:"pool" required:"true"`

	// Paused is the new value; false resumes the pool. Default true.
	Paused bool `json:"paused,omitempty" default:"true"`
}

// ScaleWorkload sets a workload's replica count.
type ScaleWorkload struct {
	// Workload is the workload's name.
	Workload string `json:"workload" required:"true"`

	// Replicas is the new replica count.
	Replicas int `json:"replicas" required:"true" minimum:"0" maximum:"500000"`
}

// AddNodes adds nodes to a group; they boot the group's boot image.
type AddNodes struct {
	// Group is the node group's name.
	Group string `json:"group" required:"true"`

	// Count is how many nodes to add.
	Count int `json:"count" required:"true" minimum:"1" maximum:"100000"`
}

// RemoveNodes deletes nodes of a group, the highest-numbered first, as a
// scale-down would.
type RemoveNodes struct {
	// Group is the node group's name.
	Group string `json:"group" required:"true"`

	// Count is how many nodes to delete.
	Count int `json:"count" required:"true" minimum:"1" maximum:"10000"`
}

// Fault is a failure injected at a time; exactly one of at and window and
// exactly one fault kind is given.
type Fault struct {
	// At is the virtual time of the fault.
	At *time.Duration `json:"at,omitempty" oneOf:"time"`

	// Window makes the fault time a uniform draw from the seeded PRNG.
	Window *TimeRange `json:"window,omitempty" oneOf:"time"`

	// ControllerRestart stops the controller and starts a new one with empty
	// caches and queues.
	ControllerRestart *ControllerRestart `json:"controllerRestart,omitempty" oneOf:"kind"`

	// DaemonCrash kills node daemons; they start again after downFor.
	DaemonCrash *DaemonCrash `json:"daemonCrash,omitempty" oneOf:"kind"`

	// NodeCrash takes nodes down hard: the kubelet dies, the Node shows
	// Ready=Unknown after the node lifecycle controller's grace period
	// (50s) and its pods stay bound until they are evicted 300s later;
	// the nodes boot again after downFor on their current boot image.
	NodeCrash *NodeCrash `json:"nodeCrash,omitempty" oneOf:"kind"`

	// API and watch faults (helper cache). These are in effect over a span
	// rather than at one moment: the window, or from at to the end of the
	// run; every draw they make comes from the seeded PRNG.

	// APIErrors fails or slows API requests of the controller or the node
	// daemons while in effect.
	APIErrors *APIErrors `json:"apiErrors,omitempty" oneOf:"kind"`

	// WatchFaults delays or drops the watch events that feed the informer
	// caches while in effect; a dropped event breaks the watch of its kind
	// until a re-list.
	WatchFaults *WatchFaults `json:"watchFaults,omitempty" oneOf:"kind"`

	// ControllerCrash crashes the controller process right after one of its
	// writes succeeds, possibly between two writes of one reconcile; it
	// starts again, with empty caches and queues, after downFor.
	ControllerCrash *ControllerCrash `json:"controllerCrash,omitempty" oneOf:"kind"`

	// DaemonWriteCrash crashes node daemons right after one of their writes
	// succeeds; each starts again after downFor.
	DaemonWriteCrash *DaemonWriteCrash `json:"daemonWriteCrash,omitempty" oneOf:"kind"`
	// host and cluster faults (helper actions)

	// PowerCycle switches nodes off and on again.
	PowerCycle *PowerCycle `json:"powerCycle,omitempty" oneOf:"kind"`

	// ClockSkew sets the clocks of nodes (what their daemons read) ahead
	// of or behind the cluster's.
	ClockSkew *ClockSkew `json:"clockSkew,omitempty" oneOf:"kind"`

	// LongReboot makes the next reboot of nodes take much longer than
	// host.reboot says.
	LongReboot *LongReboot `json:"longReboot,omitempty" oneOf:"kind"`

	// BootFailure makes the next boot of nodes into a new image fail.
	BootFailure *BootFailureFault `json:"bootFailure,omitempty" oneOf:"kind"`

	// RegistryOutage makes every image pull fail for a while.
	RegistryOutage *RegistryOutage `json:"registryOutage,omitempty" oneOf:"kind"`

	// SlowPulls makes image pulls slower for a while.
	SlowPulls *SlowPulls `json:"slowPulls,omitempty" oneOf:"kind"`

	// DiskFill fills the image filesystem of nodes.
	DiskFill *DiskFill `json:"diskFill,omitempty" oneOf:"kind"`

	// NodeConditionAfterBoot makes nodes report a Node condition after
	// their next boot, for a pool's healthChecks.nodeConditions.
	NodeConditionAfterBoot *NodeConditionAfterBoot `json:"nodeConditionAfterBoot,omitempty" oneOf:"kind"`

	// DaemonSetNotReadyAfterBoot keeps a DaemonSet's pod on nodes from
	// getting Ready after their next boot, for a pool's
	// healthChecks.daemonSets.
	DaemonSetNotReadyAfterBoot *DaemonSetNotReadyAfterBoot `json:"daemonSetNotReadyAfterBoot,omitempty" oneOf:"kind"`

	// ReadyFlapsAfterBoot makes nodes flap NotReady a few times after
	// their next boot, for a pool's healthChecks.readyFor.
	ReadyFlapsAfterBoot *ReadyFlapsAfterBoot `json:"readyFlapsAfterBoot,omitempty" oneOf:"kind"`
}

// NodeConditionAfterBoot makes the targeted nodes, once their next boot
// (any boot, a reboot or a crash's) is up, report condition type with
// status for duration, then as their group says (or not at all), or for
// good when for is absent.
type NodeConditionAfterBoot struct {
	Target `json:",inline"`

	// Type is the condition type, e.g. NetworkUnavailable; not Ready.
	Type string `json:"type" required:"true"`

	// Status is the status the condition has: True, False or Unknown.
	Status ConditionStatus `json:"status" required:"true"`

	// For is how long the condition stays so after the boot; absent means
	// for good (until the following boot).
	For *time.Duration `json:"for,omitempty"`
}

// DaemonSetNotReadyAfterBoot keeps the pod of a DaemonSet on the
// targeted nodes from getting Ready after their next boot (any boot) for
// duration, or until the following boot when for is absent.
type DaemonSetNotReadyAfterBoot struct {
	Target `json:",inline"`

	// DaemonSet names one of the scenario's daemonSets.
	DaemonSet string `json:"daemonSet" required:"true"`

	// For is how long after the boot the pod stays not Ready; absent means
	// until the following boot.
	For *time.Duration `json:"for,omitempty"`
}

// ReadyFlapsAfterBoot makes the targeted nodes, once Ready after their
// next boot (any boot), go NotReady flaps times: Ready for ready, then
// NotReady for notReady, each time; then they stay Ready.
type ReadyFlapsAfterBoot struct {
	Target `json:",inline"`

	// Flaps is how many times the node goes NotReady. Default 2.
	Flaps int `json:"flaps,omitempty" default:"2" minimum:"1" maximum:"100"`

	// Ready is how long the node is Ready before each flap. Default 30s.
	Ready time.Duration `json:"ready,omitempty" default:"30s"`

	// NotReady is how long each flap lasts. Default 20s.
	NotReady time.Duration `json:"notReady,omitempty" default:"20s"`
}

// PowerCycle switches the targeted nodes off and, after offFor, on again:
// as a node crash, the daemon and any stage or reboot in flight are lost
// and the pods stay bound; off for less than the node lifecycle
// controller's grace period (50s), the Node never shows NotReady.
type PowerCycle struct {
	Target `json:",inline"`

	// OffFor is how long the nodes stay off. Default 30s.
	OffFor time.Duration `json:"offFor,omitempty" default:"30s"`
}

// ClockSkew runs the clocks of the targeted nodes offset from the
// controller's and the API server's: their daemons read them (the times
// they write into BootcNode status). Chrony or NTP keep real clocks within
// milliseconds, but a host that has just booted can run seconds to
// minutes off until it syncs.
type ClockSkew struct {
	Target `json:",inline"`

	// Offset is how far the nodes' clocks are ahead (positive) or behind
	// (negative), e.g. -3s; at most 24h either way.
	Offset SignedDuration `json:"offset" required:"true"`

	// For is how long the clocks stay off; absent means for good.
	For *time.Duration `json:"for,omitempty"`
}

// MaxClockSkew bounds clockSkew.offset.
const MaxClockSkew = 24 * time.Hour

// SignedDuration is a duration that may be negative, written as Go
// writes durations: -3s, 90s.
type SignedDuration time.Duration

func (d SignedDuration) String() string { return time.Duration(d).String() }

// LongReboot makes the next requested reboot of the targeted nodes (or the
// one in progress) take duration from its request until the node is
// Ready, instead of a draw from host.reboot.
type LongReboot struct {
	Target `json:",inline"`

	// Duration is how long the reboot takes. Default 30m.
	Duration time.Duration `json:"duration,omitempty" default:"30m"`
}

// BootFailureFault makes the next boot of the targeted nodes into an image
// other than the booted one fail in the way mode says, whatever the image.
type BootFailureFault struct {
	Target `json:",inline"`

	// Mode is how the boot fails (see images[].bootFailure).
	Mode BootFailure `json:"mode" required:"true"`
}

// RegistryOutage makes every pull from the registry (OS staging and
// pinned images) fail from the fault's time for duration.
type RegistryOutage struct {
	// For is how long the outage lasts.
	For time.Duration `json:"for" required:"true"`
}

// SlowPulls divides the download rate of the pulls that start in the
// window by factor.
type SlowPulls struct {
	// For is how long pulls are slow.
	For time.Duration `json:"for" required:"true"`

	// Factor is how many times longer a download takes. Default 10.
	Factor int `json:"factor,omitempty" default:"10" minimum:"2" maximum:"1000"`
}

// DiskFill makes something other than bootroll (logs, other images) take
// size of the image filesystem of the targeted nodes, for duration or
// for good.
type DiskFill struct {
	Target `json:",inline"`

	// Size is how much space is taken; it is capped at what is free.
	Size resource.Quantity `json:"size" required:"true"`

	// For is how long the space stays taken; absent means for good.
	For *time.Duration `json:"for,omitempty"`
}

// APIErrors fails or slows the API requests of a process kind.
type APIErrors struct {
	// Verbs are the request verbs hit: get, list, create, update, patch,
	// delete, deletecollection, or a subresource form (update/status,
	// patch/status, create/eviction); a plain verb also hits its
	// subresource forms. Default all.
	Verbs []string `json:"verbs,omitempty"`

	// Codes are the failures drawn from, uniformly: conflict (409; writes
	// only, as no API server answers a read with it: a get or list the
	// fault hits draws from the other codes, and is not failed when there
	// are none), tooManyRequests (429, with Retry-After: 1, which the process's
	// client-go waits out and retries up to ten times, each retry drawn
	// again, before the caller sees it), internalError (500), timeout (the
	// write is applied or not on a coin drawn from the PRNG, and the caller
	// gets a timeout either way). Default [internalError].
	Codes []APIErrorCode `json:"codes,omitempty"`

	// Rate is the probability that a matching request fails.
	Rate float64 `json:"rate,omitempty" minimum:"0" maximum:"1"`

	// Latency is extra time each matching request takes, drawn per request;
	// it lengthens the reconcile that makes it. Default none.
	Latency *Distribution `json:"latency,omitempty"`

	// Who is whose requests are hit: controller, daemon or all. Default all.
	Who FaultWho `json:"who,omitempty" default:"all"`
}

// CodesFor is what a request the fault hits draws its failure from:
// Codes (default [internalError]), without conflict for a read (read
// false: a get or list), since an API server answers no read with 409.
// Empty when the fault can fail no such request.
func (e *APIErrors) CodesFor(write bool) []APIErrorCode {
	if len(e.Codes) == 0 {
		return defaultCodes
	}
	if write || !slices.Contains(e.Codes, "conflict") {
		return e.Codes
	}
	return slices.DeleteFunc(slices.Clone(e.Codes), func(c APIErrorCode) bool { return c == "conflict" })
}

var defaultCodes = []APIErrorCode{"internalError"}

// APIErrorCode is an injected API failure: conflict, tooManyRequests,
// internalError or timeout.
type APIErrorCode string

func (APIErrorCode) enumValues() []string {
	return []string{"conflict", "tooManyRequests", "internalError", "timeout"}
}

// FaultWho names the processes a fault hits: controller, daemon or all.
type FaultWho string

func (FaultWho) enumValues() []string { return []string{"controller", "daemon", "all"} }

// WatchFaults delays or drops watch events.
type WatchFaults struct {
	// Drop is the probability that a watch event is lost; the watch of its
	// kind then delivers nothing until its reflector re-lists, relistAfter
	// later.
	Drop float64 `json:"drop,omitempty" minimum:"0" maximum:"1"`

	// RelistAfter is how long a broken watch takes to re-list. Default
	// uniform 1s to 10s.
	RelistAfter *Distribution `json:"relistAfter,omitempty"`

	// Delay is the extra delivery delay of each event, drawn uniformly from
	// zero to it; events of one kind keep their order. Default 0s.
	Delay time.Duration `json:"delay,omitempty" default:"0s"`

	// Who is whose caches are hit: controller, daemon or all. Default all.
	Who FaultWho `json:"who,omitempty" default:"all"`
}

// ControllerCrash crashes the controller after a write.
type ControllerCrash struct {
	// AfterWrites crashes it right after its n-th successful write counted
	// from the start of the fault; one crash.
	AfterWrites int `json:"afterWrites,omitempty" oneOf:"when" minimum:"1"`

	// Rate crashes it after each successful write with this probability.
	Rate float64 `json:"rate,omitempty" oneOf:"when" minimum:"0" maximum:"1"`

	// DownFor is how long no controller runs after a crash. Default 0s.
	DownFor time.Duration `json:"downFor,omitempty" default:"0s"`
}

// DaemonWriteCrash crashes node daemons after a write.
type DaemonWriteCrash struct {
	// AfterWrites crashes each daemon right after its n-th successful write
	// counted from the start of the fault (counted per daemon); once per
	// daemon.
	AfterWrites int `json:"afterWrites,omitempty" oneOf:"when" minimum:"1"`

	// Rate crashes a daemon after each successful write with this
	// probability.
	Rate float64 `json:"rate,omitempty" oneOf:"when" minimum:"0" maximum:"1"`

	// DownFor is how long the daemon stays down. Default 10s.
	DownFor time.Duration `json:"downFor,omitempty" default:"10s"`

	// HostCalls counts the daemon's calls to its host (stage, apply,
	// rollback, reboot) as steps too, so a crash can also fall right after
	// one: for example after asking the host to reboot and before the
	// next write.
	HostCalls bool `json:"hostCalls,omitempty"`
}

// Profile is how stale the informer caches are: default, stale or instant.
type Profile string

func (Profile) enumValues() []string { return []string{"default", "stale", "instant"} }

// TimeRange is a span of virtual time [from, to).
type TimeRange struct {
	// From is the start of the span.
	From time.Duration `json:"from" required:"true"`

	// To is the end of the span; it must be after from.
	To time.Duration `json:"to" required:"true"`
}

// ControllerRestart restarts the bootroll controller. There is never more
// than one controller process: a restart while the controller is down
// keeps it down until the later of the two starts.
type ControllerRestart struct {
	// DownFor is how long no controller runs. Default 0s.
	DownFor time.Duration `json:"downFor,omitempty" default:"0s"`
}

// Target picks the nodes a fault hits: one named node, or count nodes of a
// group drawn from the seeded PRNG.
type Target struct {
	// Node is a node name, <group>-<i>.
	Node string `json:"node,omitempty" oneOf:"target"`

	// Group picks the nodes from this node group.
	Group string `json:"group,omitempty" oneOf:"target"`

	// Count is how many nodes of the group to hit; only with group. Default
	// 1.
	Count int `json:"count,omitempty" minimum:"1" maximum:"10000" default:"1"`
}

// DaemonCrash kills the node daemon of the targeted nodes.
type DaemonCrash struct {
	Target `json:",inline"`

	// DownFor is how long the daemon stays down before its pod restarts it.
	// Default 10s.
	DownFor time.Duration `json:"downFor,omitempty" default:"10s"`
}

// NodeCrash takes the targeted nodes down.
type NodeCrash struct {
	Target `json:",inline"`

	// DownFor is how long a node stays down before it boots again. Default
	// 5m.
	DownFor time.Duration `json:"downFor,omitempty" default:"5m"`
}

// Expect is what a run must show.
type Expect struct {
	// Invariants are checked after every event. Default all of them.
	Invariants []Invariant `json:"invariants,omitempty" default:"[max-unavailable, pdb-respected, no-reap-while-updating, no-leaked-cordon, no-leaked-annotation, no-double-reboot, no-churn, converges, os-staging-not-starved, pinned-sets-exact, no-unprotected-reboot, halt-is-final, cleanup, no-stranded-node, updated-healthy, grant-in-window]"`

	// CompletesWithin is the virtual time, from the start, by which every
	// pool must be up to date or halted.
	CompletesWithin *time.Duration `json:"completesWithin,omitempty"`

	// FinalImages maps a pool name to the short name of the image all its
	// nodes must boot at the end.
	FinalImages map[string]string `json:"finalImages,omitempty"`

	// FailedNodes maps a pool name to how many of its nodes must be Failed at
	// the end: an exact count or {min, max}.
	FailedNodes map[string]CountRange `json:"failedNodes,omitempty"`

	// Halted maps a pool name to whether it must end halted.
	Halted map[string]bool `json:"halted,omitempty"`

	// PinnedSets maps a PinnedImageSet name to what its status must say at
	// the end.
	PinnedSets map[string]PinnedSetExpect `json:"pinnedSets,omitempty"`
}

// PinnedSetExpect is what a PinnedImageSet's status must say at the end.
type PinnedSetExpect struct {
	// Condition is the condition type that must be True: Complete,
	// Progressing or Degraded.
	Condition PinnedCondition `json:"condition" required:"true"`

	// Reason, when given, is the reason that condition must carry (for
	// Degraded: the most common failure, such as OutOfSpace or
	// InsufficientSpace).
	Reason string `json:"reason,omitempty"`

	// Failed is how many nodes status.failed must count: an exact count or
	// {min, max}. Absent: any.
	Failed CountRange `json:"failed,omitempty"`

	// Done is how many nodes status.done must count. Absent: any.
	Done CountRange `json:"done,omitempty"`
}

// PinnedCondition is a PinnedImageSet condition type.
type PinnedCondition string

func (PinnedCondition) enumValues() []string { return []string{"Complete", "Progressing", "Degraded"} }

// CountRange is an inclusive range of counts; a bare integer n is shorthand
// for {min: n, max: n}.
type CountRange struct {
	// Min is the smallest count allowed.
	Min int `json:"min,omitempty" minimum:"0"`

	// Max is the largest count allowed; absent means no upper bound.
	Max *int `json:"max,omitempty" minimum:"0"`
}

// Invariant names a property checked after every event:
// max-unavailable (at most maxUnavailable nodes of a pool are unavailable
// because of bootroll), pdb-respected (bootroll violates no PDB),
// no-reap-while-updating (Karpenter deletes no node that holds a slot),
// no-leaked-cordon (no node is left cordoned by bootroll after its update),
// no-leaked-annotation (no annotation bootroll added outlives its slot or
// its post-update protection deadline), no-double-reboot (no node is
// rebooted twice into one image while the pool's image stays the same),
// no-churn (bootroll's updates make Karpenter delete or replace no node,
// and cordons do not flap), converges (every pool ends up to date or
// halted with a reason), os-staging-not-starved (no OS staging fails for
// lack of space that pinned images hold), pinned-sets-exact (at the end
// every node whose daemon runs reports exactly the current images of its
// pinned sets),
// no-unprotected-reboot (a node reboots into another image only while
// cordoned by bootroll, drained and holding a slot, or on the
// os-not-ready fast path without workloads), halt-is-final (a pool halted
// for a target gives no slot and no boot order for that target until
// spec.image changes), cleanup (deleting a pool or a BootcNode, or a node
// leaving its pool, undoes bootroll's cordon, annotations and taints
// within a bound), no-stranded-node (no node stays cordoned or tainted
// by bootroll beyond a bound, whatever the pool's state),
// updated-healthy (a node verified Updated passes its pool's health
// checks at that moment) and grant-in-window (a pool with maintenance
// windows grants a reboot slot only inside one of them).
type Invariant string

// The invariants.
const (
	InvMaxUnavailable      Invariant = "max-unavailable"
	InvPDBRespected        Invariant = "pdb-respected"
	InvNoReapWhileUpdating Invariant = "no-reap-while-updating"
	InvNoLeakedCordon      Invariant = "no-leaked-cordon"
	InvNoLeakedAnnotation  Invariant = "no-leaked-annotation"
	InvNoDoubleReboot      Invariant = "no-double-reboot"
	InvNoChurn             Invariant = "no-churn"
	InvConverges           Invariant = "converges"
	InvOSStagingNotStarved Invariant = "os-staging-not-starved"
	InvPinnedSetsExact     Invariant = "pinned-sets-exact"
	InvNoUnprotectedReboot Invariant = "no-unprotected-reboot"
	InvHaltIsFinal         Invariant = "halt-is-final"
	InvCleanup             Invariant = "cleanup"
	InvNoStrandedNode      Invariant = "no-stranded-node"
	InvUpdatedHealthy      Invariant = "updated-healthy"
	InvGrantInWindow       Invariant = "grant-in-window"
)

// AllInvariants lists every invariant, in the order they are reported.
var AllInvariants = []Invariant{
	InvMaxUnavailable, InvPDBRespected, InvNoReapWhileUpdating, InvNoLeakedCordon,
	InvNoLeakedAnnotation, InvNoDoubleReboot, InvNoChurn, InvConverges,
	InvOSStagingNotStarved, InvPinnedSetsExact, InvNoUnprotectedReboot,
	InvHaltIsFinal, InvCleanup, InvNoStrandedNode, InvUpdatedHealthy,
	InvGrantInWindow,
}

func (Invariant) enumValues() []string {
	out := make([]string, len(AllInvariants))
	for i, v := range AllInvariants {
		out[i] = string(v)
	}
	return out
}

// NegativeControl is a variant of the scenario that must fail: the named
// invariant must catch it.
type NegativeControl struct {
	// Name names the control.
	Name string `json:"name" required:"true" pattern:"dnsLabel"`

	// Description says what the control breaks.
	Description string `json:"description,omitempty"`

	// Set are --set overrides, "path=value", applied to the scenario.
	Set []string `json:"set" required:"true" minItems:"1"`

	// CaughtBy is the invariant that must report the variant.
	CaughtBy Invariant `json:"caughtBy" required:"true"`
}
