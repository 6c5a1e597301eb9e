package rollout

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/resolve"
)

// Pass is one pool pass: the pool (a copy the pass owns, whose status
// the steps below write), its rows and the time. The pool reconciler
// builds it from its cache, runs the steps in order (Halt, Open, Direct,
// Slots, Report) and writes what they decided; between Direct and Slots it
// writes the directives and updates the rows it wrote.
type Pass struct {
	Pool *v1alpha1.BootcNodePool
	// Rows are sorted by name. Their records are shared with a cache:
	// nothing here changes them.
	Rows []Row
	// Members is the number of member Nodes.
	Members int
	// Tally, when not nil, is the count of Rows (as they are at Report)
	// that the caller keeps from pass to pass; Report counts the rows
	// itself when it is nil or counts for another target.
	Tally *Tally
	// Target is status.targetImage, resolved; TargetDigest its digest.
	Target, TargetDigest string
	Now                  time.Time
	TestOnly             TestOnly
	// Wake is how soon the pass wants to run again: the soonest of what
	// the steps wait for; zero for nothing.
	Wake time.Duration
	// MaxU is the number of slots (maxUnavailable) Slots resolved, and
	// Held how many of them are in use.
	MaxU, Held int
	// Deferred lists the candidates the caller did not grant a slot and
	// why (Defer), for the status.
	Deferred []string
	// Takeovers are the nodes whose held slot was released down (its
	// record deleted while the node was down, a new record in its place)
	// and whose new record is ready for a slot of the target: the caller
	// gives each a fresh grant in place of its held entry, before the
	// free slots, and lets it take it while not Ready (it is down because
	// of bootroll's earlier reboot; Slots).
	Takeovers []string
}

// Defer records that candidate name did not get a free slot, and why.
func (p *Pass) Defer(name, why string) {
	p.Deferred = append(p.Deferred, name+" ("+why+")")
}

// WakeIn asks for the pass to run again in d at the latest.
func (p *Pass) WakeIn(d time.Duration) {
	if d > 0 && (p.Wake == 0 || d < p.Wake) {
		p.Wake = d
	}
}

// Halt brings the pool's halt up to date (SettleHalt) and reports whether
// the pool is halted for its target, and the failures the Degraded
// condition lists. The failures of the target are recorded on the pool by
// the node reconciler (status.failures is its field); the live records add
// any not recorded yet to the count. A node rolling back from the target
// counts as failed while it rolls back. The halt is durable: once set it
// lasts until the target changes, whatever happens to the failed nodes.
// When fewer than maxFailures nodes failed but every node not on the
// target did (Stalled), the pool halts too: nothing is left to roll.
func (p *Pass) Halt() (halted bool, failed []string) {
	st, target := &p.Pool.Status, p.Target
	var live []v1alpha1.NodeFailure
	rows := p.Rows
	if t := p.kept(); t != nil && t.failing == 0 {
		rows = nil // none failed the target
	}
	for i := range rows {
		row := &rows[i]
		if row.Record == nil || target == "" {
			continue
		}
		if (row.Failed == target && HoldsSlot(row.Phase)) || row.FailedOn(target, p.TargetDigest) {
			ro := &row.Record.Status.Rollout
			at := p.Now
			if ro.PhaseSince != nil {
				at = ro.PhaseSince.Time
			}
			live = append(live, FailureAt(row.Name, target, ro.Reason, ro.Message, at))
		}
	}
	maxFailures := MaxFailuresOf(p.Pool)
	halted = SettleHalt(st, target, live, maxFailures)
	var halt []v1alpha1.NodeFailure
	if st.Halt != nil {
		halt = st.Halt.Failures
	}
	current := CurrentFailures(st, target)
	failed = FailureLines(Failed(target, halt, current, live))
	if p.TestOnly.HaltFromLiveRecords {
		// The old behaviour: the halt lasts only as long as the failed
		// records do (the node reconciler records no failure on the pool).
		st.Halt = nil
		failed = FailureLines(live)
		halted = target != "" && len(live) >= maxFailures
	}
	healthTimeout := DurationOr(p.Pool.Spec.HealthTimeout, DefaultHealthTimeout)
	var recorded map[string]bool // members the pool's own failures name for the target
	for _, f := range current {
		if recorded == nil {
			recorded = map[string]bool{}
		}
		recorded[f.Node] = true
	}
	// Stalled needs a member that failed the target, by its record or
	// by the pool's own failures: without one it finds nothing.
	var stuck bool
	var wait time.Duration
	if t := p.kept(); t == nil || t.failing > 0 || recorded != nil {
		stuck, wait = Stalled(p.Rows, target, p.TargetDigest, healthTimeout, p.Now, recorded)
	}
	if !halted && target != "" && !p.Pool.Spec.Paused && stuck {
		st.Halt = &v1alpha1.HaltRecord{Image: target, Since: metav1.NewTime(p.Now), Failures: Failed(target, current, live)}
		halted = true
	} else {
		p.WakeIn(wait)
	}
	return halted, failed
}

