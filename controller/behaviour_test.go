package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	nodectl "github.com/bootroll/bootroll/controller/node"
	"github.com/bootroll/bootroll/controller/options"
	poolctl "github.com/bootroll/bootroll/controller/pool"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
)

// world is a controller's behaviour on a fake clock: the pool and node
// reconcilers on a fake client, the pool feed filled from the client
// (no informers run), and the test playing the daemon and the kubelet.
// Nothing waits on a real clock: the test steps the clock by hand.
type world struct {
	t      *testing.T
	ctx    context.Context
	clk    *clocktesting.FakeClock
	c      client.Client
	feed   *poolfeed.Feed
	pool   reconcile.Reconciler
	node   reconcile.Reconciler
	target string
}

func newWorld(t *testing.T, healthTimeout time.Duration) *world {
	t.Helper()
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	target := digestRef("v2")
	mu := intstr.FromInt32(1)
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	pool.Spec.Image = v1alpha1.ImageReference(target)
	pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	pool.Spec.Rollout.MaxUnavailable = &mu
	pool.Spec.HealthTimeout = &metav1.Duration{Duration: healthTimeout}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node.Status.NodeInfo.BootID = "boot-0"
	w := &world{t: t, ctx: context.Background(), clk: clocktesting.NewFakeClock(t0), c: fakeapi.Client(t, pool, node), feed: poolfeed.New(), target: target}
	opts := options.Options{Clock: w.clk, Feed: w.feed, Metrics: options.NewMetrics(nil)}
	w.pool, w.node = poolctl.NewReconciler(w.c, opts), nodectl.NewReconciler(w.c, opts)
	return w
}

// sync gives the feed what the informers would: every BootcNode and Node.
func (w *world) sync() {
	w.t.Helper()
	var bns v1alpha1.BootcNodeList
	var nodes corev1.NodeList
	if err := w.c.List(w.ctx, &bns); err != nil {
		w.t.Fatal(err)
	}
	if err := w.c.List(w.ctx, &nodes); err != nil {
		w.t.Fatal(err)
	}
	for i := range bns.Items {
		w.feed.Observe(&bns.Items[i], false)
	}
	for i := range nodes.Items {
		w.feed.Observe(&nodes.Items[i], false)
	}
}

func (w *world) reconcile(r reconcile.Reconciler, name string) reconcile.Result {
	w.t.Helper()
	w.sync()
	res, err := r.Reconcile(w.ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		w.t.Fatalf("reconcile %s at %s: %v", name, w.clk.Now().Format(time.TimeOnly), err)
	}
	return res
}

func (w *world) record() *v1alpha1.BootcNode {
	w.t.Helper()
	var bn v1alpha1.BootcNode
	if err := w.c.Get(w.ctx, types.NamespacedName{Name: "n"}, &bn); err != nil {
		w.t.Fatal(err)
	}
	return &bn
}

func (w *world) kubeNode() *corev1.Node {
	w.t.Helper()
	var n corev1.Node
	if err := w.c.Get(w.ctx, types.NamespacedName{Name: "n"}, &n); err != nil {
		w.t.Fatal(err)
	}
	return &n
}

// daemon writes what the node's daemon reports.
func (w *world) daemon(mut func(st *v1alpha1.BootcNodeStatus)) {
	w.t.Helper()
	bn := w.record()
	mut(&bn.Status)
	bn.Status.Daemon.ObservedGeneration = bn.Generation
	if err := w.c.Status().Update(w.ctx, bn); err != nil {
		w.t.Fatal(err)
	}
}

// kubelet sets the Node's readiness and boot ID.
func (w *world) kubelet(ready corev1.ConditionStatus, bootID string) {
	w.t.Helper()
	n := w.kubeNode()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(w.clk.Now())}}
	n.Status.NodeInfo.BootID = bootID
	if err := w.c.Status().Update(w.ctx, n); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) wantPhase(want v1alpha1.NodePhase) {
	w.t.Helper()
	if got := rollout.RecordPhase(w.record()); got != want {
		w.t.Fatalf("at %s: phase %s, want %s (%+v)", w.clk.Now().Format(time.TimeOnly), got, want, w.record().Status.Rollout)
	}
}

// stageAndGrant takes the node from no record to asked to reboot: the pool
// creates the record directed, the daemon stages, the node reconciler
// takes the target up, the pool grants the slot (its slot table), the
// node reconciler takes it up (cordon), and the drain (no pods) ends in the
// boot order.
func (w *world) stageAndGrant() {
	w.t.Helper()
	w.reconcile(w.pool, "p")
	if got := w.record().Spec.DesiredImage; got != w.target {
		w.t.Fatalf("record created with desiredImage %q, want the target", got)
	}
	w.daemon(func(st *v1alpha1.BootcNodeStatus) {
		st.Booted = &v1alpha1.HostImage{Image: digestRef("v1"), Digest: imageref.Digest(digestRef("v1"))}
		st.Staged = &v1alpha1.HostImage{Image: w.target, Digest: imageref.Digest(w.target)}
		st.Daemon.Phase, st.Daemon.BootID = v1alpha1.DaemonStaged, "boot-0"
	})
	w.reconcile(w.node, "n")
	w.clk.Step(2 * time.Second) // past the pool's pass interval
	w.reconcile(w.pool, "p")
	w.wantPhase(v1alpha1.PhasePending) // granted in the pool's table only
	w.reconcile(w.node, "n")
	w.wantPhase(v1alpha1.PhaseDraining)
	if !w.kubeNode().Spec.Unschedulable {
		w.t.Fatal("the slot grant did not cordon the Node")
	}
	w.clk.Step(time.Second)
	w.reconcile(w.node, "n")
	w.wantPhase(v1alpha1.PhaseRebooting)
	if got := w.record().Spec.Order(); got == nil || !got.At.Time.Equal(w.clk.Now().Truncate(time.Second)) {
		w.t.Fatalf("after the drain: boot order %+v, want one given now (%s)", got, w.clk.Now())
	}
}

