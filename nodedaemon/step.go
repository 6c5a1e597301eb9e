// Package nodedaemon is the bootroll node daemon: it drives the node's bootc
// host toward its BootcNode's spec and reports what the host runs in the
// BootcNode's status.
//
// The decisions are in Step, a pure function of time, spec, the status last
// reported and an Observation of the host; it returns Actions. Daemon is the
// loop that observes the host, calls Step and performs the actions in order.
// AsyncHost runs the long bootc download beside that loop in production.
package nodedaemon

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/backoff"
	"github.com/bootroll/bootroll/internal/imageref"
)

// The daemon's waits. They bound how long a decision can go stale.
const (
	// StagePoll is how soon a running stage is observed again.
	StagePoll = 30 * time.Second
	// RebootRecheck is how long the daemon waits for a requested reboot to
	// happen before it asks again; a node shutdown (kubelet graceful node
	// shutdown, service stops) can take minutes.
	RebootRecheck = 2 * time.Minute
	// StageBackoffBase is the wait after the first failed stage; it doubles
	// with every further consecutive failure.
	StageBackoffBase = 30 * time.Second
	// StageBackoffMax caps the wait between stage attempts.
	StageBackoffMax = 10 * time.Minute
	// NodeRecheck is how soon a daemon that holds back a reboot because its
	// Node is not protected (see NodeFacts) looks at the Node again: Node
	// changes do not wake the daemon.
	NodeRecheck = 10 * time.Second
	// retrySoon is the requeue when a retry is already due, so that the next
	// attempt does not wait for the loop's resync.
	retrySoon = time.Second
)

// Observation is what the daemon sees of its host.
//
// Staging and LastStage are known only to the process that runs the stage:
// after a daemon restart Staging is false and LastStage nil.
type Observation struct {
	// Booted, Staged and Rollback are the host's deployments (nil when
	// absent). Digest is "sha256:..."; Image is the reference.
	Booted, Staged, Rollback *v1alpha1.HostImage
	// RollbackQueued is true when a bootc rollback has been queued: the
	// rollback deployment boots next.
	RollbackQueued bool
	// BootID identifies the running boot (/proc/sys/kernel/random/boot_id).
	BootID string
	// Staging is true while a stage action runs.
	Staging bool
	// LastStage is the outcome of the last stage action that finished,
	// nil when none finished since the process started or a new one began.
	LastStage *StageResult
	// Node is what the loop read of the host's Node (not the Host's part):
	// a reboot into another image needs it protected.
	Node NodeFacts
	// RebootAsked is true when this daemon process asked the host to
	// reboot (Apply, Reboot) during the running boot, or an earlier one
	// did and the host is going down (Host.ShuttingDown): that reboot
	// comes whatever the spec says now. The loop's part, not the Host's.
	RebootAsked bool
	// RebootLost is true when the reboot the record names for the running
	// boot (status.daemon.lastReboot) was recorded by an earlier process
	// and the host is not going down: that process stopped before it asked
	// (or the host's shutdown was called off), so the reboot will not come
	// and the record is dropped. The loop's part, like RebootAsked.
	RebootLost bool
}

// NodeFacts is what Step needs to know of the daemon's own Node before it
// reboots the host into another image. The zero value (Node not read)
// allows no reboot.
type NodeFacts struct {
	// Found is true when the Node was read.
	Found bool
	// Unschedulable is the Node's spec.unschedulable (cordoned).
	Unschedulable bool
	// SlotMarker is true when the Node carries bootroll's slot marker
	// annotation (v1alpha1.AnnotationSlot).
	SlotMarker bool
	// OSNotReady is true when the Node has the startup taint
	// v1alpha1.TaintOSNotReady (the os-not-ready fast path).
	OSNotReady bool
}

// NodeFactsOf reads the facts Step needs from node; nil means not found.
func NodeFactsOf(node *corev1.Node) NodeFacts {
	if node == nil {
		return NodeFacts{}
	}
	f := NodeFacts{Found: true, Unschedulable: node.Spec.Unschedulable}
	_, f.SlotMarker = node.Annotations[v1alpha1.AnnotationSlot]
	for _, t := range node.Spec.Taints {
		if t.Key == v1alpha1.TaintOSNotReady {
			f.OSNotReady = true
		}
	}
	return f
}

