package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ImageReference is an OCI image reference: either a digest reference
// (registry/repo@sha256:<64 hex>, optionally with a tag before the "@",
// which is then ignored, as the kubelet and containers/image do) or a tag
// reference (registry/repo:tag, or registry/repo meaning :latest). The
// controller resolves tags to digests.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(?:@sha256:[a-f0-9]{64})?$')",message="must be an OCI image reference: registry/repository[:tag] or registry/repository[:tag]@sha256:<64 hex digits>, with a lower-case repository, a tag of at most 128 letters, digits, '_', '.' or '-', and no scheme (e.g. quay.io/fedora/fedora-bootc:42)"
type ImageReference string

// DigestReference is an OCI image reference pinned by digest
// (registry/repo@sha256:<64 hex>), optionally with a tag before the "@",
// which is then ignored.
//
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?@sha256:[a-f0-9]{64}$')",message="must be an OCI image reference pinned by digest: registry/repository[:tag]@sha256:<64 hex digits>, with a lower-case repository and no scheme"
type DigestReference string

// DrainSpec holds the opt-ins a drain needs for pods whose eviction loses
// something, as kubectl drain does. DaemonSet pods, mirror (static) pods
// and finished pods are never evicted, and need none.
type DrainSpec struct {
	// Force lets the drain evict pods that no controller manages (no
	// ownerReference with controller: true), as kubectl drain --force
	// does: nothing recreates such a pod elsewhere. Default false.
	// +optional
	Force bool `json:"force,omitempty"`

	// DeleteEmptyDirData lets the drain evict pods with an emptyDir volume
	// (any medium, memory included), whose data is lost, as kubectl drain
	// --delete-emptydir-data does. Default false.
	// +optional
	DeleteEmptyDirData bool `json:"deleteEmptyDirData,omitempty"`
}

