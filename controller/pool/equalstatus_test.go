package pool

import (
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/patch"
)

// A status that differs only in condition transition times is not written
// again; any other difference is.
func TestEqualStatusIgnoresOnlyTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	base := func() *v1alpha1.BootcNodePoolStatus {
		return &v1alpha1.BootcNodePoolStatus{
			Nodes: 3, Summary: "1/3 updated",
			Slots:      []v1alpha1.Slot{{Node: "a", Image: "img", Since: t0}},
			Conditions: []metav1.Condition{{Type: "UpToDate", Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "1/3 updated", LastTransitionTime: t0}},
		}
	}
	tests := []struct {
		name   string
		change func(*v1alpha1.BootcNodePoolStatus)
		equal  bool
	}{
		{"identical", func(*v1alpha1.BootcNodePoolStatus) {}, true},
		{"transition time only", func(s *v1alpha1.BootcNodePoolStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(time.Hour))
		}, true},
		{"slot removed", func(s *v1alpha1.BootcNodePoolStatus) { s.Slots = nil }, false},
		{"conditions removed", func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions = nil }, false},
		{"condition message", func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions[0].Message = "2/3 updated" }, false},
		{"condition added", func(s *v1alpha1.BootcNodePoolStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Halted"})
		}, false},
		{"slot since", func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[0].Since = metav1.NewTime(t0.Add(time.Second)) }, false},
		{"summary", func(s *v1alpha1.BootcNodePoolStatus) { s.Summary = "2/3 updated" }, false},
		{"nil and empty lists", func(s *v1alpha1.BootcNodePoolStatus) { s.Phases = []v1alpha1.PhaseCount{} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := base(), base()
			tt.change(b)
			if got := equalStatus(a, b); got != tt.equal {
				t.Errorf("equalStatus = %v, want %v", got, tt.equal)
			}
			if a.Conditions[0].LastTransitionTime != t0 {
				t.Errorf("equalStatus changed its argument")
			}
		})
	}
}

// equalStatus compares these types field by field: a field added to one
// of them must be added there too, and here.
func TestEqualStatusFields(t *testing.T) {
	want := map[reflect.Type][]string{
		reflect.TypeFor[v1alpha1.BootcNodePoolStatus](): {"ObservedGeneration", "TargetImage", "TargetDigest", "ResolvedAt", "TargetSince",
			"DeployedDigests", "Nodes", "UpdatedNodes", "Phases", "Slots", "Failures", "Halt", "LastHalt", "Summary", "Conditions"},
		reflect.TypeFor[v1alpha1.Slot]():        {"Node", "Image", "Since", "UID", "Down"},
		reflect.TypeFor[v1alpha1.NodeFailure](): {"Node", "Image", "Reason", "Message", "Time"},
		reflect.TypeFor[v1alpha1.HaltRecord]():  {"Image", "Since", "Failures"},
		reflect.TypeFor[v1alpha1.DigestCount](): {"Digest", "Nodes"},
		reflect.TypeFor[v1alpha1.PhaseCount]():  {"Phase", "Nodes"},
	}
	for typ, fields := range want {
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%v has fields %v; equalStatus compares %v: compare the new ones there", typ, got, fields)
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[v1alpha1.DigestCount](), reflect.TypeFor[v1alpha1.PhaseCount]()} {
		for i := range typ.NumField() {
			if k := typ.Field(i).Type.Kind(); k != reflect.String && k != reflect.Int32 {
				t.Errorf("%v.%s is a %v: equalStatus compares the type with ==", typ, typ.Field(i).Name, k)
			}
		}
	}
}

