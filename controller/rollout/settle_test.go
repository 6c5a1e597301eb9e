package rollout

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// settleStep builds a node view for BootOrderSettled: a record whose boot
// order was issued at 10:00:00.5 and withdrawn (generation 3), a daemon
// report and a Node with a Ready condition and a boot ID.
func settleStep(now time.Time, observed int64, phase v1alpha1.DaemonPhase, last *v1alpha1.RebootRecord, ready bool, bootID string) NodeView {
	ordered := time.Date(2026, 1, 5, 10, 0, 0, 500_000_000, time.UTC)
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: 3}}
	bn.Spec.DesiredImage = settleRef("v2")
	bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: bn.Spec.DesiredImage, At: metav1.Time{Time: ordered}, Withdrawn: true}
	bn.Status.Daemon.ObservedGeneration = observed
	bn.Status.Daemon.Phase = phase
	bn.Status.Daemon.LastReboot = last
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	node.Status.NodeInfo.BootID = bootID
	return NodeView{Record: bn, Node: node, Now: now}
}

// TestBootOrderSettled covers when a withdrawn boot order lets bootroll
// give the node back: at once without an order or with an acknowledgement
// from a daemon that had not started the reboot; after a started reboot
// only once the Node is Ready on another boot (a daemon acknowledges the
// withdrawal even after asking the host to reboot, and never reports on a
// record being deleted); and at the latest at healthTimeout.
func TestBootOrderSettled(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 30, 0, time.UTC)
	ordered := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC) // lastReboot.at is kept to the second
	thisReboot := &v1alpha1.RebootRecord{Image: settleRef("v2"), BootID: "boot-1", At: metav1.NewTime(ordered)}
	earlier := &v1alpha1.RebootRecord{Image: settleRef("v2"), BootID: "boot-0", At: metav1.NewTime(ordered.Add(-time.Hour))}
	otherImage := &v1alpha1.RebootRecord{Image: settleRef("v3"), BootID: "boot-1", At: metav1.NewTime(ordered)}
	cases := []struct {
		name string
		s    NodeView
		want bool
	}{
		{"acknowledged, no reboot started", settleStep(t0, 3, v1alpha1.DaemonStaged, earlier, true, "boot-0"), true},
		{"not acknowledged yet", settleStep(t0, 2, v1alpha1.DaemonStaged, earlier, true, "boot-0"), false},
		{"acknowledged while rebooting", settleStep(t0, 3, v1alpha1.DaemonRebooting, thisReboot, true, "boot-1"), false},
		// issue 11, pool-deleted-mid-max-unavailable.seed11: a daemon
		// that asked the host to reboot reports Rebooting after the
		// withdrawal (above); one that reports Staged on the boot the reboot
		// was recorded on did not ask in its process (it crashed between
		// recording and asking: node-relabelled-out-mid-drain.cleanup.seed28).
		{"acknowledged Staged, reboot recorded but not asked, host up", settleStep(t0, 3, v1alpha1.DaemonStaged, thisReboot, true, "boot-1"), true},
		{"acknowledged Staged, host down after a recorded reboot", settleStep(t0, 3, v1alpha1.DaemonStaged, thisReboot, false, "boot-1"), false},
		// issue 11, the cleanup reproducers: no acknowledgement ever comes
		// for a record being deleted.
		{"no acknowledgement, Node Ready on a new boot", settleStep(t0, 2, v1alpha1.DaemonRebooting, thisReboot, true, "boot-2"), true},
		{"no acknowledgement, new boot not Ready", settleStep(t0, 2, v1alpha1.DaemonRebooting, thisReboot, false, "boot-2"), false},
		{"no acknowledgement, new boot ID unknown", settleStep(t0, 2, v1alpha1.DaemonRebooting, thisReboot, true, ""), false},
		{"reboot from before this order", settleStep(t0, 2, v1alpha1.DaemonRebooting, earlier, true, "boot-2"), false},
		{"reboot into another image", settleStep(t0, 2, v1alpha1.DaemonRebooting, otherImage, true, "boot-2"), false},
		{"healthTimeout passed", settleStep(t0.Add(DefaultHealthTimeout), 2, v1alpha1.DaemonRebooting, thisReboot, false, "boot-1"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, wait := BootOrderSettled(c.s)
			if ok != c.want {
				t.Fatalf("bootOrderSettled = %v (wait %s), want %v", ok, wait, c.want)
			}
			if !ok && wait <= 0 {
				t.Fatalf("not settled but wait = %s: nothing would look again", wait)
			}
		})
	}
	// The order given again after the reboot into its image had begun (a
	// node relabelled out of its pool mid-reboot and back: explorer seed
	// 109301 of cluster-repair-during-slow-reboot): a daemon reporting the
	// host on that image from the Node's current boot does not acknowledge
	// the withdrawal, and has nothing left to do for it.
	onImage := func(booted, reportedBoot string, rollback bool) NodeView {
		return reportingOn(settleStep(t0, 2, v1alpha1.DaemonIdle, earlier, true, "boot-2"), booted, reportedBoot, rollback)
	}
	for _, c := range []struct {
		name string
		s    NodeView
		want bool
	}{
		{"on the ordered image after an earlier reboot into it", onImage("v2", "boot-2", false), true},
		{"the report is from an earlier boot", onImage("v2", "boot-0", false), false},
		{"on another image", onImage("v1", "boot-2", false), false},
		{"a rollback order", onImage("v2", "boot-2", true), false},
	} {
		if ok, _ := BootOrderSettled(c.s); ok != c.want {
			t.Errorf("%s: settled %v, want %v", c.name, ok, c.want)
		}
	}

	// The pool's image changed since the order (it went back to the
	// image the node ran): the order is void, but the reboot the daemon
	// asked for it is not over until the daemon reports from another
	// boot (explorer seed 176610 of cluster-repair-during-slow-reboot: a
	// record deleted mid-reboot was given back down, and Karpenter
	// repaired the node).
	voided := func(now time.Time, reportedBoot string, phase v1alpha1.DaemonPhase, ready bool, nodeBoot string) NodeView {
		v := settleStep(now, 3, phase, thisReboot, ready, nodeBoot)
		v.Record.Generation = 4
		v.Record.Spec.DesiredImage = settleRef("v1")
		v.Record.Status.Daemon.BootID = reportedBoot
		return v
	}
	reboot := func(v NodeView, last *v1alpha1.RebootRecord) NodeView {
		v.Record.Status.Daemon.LastReboot = last
		return v
	}
	for _, c := range []struct {
		name string
		s    NodeView
		want bool
	}{
		{"voided, its reboot unreported, Node down", voided(t0, "boot-1", v1alpha1.DaemonRebooting, false, "boot-1"), false},
		{"voided, its reboot unreported, Node Ready on a new boot", voided(t0, "boot-1", v1alpha1.DaemonRebooting, true, "boot-2"), false},
		{"voided, the daemon reports from a new boot", voided(t0, "boot-2", v1alpha1.DaemonStaging, true, "boot-2"), true},
		{"voided, its reboot unreported, healthTimeout passed", voided(t0.Add(DefaultHealthTimeout), "boot-1", v1alpha1.DaemonRebooting, false, "boot-1"), true},
		// Back from that reboot but not Ready, the node is not back
		// either, as with an order that stands: until it is Ready or
		// healthTimeout passed (explorer seed 176588 of
		// cluster-repair-during-slow-reboot: given back NotReady on v2
		// 5 s after its daemon reported, repaired by Karpenter 10m later).
		{"voided, the daemon reports from a new boot, Node down", voided(t0, "boot-2", v1alpha1.DaemonStaging, false, "boot-2"), false},
		{"voided, back down, healthTimeout passed", voided(t0.Add(DefaultHealthTimeout), "boot-2", v1alpha1.DaemonStaging, false, "boot-2"), true},
		{"voided, down, its last reboot from before the order", reboot(voided(t0, "boot-2", v1alpha1.DaemonStaging, false, "boot-2"), earlier), true},
		{"voided, down, its last reboot into another image", reboot(voided(t0, "boot-2", v1alpha1.DaemonStaging, false, "boot-2"), otherImage), true},
	} {
		ok, wait := BootOrderSettled(c.s)
		if ok != c.want {
			t.Errorf("%s: settled %v, want %v", c.name, ok, c.want)
		}
		if !ok && wait <= 0 {
			t.Errorf("%s: not settled but wait = %s: nothing would look again", c.name, wait)
		}
		// The negative control's switch brings the behaviour before back:
		// a voided order settles at once.
		if ok, _ := BootOrderSettledWith(c.s, TestOnly{SettleOnOrderedAt: true}); !ok {
			t.Errorf("%s: with TestOnly.SettleOnOrderedAt not settled, want settled at once", c.name)
		}
	}

	// A reboot verified (the record Updated on the ordered image, the
	// daemon reporting from the boot after it) is over, though the Node
	// went down afterwards and the daemon cannot acknowledge the
	// withdrawal (explorer seed 177097 of the 158367 regression: updated
	// at 13 s, crashed and relabelled out of its pool at 1m, given back
	// only when it booted again at 8m55s).
	verified := func(phase v1alpha1.NodePhase, booted, reportedBoot string, rollback bool) NodeView {
		v := reportingOn(settleStep(t0, 2, v1alpha1.DaemonIdle, thisReboot, false, "boot-2"), booted, reportedBoot, rollback)
		v.Record.Status.Phase = phase
		return v
	}
	for _, c := range []struct {
		name string
		s    NodeView
		want bool
	}{
		{"verified, then down", verified(v1alpha1.PhaseUpdated, "v2", "boot-2", false), true},
		{"not verified, down", verified(v1alpha1.PhaseVerifying, "v2", "boot-2", false), false},
		{"Updated, but the report is from the boot the reboot left", verified(v1alpha1.PhaseUpdated, "v2", "boot-1", false), false},
		{"Updated on another image", verified(v1alpha1.PhaseUpdated, "v1", "boot-2", false), false},
		{"a rollback order", verified(v1alpha1.PhaseUpdated, "v2", "boot-2", true), false},
		{"Updated, its last reboot from before the order", reboot(verified(v1alpha1.PhaseUpdated, "v2", "boot-2", false), earlier), false},
	} {
		if ok, wait := BootOrderSettled(c.s); ok != c.want || (!ok && wait <= 0) {
			t.Errorf("%s: settled %v (wait %s), want %v", c.name, ok, wait, c.want)
		}
	}

	noOrder := settleStep(t0, 0, v1alpha1.DaemonIdle, nil, true, "boot-0")
	noOrder.Record.Spec.BootOrder = nil
	if ok, _ := BootOrderSettled(noOrder); !ok {
		t.Fatal("no boot order issued in this slot: want settled at once")
	}
}