// Open reports whether a maintenance window is open now, and wakes the
// pass when the next one opens.
func (p *Pass) Open() bool {
	open, until := InWindow(p.Pool.Spec.Windows, p.Now)
	if !open {
		p.WakeIn(until)
	}
	return open
}

// Direct returns the rows whose spec.desiredImage should become the
// target, keeping at most maxStaging nodes staging at once. Nodes that
// already run the target, that failed this very target and are still
// down on that failure, whose staging failed and backs off (Degraded), or
// that is down (not Ready for DaemonSilence or more) are not counted. A
// node asked to reboot
// (Rebooting, Verifying) keeps its image until it has finished and been
// verified; then it stages the new target and takes a fresh slot, cordon
// and drain for it. A node that joined with an old boot image (startup
// taint), or runs the target already, is directed outside the bound.
func (p *Pass) Direct() []*Row {
	target, targetDigest := p.Target, p.TargetDigest
	limit := -1
	if ms := p.Pool.Spec.Rollout.MaxStaging; ms != nil && *ms > 0 {
		limit = int(*ms)
	}
	staging := 0
	var todo []*Row
	rows := p.Rows
	if t := p.kept(); t != nil && t.undirected == 0 {
		// Nothing to direct, so the count of nodes staging bounds
		// nothing: what is left is the wake for a staging member not
		// Ready yet (downFor), which only a not-Ready row can ask for.
		if limit < 0 || t.notReady == 0 {
			return nil
		}
	}
	for i := range rows {
		row := &rows[i]
		// A record whose Node left the pool (no member Node) is the node
		// reconciler's to release, and its boot order, withdrawn, must
		// stay until the reboot it may have started is over: directing
		// it to a new target cleared the order, and the node was given
		// back and its slot to another node mid-reboot (explorer seed
		// 91297 of cluster-node-churn).
		if row.Record == nil || row.Conflict != "" || row.Node == nil {
			continue
		}
		if row.Desired == target {
			// A node that failed the target and is out of its slot
			// (Failed, or RolledBack off it) does not stage it again.
			// One whose staging failed and backs off (Degraded) holds no
			// place either: a disk that stays full would keep the pool's
			// only place for good (explorer seed 90162 of
			// storage-exhaustion-during-prefetch; its retries may run
			// beside the places' downloads).
			// Nor does a member down (not Ready) for DaemonSilence or more:
			// its daemon does not run, so it pulls nothing, and a node that
			// never came back kept the pool's only place for good while a
			// Ready member waited to be directed (explorer seed 176437 of
			// pool-edited-mid-rollout). One NotReady for less (a kubelet
			// restart mid-staging, say) keeps its place, and the pass looks
			// again when DaemonSilence has passed.
			if row.Booted != targetDigest && row.Staged != targetDigest && !row.FailedOn(target, targetDigest) && row.Phase != v1alpha1.PhaseDegraded {
				if down, left := downFor(row, p.Now); !down {
					staging++
					if left > 0 && limit >= 0 {
						p.WakeIn(left)
					}
				}
			}
			continue
		}
		if !Directable(row.Phase, row.Desired, target, row.FailedOn(target, targetDigest)) {
			continue
		}
		todo = append(todo, row)
	}
	out := todo[:0]
	for _, row := range todo {
		onIt := row.Booted == targetDigest || (row.Node != nil && row.OSNotReady)
		if !onIt && limit >= 0 && staging >= limit {
			continue
		}
		out = append(out, row)
		if !onIt {
			staging++
		}
	}
	return out
}

