package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodePhase is the controller's view of where a node is in its update.
// +kubebuilder:validation:Enum=Pending;Staging;Staged;Draining;Rebooting;Verifying;Updated;Degraded;Failed;RolledBack
type NodePhase string

// The node phases, in rollout order, then the off-path ones.
const (
	PhasePending    NodePhase = "Pending"
	PhaseStaging    NodePhase = "Staging"
	PhaseStaged     NodePhase = "Staged"
	PhaseDraining   NodePhase = "Draining"
	PhaseRebooting  NodePhase = "Rebooting"
	PhaseVerifying  NodePhase = "Verifying"
	PhaseUpdated    NodePhase = "Updated"
	PhaseDegraded   NodePhase = "Degraded"
	PhaseFailed     NodePhase = "Failed"
	PhaseRolledBack NodePhase = "RolledBack"
)

// AllPhases lists every phase in a fixed order (for counts and metrics).
var AllPhases = []NodePhase{PhasePending, PhaseStaging, PhaseStaged, PhaseDraining, PhaseRebooting, PhaseVerifying, PhaseUpdated, PhaseDegraded, PhaseFailed, PhaseRolledBack}

var phaseIndex = func() map[NodePhase]int {
	m := make(map[NodePhase]int, len(AllPhases))
	for i, p := range AllPhases {
		m[p] = i
	}
	return m
}()

// PhaseIndex returns the position of p in AllPhases, and false for a phase
// that is not one of them (including the empty one).
func PhaseIndex(p NodePhase) (int, bool) {
	i, ok := phaseIndex[p]
	return i, ok
}

// BootcNodeSpec is written by the controller and read by the daemon.
type BootcNodeSpec struct {
	// Pool is the BootcNodePool the node belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="must be the name of a BootcNodePool: lower-case letters, digits, '-' and '.', at most 63 characters"
	Pool string `json:"pool"`

	// DesiredImage is the digest reference the node should run.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?@sha256:[a-f0-9]{64}$')",message="must be an OCI image reference pinned by digest: registry/repository[:tag]@sha256:<64 hex digits>"
	DesiredImage string `json:"desiredImage,omitempty"`

	// BootOrder is the node reconciler's order to boot an image; without
	// one the daemon only stages DesiredImage. An order stands only while
	// its image is DesiredImage: once the pool directs the node to another
	// image, the old order is void, so an order need not be withdrawn after
	// it was carried out. The node reconciler is its one writer.
	// +optional
	BootOrder *BootOrder `json:"bootOrder,omitempty"`

	// PinnedImageSets are the PinnedImageSets that apply to the node, with
	// the images each asks for (filled in by the controller).
	// +optional
	// +listType=map
	// +listMapKey=name
	PinnedImageSets []NodePinnedImageSet `json:"pinnedImageSets,omitempty"`
}

// BootOrder asks the daemon to boot an image, and records when it was
// asked: the node's healthTimeout counts from At.
type BootOrder struct {
	// Image is the digest reference to boot. The order stands only while
	// it equals spec.desiredImage.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?@sha256:[a-f0-9]{64}$')",message="must be an OCI image reference pinned by digest: registry/repository[:tag]@sha256:<64 hex digits>"
	Image string `json:"image"`
	// Rollback asks the daemon to leave Image (the image the node runs and
	// failed on) for the host's rollback deployment (bootc rollback). A
	// rollback order names the image it leaves, so spec.desiredImage stays
	// the pool's target and the daemon does not stage it again.
	// +optional
	Rollback bool `json:"rollback,omitempty"`
	// At is when the order was given.
	At metav1.Time `json:"at"`
	// Withdrawn takes the order back (a failure, a node leaving its pool or
	// its slot); the order is kept so that a reboot it may have started
	// still counts from At.
	// +optional
	Withdrawn bool `json:"withdrawn,omitempty"`
}

// Order returns the boot order that stands: spec.bootOrder when it names
// spec.desiredImage and is not withdrawn, nil otherwise.
func (s *BootcNodeSpec) Order() *BootOrder {
	if o := s.LastOrder(); o != nil && !o.Withdrawn {
		return o
	}
	return nil
}