// reportingOn is v with the daemon reporting the host on image booted
// from boot reportedBoot, and the order a rollback's or not.
func reportingOn(v NodeView, booted, reportedBoot string, rollback bool) NodeView {
	v.Record.Status.Booted = &v1alpha1.HostImage{Image: settleRef(booted), Digest: "sha256:" + strings.TrimPrefix(settleRef(booted), "registry.example/os@sha256:")}
	v.Record.Status.Daemon.BootID = reportedBoot
	v.Record.Spec.BootOrder.Rollback = rollback
	return v
}

// settleRef returns a digest reference for a short image name (its bytes
// in hex, padded: a well-formed digest).
func settleRef(name string) string {
	return "registry.example/os@sha256:" + (hex.EncodeToString([]byte(name)) + strings.Repeat("0", 64))[:64]
}

// TestRebootClock: the reboot clock of healthTimeout and the reboot-time
// metric is the order for the desired image, or a voided order whose
// reboot is still to come (the daemon asked for it from its current boot
// and has not reported since), and nothing otherwise.
func TestRebootClock(t *testing.T) {
	at := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	voided := func(unreported bool) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{}
		bn.Spec.DesiredImage = settleRef("v1")
		bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: settleRef("v2"), At: metav1.Time{Time: at}, Withdrawn: true}
		bn.Status.Daemon.BootID = "boot-1"
		bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: settleRef("v2"), BootID: "boot-0"}
		if unreported {
			bn.Status.Daemon.LastReboot.BootID = "boot-1"
		}
		return bn
	}
	ordered := voided(false)
	ordered.Spec.BootOrder.Image = ordered.Spec.DesiredImage
	for _, c := range []struct {
		name string
		bn   *v1alpha1.BootcNode
		want *time.Time
	}{
		{"an order for the desired image", ordered, &at},
		{"a voided order, its reboot still to come", voided(true), &at},
		{"a voided order, its reboot reported", voided(false), nil},
		{"no order", &v1alpha1.BootcNode{}, nil},
	} {
		got := RebootClock(c.bn)
		if (got == nil) != (c.want == nil) || (got != nil && !got.Time.Equal(*c.want)) {
			t.Errorf("%s: RebootClock = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRebootMatchedOnTheOrdersClock: a reboot is matched with its boot
// order by the order's time the daemon copied (orderAt), not by the
// daemon's own time, which is the node's clock (explorer seed 178010 of
// the 118173 regression: a clock 20 s behind made the reboot look older
// than its order, and a record made again rebooted the node a second
// time). A record without orderAt, from an older daemon, is read by its
// own time as before.
func TestRebootMatchedOnTheOrdersClock(t *testing.T) {
	ordered := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	behind := metav1.NewTime(ordered.Add(-20 * time.Second))
	v := settleStep(ordered.Add(time.Minute), 3, v1alpha1.DaemonRebooting, nil, true, "boot-2")
	bn := v.Record
	bn.Spec.BootOrder.At = metav1.NewTime(ordered)
	bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: settleRef("v2"), BootID: "boot-1", At: behind, OrderAt: &metav1.Time{Time: ordered}}
	if !RebootStarted(bn) || !RebootOver(bn, v.Node) || !rebootRecordedFor(bn, bn.Spec.BootOrder) {
		t.Errorf("a reboot for the order, stamped 20 s early by the node's clock: started %v, over %v, recorded %v; want all true",
			RebootStarted(bn), RebootOver(bn, v.Node), rebootRecordedFor(bn, bn.Spec.BootOrder))
	}
	bn.Status.Rollout.SlotGrantedAt = &metav1.Time{Time: ordered.Add(-time.Second)}
	bn.Status.Daemon.BootID = "boot-1"
	if !RebootUnreportedInSlot(bn) {
		t.Error("a reboot for the slot's order, unreported: want RebootUnreportedInSlot")
	}
	// An older order's reboot stays older, whatever the node's clock.
	bn.Status.Daemon.LastReboot.OrderAt = &metav1.Time{Time: ordered.Add(-time.Hour)}
	bn.Status.Daemon.LastReboot.At = metav1.NewTime(ordered.Add(time.Minute))
	if RebootStarted(bn) {
		t.Error("a reboot for an order an hour older, stamped late by a node's clock ahead: want not started")
	}
	// Without orderAt (an older daemon), the node's time decides.
	bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: settleRef("v2"), BootID: "boot-1", At: behind}
	if RebootStarted(bn) {
		t.Error("no orderAt, stamped before the order: want not started, as before")
	}
}