// unprotected says why the Node does not allow a reboot into another image,
// "" when it does: it must be cordoned by bootroll (spec.unschedulable and
// the slot marker) or be on the os-not-ready fast path (the startup taint).
// The controller sees to that before it orders a boot; the daemon, the last
// actor before the reboot, checks it again, so that an admin's uncordon
// during the slot (or a stale order) does not reboot a node that takes
// workloads.
func (f NodeFacts) unprotected() string {
	switch {
	case !f.Found:
		return "its Node was not found"
	case f.OSNotReady:
		return ""
	case !f.Unschedulable && !f.SlotMarker:
		return "its Node is not cordoned (spec.unschedulable false) and has no " + v1alpha1.AnnotationSlot + " annotation"
	case !f.Unschedulable:
		return "its Node is not cordoned (spec.unschedulable false)"
	case !f.SlotMarker:
		return "its Node has no " + v1alpha1.AnnotationSlot + " annotation (cordoned, but not by bootroll)"
	}
	return ""
}

// StageResult is the outcome of one finished stage action.
type StageResult struct {
	// Image is the reference the stage action was given.
	Image string
	// Err is the action's error, "" when it returned success.
	Err string
}

// ActionType names what an Action does.
type ActionType string

// The actions Step asks for.
const (
	// ReportStatus writes Action.Status (the daemon-owned fields only).
	ReportStatus ActionType = "ReportStatus"
	// Stage downloads Action.Image and stages it for the next boot.
	Stage ActionType = "Stage"
	// Apply makes the staged Action.Image the next boot and reboots.
	Apply ActionType = "Apply"
	// Rollback queues the rollback deployment for the next boot (bootc
	// rollback); a Reboot follows it.
	Rollback ActionType = "Rollback"
	// Reboot reboots the host.
	Reboot ActionType = "Reboot"
)

// Action is one thing Step asks the loop to do.
type Action struct {
	Type ActionType
	// Image is the reference for Stage and Apply.
	Image string
	// Status is the status to write for ReportStatus: only Booted, Staged,
	// RollbackImage and Daemon are filled, and Daemon.PinnedImages is never
	// set (the prefetch manager owns it).
	Status *v1alpha1.BootcNodeStatus
}

// String names the action for logs and errors.
func (a Action) String() string {
	if a.Image != "" {
		return string(a.Type) + " " + a.Image
	}
	return string(a.Type)
}

// Step decides what the daemon does next. It returns the actions in the
// order they must run (the loop stops at the first that fails) and when to
// be called again at the latest; 0 means only on change or resync.
//
// current is the status as last reported; Step reads only its daemon-owned
// fields (Booted, Staged, RollbackImage, Daemon) and emits ReportStatus, always
// first, only when the status to report differs from them.
//
// Step is pure and idempotent: called again with the same inputs it returns
// the same answer, and called with the status it asked to report it does not
// repeat a report. A failed stage is counted exactly once because it is
// counted only while current says Staging (the attempt the last report
// announced) and the counting report moves the phase to Error; see stage.
func Step(now time.Time, spec v1alpha1.BootcNodeSpec, generation int64, current v1alpha1.BootcNodeStatus, obs Observation) (actions []Action, requeueAfter time.Duration) {
	// The API server keeps times to the second; so does the daemon, so that
	// a status read back compares equal to the one written.
	now = now.UTC().Truncate(time.Second)
	d := decide(now, spec, current.Daemon, obs)
	d.status.BootID = obs.BootID
	d.status.ObservedGeneration = generation
	// The report shares memory with current and obs until it is emitted:
	// most calls (a look at an idle host) report nothing, and copy nothing.
	report := v1alpha1.BootcNodeStatus{
		Booted:        hostImage(obs.Booted),
		Staged:        hostImage(obs.Staged),
		RollbackImage: hostImage(obs.Rollback),
		Daemon:        d.status,
	}
	if !sameReport(current, report) && !ackNotNeeded(spec, current, report, obs) {
		actions = append(actions, Action{Type: ReportStatus, Status: report.DeepCopy()})
	}
	return append(actions, d.host...), d.requeue
}