// BootcNodePoolSpec is what the user asks of a group of nodes.
type BootcNodePoolSpec struct {
	// NodeSelector selects the member Nodes by label: at least one label,
	// at most 64, each key and value valid as Kubernetes label keys and
	// values are. A Node that matches two pools is left alone and both
	// pools report Degraded/NodeConflict.
	// +required
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="must name at least one label: an empty nodeSelector would select every Node, control plane included (e.g. node-role.kubernetes.io/worker: \"\")"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 63)",message="every value must be a valid label value: at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="every key must be a valid label key: an optional DNS subdomain prefix of at most 253 characters and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit (e.g. node-role.kubernetes.io/worker)"
	NodeSelector map[string]string `json:"nodeSelector"`

	// Image is the bootc OS image the pool's nodes should boot: a digest
	// reference, or a tag that the controller resolves to a digest.
	// +required
	Image ImageReference `json:"image"`

	// ImagePullSecret names a kubernetes.io/dockerconfigjson Secret in the
	// controller's namespace used to resolve tags.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a Secret: lower-case letters, digits, '-' and '.'"
	ImagePullSecret string `json:"imagePullSecret,omitempty"`

	// Rollout bounds how many nodes are disrupted at once.
	// +optional
	Rollout RolloutSpec `json:"rollout,omitempty"`

	// Paused stops new staging and new reboot slots; nodes already in a
	// slot finish their update.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// DrainTimeout bounds a drain; when it passes the node is uncordoned,
	// its slot released and the drain retried after a backoff. Default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$')",message="must be a positive duration such as 90s, 10m or 1h30m: one to three numbers, each followed by a unit h, m, s, ms, us or ns, with no sign and no spaces"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$') || (duration(self) > duration('0s') && duration(self) <= duration('99999h'))",message="must be a positive duration: more than 0s and at most 99999h"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// HealthTimeout bounds the time from reboot request until the node
	// reports the desired digest as booted and is Ready. Default 15m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$')",message="must be a positive duration such as 90s, 10m or 1h30m: one to three numbers, each followed by a unit h, m, s, ms, us or ns, with no sign and no spaces"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$') || (duration(self) > duration('0s') && duration(self) <= duration('99999h'))",message="must be a positive duration: more than 0s and at most 99999h"
	HealthTimeout *metav1.Duration `json:"healthTimeout,omitempty"`

	// HealthChecks are what a node must show, besides booting the
	// target digest and being Ready, before it counts as updated. A node
	// that does not pass them within healthTimeout of the reboot request
	// fails as a boot failure does (reason HealthTimeout, naming the
	// check). Default none: booted and Ready is enough.
	// +optional
	HealthChecks HealthChecks `json:"healthChecks,omitempty"`

	// Drain holds the drain's opt-ins, the pool's equivalents of kubectl
	// drain's --force and --delete-emptydir-data. Without them a pod that
	// needs one is not evicted: the node stays Draining with reason
	// DrainBlocked, naming the pod and the field to set, until
	// drainTimeout.
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`

	// Windows are maintenance windows; when any is set, reboot slots are
	// only given inside one. Staging happens at any time.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Windows []MaintenanceWindow `json:"windows,omitempty"`

	// FailurePolicy says what to do with nodes that fail their update.
	// +optional
	FailurePolicy FailurePolicy `json:"failurePolicy,omitempty"`

	// Karpenter configures protection of Karpenter-managed nodes.
	// +optional
	Karpenter KarpenterOptions `json:"karpenter,omitempty"`
}

// HealthChecks are the checks a node passes after its reboot before it
// counts as updated (see docs/health-checks.md).
type HealthChecks struct {
	// ReadyFor is how long the Node must have been Ready without a break,
	// counted from its Ready condition's lastTransitionTime and not from
	// before the reboot, e.g. 2m. Default none: Ready once is enough.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$')",message="must be a positive duration such as 90s, 10m or 1h30m: one to three numbers, each followed by a unit h, m, s, ms, us or ns, with no sign and no spaces"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$') || (duration(self) > duration('0s') && duration(self) <= duration('99999h'))",message="must be a positive duration: more than 0s and at most 99999h"
	ReadyFor *metav1.Duration `json:"readyFor,omitempty"`

	// NodeConditions are Node conditions that must hold, each a type and
	// the status it must have, e.g. {type: NetworkUnavailable, status:
	// "False"}. A condition the Node does not report is unmet.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	NodeConditions []NodeConditionCheck `json:"nodeConditions,omitempty"`

	// DaemonSets name DaemonSets whose pod on the node must be Ready: a
	// pod bound to the node, owned (controller ownerReference) by the
	// DaemonSet, with condition Ready=True; e.g. the CNI or the storage
	// driver.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	DaemonSets []DaemonSetCheck `json:"daemonSets,omitempty"`
}

// NodeConditionCheck is a Node condition that must hold: the condition
// of this type has this status.
type NodeConditionCheck struct {
	// Type is the condition type, e.g. NetworkUnavailable or a node
	// problem detector's condition.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:XValidation:rule="!format.qualifiedName().validate(self).hasValue()",message="must be a condition type: an optional DNS subdomain prefix and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit (e.g. NetworkUnavailable)"
	Type string `json:"type"`

	// Status is the status the condition must have: True, False or Unknown.
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status string `json:"status"`
}

// DaemonSetCheck names a DaemonSet whose pod on the node must be Ready.
type DaemonSetCheck struct {
	// Namespace is the DaemonSet's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a namespace name: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit (e.g. kube-system)"
	Namespace string `json:"namespace"`

	// Name is the DaemonSet's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a DaemonSet name: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (e.g. calico-node)"
	Name string `json:"name"`
}

// RolloutSpec bounds the disruption of a rollout.
type RolloutSpec struct {
	// MaxUnavailable is the number of reboot slots: an integer >= 0 or a
	// percentage of the pool's nodes ("0%"-"100%", rounded down, at least
	// one node when the percentage is above 0). Default 1.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 && self <= 2147483647 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be an integer >= 0 (a number of nodes, written without quotes, at most 2147483647) or a percentage string from \"0%\" to \"100%\", e.g. 2 or \"25%\""
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxStaging is how many nodes may download (stage) the new image at
	// once. Staging does not disrupt workloads. Default 0 means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxStaging *int32 `json:"maxStaging,omitempty"`
}

// MaintenanceWindow is a recurring daily window in UTC.
type MaintenanceWindow struct {
	// Days lists the weekdays the window opens on (Mon..Sun); empty means
	// every day.
	// +optional
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`

	// Start is the UTC time of day the window opens, "HH:MM".
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="self.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="must be a UTC time of day HH:MM between 00:00 and 23:59, e.g. 02:30"
	Start string `json:"start"`

	// Duration is how long the window stays open (at most 24h).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$')",message="must be a duration above 0s and at most 24h, such as 90m or 8h: one to three numbers, each followed by a unit h, m, s, ms, us or ns, with no sign and no spaces"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$') || (duration(self) > duration('0s') && duration(self) <= duration('24h'))",message="must be a duration above 0s and at most 24h, such as 90m or 8h"
	Duration metav1.Duration `json:"duration"`
}

