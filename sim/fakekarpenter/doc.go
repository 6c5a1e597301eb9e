// Package fakekarpenter is the twin's model of Karpenter (kubernetes-sigs/
// karpenter v1.14 and v1.15): reconcilers over a controller-runtime client
// and an injected clock that provision NodeClaims for pending pods, take
// them through launch, registration and initialization, and disrupt nodes
// the way Karpenter does: the consolidatable timer, emptiness,
// WhenEmptyOrUnderutilized consolidation, drift, expiry, node repair and
// termination with tiered, PDB-honouring drains. The facts and defaults it
// follows are those of reference/karpenter.md; NodePools and NodeClaims are
// unstructured karpenter.sh/v1 objects, so it needs no Karpenter Go
// dependency.
//
// The reconcilers are plain Reconcile(ctx, req) values; Controllers lists
// them with the watch-event mapping a manager would give them and the keys
// they start with, so the twin can run each on its own queue on virtual
// time. Nothing reads the wall clock, starts a goroutine, draws randomness
// or lets map order reach a decision: every listing is sorted.
//
// The disruption loop and the Provisioner decide on a snapshot of the
// cluster kept from watch events: the twin passes every event to
// Observe (see cache.go); without it each decision lists the cluster.
//
// Keys and the watch events that enqueue them (each reconciler's Map):
//   - Provisioner, ProvisionerKey: a pending pod created or updated, a
//     NodePool event, a NodeClaim deleted; it polls while pods are pending.
//   - NodeClaimLifecycle, a NodeClaim's name: its own events, its Node's
//     events, its NodePool's events; MapNodeClass for a NodeClass whose
//     image changed (else drift shows within DriftRecheck).
//   - PodEvents, a Node's name: a non-DaemonSet pod on it binds, becomes
//     terminal, starts terminating or is deleted.
//   - Expiry, a NodeClaim's name: its creation.
//   - Health (v1.14 repair), a Node's name: its creation and Ready changes.
//   - Termination, a Node's name: its events while it is being deleted, and
//     the events of its pods while it drains.
//   - Disruption, DisruptionKey: none; the loop polls.
//   - Orchestration, OrchestrationKey: NodeClaim events while replace
//     commands wait for their replacements.
//
// Where the model simplifies Karpenter, on purpose:
//   - Instance types: one per NodePool, its allocatable from
//     Options.Capacity; no prices, zones, capacity types or offerings. A
//     new node's room for pods is that allocatable less the DaemonSet pods
//     seen on the pool's nodes (the most on any one).
//   - Scheduling simulation: a first-fit, largest-first packing on cpu,
//     memory and pod count, honouring nodeSelector and NoSchedule/NoExecute
//     taints only (no affinity, topology spread, host ports or volumes).
//     Destinations are Ready, uncordoned, undisrupted, initialized nodes;
//     pending pods are packed before a candidate's pods.
//   - Provisioning: each pending pod waits BatchIdleDuration from when it
//     is first seen (not Karpenter's idle/max batcher); pods that fit on an
//     existing node or on a NodeClaim still launching are left to the
//     scheduler. NodePool requirements only supply labels (operator In);
//     limits cover cpu and memory.
//   - Consolidation: single-node delete only (a candidate whose pods all
//     fit on other nodes); no replace-with-cheaper, and multi-node
//     consolidation and static drift (static NodePools) keep their place in
//     the method order but never act. A node is nominated (and not
//     disrupted) while the packing puts a pending pod on it; nominations do
//     not outlive the pass.
//   - Drift: the NodeClass boot image (Options.NodeClassImages against the
//     image recorded on the NodeClaim, AnnotationBootImage) and a hash of
//     the template's labels, annotations, taints, startup taints and
//     NodeClass; requirements drift is not modelled.
//   - Budgets: schedules are standard five-field cron in UTC with numbers,
//     ranges, steps and lists, or the @-macros; no month or weekday names.
//   - Repair: one policy, Ready False or Unknown for RepairToleration; its
//     drain bound is the NodeClaim's terminationGracePeriod (v1.15) or now
//     (v1.14, forceful). No RebootNode action.
//   - Termination: no volume detachment; pods are force-deleted at the
//     drain deadline less their grace period; the instance is terminated
//     through Provider.Terminate once the node is drained and MinDrain has
//     passed since its deletion.
//   - The orchestration queue is in memory, as in Karpenter: a new
//     Karpenter forgets queued commands (their taints are then removed by
//     the next disruption pass).
package fakekarpenter
