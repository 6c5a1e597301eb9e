package patch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A BootcNode patch must change exactly what client.MergeFrom would for a
// change of its part, send nothing of the other parts (the daemon's status
// in particular), and lock on the resourceVersion read when asked.
func TestBootcNodePatch(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	from := &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "41"},
		Spec: v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: "img@sha256:aa",
			BootOrder: &v1alpha1.BootOrder{Image: "img@sha256:aa", Rollback: true, At: t0}},
		Status: v1alpha1.BootcNodeStatus{
			Booted: &v1alpha1.HostImage{Image: "img@sha256:00", Digest: "sha256:00"},
			Daemon: v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle, BootID: "b1"},
			Phase:  v1alpha1.PhaseDraining,
			Rollout: v1alpha1.RolloutStatus{
				TargetImage: "img@sha256:aa", Cordoned: true, DrainStartedAt: &t0,
				AddedAnnotations: []string{"karpenter.sh/do-not-disrupt"}, Reason: "SlotGranted",
			},
		},
	}
	tests := []struct {
		name   string
		patch  func(*v1alpha1.BootcNode) client.Patch
		change func(*v1alpha1.BootcNode)
		lock   bool
	}{
		{"record: phase, cleared fields, list emptied", Record, func(b *v1alpha1.BootcNode) {
			b.Status.Phase = v1alpha1.PhaseUpdated
			b.Status.Rollout.Cordoned = false
			b.Status.Rollout.DrainStartedAt = nil
			b.Status.Rollout.AddedAnnotations = nil
			b.Status.Rollout.Reason = "Updated"
		}, true},
		{"spec with lock: boot order withdrawn, rollback cleared", func(b *v1alpha1.BootcNode) client.Patch { return Spec(b, true) }, func(b *v1alpha1.BootcNode) {
			b.Spec.BootOrder.Withdrawn = true
			b.Spec.BootOrder.Rollback = false
		}, true},
		{"spec without lock: new image", func(b *v1alpha1.BootcNode) client.Patch { return Spec(b, false) }, func(b *v1alpha1.BootcNode) {
			b.Spec.DesiredImage = "img@sha256:bb"
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := from.DeepCopy()
			tt.change(mod)
			// A change in the other parts must not be sent.
			mod.Status.Daemon.BootID = "b2-from-a-stale-read"
			data, err := tt.patch(from).Data(mod)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			var meta struct {
				ResourceVersion string `json:"resourceVersion"`
			}
			if raw, ok := doc["metadata"]; ok {
				_ = json.Unmarshal(raw, &meta)
			}
			if tt.lock && meta.ResourceVersion != "41" {
				t.Errorf("patch %s: no optimistic lock on resourceVersion 41", data)
			}
			if !tt.lock && meta.ResourceVersion != "" {
				t.Errorf("patch %s: locks although not asked to", data)
			}
			// Applied to the stored object, the patch gives the intended
			// part and leaves the daemon's status as stored.
			orig, _ := json.Marshal(from)
			out, err := jsonpatch.MergePatch(orig, data)
			if err != nil {
				t.Fatal(err)
			}
			var got v1alpha1.BootcNode
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			want := mod.DeepCopy()
			want.Status.Daemon.BootID = "b1"
			gotJSON, _ := json.Marshal(got.Spec)
			wantJSON, _ := json.Marshal(want.Spec)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("spec after patch %s:\n got %s\nwant %s", data, gotJSON, wantJSON)
			}
			gotJSON, _ = json.Marshal(got.Status)
			wantJSON, _ = json.Marshal(want.Status)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("status after patch %s:\n got %s\nwant %s", data, gotJSON, wantJSON)
			}
		})
	}
	t.Run("lock without a resourceVersion is an error", func(t *testing.T) {
		b := from.DeepCopy()
		b.ResourceVersion = ""
		if _, err := Record(b).Data(b); err == nil {
			t.Error("no error for a lock without a resourceVersion")
		}
	})
}

// A Node patch must change the Node exactly as the MergeFrom patch with an
// optimistic lock it replaces, for every kind of Node write bootroll makes.
func TestNodePatchMatchesMergeFrom(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "7", Labels: map[string]string{"pool": "a"},
			Annotations: map[string]string{"other": "x", v1alpha1.AnnotationSlot: "a", "karpenter.sh/do-not-disrupt": "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule}, {Key: "keep", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	tests := []struct {
		name   string
		change func(*corev1.Node)
	}{
		{"uncordon and remove bootroll's annotations", func(n *corev1.Node) {
			n.Spec.Unschedulable = false
			delete(n.Annotations, v1alpha1.AnnotationSlot)
			delete(n.Annotations, "karpenter.sh/do-not-disrupt")
		}},
		{"remove every annotation", func(n *corev1.Node) { n.Annotations = nil }},
		{"cordon a node without annotations", func(n *corev1.Node) {
			n.Annotations, n.Spec.Unschedulable = map[string]string{v1alpha1.AnnotationSlot: "a"}, true
		}},
		{"remove the startup taint", func(n *corev1.Node) { n.Spec.Taints = n.Spec.Taints[1:] }},
		{"remove the last taint", func(n *corev1.Node) { n.Spec.Taints = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := base.DeepCopy()
			if tt.name == "cordon a node without annotations" {
				from.Annotations, from.Spec.Unschedulable = nil, false
			}
			mod := from.DeepCopy()
			tt.change(mod)
			orig, _ := json.Marshal(from)
			mine, err := Node(from).Data(mod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}).Data(mod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			a, err := jsonpatch.MergePatch(orig, mine)
			if err != nil {
				t.Fatal(err)
			}
			b, err := jsonpatch.MergePatch(orig, theirs)
			if err != nil {
				t.Fatal(err)
			}
			var na, nb corev1.Node
			_ = json.Unmarshal(a, &na)
			_ = json.Unmarshal(b, &nb)
			if !apiequality.Semantic.DeepEqual(na, nb) {
				t.Errorf("patch %s gives\n%s\nMergeFrom's %s gives\n%s", mine, a, theirs, b)
			}
			if na.ResourceVersion != "7" || !strings.Contains(string(mine), `"resourceVersion":"7"`) {
				t.Errorf("patch %s does not lock on resourceVersion 7", mine)
			}
		})
	}
}