// DirectPaused returns the rows a paused pool directs: those Direct
// picks that run the target already (booted it, not on the os-not-ready
// fast path). Directing them stages nothing and takes no slot, which a
// pause stops; it only brings the record to the pool's rollout. Left on
// the image it was directed to before, a node rolled back onto the new
// target kept its verdict of the old one, and when the operator set the
// old one again, still paused, the pool took that verdict for a failure
// of the new rollout and never tried the node again, as it does when the
// revert finds it running (explorer seed 176740 of the 176172 regression
// of pool-edited-mid-rollout: workers-8, rolled back off v2 onto v1 at
// 44m26s, stayed RolledBack for v2 through v1 at 1h25m and v2 at 1h29m10s
// with the pool paused from 1h23m to 1h31m51s).
func (p *Pass) DirectPaused() []*Row {
	var out []*Row
	for _, row := range p.Direct() {
		if row.Booted == p.TargetDigest && !row.OSNotReady {
			out = append(out, row)
		}
	}
	return out
}

// downFor reports whether row's member Node is down: not Ready (and not
// joining on an old image, os-not-ready) since DaemonSilence ago or more,
// as DownMembers counts it. left is how long until a member not Ready for
// less is down (zero otherwise); a Node whose Ready condition has no
// transition time is not taken for down.
func downFor(row *Row, now time.Time) (down bool, left time.Duration) {
	if row.Node == nil || row.Ready || row.OSNotReady {
		return false, 0
	}
	c := readyCondition(row.Node)
	if c == nil || c.LastTransitionTime.IsZero() {
		return false, 0
	}
	if left = DaemonSilence - now.Sub(c.LastTransitionTime.Time); left > 0 {
		return false, left
	}
	return true, 0
}

// Directable reports whether a record in phase, directed to desired, may
// be directed to target. A node that failed this
// target and is still down on that failure is not tried again (a new
// spec.image retargets it); a failure of the target the record keeps
// from an earlier rollout of it, the node since updated to another image,
// is history (host-faults-mid-rollout seed54: B failed, back to A, B
// again, and the pool skipped the node for good). A node asked to reboot
// keeps its image until it has finished.
// failedOn is Facts.FailedOn for target: the node failed it (or its failed
// rollback was to return it there) and is out of its slot.
func Directable(phase v1alpha1.NodePhase, desired, target string, failedOn bool) bool {
	switch {
	case desired == target:
		return false
	case failedOn:
		return false
	case phase == v1alpha1.PhaseRebooting || phase == v1alpha1.PhaseVerifying:
		return false
	}
	return true
}