// Weekday is a day of the week, three letters.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// FailurePolicyAction is what happens when nodes fail.
// +kubebuilder:validation:Enum=Halt;Rollback
type FailurePolicyAction string

const (
	// FailureHalt stops the rollout when MaxFailures nodes failed.
	FailureHalt FailurePolicyAction = "Halt"
	// FailureRollback also returns a failed node to its previous image.
	FailureRollback FailurePolicyAction = "Rollback"
)

// FailurePolicy says what to do with failed nodes.
type FailurePolicy struct {
	// Action is Halt (default) or Rollback.
	// +optional
	Action FailurePolicyAction `json:"action,omitempty"`

	// MaxFailures failed nodes halt the pool. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxFailures *int32 `json:"maxFailures,omitempty"`
}

// KarpenterOptions configures protection of Karpenter-managed nodes.
type KarpenterOptions struct {
	// Protect sets karpenter.sh/do-not-disrupt and do-not-repair on nodes
	// that hold a reboot slot. Default true.
	// +optional
	Protect *bool `json:"protect,omitempty"`

	// PostUpdateProtection keeps the protection this long after the update,
	// or until the node runs non-DaemonSet pods again, so Karpenter does not
	// consolidate a node bootroll emptied before its pods can come back.
	// Default 5m on nodes Karpenter manages (owned by a NodeClaim), none on
	// others; 0s turns it off.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$')",message="must be a duration such as 0s, 90s, 10m or 1h30m: one to three numbers, each followed by a unit h, m, s, ms, us or ns, with no sign and no spaces"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$') || duration(self) <= duration('99999h')",message="must be at most 99999h (0s turns the protection off)"
	PostUpdateProtection *metav1.Duration `json:"postUpdateProtection,omitempty"`
}

