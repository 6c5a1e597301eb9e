package node

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// recordOf copies the rollout record deeply, as its DeepCopyInto does:
// every field set, the copy is equal and shares no pointer or list with
// the record (a shared one would change with the record's edits, and
// patchStatus would see no change to write). A field of a kind the test
// does not know fails it: recordOf must copy the new field too.
func TestRecordOfCopiesDeeply(t *testing.T) {
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "7", UID: "u"}}
	bn.Status.Phase = v1alpha1.PhaseDraining
	at := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	ro := reflect.ValueOf(&bn.Status.Rollout).Elem()
	for i := range ro.NumField() {
		f, name := ro.Field(i), ro.Type().Field(i).Name
		switch {
		case f.Type() == reflect.TypeFor[*metav1.Time]():
			at = metav1.NewTime(at.Add(time.Minute))
			v := at
			f.Set(reflect.ValueOf(&v))
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Bool:
			f.Set(reflect.New(f.Type().Elem()))
			f.Elem().SetBool(true)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{name + "-a", name + "-b"}))
		case f.Kind() == reflect.String:
			f.SetString(name)
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Int32:
			f.SetInt(int64(i + 1))
		default:
			t.Fatalf("RolloutStatus.%s is a %s: copy it in recordOf, and set it here", name, f.Type())
		}
	}
	want := bn.DeepCopy()
	got := recordOf(bn)
	if got.Name != "n" || got.ResourceVersion != "7" || got.Status.Phase != v1alpha1.PhaseDraining {
		t.Errorf("recordOf keeps name %q, resourceVersion %q, phase %q", got.Name, got.ResourceVersion, got.Status.Phase)
	}
	if !reflect.DeepEqual(got.Status.Rollout, want.Status.Rollout) {
		t.Fatalf("recordOf's rollout record\n%+v\ndiffers from the record's\n%+v", got.Status.Rollout, want.Status.Rollout)
	}
	gv := reflect.ValueOf(&got.Status.Rollout).Elem()
	for i := range ro.NumField() {
		a, b := ro.Field(i), gv.Field(i)
		if (a.Kind() == reflect.Pointer || a.Kind() == reflect.Slice) && a.Pointer() == b.Pointer() {
			t.Errorf("RolloutStatus.%s is shared with the record", ro.Type().Field(i).Name)
		}
	}
	// Edits of the record through its pointers leave the copy alone.
	bn.Status.Rollout.PhaseSince.Time = time.Time{}
	*bn.Status.Rollout.PriorUnschedulable = false
	bn.Status.Rollout.AddedAnnotations[0] = "changed"
	if !reflect.DeepEqual(got.Status.Rollout, want.Status.Rollout) {
		t.Error("an edit of the record changed recordOf's copy")
	}
	// Nil stays nil, and an empty list empty, as DeepCopyInto has them.
	empty := &v1alpha1.BootcNode{Status: v1alpha1.BootcNodeStatus{Rollout: v1alpha1.RolloutStatus{AddedAnnotations: []string{}}}}
	if r := recordOf(empty).Status.Rollout; !reflect.DeepEqual(r, *empty.Status.Rollout.DeepCopy()) || r.AddedAnnotations == nil || r.AddedNodeClaimAnnotations != nil || r.PhaseSince != nil {
		t.Errorf("recordOf of an empty record gives %+v", r)
	}
}

// recordCopy fits Go's 768-byte size class with the 8-byte malloc header
// of an object over 512 bytes that holds pointers (see its comment): a
// field added to BootcNode that takes it past 760 bytes moves every
// recordOf into the 896-byte class; then it can lose a time, or the test
// can go.
func TestRecordCopySize(t *testing.T) {
	if n := unsafe.Sizeof(recordCopy{}); n > 768-8 {
		t.Errorf("recordCopy is %d bytes, past Go's 768-byte size class with its malloc header", n)
	}
}