// Slots keeps the entries of the slot table that are still in use and
// returns them with the number of slots (maxUnavailable), how many are
// free to grant now, and the order the candidates get them in. Entries
// whose node left are dropped; a halt withdraws the slots granted for the
// halted image that no node has started on. The caller checks each
// candidate, in order, for safety (Ready, not disrupted by Karpenter)
// and grants free slots to the first that pass. It writes no status:
// the caller sets status.slots to held plus its grants.
func (p *Pass) Slots(halted, active, open bool, firstPass bool) (held []v1alpha1.Slot, maxU, free int, next func() (string, bool), err error) {
	st, target, targetDigest, now := &p.Pool.Status, p.Target, p.TargetDigest, p.Now
	slots := st.Slots
	p.Takeovers = p.Takeovers[:0]
	if p.TestOnly.ForgetSlotsOnRestart && firstPass {
		slots = nil
	}
	// inSlot marks the rows of held entries, by index (a map of names
	// cost more than the rest of the pass's loops over the rows).
	var inSlot []bool
	// maxU bounds the entries kept and the caller's grants after them:
	// held is made that large at its first entry, where appending one by
	// one grew it (and copied it) some five times a pass. Its error is
	// returned below, after the entries, as before.
	maxU, err = MaxUnavailable(p.Pool.Spec.Rollout.MaxUnavailable, p.Members)
	for _, s := range slots {
		at := rowIndex(p.Rows, s.Node)
		if at < 0 {
			continue
		}
		row := &p.Rows[at]
		down := ReleasedDown(row, s)
		if !down && (row.Record == nil || !SlotInUse(row.Record, s)) {
			continue
		}
		if !down && halted && s.Image == target && !row.Record.Status.Rollout.Cordoned && !HoldsSlot(row.Phase) {
			continue
		}
		if !down && row.Node == nil && !row.Record.Status.Rollout.Cordoned && !HoldsSlot(row.Phase) {
			// Granted to a node that left the pool, or was deleted,
			// before it took the grant up: held for GrantSettle (a node
			// reconciler on a stale cache may still take it up), then
			// dropped; held for good, it kept the pool's only slot
			// (explorer seed 91308 of cluster-node-churn).
			left := GrantSettle - now.Sub(s.Since.Time)
			if left <= 0 {
				continue
			}
			p.WakeIn(left)
		}
		if p.TestOnly.FreeSlotBeforeVerify && (row.Phase == v1alpha1.PhaseRebooting || row.Phase == v1alpha1.PhaseVerifying) {
			continue
		}
		if held == nil {
			held = make([]v1alpha1.Slot, 0, max(len(slots), maxU))
		}
		held = append(held, s)
		if inSlot == nil {
			inSlot = make([]bool, len(p.Rows))
		}
		inSlot[at] = true
		if _, ok := p.candidate(row); down && ok {
			// Down in the reboot of its old record's slot, with a new
			// record staged for the target: without a grant of its own
			// its held entry would keep the slot and the node down for
			// good (explorer seed 91127 of rollback-on-failed-boot).
			p.Takeovers = append(p.Takeovers, s.Node)
		}
	}
	if err != nil {
		return held, 0, 0, func() (string, bool) { return "", false }, err
	}
	free = maxU - len(held)
	p.MaxU, p.Held = maxU, len(held)
	if p.TestOnly.IgnoreSlotLimit {
		free = len(p.Rows)
	}
	if p.TestOnly.IgnoreWindows {
		open = true
	}
	if !active || !open {
		p.Takeovers = p.Takeovers[:0]
	}
	// With no free slot there is nothing to choose: a slot that frees
	// up is a BootcNode change, which brings the pool back.
	if !active || !open || free <= 0 {
		return held, maxU, 0, func() (string, bool) { return "", false }, nil
	}
	if inSlot == nil {
		inSlot = make([]bool, len(p.Rows))
	}
	// (Takeovers are granted by the caller from p.Takeovers, not in the
	// candidates' order: they are in inSlot.)
	// A member that runs the target but is not Ready, outside any slot,
	// is down on the image this pool rolls out (released mid-boot when an
	// earlier pool or record went, say, and its failure lost with the
	// record): it counts against maxUnavailable as a slot would. So does
	// a member that is not Ready and whose daemon has never reported to
	// its record (Unreported), or not since the reboot it asked for
	// (RebootUnreported): it may be down in a reboot an earlier pool,
	// record or slot ordered, and nothing here can tell it is not.
	notReady := len(p.Rows)
	if t := p.kept(); t != nil {
		notReady = int(t.notReady)
	}
	for i := 0; i < len(p.Rows) && notReady > 0; i++ {
		row := &p.Rows[i]
		if row.Node == nil || row.Ready || row.OSNotReady {
			continue
		}
		notReady--
		if inSlot[i] {
			continue
		}
		if Unreported(row.Record) || (!Done(row.Phase) && (row.Booted == targetDigest || row.RebootUnreported)) {
			free--
		}
	}
	// Sized for every row not in a slot (grown by appending, the slice
	// was copied some eight times a pass), or, when the tally counts the
	// rows, for the members in Staged, the one phase a candidate is in:
	// most of a rollout, far fewer than the rows.
	n := max(len(p.Rows)-len(held), 0)
	if t := p.kept(); t != nil {
		n = min(n, int(t.phases[stagedIndex]))
	}
	cands := make([]Candidate, 0, n)
	for i := range p.Rows {
		row := &p.Rows[i]
		if inSlot[i] {
			continue
		}
		if since, ok := p.candidate(row); ok {
			cands = append(cands, Candidate{Name: row.Name, StagedSince: since})
		}
	}
	return held, maxU, max(free, 0), SlotOrder(cands), nil
}

