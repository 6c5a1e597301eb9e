package nodedaemon

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

const (
	imgOld = "quay.io/acme/os@sha256:0000000000000000000000000000000000000000000000000000000000000000"
	imgA   = "quay.io/acme/os@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	imgB   = "quay.io/acme/os@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	boot1  = "11111111-1111-1111-1111-111111111111"
	boot2  = "22222222-2222-2222-2222-222222222222"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(t0.Add(d))
	return &t
}

func hi(ref string) *v1alpha1.HostImage {
	return &v1alpha1.HostImage{Image: ref, Digest: imageref.Digest(ref)}
}

func staged(boot bool) v1alpha1.BootcNodeSpec {
	s := v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA}
	if boot {
		s.BootOrder = order(imgA)
	}
	return s
}

// order is a boot order for img, given at t0.
func order(img string) *v1alpha1.BootOrder {
	return &v1alpha1.BootOrder{Image: img, At: metav1.NewTime(t0)}
}

// onOld is a host running imgOld in boot1 with nothing staged.
func onOld() Observation {
	return Observation{Booted: hi(imgOld), BootID: boot1, Node: slotNode}
}

// status is what the daemon reports for obs with the given daemon part.
func status(obs Observation, d v1alpha1.DaemonStatus) v1alpha1.BootcNodeStatus {
	d.BootID = obs.BootID
	d.ObservedGeneration = 1
	return v1alpha1.BootcNodeStatus{Booted: obs.Booted, Staged: obs.Staged, RollbackImage: obs.Rollback, Daemon: d}
}

func report(obs Observation, d v1alpha1.DaemonStatus) Action {
	s := status(obs, d)
	return Action{Type: ReportStatus, Status: &s}
}

func with(o Observation, f func(*Observation)) Observation {
	f(&o)
	return o
}

// slotNode is a Node cordoned by bootroll for a slot: a reboot may go ahead.
var slotNode = NodeFacts{Found: true, Unschedulable: true, SlotMarker: true}