// TestUpdateOnAFakeClock: one node's update from start to finish, every
// step taken by hand on a fake clock.
func TestUpdateOnAFakeClock(t *testing.T) {
	w := newWorld(t, 5*time.Minute)
	w.stageAndGrant()
	// The daemon reboots the host; the Node goes NotReady, comes back on
	// a new boot running the target.
	asked := w.clk.Now()
	w.daemon(func(st *v1alpha1.BootcNodeStatus) {
		st.Daemon.Phase = v1alpha1.DaemonRebooting
		st.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: w.target, BootID: "boot-0", At: metav1.NewTime(asked)}
	})
	w.kubelet(corev1.ConditionUnknown, "boot-0")
	w.clk.Step(90 * time.Second)
	if res := w.reconcile(w.node, "n"); res.RequeueAfter <= 0 {
		t.Fatalf("rebooting: nothing would look again (result %+v)", res)
	}
	w.wantPhase(v1alpha1.PhaseRebooting)
	w.daemon(func(st *v1alpha1.BootcNodeStatus) {
		st.Booted, st.Staged = &v1alpha1.HostImage{Image: w.target, Digest: imageref.Digest(w.target)}, nil
		st.Daemon.Phase, st.Daemon.BootID = v1alpha1.DaemonIdle, "boot-1"
	})
	w.kubelet(corev1.ConditionTrue, "boot-1")
	w.clk.Step(5 * time.Second)
	w.reconcile(w.node, "n")
	w.wantPhase(v1alpha1.PhaseUpdated)
	bn := w.record()
	if bn.Status.Rollout.Cordoned || w.kubeNode().Spec.Unschedulable {
		t.Fatalf("updated but still cordoned: record %v, Node %v", bn.Status.Rollout.Cordoned, w.kubeNode().Spec.Unschedulable)
	}
	if !rollout.OrderSpent(bn) {
		t.Fatalf("the update is over but its boot order %+v is not spent (booted %+v)", bn.Spec.BootOrder, bn.Status.Booted)
	}
	w.clk.Step(2 * time.Second)
	w.reconcile(w.pool, "p")
	var p v1alpha1.BootcNodePool
	if err := w.c.Get(w.ctx, types.NamespacedName{Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Slots) != 0 || p.Status.UpdatedNodes != 1 {
		t.Fatalf("pool after the update: slots %v, updated %d; want none and 1", p.Status.Slots, p.Status.UpdatedNodes)
	}
}

// TestHealthTimeoutOnAFakeClock: a node that never comes back Ready is
// failed exactly at healthTimeout after the reboot request, not a second
// before, and its failure halts the pool (maxFailures 1 by default).
func TestHealthTimeoutOnAFakeClock(t *testing.T) {
	const timeout = 5 * time.Minute
	w := newWorld(t, timeout)
	w.stageAndGrant()
	asked := w.record().Spec.Order().At.Time
	w.daemon(func(st *v1alpha1.BootcNodeStatus) {
		st.Daemon.Phase = v1alpha1.DaemonRebooting
		st.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: w.target, BootID: "boot-0", At: metav1.NewTime(asked)}
	})
	w.kubelet(corev1.ConditionUnknown, "boot-0")
	w.clk.SetTime(asked.Add(timeout - time.Second))
	res := w.reconcile(w.node, "n")
	w.wantPhase(v1alpha1.PhaseRebooting)
	if res.RequeueAfter != time.Second {
		t.Fatalf("a second before healthTimeout: requeue after %s, want 1s", res.RequeueAfter)
	}
	w.clk.Step(time.Second)
	w.reconcile(w.node, "n")
	w.wantPhase(v1alpha1.PhaseFailed)
	bn := w.record()
	if bn.Status.Rollout.Reason != "HealthTimeout" || bn.Status.Rollout.FailedImage != w.target {
		t.Fatalf("at healthTimeout: reason %q, failedImage %q; want HealthTimeout on the target", bn.Status.Rollout.Reason, bn.Status.Rollout.FailedImage)
	}
	var p v1alpha1.BootcNodePool
	if err := w.c.Get(w.ctx, types.NamespacedName{Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	// Halted from the moment the failure is written (the node reconciler's
	// status.failures); the pool's next pass records the halt.
	if !rollout.HaltedFor(&p, w.target) || len(p.Status.Failures) != 1 {
		t.Fatalf("pool failures %+v: want the pool halted on the target", p.Status.Failures)
	}
	w.reconcile(w.pool, "p")
	if err := w.c.Get(w.ctx, types.NamespacedName{Name: "p"}, &p); err != nil {
		t.Fatal(err)
	}
	if p.Status.Halt == nil || p.Status.Halt.Image != w.target {
		t.Fatalf("pool halt %+v: want the pool's pass to record the halt on the target", p.Status.Halt)
	}
}
