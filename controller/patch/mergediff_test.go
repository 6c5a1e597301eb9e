package patch

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// mergeDiff must give a patch that, applied to the JSON of a, yields the
// JSON of b, exactly like jsonpatch.CreateMergePatch, for the parts the
// controller patches: the rollout record, the spec and the Node part.
func TestMergeDiffMatchesCreateMergePatch(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	full := controllerPart{Phase: v1alpha1.PhaseDraining, Rollout: v1alpha1.RolloutStatus{
		TargetImage: "img@sha256:aa", PhaseSince: &t0, PriorUnschedulable: ptr.To(false), Cordoned: true,
		AddedAnnotations: []string{"a", "b"}, AddedNodeClaimAnnotations: []string{"c"}, ProtectUntil: &t1,
		DrainStartedAt: &t0, RetryAfter: &t1, Failures: 2, FailedImage: "img@sha256:ff",
		Reason: "DrainBlocked", Message: "m",
	}}
	type recordCase struct {
		name string
		a, b controllerPart
	}
	records := []recordCase{
		{"nothing changes", full, full},
		{"everything cleared", full, controllerPart{}},
		{"everything set", controllerPart{}, full},
		{"some changed", full, func() controllerPart {
			c := full
			c.Phase, c.Rollout.Cordoned, c.Rollout.PriorUnschedulable = v1alpha1.PhaseUpdated, false, ptr.To(true)
			c.Rollout.AddedAnnotations, c.Rollout.RetryAfter, c.Rollout.PhaseSince = []string{"a"}, nil, &t1
			return c
		}()},
	}
	// Times are compared by their encoding (sameTimeJSON): to the second,
	// in UTC, a zero time as null.
	subSecond := metav1.NewTime(t0.Add(300 * time.Millisecond).In(time.FixedZone("x", 3600)))
	zero := metav1.Time{}
	records = append(records,
		recordCase{"the same second in another zone", full, func() controllerPart {
			c := full
			c.Rollout.PhaseSince, c.Rollout.DrainStartedAt = &subSecond, &subSecond
			return c
		}()},
		recordCase{"a zero time for a time", full, func() controllerPart {
			c := full
			c.Rollout.PhaseSince, c.Rollout.ProtectUntil = &zero, &zero
			return c
		}()},
		recordCase{"a time for a zero time", func() controllerPart {
			c := full
			c.Rollout.PhaseSince = &zero
			return c
		}(), full})
	for _, tt := range records {
		t.Run("record/"+tt.name, func(t *testing.T) { checkMergeDiff(t, tt.a, tt.b) })
	}
	spec := v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: "img@sha256:aa",
		BootOrder:       &v1alpha1.BootOrder{Image: "img@sha256:aa", Rollback: true, At: t1},
		PinnedImageSets: []v1alpha1.NodePinnedImageSet{{Name: "s1"}, {Name: "s2"}}}
	specs := []struct {
		name string
		a, b v1alpha1.BootcNodeSpec
	}{
		{"cleared", spec, v1alpha1.BootcNodeSpec{Pool: "p"}},
		{"set", v1alpha1.BootcNodeSpec{Pool: "p"}, spec},
		{"set shrinks", spec, func() v1alpha1.BootcNodeSpec { s := spec; s.PinnedImageSets = s.PinnedImageSets[:1]; return s }()},
	}
	for _, tt := range specs {
		t.Run("spec/"+tt.name, func(t *testing.T) { checkMergeDiff(t, tt.a, tt.b) })
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"x": "1", "y": "2"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}}
	changed := node.DeepCopy()
	changed.Annotations = map[string]string{"y": "3", "z": "4"}
	changed.Spec.Unschedulable, changed.Spec.Taints = false, nil
	nodes := []struct {
		name string
		a, b *corev1.Node
	}{
		{"annotations changed, added and removed", node, changed},
		{"annotations from none", &corev1.Node{}, node},
		{"annotations to none", node, &corev1.Node{}},
		{"annotations to empty", node, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}},
	}
	for _, tt := range nodes {
		t.Run("node/"+tt.name, func(t *testing.T) { checkMergeDiff(t, nodePartOf(tt.a), nodePartOf(tt.b)) })
	}
}

