package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Limits and defaults of a PinnedImageSet.
const (
	// MaxPinnedImages is the most images one PinnedImageSet may list.
	MaxPinnedImages = 500
	// DefaultPinConcurrency is how many of a set's images a node pulls at
	// once when spec.concurrency is not set.
	DefaultPinConcurrency = 2
	// ControlPlanePinConcurrency is how many pinned images a control-plane
	// node pulls at once, whatever the sets say: the node daemon applies it
	// to nodes with the node-role.kubernetes.io/control-plane label.
	ControlPlanePinConcurrency = 1
	// DefaultMinFreeAfterPull is spec.minFreeAfterPull when it is not set.
	DefaultMinFreeAfterPull = "10%"
	// MaxPinnedFailures bounds status.failures.
	MaxPinnedFailures = 50
)

// PinnedImageSetSpec says which container images which nodes keep pulled.
//
// +kubebuilder:validation:XValidation:rule="has(self.nodeSelector) != has(self.pool)",message="exactly one of nodeSelector and pool must be set: nodeSelector selects Nodes by label, pool selects the members of a BootcNodePool"
type PinnedImageSetSpec struct {
	// NodeSelector selects the Nodes by label: at least one label, at most
	// 64, each key and value valid as Kubernetes label keys and values are.
	// To select every node, use a label all nodes carry, such as
	// kubernetes.io/os: linux. Exactly one of nodeSelector and pool is set.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.size() > 0",message="must name at least one label; to select every node, use a label all nodes carry, such as kubernetes.io/os: linux"
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k].size() <= 63)",message="every value must be a valid label value: at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !format.qualifiedName().validate(k).hasValue())",message="every key must be a valid label key: an optional DNS subdomain prefix of at most 253 characters and '/', then a name of 1 to 63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit (e.g. node-role.kubernetes.io/worker)"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Pool selects the members of the BootcNodePool of this name.
	// Exactly one of nodeSelector and pool is set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be the name of a BootcNodePool: lower-case letters, digits, '-' and '.'"
	// +kubebuilder:validation:XValidation:rule="self.size() <= 63",message="must be the name of a BootcNodePool, which is at most 63 characters"
	Pool string `json:"pool,omitempty"`

	// Images are the container images to keep on every selected node, as
	// digest references (registry/repository@sha256:<64 hex digits>); tags
	// are refused because a tag can move. At most 500, no duplicates.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=500
	// +listType=set
	Images []DigestReference `json:"images"`

	// Concurrency is how many of the set's images a node pulls at once.
	// Control-plane nodes pull one image at a time whatever this says (the
	// node daemon applies that rule). Default 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	Concurrency *int32 `json:"concurrency,omitempty"`

	// Throttle is the least time between the starts of two pulls of the
	// set's images on one node. Default 0s: no wait.
	// +optional
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,9}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,12}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,15}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,18}([.][0-9]*)?|[.][0-9]+)ns){1,3}$')",message="must be a duration of 0s or more, such as 0s, 500ms or 2m: one to three numbers, each followed by a unit h, m, s, ms, us or ns, with no sign and no spaces"
	Throttle *metav1.Duration `json:"throttle,omitempty"`

	// MinFreeAfterPull is the free space the image filesystem must keep
	// after a pull, on top of the room the node keeps for staging its next
	// OS image: a quantity with a unit ("5Gi", "500M") or a percentage of
	// the filesystem's size from "0%" to "99%". A pull needs about twice the
	// image's compressed size while it unpacks; a node that cannot keep
	// this much free does not start the pull. Default "10%".
	// +optional
	// +kubebuilder:default="10%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == string && (self.matches('^[1-9]?[0-9]%$') || self.matches('^[0-9]+([.][0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)$'))",message="must be a quantity with a unit, such as \"5Gi\" or \"500M\", or a percentage of the image filesystem from \"0%\" to \"99%\", such as \"10%\""
	MinFreeAfterPull *intstr.IntOrString `json:"minFreeAfterPull,omitempty"`

	// PullSecret is a kubernetes.io/dockerconfigjson Secret with the
	// credentials for the images' registries. Images of registries it has
	// no entry for are pulled anonymously.
	// +optional
	PullSecret *SecretReference `json:"pullSecret,omitempty"`
}

