package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestWithdrawVoidOrder: a boot order voided by a change of the desired
// image (given for v2, the pool then set v1) is withdrawn too, so that it
// does not stand again when the pool sets v2 back: it was given for a
// drain long over, and the daemon rebooted on it as soon as a later slot
// cordoned the node, its pods still bound (explorer seed 70058 of
// pdb-changed-mid-rollout). An order already withdrawn is not written.
func TestWithdrawVoidOrder(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	at := metav1.NewTime(time.Date(2026, 1, 5, 0, 19, 21, 0, time.UTC))
	for _, withdrawn := range []bool{false, true} {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Spec.Pool, bn.Spec.DesiredImage = "p", v1
		bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2, At: at, Withdrawn: withdrawn}
		cl := fakeapi.Client(t, bn.DeepCopy())
		r := NewReconciler(cl, options.Options{})
		var cur v1alpha1.BootcNode
		if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
			t.Fatal(err)
		}
		rv := cur.ResourceVersion
		s := &nodeStep{bn: cur.DeepCopy(), orig: recordOf(&cur)}
		if err := r.withdrawBootOrder(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
			t.Fatal(err)
		}
		if !cur.Spec.BootOrder.Withdrawn {
			t.Errorf("withdrawn %v before: the void order for v2 is not withdrawn", withdrawn)
		}
		// Set back to v2: no order stands.
		cur.Spec.DesiredImage = v2
		if o := cur.Spec.Order(); o != nil {
			t.Errorf("withdrawn %v before: with v2 desired again the old order stands: %+v", withdrawn, o)
		}
		if withdrawn && cur.ResourceVersion != rv {
			t.Errorf("an order already withdrawn was written again")
		}
	}
}

// TestFellBackAfterLeaving: a record being deleted whose node came back
// from the reboot into the target Ready on another image is a failed boot
// (the host fell back), once the daemon has reported from that boot; before
// that report it is unknown (the release waits), and a node that booted the
// target is no failure (explorer seed 70152 of bootcnode-deleted-mid-reboot:
// the record made again rebooted the node into the failed image twice).
func TestFellBackAfterLeaving(t *testing.T) {
	const v1d = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2d = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	const v2 = "registry.example/os@" + v2d
	t0 := time.Date(2026, 1, 5, 0, 6, 43, 0, time.UTC)
	step := func(daemonBoot, booted string) *nodeStep {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Spec.Pool, bn.Spec.DesiredImage = "p", v2
		bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2, At: metav1.NewTime(t0)}
		bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", At: metav1.NewTime(t0.Add(time.Second))}
		bn.Status.Daemon.BootID = daemonBoot
		bn.Status.Booted = &v1alpha1.HostImage{Image: "registry.example/os@" + booted, Digest: booted}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		node.Status.NodeInfo.BootID = "boot-2"
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		return &nodeStep{bn: bn, node: node, pool: pool, now: t0.Add(10 * time.Minute)}
	}
	if _, fell, unknown := fellBackAfterLeaving(step("boot-2", v1d), "gone"); !fell || unknown {
		t.Errorf("back on v1, reported: fell %v unknown %v; want a failure", fell, unknown)
	}
	if _, fell, unknown := fellBackAfterLeaving(step("boot-1", v1d), "gone"); fell || !unknown {
		t.Errorf("back, the daemon not reported from the new boot: fell %v unknown %v; want unknown", fell, unknown)
	}
	if _, fell, unknown := fellBackAfterLeaving(step("boot-2", v2d), "gone"); fell || unknown {
		t.Errorf("back on v2: fell %v unknown %v; want neither", fell, unknown)
	}
}

// TestRetargetWithdrawsTheLeftImagesOrder: a record that rolled back off
// v2 (its rollback order for v2 spent) and is retargeted to v1 has that
// order withdrawn, so it does not stand again when the pool goes back to
// v2: a daemon reads a standing rollback order as done and stages nothing
// (explorer seed 92351 of rollback-on-failed-boot).
func TestRetargetWithdrawsTheLeftImagesOrder(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	bn.Spec.Pool, bn.Spec.DesiredImage = "p", v1
	bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2, Rollback: true, At: metav1.NewTime(time.Date(2026, 1, 5, 0, 5, 31, 0, time.UTC))}
	bn.Status.Phase = v1alpha1.PhaseRolledBack
	bn.Status.Rollout.TargetImage, bn.Status.Rollout.FailedImage = v2, v2
	cl := fakeapi.Client(t, bn.DeepCopy())
	r := NewReconciler(cl, options.Options{})
	var cur v1alpha1.BootcNode
	if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
		t.Fatal(err)
	}
	s := &nodeStep{bn: cur.DeepCopy(), orig: recordOf(&cur)}
	if err := r.retarget(context.Background(), s, v1); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.DesiredImage = v2
	if o := cur.Spec.Order(); o != nil || cur.Spec.RollingBack() {
		t.Errorf("with v2 desired again the spent rollback order stands: %+v", cur.Spec.BootOrder)
	}
}

// TestRetargetRecordsDownOnTheLeftImage: a record retargeted while its
// node is down (not Ready) on the image the pool leaves, outside a slot,
// is recorded as down on that image (status.rollout.failedImage), so that
// the pool may give it a slot for the new target while it is down; a
// Ready node, one on another image, or the planted
// testOnly.forgetDownOnLeft is not (explorer seed 158119 of
// rollback-on-failed-boot: taken over as Updated by a pool made again
// while down on v2-bad, then set back to v1; it stayed down for good).
func TestRetargetRecordsDownOnTheLeftImage(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	for _, tc := range []struct {
		name   string
		ready  bool
		booted string
		forget bool
		want   string
	}{
		{"down on the left image", false, v2, false, v2},
		{"Ready on the left image", true, v2, false, ""},
		{"down on another image", false, v1, false, ""},
		{"planted: forgotten", false, v2, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", v1
			bn.Status.Phase = v1alpha1.PhaseUpdated
			bn.Status.Rollout.TargetImage = v2
			bn.Status.Booted = &v1alpha1.HostImage{Image: tc.booted, Digest: tc.booted[len("registry.example/os@"):]}
			status := corev1.ConditionFalse
			if tc.ready {
				status = corev1.ConditionTrue
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
			cl := fakeapi.Client(t, bn.DeepCopy(), node.DeepCopy())
			opts := options.Options{}
			opts.TestOnly.ForgetDownOnLeft = tc.forget
			r := NewReconciler(cl, opts)
			var cur v1alpha1.BootcNode
			if err := cl.Get(context.Background(), client.ObjectKey{Name: "n"}, &cur); err != nil {
				t.Fatal(err)
			}
			s := &nodeStep{bn: cur.DeepCopy(), orig: recordOf(&cur), node: node}
			if err := r.retarget(context.Background(), s, v1); err != nil {
				t.Fatal(err)
			}
			if got := s.bn.Status.Rollout.FailedImage; got != tc.want {
				t.Errorf("failedImage %q, want %q", got, tc.want)
			}
			if got := s.bn.Status.Rollout.TargetImage; got != v1 {
				t.Errorf("targetImage %q, want %q", got, v1)
			}
		})
	}
}
