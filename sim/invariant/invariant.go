// Package invariant checks the twin's named invariants and a scenario's
// expectations. A Checker keeps a World up to date from the API server's
// watch events and the cluster model's reboot reports, checks the
// invariants that can fail at any moment after every engine event
// (max-unavailable, pdb-respected, no-double-reboot,
// no-unprotected-reboot, halt-is-final, grant-in-window, and the
// deadlines of cleanup, no-stranded-node and no-leaked-annotation) in
// time that does not grow with the cluster, and checks the rest at the
// end of a run
// (no-leaked-cordon, no-leaked-annotation, converges and the
// expectations).
//
// An invariant is computed from the objects' specs, the ground truth of
// the cluster model and the trace alone: nothing here imports or calls the
// controller it judges.
package invariant

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Names of the checks that are expectations rather than invariants; they
// appear in violations like invariant names.
const (
	ExpectCompletesWithin = "completes-within"
	ExpectFinalImages     = "final-images"
	ExpectFailedNodes     = "failed-nodes"
	ExpectHalted          = "halted"
)

// Info describes one named invariant.
type Info struct {
	Name        scenario.Invariant
	Description string
	// Karpenter is true for invariants about Karpenter, which the twin
	// cannot check yet.
	Karpenter bool
}

// Registry lists every invariant the twin knows, in scenario.AllInvariants
// order.
var Registry = []Info{
	{scenario.InvMaxUnavailable, "bootroll never makes a node of a pool unavailable while that would put more than maxUnavailable of the pool's current members out: an integer, or a percentage of the members (Nodes the selector matches, not being deleted) rounded down and at least 1 when above 0% and the pool has members, default 1 (api/v1alpha1). A node is unavailable because of bootroll while its Node exists and is not being deleted and it carries bootroll's slot marker, is listed in a pool's status.slots, has a reboot requested by bootroll's daemon in progress (until it was NotReady and is Ready again, or is Ready with a new boot ID, or is Failed/RolledBack), or its BootcNode is in a slot phase; the last two not on the os-not-ready fast path. Members that leave or are deleted by others lower the bound, and a node that joins already down raises the count, without blaming bootroll: only an increase of the count past the bound by bootroll is a violation", false},
	{scenario.InvPDBRespected, "no pod removal of bootroll's takes a PodDisruptionBudget below its floor: judged per removal bootroll's own request makes (an eviction the API server granted, or a deletion under testOnly.deleteInsteadOfEvict), from the budget's healthy count just before it; the removal is a violation when the pod was healthy (the count goes down) and the count is then below the pods that must be healthy. Refused evictions remove nothing, and pods others remove or that turn unhealthy (node crash, power cycle, scale-down, Karpenter's drain) are never bootroll's, even when they take the budget below its floor", false},
	{scenario.InvNoReapWhileUpdating, "Karpenter decides to disrupt (consolidation, drift) or repair no node that holds a slot (bootroll's slot marker or a slot phase of its BootcNode, or still down in a reboot bootroll's daemon asked for, until the pool's healthTimeout from the boot order it carries out has passed or a cleanup someone else started reaches its cap; a crash or power cycle is not such a reboot), nor taints karpenter.sh/disrupted or drains such a node it decided to disrupt; an expiry is recorded as a forceful exception, and Karpenter's termination of a node someone else deleted (an admin's delete of the Node or NodeClaim) is not Karpenter's decision and is not blamed; nor is a repair less than " + RepairReactBound.String() + " of the controller's running time after someone other than bootroll removed karpenter.sh/do-not-repair from the node (Karpenter repairs without validation), or after the controller's last request that an injected API fault failed, if later (it must make that request again), nor a graceful disruption (consolidation, drift) less than " + ProtectionReactBound.String() + " of it after someone other than bootroll removed karpenter.sh/do-not-disrupt that bootroll had put on for the update (in the twin both bounds run from when the controller's cache received the removal: it cannot react to what it has not seen)", true},
	{scenario.InvNoLeakedCordon, "at the end no node outside a slot is cordoned by bootroll, and nodes cordoned before stay cordoned", false},
	{scenario.InvNoLeakedAnnotation, "no annotation bootroll adds outlives its purpose: Karpenter protection bootroll added to a Node or its NodeClaim is gone within " + ProtectionGrace.String() + " after the slot ends (or, when the node is then still down in a reboot bootroll's daemon asked for, after that reboot ends, as no-reap-while-updating counts it) plus the pool's karpenter.postUpdateProtection, and at the end no node outside a slot carries such an annotation that it did not have at creation, unless its protection deadline is still ahead; nor has any node lost a protection annotation it had at creation or that an operator set (kubectl annotate) and nobody removed", false},
	{scenario.InvNoDoubleReboot, "no node is rebooted twice into the same image while its pool's spec.image stays the same (A -> B -> A by an operator starts a new generation; so does a boot of another image through a reboot bootroll asked for into it under another pool or spec.image, not a fall-back, rollback or crash back)", false},
	{scenario.InvNoChurn, "Karpenter disrupts no node because of bootroll, judged when it decides to: (1) no disruption or repair of a node bootroll has taken for its update (slot marker, or BootcNode Rebooting or Verifying; a node given a slot but not cordoned yet is untouched and its disruption is Karpenter's own), and no graceful disruption (Empty, Underutilized, Drifted) before the post-update protection of its last slot has run out (marker removal + the pool's karpenter.postUpdateProtection when the node was rebooted in that slot, or earlier once a workload pod is bound to it again, as the API documents); (2) no consolidation (Empty, Underutilized) of a node bootroll drained (removed a workload pod from while marked) sooner than its NodePool's consolidateAfter (at most " + RefillBound.String() + ") after bootroll uncordoned it, unless a workload pod was bound to it since, as the emptiness Karpenter counted is then bootroll's drain. Expiry, Karpenter's termination of nodes others delete, drift from a NodeClass change and consolidation of nodes others emptied or that stayed empty for consolidateAfter after their update are not bootroll's churn; nor is a graceful disruption, in a slot or after it, before the controller ran " + ProtectionReactBound.String() + " after someone else removed do-not-disrupt, or a repair before it ran " + RepairReactBound.String() + " after someone else removed do-not-repair, or after its last request an injected API fault failed, if later (in the twin, from when the controller's cache received the removal)", true},
	{scenario.InvConverges, "every pool ends UpToDate, or Halted with a reason, before the limit; or, stalled by the world, says so: Degraded/" + reasonDrainsBlocked + " while a PodDisruptionBudget allows no eviction at the end or refused one within " + StallEvidence.String() + " of the time the pool's maintenance windows were open since, or Degraded/" + reasonNodesUnavailable + " while as many member Nodes as its slots are not Ready, or every Ready member runs the target or was rebooted off it to another image (rolled back: off the target then, or under a rollback order that leaves it) or into it and came back on another (fell back) since spec.image last changed or in a reboot that was still under way then, or before and not since, given a boot order into it again since spec.image came back to it, fewer such than maxFailures, or Degraded/" + reasonDaemonErrors + " while every member not on the target is down or failed an OS staging for lack of disk space (not the pinned images') within " + StallEvidence.String() + ", or UpToDate=False/" + reasonOutsideWindow + " outside its maintenance windows, with none open (under the same windows) since the work it has left appeared: its spec.image last changed, or every member not on the target joined it later, or after granting a slot in the last drainTimeout + healthTimeout of the latest one, or after a PodDisruptionBudget refused an eviction while it held a slot, for that work, within " + StallEvidence.String() + " of the time its windows were open since; a pool whose members not on the target are all Karpenter nodes that expire no later than the shortest reboot (no controller can update them), counting such a node that is going (Node deleted, its BootcNode still in the pool or deleted since) until the controller ran " + LeaveReactBound.String() + " after its cache held the deletion (without a cache model, after the deletion), is recorded as the exception " + ExceptionExpiryOutpacesUpdates, false},
	{scenario.InvOSStagingNotStarved, "no OS staging fails for lack of image-filesystem space while pinned images hold enough of it that the staging would have fit", false},
	{scenario.InvPinnedSetsExact, "at the end every BootcNode carries its pinned sets as the PinnedImageSets say and, when its daemon runs then (not on a host that is down or hung in a boot that never gets Ready: the daemon is the status's only writer), reports exactly their current images, and the images it reports present are on the host", false},
	{scenario.InvNoUnprotectedReboot, "at the instant a reboot into another image is requested, the Node is cordoned by bootroll (spec.unschedulable and the " + v1alpha1.AnnotationSlot + " marker), drained (no pod bound to it but DaemonSet, mirror and finished pods; terminating pods count) and holds a slot (the marker's pool lists it in status.slots); or it is on the os-not-ready fast path (taint " + v1alpha1.TaintOSNotReady + " and no such pod)", false},
	{scenario.InvHaltIsFinal, "once a pool is Halted for a target (condition Halted=True for its generation, target in status.targetImage), no new status.slots entry and no new boot order (a BootcNode of the pool given a spec.bootOrder, not withdrawn, for that desiredImage) is given for that target until spec.image changes, whatever happens to the failed nodes or the condition; the checker remembers the halt itself", false},
	{scenario.InvCleanup, "within " + CleanupBound.String() + " of a pool's deletion, a BootcNode's deletion or a node leaving its pool (labels no longer match), a Node bootroll had marked is back as bootroll found it: the cordon it had, no slot marker, no Karpenter annotation or bootroll.dev/ taint it did not have, and none on its NodeClaim either; a reboot, a node not Ready or a boot order its daemon has not acknowledged (status.daemon.observedGeneration below the record's generation) in the meantime (bootroll keeps a node it cannot hear from cordoned) moves the bound to " + CleanupBound.String() + " after the node is Ready again and its daemon caught up, at most " + CleanupRebootCap.String() + " (or the pool's healthTimeout when longer) after the deletion; so does a request of the controller for the node's Node or BootcNode that an injected API fault failed after the deletion (" + CleanupBound.String() + " after the last such failure, with the same cap)", false},
	{scenario.InvNoStrandedNode, "no node stays cordoned by bootroll (unschedulable with the slot marker, or the cordon left behind when the marker went) or tainted by bootroll beyond a bound, whatever the pool's state: drainTimeout + 2 × healthTimeout + " + StrandSlack.String() + " of its pool from the cordon or the last spec.image change for a node in a slot, " + UnslottedStrandBound.String() + " for a node in no pool's slot table", false},
	{scenario.InvUpdatedHealthy, "a node bootroll records Updated at the end of its slot (its BootcNode's phase goes from Draining, Rebooting or Verifying to Updated) passes its pool's spec.healthChecks then: Node Ready, Ready without a break for readyFor since it last turned Ready or booted (to the second, as the API records it), the named Node conditions with their statuses, and a Ready, not terminating pod on it controlled by each named DaemonSet; or passed them all at a moment of the same boot at most " + HealthStale.String() + " before (the controller decides on cached state)", false},
	{scenario.InvGrantInWindow, "a pool gives a reboot slot (a node newly listed in status.slots, or listed again with another since, as a takeover of a node down in an earlier slot is) only at a time (its since, which the API records to the second: the windows in effect at any moment of that second count) inside one of the maintenance windows its spec.windows had then, as the API documents them: daily from start (UTC) for duration, the end excluded, opening on the listed weekdays or every day, so a window runs past midnight into a day not listed; a pool whose spec had no windows then is always open, a slot already held is not granted again when a window closes or an edit of spec.windows closes it, and a node on the os-not-ready fast path takes no slot", false},
}

