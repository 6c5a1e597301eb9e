package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestDaemonTrouble: a daemon that reports an error is named with it, and
// so is one staging again after failed stages (its last error stands until
// a stage works: explorer seed 176739); one that never reported is named
// DaemonSilence after its record was created, not before; a healthy one, one
// staging for the first time, or one on a NotReady Node, is not.
func TestDaemonTrouble(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	ready := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	down := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}
	row := func(name string, node *corev1.Node, created time.Duration, mut func(*v1alpha1.BootcNode)) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))}}
		bn.Spec.DesiredImage = img("B")
		if mut != nil {
			mut(bn)
		}
		return derived(Row{Name: name, Record: bn, Node: node})
	}
	reported := func(bn *v1alpha1.BootcNode) {
		bn.Status.Booted = &v1alpha1.HostImage{Image: img("A"), Digest: dig("A")}
		bn.Status.Daemon.Phase, bn.Status.Daemon.BootID = v1alpha1.DaemonIdle, "b0"
	}
	got := DaemonTrouble([]Row{
		row("err", ready, time.Hour, func(bn *v1alpha1.BootcNode) {
			reported(bn)
			bn.Status.Daemon.Phase, bn.Status.Daemon.LastError = v1alpha1.DaemonError, "bootc: not found"
		}),
		row("fine", ready, time.Hour, reported),
		row("first", ready, time.Hour, func(bn *v1alpha1.BootcNode) {
			reported(bn)
			bn.Status.Daemon.Phase = v1alpha1.DaemonStaging
		}),
		row("retry", ready, time.Hour, func(bn *v1alpha1.BootcNode) {
			reported(bn)
			bn.Status.Daemon.Phase, bn.Status.Daemon.StageAttempts = v1alpha1.DaemonStaging, 22
			bn.Status.Daemon.LastError = "stage " + img("B") + ": not enough space"
		}),
		row("silent", ready, DaemonSilence, nil),
		row("new", ready, DaemonSilence-time.Second, nil),
		row("down", down, time.Hour, nil),
	}, now)
	if len(got) != 3 || got[0] != "err: bootc: not found" || got[1] != "retry: stage "+img("B")+": not enough space" || !strings.HasPrefix(got[2], "silent: its daemon has not reported") {
		t.Fatalf("DaemonTrouble = %q, want err and retry with their errors, and silent", got)
	}
}
