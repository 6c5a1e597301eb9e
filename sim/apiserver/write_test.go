package apiserver_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
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

// NoEcho writes like any write but leaves the caller's object as it was;
// without it the caller's object becomes the stored one.
func TestNoEchoLeavesCallersObject(t *testing.T) {
	s, _ := newServer(t)
	c := s.AdminClient()
	mustCreate(t, c, pod("default", "p1", "n1"))
	mine := pod("default", "p1", "")
	mine.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(ctx, mine, apiserver.NoEcho); err != nil {
		t.Fatal(err)
	}
	if mine.ResourceVersion != "" || mine.Spec.NodeName != "" {
		t.Errorf("NoEcho update echoed: resourceVersion %q nodeName %q", mine.ResourceVersion, mine.Spec.NodeName)
	}
	if got := get(t, c, pod("default", "p1", "")); got.Status.Phase != corev1.PodRunning {
		t.Errorf("stored phase = %q, want Running", got.Status.Phase)
	}
	patched := pod("default", "p1", "")
	if err := c.Patch(ctx, patched, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`)), apiserver.NoEcho); err != nil {
		t.Fatal(err)
	}
	if patched.Labels != nil {
		t.Errorf("NoEcho patch echoed labels %v", patched.Labels)
	}
	echoed := pod("default", "p1", "")
	if err := c.Patch(ctx, echoed, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"c":"d"}}}`))); err != nil {
		t.Fatal(err)
	}
	if echoed.Labels["a"] != "b" || echoed.Labels["c"] != "d" || echoed.Spec.NodeName != "n1" {
		t.Errorf("a patch without NoEcho did not echo the stored pod: %+v", echoed.ObjectMeta)
	}
}

// A Create with NoEcho keeps the caller's object as the stored one: it
// gets the server's identity (UID, resourceVersion, creationTimestamp),
// and what is read back equals it.
func TestNoEchoCreateKeepsTheObject(t *testing.T) {
	s, _ := newServer(t)
	c := s.AdminClient()
	mine := pod("default", "p1", "n1")
	if err := c.Create(ctx, mine, apiserver.NoEcho); err != nil {
		t.Fatal(err)
	}
	if mine.UID == "" || mine.ResourceVersion == "" || mine.CreationTimestamp.IsZero() {
		t.Fatalf("NoEcho create left the identity unset: uid %q resourceVersion %q created %v", mine.UID, mine.ResourceVersion, mine.CreationTimestamp)
	}
	got := get(t, c, pod("default", "p1", ""))
	if !equality.Semantic.DeepEqual(got, mine) {
		t.Errorf("stored pod differs from the object created:\n got %+v\nwant %+v", got, mine)
	}
	echoed := pod("default", "p2", "n1")
	if err := c.Create(ctx, echoed); err != nil {
		t.Fatal(err)
	}
	if echoed.UID == "" || echoed.UID == mine.UID {
		t.Errorf("a create without NoEcho echoed uid %q", echoed.UID)
	}
}

// A Get with Shared reads what a Get reads, with the stored object's
// maps and slices; without it the caller's copy shares none.
func TestSharedGetReadsTheStoredFields(t *testing.T) {
	s, _ := newServer(t)
	c := s.AdminClient()
	p := pod("default", "p1", "n1")
	p.Labels = map[string]string{"app": "a"}
	p.Finalizers = []string{"x/y"}
	mustCreate(t, c, p)
	var plain, shared corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &plain); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &shared, apiserver.Shared); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&plain, &shared) {
		t.Errorf("a Shared get differs:\n got %+v\nwant %+v", shared, plain)
	}
	var again corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), &again, apiserver.Shared); err != nil {
		t.Fatal(err)
	}
	if &again.Finalizers[0] != &shared.Finalizers[0] {
		t.Errorf("two Shared gets do not share the stored finalizers")
	}
	if &plain.Finalizers[0] == &shared.Finalizers[0] {
		t.Errorf("a plain get shares the stored finalizers")
	}
}

// A status write stores an object of the server's own, never the
// caller's: with NoEcho the caller's object stays as it was, for a kind
// with a status copier (Pod) as for one without (Service), and what is
// stored has the written status with the stored metadata and spec.
func TestNoEchoStatusWriteStoresNoCallersObject(t *testing.T) {
	s, _ := newServer(t)
	c := s.AdminClient()
	meta := metav1.ObjectMeta{Namespace: "default", Name: "s1", Labels: map[string]string{"a": "b"}}
	mustCreate(t, c, pod("default", "p1", "n1"), &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.1"}})
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Time{Time: t0}}}
	for _, mine := range []client.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s1"}, Status: corev1.ServiceStatus{Conditions: ready}},
	} {
		before := mine.DeepCopyObject()
		if err := c.Status().Update(ctx, mine, apiserver.NoEcho); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(mine, before) {
			t.Errorf("a NoEcho status update changed the caller's %T: %+v", mine, mine)
		}
	}
	if p := get(t, c, pod("default", "p1", "")); p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != "n1" {
		t.Errorf("stored pod: phase %q node %q, want Running on n1", p.Status.Phase, p.Spec.NodeName)
	}
	svc := get(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s1"}})
	if len(svc.Status.Conditions) != 1 || svc.Labels["a"] != "b" || svc.Spec.ClusterIP != "10.0.0.1" {
		t.Errorf("stored service: labels %v clusterIP %q conditions %v", svc.Labels, svc.Spec.ClusterIP, svc.Status.Conditions)
	}
}