// Violation is one failed invariant or expectation.
type Violation struct {
	// Invariant is the invariant's or expectation's name.
	Invariant string
	// At is the virtual time since the start of the run.
	At time.Duration
	// Objects name what is involved, "Kind/name", sorted within a kind.
	Objects []string
	// Message says what was seen.
	Message string
}

// String formats the violation for a person.
func (v Violation) String() string {
	return fmt.Sprintf("%s at %s: %s [%s]", v.Invariant, v.At, v.Message, strings.Join(v.Objects, ", "))
}

// Sources are the cluster model's answers the checks need.
type Sources struct {
	// Now returns the virtual time; nil means the time of the last Check.
	Now func() time.Time
	// Booted returns the image node boots now.
	Booted func(node string) string
	// PDBs returns the PodDisruptionBudgets' state.
	PDBs func() []facts.PDBState
	// PodRemovals returns how many requests bootroll has made that remove
	// pods: evictions, plus direct deletions (only the deliberately broken
	// bootroll.testOnly.deleteInsteadOfEvict deletes pods, and a PDB
	// violated by such a deletion must count as bootroll's).
	PodRemovals func() uint64
	// EvictionsRefused returns how many evictions PodDisruptionBudgets
	// have refused so far; nil means none are known.
	EvictionsRefused func() uint64
}

// Outcome is how a run ended, for the end-of-run checks.
type Outcome struct {
	// End is the virtual time since the start when the run stopped.
	End time.Duration
	// Converged is true when every pool was converged at the end;
	// ConvergedAt is since when.
	Converged   bool
	ConvergedAt time.Duration
}