// ackNotNeeded reports whether report differs from current only in
// observedGeneration (an acknowledgement of a new spec) and nobody waits
// for that acknowledgement: the host runs the desired image and the
// reboot the daemon recorded for it has happened (this is a later boot).
// The controller waits for an acknowledgement only of a boot order it
// withdrew before that reboot happened (rollout.BootOrderSettled); after
// it, the reboot being over is what settles the order. Skipping the write
// saves one per node update: the withdrawal of a carried-out order. The
// next report that changes anything carries the new generation.
func ackNotNeeded(spec v1alpha1.BootcNodeSpec, current, report v1alpha1.BootcNodeStatus, obs Observation) bool {
	same := report
	same.Daemon.ObservedGeneration = current.Daemon.ObservedGeneration
	if !sameReport(current, same) {
		return false
	}
	want := imageref.Digest(spec.DesiredImage)
	r := current.Daemon.LastReboot
	return want != "" && holds(obs.Booted, want) && r != nil && imageref.Digest(r.Image) == want && r.BootID != obs.BootID
}

// decision is what decide settles on: the daemon status (without BootID
// and ObservedGeneration), the host actions and the requeue.
type decision struct {
	status  v1alpha1.DaemonStatus
	host    []Action
	requeue time.Duration
}

func decide(now time.Time, spec v1alpha1.BootcNodeSpec, cur v1alpha1.DaemonStatus, obs Observation) decision {
	if !obs.RebootLost {
		return decideOn(now, spec, cur, obs)
	}
	// The record names a reboot that never happened and will not: kept,
	// it said for good that the host was going down. Decided without it;
	// should the decision ask for that same reboot, it is asked again
	// under the record made for it (nothing to rewrite).
	lost := cur.LastReboot
	cur.LastReboot = nil
	d := decideOn(now, spec, cur, obs)
	if r := d.status.LastReboot; r != nil && lost != nil && r.Rollback == lost.Rollback &&
		imageref.Digest(r.Image) == imageref.Digest(lost.Image) && asksReboot(d.host) {
		d.status.LastReboot = lost
	}
	return d
}

// asksReboot reports whether host actions take the host down.
func asksReboot(host []Action) bool {
	return slices.ContainsFunc(host, func(a Action) bool { return a.Type == Apply || a.Type == Reboot })
}