// equalStatus says what patch.EqualIgnoringTransitions (apiequality.Semantic)
// says, over statuses that differ in one field or in none, or only in
// representation (nil or empty lists, time zones, monotonic readings).
func TestEqualStatusAsSemantic(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }
	ptr := func(m metav1.Time) *metav1.Time { return &m }
	failure := func(n string) v1alpha1.NodeFailure {
		return v1alpha1.NodeFailure{Node: n, Image: "img", Reason: "R", Message: "m", Time: at(time.Minute)}
	}
	base := func() *v1alpha1.BootcNodePoolStatus {
		return &v1alpha1.BootcNodePoolStatus{
			ObservedGeneration: 2, TargetImage: "img", TargetDigest: "sha256:1", ResolvedAt: ptr(at(0)), TargetSince: ptr(at(time.Second)),
			DeployedDigests: []v1alpha1.DigestCount{{Digest: "sha256:0", Nodes: 2}, {Digest: "sha256:1", Nodes: 1}},
			Nodes:           3, UpdatedNodes: 1,
			Phases:   []v1alpha1.PhaseCount{{Phase: "Ready", Nodes: 2}, {Phase: "Draining", Nodes: 1}},
			Slots:    []v1alpha1.Slot{{Node: "a", Image: "img", Since: at(2 * time.Second), UID: "u", Down: true}, {Node: "b", Image: "img", Since: at(3 * time.Second)}},
			Failures: []v1alpha1.NodeFailure{failure("c")},
			Halt:     &v1alpha1.HaltRecord{Image: "img", Since: at(time.Hour), Failures: []v1alpha1.NodeFailure{failure("c")}},
			LastHalt: &v1alpha1.HaltRecord{Image: "old", Since: at(2 * time.Hour)},
			Summary:  "1/3 updated",
			Conditions: []metav1.Condition{{Type: "UpToDate", Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "1/3 updated",
				LastTransitionTime: at(0)}},
		}
	}
	berlin := time.FixedZone("CET", 3600)
	changes := map[string]func(*v1alpha1.BootcNodePoolStatus){
		"none":               func(*v1alpha1.BootcNodePoolStatus) {},
		"observedGeneration": func(s *v1alpha1.BootcNodePoolStatus) { s.ObservedGeneration++ },
		"targetImage":        func(s *v1alpha1.BootcNodePoolStatus) { s.TargetImage = "x" },
		"targetDigest":       func(s *v1alpha1.BootcNodePoolStatus) { s.TargetDigest = "x" },
		"resolvedAt nil":     func(s *v1alpha1.BootcNodePoolStatus) { s.ResolvedAt = nil },
		"resolvedAt later":   func(s *v1alpha1.BootcNodePoolStatus) { s.ResolvedAt = ptr(at(time.Nanosecond)) },
		"resolvedAt zone":    func(s *v1alpha1.BootcNodePoolStatus) { s.ResolvedAt = ptr(metav1.NewTime(s.ResolvedAt.In(berlin))) },
		"targetSince nil":    func(s *v1alpha1.BootcNodePoolStatus) { s.TargetSince = nil },
		"targetSince mono":   func(s *v1alpha1.BootcNodePoolStatus) { s.TargetSince = ptr(metav1.NewTime(s.TargetSince.Round(0))) },
		"digests empty":      func(s *v1alpha1.BootcNodePoolStatus) { s.DeployedDigests = []v1alpha1.DigestCount{} },
		"digest count":       func(s *v1alpha1.BootcNodePoolStatus) { s.DeployedDigests[1].Nodes++ },
		"nodes":              func(s *v1alpha1.BootcNodePoolStatus) { s.Nodes++ },
		"updatedNodes":       func(s *v1alpha1.BootcNodePoolStatus) { s.UpdatedNodes++ },
		"phase":              func(s *v1alpha1.BootcNodePoolStatus) { s.Phases[0].Phase = "X" },
		"phases nil":         func(s *v1alpha1.BootcNodePoolStatus) { s.Phases = nil },
		"slot node":          func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[1].Node = "z" },
		"slot image":         func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[1].Image = "z" },
		"slot since":         func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[1].Since = at(time.Hour) },
		"slot since zone":    func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[0].Since = metav1.NewTime(s.Slots[0].Since.In(berlin)) },
		"slot uid":           func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[1].UID = "z" },
		"slot down":          func(s *v1alpha1.BootcNodePoolStatus) { s.Slots[0].Down = false },
		"slot dropped":       func(s *v1alpha1.BootcNodePoolStatus) { s.Slots = s.Slots[:1] },
		"failures empty":     func(s *v1alpha1.BootcNodePoolStatus) { s.Failures = []v1alpha1.NodeFailure{} },
		"failure message":    func(s *v1alpha1.BootcNodePoolStatus) { s.Failures[0].Message = "z" },
		"failure reason":     func(s *v1alpha1.BootcNodePoolStatus) { s.Failures[0].Reason = "z" },
		"failure time":       func(s *v1alpha1.BootcNodePoolStatus) { s.Failures[0].Time = at(0) },
		"halt nil":           func(s *v1alpha1.BootcNodePoolStatus) { s.Halt = nil },
		"halt image":         func(s *v1alpha1.BootcNodePoolStatus) { s.Halt.Image = "z" },
		"halt since":         func(s *v1alpha1.BootcNodePoolStatus) { s.Halt.Since = at(0) },
		"halt failures":      func(s *v1alpha1.BootcNodePoolStatus) { s.Halt.Failures = nil },
		"lastHalt failures":  func(s *v1alpha1.BootcNodePoolStatus) { s.LastHalt.Failures = []v1alpha1.NodeFailure{} },
		"lastHalt image":     func(s *v1alpha1.BootcNodePoolStatus) { s.LastHalt.Image = "z" },
		"summary":            func(s *v1alpha1.BootcNodePoolStatus) { s.Summary = "z" },
		"condition reason":   func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions[0].Reason = "z" },
		"condition time":     func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions[0].LastTransitionTime = at(time.Hour) },
		"conditions empty":   func(s *v1alpha1.BootcNodePoolStatus) { s.Conditions = []metav1.Condition{} },
		"conditions appended": func(s *v1alpha1.BootcNodePoolStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "Halted"})
		},
	}
	semantic := func(a, b *v1alpha1.BootcNodePoolStatus) bool {
		return patch.EqualIgnoringTransitions(a, b, func(s *v1alpha1.BootcNodePoolStatus) *[]metav1.Condition { return &s.Conditions })
	}
	for name, change := range changes {
		a, b := base(), base()
		change(b)
		want := semantic(a, b)
		if got := equalStatus(a, b); got != want {
			t.Errorf("%s: equalStatus = %v, Semantic says %v", name, got, want)
		}
		if got := equalStatus(b, a); got != want {
			t.Errorf("%s (swapped): equalStatus = %v, Semantic says %v", name, got, want)
		}
	}
	if empty := (&v1alpha1.BootcNodePoolStatus{}); !equalStatus(empty, &v1alpha1.BootcNodePoolStatus{}) {
		t.Errorf("two empty statuses differ")
	}
}