func TestStep(t *testing.T) {
	failedA := "stage " + imgA + ": boom"
	reboot1 := &v1alpha1.RebootRecord{Image: imgA, BootID: boot1, At: *at(0), OrderAt: at(0)}
	rollback1 := &v1alpha1.RebootRecord{Image: imgB, BootID: boot1, Rollback: true, At: *at(0), OrderAt: at(0)}
	stagedA := with(onOld(), func(o *Observation) { o.Staged = hi(imgA) })
	stagingObs := with(onOld(), func(o *Observation) { o.Staging = true })
	failedObs := with(onOld(), func(o *Observation) { o.LastStage = &StageResult{Image: imgA, Err: "boom"} })
	rollbackA := Observation{Booted: hi(imgB), Rollback: hi(imgA), BootID: boot1, Node: slotNode}
	rollbackSpec := v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgB, BootOrder: &v1alpha1.BootOrder{Image: imgB, Rollback: true, At: *at(0)}}

	tests := []struct {
		name        string
		now         time.Duration // after t0
		spec        v1alpha1.BootcNodeSpec
		current     v1alpha1.BootcNodeStatus
		obs         Observation
		wantActions []Action
		wantRequeue time.Duration
	}{
		{
			name:        "no desired image: idle, first report",
			spec:        v1alpha1.BootcNodeSpec{Pool: "p"},
			obs:         onOld(),
			wantActions: []Action{report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle})},
		},
		{
			name:    "no desired image, already reported: nothing",
			spec:    v1alpha1.BootcNodeSpec{Pool: "p"},
			current: status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle}),
			obs:     onOld(),
		},
		{
			name: "desired image is a tag: error naming the field",
			spec: v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: "quay.io/acme/os:latest", BootOrder: order("quay.io/acme/os:latest")},
			obs:  onOld(),
			wantActions: []Action{report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError,
				LastError: `spec.desiredImage "quay.io/acme/os:latest" is not a digest reference (want <name>@sha256:<hex>)`})},
		},
		{
			name:        "booted is desired: idle, whatever is staged",
			spec:        staged(true),
			obs:         Observation{Booted: hi(imgA), Staged: hi(imgB), BootID: boot1},
			wantActions: []Action{report(Observation{Booted: hi(imgA), Staged: hi(imgB), BootID: boot1}, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle})},
		},
		{
			// The pool went back to the image the host runs after this
			// process asked it to reboot into another: the host goes down
			// anyway (explorer seed 94094 of rollout-100-nodes).
			name:        "booted is desired but a reboot was asked in this boot: rebooting",
			spec:        staged(true),
			obs:         Observation{Booted: hi(imgA), Staged: hi(imgB), BootID: boot1, RebootAsked: true},
			wantActions: []Action{report(Observation{Booted: hi(imgA), Staged: hi(imgB), BootID: boot1, RebootAsked: true}, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastError: "a reboot already requested cannot be taken back: the host goes down"})},
			wantRequeue: RebootRecheck,
		},
		{
			name:    "booted is desired under a different name: digests compared",
			spec:    staged(true),
			current: status(Observation{Booted: &v1alpha1.HostImage{Image: "mirror.local/os:1", Digest: imageref.Digest(imgA)}, BootID: boot1}, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle}),
			obs:     Observation{Booted: &v1alpha1.HostImage{Image: "mirror.local/os:1", Digest: imageref.Digest(imgA)}, BootID: boot1},
		},
		{
			name:    "restart after reboot: new boot ID, booted is desired: idle, no action",
			now:     5 * time.Minute,
			spec:    staged(true),
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1}),
			obs:     Observation{Booted: hi(imgA), Rollback: hi(imgOld), BootID: boot2},
			wantActions: []Action{report(Observation{Booted: hi(imgA), Rollback: hi(imgOld), BootID: boot2},
				v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle, LastReboot: reboot1})},
		},
		{
			name: "stage: report the attempt first, then stage",
			spec: staged(false),
			obs:  onOld(),
			wantActions: []Action{
				report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
				{Type: Stage, Image: imgA},
			},
			wantRequeue: StagePoll,
		},
		{
			name:    "order withdrawn after this process asked the host to reboot: Rebooting, nothing done",
			spec:    staged(false),
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1}),
			obs:     with(stagedA, func(o *Observation) { o.RebootAsked = true }),
			wantActions: []Action{report(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1,
				LastError: "a reboot already requested cannot be taken back: the host goes down"})},
			wantRequeue: RebootRecheck,
		},
		{
			// A process that recorded the reboot but crashed before asking
			// the host restarts on the same boot: the reboot is not coming.
			name:        "order withdrawn, reboot recorded by an earlier process on this boot: Staged",
			spec:        staged(false),
			current:     status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1}),
			obs:         stagedA,
			wantActions: []Action{report(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged, LastReboot: reboot1})},
		},
		{
			name:        "empty desired state stages, never reboots",
			spec:        v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA},
			current:     status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged}),
			obs:         stagedA,
			wantActions: nil,
		},
		{
			name:        "staging runs: wait",
			now:         time.Minute,
			spec:        staged(false),
			current:     status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
			obs:         stagingObs,
			wantRequeue: StagePoll,
		},
		{
			name:    "restart mid-staging: stage again, no attempt counted",
			now:     5 * time.Minute,
			spec:    staged(false),
			current: status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
			obs:     onOld(),
			wantActions: []Action{
				report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(5 * time.Minute)}),
				{Type: Stage, Image: imgA},
			},
			wantRequeue: StagePoll,
		},
		{
			name:    "restart mid-retry: stage again at once, earlier failures kept",
			now:     20 * time.Second,
			spec:    staged(false),
			current: status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0), StageAttempts: 2, LastError: failedA}),
			obs:     onOld(),
			wantActions: []Action{
				report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(20 * time.Second), StageAttempts: 2, LastError: failedA}),
				{Type: Stage, Image: imgA},
			},
			wantRequeue: StagePoll,
		},
		{
			name:        "stage failed: error, counted once, backoff from the attempt's start",
			now:         10 * time.Second,
			spec:        staged(false),
			current:     status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
			obs:         failedObs,
			wantActions: []Action{report(failedObs, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 1, LastError: failedA})},
			wantRequeue: 20 * time.Second,
		},
		{
			name:        "stage failed, failure already reported: not counted again",
			now:         15 * time.Second,
			spec:        staged(false),
			current:     status(failedObs, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 1, LastError: failedA}),
			obs:         failedObs,
			wantRequeue: 15 * time.Second,
		},
		{
			name:    "third failure: 2m backoff",
			now:     time.Minute,
			spec:    staged(false),
			current: status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0), StageAttempts: 2, LastError: failedA}),
			obs:     with(failedObs, func(o *Observation) { o.LastStage = &StageResult{Image: imgA, Err: "disk full"} }),
			wantActions: []Action{report(failedObs, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 3,
				LastError: "stage " + imgA + ": disk full"})},
			wantRequeue: time.Minute,
		},
		{
			name:        "failure slower than its backoff: retry soon, not at resync",
			now:         10 * time.Minute,
			spec:        staged(false),
			current:     status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
			obs:         failedObs,
			wantActions: []Action{report(failedObs, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 1, LastError: failedA})},
			wantRequeue: retrySoon,
		},
		{
			name:    "backoff over: stage again, attempts and error kept",
			now:     30 * time.Second,
			spec:    staged(false),
			current: status(failedObs, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 1, LastError: failedA}),
			obs:     failedObs,
			wantActions: []Action{
				report(failedObs, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(30 * time.Second), StageAttempts: 1, LastError: failedA}),
				{Type: Stage, Image: imgA},
			},
			wantRequeue: StagePoll,
		},
		{
			name:    "stage succeeded but desired not staged: a failure, not a tight retry",
			now:     time.Minute,
			spec:    staged(false),
			current: status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
			obs:     with(onOld(), func(o *Observation) { o.Staged = hi(imgB); o.LastStage = &StageResult{Image: imgA} }),
			wantActions: []Action{report(with(onOld(), func(o *Observation) { o.Staged = hi(imgB) }), v1alpha1.DaemonStatus{
				Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 1,
				LastError: "stage " + imgA + ": stage reported success but the staged deployment is " + imageref.Digest(imgB) + ", want " + imageref.Digest(imgA)})},
			wantRequeue: retrySoon,
		},
		{
			name:    "desired changed: the old image's failure is not counted, its attempts do not carry over",
			now:     10 * time.Second,
			spec:    v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA},
			current: status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0), StageAttempts: 4, LastError: "stage " + imgB + ": boom"}),
			obs:     with(onOld(), func(o *Observation) { o.LastStage = &StageResult{Image: imgB, Err: "boom"} }),
			wantActions: []Action{
				report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(10 * time.Second)}),
				{Type: Stage, Image: imgA},
			},
			wantRequeue: StagePoll,
		},
		{
			name:        "staged is desired, state Staged: staged, success clears the error",
			spec:        staged(false),
			current:     status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0), StageAttempts: 2, LastError: failedA}),
			obs:         stagedA,
			wantActions: []Action{report(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged, LastAttempt: at(0)})},
		},
		{
			name: "booted wanted, nothing staged: stage first",
			spec: staged(true),
			obs:  onOld(),
			wantActions: []Action{
				report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
				{Type: Stage, Image: imgA},
			},
			wantRequeue: StagePoll,
		},
		{
			// An order stands only while it names the desired image: the
			// pool directing the node elsewhere voids it, unwritten.
			name:    "boot order for another image: void, staged, no reboot",
			now:     time.Minute,
			spec:    v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: order(imgB)},
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged}),
			obs:     stagedA,
		},
		{
			name:    "boot order withdrawn: staged, no reboot",
			now:     time.Minute,
			spec:    v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgA, BootOrder: &v1alpha1.BootOrder{Image: imgA, At: metav1.NewTime(t0), Withdrawn: true}},
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged}),
			obs:     stagedA,
		},
		{
			name:    "booted wanted, staged: record the reboot first, then apply",
			now:     time.Minute,
			spec:    staged(true),
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged}),
			obs:     stagedA,
			wantActions: []Action{
				report(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting,
					LastReboot: &v1alpha1.RebootRecord{Image: imgA, BootID: boot1, At: *at(time.Minute), OrderAt: at(0)}}),
				{Type: Apply, Image: imgA},
			},
			wantRequeue: RebootRecheck,
		},
		{
			name:        "reboot requested, same boot ID (daemon restarted before it ran): apply again, record kept",
			now:         3 * time.Minute,
			spec:        staged(true),
			current:     status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1}),
			obs:         stagedA,
			wantActions: []Action{{Type: Apply, Image: imgA}},
			wantRequeue: RebootRecheck,
		},
		{
			name:    "failed boot: new boot ID, old image booted: error, no second reboot",
			now:     5 * time.Minute,
			spec:    staged(true),
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1}),
			obs:     Observation{Booted: hi(imgOld), BootID: boot2},
			wantActions: []Action{report(Observation{Booted: hi(imgOld), BootID: boot2}, v1alpha1.DaemonStatus{
				Phase: v1alpha1.DaemonError, LastReboot: reboot1,
				LastError: "booted " + imageref.Digest(imgOld) + " after reboot for " + imgA + ": image failed to boot or host rolled back"})},
		},
		{
			name:    "failed boot, image staged again: still no reboot, no restage",
			now:     5 * time.Minute,
			spec:    staged(true),
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1}),
			obs:     with(stagedA, func(o *Observation) { o.BootID = boot2 }),
			wantActions: []Action{report(with(stagedA, func(o *Observation) { o.BootID = boot2 }), v1alpha1.DaemonStatus{
				Phase: v1alpha1.DaemonError, LastReboot: reboot1,
				LastError: "booted " + imageref.Digest(imgOld) + " after reboot for " + imgA + ": image failed to boot or host rolled back"})},
		},
		{
			name:    "reboot record for another image does not block",
			spec:    staged(true),
			current: status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged, LastReboot: &v1alpha1.RebootRecord{Image: imgOld, BootID: "old", At: *at(-time.Hour)}}),
			obs:     stagedA,
			wantActions: []Action{
				report(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: &v1alpha1.RebootRecord{Image: imgA, BootID: boot1, At: *at(0), OrderAt: at(0)}}),
				{Type: Apply, Image: imgA},
			},
			wantRequeue: RebootRecheck,
		},
		{
			name:        "booted wanted, staged, but a stage runs: no reboot under it",
			spec:        staged(true),
			current:     status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaging, LastAttempt: at(0)}),
			obs:         with(stagedA, func(o *Observation) { o.Staging = true }),
			wantRequeue: StagePoll,
		},
		{
			name:        "booted wanted, boot ID unknown: refuse to reboot",
			spec:        staged(true),
			obs:         with(stagedA, func(o *Observation) { o.BootID = "" }),
			wantActions: []Action{report(with(stagedA, func(o *Observation) { o.BootID = "" }), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastError: "boot ID unknown: cannot tell whether a reboot happened, so not rebooting"})},
		},
		{
			name:    "rollback: record, bootc rollback, reboot",
			spec:    rollbackSpec,
			current: status(rollbackA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle}),
			obs:     rollbackA,
			wantActions: []Action{
				report(rollbackA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: rollback1}),
				{Type: Rollback},
				{Type: Reboot},
			},
			wantRequeue: RebootRecheck,
		},
		{
			name:        "rollback requested and queued, same boot: reboot only (a second bootc rollback would undo it)",
			spec:        rollbackSpec,
			current:     status(with(rollbackA, func(o *Observation) { o.RollbackQueued = true }), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: rollback1}),
			obs:         with(rollbackA, func(o *Observation) { o.RollbackQueued = true }),
			wantActions: []Action{{Type: Reboot}},
			wantRequeue: RebootRecheck,
		},
		{
			name:        "rollback requested, not queued yet, same boot: rollback and reboot, record kept",
			spec:        rollbackSpec,
			current:     status(rollbackA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: rollback1}),
			obs:         rollbackA,
			wantActions: []Action{{Type: Rollback}, {Type: Reboot}},
			wantRequeue: RebootRecheck,
		},
		{
			name:    "rollback reboot happened, host not on the image: error, no second reboot",
			spec:    rollbackSpec,
			current: status(rollbackA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: rollback1}),
			obs:     with(rollbackA, func(o *Observation) { o.BootID = boot2 }),
			wantActions: []Action{report(with(rollbackA, func(o *Observation) { o.BootID = boot2 }), v1alpha1.DaemonStatus{
				Phase: v1alpha1.DaemonError, LastReboot: rollback1,
				LastError: "booted " + imageref.Digest(imgB) + " after rollback reboot from " + imgB + ": the rollback did not take"})},
		},
		{
			// The order names the image it leaves: the pool keeps
			// desiredImage, and the daemon does not stage it again.
			name:        "rollback done, host off the image it left: idle, nothing staged",
			spec:        rollbackSpec,
			current:     status(Observation{Booted: hi(imgA), Rollback: hi(imgB), BootID: boot2}, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: rollback1}),
			obs:         Observation{Booted: hi(imgA), Rollback: hi(imgB), BootID: boot2},
			wantActions: []Action{report(Observation{Booted: hi(imgA), Rollback: hi(imgB), BootID: boot2}, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle, LastReboot: rollback1})},
		},
		{
			name: "rollback asked, no rollback deployment: error, no reboot",
			spec: rollbackSpec,
			obs:  Observation{Booted: hi(imgB), BootID: boot1, Node: slotNode},
			wantActions: []Action{report(Observation{Booted: hi(imgB), BootID: boot1, Node: slotNode}, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError,
				LastError: "asked to roll back from " + imgB + ", but the host has no rollback deployment"})},
		},
		{
			name:        "report only on change: a new staged deployment is reported",
			spec:        v1alpha1.BootcNodeSpec{Pool: "p"},
			current:     status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle}),
			obs:         with(onOld(), func(o *Observation) { o.Staged = hi(imgB) }),
			wantActions: []Action{report(with(onOld(), func(o *Observation) { o.Staged = hi(imgB) }), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle})},
		},
		{
			name: "report only on change: a new generation is reported",
			spec: v1alpha1.BootcNodeSpec{Pool: "p"},
			current: func() v1alpha1.BootcNodeStatus {
				s := status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle})
				s.Daemon.ObservedGeneration = 0
				return s
			}(),
			obs:         onOld(),
			wantActions: []Action{report(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle})},
		},
		{
			name: "report only on change: controller fields and pinned images are not compared",
			spec: v1alpha1.BootcNodeSpec{Pool: "p"},
			current: func() v1alpha1.BootcNodeStatus {
				s := status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle})
				s.Phase = v1alpha1.PhaseUpdated
				s.Rollout.Reason = "Done"
				s.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "set", Generation: 3}}
				return s
			}(),
			obs: onOld(),
		},
		{
			name: "report only on change: sub-second image timestamps compare as stored",
			spec: v1alpha1.BootcNodeSpec{Pool: "p"},
			current: status(Observation{Booted: &v1alpha1.HostImage{Image: imgOld, Digest: imageref.Digest(imgOld), Timestamp: at(0)}, BootID: boot1},
				v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle}),
			obs: Observation{Booted: &v1alpha1.HostImage{Image: imgOld, Digest: imageref.Digest(imgOld), Timestamp: at(700 * time.Millisecond)}, BootID: boot1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Sub-second "now" must not leak into the status.
			now := t0.Add(tt.now).Add(300 * time.Millisecond)
			gotActions, gotRequeue := Step(now, tt.spec, 1, tt.current, tt.obs)
			if diff := cmp.Diff(tt.wantActions, gotActions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if gotRequeue != tt.wantRequeue {
				t.Errorf("requeue = %v, want %v", gotRequeue, tt.wantRequeue)
			}

			// Idempotence: with what it asked to report as the current
			// status and the same observation, Step neither reports the
			// same again without acting nor counts a stage failure twice.
			// (After a host action the host is observed to change, so the
			// same observation would not be a valid input.)
			if hasHostAction(gotActions) {
				return
			}
			current := tt.current
			if len(gotActions) > 0 {
				current = *gotActions[0].Status
			}
			again, _ := Step(now, tt.spec, 1, current, tt.obs)
			for _, a := range again {
				if a.Type != ReportStatus {
					continue
				}
				if !hasHostAction(again) {
					t.Errorf("second Step with the reported status reports again without acting: %+v", a.Status.Daemon)
				}
				if got, was := a.Status.Daemon.StageAttempts, current.Daemon.StageAttempts; got != was {
					t.Errorf("second Step changes StageAttempts from %d to %d", was, got)
				}
			}
		})
	}
}

