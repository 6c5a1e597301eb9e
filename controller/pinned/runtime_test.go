package pinned

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestRuntimeUnavailableNodeFails: a node whose daemon reports that no
// container runtime answers (PrefetchAvailable False) counts as failed in
// the set's status, with the daemon's reason and message for each image,
// not as still pulling.
func TestRuntimeUnavailableNodeFails(t *testing.T) {
	ctx := context.Background()
	imgs := []v1alpha1.DigestReference{
		v1alpha1.DigestReference("quay.io/a/b@sha256:" + strings.Repeat("a", 64)),
		v1alpha1.DigestReference("quay.io/a/c@sha256:" + strings.Repeat("b", 64)),
	}
	set := &v1alpha1.PinnedImageSet{ObjectMeta: metav1.ObjectMeta{Name: "apps", Generation: 1}, Spec: v1alpha1.PinnedImageSetSpec{Pool: "p", Images: imgs}}
	r := statusRig(t, set)

	down := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	down.Status.Daemon.Conditions = []metav1.Condition{{
		Type: conditionPrefetchAvailable, Status: metav1.ConditionFalse, Reason: v1alpha1.PinnedReasonRuntimeUnavailable,
		Message: "no container runtime answers on a CRI socket: /host/run/containerd/containerd.sock: no such file",
	}}
	up := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	up.Status.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "apps", Generation: 1, Present: 2}}
	recovered := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n3"}}
	recovered.Status.Daemon.Conditions = []metav1.Condition{{Type: conditionPrefetchAvailable, Status: metav1.ConditionTrue, Reason: "RuntimeAvailable"}}
	recovered.Status.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "apps", Generation: 1, Present: 2}}

	if err := r.status(ctx, set, map[string]*v1alpha1.BootcNode{"n1": down, "n2": up, "n3": recovered}); err != nil {
		t.Fatal(err)
	}
	st := set.Status
	if st.Failed != 1 || st.Done != 2 || st.Pulling != 0 {
		t.Errorf("failed %d, done %d, pulling %d; want 1, 2, 0", st.Failed, st.Done, st.Pulling)
	}
	if len(st.Failures) != 2 {
		t.Fatalf("failures %+v, want one per image on n1", st.Failures)
	}
	for i, f := range st.Failures {
		if f.Node != "n1" || f.Image != string(imgs[i]) || f.Reason != v1alpha1.PinnedReasonRuntimeUnavailable || !strings.Contains(f.Message, "containerd.sock: no such file") {
			t.Errorf("failure %+v, want n1 %s RuntimeUnavailable with the daemon's message", f, imgs[i])
		}
	}
	deg := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	if deg == nil || deg.Status != metav1.ConditionTrue || deg.Reason != v1alpha1.PinnedReasonRuntimeUnavailable || !strings.Contains(deg.Message, "n1") {
		t.Errorf("Degraded %+v, want True, RuntimeUnavailable, naming n1", deg)
	}
	t.Logf("Degraded: %s", deg.Message)
}

// TestRuntimeConditionChangeWakesTheSet: the set's status follows a
// daemon's PrefetchAvailable condition.
func TestRuntimeConditionChangeWakesTheSet(t *testing.T) {
	old := &v1alpha1.BootcNode{}
	cur := old.DeepCopy()
	cur.Status.Daemon.Conditions = []metav1.Condition{{Type: conditionPrefetchAvailable, Status: metav1.ConditionFalse, Reason: v1alpha1.PinnedReasonRuntimeUnavailable}}
	if !PinnedProgressChanged(old, cur) {
		t.Error("PrefetchAvailable turning False does not wake the PinnedImageSets")
	}
	if PinnedProgressChanged(cur, cur.DeepCopy()) {
		t.Error("an unchanged condition wakes the PinnedImageSets")
	}
}
