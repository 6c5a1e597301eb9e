package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
)

// said keeps the Events a reconciler records as "Kind/name Reason".
type said []string

func (e *said) Eventf(o runtime.Object, _, reason, _ string, _ ...any) {
	kind := fmt.Sprintf("%T", o)
	switch o.(type) {
	case *v1alpha1.BootcNode:
		kind = "BootcNode"
	case *v1alpha1.BootcNodePool:
		kind = "BootcNodePool"
	}
	*e = append(*e, kind+"/"+o.(client.Object).GetName()+" "+reason)
}

// failOn says which requests of a try fail: "patch" (an object's patch,
// not its status), "status" (a status patch), with the object patched.
type failOn func(verb string, obj client.Object) bool

// recordStatus fails the BootcNodes' status patches, recordPatch their
// other patches (spec, finalizers), nodePatch the Nodes' patches.
func recordStatus(verb string, obj client.Object) bool {
	_, ok := obj.(*v1alpha1.BootcNode)
	return ok && verb == "status"
}

func recordPatch(verb string, obj client.Object) bool {
	_, ok := obj.(*v1alpha1.BootcNode)
	return ok && verb == "patch"
}

func nodePatch(verb string, obj client.Object) bool {
	_, ok := obj.(*corev1.Node)
	return ok && verb == "patch"
}

// reconcileRetried runs three Reconciles of record n at now on a fake API
// server holding objs: the first with the requests fail names failing (an
// internal error: a timeout), then two that succeed, as the retries after
// ConflictRetry do. It returns what each try said, of reasons only.
func reconcileRetried(t *testing.T, now time.Time, fail failOn, reasons []string, objs ...client.Object) [3][]string {
	t.Helper()
	base := fakeapi.Client(t, objs...)
	failing := true
	failed := apierrors.NewInternalError(context.DeadlineExceeded)
	cl := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if failing && fail("patch", obj) {
				return failed
			}
			return cl.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if failing && fail("status", obj) {
				return failed
			}
			return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	var ev said
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: cl, Recorder: &ev})
	var tries [3][]string
	for i := range tries {
		ev = nil
		res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "n"}})
		if i == 0 && err == nil && res.RequeueAfter != ConflictRetry {
			t.Fatalf("the failing try: result %+v and no error; the case must fail part way", res)
		}
		if i > 0 && err != nil {
			t.Fatalf("try %d: %v", i+1, err)
		}
		for _, e := range ev {
			if slices.ContainsFunc(reasons, func(r string) bool { return len(e) > len(r) && e[len(e)-len(r)-1:] == " "+r }) {
				tries[i] = append(tries[i], e)
			}
		}
		failing = false
	}
	return tries
}

// wantSaid checks what each try said against want (nil: nothing).
func wantSaid(t *testing.T, got, want [3][]string) {
	t.Helper()
	for i := range got {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("try %d said %q, want %q (all tries: %q)", i+1, got[i], want[i], got)
		}
	}
}

// TestFinalizeSaysTheFailureOnce: the finalizer of a record deleted while
// its node rebooted, whose node came back Ready on another image (the boot
// failed and the host fell back), says BootFailed on the record once, with
// the failure's write on the pool, as the pool's own event is; and it says
// Released once, by the pass whose writes give the Node back. The finalize
// is tried again until the release lands and the finalizer is removed
// (every second under API errors), and each try said both again
// (bootcnode-deleted-mid-reboot-release-retry-under-api-errors: eight
// BootFailed and two Released events for workers-2 in 12 s).
func TestFinalizeSaysTheFailureOnce(t *testing.T) {
	const v1 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const v2 = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 9, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		fail failOn
		want [3][]string
	}{
		{"the uncordon fails", nodePatch, [3][]string{
			{"BootcNodePool/p BootFailed", "BootcNode/n BootFailed"}, {"BootcNode/n Released"}, nil}},
		{"the release's record write fails", recordStatus, [3][]string{
			{"BootcNodePool/p BootFailed", "BootcNode/n BootFailed"}, {"BootcNode/n Released"}, nil}},
		{"the finalizer's removal fails", recordPatch, [3][]string{
			{"BootcNodePool/p BootFailed", "BootcNode/n BootFailed", "BootcNode/n Released"}, nil, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{v1alpha1.Finalizer}}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = v2
			pool.Status.TargetImage = v2
			bn, node := rebootedInSlot(v2, t0, v1alpha1.PhaseRebooting, "p", corev1.ConditionTrue)
			bn.DeletionTimestamp = &metav1.Time{Time: t0.Add(30 * time.Second)}
			bn.Spec.BootOrder.Withdrawn = true
			bn.Status.Daemon.Phase, bn.Status.Daemon.BootID = v1alpha1.DaemonIdle, "boot-2"
			bn.Status.Booted = &v1alpha1.HostImage{Image: v1, Digest: v1[len("registry.example/os@"):]}
			wantSaid(t, reconcileRetried(t, t0.Add(2*time.Minute), c.fail, []string{"BootFailed", "Released"}, pool, bn, node), c.want)
		})
	}
}