func hasHostAction(actions []Action) bool {
	for _, a := range actions {
		if a.Type != ReportStatus {
			return true
		}
	}
	return false
}

func TestStepDoesNotAliasCurrent(t *testing.T) {
	current := status(onOld(), v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, LastAttempt: at(0), StageAttempts: 1,
		LastError: "stage " + imgA + ": boom", LastReboot: &v1alpha1.RebootRecord{Image: imgOld, BootID: "x", At: *at(0)}})
	actions, _ := Step(t0.Add(time.Hour), staged(false), 1, current, onOld())
	if len(actions) == 0 || actions[0].Type != ReportStatus {
		t.Fatalf("actions = %v, want a report first", actions)
	}
	actions[0].Status.Daemon.LastReboot.BootID = "changed"
	if current.Daemon.LastReboot.BootID != "x" {
		t.Errorf("the reported status shares LastReboot with current")
	}
}

func TestStageBackoff(t *testing.T) {
	tests := []struct {
		failures int32
		want     time.Duration
	}{
		{0, 0},
		{1, 30 * time.Second},
		{2, time.Minute},
		{3, 2 * time.Minute},
		{4, 4 * time.Minute},
		{5, 8 * time.Minute},
		{6, 10 * time.Minute},
		{7, 10 * time.Minute},
		{1000, 10 * time.Minute},
	}
	for _, tt := range tests {
		if got := StageBackoff(tt.failures); got != tt.want {
			t.Errorf("StageBackoff(%d) = %v, want %v", tt.failures, got, tt.want)
		}
	}
}

