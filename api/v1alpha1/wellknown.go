package v1alpha1

// Labels, annotations and taints that bootroll reads or writes on objects it
// does not own. They are the contract with admins, the daemon and Karpenter.
const (
	// LabelPool is set on each BootcNode to the name of its pool, so the
	// controller can list a pool's nodes through an index.
	LabelPool = "bootroll.dev/pool"

	// AnnotationSlot marks a Node that holds a bootroll reboot slot; the
	// value is the pool name. It is added with the cordon in one patch.
	AnnotationSlot = "bootroll.dev/slot"

	// TaintOSNotReady is the startup taint of nodes that joined with an old
	// boot image: they are updated at once, without drain or slot.
	TaintOSNotReady = "bootroll.dev/os-not-ready"

	// KarpenterDoNotDisrupt blocks Karpenter's graceful disruption.
	KarpenterDoNotDisrupt = "karpenter.sh/do-not-disrupt"
	// KarpenterDoNotRepair vetoes Karpenter's node repair (v1.15+).
	KarpenterDoNotRepair = "karpenter.sh/do-not-repair"
	// KarpenterDisruptedTaint is put on nodes Karpenter is terminating.
	KarpenterDisruptedTaint = "karpenter.sh/disrupted"

	// Finalizer is put on every BootcNodePool and BootcNode: before one
	// goes away, bootroll restores the Nodes' prior cordon state and
	// removes exactly the annotations it added (from the Node and its
	// NodeClaim).
	Finalizer = "bootroll.dev/cleanup"

	// FieldManager is the name bootroll writes under.
	FieldManager = "bootroll"
)