// Checker checks one run.
type Checker struct {
	sc      *scenario.Scenario
	src     Sources
	start   time.Time
	enabled map[scenario.Invariant]bool
	// maxUnavailable is enabled[scenario.InvMaxUnavailable], which Check
	// reads after every event.
	maxUnavailable bool
	world          *World

	violations []Violation
	// caught counts violations per name, including the repeats that are
	// not recorded.
	caught map[string]int

	// lastRemovals is bootroll's count of pod-removing requests at the
	// last event; pdbPending are the budgets bootroll removed covered
	// pods from in the current engine event.
	lastRemovals uint64
	pdbPending   []pdbRemoval
	// reboots counts reboot requests per node, digest and pool image
	// generation (reboot.go).
	reboots map[string]map[rebootKey]int // by node: a reboot forgets only its node's counts
	// halts are the remembered halts by pool (halt.go).
	halts map[string][]*halt
	// deadlines are the pending time-based checks (touch.go).
	deadlines           deadlineHeap
	seq                 uint64
	touchSeq, strandSeq uint64
	lastNow             time.Time
	// downSince is when the controller stopped (zero while it runs);
	// downTotal its downtime before that (ControllerRunning).
	downSince time.Time
	downTotal time.Duration
	// downs are the controller's down periods that ended, in order
	// (runningBetween).
	downs []period
	// failedRequest is when an API fault last failed a request of the
	// controller (ControllerRequestFailed); failedOn when one last failed
	// a request for a node's own Node or BootcNode, by node name.
	failedRequest time.Time
	failedOn      map[string]time.Time
	// refused is EvictionsRefused at the last Check; lastRefusal when it
	// last grew.
	refused     uint64
	lastRefusal time.Time
	// karp follows the fake Karpenter (karpenter.go).
	karp *karpenterState
	// pinned follows PinnedImageSets and pinned-image progress (pinned.go).
	pinned *pinnedState
}

// maxRecorded bounds the violations recorded per name; later ones are
// only counted.
const maxRecorded = 20

// New returns the checker of a scenario's run that starts at start. It
// refuses invariants it cannot check: those about Karpenter when the
// scenario has a karpenter section.
func New(sc *scenario.Scenario, src Sources, start time.Time) (*Checker, error) {
	c := &Checker{
		sc: sc, src: src, start: start,
		enabled: map[scenario.Invariant]bool{},
		world:   NewWorld(),
		caught:  map[string]int{},
		reboots: map[string]map[rebootKey]int{},
		halts:   map[string][]*halt{},
		lastNow: start,
	}
	w := c.world
	w.nodeHook = c.nodeChanged
	w.poolHook = c.poolChanged
	w.bootcHook = func(n *Node, t apiserver.EventType, old, o *v1alpha1.BootcNode) {
		c.bootcChanged(n, t, old, o)
		if t != apiserver.Deleted && old != nil {
			c.checkUpdatedHealthy(n, old.Status.Phase, o.Status.Phase)
		}
	}
	w.clock = c.now
	w.leftHook = c.leftPool
	for _, inv := range sc.Expect.Invariants {
		info := lookup(inv)
		if info == nil {
			return nil, fmt.Errorf("expect.invariants: unknown invariant %q", inv)
		}
		c.enabled[inv] = true
	}
	c.maxUnavailable = c.enabled[scenario.InvMaxUnavailable]
	return c, nil
}

func lookup(inv scenario.Invariant) *Info {
	for i := range Registry {
		if Registry[i].Name == inv {
			return &Registry[i]
		}
	}
	return nil
}

// now returns the virtual time.
func (c *Checker) now() time.Time {
	if c.src.Now != nil {
		return c.src.Now()
	}
	return c.lastNow
}

// World returns the checker's view of the cluster, which the runner reads
// for convergence and timelines.
func (c *Checker) World() *World { return c.world }

// Enabled reports whether the scenario checks inv.
func (c *Checker) Enabled(inv scenario.Invariant) bool { return c.enabled[inv] }

// Observe applies a watch event. Subscribe it to the API server before
// anything that writes.
func (c *Checker) Observe(ev apiserver.Event) {
	// A request of bootroll's that removes pods counts before the API
	// server serves it, and the removal's watch event comes while it is
	// served: a pod removal seen while the count moved is bootroll's. A
	// refused eviction moves the count and removes nothing; the count is
	// taken again at every event, so it blames nobody later.
	if bootroll := c.syncRemovals(); bootroll {
		if node, workload, ok := c.world.podRemoval(ev); ok {
			c.bootrollRemovedPod(ev.Object.(*corev1.Pod), node, workload)
		}
	}
	c.world.Observe(ev)
	c.followRefill(ev)
	if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetKind() == "NodePool" && strings.HasPrefix(u.GetAPIVersion(), "karpenter.sh/") {
		c.observeNodePool(ev.Type, u)
	}
	c.observePinned(ev)
}

// syncRemovals takes bootroll's count of pod-removing requests and reports
// whether it moved since the last call.
func (c *Checker) syncRemovals() bool {
	if c.src.PodRemovals == nil {
		return false
	}
	n := c.src.PodRemovals()
	moved := n != c.lastRemovals
	c.lastRemovals = n
	return moved
}

// Check runs the invariants that hold at every moment; call it after every
// engine event with the virtual time. Its cost is that of the pools and
// nodes that changed in the event.
func (c *Checker) Check(now time.Time) {
	c.lastNow = now
	// A violation's offset (now - start) is worked out only where one
	// may be recorded: Time.Sub was a tenth of this check's cost.
	if c.src.EvictionsRefused != nil {
		if n := c.src.EvictionsRefused(); n != c.refused {
			c.refused, c.lastRefusal = n, now
			for _, p := range c.world.Pools() {
				if len(p.slots) > 0 {
					p.LastRefusal = now
				}
			}
		}
	}
	// The calls below that most events have nothing for are made only
	// when they have something to do (guards of a few instructions, at
	// every engine event).
	if len(c.deadlines) > 0 && !c.deadlines[0].at.After(now) {
		c.runDeadlines(now)
	}
	if c.maxUnavailable {
		if dirty := c.world.TakeDirty(); len(dirty) > 0 {
			at := now.Sub(c.start)
			for _, p := range dirty {
				c.checkMaxUnavailable(p, at)
			}
		}
	} else {
		c.world.TakeDirty()
	}
	c.world.TakePodRemoved()
	c.world.TakePodsChanged()
	c.syncRemovals()
	if len(c.pdbPending) > 0 {
		c.checkPDBs(now)
	}
	if c.pinned != nil {
		c.checkPinned(now)
	}
}

// MaxUnavailableBound is the number of nodes of a pool with members
// member nodes that may be unavailable because of bootroll, as the API
// documents spec.rollout.maxUnavailable: an integer >= 0, or a percentage
// "0%".."100%" of the members rounded down, at least one node when the
// percentage is above 0 and the pool has members; absent, 1.
func MaxUnavailableBound(mu *intstr.IntOrString, members int) (int, error) {
	if mu == nil {
		return 1, nil
	}
	if mu.Type == intstr.Int {
		if mu.IntVal < 0 {
			return 0, fmt.Errorf("%d is negative", mu.IntVal)
		}
		return int(mu.IntVal), nil
	}
	pct, ok := strings.CutSuffix(mu.StrVal, "%")
	v, err := strconv.Atoi(pct)
	if !ok || err != nil || v < 0 || v > 100 {
		return 0, fmt.Errorf("%q is neither an integer nor a percentage from 0%% to 100%%", mu.StrVal)
	}
	n := v * members / 100
	if n == 0 && v > 0 && members > 0 {
		n = 1
	}
	return n, nil
}