// candidate reports whether row's record is ready for a slot of the
// target (staged it, not backing off, not on the os-not-ready path), and
// since when it has been staged.
func (p *Pass) candidate(row *Row) (time.Time, bool) {
	target, targetDigest, now := p.Target, p.TargetDigest, p.Now
	bn := row.Record
	if bn == nil || row.Conflict != "" || row.Node == nil {
		return time.Time{}, false
	}
	if row.Phase != v1alpha1.PhaseStaged || row.Desired != target || row.Staged != targetDigest || row.Target != target {
		return time.Time{}, false
	}
	if ra := bn.Status.Rollout.RetryAfter; ra != nil && now.Before(ra.Time) {
		p.WakeIn(ra.Sub(now))
		return time.Time{}, false
	}
	if row.OSNotReady {
		return time.Time{}, false // updated without a slot by the node reconciler
	}
	if FailureOf(&p.Pool.Status, row.Name, target) != nil {
		// The node failed the target in this rollout under a record that
		// was deleted since (the failure is on the pool): a new record
		// does not know, and its daemon, with no reboot record, would
		// boot the image again (explorer seed 118173 of
		// bootcnode-deleted-mid-reboot). The node reconciler marks it
		// Failed (FailedEarlier).
		return time.Time{}, false
	}
	since := now
	if bn.Status.Rollout.PhaseSince != nil {
		since = bn.Status.Rollout.PhaseSince.Time
	}
	return since, true
}

// Report writes the pool's summary (node and phase counts, deployed
// digests, updated nodes) and its conditions into the status.
func (p *Pass) Report(resolveErr error, conflicts, failed []string, halted, open bool) {
	p.aggregate()
	var blocked []string
	if t := p.kept(); t == nil || t.drainHeld > 0 {
		blocked = DrainsBlocked(p.Rows)
	}
	p.conditions(resolveErr, conflicts, failed, blocked, halted, open)
	p.Pool.Status.ObservedGeneration = p.Pool.Generation
}

// aggregate writes the counts of the rows: p.Tally's when it counts them
// for the pass's target, else a full count.
func (p *Pass) aggregate() {
	t := p.Tally
	if t == nil || !t.Counts(p.Target, p.TargetDigest) {
		t = &Tally{}
		t.Count(p.Rows, p.Target, p.TargetDigest)
	}
	t.report(&p.Pool.Status, p.Members)
}

