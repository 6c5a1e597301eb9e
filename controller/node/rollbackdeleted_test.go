package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestRollbackFailedAfterDeletion: a record deleted while its node rolls
// back from v2 to v1, the image the pool has gone back to, leaves a
// RollbackFailed failure of v1 on the pool before it goes when the node
// did not come back healthy on v1: the daemon reports v2 from the new boot
// (the rollback crash-looped and the host fell back), Ready or not, or v1
// without Ready healthTimeout after the order. The
// record made again in its place knows only the pool's failures; without
// one it was directed to v1, staged it and the node was rebooted into the
// image its rollback had just failed on (explorer seed 176172 of the 92018
// regression of rollback-on-failed-boot). A rollback that took, a report
// not from the new boot yet (the release waits), a reboot the daemon never
// started, and a pool whose target is not v1 record nothing.
func TestRollbackFailedAfterDeletion(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	const v3 = "registry.example/os@sha256:3333333333333333333333333333333333333333333333333333333333333333"
	t0 := time.Date(2026, 1, 5, 0, 5, 31, 0, time.UTC)
	for _, c := range []struct {
		name       string
		target     string // the pool's status.targetImage
		daemonBoot string // the boot the daemon last reported from
		booted     string
		ready      corev1.ConditionStatus
		noReboot   bool // the daemon never rebooted for the rollback order
		after      time.Duration
		wantFail   bool
		wantKept   bool // the release waits: the finalizer stays
	}{
		{"fell back to v2, NotReady, at healthTimeout", v1, "boot-2", v2, corev1.ConditionFalse, false, 5 * time.Minute, true, false},
		{"fell back to v2, Ready", v1, "boot-2", v2, corev1.ConditionTrue, false, 2 * time.Minute, true, false},
		{"on v1 but not Ready at healthTimeout", v1, "boot-2", v1, corev1.ConditionFalse, false, 5 * time.Minute, true, false},
		{"rolled back to v1, Ready", v1, "boot-2", v1, corev1.ConditionTrue, false, 2 * time.Minute, false, false},
		{"back Ready, not reported from the new boot yet", v1, "boot-1", v2, corev1.ConditionTrue, false, 2 * time.Minute, false, true},
		{"the daemon never rebooted for the order", v1, "boot-1", v2, corev1.ConditionFalse, true, 5 * time.Minute, false, false},
		{"the pool's target is neither", v3, "boot-2", v2, corev1.ConditionFalse, false, 5 * time.Minute, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{v1alpha1.Finalizer}}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = v1alpha1.ImageReference(c.target)
			pool.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			pool.Spec.FailurePolicy.Action = v1alpha1.FailureRollback
			pool.Status.TargetImage = c.target
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer},
				DeletionTimestamp: &metav1.Time{Time: t0.Add(30 * time.Second)}}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", v2
			bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2, Rollback: true, Withdrawn: true, At: metav1.NewTime(t0)}
			bn.Status.Phase = v1alpha1.PhaseVerifying
			ro := &bn.Status.Rollout
			ro.TargetImage, ro.FailedImage, ro.RollbackTo = v2, v2, v1
			d := &bn.Status.Daemon
			d.Phase, d.BootID = v1alpha1.DaemonIdle, c.daemonBoot
			if !c.noReboot {
				d.LastReboot = &v1alpha1.RebootRecord{Image: v2, BootID: "boot-1", Rollback: true, At: metav1.NewTime(t0)}
			}
			bn.Status.Booted = &v1alpha1.HostImage{Image: c.booted, Digest: c.booted[len("registry.example/os@"):]}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			node.Status.NodeInfo.BootID = "boot-2"
			if c.noReboot {
				node.Status.NodeInfo.BootID = "boot-1"
			}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: c.ready}}
			api := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(api, options.Options{Clock: clocktesting.NewFakePassiveClock(t0.Add(c.after)), APIReader: api})
			if _, err := r.finalize(ctx, bn); err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.BootcNodePool
			if err := api.Get(ctx, types.NamespacedName{Name: "p"}, &got); err != nil {
				t.Fatal(err)
			}
			var failed bool
			for _, f := range got.Status.Failures {
				if f.Node == "n" {
					failed = true
					if f.Image != v1 || f.Reason != "RollbackFailed" {
						t.Errorf("failure recorded: %s %s; want v1 RollbackFailed", f.Image, f.Reason)
					}
				}
			}
			if failed != c.wantFail {
				t.Errorf("failure of v1 on the pool: %v, want %v (status.failures %+v)", failed, c.wantFail, got.Status.Failures)
			}
			err := api.Get(ctx, types.NamespacedName{Name: "n"}, &v1alpha1.BootcNode{})
			if kept := err == nil; kept != c.wantKept {
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				t.Errorf("record kept %v, want %v", kept, c.wantKept)
			}
		})
	}
}