func checkMergeDiff(t *testing.T, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	d, err := mergeDiff(a, b)
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(d)
	got, err := jsonpatch.MergePatch(ja, patch)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := jsonpatch.CreateMergePatch(ja, jb)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := jsonpatch.MergePatch(ja, ref)
	var g, w any
	_ = json.Unmarshal(got, &g)
	_ = json.Unmarshal(want, &w)
	if !reflect.DeepEqual(g, w) {
		t.Errorf("patch %s gives\n%s\nCreateMergePatch's %s gives\n%s", patch, got, ref, want)
	}
	// And the patch is CreateMergePatch's: nothing sent that did not
	// change in the JSON (a time equal to the second, say).
	var gp, wp any
	_ = json.Unmarshal(patch, &gp)
	_ = json.Unmarshal(ref, &wp)
	if !reflect.DeepEqual(gp, wp) {
		t.Errorf("patch %s, CreateMergePatch's %s", patch, ref)
	}
}

// Fields a merge patch cannot replace whole are refused, not mis-sent.
func TestMergeDiffRefusesNestedMaps(t *testing.T) {
	type part struct {
		Counts map[string]int `json:"counts"`
	}
	if _, err := mergeDiff(part{}, part{Counts: map[string]int{"a": 1}}); err == nil {
		t.Error("no error for a map that is not map[string]string")
	}
}

// A struct behind a pointer is diffed field by field once it exists, as
// CreateMergePatch does: a field cleared in it is sent as null.
func TestMergeDiffNestedPointer(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	o := &v1alpha1.BootOrder{Image: "i", Rollback: true, At: t0}
	for _, c := range []struct {
		name string
		a, b *v1alpha1.BootOrder
	}{
		{"set", nil, o},
		{"withdrawn", o, &v1alpha1.BootOrder{Image: "i", Rollback: true, At: t0, Withdrawn: true}},
		{"rollback cleared", o, &v1alpha1.BootOrder{Image: "i", At: t0}},
		{"removed", o, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkMergeDiff(t, v1alpha1.BootcNodeSpec{Pool: "p", BootOrder: c.a}, v1alpha1.BootcNodeSpec{Pool: "p", BootOrder: c.b})
		})
	}
}

// marshalDiff must give json.Marshal's bytes for every patch mergeDiff
// builds, and for the leaves it encodes itself (escaped strings, nil
// maps and raw messages).
func TestMarshalDiffAsJSONMarshal(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	full := controllerPart{Phase: v1alpha1.PhaseDraining, Rollout: v1alpha1.RolloutStatus{
		TargetImage: "img@sha256:aa", PhaseSince: &t0, PriorUnschedulable: ptr.To(false), Cordoned: true,
		AddedAnnotations: []string{"a", "<b>"}, Reason: "DrainBlocked", Message: "m & \"q\" \u2028 é \x01",
	}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"x": "1", "y<": "2&"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}}
	var docs []map[string]any
	for _, pair := range [][2]any{
		{full, controllerPart{}}, {controllerPart{}, full}, {full, full},
		{nodePartOf(node), nodePartOf(&corev1.Node{})}, {nodePartOf(&corev1.Node{}), nodePartOf(node)},
	} {
		d, err := mergeDiff(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		lockOn(d, "42")
		docs = append(docs, map[string]any{"status": d}, d)
	}
	docs = append(docs, map[string]any{}, map[string]any{"a": nil, "b": map[string]any(nil), "c": json.RawMessage(nil),
		"d": json.RawMessage(`{"x":1}`), "\u00e9<>": "\t\u2029", "e": []string{"<"}, "f": &t0, "g": map[string]any{"z": 1, "a": 2.5}})
	for _, d := range docs {
		want, werr := json.Marshal(d)
		got, gerr := marshalDiff(d)
		if (werr != nil) != (gerr != nil) || string(got) != string(want) {
			t.Errorf("marshalDiff gives %s (%v), json.Marshal %s (%v)", got, gerr, want, werr)
		}
	}
}
