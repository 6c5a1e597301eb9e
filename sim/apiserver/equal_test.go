package apiserver

import (
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// serialDeepEqual says what serialEqual.DeepEqual says, for values that
// are equal, differ in one place, or differ only in representation.
func TestSerialDeepEqualAsEqualities(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	node := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"},
				CreationTimestamp: metav1.NewTime(t0), ResourceVersion: "3",
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:a":{}}`)}}}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &metav1.Time{Time: t0}}}},
			Status: corev1.NodeStatus{
				Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
					LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)}},
			},
		}
	}
	bn := func() *v1alpha1.BootcNode {
		return &v1alpha1.BootcNode{
			ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Spec:       v1alpha1.BootcNodeSpec{DesiredImage: "img", Pool: "p"},
			Status: v1alpha1.BootcNodeStatus{Phase: "Ready", Booted: &v1alpha1.HostImage{Image: "img"},
				Rollout: v1alpha1.RolloutStatus{PhaseSince: &metav1.Time{Time: t0}, AddedAnnotations: []string{"a"}}},
		}
	}
	cet := time.FixedZone("CET", 3600)
	nodeChanges := map[string]func(*corev1.Node){
		"none":               func(*corev1.Node) {},
		"label":              func(n *corev1.Node) { n.Labels["a"] = "c" },
		"labels empty":       func(n *corev1.Node) { n.Labels = map[string]string{} },
		"labels nil":         func(n *corev1.Node) { n.Labels = nil },
		"label added":        func(n *corev1.Node) { n.Labels["z"] = "b" },
		"annotation key":     func(n *corev1.Node) { n.Annotations = map[string]string{"y": "y"} },
		"created sub-second": func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(t0.Add(time.Millisecond)) },
		"created zone":       func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(t0.In(cet)) },
		"created later":      func(n *corev1.Node) { n.CreationTimestamp = metav1.NewTime(t0.Add(time.Second)) },
		"fields raw":         func(n *corev1.Node) { n.ManagedFields[0].FieldsV1 = &metav1.FieldsV1{Raw: []byte(`{"f:b":{}}`)} },
		"fields nil":         func(n *corev1.Node) { n.ManagedFields[0].FieldsV1 = nil },
		"taint time nil":     func(n *corev1.Node) { n.Spec.Taints[0].TimeAdded = nil },
		"taint time":         func(n *corev1.Node) { n.Spec.Taints[0].TimeAdded = &metav1.Time{Time: t0.Add(time.Hour)} },
		"taints empty":       func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{} },
		"unschedulable":      func(n *corev1.Node) { n.Spec.Unschedulable = true },
		"cpu other format":   func(n *corev1.Node) { n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("4000m") },
		"cpu":                func(n *corev1.Node) { n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("5") },
		"capacity key": func(n *corev1.Node) {
			delete(n.Status.Capacity, corev1.ResourceCPU)
			n.Status.Capacity["x"] = resource.MustParse("4")
		},
		"condition heartbeat":    func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(time.Minute)) },
		"condition status":       func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse },
		"conditions nil":         func(n *corev1.Node) { n.Status.Conditions = nil },
		"addresses empty":        func(n *corev1.Node) { n.Status.Addresses = []corev1.NodeAddress{} },
		"config set":             func(n *corev1.Node) { n.Status.Config = &corev1.NodeConfigStatus{} },
		"images":                 func(n *corev1.Node) { n.Status.Images = []corev1.ContainerImage{{Names: []string{"a"}, SizeBytes: 1}} },
		"daemon endpoints port":  func(n *corev1.Node) { n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250 },
		"node info":              func(n *corev1.Node) { n.Status.NodeInfo.BootID = "b" },
		"same conditions shared": func(n *corev1.Node) {},
	}
	for name, change := range nodeChanges {
		a, b := node(), node()
		change(b)
		if name == "same conditions shared" {
			b.Status.Conditions = a.Status.Conditions
		}
		for _, pair := range [][2]any{{a, b}, {&a.Status, &b.Status}, {&a.ObjectMeta, &b.ObjectMeta}, {&a.Spec, &b.Spec}, {a.Status, b.Status}} {
			want := serialEqual.DeepEqual(pair[0], pair[1])
			if got := serialDeepEqual(pair[0], pair[1]); got != want {
				t.Errorf("node %s (%T): serialDeepEqual = %v, serialEqual %v", name, pair[0], got, want)
			}
			if got := serialDeepEqual(pair[1], pair[0]); got != want {
				t.Errorf("node %s (%T, swapped): serialDeepEqual = %v, serialEqual %v", name, pair[0], got, want)
			}
		}
	}
	bnChanges := map[string]func(*v1alpha1.BootcNode){
		"none":             func(*v1alpha1.BootcNode) {},
		"booted nil":       func(b *v1alpha1.BootcNode) { b.Status.Booted = nil },
		"booted image":     func(b *v1alpha1.BootcNode) { b.Status.Booted.Image = "x" },
		"phase since zone": func(b *v1alpha1.BootcNode) { b.Status.Rollout.PhaseSince = &metav1.Time{Time: t0.In(cet)} },
		"annotations nil":  func(b *v1alpha1.BootcNode) { b.Status.Rollout.AddedAnnotations = nil },
		"annotations":      func(b *v1alpha1.BootcNode) { b.Status.Rollout.AddedAnnotations = []string{"b"} },
		"pool":             func(b *v1alpha1.BootcNode) { b.Spec.Pool = "q" },
	}
	for name, change := range bnChanges {
		a, b := bn(), bn()
		change(b)
		for _, pair := range [][2]any{{a, b}, {&a.Status, &b.Status}, {&a.Spec, &b.Spec}} {
			want := serialEqual.DeepEqual(pair[0], pair[1])
			if got := serialDeepEqual(pair[0], pair[1]); got != want {
				t.Errorf("bootcnode %s (%T): serialDeepEqual = %v, serialEqual %v", name, pair[0], got, want)
			}
		}
	}
	// Unstructured content, selectors, NaN, nil and mismatched types.
	sel, _ := labels.Parse("a=b")
	sel2, _ := labels.Parse("a=c")
	others := [][2]any{
		{map[string]any{"a": 1.0, "b": []any{"x", map[string]any{}}}, map[string]any{"a": 1.0, "b": []any{"x", map[string]any{}}}},
		{map[string]any{"a": 1.0}, map[string]any{"a": int64(1)}},
		{map[string]any{"a": math.NaN()}, map[string]any{"a": math.NaN()}},
		{map[string]any{"a": nil}, map[string]any{"a": nil}},
		{map[string]any{"a": nil}, map[string]any{"b": nil}},
		{[]any{}, []any(nil)},
		{nil, map[string]any{}},
		{nil, nil},
		{"a", "a"},
		{"a", 1},
		{&metav1.LabelSelector{}, &metav1.LabelSelector{MatchLabels: map[string]string{}}},
		{&struct{ S labels.Selector }{sel}, &struct{ S labels.Selector }{sel}},
		{&struct{ S labels.Selector }{sel}, &struct{ S labels.Selector }{sel2}},
		{&struct{ F func() }{}, &struct{ F func() }{}},
		{&struct{ T metav1.MicroTime }{metav1.NewMicroTime(t0)}, &struct{ T metav1.MicroTime }{metav1.NewMicroTime(t0.Add(time.Nanosecond))}},
		{&struct{ T metav1.MicroTime }{metav1.NewMicroTime(t0)}, &struct{ T metav1.MicroTime }{metav1.NewMicroTime(t0.Add(time.Microsecond))}},
		{&struct{ A [2]float64 }{[2]float64{1, math.NaN()}}, &struct{ A [2]float64 }{[2]float64{1, math.NaN()}}},
	}
	for i, pair := range others {
		want := serialEqual.DeepEqual(pair[0], pair[1])
		if got := serialDeepEqual(pair[0], pair[1]); got != want {
			t.Errorf("case %d (%#v): serialDeepEqual = %v, serialEqual %v", i, pair, got, want)
		}
	}
	// The same value compared with itself: the walk's same-address
	// shortcut, NaN and all.
	nan := &struct{ A [2]float64 }{[2]float64{1, math.NaN()}}
	if got, want := serialDeepEqual(nan, nan), serialEqual.DeepEqual(nan, nan); got != want {
		t.Errorf("a NaN array with itself: serialDeepEqual = %v, serialEqual %v", got, want)
	}
}