func decideOn(now time.Time, spec v1alpha1.BootcNodeSpec, cur v1alpha1.DaemonStatus, obs Observation) decision {
	desired := spec.DesiredImage
	// LastAttempt and LastReboot are history: kept unless a branch replaces
	// them. Shared with current, never changed: Step copies the report it
	// emits.
	st := v1alpha1.DaemonStatus{LastAttempt: cur.LastAttempt, LastReboot: cur.LastReboot}
	if desired == "" {
		st.Phase = v1alpha1.DaemonIdle
		return decision{status: st}
	}
	want := imageref.Digest(desired)
	if want == "" {
		st.Phase = v1alpha1.DaemonError
		st.LastError = fmt.Sprintf("spec.desiredImage %q is not a digest reference (want <name>@sha256:<hex>)", desired)
		return decision{status: st}
	}
	if spec.RollingBack() {
		return rollBack(now, desired, want, spec.Order(), cur, st, obs)
	}
	if holds(obs.Booted, want) {
		st.Phase = v1alpha1.DaemonIdle
		if obs.RebootAsked {
			// The pool went back to the image the host runs after this
			// process asked it to reboot into another: the host goes
			// down anyway, so say so (reported Idle, the controller let
			// the node go mid-reboot: explorer seed 94094 of
			// rollout-100-nodes).
			st.Phase = v1alpha1.DaemonRebooting
			st.LastError = "a reboot already requested cannot be taken back: the host goes down"
			return decision{status: st, requeue: RebootRecheck}
		}
		return decision{status: st}
	}
	// Only a standing boot order reboots (one for another image is void).
	boot := spec.Order() != nil
	if boot {
		if obs.BootID == "" {
			st.Phase = v1alpha1.DaemonError
			st.LastError = "boot ID unknown: cannot tell whether a reboot happened, so not rebooting"
			return decision{status: st}
		}
		if r := cur.LastReboot; r != nil && imageref.Digest(r.Image) == want && r.BootID != obs.BootID {
			// No double reboot: the reboot for desired happened and the host
			// is not on it. Rebooting again would repeat a failed boot.
			kind := "reboot"
			if r.Rollback {
				kind = "rollback reboot"
			}
			st.Phase = v1alpha1.DaemonError
			st.LastError = fmt.Sprintf("booted %s after %s for %s: image failed to boot or host rolled back", digestOf(obs.Booted), kind, desired)
			return decision{status: st}
		}
	}
	// A running stage (perhaps of an earlier desired image) is waited for:
	// its end replaces the staged deployment, so nothing is decided on it.
	if obs.Staging {
		return stage(now, desired, cur, st, obs)
	}
	if !boot {
		if obs.RebootAsked {
			// The order was withdrawn after this process asked the host to
			// reboot: the host goes down anyway, so say so. The controller
			// keeps the node cordoned until the report leaves Rebooting.
			st.Phase = v1alpha1.DaemonRebooting
			st.LastError = "a reboot already requested cannot be taken back: the host goes down"
			return decision{status: st, requeue: RebootRecheck}
		}
		if holds(obs.Staged, want) {
			st.Phase = v1alpha1.DaemonStaged
			return decision{status: st}
		}
		return stage(now, desired, cur, st, obs)
	}

	// The host is to boot desired, does not run it, and no stage runs.
	pending := requested(cur.LastReboot, want, obs.BootID)
	if holds(obs.Staged, want) && obs.Node.unprotected() != "" {
		return holdReboot(desired, st, pending, obs.Node.unprotected())
	}
	if holds(obs.Staged, want) {
		st.Phase = v1alpha1.DaemonRebooting
		// A reboot requested in this same boot has not happened yet (the
		// daemon stopped before it, or the host is slow to go down): ask
		// again under the same record. Apply is idempotent.
		if pending == nil || pending.Rollback {
			st.LastReboot = &v1alpha1.RebootRecord{Image: desired, BootID: obs.BootID, At: metav1.NewTime(now), OrderAt: orderTime(spec.Order())}
		}
		return decision{status: st, host: []Action{{Type: Apply, Image: desired}}, requeue: RebootRecheck}
	}
	return stage(now, desired, cur, st, obs)
}

// rollBack decides for a rollback order: leave desired (the image the
// node failed on) for the rollback deployment. The order names the image it
// leaves, not the one it returns to, so the pool stays the one writer of
// spec.desiredImage. Off desired, the rollback is done (or the host left
// it by itself): nothing to do, and desired is not staged again. On it, the
// rollback deployment is queued (bootc rollback flips the boot order:
// running it twice undoes it) and the host rebooted, once, and only on a
// protected Node.
func rollBack(now time.Time, desired, want string, order *v1alpha1.BootOrder, cur, st v1alpha1.DaemonStatus, obs Observation) decision {
	if !holds(obs.Booted, want) {
		st.Phase = v1alpha1.DaemonIdle
		if obs.RebootAsked {
			st.Phase = v1alpha1.DaemonRebooting
			return decision{status: st, requeue: RebootRecheck}
		}
		return decision{status: st}
	}
	if obs.BootID == "" {
		st.Phase = v1alpha1.DaemonError
		st.LastError = "boot ID unknown: cannot tell whether a reboot happened, so not rebooting"
		return decision{status: st}
	}
	if r := cur.LastReboot; r != nil && r.Rollback && imageref.Digest(r.Image) == want && r.BootID != obs.BootID {
		st.Phase = v1alpha1.DaemonError
		st.LastError = fmt.Sprintf("booted %s after rollback reboot from %s: the rollback did not take", digestOf(obs.Booted), desired)
		return decision{status: st}
	}
	pending := requested(cur.LastReboot, want, obs.BootID)
	if obs.Rollback == nil && !obs.RollbackQueued {
		st.Phase = v1alpha1.DaemonError
		st.LastError = fmt.Sprintf("asked to roll back from %s, but the host has no rollback deployment", desired)
		return decision{status: st}
	}
	if why := obs.Node.unprotected(); why != "" {
		return holdReboot(desired, st, pending, why)
	}
	st.Phase = v1alpha1.DaemonRebooting
	if pending == nil || !pending.Rollback {
		st.LastReboot = &v1alpha1.RebootRecord{Image: desired, BootID: obs.BootID, Rollback: true, At: metav1.NewTime(now), OrderAt: orderTime(order)}
	}
	var host []Action
	if !obs.RollbackQueued {
		host = append(host, Action{Type: Rollback})
	}
	return decision{status: st, host: append(host, Action{Type: Reboot}), requeue: RebootRecheck}
}