func (p *Pass) conditions(resolveErr error, conflicts, failed, blocked []string, halted, open bool) {
	pool, st := p.Pool, &p.Pool.Status
	var daemons, down []string
	t := p.kept()
	if t == nil || t.suspect > 0 {
		daemons = DaemonTrouble(p.Rows, p.Now)
	}
	if t == nil || t.down > 0 {
		n := len(p.Rows)
		if t != nil {
			n = int(t.down)
		}
		var wake time.Duration
		down, wake = downMembers(p.Rows, n, st.Slots, p.TargetDigest, p.Now)
		p.WakeIn(wake)
	}
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: pool.Generation, LastTransitionTime: metav1.NewTime(p.Now)})
	}
	switch {
	case resolveErr != nil:
		kind := resolve.KindOf(resolveErr)
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonResolveFailed, fmt.Sprintf("%s: %v; keeping target %q", kind, resolveErr, st.TargetImage))
	case len(conflicts) > 0:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodeConflict, "nodes left alone because more than one pool selects them: "+TruncateList(conflicts))
	case len(blocked) > 0:
		// Before NodesFailed: the drains are what holds the rollout up
		// now (a pool that said NodesFailed while its budgets blocked
		// every drain did not say why it was stuck: explorer seed 92228
		// of cluster-halt-lifted-by-node-delete); the failures follow.
		msg := "drains cannot finish (a PodDisruptionBudget refuses an eviction: check that the workloads have room on other nodes and that their budgets allow a disruption; or a pod needs spec.drain.force or spec.drain.deleteEmptyDirData): " + TruncateList(blocked)
		if len(failed) > 0 {
			msg += "; failed: " + TruncateList(failed)
		}
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonDrainsBlocked, msg)
	case len(down) > 0:
		// Before NodesFailed too: failures short of maxFailures do not
		// stop the rollout, a member that stays down does; a pool that
		// said NodesFailed over a node down for hours did not say why it
		// was stuck (explorer seed 106317 of boot-failure-modes).
		msg := "member nodes are down outside a slot (one whose daemon never reported counts against maxUnavailable until it is Ready, reports or is deleted; fix or delete them): " + TruncateList(down)
		if len(failed) > 0 {
			msg += "; failed: " + TruncateList(failed)
		}
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodesUnavailable, msg)
	case len(failed) > 0:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodesFailed, "failed: "+TruncateList(failed))
	case len(daemons) > 0:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonDaemonErrors,
			"node daemons report errors or do not report: "+TruncateList(daemons))
	default:
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, st.Summary)
	}
	if halted {
		if st.Halt != nil {
			failed = FailureLines(st.Halt.Failures)
		}
		if max := MaxFailuresOf(pool); len(failed) < max {
			set(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonRemainingFailed,
				fmt.Sprintf("every node not on %s failed it (%d node(s), maxFailures %d): nothing is left to roll; set a new spec.image to recover: %s", st.TargetImage, len(failed), max, TruncateList(failed)))
		} else {
			set(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonMaxFailures,
				fmt.Sprintf("%d node(s) failed %s (maxFailures reached); set a new spec.image to recover: %s", len(failed), st.TargetImage, TruncateList(failed)))
		}
	} else {
		set(v1alpha1.ConditionHalted, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, "")
	}
	switch {
	case st.TargetImage == "":
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonResolveFailed, "no target digest yet")
	case st.Nodes == 0:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionTrue, v1alpha1.ReasonNoNodes, "the pool selects no nodes")
	case st.UpdatedNodes == st.Nodes:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionTrue, v1alpha1.ReasonAllUpdated, st.Summary)
	case pool.Spec.Paused:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonPaused, st.Summary)
	case !open:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonOutsideWindow, st.Summary)
	case halted:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonHalted, st.Summary+"; halted (see the Halted condition)")
	case p.MaxU == 0 && p.Members > 0:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonNoSlots,
			fmt.Sprintf("%s; spec.rollout.maxUnavailable resolves to 0 of %d node(s): no node may be taken out for its reboot; set it to at least 1 (or a percentage that gives 1)", st.Summary, p.Members))
	case p.Held == 0 && len(p.Deferred) > 0:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonSlotsDeferred,
			st.Summary+"; no node can take a free slot now: "+TruncateList(p.Deferred))
	default:
		msg := st.Summary
		if len(p.Deferred) > 0 {
			msg += "; waiting: " + TruncateList(p.Deferred)
		}
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonRollingOut, msg)
	}
}

// DaemonSilence is how long after its record was created a node's daemon
// may not have reported before the pool says so.
const DaemonSilence = 5 * time.Minute

// Unreported reports whether a member's record exists and its daemon has
// never reported to it (no booted image, daemon phase or boot ID), or
// there is no record yet: nothing says what the node runs.
func Unreported(bn *v1alpha1.BootcNode) bool {
	return bn == nil || (bn.Status.Booted == nil && bn.Status.Daemon.Phase == "" && bn.Status.Daemon.BootID == "")
}

// DownMembers lists the members outside a slot of their own record whose
// Node is not Ready
// (and not joining on an old image), for the pool's Degraded condition,
// each with its Ready condition and why it holds the pool up:
//   - its daemon has never reported to its record (Unreported), created
//     DaemonSilence ago or more: Slots counts it against maxUnavailable
//     from the start;
//   - it is not on the target and not done with it (a node down in a
//     failed image that the pool was retargeted from, say), not Ready for
//     DaemonSilence or more: nothing can update it until it is back.
//
// wake is how soon the next such member's DaemonSilence passes (zero for
// none).
func DownMembers(rows []Row, slots []v1alpha1.Slot, targetDigest string, now time.Time) (out []string, wake time.Duration) {
	return downMembers(rows, len(rows), slots, targetDigest, now)
}

