package pool

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/poolfeed"
)

// A pass sets the node gauge of every phase: one that emptied since the
// last pass reads 0, not its old count.
func TestPassZeroesEmptiedPhases(t *testing.T) {
	p := &v1alpha1.BootcNodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{v1alpha1.Finalizer}},
		Spec: v1alpha1.BootcNodePoolSpec{
			NodeSelector: map[string]string{"pool": "web"},
			Image:        "quay.io/example/os@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			Paused:       true,
		},
	}
	cl := fakeapi.Client(t, p)
	m := options.NewMetrics(nil)
	m.Nodes.WithLabelValues("web", string(v1alpha1.PhaseStaged)).Set(5)
	r := NewReconciler(cl, options.Options{
		Clock:   clocktesting.NewFakePassiveClock(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)),
		Metrics: m, Feed: poolfeed.New(),
	})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.Nodes.WithLabelValues("web", string(v1alpha1.PhaseStaged))); got != 0 {
		t.Errorf("Staged gauge of a pool with no node = %v, want 0", got)
	}
	if got, want := testutil.CollectAndCount(m.Nodes), len(v1alpha1.AllPhases); got != want {
		t.Errorf("%d phase series, want one per phase (%d)", got, want)
	}
}

// A pool being deleted loses its series; another pool's stay.
func TestFinalizeForgetsThePoolsSeries(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{v1alpha1.Finalizer}, DeletionTimestamp: &now}}
	cl := fakeapi.Client(t, p)
	m := options.NewMetrics(nil)
	for _, pool := range []string{"web", "db"} {
		m.SetPoolPhases(pool, []v1alpha1.PhaseCount{{Phase: v1alpha1.PhaseUpdated, Nodes: 2}})
		m.SlotsInUse.WithLabelValues(pool).Set(1)
		m.SlotsMax.WithLabelValues(pool).Set(1)
		m.Failures.WithLabelValues(pool, "BootFailed").Inc()
	}
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now.Time), Metrics: m, Feed: poolfeed.New()})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ got, want int }{
		"nodes":      {testutil.CollectAndCount(m.Nodes), len(v1alpha1.AllPhases)},
		"slotsInUse": {testutil.CollectAndCount(m.SlotsInUse), 1},
		"slotsMax":   {testutil.CollectAndCount(m.SlotsMax), 1},
		"failures":   {testutil.CollectAndCount(m.Failures), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d series after deleting pool web, want %d (pool db's only)", name, c.got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.SlotsInUse.WithLabelValues("db")); got != 1 {
		t.Errorf("pool db's slots gauge = %v, want 1", got)
	}
}

// A pool forgotten (deleted) and made again under the same name gets its
// phase series back: SetPoolPhases keeps the gauges it looked up per pool,
// and ForgetPool must drop them with the series.
func TestPoolPhasesAfterForgetPool(t *testing.T) {
	m := options.NewMetrics(nil)
	m.SetPoolPhases("web", []v1alpha1.PhaseCount{{Phase: v1alpha1.PhaseUpdated, Nodes: 2}})
	m.ForgetPool("web")
	if got := testutil.CollectAndCount(m.Nodes); got != 0 {
		t.Fatalf("%d phase series after ForgetPool, want 0", got)
	}
	m.SetPoolPhases("web", []v1alpha1.PhaseCount{{Phase: v1alpha1.PhaseStaged, Nodes: 3}})
	if got, want := testutil.CollectAndCount(m.Nodes), len(v1alpha1.AllPhases); got != want {
		t.Errorf("%d phase series for the pool made again, want %d", got, want)
	}
	if got := testutil.ToFloat64(m.Nodes.WithLabelValues("web", string(v1alpha1.PhaseStaged))); got != 3 {
		t.Errorf("Staged gauge of the pool made again = %v, want 3", got)
	}
	if got := testutil.ToFloat64(m.Nodes.WithLabelValues("web", string(v1alpha1.PhaseUpdated))); got != 0 {
		t.Errorf("Updated gauge of the pool made again = %v, want 0", got)
	}
}

// The halted gauge reads 1 once maxFailures failures of the target are
// recorded (by the node reconciler), and 0 for a pool that is not halted.
func TestPassSetsHaltedGauge(t *testing.T) {
	const image = "quay.io/example/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	now := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	pool := func(name string, failures ...v1alpha1.NodeFailure) *v1alpha1.BootcNodePool {
		return &v1alpha1.BootcNodePool{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.Finalizer}},
			Spec:       v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": name}, Image: image},
			Status:     v1alpha1.BootcNodePoolStatus{TargetImage: image, Failures: failures},
		}
	}
	cl := fakeapi.Client(t, pool("web", v1alpha1.NodeFailure{Node: "n1", Image: image, Reason: "BootFailed", Time: now}), pool("db"))
	m := options.NewMetrics(nil)
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now.Time), Metrics: m, Feed: poolfeed.New()})
	for _, name := range []string{"web", "db"} {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(m.Halted.WithLabelValues("web")); got != 1 {
		t.Errorf("halted gauge of a pool with maxFailures failures = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.Halted.WithLabelValues("db")); got != 0 {
		t.Errorf("halted gauge of a pool without failures = %v, want 0", got)
	}
	var web v1alpha1.BootcNodePool
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "web"}, &web); err != nil {
		t.Fatal(err)
	}
	if web.Status.Halt == nil || web.Status.Halt.Image != image || len(web.Status.Halt.Failures) != 1 {
		t.Errorf("status.halt = %+v, want the halt of %s with n1's failure", web.Status.Halt, image)
	}
}

