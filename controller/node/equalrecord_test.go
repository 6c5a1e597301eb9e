package node

import (
	"reflect"
	"slices"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// equalRollout compares RolloutStatus field by field: a field added to it
// must be compared there too, and changed here.
func TestEqualRolloutFields(t *testing.T) {
	want := []string{"TargetImage", "PhaseSince", "PriorUnschedulable", "Cordoned", "AddedAnnotations", "AddedNodeClaimAnnotations",
		"ProtectUntil", "SlotGrantedAt", "DrainStartedAt", "RetryAfter", "Failures", "FailedImage", "RollbackTo", "Reason", "Message"}
	typ := reflect.TypeFor[v1alpha1.RolloutStatus]()
	var got []string
	for i := range typ.NumField() {
		got = append(got, typ.Field(i).Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("RolloutStatus has fields %v; equalRollout compares %v: compare the new ones there", got, want)
	}
}

// equalRollout says what apiequality.Semantic says, over records that
// differ in one field or in none, or only in representation (nil or empty
// lists, time zones, monotonic readings).
func TestEqualRolloutAsSemantic(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	wall := time.Now() // with a monotonic reading
	base := func() *v1alpha1.RolloutStatus {
		return &v1alpha1.RolloutStatus{
			TargetImage: "img@sha256:aa", PhaseSince: at(0), PriorUnschedulable: ptr.To(false), Cordoned: true,
			AddedAnnotations: []string{"a", "b"}, AddedNodeClaimAnnotations: []string{"c"},
			ProtectUntil: at(time.Hour), SlotGrantedAt: at(time.Second), DrainStartedAt: at(2 * time.Second), RetryAfter: ptr.To(metav1.NewTime(wall)),
			Failures: 2, FailedImage: "img@sha256:ff", RollbackTo: "img@sha256:00", Reason: "DrainBlocked", Message: "m",
		}
	}
	berlin := time.FixedZone("CET", 3600)
	changes := map[string]func(*v1alpha1.RolloutStatus){
		"none":                          func(*v1alpha1.RolloutStatus) {},
		"targetImage":                   func(r *v1alpha1.RolloutStatus) { r.TargetImage = "x" },
		"phaseSince nil":                func(r *v1alpha1.RolloutStatus) { r.PhaseSince = nil },
		"phaseSince later":              func(r *v1alpha1.RolloutStatus) { r.PhaseSince = at(time.Nanosecond) },
		"phaseSince zone":               func(r *v1alpha1.RolloutStatus) { r.PhaseSince = ptr.To(metav1.NewTime(t0.In(berlin))) },
		"phaseSince zero":               func(r *v1alpha1.RolloutStatus) { r.PhaseSince = &metav1.Time{} },
		"priorUnschedulable nil":        func(r *v1alpha1.RolloutStatus) { r.PriorUnschedulable = nil },
		"priorUnschedulable true":       func(r *v1alpha1.RolloutStatus) { r.PriorUnschedulable = ptr.To(true) },
		"priorUnschedulable same":       func(r *v1alpha1.RolloutStatus) { r.PriorUnschedulable = ptr.To(false) },
		"cordoned":                      func(r *v1alpha1.RolloutStatus) { r.Cordoned = false },
		"addedAnnotations nil":          func(r *v1alpha1.RolloutStatus) { r.AddedAnnotations = nil },
		"addedAnnotations shorter":      func(r *v1alpha1.RolloutStatus) { r.AddedAnnotations = r.AddedAnnotations[:1] },
		"addedAnnotations other":        func(r *v1alpha1.RolloutStatus) { r.AddedAnnotations[1] = "z" },
		"addedAnnotations copied":       func(r *v1alpha1.RolloutStatus) { r.AddedAnnotations = slices.Clone(r.AddedAnnotations) },
		"addedNodeClaimAnnotations nil": func(r *v1alpha1.RolloutStatus) { r.AddedNodeClaimAnnotations = nil },
		"addedNodeClaimAnnotations more": func(r *v1alpha1.RolloutStatus) {
			r.AddedNodeClaimAnnotations = append(r.AddedNodeClaimAnnotations, "d")
		},
		"protectUntil nil":    func(r *v1alpha1.RolloutStatus) { r.ProtectUntil = nil },
		"protectUntil later":  func(r *v1alpha1.RolloutStatus) { r.ProtectUntil = at(2 * time.Hour) },
		"slotGrantedAt nil":   func(r *v1alpha1.RolloutStatus) { r.SlotGrantedAt = nil },
		"slotGrantedAt later": func(r *v1alpha1.RolloutStatus) { r.SlotGrantedAt = at(time.Millisecond) },
		"drainStartedAt nil":  func(r *v1alpha1.RolloutStatus) { r.DrainStartedAt = nil },
		"drainStartedAt same": func(r *v1alpha1.RolloutStatus) { r.DrainStartedAt = at(2 * time.Second) },
		"retryAfter nil":      func(r *v1alpha1.RolloutStatus) { r.RetryAfter = nil },
		"retryAfter later":    func(r *v1alpha1.RolloutStatus) { r.RetryAfter = at(time.Hour) },
		"retryAfter mono":     func(r *v1alpha1.RolloutStatus) { r.RetryAfter = ptr.To(metav1.NewTime(wall.Round(0))) },
		"failures":            func(r *v1alpha1.RolloutStatus) { r.Failures++ },
		"failedImage":         func(r *v1alpha1.RolloutStatus) { r.FailedImage = "" },
		"rollbackTo":          func(r *v1alpha1.RolloutStatus) { r.RollbackTo = "x" },
		"reason":              func(r *v1alpha1.RolloutStatus) { r.Reason = "x" },
		"message":             func(r *v1alpha1.RolloutStatus) { r.Message = "" },
	}
	for name, change := range changes {
		a, b := base(), base()
		change(b)
		want := apiequality.Semantic.DeepEqual(*a, *b)
		if got := equalRollout(a, b); got != want {
			t.Errorf("%s: equalRollout = %v, Semantic says %v", name, got, want)
		}
		if got := equalRollout(b, a); got != want {
			t.Errorf("%s (swapped): equalRollout = %v, Semantic says %v", name, got, want)
		}
	}
	empty := &v1alpha1.RolloutStatus{}
	if !equalRollout(empty, &v1alpha1.RolloutStatus{AddedAnnotations: []string{}}) {
		t.Errorf("a nil and an empty list differ")
	}
}