// downMembers is DownMembers, given that at most n rows have a record and
// a member Node not Ready (and not joining on an old image): it stops
// after the nth (Tally.down counts them).
func downMembers(rows []Row, n int, slots []v1alpha1.Slot, targetDigest string, now time.Time) (out []string, wake time.Duration) {
	for i := 0; i < len(rows) && n > 0; i++ {
		row := &rows[i]
		bn := row.Record
		if bn == nil || row.Node == nil || row.OSNotReady || row.Ready {
			continue
		}
		n--
		ready := readyCondition(row.Node)
		if ready == nil {
			ready = &corev1.NodeCondition{Status: corev1.ConditionUnknown}
		}
		// The note is written only for a node that is listed (most down
		// nodes are in their slot): a pass runs every second.
		var since time.Time
		var note func() string
		switch {
		case Unreported(bn):
			since = bn.CreationTimestamp.Time
			note = func() string {
				return "its daemon has not reported since the record was created at " + since.UTC().Format(time.RFC3339)
			}
		case !Done(row.Phase) && RebootUnreported(bn):
			since = ready.LastTransitionTime.Time
			note = func() string {
				return "its daemon has not reported since the reboot it asked for at " + bn.Status.Daemon.LastReboot.At.UTC().Format(time.RFC3339)
			}
		case !Done(row.Phase) && row.Booted != targetDigest:
			since = ready.LastTransitionTime.Time
			note = func() string { return "not on the target, which it cannot take until it is back" }
		default:
			continue
		}
		if since.IsZero() {
			continue
		}
		if uid, ok := slotUID(slots, row.Name); ok && (uid == "" || uid == string(bn.UID)) {
			// Down in its own slot: the slot's timeouts judge it. A slot
			// held for an earlier record of the node (released down, its
			// record deleted mid-reboot) is not the current record's: a
			// node that stays down there is a down member (explorer seed
			// 98400 of boot-failure-modes: the pool said RollingOut for
			// hours over a node that never came up).
			continue
		}
		if left := DaemonSilence - now.Sub(since); left > 0 {
			if wake == 0 || left < wake {
				wake = left
			}
			continue
		}
		why := fmt.Sprintf("Ready=%s", ready.Status)
		if !ready.LastTransitionTime.IsZero() {
			why += " since " + ready.LastTransitionTime.UTC().Format(time.RFC3339)
		}
		out = append(out, row.Name+": "+why+", "+note())
	}
	return out, wake
}

// slotUID returns the record UID of node's entry in the slot table (the
// last, were there two), and whether it has one. A scan: the table holds
// maxUnavailable entries, and few down nodes outside their slot are
// looked up a pass, where a map of the table was made for them.
func slotUID(slots []v1alpha1.Slot, node string) (string, bool) {
	for i := len(slots) - 1; i >= 0; i-- {
		if slots[i].Node == node {
			return slots[i].UID, true
		}
	}
	return "", false
}

// DaemonTrouble lists the nodes whose daemon reports an error (with its
// last error), or has not reported at all DaemonSilence after the record
// was created: its daemon is not running, or cannot reach the API server.
func DaemonTrouble(rows []Row, now time.Time) []string {
	var out []string
	for i := range rows {
		row := &rows[i]
		bn := row.Record
		if bn == nil || row.Node == nil || !row.DaemonSuspect {
			continue
		}
		d := &bn.Status.Daemon
		switch {
		case DaemonFailing(d):
			out = append(out, row.Name+": "+d.LastError)
		case Unreported(bn) && row.Ready && !bn.CreationTimestamp.IsZero() && now.Sub(bn.CreationTimestamp.Time) >= DaemonSilence:
			out = append(out, row.Name+": its daemon has not reported since the record was created at "+bn.CreationTimestamp.UTC().Format(time.RFC3339)+" (is the bootroll-daemon pod running on the node?)")
		}
	}
	return out
}

// OnTarget reports whether a row that booted the target counts as
// updated: it is out of its slot, not a Failed node that is down (a node
// that failed the target and is not Ready has not been updated), and its
// daemon has reported since the last reboot it asked for (until then
// status.booted names the boot the node left).
func OnTarget(row *Row) bool {
	return !HoldsSlot(row.Phase) && !(row.Phase == v1alpha1.PhaseFailed && (row.Node == nil || !row.Ready)) &&
		(row.Record == nil || !row.RebootUnreported)
}