func (c *Checker) checkMaxUnavailable(p *Pool, at time.Duration) {
	if !p.live {
		return
	}
	limit, err := MaxUnavailableBound(p.MaxUnavailable, p.Members)
	if err != nil {
		c.record(Violation{Invariant: string(scenario.InvMaxUnavailable), At: at, Objects: []string{"BootcNodePool/" + p.Name},
			Message: fmt.Sprintf("spec.rollout.maxUnavailable: %v", err)})
		return
	}
	// Only bootroll's own doing counts: more nodes unavailable than at
	// the last check, past the bound. A bound that drops below the count
	// because members left or were deleted by others blames no one.
	grew := p.Unavailable > p.lastUnavailable
	p.lastUnavailable = p.Unavailable
	over := p.Unavailable > limit
	if !over {
		p.overLimit = false
		return
	}
	if grew && !p.overLimit {
		objs := []string{"BootcNodePool/" + p.Name}
		for _, n := range p.UnavailableNodes() {
			objs = append(objs, "Node/"+n)
		}
		c.record(Violation{Invariant: string(scenario.InvMaxUnavailable), At: at, Objects: objs,
			Message: fmt.Sprintf("%d nodes of pool %s are unavailable because of bootroll; maxUnavailable %s of %d nodes allows %d",
				p.Unavailable, p.Name, intOrString(p), p.Members, limit)})
		p.overLimit = true
	}
}

func intOrString(p *Pool) string {
	if p.MaxUnavailable == nil {
		return "(default 1)"
	}
	return p.MaxUnavailable.String()
}

// pdbRemoval is a PodDisruptionBudget from which bootroll removed a
// covered pod in the current engine event, with its healthy count just
// before the first such removal.
type pdbRemoval struct {
	key    string
	before facts.PDBState
	pod    string
}

// bootrollRemovedPod handles a pod removal that bootroll's own request
// (an eviction the API server granted, or a deletion) is making, at the
// moment of the removal and before anything else has counted it: it notes
// the healthy count of each PodDisruptionBudget that covers the pod. A
// node that loses a workload pod this way was drained by bootroll
// (no-churn).
func (c *Checker) bootrollRemovedPod(p *corev1.Pod, node string, workload bool) {
	if workload && node != "" {
		if n := c.world.Node(node); n != nil {
			n.churn.drainedAt = c.now()
		}
	}
	if c.src.PDBs == nil || !c.enabled[scenario.InvPDBRespected] {
		return
	}
	keys := c.world.PDBsCovering(p)
	if len(keys) == 0 {
		return
	}
	states := c.src.PDBs()
	for _, key := range keys {
		if slices.ContainsFunc(c.pdbPending, func(r pdbRemoval) bool { return r.key == key }) {
			continue // the count before the event's first removal stands
		}
		for _, st := range states {
			if st.Namespace+"/"+st.Name == key {
				c.pdbPending = append(c.pdbPending, pdbRemoval{key: key, before: st, pod: p.Namespace + "/" + p.Name})
			}
		}
	}
}

// checkPDBs judges, at the end of an engine event, the removals bootroll
// made in it: a PodDisruptionBudget is violated by bootroll when a pod
// bootroll removed (a granted eviction or a deletion) was healthy (the
// budget's healthy count went down) and the count is now below the
// budget's floor. Pods that others remove or that turn unhealthy (a node
// crash, a power cycle, a scale-down) are never bootroll's, nor are
// refused evictions, which remove nothing. Within one engine event only
// bootroll's reconcile removes pods, so the drop is that of bootroll's
// removals.
func (c *Checker) checkPDBs(now time.Time) {
	if len(c.pdbPending) == 0 {
		return
	}
	at := now.Sub(c.start)
	pending := c.pdbPending
	c.pdbPending = nil
	states := c.src.PDBs()
	for _, r := range pending {
		for _, st := range states {
			if st.Namespace+"/"+st.Name != r.key {
				continue
			}
			if st.Healthy < r.before.Healthy && st.Healthy < st.DesiredHealthy {
				c.record(Violation{Invariant: string(scenario.InvPDBRespected), At: at, Objects: []string{"PodDisruptionBudget/" + r.key, "Pod/" + r.pod},
					Message: fmt.Sprintf("bootroll removed healthy pod(s) covered by PodDisruptionBudget %s (an eviction or deletion of %s, the first): healthy went from %d to %d, below the %d that must be healthy (%d expected)",
						r.key, r.pod, r.before.Healthy, st.Healthy, st.DesiredHealthy, st.ExpectedPods)})
			}
		}
	}
}

func pdbCounts(st facts.PDBState) string {
	return fmt.Sprintf("%d healthy of %d expected, %d must be healthy", st.Healthy, st.ExpectedPods, st.DesiredHealthy)
}

// PoolViewConsistent names the violation of the controller's own
// self-check that the twin reports through Report: a pool's incrementally
// kept node table differed from a full rebuild. It is checked in every
// run, whatever the scenario's invariants list.
const PoolViewConsistent = "pool-view-consistent"

// Report records a violation the caller found itself, e.g. a self-check
// of the controller that failed.
func (c *Checker) Report(v Violation) { c.record(v) }

// record keeps a violation; past maxRecorded of one name it only counts.
func (c *Checker) record(v Violation) {
	c.caught[v.Invariant]++
	if c.caught[v.Invariant] <= maxRecorded {
		c.violations = append(c.violations, v)
	}
}

