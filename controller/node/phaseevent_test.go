package node

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// TestPhaseEventOnceWritten: a phase change whose write conflicts (the
// record read before the daemon's latest status write) says nothing; the
// event comes once the write lands, and a pass that keeps the phase says
// nothing again. Explorer seed 176388 of the 168262 regression of
// cluster-expiry-during-update: the controller's cache held kp-69 as
// created for 20 s while the daemon reported Staging and Staged, and each
// of the twenty writes of its first phase, Pending, one a second, emitted
// a Pending event before it conflicted.
func TestPhaseEventOnceWritten(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 5, 1, 27, 21, 0, time.UTC)
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	bn.Spec.Pool = "p"
	cl := fakeapi.Client(t, bn)
	read := func() *v1alpha1.BootcNode {
		var got v1alpha1.BootcNode
		if err := cl.Get(ctx, types.NamespacedName{Name: "n"}, &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	stale := read()
	// The daemon's write the reconciler's read does not hold.
	daemon := read()
	daemon.Status.Daemon.Phase = v1alpha1.DaemonStaged
	if err := cl.Status().Update(ctx, daemon); err != nil {
		t.Fatal(err)
	}
	var ev events
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now), Recorder: &ev})
	for i := 0; i < 3; i++ {
		s := &nodeStep{orig: recordOf(stale), bn: stale.DeepCopy(), now: now}
		if err := r.setPhase(ctx, s, v1alpha1.PhasePending, "", ""); !apierrors.IsConflict(err) {
			t.Fatalf("try %d on a stale read: %v, want a conflict", i, err)
		}
	}
	if len(ev) != 0 {
		t.Errorf("events %v after three conflicting writes; want none: the phase was not recorded", ev)
	}
	fresh := read()
	s := &nodeStep{orig: recordOf(fresh), bn: fresh, now: now}
	if err := r.setPhase(ctx, s, v1alpha1.PhasePending, "", ""); err != nil {
		t.Fatal(err)
	}
	if got := read().Status.Phase; got != v1alpha1.PhasePending {
		t.Fatalf("phase %q written, want Pending", got)
	}
	s = &nodeStep{orig: recordOf(read()), bn: read(), now: now}
	if err := r.setPhase(ctx, s, v1alpha1.PhasePending, "", ""); err != nil {
		t.Fatal(err)
	}
	if len(ev) != 1 || ev[0] != string(v1alpha1.PhasePending) {
		t.Errorf("events %v; want one Pending, once the write landed", ev)
	}
}
