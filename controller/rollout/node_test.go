package rollout

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestNextNodeAction: the rule that picks a record's next step, one case
// per branch.
func TestNextNodeAction(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	b := img("B")
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	deleting := pool.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	member := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
	marked := member.DeepCopy()
	marked.Annotations = map[string]string{v1alpha1.AnnotationSlot: "p"}
	outsider := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "q"}}}
	rec := func(phase v1alpha1.NodePhase, mut func(bn *v1alpha1.BootcNode)) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Spec.DesiredImage = b
		bn.Status.Phase = phase
		bn.Status.Rollout.TargetImage = b
		if mut != nil {
			mut(bn)
		}
		return bn
	}
	cordoned := func(bn *v1alpha1.BootcNode) { bn.Status.Rollout.Cordoned = true }
	markedUncordoned := marked.DeepCopy()
	markedCordoned := marked.DeepCopy()
	markedCordoned.Spec.Unschedulable = true
	// held: in its slot with a boot order the daemon has seen (generation
	// 2), reporting phase; recorded says whether it recorded the reboot.
	held := func(phase v1alpha1.DaemonPhase, recorded bool) func(bn *v1alpha1.BootcNode) {
		return func(bn *v1alpha1.BootcNode) {
			bn.Spec.Pool = "p"
			bn.Generation = 2
			bn.Status.Rollout.Cordoned = true
			bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: b, At: metav1.Time{Time: now.Add(-time.Minute)}}
			bn.Status.Daemon.Phase, bn.Status.Daemon.ObservedGeneration, bn.Status.Daemon.BootID = phase, 2, "boot-1"
			if recorded {
				bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: b, BootID: "boot-1", At: metav1.Time{Time: now.Add(-50 * time.Second)}}
			}
		}
	}
	for _, c := range []struct {
		name string
		bn   *v1alpha1.BootcNode
		node *corev1.Node
		pool *v1alpha1.BootcNodePool
		to   TestOnly
		want NodeDecision
	}{
		{"left its pool in its slot", rec(v1alpha1.PhaseRebooting, nil), outsider, pool, TestOnly{}, NodeDecision{Action: NodeRelease}},
		{"left its pool cordoned", rec(v1alpha1.PhasePending, cordoned), member, nil, TestOnly{}, NodeDecision{Action: NodeRelease}},
		{"left its pool holding nothing", rec(v1alpha1.PhaseUpdated, nil), outsider, pool, TestOnly{}, NodeDecision{}},
		{"pool deleted, planted skip-cleanup", rec(v1alpha1.PhaseDraining, cordoned), member, deleting, TestOnly{SkipCleanupOnDelete: true}, NodeDecision{}},
		{"pool relabelled away, planted skip-cleanup still releases", rec(v1alpha1.PhaseDraining, cordoned), outsider, pool, TestOnly{SkipCleanupOnDelete: true}, NodeDecision{Action: NodeRelease}},
		{"target lags the spec", rec(v1alpha1.PhaseDraining, func(bn *v1alpha1.BootcNode) { bn.Status.Rollout.TargetImage = img("A") }), member, pool, TestOnly{}, NodeDecision{Action: NodeRetarget}},
		{"draining", rec(v1alpha1.PhaseDraining, cordoned), member, pool, TestOnly{}, NodeDecision{Action: NodeDrain, KeepProtected: true}},
		{"draining, cordon not recorded yet", rec(v1alpha1.PhaseDraining, nil), member, pool, TestOnly{}, NodeDecision{Action: NodeDrain}},
		{"rebooting", rec(v1alpha1.PhaseRebooting, cordoned), member, pool, TestOnly{}, NodeDecision{Action: NodeVerify, KeepProtected: true}},
		{"verifying", rec(v1alpha1.PhaseVerifying, cordoned), member, pool, TestOnly{}, NodeDecision{Action: NodeVerify, KeepProtected: true}},
		{"rebooting, uncordoned before the daemon asked", rec(v1alpha1.PhaseRebooting, held(v1alpha1.DaemonStaged, false)), markedUncordoned, pool, TestOnly{}, NodeDecision{Action: NodeRedrain, KeepProtected: true}},
		{"rebooting, uncordoned after the daemon asked", rec(v1alpha1.PhaseRebooting, held(v1alpha1.DaemonRebooting, true)), markedUncordoned, pool, TestOnly{}, NodeDecision{Action: NodeVerify, KeepProtected: true}},
		// The daemon has not seen the order (down, or behind): the order
		// stands on a drain that no longer holds (explorer seed 176127).
		{"rebooting, uncordoned, the order not seen yet", rec(v1alpha1.PhaseRebooting, func(bn *v1alpha1.BootcNode) {
			held(v1alpha1.DaemonStaged, false)(bn)
			bn.Generation = 3
		}), markedUncordoned, pool, TestOnly{}, NodeDecision{Action: NodeRedrain, KeepProtected: true}},
		{"rebooting, uncordoned, the order not seen yet, the reboot recorded", rec(v1alpha1.PhaseRebooting, func(bn *v1alpha1.BootcNode) {
			held(v1alpha1.DaemonRebooting, true)(bn)
			bn.Generation = 3
		}), markedUncordoned, pool, TestOnly{}, NodeDecision{Action: NodeVerify, KeepProtected: true}},
		{"rebooting, the order not seen yet, still cordoned", rec(v1alpha1.PhaseRebooting, func(bn *v1alpha1.BootcNode) {
			held(v1alpha1.DaemonStaged, false)(bn)
			bn.Generation = 3
		}), markedCordoned, pool, TestOnly{}, NodeDecision{Action: NodeVerify, KeepProtected: true}},
		{"rebooting, held, still cordoned", rec(v1alpha1.PhaseRebooting, held(v1alpha1.DaemonStaged, false)), markedCordoned, pool, TestOnly{}, NodeDecision{Action: NodeVerify, KeepProtected: true}},
		{"failed, still cordoned", rec(v1alpha1.PhaseFailed, cordoned), member, pool, TestOnly{}, NodeDecision{Action: NodeConclude}},
		{"rolled back, protection to end", rec(v1alpha1.PhaseRolledBack, func(bn *v1alpha1.BootcNode) {
			bn.Status.Rollout.ProtectUntil = &metav1.Time{Time: now.Add(time.Minute)}
		}), member, pool, TestOnly{}, NodeDecision{Action: NodeEndProtection}},
		{"failed, nothing held", rec(v1alpha1.PhaseFailed, nil), member, pool, TestOnly{}, NodeDecision{}},
		{"grant under way", rec(v1alpha1.PhasePending, func(bn *v1alpha1.BootcNode) {
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.DrainStartedAt = &metav1.Time{Time: now.Add(-30 * time.Second)}
		}), member, pool, TestOnly{}, NodeDecision{Action: NodeAwaitGrant, Wait: GrantSettle - 30*time.Second}},
		{"grant left part way too long", rec(v1alpha1.PhasePending, func(bn *v1alpha1.BootcNode) {
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.DrainStartedAt = &metav1.Time{Time: now.Add(-GrantSettle)}
		}), member, pool, TestOnly{}, NodeDecision{Action: NodeRestoreCordon}},
		{"cordon left by a crash", rec(v1alpha1.PhaseUpdated, cordoned), member, pool, TestOnly{}, NodeDecision{Action: NodeRestoreCordon}},
		{"stray slot marker", rec(v1alpha1.PhaseUpdated, nil), marked, pool, TestOnly{}, NodeDecision{Action: NodeClearMarker}},
		{"waiting for its turn", rec(v1alpha1.PhasePending, nil), member, pool, TestOnly{}, NodeDecision{Action: NodeFollowDaemon}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := NextNodeAction(NodeView{Record: c.bn, Node: c.node, Pool: c.pool, Now: now}, c.to)
			if got != c.want {
				t.Errorf("NextNodeAction = %+v (%s), want %+v (%s)", got, got.Action, c.want, c.want.Action)
			}
		})
	}
}