// TestStageRetrySchedule walks a stage that always fails through virtual
// time and checks when each attempt starts.
func TestStageRetrySchedule(t *testing.T) {
	spec := staged(false)
	var current v1alpha1.BootcNodeStatus
	obs := onOld()
	now := t0
	var starts []time.Duration
	for step := 0; step < 40 && len(starts) < 7; step++ {
		actions, requeue := Step(now, spec, 1, current, obs)
		next := requeue
		for _, a := range actions {
			switch a.Type {
			case ReportStatus:
				current = *a.Status
			case Stage:
				starts = append(starts, now.Sub(t0))
				// The attempt fails after a second and the loop looks at once.
				obs.LastStage = &StageResult{Image: a.Image, Err: "registry down"}
				next = time.Second
			default:
				t.Fatalf("unexpected action %v", a)
			}
		}
		if next == 0 {
			t.Fatalf("step %d: no requeue while retrying", step)
		}
		now = now.Add(next)
	}
	// The backoff runs from each attempt's start: 30s, 1m, 2m, 4m, 8m, 10m.
	want := []time.Duration{0, 30 * time.Second, 90 * time.Second, 210 * time.Second, 450 * time.Second, 930 * time.Second, 1530 * time.Second}
	if diff := cmp.Diff(want, starts); diff != "" {
		t.Errorf("attempt starts (-want +got):\n%s", diff)
	}
	if got := current.Daemon.StageAttempts; got != 6 {
		t.Errorf("StageAttempts = %d, want 6", got)
	}
}

