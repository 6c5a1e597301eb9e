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
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	// Strings are compared as strings when both are valid UTF-8, and by
	// their encoding otherwise (encoding/json writes invalid bytes as
	// U+FFFD).
	message := func(m string) controllerPart {
		c := full
		c.Rollout.Message = m
		return c
	}
	records = append(records,
		recordCase{"a message escaped", full, message("m & \"q\" \u2028 é \x01")},
		recordCase{"invalid UTF-8 encoded alike", message("a\xff"), message("a\xfe")},
		recordCase{"invalid UTF-8 to valid", message("a\xff"), message("a\ufffd!")},
		recordCase{"valid to invalid UTF-8", message("a"), message("a\xff")})
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
		t.Run("node/"+tt.name, func(t *testing.T) {
			checkMergeDiff(t, nodeMeta{tt.a.Annotations}, nodeMeta{tt.b.Annotations})
			checkMergeDiff(t, nodeSpec{tt.a.Spec.Unschedulable, tt.a.Spec.Taints}, nodeSpec{tt.b.Spec.Unschedulable, tt.b.Spec.Taints})
		})
	}
}

func checkMergeDiff(t *testing.T, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	patch, err := appendMergeDiff(nil, a, b)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := appendMergeDiff(nil, part{}, part{Counts: map[string]int{"a": 1}}); err == nil {
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

// appendMergeDiff and the patches' Data must give the bytes json.Marshal
// gives for the patch built as a map of maps (mapDiff, the controller's
// earlier patches), escaped strings and all.
func TestMergeDiffBytes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	full := controllerPart{Phase: v1alpha1.PhaseDraining, Rollout: v1alpha1.RolloutStatus{
		TargetImage: "img@sha256:aa", PhaseSince: &t0, PriorUnschedulable: ptr.To(false), Cordoned: true,
		AddedAnnotations: []string{"a", "<b>"}, DrainStartedAt: &t0, Failures: 1, Reason: "DrainBlocked", Message: "m & \"q\" \u2028 é \x01",
	}}
	changed := full
	changed.Phase, changed.Rollout.Cordoned, changed.Rollout.Message, changed.Rollout.Reason = v1alpha1.PhaseUpdated, false, "done <ok>", ""
	changed.Rollout.DrainStartedAt, changed.Rollout.ProtectUntil = nil, &t0
	invalid := full
	invalid.Rollout.Message = "a\xff"
	order := &v1alpha1.BootOrder{Image: "i<", Rollback: true, At: t0}
	spec := v1alpha1.BootcNodeSpec{Pool: "p", DesiredImage: "img@sha256:aa", BootOrder: order,
		PinnedImageSets: []v1alpha1.NodePinnedImageSet{{Name: "s1"}}}
	withdrawn := spec
	withdrawn.BootOrder = &v1alpha1.BootOrder{Image: "i<", At: t0, Withdrawn: true}
	for i, pair := range [][2]any{
		{full, controllerPart{}}, {controllerPart{}, full}, {full, full}, {full, changed}, {changed, full}, {full, invalid}, {invalid, full},
		{spec, v1alpha1.BootcNodeSpec{}}, {v1alpha1.BootcNodeSpec{Pool: "p"}, spec}, {spec, withdrawn}, {withdrawn, spec},
	} {
		d, err := mapDiff(pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(d)
		got, err := appendMergeDiff([]byte("x"), pair[0], pair[1])
		if err != nil || string(got) != "x"+string(want) {
			t.Errorf("%d: appendMergeDiff gives %s (%v), json.Marshal of the map %s", i, got, err, want)
		}
	}

	bn := func(c controllerPart, s v1alpha1.BootcNodeSpec) *v1alpha1.BootcNode {
		return &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "4<2"}, Spec: s,
			Status: v1alpha1.BootcNodeStatus{Phase: c.Phase, Rollout: c.Rollout}}
	}
	for i, pair := range [][2]*v1alpha1.BootcNode{{bn(full, spec), bn(changed, withdrawn)}, {bn(full, spec), bn(full, spec)}, {bn(controllerPart{}, v1alpha1.BootcNodeSpec{}), bn(full, spec)}} {
		from, to := pair[0], pair[1]
		rec, _ := mapDiff(controllerPart{from.Status.Phase, from.Status.Rollout}, controllerPart{to.Status.Phase, to.Status.Rollout})
		sp, _ := mapDiff(from.Spec, to.Spec)
		lock := map[string]any{"resourceVersion": from.ResourceVersion}
		for _, c := range []struct {
			patch client.Patch
			doc   map[string]any
		}{
			{Record(from), map[string]any{"metadata": lock, "status": rec}},
			{Spec(from, true), map[string]any{"metadata": lock, "spec": sp}},
			{Spec(from, false), map[string]any{"spec": sp}},
		} {
			want, _ := json.Marshal(c.doc)
			got, err := c.patch.Data(to)
			if err != nil || string(got) != string(want) {
				t.Errorf("%d: Data gives %s (%v), json.Marshal of the map %s", i, got, err, want)
			}
		}
	}

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{"x": "1", "y<": "2&", "z": "3"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}}}
	other := node.DeepCopy()
	other.Annotations = map[string]string{"x": "1", "y<": "4", "a\u00e9": "5"}
	uncordoned := node.DeepCopy()
	uncordoned.Spec.Unschedulable = false
	for i, pair := range [][2]*corev1.Node{{node, other}, {other, node}, {node, node}, {node, uncordoned}, {node, &corev1.Node{}}, {&corev1.Node{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}, node}} {
		from, to := pair[0], pair[1]
		// The earlier nodePatch: one diff of both parts, the lock merged
		// into its metadata.
		type part struct {
			Metadata nodeMeta `json:"metadata"`
			Spec     nodeSpec `json:"spec"`
		}
		d, err := mapDiff(part{nodeMeta{from.Annotations}, nodeSpec{from.Spec.Unschedulable, from.Spec.Taints}},
			part{nodeMeta{to.Annotations}, nodeSpec{to.Spec.Unschedulable, to.Spec.Taints}})
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := d["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["resourceVersion"] = from.ResourceVersion
		d["metadata"] = meta
		want, _ := json.Marshal(d)
		got, err := Node(from).Data(to)
		if err != nil || string(got) != string(want) {
			t.Errorf("node %d: Data gives %s (%v), json.Marshal of the map %s", i, got, err, want)
		}
	}
}