// TestVerify: the rule for a node asked to reboot, one case per outcome,
// and healthTimeout to the second.
func TestVerify(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	a, b := img("A"), img("B")
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		return n
	}
	onBoot := func(n *corev1.Node, boot string) *corev1.Node {
		n.Status.NodeInfo.BootID = boot
		return n
	}
	rec := func(phase v1alpha1.NodePhase, booted string, ago time.Duration, mut func(bn *v1alpha1.BootcNode)) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Spec.DesiredImage = b
		bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: b, At: metav1.Time{Time: now.Add(-ago)}}
		bn.Status.Phase = phase
		bn.Status.Rollout.TargetImage = b
		bn.Status.Booted = &v1alpha1.HostImage{Image: booted, Digest: dig(letterOf(booted))}
		if mut != nil {
			mut(bn)
		}
		return bn
	}
	for _, c := range []struct {
		name string
		bn   *v1alpha1.BootcNode
		node *corev1.Node
		to   TestOnly
		want VerifyDecision
	}{
		{"drained, no order yet", rec(v1alpha1.PhaseRebooting, a, 0, func(bn *v1alpha1.BootcNode) { bn.Spec.BootOrder = nil }),
			node(corev1.ConditionTrue), TestOnly{}, VerifyDecision{Outcome: VerifyOrderBoot}},
		{"target not taken up yet", rec(v1alpha1.PhaseRebooting, a, 0, func(bn *v1alpha1.BootcNode) {
			bn.Spec.BootOrder, bn.Status.Rollout.TargetImage = nil, a
		}), node(corev1.ConditionTrue), TestOnly{}, VerifyDecision{Wait: time.Second}},
		{"on the image and Ready", rec(v1alpha1.PhaseRebooting, b, 90*time.Second, nil), node(corev1.ConditionTrue), TestOnly{},
			VerifyDecision{Outcome: VerifyDone, Took: 90 * time.Second}},
		{"came back on another image", rec(v1alpha1.PhaseRebooting, a, time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Status.Daemon.Phase = v1alpha1.DaemonError
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: b}
		}), node(corev1.ConditionTrue), TestOnly{}, VerifyDecision{Outcome: VerifyBootFailed, Took: time.Minute}},
		// A rollback order names the image it leaves (b): done once the
		// node is off it and Ready; failed if the daemon rebooted and
		// it is still on it.
		{"rollback: off the image it left, Ready", rec(v1alpha1.PhaseRebooting, a, time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Spec.BootOrder.Rollback = true
		}), node(corev1.ConditionTrue), TestOnly{}, VerifyDecision{Outcome: VerifyDone, Took: time.Minute}},
		{"rollback: still on the image it left after the rollback reboot", rec(v1alpha1.PhaseRebooting, b, time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Spec.BootOrder.Rollback = true
			bn.Status.Daemon.Phase = v1alpha1.DaemonError
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: b, Rollback: true}
		}), node(corev1.ConditionTrue), TestOnly{}, VerifyDecision{Outcome: VerifyBootFailed, Took: time.Minute}},
		{"rollback: not rebooted yet, on the image it leaves and Ready", rec(v1alpha1.PhaseRebooting, b, time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Spec.BootOrder.Rollback = true
		}), node(corev1.ConditionTrue), TestOnly{}, VerifyDecision{Took: time.Minute, Wait: time.Minute}},
		// A Node read from before the reboot (its boot ID the last boot's)
		// says nothing of the new boot's Ready (explorer seed 109392).
		{"on the image, the Node still the last boot's", rec(v1alpha1.PhaseRebooting, b, time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Status.Daemon.BootID = "boot-2"
		}), onBoot(node(corev1.ConditionTrue), "boot-1"), TestOnly{},
			VerifyDecision{MarkVerifying: true, Took: time.Minute, Wait: time.Minute, Unmet: "the Node does not show the boot the daemon reports yet (its Ready condition is the last boot's)"}},
		{"on the image, the Node of this boot and Ready", rec(v1alpha1.PhaseRebooting, b, time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Status.Daemon.BootID = "boot-2"
		}), onBoot(node(corev1.ConditionTrue), "boot-2"), TestOnly{},
			VerifyDecision{Outcome: VerifyDone, Took: time.Minute}},
		// The pool went back to the image the node runs (a) after its
		// daemon asked the host to reboot into b: the reboot is still to
		// come, and healthTimeout counts from b's voided order (explorer
		// seed 129186 of cluster-static-faults-3: a 51-minute reboot held
		// the node in its slot to the end).
		{"back on the image it runs, a voided reboot still to come", rec(v1alpha1.PhaseDraining, a, 2*time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Spec.DesiredImage, bn.Status.Rollout.TargetImage, bn.Spec.BootOrder.Withdrawn = a, a, true
			bn.Status.Daemon.Phase, bn.Status.Daemon.BootID = v1alpha1.DaemonRebooting, "boot-1"
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: b, BootID: "boot-1"}
		}), node(corev1.ConditionFalse), TestOnly{}, VerifyDecision{Took: 2 * time.Minute, Wait: time.Minute}},
		{"back on the image it runs, a voided reboot past healthTimeout", rec(v1alpha1.PhaseDraining, a, 5*time.Minute, func(bn *v1alpha1.BootcNode) {
			bn.Spec.DesiredImage, bn.Status.Rollout.TargetImage, bn.Spec.BootOrder.Withdrawn = a, a, true
			bn.Status.Daemon.Phase, bn.Status.Daemon.BootID = v1alpha1.DaemonRebooting, "boot-1"
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: b, BootID: "boot-1"}
		}), node(corev1.ConditionFalse), TestOnly{}, VerifyDecision{Outcome: VerifyHealthTimeout, Took: 5 * time.Minute}},
		{"on the image, not Ready yet", rec(v1alpha1.PhaseRebooting, b, time.Minute, nil), node(corev1.ConditionFalse), TestOnly{},
			VerifyDecision{MarkVerifying: true, Took: time.Minute, Wait: time.Minute, Unmet: "Node not Ready"}},
		{"still rebooting, a second before healthTimeout", rec(v1alpha1.PhaseRebooting, a, 5*time.Minute-time.Second, nil), node(corev1.ConditionUnknown), TestOnly{},
			VerifyDecision{Took: 5*time.Minute - time.Second, Wait: time.Second}},
		{"healthTimeout", rec(v1alpha1.PhaseVerifying, b, 5*time.Minute, nil), node(corev1.ConditionFalse), TestOnly{},
			VerifyDecision{Outcome: VerifyHealthTimeout, Took: 5 * time.Minute, Unmet: "Node not Ready"}},
		{"healthTimeout, first seen on the image", rec(v1alpha1.PhaseRebooting, b, 6*time.Minute, nil), node(corev1.ConditionFalse), TestOnly{},
			VerifyDecision{Outcome: VerifyHealthTimeout, MarkVerifying: true, Took: 6 * time.Minute, Unmet: "Node not Ready"}},
		{"healthTimeout, planted noHealthTimeout: no failure, and no requeue (the wait is negative)", rec(v1alpha1.PhaseVerifying, b, 6*time.Minute, nil), node(corev1.ConditionFalse), TestOnly{NoHealthTimeout: true},
			VerifyDecision{Took: 6 * time.Minute, Wait: -time.Minute, Unmet: "Node not Ready"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Verify(NodeView{Record: c.bn, Node: c.node, Pool: pool, Now: now}, c.to)
			if got != c.want {
				t.Errorf("Verify = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestDrain: the rule after a drain pass, one case per outcome, and
// drainTimeout to the second.
func TestDrain(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.DrainTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	rec := func(ago time.Duration, failures int32, reason string) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Status.Phase = v1alpha1.PhaseDraining
		bn.Status.Rollout.DrainStartedAt = &metav1.Time{Time: now.Add(-ago)}
		bn.Status.Rollout.Failures, bn.Status.Rollout.Reason = failures, reason
		return bn
	}
	for _, c := range []struct {
		name      string
		bn        *v1alpha1.BootcNode
		remaining int
		blocked   bool
		want      DrainDecision
	}{
		{"drained", rec(40*time.Second, 0, "SlotGranted"), 0, false, DrainDecision{Outcome: DrainDone, Took: 40 * time.Second}},
		{"pods left", rec(time.Minute, 0, "SlotGranted"), 3, false, DrainDecision{Took: time.Minute, Wait: DrainPoll}},
		{"refused by a budget: said once", rec(time.Minute, 0, "SlotGranted"), 3, true, DrainDecision{Took: time.Minute, MarkBlocked: true, Wait: DrainPoll}},
		{"refused by a budget, already said", rec(time.Minute, 0, "DrainBlocked"), 3, true, DrainDecision{Took: time.Minute, Wait: DrainPoll}},
		{"a second before drainTimeout", rec(10*time.Minute-time.Second, 0, "DrainBlocked"), 1, true, DrainDecision{Took: 10*time.Minute - time.Second, Wait: time.Second}},
		{"drainTimeout, first time", rec(10*time.Minute, 0, "DrainBlocked"), 1, true, DrainDecision{Outcome: DrainTimedOut, Took: 10 * time.Minute, Failures: 1, Backoff: BackoffBase}},
		{"drainTimeout, third time", rec(11*time.Minute, 2, "DrainBlocked"), 1, false, DrainDecision{Outcome: DrainTimedOut, Took: 11 * time.Minute, Failures: 3, Backoff: 4 * BackoffBase}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Drain(NodeView{Record: c.bn, Pool: pool, Now: now}, c.remaining, c.blocked)
			if got != c.want {
				t.Errorf("Drain = %+v, want %+v", got, c.want)
			}
		})
	}
}