// Stalled reports whether the rollout of target cannot go on: some
// member failed it, and every member is either updated or failed it and
// is out of its slot (Failed or RolledBack; the pool never directs such
// a node to the target again). A node that failed while still coming up
// from its reboot (its daemon has not reported since) may yet boot
// healthy: it is given healthTimeout more, and wait says when to look again.
// A member whose failure of the target the pool recorded (recorded, by
// name), not Ready since and not in a slot of its current record, failed
// it too, whatever its record says: a record made again after the failure
// (deleted mid-reboot) does not know it (explorer seed 102121 of
// pool-edited-mid-rollout: the pool said RollingOut for good over such a
// node).
func Stalled(rows []Row, target, targetDigest string, healthTimeout time.Duration, now time.Time, recorded map[string]bool) (bool, time.Duration) {
	failed := false
	var wait time.Duration
	for i := range rows {
		row := &rows[i]
		if row.Node == nil {
			continue
		}
		if row.Record == nil || row.Conflict != "" {
			return false, 0
		}
		ro := &row.Record.Status.Rollout
		switch {
		case row.Booted == targetDigest && OnTarget(row):
		case row.FailedOn(target, targetDigest) && !ro.Cordoned:
			if row.Phase == v1alpha1.PhaseFailed && RebootUnreported(row.Record) && ro.PhaseSince != nil {
				if left := ro.PhaseSince.Add(healthTimeout).Sub(now); left > 0 {
					if wait == 0 || left < wait {
						wait = left
					}
					continue
				}
			}
			failed = true
		case recorded[row.Name] && !row.Ready && !HoldsSlot(row.Phase) && !ro.Cordoned:
			failed = true
		default:
			return false, 0
		}
	}
	if wait > 0 {
		return false, wait
	}
	return failed, 0
}

// drainHeld is Facts.DrainHeld of record bn in observed phase phase: what
// DrainsBlocked lists.
func drainHeld(phase v1alpha1.NodePhase, bn *v1alpha1.BootcNode) bool {
	ro := &bn.Status.Rollout
	return (phase == v1alpha1.PhaseDraining && (ro.Reason == "DrainBlocked" || ro.Failures > 0)) ||
		(bn.Status.Phase == v1alpha1.PhasePending && ro.Reason == "DrainTimeout")
}

// DrainsBlocked lists the members whose drain PodDisruptionBudgets hold
// up: draining with evictions refused, or back to Staged after a drain
// timeout and waiting to try again. Each entry names the node and what its
// record says.
func DrainsBlocked(rows []Row) []string {
	// Facts.DrainHeld (drainHeld) picks the rows out without reading
	// every record: a pass runs every second.
	var out []string
	for i := range rows {
		row := &rows[i]
		if row.Record == nil || row.Node == nil || !row.DrainHeld {
			continue
		}
		ro := &row.Record.Status.Rollout
		switch {
		case row.Phase == v1alpha1.PhaseDraining && ro.Reason == "DrainBlocked",
			row.Record.Status.Phase == v1alpha1.PhasePending && ro.Reason == "DrainTimeout":
			out = append(out, row.Name+" ("+ro.Message+")")
		case row.Phase == v1alpha1.PhaseDraining && ro.Failures > 0:
			// A retry of a drain that timed out: still held up until it
			// finishes (the pool said so between its retries only, and
			// went back to AsExpected at each new slot: explorer seed
			// 92305 of cluster-static-faults-3).
			out = append(out, fmt.Sprintf("%s (draining again after %d drain timeout(s); the last: %s)", row.Name, ro.Failures, lastDrainTimeout(row.Record)))
		}
	}
	return out
}

// lastDrainTimeout says when the record's last drain timed out, as far as
// its status tells (the retry's time).
func lastDrainTimeout(bn *v1alpha1.BootcNode) string {
	if ra := bn.Status.Rollout.RetryAfter; ra != nil {
		return "retried at " + ra.UTC().Format(time.RFC3339)
	}
	return "time unknown"
}

// TruncateList joins items for a message, at most ten of them.
func TruncateList(items []string) string {
	const max = 10
	if len(items) > max {
		return strings.Join(items[:max], "; ") + fmt.Sprintf("; and %d more", len(items)-max)
	}
	return strings.Join(items, "; ")
}
