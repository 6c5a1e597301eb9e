package controller

// The controller's permissions, each next to why it is needed. `make
// manifests` generates config/rbac/role.yaml from these markers
// (ClusterRole bootroll-controller, and Roles bootroll-controller in
// bootroll-system and bootroll-pull-secrets for the namespaced rules);
// config/manifests_test.go fails when role.yaml is out of date, and
// config/rbac_test.go when a grant is not in its table of what the code
// uses (or the other way round). docs/security.md explains the model.
//
// Kinds read through the manager's cache need list and watch only (an
// informer lists, then watches); get is granted only where the code reads
// past the cache (options.Options.APIReader). Writes are patches unless
// noted: no update is granted where nothing updates.

// Pools. get: the node reconciler reads a pool past the cache (its
// metadata first, then the pool: node.go freshPool, recordPoolFailure);
// list, watch: the cache (pool controller's primary type, node
// controller's slot watch); patch: bootroll's finalizer, added and removed
// under an optimistic lock (pool.go, cleanup.go).
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodepools,verbs=get;list;watch;patch
// Pool status. update: the pool reconciler replaces the status whole under
// the resourceVersion it read, which keeps the slot table safe (pool.go);
// patch: the node reconciler records a node's failure on its pool
// (node.go recordPoolFailure).
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodepools/status,verbs=update;patch
// update of finalizers: the BootcNodes' owner reference to their pool sets
// blockOwnerDeletion (controllerutil.SetControllerReference), which clusters
// enforcing OwnerReferencesPermissionEnforcement (OpenShift) allow only to
// who may update the owner's finalizers. No client call uses it.
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodepools/finalizers,verbs=update

// BootcNodes, which the controller owns. get: fresh reads past the cache
// (takeslot.go, cleanup.go, pool.go); list, watch: the cache; create: one
// per selected Node (pool.go); patch: spec (desired image, boot order,
// pinned sets) and the finalizer's removal; delete: a Node that left its
// pool or a pool being deleted (pool.go, cleanup.go).
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodes,verbs=get;list;watch;create;patch;delete
// patch: the controller's record, status.phase and status.rollout
// (node.go, patch.Record).
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodes/status,verbs=patch

// PinnedImageSets: read from the cache; patch: their aggregated status
// (pinned/pinned.go).
// +kubebuilder:rbac:groups=bootroll.dev,resources=pinnedimagesets,verbs=list;watch
// +kubebuilder:rbac:groups=bootroll.dev,resources=pinnedimagesets/status,verbs=patch

// Nodes. get: a fresh read before each cordon, uncordon and slot take-up
// (node.go, takeslot.go); list, watch: the cache (pool membership, pinned
// sets' node selectors); patch: cordon, bootroll's annotations and taints.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// Pods. list, watch: the cache, indexed by node, and the drain's check of
// what is left, listed past the cache by spec.nodeName (drain.go); no pod
// is read one by one, deleted or changed.
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// Drains go through the Eviction API, so PodDisruptionBudgets are honoured
// by the API server; a refusal names its budget (drain.go budgetRefusal),
// so no budget is read.
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// Events: the manager's recorder (GetEventRecorderFor, also used by leader
// election) writes core/v1 Events: create, and patch to count a repeated
// one. Nothing records through events.k8s.io.
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Karpenter: get a node's NodeClaim past the cache (read as unstructured,
// karpenter/karpenter.go LookupClaim) and patch its do-not-disrupt
// annotation while the node holds a reboot slot (karpenter.go, takeslot.go);
// get the NodeClaim CRD to tell "Karpenter not installed" from "claim
// missing". Neither is listed or watched.
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get

// Namespaced to the controller's namespace: the pools' imagePullSecrets and
// the PinnedImageSets' pull secrets (read one by one past the cache, never
// listed: the cache is disabled for Secrets) and the leader election lease
// (client-go's LeaseLock: get, create the first time, update to renew).
// +kubebuilder:rbac:groups="",namespace=bootroll-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=bootroll-system,resources=leases,verbs=get;create;update

// The sets' pull secrets are mirrored into a namespace of their own, the
// only one whose Secrets the daemons can read (pinned/pinned.go
// mirrorSecret): get, create, update; delete: a Secret's type cannot
// change, so a mirror whose source changed type (dockercfg and
// dockerconfigjson) is deleted and created again.
// +kubebuilder:rbac:groups="",namespace=bootroll-pull-secrets,resources=secrets,verbs=get;create;update;delete
