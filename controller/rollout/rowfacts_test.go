package rollout

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// derived returns r, built by a test with the facts it cares about, with
// the facts a pass reads instead of the record and the Node (Ready,
// RebootUnreported, DrainHeld, DaemonSuspect) taken from them as
// SetNode and SetRecord take them.
func derived(r Row) Row {
	r.Ready = r.Node != nil && NodeReady(r.Node)
	if bn := r.Record; bn != nil {
		r.RebootUnreported = RebootUnreported(bn)
		r.DrainHeld = drainHeld(r.Phase, bn)
		r.DaemonSuspect = daemonSuspect(bn)
	}
	return r
}

// TestRowFactsFollowRecordAndNode: the facts a pass reads instead of the
// objects are set, and cleared, by SetNode and SetRecord.
func TestRowFactsFollowRecordAndNode(t *testing.T) {
	id := func(s string) string { return s }
	ready := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	down := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	var r Row
	if r.SetNode(ready); !r.Ready {
		t.Errorf("Ready Node: Ready = false")
	}
	if r.SetNode(down); r.Ready {
		t.Errorf("Node with Ready=Unknown: Ready = true")
	}
	r.SetNode(ready)
	bn := &v1alpha1.BootcNode{}
	bn.Status.Phase = v1alpha1.PhaseDraining
	bn.Status.Rollout.Reason = "DrainBlocked"
	bn.Status.Daemon.BootID = "b1"
	bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{BootID: "b1"}
	r.SetRecord(bn, id)
	if !r.RebootUnreported || !r.DrainHeld || r.DaemonSuspect || !r.Ready {
		t.Errorf("draining, blocked, reboot unreported: facts %+v", r.Facts)
	}
	bn2 := bn.DeepCopy()
	bn2.Status.Daemon.BootID = "b2"
	bn2.Status.Rollout.Reason = ""
	bn2.Status.Daemon.Phase, bn2.Status.Daemon.LastError = v1alpha1.DaemonError, "bootc: not found"
	r.SetRecord(bn2, id)
	if r.RebootUnreported || r.DrainHeld || !r.DaemonSuspect {
		t.Errorf("draining, reported since the reboot, daemon error: facts %+v", r.Facts)
	}
	r.SetRecord(nil, id)
	if r.RebootUnreported || r.DrainHeld || r.DaemonSuspect || !r.Ready {
		t.Errorf("no record: facts %+v, want only Ready", r.Facts)
	}
}