// SecretReference names a Secret. Its fields are checked with patterns,
// not CEL, because it also appears in BootcNode lists with no size bound.
type SecretReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// PinnedImageSetStatus aggregates the progress the selected nodes report.
type PinnedImageSetStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Nodes is the number of selected nodes.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// Done is the number of selected nodes that have every image.
	// +optional
	Done int32 `json:"done,omitempty"`
	// Pulling is the number of selected nodes still pulling or waiting to
	// pull, with no failed image.
	// +optional
	Pulling int32 `json:"pulling,omitempty"`
	// Failed is the number of selected nodes with at least one failed image.
	// +optional
	Failed int32 `json:"failed,omitempty"`

	// Failures lists failed images per node, sorted by node then image; at
	// most 50 entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Failures []PinnedImageFailure `json:"failures,omitempty"`
	// OmittedFailures counts the failures left out of Failures.
	// +optional
	OmittedFailures int32 `json:"omittedFailures,omitempty"`

	// Conditions: Progressing (nodes are pulling: work in progress, never an
	// error), Complete (every selected node has every image; False, NoNodesSelected,
	// when the selector matches no BootcNode) and Degraded
	// (some node failed an image; Failures says why).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PinnedImageFailure is one image that failed on one node.
type PinnedImageFailure struct {
	// Node is the Node (and BootcNode) name.
	Node string `json:"node"`
	// Image is the digest reference that failed.
	Image string `json:"image"`
	// Reason classifies the failure (the PinnedReason* values).
	Reason string `json:"reason"`
	// Message is the node's message, shortened.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Condition types of a PinnedImageSet; Degraded is ConditionDegraded.
const (
	ConditionProgressing = "Progressing"
	ConditionComplete    = "Complete"
)

// Reasons of a failed or waiting pinned image (PinnedImageProgress.Reason
// and PinnedImageFailure.Reason). The pull failures have the names of the
// CRI error kinds the node daemon classifies them into.
const (
	// PinnedReasonNotFound: the registry has no such image (or a layer).
	PinnedReasonNotFound = "NotFound"
	// PinnedReasonOutOfSpace: the pull ran out of disk space; the node
	// starts no more pinned pulls until the set changes.
	PinnedReasonOutOfSpace = "OutOfSpace"
	// PinnedReasonInsufficientSpace: the pull was not started because it
	// would leave less than minFreeAfterPull plus the OS staging reserve.
	PinnedReasonInsufficientSpace = "InsufficientSpace"
	// PinnedReasonBlocked: not started because another image ran out of
	// space on the node.
	PinnedReasonBlocked = "Blocked"
	// PinnedReasonUnauthorized: the registry refused the credentials.
	PinnedReasonUnauthorized = "Unauthorized"
	// PinnedReasonRegistryUnreachable: no usable answer from the registry.
	PinnedReasonRegistryUnreachable = "RegistryUnreachable"
	// PinnedReasonRuntimeUnavailable: the container runtime did not answer.
	PinnedReasonRuntimeUnavailable = "RuntimeUnavailable"
	// DaemonConditionPrefetchAvailable is the condition a daemon sets in
	// status.daemon.conditions: whether its container runtime answers on
	// its CRI socket, so that pinned images can be pulled (False with
	// reason RuntimeUnavailable while none does).
	DaemonConditionPrefetchAvailable = "PrefetchAvailable"
	// PinnedReasonDeadlineExceeded: the pull took longer than allowed.
	PinnedReasonDeadlineExceeded = "DeadlineExceeded"
	// PinnedReasonInvalidReference: the runtime could not parse the reference.
	PinnedReasonInvalidReference = "InvalidReference"
	// PinnedReasonUnknown: any other pull failure.
	PinnedReasonUnknown = "Unknown"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pis
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Done",type=integer,JSONPath=`.status.done`
// +kubebuilder:printcolumn:name="Pulling",type=integer,JSONPath=`.status.pulling`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Complete",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="must be at most 63 characters: the set's name is the value of the bootroll.dev/pinned-image-set label on the pull secret the controller copies for it, and a label value is at most 63 characters",fieldPath=".metadata"

// PinnedImageSet is a list of container images that the nodes it selects
// pull ahead of need and keep: the node daemon prefetches them through the
// node's CRI image service and reports progress in its BootcNode status.
type PinnedImageSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PinnedImageSetSpec   `json:"spec"`
	Status PinnedImageSetStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// PinnedImageSetList is a list of PinnedImageSet.
type PinnedImageSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PinnedImageSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PinnedImageSet{}, &PinnedImageSetList{})
}