// TestSlotEventsOnceWritten: an event that announces a write of the
// record (a slot's end, the protection's end) or of the Node (bootroll's
// cordon put back) is said once that write has landed, and once: said
// before it, a write that failed made it a lie, and the retry, every
// second (ConflictRetry), said it again.
func TestSlotEventsOnceWritten(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 20, 0, 0, time.UTC)
	protected := map[string]string{v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"}
	added := []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	// inSlot: Draining for img since t0, cordoned and protected by
	// bootroll, the Node as bootroll left it.
	inSlot := func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) {
		bn.Status.Phase = v1alpha1.PhaseDraining
		ro := &bn.Status.Rollout
		ro.Cordoned, ro.PriorUnschedulable, ro.AddedAnnotations = true, ptr.To(false), added
		ro.DrainStartedAt = &metav1.Time{Time: t0}
		n.Spec.Unschedulable, n.Annotations = true, protected
	}
	for _, c := range []struct {
		name string
		// setup sets up the record, the Node and the pool as the API
		// server has them, and returns other objects it holds.
		setup  func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object
		after  time.Duration // now, after t0
		fail   failOn
		reason string
		want   [3][]string
	}{
		// Seed 176610's regression: nine ProtectionEnded events for kp-0
		// from 43m23s, one a second, the record's write conflicting.
		{"post-update protection ended, the record write fails", func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object {
			bn.Status.Phase = v1alpha1.PhaseUpdated
			bn.Status.Rollout.AddedAnnotations = added
			bn.Status.Rollout.ProtectUntil = &metav1.Time{Time: t0.Add(5 * time.Minute)}
			n.Annotations = map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"}
			return nil
		}, 6 * time.Minute, recordStatus, "ProtectionEnded", [3][]string{nil, {"BootcNode/n ProtectionEnded"}, nil}},
		// A slot's end resumed (Updated, still cordoned): the Node given
		// back, its record's write failed; the retry found the Node
		// given back and said Uncordoned again
		// (cluster-controller-crash-mid-rollout: a crash after the Node
		// patch).
		{"slot's end, the record write fails after the uncordon", func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object {
			bn.Status.Phase = v1alpha1.PhaseUpdated
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(false)
			n.Spec.Unschedulable, n.Annotations = true, map[string]string{v1alpha1.AnnotationSlot: "p"}
			return nil
		}, time.Minute, recordStatus, "Uncordoned", [3][]string{nil, {"BootcNode/n Uncordoned"}, nil}},
		// An admin's kubectl uncordon in the drain: Recordoned says the
		// cordon is back, once it is.
		{"uncordoned in the drain, the cordon fails", func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object {
			inSlot(bn, n, p)
			n.Spec.Unschedulable = false
			return nil
		}, time.Minute, nodePatch, "Recordoned", [3][]string{nil, {"BootcNode/n Recordoned"}, nil}},
		{"drain timed out, the slot's end fails", func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object {
			inSlot(bn, n, p)
			p.Spec.DrainTimeout = &metav1.Duration{Duration: 4 * time.Minute}
			// No controller: it needs spec.drain.force, and blocks the
			// drain.
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"}}
			pod.Spec.NodeName = "n"
			return []client.Object{pod}
		}, 5 * time.Minute, recordStatus, "DrainTimeout", [3][]string{nil, {"BootcNode/n DrainTimeout"}, nil}},
		// Retargeted outside a slot while down on the image it leaves:
		// the mark goes with the step's own write (its phase).
		{"retargeted down on the left image, the record write fails", func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object {
			const left = "registry.example/os@sha256:3333333333333333333333333333333333333333333333333333333333333333"
			bn.Status.Phase = v1alpha1.PhaseUpdated
			bn.Status.Rollout.TargetImage = left
			bn.Status.Booted = &v1alpha1.HostImage{Image: left, Digest: left[len("registry.example/os@"):]}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)}}
			return nil
		}, time.Minute, recordStatus, "DownOnLeftImage", [3][]string{nil, {"BootcNode/n DownOnLeftImage"}, nil}},
		{"pool halted on the target, the slot's end fails", func(bn *v1alpha1.BootcNode, n *corev1.Node, p *v1alpha1.BootcNodePool) []client.Object {
			inSlot(bn, n, p)
			p.Status.Halt = &v1alpha1.HaltRecord{Image: img, Since: metav1.NewTime(t0)}
			return nil
		}, time.Minute, recordStatus, "Halted", [3][]string{nil, {"BootcNode/n Halted"}, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{v1alpha1.Finalizer}}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = img
			pool.Status.TargetImage = img
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", img
			bn.Status.Rollout.TargetImage = img
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
			node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			more := c.setup(bn, node, pool)
			objs := append([]client.Object{pool, bn, node}, more...)
			wantSaid(t, reconcileRetried(t, t0.Add(c.after), c.fail, []string{c.reason}, objs...), c.want)
		})
	}
}

// TestLeftPoolDownSaysTheFailureOnce: a node relabelled out of its pool
// after it booted the pool's target in its slot, and still not Ready
// healthTimeout after the reboot request, says HealthTimeout on its
// record once its verdict is written, and not again when the release is
// resumed on a record that has it: said first, a verdict whose write
// failed said it on every retry.
func TestLeftPoolDownSaysTheFailureOnce(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	t0 := time.Date(2026, 1, 5, 0, 6, 25, 0, time.UTC)
	for _, c := range []struct {
		name string
		fail failOn
		want [3][]string
	}{
		{"the verdict's write fails", recordStatus, [3][]string{
			{"BootcNodePool/p HealthTimeout"}, {"BootcNode/n HealthTimeout"}, nil}},
		{"the uncordon fails after the verdict", nodePatch, [3][]string{
			{"BootcNodePool/p HealthTimeout", "BootcNode/n HealthTimeout"}, nil, nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Finalizers: []string{v1alpha1.Finalizer}}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Image = img
			pool.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}
			pool.Status.TargetImage = img
			bn, node := rebootedInSlot(img, t0, v1alpha1.PhaseRebooting, "elsewhere", corev1.ConditionFalse)
			wantSaid(t, reconcileRetried(t, t0.Add(10*time.Minute), c.fail, []string{"HealthTimeout"}, pool, bn, node), c.want)
		})
	}
}