// TestStepRebootNeedsProtectedNode: with the image staged (or the rollback
// deployment there) and a boot ordered, the daemon reboots only a Node
// cordoned with bootroll's slot marker or tainted os-not-ready; otherwise
// it keeps the order, says why and looks again after NodeRecheck.
func TestStepRebootNeedsProtectedNode(t *testing.T) {
	bootA := staged(true)
	rollbackSpec := v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: imgB, BootOrder: &v1alpha1.BootOrder{Image: imgB, Rollback: true, At: *at(0)}}
	stagedOn := func(f NodeFacts) Observation {
		return Observation{Booted: hi(imgOld), Staged: hi(imgA), BootID: boot1, Node: f}
	}
	rollbackOn := func(f NodeFacts) Observation {
		return Observation{Booted: hi(imgB), Rollback: hi(imgA), BootID: boot1, Node: f}
	}
	reboot1 := &v1alpha1.RebootRecord{Image: imgA, BootID: boot1, At: *at(0), OrderAt: at(0)}
	tests := []struct {
		name       string
		spec       v1alpha1.BootcNodeSpec
		current    v1alpha1.DaemonStatus
		obs        Observation
		wantHost   []ActionType // host actions, in order
		wantPhase  v1alpha1.DaemonPhase
		wantErr    string // substring of LastError; "" wants none
		wantReboot *v1alpha1.RebootRecord
	}{
		{
			name: "cordoned and marked: reboots", spec: bootA,
			obs:      stagedOn(NodeFacts{Found: true, Unschedulable: true, SlotMarker: true}),
			wantHost: []ActionType{Apply}, wantPhase: v1alpha1.DaemonRebooting, wantReboot: reboot1,
		},
		{
			name: "uncordoned (marker kept): waits", spec: bootA,
			obs:       stagedOn(NodeFacts{Found: true, SlotMarker: true}),
			wantPhase: v1alpha1.DaemonStaged, wantErr: "waiting to reboot into " + imgA + ": its Node is not cordoned (spec.unschedulable false)",
		},
		{
			name: "uncordoned and unmarked: waits", spec: bootA,
			obs:       stagedOn(NodeFacts{Found: true}),
			wantPhase: v1alpha1.DaemonStaged, wantErr: "not cordoned (spec.unschedulable false) and has no " + v1alpha1.AnnotationSlot,
		},
		{
			name: "cordoned, marker missing: waits", spec: bootA,
			obs:       stagedOn(NodeFacts{Found: true, Unschedulable: true}),
			wantPhase: v1alpha1.DaemonStaged, wantErr: "has no " + v1alpha1.AnnotationSlot + " annotation (cordoned, but not by bootroll)",
		},
		{
			name: "Node not found: waits", spec: bootA,
			obs:       stagedOn(NodeFacts{}),
			wantPhase: v1alpha1.DaemonStaged, wantErr: "its Node was not found",
		},
		{
			name: "os-not-ready taint, not cordoned: reboots (fast path)", spec: bootA,
			obs:      stagedOn(NodeFacts{Found: true, OSNotReady: true}),
			wantHost: []ActionType{Apply}, wantPhase: v1alpha1.DaemonRebooting, wantReboot: reboot1,
		},
		{
			name: "rollback on an uncordoned Node: waits, no bootc rollback", spec: rollbackSpec,
			obs:       rollbackOn(NodeFacts{Found: true, SlotMarker: true}),
			wantPhase: v1alpha1.DaemonStaged, wantErr: "not cordoned",
		},
		{
			name: "rollback on a cordoned, marked Node: rollback and reboot", spec: rollbackSpec,
			obs:      rollbackOn(slotNode),
			wantHost: []ActionType{Rollback, Reboot}, wantPhase: v1alpha1.DaemonRebooting,
			wantReboot: &v1alpha1.RebootRecord{Image: imgB, BootID: boot1, Rollback: true, At: *at(0), OrderAt: at(0)},
		},
		{
			name: "reboot already requested, then uncordoned: not asked again, record kept", spec: bootA,
			current:   v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonRebooting, LastReboot: reboot1},
			obs:       stagedOn(NodeFacts{Found: true, SlotMarker: true}),
			wantPhase: v1alpha1.DaemonRebooting, wantErr: "already requested; not asking again", wantReboot: reboot1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := status(tt.obs, tt.current)
			actions, requeue := Step(t0, tt.spec, 1, cur, tt.obs)
			var host []ActionType
			var rep *v1alpha1.BootcNodeStatus
			for _, a := range actions {
				if a.Type == ReportStatus {
					rep = a.Status
					continue
				}
				host = append(host, a.Type)
			}
			if !slices.Equal(host, tt.wantHost) {
				t.Errorf("host actions %v, want %v", host, tt.wantHost)
			}
			if rep == nil {
				rep = &cur
			}
			d := rep.Daemon
			if d.Phase != tt.wantPhase {
				t.Errorf("phase %q, want %q", d.Phase, tt.wantPhase)
			}
			if tt.wantErr == "" && d.LastError != "" || !strings.Contains(d.LastError, tt.wantErr) {
				t.Errorf("lastError %q, want one containing %q", d.LastError, tt.wantErr)
			}
			if !sameReboot(d.LastReboot, tt.wantReboot) {
				t.Errorf("lastReboot %+v, want %+v", d.LastReboot, tt.wantReboot)
			}
			if len(tt.wantHost) == 0 && requeue != NodeRecheck {
				t.Errorf("requeue %v while waiting, want NodeRecheck %v", requeue, NodeRecheck)
			}
			if len(tt.wantHost) > 0 && requeue != RebootRecheck {
				t.Errorf("requeue %v after a reboot request, want RebootRecheck %v", requeue, RebootRecheck)
			}
		})
	}
}