// A revert: the pool goes back to an image whose failures it recorded in
// an earlier rollout (its target is another image now). The pass that
// adopts the image again sets targetSince, and the old failures count no
// more: no halt.
func TestRevertedImageStartsWithoutItsOldFailures(t *testing.T) {
	const image = "quay.io/example/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const other = "quay.io/example/os@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	failedAt := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	p := &v1alpha1.BootcNodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{v1alpha1.Finalizer}},
		Spec:       v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": "web"}, Image: image},
		Status: v1alpha1.BootcNodePoolStatus{TargetImage: other, TargetSince: &failedAt,
			Failures: []v1alpha1.NodeFailure{{Node: "n1", Image: image, Reason: "BootFailed", Time: failedAt}}},
	}
	cl := fakeapi.Client(t, p)
	m := options.NewMetrics(nil)
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(failedAt.Add(time.Minute)), Metrics: m, Feed: poolfeed.New()})
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.BootcNodePool
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "web"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.TargetImage != image || got.Status.TargetSince == nil || !got.Status.TargetSince.After(failedAt.Time) {
		t.Fatalf("target %s since %v: want %s since the pass", got.Status.TargetImage, got.Status.TargetSince, image)
	}
	if got.Status.Halt != nil || testutil.ToFloat64(m.Halted.WithLabelValues("web")) != 0 {
		t.Errorf("halted on %s by a failure of its earlier rollout: %+v", image, got.Status.Halt)
	}
}

// The series a pass sets are looked up once per pool view (poolView.gauges):
// a pool deleted and made again under its name reports into new series,
// not into the old ones that went with the first pool (ForgetPool).
func TestPoolMadeAgainReportsItsSlots(t *testing.T) {
	const image = "quay.io/example/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	now := metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	pool := func(maxU int32) *v1alpha1.BootcNodePool {
		mu := intstr.FromInt32(maxU)
		return &v1alpha1.BootcNodePool{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Finalizers: []string{v1alpha1.Finalizer}},
			Spec:       v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": "web"}, Image: image, Rollout: v1alpha1.RolloutSpec{MaxUnavailable: &mu}},
			Status:     v1alpha1.BootcNodePoolStatus{TargetImage: image},
		}
	}
	ctx := context.Background()
	cl := fakeapi.Client(t, pool(2))
	m := options.NewMetrics(nil)
	r := NewReconciler(cl, options.Options{Clock: clocktesting.NewFakePassiveClock(now.Time), Metrics: m, Feed: poolfeed.New()})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: "web"}}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.SlotsMax.WithLabelValues("web")); got != 2 {
		t.Fatalf("slots gauge of the first pool = %v, want 2", got)
	}
	// Deleted: the pass that finalizes it forgets its series.
	if err := cl.Delete(ctx, pool(2)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.SlotsMax); n != 0 {
		t.Fatalf("%d slots series after the pool's deletion, want none", n)
	}
	// Made again, with another maxUnavailable.
	if err := cl.Create(ctx, pool(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.SlotsMax); n != 1 {
		t.Fatalf("%d slots series for the pool made again, want 1", n)
	}
	if got := testutil.ToFloat64(m.SlotsMax.WithLabelValues("web")); got != 3 {
		t.Errorf("slots gauge of the pool made again = %v, want 3", got)
	}
}
