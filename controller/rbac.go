package controller

// The controller's permissions. `make manifests` generates
// config/rbac/role.yaml from these markers (ClusterRole bootroll-controller,
// and Role bootroll-controller in bootroll-system for the namespaced rules);
// config/manifests_test.go fails when role.yaml is out of date.

// Its own API: it reads pools and writes their status and, by patch, its
// finalizer (bootroll.dev/cleanup); it owns the BootcNodes. bootcnodepools/finalizers update lets it set
// blockOwnerDeletion on the BootcNodes' owner reference to their pool
// (controllerutil.SetControllerReference) on clusters that enforce
// OwnerReferencesPermissionEnforcement, such as OpenShift.
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodepools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodepools/status,verbs=update;patch
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodepools/finalizers,verbs=update
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodes,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=bootroll.dev,resources=bootcnodes/status,verbs=get;update;patch

// Cordon and annotate Nodes; drain them through the Eviction API, reading
// pods and the PodDisruptionBudgets that guard them.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch

// Events, through either Events API.
// +kubebuilder:rbac:groups="";events.k8s.io,resources=events,verbs=create;patch

// Karpenter: protect NodeClaims of nodes that hold a reboot slot, and
// notice when the NodeClaim CRD is installed or removed.
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch

// Namespaced to the controller's namespace: the pools' imagePullSecrets
// (read one by one, never listed) and the leader election lease.
// +kubebuilder:rbac:groups="",namespace=bootroll-system,resources=secrets,verbs=get
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=bootroll-system,resources=leases,verbs=get;create;update

// PinnedImageSets: write the sets into BootcNode specs and their status.
// +kubebuilder:rbac:groups=bootroll.dev,resources=pinnedimagesets,verbs=get;list;watch
// +kubebuilder:rbac:groups=bootroll.dev,resources=pinnedimagesets/status,verbs=get;update;patch

// The sets' pull secrets are mirrored into a namespace of their own, the
// only one whose Secrets the daemons can read. delete: a Secret's type
// cannot change, so a mirror whose source changed type (dockercfg and
// dockerconfigjson) is deleted and created again (mirrorSecret).
// +kubebuilder:rbac:groups="",namespace=bootroll-pull-secrets,resources=secrets,verbs=get;create;update;delete
