package pinned

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/options"
)

// TestNoNodesIsNotComplete: a set that selects no BootcNode has pinned
// nothing, and says so, where "0/0 nodes" said Complete (the envtest
// TestPinnedImageSetDistributedAndAggregated caught a first pass on a
// cache without the BootcNodes yet: Complete with every count 0, which
// kubectl wait --for=condition=Complete would have taken). With nodes,
// Complete follows them.
func TestNoNodesIsNotComplete(t *testing.T) {
	ctx := context.Background()
	img := v1alpha1.DigestReference("quay.io/a/b@sha256:" + strings.Repeat("a", 64))
	set := &v1alpha1.PinnedImageSet{ObjectMeta: metav1.ObjectMeta{Name: "apps", Generation: 1}, Spec: v1alpha1.PinnedImageSetSpec{Pool: "p", Images: []v1alpha1.DigestReference{img}}}
	r := statusRig(t, set)

	if err := r.status(ctx, set, map[string]*v1alpha1.BootcNode{}); err != nil {
		t.Fatal(err)
	}
	done := meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionComplete)
	if done == nil || done.Status != metav1.ConditionFalse || done.Reason != "NoNodesSelected" || !strings.Contains(done.Message, "spec.nodeSelector") {
		t.Errorf("no nodes: Complete %+v, want False, NoNodesSelected, naming spec.nodeSelector", done)
	}

	n := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	n.Status.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "apps", Generation: 1, Present: 1}}
	if err := r.status(ctx, set, map[string]*v1alpha1.BootcNode{"n1": n}); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(set.Status.Conditions, v1alpha1.ConditionComplete) {
		t.Errorf("one node with the image: Complete %+v, want True", meta.FindStatusCondition(set.Status.Conditions, v1alpha1.ConditionComplete))
	}
}

// statusRig is a Reconciler on a fake client that holds set (read back
// into it) with the status subresource, for tests of status.
func statusRig(t *testing.T, set *v1alpha1.PinnedImageSet) *Reconciler {
	t.Helper()
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	// fakeapi.Client has no status subresource for PinnedImageSets.
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(set).WithStatusSubresource(&v1alpha1.PinnedImageSet{}).Build()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(set), set); err != nil {
		t.Fatal(err)
	}
	return New(c, options.Options{Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
}