// Finish runs the end-of-run checks and expectations.
func (c *Checker) Finish(out Outcome) {
	at := out.End
	w := c.world
	c.runDeadlines(c.start.Add(out.End))
	names := w.NodeNames()
	if c.enabled[scenario.InvNoLeakedCordon] {
		c.leakedCordons(names, at)
	}
	if c.enabled[scenario.InvNoLeakedAnnotation] {
		c.leakedAnnotations(names, at)
	}
	if c.enabled[scenario.InvConverges] && !out.Converged {
		var objs, parts []string
		for _, p := range w.Pools() {
			if p.converged {
				continue
			}
			if c.budgetsBlock(p) && p.ObservedGeneration == p.Generation && p.Degraded && p.DegradedReason == reasonDrainsBlocked {
				// Stalled by budgets that allow no eviction, and says so:
				// the world's doing, reported honestly.
				continue
			}
			if p.ObservedGeneration == p.Generation && p.Degraded && p.DegradedReason == reasonDaemonErrors && c.diskBlocks(p) {
				// Stalled by full disks its daemons report, and says so.
				continue
			}
			if p.ObservedGeneration == p.Generation && p.Degraded && p.DegradedReason == reasonNodesUnavailable && c.downNodesBlock(p) {
				// Stalled by member nodes that are down, as many as its
				// slots or all it has left to update, and says so.
				continue
			}
			if p.ObservedGeneration == p.Generation && !p.UpToDate && p.UpToDateReason == reasonOutsideWindow && c.windowSpent(p, c.start.Add(out.End)) {
				// Its maintenance window closed with work left, after the
				// pool kept granting slots into its last stretch, or
				// before that work appeared: the rest waits for the next
				// window, by the spec.
				continue
			}
			if doomed := c.expiryOutpacesUpdates(p, c.start.Add(out.End)); len(doomed) > 0 {
				// No controller can update these nodes before Karpenter
				// expires them, and their replacements come from the
				// NodeClass: the world's doing, recorded as an exception.
				ks := c.kstate()
				ks.exceptions = append(ks.exceptions, Violation{Invariant: ExceptionExpiryOutpacesUpdates, At: at, Objects: append([]string{"BootcNodePool/" + p.Name}, nodeObjects(doomed)...),
					Message: fmt.Sprintf("pool %s cannot converge: its nodes not on the target (%s) are Karpenter nodes whose NodeClaims expire (expireAfter) no later than the shortest reboot (host.reboot, %s), so none can finish an update before Karpenter deletes it; %s", p.Name, short(doomed), c.minReboot(), poolState(p))})
				continue
			}
			objs = append(objs, "BootcNodePool/"+p.Name)
			parts = append(parts, poolState(p))
		}
		if len(objs) > 0 {
			c.record(Violation{Invariant: string(scenario.InvConverges), At: at, Objects: objs,
				Message: fmt.Sprintf("not every pool is UpToDate or Halted with a reason, or Degraded/%s while a PodDisruptionBudget blocks evictions, or Degraded/%s or %s while down members or full disks block it, at the end (%s): %s", reasonDrainsBlocked, reasonNodesUnavailable, reasonDaemonErrors, at, strings.Join(parts, "; "))})
		}
	}
	c.finishKarpenter(at)
	c.expectations(out)
	c.finishPinned(at)
}

// reasonOutsideWindow is the UpToDate reason of a pool waiting for its
// maintenance window (the API's documented value, written here so the
// invariant does not read it from the code it judges).
const reasonOutsideWindow = "OutsideMaintenanceWindow"

// windowSpent reports whether pool p may end unconverged for its
// maintenance windows at end: end is outside every window of its spec (as
// this file reads the spec: daily UTC windows, on the listed weekdays),
// and either no window was open since the work the pool has left
// appeared (workSince), under windows that were the spec's already then,
// so no slot could be granted for it (explorer seed 176001 of the 129187
// regression: the pool rolled back to v1 in its 00:23 window, the image
// was set to v2 at 1h58m, after the window closed, and the run ended at
// 4h22m, before the next one; explorer seed 176069 of it: its one node
// left the pool at 1h59m and joined it again at 2h6m20s, after the
// window closed, not on the target), or the pool granted a slot in the last
// stretch of its latest window (no earlier than drainTimeout +
// healthTimeout before it closed, what one more node may take), so it
// worked its window to the end (explorer seed 97187 of rollout-100-nodes:
// a 2h26m window with maxUnavailable 1 for 100 nodes), or a
// PodDisruptionBudget refused an eviction while the pool held a slot
// (LastRefusal), for the work it has left (no earlier than workSince),
// under the windows it has now, within StallEvidence of the time they
// were open since: its window went on drains the budgets refused, and
// none can be tried until the next (explorer seed 176333 of the 129187
// regression: the budget refused workers-0's drains in the 00:23 window
// until 01:11:11, the last retry due after it closed at 01:29:50; an admin
// deleted its BootcNode at 2h19m, the record made again had no refused
// drain, so the pool said OutsideMaintenanceWindow, not DrainsBlocked,
// until the run ended at 4h43m, before the next window).
func (c *Checker) windowSpent(p *Pool, end time.Time) bool {
	if len(p.Windows) == 0 {
		return false
	}
	inside, open, closed := lastWindow(p.Windows, end)
	if inside {
		return false
	}
	since := c.workSince(p)
	if !since.IsZero() && !p.windowsChangedAt().After(since) && openTime(p.Windows, since, end) == 0 {
		return true
	}
	if r := p.LastRefusal; !since.IsZero() && !r.Before(since) && !p.windowsChangedAt().After(r) && openTime(p.Windows, r, end) <= StallEvidence {
		// Its drains were refused in its window, by the world's account,
		// and no retry could run since (explorer seed 176333 of the 129187
		// regression): the stall budgetsBlock takes at the pool's word as
		// Degraded/DrainsBlocked, told by a pool whose records no longer
		// hold the refusal (its BootcNode deleted and made again).
		return true
	}
	if closed.IsZero() {
		return false
	}
	last := p.LastGrant
	return !last.Before(open) && last.Before(closed) && !last.Before(closed.Add(-(p.DrainTimeout + p.HealthTimeout)))
}

// workSince is when the work pool p has left appeared: for each member
// not on the pool's target, the later of the spec.image change and the
// node's joining the pool, the earliest of these over those members; the
// spec.image change alone when every member is on the target. A member
// that was one when the image changed has had the work since then, one
// that joined later (a new node, or a node relabelled into the pool) only
// since it joined. On the target is by the host's booted image where the
// sources give it, by the daemon's report otherwise.
func (c *Checker) workSince(p *Pool) time.Time {
	since := p.ImageChangedAt
	if since.IsZero() {
		return since
	}
	target := digestOf(p.TargetImage)
	var first time.Time
	for _, name := range c.world.Members(p.Name) {
		booted := c.world.Node(name).BootedDigest
		if c.src.Booted != nil {
			booted = digestOf(c.src.Booted(name))
		}
		if p.TargetImage != "" && booted == target {
			continue
		}
		at := since
		if joined := p.memberSince[name]; joined.After(at) {
			at = joined
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	if first.IsZero() {
		return since
	}
	return first
}

// windowOn is window w on day d (midnight UTC): [from, to), and false
// when it is not open that day or its start does not parse.
func windowOn(w v1alpha1.MaintenanceWindow, d time.Time) (from, to time.Time, ok bool) {
	var hh, mm int
	if _, err := fmt.Sscanf(w.Start, "%d:%d", &hh, &mm); err != nil {
		return from, to, false
	}
	if len(w.Days) > 0 && !slices.Contains(w.Days, v1alpha1.Weekday(d.Weekday().String()[:3])) {
		return from, to, false
	}
	from = d.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)
	return from, from.Add(w.Duration.Duration), true
}

// openTime is how long the daily UTC windows ws were open between from and
// to (all of it when there are none).
func openTime(ws []v1alpha1.MaintenanceWindow, from, to time.Time) time.Duration {
	if len(ws) == 0 || !to.After(from) {
		return max(to.Sub(from), 0)
	}
	type span struct{ a, b time.Time }
	var spans []span
	first := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -8)
	for d := first; d.Before(to); d = d.AddDate(0, 0, 1) {
		for _, w := range ws {
			a, b, ok := windowOn(w, d)
			if !ok {
				continue
			}
			if a.Before(from) {
				a = from
			}
			if b.After(to) {
				b = to
			}
			if b.After(a) {
				spans = append(spans, span{a, b})
			}
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return x.a.Compare(y.a) })
	var open time.Duration
	var end time.Time
	for _, s := range spans {
		if s.a.Before(end) {
			s.a = end // overlapping windows count once
		}
		if s.b.After(s.a) {
			open += s.b.Sub(s.a)
			end = s.b
		}
	}
	return open
}