// BootcNodePoolStatus is what the controller observed of the pool.
type BootcNodePoolStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// TargetImage is spec.image resolved to a digest reference.
	// +optional
	TargetImage string `json:"targetImage,omitempty"`

	// TargetDigest is the digest of TargetImage.
	// +optional
	TargetDigest string `json:"targetDigest,omitempty"`

	// ResolvedAt is when a tag was last resolved.
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`

	// TargetSince is when targetImage last changed. Failures recorded
	// before it belong to an earlier rollout (of another image, or of
	// this one before a revert) and count neither for a halt nor in the
	// conditions.
	// +optional
	TargetSince *metav1.Time `json:"targetSince,omitempty"`

	// DeployedDigests lists the digests booted on the pool's nodes with
	// their node counts, sorted by digest.
	// +optional
	// +listType=atomic
	DeployedDigests []DigestCount `json:"deployedDigests,omitempty"`

	// Nodes is the number of member nodes.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// UpdatedNodes is the number of members running the target digest.
	// +optional
	UpdatedNodes int32 `json:"updatedNodes,omitempty"`
	// Phases counts members per phase, sorted by phase.
	// +optional
	// +listType=atomic
	Phases []PhaseCount `json:"phases,omitempty"`

	// Slots are the reboot slots held now. This list is the single record
	// of slot ownership: it is written with optimistic concurrency so two
	// reconciles can never hand out more than maxUnavailable slots.
	// +optional
	// +listType=atomic
	Slots []Slot `json:"slots,omitempty"`

	// Failures records each node that failed the current target (or is
	// rolling back from it), written by the node reconciler before it
	// touches anything else, so that neither a deleted BootcNode or Node
	// nor a write conflict can lose it. It holds failures of
	// status.targetImage only: when the target changes, the pool
	// reconciler moves a halt (with its failures) to LastHalt and drops
	// the rest.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Failures []NodeFailure `json:"failures,omitempty"`

	// Halt is set the moment failurePolicy.maxFailures nodes have failed
	// the target: while it names the target no node gets a slot or a boot
	// order for it, whatever happens to the failed nodes. It is cleared
	// only when spec.image changes to a different target (moved to
	// LastHalt).
	// +optional
	Halt *HaltRecord `json:"halt,omitempty"`

	// LastHalt is the halt that the last change of spec.image lifted,
	// kept for debugging.
	// +optional
	LastHalt *HaltRecord `json:"lastHalt,omitempty"`

	// Summary breaks the pool down, e.g. "7/10 updated; 2 staging; 1 rebooting".
	// +optional
	Summary string `json:"summary,omitempty"`

	// Conditions: UpToDate, Degraded, Halted.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeFailure is one node's failure of one target image.
type NodeFailure struct {
	// Node is the Node (and BootcNode) name.
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Image is the target digest reference the node failed.
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// Reason is a CamelCase reason, e.g. BootFailed or HealthTimeout.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// Message explains Reason to a person.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// Time is when the failure was recorded.
	Time metav1.Time `json:"time"`
}

// HaltRecord is why a pool stopped rolling an image out.
type HaltRecord struct {
	// Image is the target digest reference that failed.
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// Since is when maxFailures was reached (or every node left had
	// failed the target).
	Since metav1.Time `json:"since"`
	// Failures are the failures that halted the pool.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Failures []NodeFailure `json:"failures"`
}

// DigestCount is how many nodes boot a digest.
type DigestCount struct {
	Digest string `json:"digest"`
	Nodes  int32  `json:"nodes"`
}

// PhaseCount is how many nodes are in a phase.
type PhaseCount struct {
	Phase NodePhase `json:"phase"`
	Nodes int32     `json:"nodes"`
}

// Slot is a reboot slot held by a node for one target digest.
type Slot struct {
	// Node is the Node (and BootcNode) name.
	Node string `json:"node"`
	// Image is the digest reference the slot was given for.
	Image string `json:"image"`
	// Since is when the slot was given.
	Since metav1.Time `json:"since"`
	// UID is the UID of the BootcNode the slot was given to: a record
	// made again under the node's name after a deletion is another record
	// and does not take up its predecessor's grant. Empty in slots given
	// before the field existed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
	// Down is set on a slot given to a node that is down in the reboot of
	// an earlier slot whose record was deleted (the slot given in place of
	// that one): the node may take it while not Ready, as a node down on
	// the image it failed may.
	// +optional
	Down bool `json:"down,omitempty"`
}

// Condition types and reasons of a BootcNodePool.
const (
	ConditionUpToDate = "UpToDate"
	ConditionDegraded = "Degraded"
	ConditionHalted   = "Halted"

	ReasonNodeConflict  = "NodeConflict"
	ReasonResolveFailed = "ResolveFailed"
	ReasonMaxFailures   = "MaxFailuresReached"
	// ReasonRemainingFailed: fewer than maxFailures nodes failed the
	// target, but every node not on it did, so the rollout cannot go on.
	ReasonRemainingFailed = "RemainingNodesFailed"
	ReasonRollingOut      = "RollingOut"
	ReasonAllUpdated      = "AllUpdated"
	ReasonPaused          = "Paused"
	ReasonOutsideWindow   = "OutsideMaintenanceWindow"
	ReasonNodesFailed     = "NodesFailed"
	ReasonAsExpected      = "AsExpected"
	ReasonNoNodes         = "NoNodes"
	ReasonNodesDegraded   = "NodesDegraded"
	// ReasonDrainsBlocked (Degraded): PodDisruptionBudgets refuse the
	// evictions some drain needs, so the rollout cannot go on by itself.
	ReasonDrainsBlocked = "DrainsBlocked"
	// ReasonDaemonErrors (Degraded): node daemons report errors, or have
	// not reported at all; the message names the nodes and the errors.
	ReasonDaemonErrors = "DaemonErrors"
	// ReasonNodesUnavailable (Degraded): member nodes are down outside a
	// slot: not Ready with no report from their daemons ever, so nothing
	// says what they run or why they are down (a node left down in an
	// update whose pool or record was deleted and made again, say; each
	// counts against maxUnavailable as a slot would), or not Ready for
	// minutes and not on the target, which they cannot take until they
	// are back. The message names them.
	ReasonNodesUnavailable = "NodesUnavailable"
	// ReasonNoSlots (UpToDate): maxUnavailable resolves to 0 slots.
	ReasonNoSlots = "MaxUnavailableZero"
	// ReasonSlotsDeferred (UpToDate): no slot is in use and every node
	// that could take one may not now (not Ready, disrupted by Karpenter);
	// the message names them and why.
	ReasonSlotsDeferred = "SlotsDeferred"
	// ReasonHalted (UpToDate): the rollout is halted.
	ReasonHalted = "Halted"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bnp
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedNodes`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.summary`
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=`.status.conditions[?(@.type=="Halted")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="must be at most 63 characters: the pool's name is the value of the bootroll.dev/pool label on its BootcNodes, and a label value is at most 63 characters",fieldPath=".metadata"

// BootcNodePool rolls one bootc OS image out to the Nodes it selects.
type BootcNodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BootcNodePoolSpec   `json:"spec"`
	Status BootcNodePoolStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BootcNodePoolList is a list of BootcNodePool.
type BootcNodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BootcNodePool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BootcNodePool{}, &BootcNodePoolList{})
}
