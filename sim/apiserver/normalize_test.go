package apiserver_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A real API server stores times at the precision it serialises them
// with; so does the twin's, for Create and Update as for patches: a client
// never reads back a sub-second metav1.Time or a sub-microsecond MicroTime.
func TestCreateAndUpdateStoreSerialisedTimes(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	at := t0.Add(90*time.Second + 123456789*time.Nanosecond)
	sec, micro := at.Truncate(time.Second), at.Truncate(time.Microsecond)

	p := pod("default", "p1", "n1")
	p.Status.StartTime = &metav1.Time{Time: at}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: at}}}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Time: &metav1.Time{Time: at}}}
	mustCreate(t, c, p)
	got := get(t, c, pod("default", "p1", ""))
	if !got.Status.StartTime.Time.Equal(sec) || !got.Status.Conditions[0].LastTransitionTime.Time.Equal(sec) || !got.ManagedFields[0].Time.Time.Equal(sec) {
		t.Errorf("created pod times = %v, %v, %v; want %v", got.Status.StartTime, got.Status.Conditions[0].LastTransitionTime, got.ManagedFields[0].Time, sec)
	}
	// Create writes the stored object back into the caller's, as a real
	// client decodes the server's answer into it.
	if !p.Status.StartTime.Time.Equal(sec) {
		t.Errorf("the created object's start time = %v, want %v", p.Status.StartTime, sec)
	}

	// A status Update, as the pool reconciler writes its slot table.
	mustCreate(t, c, &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v1alpha1.BootcNodePoolSpec{Image: "registry.example/os:1"}})
	pool := get(t, c, &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}})
	pool.Status.Slots = []v1alpha1.Slot{{Node: "n1", Image: "img", Since: metav1.Time{Time: at}}}
	if err := c.Status().Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool = get(t, c, &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}})
	if len(pool.Status.Slots) != 1 || !pool.Status.Slots[0].Since.Time.Equal(sec) {
		t.Errorf("slots after a status Update = %+v, want since %v", pool.Status.Slots, sec)
	}

	// MicroTime keeps microseconds (an Event's eventTime, a Lease's renewTime).
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e1"}, EventTime: metav1.MicroTime{Time: at}}
	mustCreate(t, c, ev)
	gotEv := get(t, c, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e1"}})
	if !gotEv.EventTime.Time.Equal(micro) {
		t.Errorf("event time = %v, want %v", gotEv.EventTime, micro)
	}
}