// lastWindow reports whether t is inside one of the daily UTC windows ws,
// and the latest window [open, closed) that closed at or before t, looking
// back a week (zero when none did).
func lastWindow(ws []v1alpha1.MaintenanceWindow, t time.Time) (inside bool, open, closed time.Time) {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	for back := 8; back >= 0; back-- {
		d := day.AddDate(0, 0, -back)
		for _, w := range ws {
			from, to, ok := windowOn(w, d)
			if !ok {
				continue
			}
			switch {
			case !t.Before(from) && t.Before(to):
				inside = true
			case !to.After(t) && to.After(closed):
				open, closed = from, to
			}
		}
	}
	return inside, open, closed
}

// reasonDrainsBlocked is the Degraded reason of a pool whose drains the
// PodDisruptionBudgets refuse (the API's documented value, written here so
// the invariant does not read it from the code it judges).
const reasonDrainsBlocked = "DrainsBlocked"

// reasonDaemonErrors is the Degraded reason of a pool whose node daemons
// report errors (the API's documented value).
const reasonDaemonErrors = "DaemonErrors"

// reasonNodesUnavailable is the Degraded reason of a pool whose member
// nodes are down with no report from their daemons (the API's documented
// value, written here for the same reason).
const reasonNodesUnavailable = "NodesUnavailable"

// downNodesBlock reports whether pool p cannot go on without more nodes
// down than its maxUnavailable allows, by the world's own account: its
// member Nodes that are not Ready are at least as many as its slots, or
// every Ready member already runs the pool's target or was rebooted off
// it to another image (rolled back) since its spec.image last changed,
// fewer such than maxFailures. A node that failed the target is not
// directed to it again until spec.image changes (DESIGN.md section 4),
// so only the down members are left, and too few failed to halt
// (explorer seed 176075 of the 102121 regression of
// pool-edited-mid-rollout: workers-8 rolled back off v2 and was Ready on
// v1, one of maxFailures 2, while workers-3 stayed down; the pool said
// NodesUnavailable, and converges wanted every Ready member on v2). So
// is a node rolled back off the target before spec.image went away and
// came back to it, not rebooted since, that the pool gave a boot order
// into the target again after it came back: its daemon does not reboot
// again for an image it was rebooted off, and the pool counts it failed
// (explorer seed 176122 of the 176075 regression: workers-8, rolled
// back off v2 at 50m23s, ordered to v2 again at 1h30m06s after v2, v1,
// v2). A rollback is a reboot off the target, or off the image a
// rollback order leaves when spec.image had moved on from it (explorer
// seed 176172 of the 176122 regression: workers-8, in its slot for v2
// when v1 was set at 35m, rolled back off v2 at 38m31s under v1,
// ordered to v2 again at 1h30m07s after v2, v1, v2). A rollback still
// under way (the node not back) when spec.image changes counts in the
// new epoch: a node rolling back counts as failing while it rolls back
// (DESIGN.md section 4; noteRollingBack, explorer seed 176175 of the
// 176075 regression: workers-8's rollback off v2 asked for at 39m30s
// under v1, v2 set again at 39m34s, the node back on v1 at 43m31s and
// never ordered to v2 again). So is a node rebooted into the target
// since spec.image last changed that came back Ready on another image
// and was not rebooted since: it came back on the old one, which is
// Failed (DESIGN.md section 4), and counts with the rolled back ones
// (explorer seed 176210 of the 176122 regression: workers-6, rebooted
// from v2 into v1 at 3h00m13s after the operator set v1 again at 2h43m,
// fell back to v2 at 3h05m01s, the pool's one failure of maxFailures 2,
// while workers-3 stayed down). So is one that came back that way
// before spec.image went away and came back to the target, not rebooted
// since, that the pool gave a boot order into the target again after it
// came back, as for a rollback: its daemon does not reboot again for an
// image it was rebooted for (explorer seed 176700 of the 106317
// regression of boot-failure-modes: cl-0 fell back from crashloop at
// 5m43s, ordered to it again at 23m32s after crashloop, neverready,
// crashloop, while cl-1 stayed down on neverready).
func (c *Checker) downNodesBlock(p *Pool) bool {
	members := c.world.Members(p.Name)
	limit, err := MaxUnavailableBound(p.MaxUnavailable, len(members))
	if err != nil {
		return false
	}
	target := imageref.Digest(p.TargetImage)
	down, readyBehind, failed := 0, 0, 0
	for _, name := range members {
		n := c.world.Node(name)
		switch {
		case !n.Ready:
			down++
		case target == "" || n.BootedDigest != target:
			if r := n.rolledOff; target != "" && r.pool == p.Name && r.incarnation == p.incarnation && (r.epoch == p.ImageEpoch || r.reordered == p.ImageEpoch) && r.from == target {
				failed++
				continue
			}
			if r := n.rebootInto; target != "" && !n.rebooting && r.pool == p.Name && r.incarnation == p.incarnation && (r.epoch == p.ImageEpoch || r.reordered == p.ImageEpoch) && r.into == target {
				failed++ // came back on the old one
				continue
			}
			readyBehind++
		}
	}
	return down > 0 && (down >= limit || (readyBehind == 0 && failed < p.MaxFailures))
}

// StallEvidence is how recent a refused eviction must be, at the end of a
// run, for converges to take a pool's Degraded/DrainsBlocked at its word.
const StallEvidence = time.Hour