// LastOrder returns spec.bootOrder when it names spec.desiredImage,
// withdrawn or not: the last boot order given for the desired image.
func (s *BootcNodeSpec) LastOrder() *BootOrder {
	if o := s.BootOrder; o != nil && s.DesiredImage != "" && o.Image == s.DesiredImage {
		return o
	}
	return nil
}

// RollingBack reports whether the standing order is a rollback.
func (s *BootcNodeSpec) RollingBack() bool {
	o := s.Order()
	return o != nil && o.Rollback
}

// NodePinnedImageSet is one PinnedImageSet as it applies to one node: the
// controller copies the set's images and knobs here, so the daemon reads
// only its own BootcNode.
type NodePinnedImageSet struct {
	Name string `json:"name"`
	// Images are digest references.
	// +listType=atomic
	Images []string `json:"images"`
	// Generation of the set these images come from.
	Generation int64 `json:"generation"`
	// Concurrency is the set's spec.concurrency; 0 means the default (2).
	// The daemon pulls one image at a time on control-plane nodes.
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`
	// Throttle is the set's spec.throttle; nil means 0.
	// +optional
	Throttle *metav1.Duration `json:"throttle,omitempty"`
	// MinFreeAfterPull is the set's spec.minFreeAfterPull; nil means 10%.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MinFreeAfterPull *intstr.IntOrString `json:"minFreeAfterPull,omitempty"`
	// PullSecret is the dockerconfigjson Secret the daemon reads the set's
	// pull credentials from; the controller decides which Secret that is,
	// so the daemon needs no access to any other.
	// +optional
	PullSecret *SecretReference `json:"pullSecret,omitempty"`
}

// HostImage describes one bootc deployment (booted, staged or rollback).
type HostImage struct {
	// Image is the image reference the deployment was made from.
	Image string `json:"image,omitempty"`
	// Digest is the manifest digest (sha256:...).
	Digest string `json:"digest,omitempty"`
	// Version is the image's version label, when it has one.
	// +optional
	Version string `json:"version,omitempty"`
	// Timestamp is the image's creation time, when known.
	// +optional
	Timestamp *metav1.Time `json:"timestamp,omitempty"`
}

// DaemonPhase is what the daemon is doing.
// +kubebuilder:validation:Enum=Idle;Staging;Staged;Rebooting;Error
type DaemonPhase string

// The daemon phases.
const (
	DaemonIdle      DaemonPhase = "Idle"
	DaemonStaging   DaemonPhase = "Staging"
	DaemonStaged    DaemonPhase = "Staged"
	DaemonRebooting DaemonPhase = "Rebooting"
	DaemonError     DaemonPhase = "Error"
)

// RebootRecord is written by the daemon before it reboots, so that after
// the reboot (or a daemon restart) it knows whether the reboot happened.
type RebootRecord struct {
	// Image is the digest reference the reboot was for.
	Image string `json:"image"`
	// BootID is the boot ID of the boot that requested the reboot; a
	// different boot ID now means the reboot happened.
	BootID string `json:"bootID"`
	// Rollback is true when the reboot was a bootc rollback.
	// +optional
	Rollback bool `json:"rollback,omitempty"`
	// At is when the reboot was requested, on the node's clock.
	At metav1.Time `json:"at"`
	// OrderAt is the time of the boot order the reboot carried out
	// (spec.bootOrder.at), copied: the controller matches reboots with its
	// orders on its own clock, which a node's may be seconds or minutes
	// off. Absent from daemons older than the field, and for a reboot no
	// order asked for.
	// +optional
	OrderAt *metav1.Time `json:"orderAt,omitempty"`
}

// DaemonStatus is the part of BootcNode status the daemon owns.
type DaemonStatus struct {
	// Phase is what the daemon is doing.
	// +optional
	Phase DaemonPhase `json:"phase,omitempty"`
	// BootID of the running boot.
	// +optional
	BootID string `json:"bootID,omitempty"`
	// LastError is the last error of a host action, empty when it worked.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// StageAttempts counts consecutive failed staging attempts of
	// spec.desiredImage.
	// +optional
	StageAttempts int32 `json:"stageAttempts,omitempty"`
	// LastAttempt is when the last host action was started.
	// +optional
	LastAttempt *metav1.Time `json:"lastAttempt,omitempty"`
	// LastReboot is the last reboot the daemon asked for.
	// +optional
	LastReboot *RebootRecord `json:"lastReboot,omitempty"`
	// ObservedGeneration is the spec generation the daemon acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// PinnedImages reports prefetch progress per set.
	// +optional
	// +listType=map
	// +listMapKey=name
	PinnedImages []PinnedSetProgress `json:"pinnedImages,omitempty"`
	// Conditions are the daemon's conditions. PrefetchAvailable False
	// (reason RuntimeUnavailable) says that no container runtime answers
	// on a CRI socket, so pinned images are not pulled (OS updates go on);
	// the message names each socket tried and why it failed. The daemon
	// adds it when the runtime first fails to answer and sets it True
	// (reason RuntimeAvailable) when it answers again; absent, the
	// runtime has answered or prefetching is off.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PinnedSetProgress is the daemon's progress on one pinned image set.
type PinnedSetProgress struct {
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
	// Present, Pulling, Pending and Failed count Images by state.
	// +optional
	Present int32 `json:"present,omitempty"`
	// +optional
	Pulling int32 `json:"pulling,omitempty"`
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// Images are the set's images in the set's order.
	// +listType=atomic
	Images []PinnedImageProgress `json:"images,omitempty"`
}

// PinnedImageState is where one pinned image is.
// +kubebuilder:validation:Enum=Pending;Pulling;Present;Failed
type PinnedImageState string

// The pinned image states.
const (
	// PinnedPending: not present and not being pulled; waiting for a slot,
	// the throttle, a retry (Reason says why it failed last) or space.
	PinnedPending PinnedImageState = "Pending"
	// PinnedPulling: a pull runs.
	PinnedPulling PinnedImageState = "Pulling"
	// PinnedPresent: the image is on the node.
	PinnedPresent PinnedImageState = "Present"
	// PinnedFailed: the daemon gave up for now; Reason says why.
	PinnedFailed PinnedImageState = "Failed"
)

// PinnedImageProgress is the daemon's progress on one image.
type PinnedImageProgress struct {
	Image string           `json:"image"`
	State PinnedImageState `json:"state"`
	// Reason classifies a failure or a wait (the PinnedReason* values):
	// OutOfSpace, InsufficientSpace, NotFound, Unauthorized,
	// RegistryUnreachable, ...
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Attempts counts the pulls started for the image. It starts again
	// from 0 when a present image disappears and when a Failed image is
	// tried afresh (its set changed, or RetryAfter passed). A Present image
	// keeps the count its pull took.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// LastAttempt is when the last pull started.
	// +optional
	LastAttempt *metav1.Time `json:"lastAttempt,omitempty"`
	// RetryAfter is when a failed pull is tried again.
	// +optional
	RetryAfter *metav1.Time `json:"retryAfter,omitempty"`
	// Pinned is true when the runtime reports the present image pinned
	// (CRI ImageStatus), so the kubelet's image garbage collection keeps
	// it. A present image that is not pinned has a Message that says why
	// when the daemon knows (CRI-O's pinned_images, containerd before 1.7).
	// +optional
	Pinned bool `json:"pinned,omitempty"`
}

// RolloutStatus is the part of BootcNode status the controller owns: every
// rollout transition is recorded here before it acts on the world, so a
// restarted controller resumes where it stopped.
type RolloutStatus struct {
	// TargetImage is the digest reference this record is about.
	// +optional
	TargetImage string `json:"targetImage,omitempty"`
	// PhaseSince is when Phase was entered.
	// +optional
	PhaseSince *metav1.Time `json:"phaseSince,omitempty"`
	// PriorUnschedulable is the Node's spec.unschedulable before bootroll
	// cordoned it; restored on uncordon.
	// +optional
	PriorUnschedulable *bool `json:"priorUnschedulable,omitempty"`
	// Cordoned is true while bootroll has the Node cordoned.
	// +optional
	Cordoned bool `json:"cordoned,omitempty"`
	// AddedAnnotations lists the Node annotations bootroll added itself and
	// must remove (and no others).
	// +optional
	// +listType=atomic
	AddedAnnotations []string `json:"addedAnnotations,omitempty"`
	// AddedNodeClaimAnnotations lists the NodeClaim annotations bootroll added.
	// +optional
	// +listType=atomic
	AddedNodeClaimAnnotations []string `json:"addedNodeClaimAnnotations,omitempty"`
	// ProtectUntil keeps Karpenter protection after the update.
	// +optional
	ProtectUntil *metav1.Time `json:"protectUntil,omitempty"`
	// SlotGrantedAt is the grant time (the pool's status.slots[].since) of
	// the last slot the node took up: a grant the record has taken up is
	// not pending any more, whatever happened to the node since.
	// +optional
	SlotGrantedAt *metav1.Time `json:"slotGrantedAt,omitempty"`
	// DrainStartedAt is when the current drain started.
	// +optional
	DrainStartedAt *metav1.Time `json:"drainStartedAt,omitempty"`
	// RetryAfter defers the next attempt (staging or drain backoff).
	// +optional
	RetryAfter *metav1.Time `json:"retryAfter,omitempty"`
	// Failures counts consecutive failed attempts for TargetImage.
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// FailedImage is the image that failed on this node, kept for debugging
	// after the node is retargeted.
	// +optional
	FailedImage string `json:"failedImage,omitempty"`
	// RollbackTo is the image the node's last rollback order returns it
	// to (its rollback deployment when the order was given). While the
	// node is Failed that rollback failed, and the image failed on this
	// node too: the pool does not direct the node to it again until the
	// node has been directed to another image.
	// +optional
	RollbackTo string `json:"rollbackTo,omitempty"`
	// Reason is a CamelCase reason of the last failure or wait.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains Reason to a person.
	// +optional
	Message string `json:"message,omitempty"`
}

// BootcNodeStatus has two owners: Daemon (and the host images) is written
// only by the node daemon, Phase and Rollout only by the controller. Each
// writes with a merge patch of its own fields.
type BootcNodeStatus struct {
	// Booted is the running deployment.
	// +optional
	Booted *HostImage `json:"booted,omitempty"`
	// Staged is the deployment that boots next, when there is one.
	// +optional
	Staged *HostImage `json:"staged,omitempty"`
	// RollbackImage is the rollback deployment, when there is one.
	// +optional
	RollbackImage *HostImage `json:"rollbackImage,omitempty"`
	// Daemon is the daemon's own state.
	// +optional
	Daemon DaemonStatus `json:"daemon,omitempty"`

	// Phase is the controller's record of the node's update. A node waiting
	// for its turn is Pending: whether it is staging or staged is the
	// daemon's report (status.daemon.phase, status.staged), which the pool
	// reads as the Staging and Staged phases of its summary; bootroll does
	// not store those two here (older versions did, and they read the same).
	// +optional
	Phase NodePhase `json:"phase,omitempty"`
	// Rollout is the controller's record.
	// +optional
	Rollout RolloutStatus `json:"rollout,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bn
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Daemon",type=string,JSONPath=`.status.daemon.phase`
// +kubebuilder:printcolumn:name="Booted",type=string,JSONPath=`.status.booted.digest`
// +kubebuilder:printcolumn:name="Desired",type=string,JSONPath=`.spec.desiredImage`,priority=1
// +kubebuilder:printcolumn:name="Boot-Ordered",type=date,JSONPath=`.spec.bootOrder.at`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.rollout.reason`
// +kubebuilder:printcolumn:name="Daemon-Error",type=string,JSONPath=`.status.daemon.lastError`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BootcNode is one Node's update state; it has the Node's name.
type BootcNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BootcNodeSpec   `json:"spec"`
	Status BootcNodeStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BootcNodeList is a list of BootcNode.
type BootcNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BootcNode `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BootcNode{}, &BootcNodeList{})
}