// holdReboot is the decision while the Node does not allow the reboot into
// desired (why): no host action, the order kept (spec is untouched and a
// reboot record already made stays), and a look at the Node again after
// NodeRecheck. The phase is Staged, or Rebooting when a reboot was already
// asked for in this boot (pending): that cannot be taken back.
func holdReboot(desired string, st v1alpha1.DaemonStatus, pending *v1alpha1.RebootRecord, why string) decision {
	st.Phase = v1alpha1.DaemonStaged
	st.LastError = fmt.Sprintf("waiting to reboot into %s: %s", desired, why)
	if pending != nil {
		st.Phase = v1alpha1.DaemonRebooting
		st.LastError = fmt.Sprintf("reboot into %s already requested; not asking again: %s", desired, why)
	}
	return decision{status: st, requeue: NodeRecheck}
}

// stage decides how to get desired staged. Counting failures once: the
// report that starts an attempt says Staging (and is written before the
// Stage action runs); a finished, failed attempt for desired is counted only
// while the last report still says Staging, and the counting report says
// Error, so a repeated Step with the same observation finds Error and does
// not count again. A restart loses Staging and LastStage: with the last
// report still saying Staging, the lost attempt is started again without
// counting it.
func stage(now time.Time, desired string, cur, st v1alpha1.DaemonStatus, obs Observation) decision {
	failures := stageFailures(cur, desired)
	st.StageAttempts = failures
	if failures > 0 {
		st.LastError = cur.LastError
	}
	if obs.Staging {
		st.Phase = v1alpha1.DaemonStaging
		return decision{status: st, requeue: StagePoll}
	}
	if r := obs.LastStage; r != nil && cur.Phase == v1alpha1.DaemonStaging && imageref.Digest(r.Image) == imageref.Digest(desired) {
		msg := r.Err
		if msg == "" {
			// Success without the image staged would otherwise retry at once, forever.
			msg = fmt.Sprintf("stage reported success but the staged deployment is %s, want %s", digestOf(obs.Staged), imageref.Digest(desired))
		}
		st.Phase = v1alpha1.DaemonError
		st.StageAttempts = failures + 1
		st.LastError = stageErrorPrefix(desired) + msg
		return decision{status: st, requeue: max(backoffLeft(now, st.LastAttempt, st.StageAttempts), retrySoon)}
	}
	if failures > 0 && cur.Phase == v1alpha1.DaemonError {
		if left := backoffLeft(now, st.LastAttempt, failures); left > 0 {
			st.Phase = v1alpha1.DaemonError
			return decision{status: st, requeue: left}
		}
	}
	st.Phase = v1alpha1.DaemonStaging
	at := metav1.NewTime(now)
	st.LastAttempt = &at
	return decision{status: st, host: []Action{{Type: Stage, Image: desired}}, requeue: StagePoll}
}

// StageBackoff is the wait after the given number of consecutive failed
// stages: 30s, 1m, 2m, 4m, 8m, then 10m.
func StageBackoff(failures int32) time.Duration {
	return backoff.Nth(StageBackoffBase, StageBackoffMax, failures)
}

