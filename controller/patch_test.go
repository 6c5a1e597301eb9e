package controller

import (
	"encoding/json"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A BootcNode patch must change exactly what client.MergeFrom would for a
// change of its part, send nothing of the other parts (the daemon's status
// in particular), and lock on the resourceVersion read when asked.
func TestBootcNodePatch(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	from := &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "41"},
		Spec:       v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: "img@sha256:aa", DesiredState: v1alpha1.DesiredStaged, Rollback: true},
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
		patch  func(*v1alpha1.BootcNode) bootcNodePatch
		change func(*v1alpha1.BootcNode)
		lock   bool
	}{
		{"record: phase, cleared fields, list emptied", recordPatch, func(b *v1alpha1.BootcNode) {
			b.Status.Phase = v1alpha1.PhaseUpdated
			b.Status.Rollout.Cordoned = false
			b.Status.Rollout.DrainStartedAt = nil
			b.Status.Rollout.AddedAnnotations = nil
			b.Status.Rollout.Reason = "Updated"
		}, true},
		{"spec with lock: desired state, rollback cleared", func(b *v1alpha1.BootcNode) bootcNodePatch { return specPatch(b, true) }, func(b *v1alpha1.BootcNode) {
			b.Spec.DesiredState = v1alpha1.DesiredBooted
			b.Spec.Rollback = false
		}, true},
		{"spec without lock: new image", func(b *v1alpha1.BootcNode) bootcNodePatch { return specPatch(b, false) }, func(b *v1alpha1.BootcNode) {
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
		if _, err := recordPatch(b).Data(b); err == nil {
			t.Error("no error for a lock without a resourceVersion")
		}
	})
}