// budgetsBlock reports whether PodDisruptionBudgets block pool p's
// evictions: one was refused within StallEvidence of the time p's
// maintenance windows were open since (a drain that timed out waits to
// retry, and a budget may allow an eviction at the very end while it would
// refuse the drain's next; a closed window allows no retry to find out:
// explorer seed 129187 of pool-image-revert-mid-reboot, a drain refused
// 18 minutes before its window closed and the run ending 55 minutes after
// it), or one allows none now.
func (c *Checker) budgetsBlock(p *Pool) bool {
	if now := c.now(); !c.lastRefusal.IsZero() && openTime(p.Windows, c.lastRefusal, now) <= StallEvidence {
		return true
	}
	if c.src.PDBs == nil {
		return false
	}
	for _, p := range c.src.PDBs() {
		if p.DisruptionsAllowed <= 0 && p.ExpectedPods > 0 {
			return true
		}
	}
	return false
}

// ExceptionExpiryOutpacesUpdates names the documented exception of
// converges: a pool whose members not on the target are all Karpenter
// nodes that expire before any update of theirs could end (see
// expiryOutpacesUpdates). Exceptions are recorded, not violations.
const ExceptionExpiryOutpacesUpdates = "expiry-outpaces-updates"

// expiryOutpacesUpdates returns the members of pool p not on its target
// when every one of them is a node no controller can update: its
// NodeClaim's expireAfter is no longer than the shortest reboot the
// scenario's host.reboot allows. An update reboots the node, and the
// reboot is requested after the node joined, so after its NodeClaim was
// created; Karpenter deletes the NodeClaim expireAfter after its creation
// (reference/karpenter.md, Expiry), before the reboot ends. Halting
// would be wrong too (DESIGN.md section 4 halts on failed nodes, and none
// failed). It returns nil when any member not on the target could be
// updated, when every member is on it, or when the pool's status is not
// of its current generation.
//
// A node of that kind that is going (its Node being deleted or gone, its
// BootcNode still in the pool, or deleted since: Pool.departed) counts
// too while the pool's status may still count it (goneUnseen): the status
// of a pool whose last member expired a moment before the end, and whose
// replacement has not registered yet, still describes the member
// (explorer seed 168262 of cluster-expiry-during-update: kp-37 expired at
// 50m05s, the run ended at 50m24s with the pool's "1 draining" from
// before it, kp-38 was to register at 50m29s; seed 176388 of its
// regression: kp-69's BootcNode was deleted at 01:28:21.9, 2.1 s before
// the end, the controller's status writes of the pool conflicting on a
// cache behind its own last write). A going node that could have been
// updated is no excuse, and one the controller has long seen go is not
// either.
func (c *Checker) expiryOutpacesUpdates(p *Pool, now time.Time) []string {
	reboot := c.minReboot()
	if reboot <= 0 || p.TargetImage == "" || p.ObservedGeneration != p.Generation || c.src.Booted == nil {
		return nil
	}
	target := digestOf(p.TargetImage)
	var doomed []string
	for _, name := range c.world.Members(p.Name) {
		if digestOf(c.src.Booted(name)) == target {
			continue
		}
		life, ok := c.world.ClaimLife(c.world.Node(name))
		if !ok || life > reboot {
			return nil
		}
		doomed = append(doomed, name)
	}
	for _, name := range c.world.Going(p.Name) {
		n := c.world.Node(name)
		if digestOf(c.src.Booted(name)) == target || !c.goneUnseen(n.leftAt, n.leftKnown, now) {
			continue
		}
		if life, ok := c.world.ClaimLife(n); ok && life <= reboot {
			doomed = append(doomed, name)
		}
	}
	// One whose BootcNode went too, the World forgetting it, still
	// counts by the same bound (noteDeparted): the controller deletes the
	// record once its cache holds the Node's deletion, and its pool's
	// status follows when its cache holds the record's.
	for _, name := range slices.Sorted(maps.Keys(p.departed)) {
		d := p.departed[name]
		if n := c.world.Node(name); n != nil && (n.Exists && !n.Deleting || n.HasBootcNode) {
			continue // a member, or going with a record again: counted above
		}
		if d.life > reboot || digestOf(c.src.Booted(name)) == target || !c.goneUnseen(d.leftAt, d.leftKnown, now) {
			continue
		}
		doomed = append(doomed, name)
	}
	return doomed
}

// LeaveReactBound is how long bootroll's controller must have run, after
// its cache held a Node's deletion (in the twin; on the cluster target,
// after the deletion), before its pool's status stops counting the node:
// the pool pass that follows the Node event takes milliseconds, and a
// minute leaves room for write retries backing off under API faults.
const LeaveReactBound = time.Minute

// goneUnseen reports whether, at now, the pool's status may still count
// a node that is going, whose Node began to go at leftAt: its
// controller's cache has not held the deletion yet (leftKnown zero), or
// has for less than LeaveReactBound of the controller's running time
// (without a cache model, counted from leftAt).
func (c *Checker) goneUnseen(leftAt, leftKnown, now time.Time) bool {
	at := leftAt
	if c.world.cacheModelled {
		if leftKnown.IsZero() {
			return true
		}
		at = leftKnown
	}
	return !at.IsZero() && c.runningBetween(at, now) < LeaveReactBound
}

// minReboot is the shortest time from a reboot request until the node is
// Ready that the scenario's host.reboot allows (0 when unbounded below).
func (c *Checker) minReboot() time.Duration {
	d := c.sc.Host.Reboot
	switch d.Dist {
	case scenario.DistFixed:
		return d.Value
	case scenario.DistUniform:
		return d.Min
	case scenario.DistNormal, scenario.DistLognormal:
		return d.Min
	}
	return 0
}

func poolState(p *Pool) string {
	if p.Degraded {
		return fmt.Sprintf("%s: %q Degraded=%s", p.Name, p.Summary, p.DegradedReason) + upToDateOf(p)
	}
	return fmt.Sprintf("%s: %q", p.Name, p.Summary) + upToDateOf(p)
}

func upToDateOf(p *Pool) string {
	s := ""
	if p.ObservedGeneration != p.Generation {
		s += fmt.Sprintf(" (status of generation %d, spec at %d)", p.ObservedGeneration, p.Generation)
	}
	if p.UpToDateReason != "" {
		s += " UpToDate=" + fmt.Sprint(p.UpToDate) + "/" + p.UpToDateReason
	}
	return s
}

// leakedCordons finds nodes outside a slot that bootroll left cordoned or
// marked, and nodes whose admin cordon bootroll removed. A node in a slot
// when the run stops (say mid-drain at the limit) is not a leak.
func (c *Checker) leakedCordons(names []string, at time.Duration) {
	var leaked, uncordoned []string
	for _, name := range names {
		n := c.world.nodes[name]
		if !n.Exists || holdsSlot(n.Phase) {
			continue
		}
		switch {
		case n.Marked || (n.Unschedulable && !n.InitialUnschedulable):
			leaked = append(leaked, name)
		case !n.Unschedulable && n.InitialUnschedulable:
			uncordoned = append(uncordoned, name)
		}
	}
	if len(leaked) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedCordon), At: at, Objects: nodeObjects(leaked),
			Message: fmt.Sprintf("%d node(s) outside a slot are left cordoned by bootroll at the end: %s", len(leaked), short(leaked))})
	}
	if len(uncordoned) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedCordon), At: at, Objects: nodeObjects(uncordoned),
			Message: fmt.Sprintf("%d node(s) cordoned before the rollout are uncordoned at the end: %s", len(uncordoned), short(uncordoned))})
	}
}