// backoffLeft is how much of the backoff after failures, counted from the
// attempt's start, is still ahead of now.
func backoffLeft(now time.Time, attempt *metav1.Time, failures int32) time.Duration {
	if attempt == nil {
		return 0
	}
	return max(attempt.Add(StageBackoff(failures)).Sub(now), 0)
}

// stageErrorPrefix starts the LastError of a failed stage of image. It also
// tells which image StageAttempts counts for, since the status has no other
// field for it: attempts for an earlier desired image do not carry over.
func stageErrorPrefix(image string) string {
	return "stage " + image + ": "
}

// stageFailures is the number of consecutive failed stages of desired
// already recorded in cur.
func stageFailures(cur v1alpha1.DaemonStatus, desired string) int32 {
	if cur.StageAttempts > 0 && strings.HasPrefix(cur.LastError, stageErrorPrefix(desired)) {
		return cur.StageAttempts
	}
	return 0
}

// requested returns the reboot record for the image with digest want
// made in the boot bootID, that is a reboot asked for and not yet happened.
func requested(r *v1alpha1.RebootRecord, want, bootID string) *v1alpha1.RebootRecord {
	if r != nil && imageref.Digest(r.Image) == want && r.BootID == bootID {
		return r
	}
	return nil
}

// holds reports whether the deployment h has the digest want.
func holds(h *v1alpha1.HostImage, want string) bool {
	return h != nil && want != "" && h.Digest == want
}

// digestOf names a deployment's digest in messages.
func digestOf(h *v1alpha1.HostImage) string {
	switch {
	case h == nil:
		return "no deployment"
	case h.Digest == "":
		return "an image without digest (" + h.Image + ")"
	}
	return h.Digest
}

// hostImage is h with its timestamp in UTC to the second, as the API
// server stores it: h itself when it is already (BootcHost's are), else a
// copy.
func hostImage(h *v1alpha1.HostImage) *v1alpha1.HostImage {
	if h == nil || h.Timestamp == nil {
		return h
	}
	t := h.Timestamp.UTC().Truncate(time.Second)
	if h.Timestamp.Time == t { // the same representation: UTC, whole seconds, no monotonic reading
		return h
	}
	c := *h
	c.Timestamp = &metav1.Time{Time: t}
	return &c
}

// sameReport reports whether a and b agree on every field the daemon
// reports (Daemon.PinnedImages is not Step's).
func sameReport(a, b v1alpha1.BootcNodeStatus) bool {
	return sameHost(a.Booted, b.Booted) && sameHost(a.Staged, b.Staged) &&
		sameHost(a.RollbackImage, b.RollbackImage) && sameDaemon(&a.Daemon, &b.Daemon)
}

// sameHost, sameDaemon and sameReboot compare field by field (times as
// instants), as equality.Semantic.DeepEqual would, without reflection: the
// daemon compares its report on every look at the host.
// TestSameReportCoversEveryField fails when a field is added and not here.
func sameHost(a, b *v1alpha1.HostImage) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Image == b.Image && a.Digest == b.Digest && a.Version == b.Version && a.Timestamp.Equal(b.Timestamp)
}

// sameDaemon leaves out PinnedImages: the prefetch manager reports those.
func sameDaemon(a, b *v1alpha1.DaemonStatus) bool {
	return a.Phase == b.Phase && a.BootID == b.BootID && a.LastError == b.LastError &&
		a.StageAttempts == b.StageAttempts && a.LastAttempt.Equal(b.LastAttempt) &&
		sameReboot(a.LastReboot, b.LastReboot) && a.ObservedGeneration == b.ObservedGeneration
}

func sameReboot(a, b *v1alpha1.RebootRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Image == b.Image && a.BootID == b.BootID && a.Rollback == b.Rollback && a.At.Equal(&b.At) && a.OrderAt.Equal(b.OrderAt)
}

// orderTime is the time of the boot order o, for the reboot record of the
// reboot it asks for (RebootRecord.OrderAt); nil without an order.
func orderTime(o *v1alpha1.BootOrder) *metav1.Time {
	if o == nil {
		return nil
	}
	return o.At.DeepCopy()
}