func TestNodeFactsOf(t *testing.T) {
	if got := NodeFactsOf(nil); got != (NodeFacts{}) {
		t.Errorf("NodeFactsOf(nil) = %+v, want zero", got)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{v1alpha1.AnnotationSlot: "p"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: "other", Effect: corev1.TaintEffectNoSchedule},
			{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule},
		}},
	}
	if got, want := NodeFactsOf(n), (NodeFacts{Found: true, Unschedulable: true, SlotMarker: true, OSNotReady: true}); got != want {
		t.Errorf("NodeFactsOf = %+v, want %+v", got, want)
	}
	bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	if got, want := NodeFactsOf(bare), (NodeFacts{Found: true}); got != want {
		t.Errorf("NodeFactsOf(bare) = %+v, want %+v", got, want)
	}
}

// TestStepAcknowledgesOnlyWhatIsAwaited: a new spec generation alone is
// reported (observedGeneration) while the controller may wait for the
// acknowledgement (a boot order withdrawn before its reboot happened),
// and not once the host runs the ordered image on a later boot: the
// withdrawal of a carried-out order costs no write.
func TestStepAcknowledgesOnlyWhatIsAwaited(t *testing.T) {
	onA := Observation{Booted: hi(imgA), BootID: boot2, Node: slotNode}
	doneReboot := &v1alpha1.RebootRecord{Image: imgA, BootID: boot1, At: *at(0)}
	cur := status(onA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle, LastReboot: doneReboot})
	actions, _ := Step(t0.Add(time.Minute), staged(false), 2, cur, onA)
	if len(actions) != 0 {
		t.Errorf("order carried out, generation bumped: actions %v, want none", actions)
	}

	// A withdrawn order whose reboot has not happened: the ack is awaited.
	stagedA := Observation{Booted: hi(imgOld), Staged: hi(imgA), BootID: boot1, Node: slotNode}
	cur = status(stagedA, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonStaged})
	actions, _ = Step(t0.Add(time.Minute), staged(false), 2, cur, stagedA)
	if len(actions) != 1 || actions[0].Type != ReportStatus || actions[0].Status.Daemon.ObservedGeneration != 2 {
		t.Errorf("withdrawn order not carried out: actions %v, want one report of generation 2", actions)
	}

	// On the ordered image but on the boot the reboot was recorded in
	// (it did not happen in between): the ack is reported.
	sameBoot := with(onA, func(o *Observation) { o.BootID = boot1 })
	cur = status(sameBoot, v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle, LastReboot: doneReboot})
	actions, _ = Step(t0.Add(time.Minute), staged(false), 2, cur, sameBoot)
	if len(actions) != 1 || actions[0].Type != ReportStatus {
		t.Errorf("reboot recorded on this very boot: actions %v, want a report", actions)
	}
}