func (c *Checker) leakedAnnotations(names []string, at time.Duration) {
	var leaked, parts, removed, rparts []string
	for _, name := range names {
		n := c.world.nodes[name]
		if !n.Exists || holdsSlot(n.Phase) {
			continue
		}
		if protectionPending(n, c.start.Add(at)) {
			continue // post-update protection may still be in force
		}
		var extra []string
		for _, a := range n.Owned {
			if !slices.Contains(n.InitialOwned, a) {
				extra = append(extra, a)
			}
		}
		if len(extra) > 0 {
			leaked = append(leaked, name)
			parts = append(parts, name+" ("+strings.Join(extra, ", ")+")")
		}
		// Nor may bootroll take away a protection someone else put on the
		// node (an operator's do-not-disrupt) and left there.
		var lost []string
		for _, a := range n.InitialOwned {
			if a != v1alpha1.AnnotationSlot && !slices.Contains(n.Owned, a) {
				lost = append(lost, a)
			}
		}
		if len(lost) > 0 {
			removed = append(removed, name)
			rparts = append(rparts, name+" ("+strings.Join(lost, ", ")+")")
		}
	}
	if len(leaked) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedAnnotation), At: at, Objects: nodeObjects(leaked),
			Message: fmt.Sprintf("%d node(s) outside a slot keep annotations bootroll added: %s", len(leaked), short(parts))})
	}
	if len(removed) > 0 {
		c.record(Violation{Invariant: string(scenario.InvNoLeakedAnnotation), At: at, Objects: nodeObjects(removed),
			Message: fmt.Sprintf("%d node(s) lost protection annotations that were there before bootroll or that an operator set, and that nobody else removed: %s", len(removed), short(rparts))})
	}
}

func (c *Checker) expectations(out Outcome) {
	e := c.sc.Expect
	at := out.End
	if e.CompletesWithin != nil {
		switch {
		case !out.Converged:
			c.record(Violation{Invariant: ExpectCompletesWithin, At: at, Objects: c.unconverged(),
				Message: fmt.Sprintf("the rollout did not complete (every pool UpToDate or Halted) by the end of the run at %s; expected within %s", at, *e.CompletesWithin)})
		case out.ConvergedAt > *e.CompletesWithin:
			c.record(Violation{Invariant: ExpectCompletesWithin, At: out.ConvergedAt, Objects: c.poolObjects(),
				Message: fmt.Sprintf("the rollout completed at %s; expected within %s", out.ConvergedAt, *e.CompletesWithin)})
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(e.FinalImages)) {
		im := c.sc.Image(e.FinalImages[pool])
		if im == nil || c.src.Booted == nil {
			continue
		}
		var wrong, parts []string
		for _, name := range c.world.Members(pool) {
			if b := c.src.Booted(name); !imageMatches(b, im) {
				wrong = append(wrong, name)
				parts = append(parts, fmt.Sprintf("%s boots %s", name, b))
			}
		}
		if len(wrong) > 0 {
			c.record(Violation{Invariant: ExpectFinalImages, At: at, Objects: append([]string{"BootcNodePool/" + pool}, nodeObjects(wrong)...),
				Message: fmt.Sprintf("%d node(s) of pool %s do not boot %s (%s) at the end: %s", len(wrong), pool, im.Name, im.Ref, short(parts))})
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(e.FailedNodes)) {
		r := e.FailedNodes[pool]
		var failed []string
		for _, name := range c.world.NodeNames() {
			n := c.world.nodes[name]
			if n.HasBootcNode && n.BootcPool == pool && n.Phase == v1alpha1.PhaseFailed {
				failed = append(failed, name)
			}
		}
		if len(failed) < r.Min || (r.Max != nil && len(failed) > *r.Max) {
			want := fmt.Sprintf("at least %d", r.Min)
			if r.Max != nil {
				want = fmt.Sprintf("%d to %d", r.Min, *r.Max)
				if *r.Max == r.Min {
					want = fmt.Sprint(r.Min)
				}
			}
			c.record(Violation{Invariant: ExpectFailedNodes, At: at, Objects: append([]string{"BootcNodePool/" + pool}, nodeObjects(failed)...),
				Message: fmt.Sprintf("pool %s has %d Failed node(s) at the end; expected %s", pool, len(failed), want)})
		}
	}
	for _, pool := range slices.Sorted(maps.Keys(e.Halted)) {
		p := c.world.Pool(pool)
		got := p != nil && p.Halted
		if got != e.Halted[pool] {
			msg := fmt.Sprintf("pool %s is not halted at the end; expected halted", pool)
			if got {
				msg = fmt.Sprintf("pool %s is halted at the end (%s); expected not halted", pool, p.HaltedReason)
			}
			c.record(Violation{Invariant: ExpectHalted, At: at, Objects: []string{"BootcNodePool/" + pool}, Message: msg})
		}
	}
}

// imageMatches reports whether what the cluster model says a node boots is
// the scenario image im: its short name, ref, digest or a ref pinned to its
// digest.
func imageMatches(booted string, im *scenario.Image) bool {
	switch {
	case booted == "":
		return false
	case booted == im.Name, booted == im.Ref, booted == im.Digest:
		return true
	}
	return digestOf(booted) == im.Digest
}

func (c *Checker) unconverged() []string {
	var out []string
	for _, p := range c.world.Pools() {
		if !p.converged {
			out = append(out, "BootcNodePool/"+p.Name)
		}
	}
	return out
}

func (c *Checker) poolObjects() []string {
	var out []string
	for _, p := range c.world.Pools() {
		out = append(out, "BootcNodePool/"+p.Name)
	}
	return out
}

// Violations returns the recorded violations in the order they happened.
func (c *Checker) Violations() []Violation { return c.violations }

// Count returns how many violations of name happened, recorded or not.
func (c *Checker) Count(name string) int { return c.caught[name] }

func nodeObjects(names []string) []string {
	const max = 10
	out := make([]string, 0, min(len(names), max))
	for i, n := range names {
		if i == max {
			out = append(out, fmt.Sprintf("... and %d more", len(names)-max))
			break
		}
		out = append(out, "Node/"+n)
	}
	return out
}

func short(items []string) string {
	const max = 5
	if len(items) > max {
		return strings.Join(items[:max], ", ") + fmt.Sprintf(" and %d more", len(items)-max)
	}
	return strings.Join(items, ", ")
}
