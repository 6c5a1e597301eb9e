package nodedaemon

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// sameReport compares by hand; every field the daemon reports must be in
// it. The test changes each field of a full status in turn, found by
// reflection, so a field added to the API and not to sameReport fails here.
func TestSameReportCoversEveryField(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	host := func(img string) *v1alpha1.HostImage {
		return &v1alpha1.HostImage{Image: img, Digest: "sha256:" + img, Version: "42", Timestamp: &t0}
	}
	base := v1alpha1.BootcNodeStatus{
		Booted: host("a"), Staged: host("b"), RollbackImage: host("c"),
		Daemon: v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonIdle, BootID: "b1", LastError: "e", StageAttempts: 1,
			LastAttempt: &t0, LastReboot: &v1alpha1.RebootRecord{Image: "i", BootID: "b0", Rollback: true, At: t0}, ObservedGeneration: 3},
	}
	if !sameReport(base, *base.DeepCopy()) {
		t.Fatal("a status differs from its copy")
	}
	// The same instant in another location is the same report.
	other := base.DeepCopy()
	other.Daemon.LastAttempt = &metav1.Time{Time: t0.In(time.FixedZone("x", 3600))}
	if !sameReport(base, *other) {
		t.Error("the same instant in another zone compared different")
	}
	// PinnedImages belong to the prefetch manager's report.
	other = base.DeepCopy()
	other.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "s"}}
	if !sameReport(base, *other) {
		t.Error("pinned image progress made the daemon's report differ")
	}
	// So does the runtime's condition.
	other = base.DeepCopy()
	other.Daemon.Conditions = []metav1.Condition{{Type: "PrefetchAvailable", Status: metav1.ConditionFalse}}
	if !sameReport(base, *other) {
		t.Error("the PrefetchAvailable condition made the daemon's report differ")
	}

	var paths []string
	check := func(path string, change func(s *v1alpha1.BootcNodeStatus)) {
		paths = append(paths, path)
		s := base.DeepCopy()
		change(s)
		if sameReport(base, *s) {
			t.Errorf("changing %s is not seen by sameReport", path)
		}
	}
	// Every field of each struct, by reflection.
	structs := []struct {
		name string
		typ  reflect.Type
		get  func(s *v1alpha1.BootcNodeStatus) reflect.Value
	}{
		{"booted", reflect.TypeFor[v1alpha1.HostImage](), func(s *v1alpha1.BootcNodeStatus) reflect.Value { return reflect.ValueOf(s.Booted).Elem() }},
		{"staged", reflect.TypeFor[v1alpha1.HostImage](), func(s *v1alpha1.BootcNodeStatus) reflect.Value { return reflect.ValueOf(s.Staged).Elem() }},
		{"rollbackImage", reflect.TypeFor[v1alpha1.HostImage](), func(s *v1alpha1.BootcNodeStatus) reflect.Value { return reflect.ValueOf(s.RollbackImage).Elem() }},
		{"daemon", reflect.TypeFor[v1alpha1.DaemonStatus](), func(s *v1alpha1.BootcNodeStatus) reflect.Value { return reflect.ValueOf(&s.Daemon).Elem() }},
		{"daemon.lastReboot", reflect.TypeFor[v1alpha1.RebootRecord](), func(s *v1alpha1.BootcNodeStatus) reflect.Value { return reflect.ValueOf(s.Daemon.LastReboot).Elem() }},
	}
	for _, st := range structs {
		for i := range st.typ.NumField() {
			f := st.typ.Field(i)
			if st.name == "daemon" && (f.Name == "PinnedImages" || f.Name == "Conditions") {
				continue // the prefetch's report (Daemon.prefetch, setAvailability)
			}
			check(st.name+"."+f.Name, func(s *v1alpha1.BootcNodeStatus) {
				fv := st.get(s).Field(i)
				switch {
				case fv.Kind() == reflect.String:
					fv.SetString(fv.String() + "-changed")
				case fv.Kind() == reflect.Bool:
					fv.SetBool(!fv.Bool())
				case fv.CanInt():
					fv.SetInt(fv.Int() + 1)
				case fv.Type() == reflect.TypeFor[metav1.Time]():
					fv.Set(reflect.ValueOf(metav1.NewTime(t0.Add(time.Second))))
				case fv.Type() == reflect.TypeFor[*metav1.Time]():
					later := metav1.NewTime(t0.Add(time.Second))
					fv.Set(reflect.ValueOf(&later))
				case fv.Kind() == reflect.Pointer:
					fv.Set(reflect.Zero(fv.Type())) // set to nil
				default:
					t.Fatalf("%s.%s: the test does not know how to change a %s; teach it, and sameReport", st.name, f.Name, fv.Type())
				}
			})
		}
	}
	for _, key := range []string{"booted", "staged", "rollbackImage"} {
		check(key+" nil", func(s *v1alpha1.BootcNodeStatus) {
			reflect.ValueOf(s).Elem().FieldByName(map[string]string{"booted": "Booted", "staged": "Staged", "rollbackImage": "RollbackImage"}[key]).Set(reflect.Zero(reflect.TypeFor[*v1alpha1.HostImage]()))
		})
	}
	if len(paths) < 15 {
		t.Errorf("only %d fields checked: %v", len(paths), paths)
	}
}

// StatusPatch must send every daemon-owned object whole: each key of the
// API type present, with the value the type encodes to, null where the
// type leaves it out. The reference here is the type's own encoding with
// the missing keys filled in as null.
func TestStatusPatchSendsObjectsWhole(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	full := v1alpha1.BootcNodeStatus{
		Booted:        &v1alpha1.HostImage{Image: "a", Digest: "sha256:a", Version: "42", Timestamp: &t0},
		Staged:        &v1alpha1.HostImage{Image: "b"},
		RollbackImage: &v1alpha1.HostImage{Digest: "sha256:c", Timestamp: &t0},
		Daemon: v1alpha1.DaemonStatus{Phase: v1alpha1.DaemonError, BootID: "b1", LastError: "e", StageAttempts: 2,
			LastAttempt: &t0, LastReboot: &v1alpha1.RebootRecord{Image: "i", BootID: "b0", Rollback: true, At: t0}, ObservedGeneration: 3,
			PinnedImages: []v1alpha1.PinnedSetProgress{{Name: "not-sent"}},
			Conditions:   []metav1.Condition{{Type: "not-sent"}}},
		Phase: v1alpha1.PhaseFailed,
	}
	whole := func(v any) any {
		if reflect.ValueOf(v).IsNil() {
			return nil
		}
		b, _ := json.Marshal(v)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		typ := reflect.TypeOf(v).Elem()
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if _, ok := m[name]; !ok && name != "pinnedImages" && name != "conditions" {
				m[name] = nil
			}
		}
		// Written by the prefetch's own patches, not StatusPatch.
		delete(m, "pinnedImages")
		delete(m, "conditions")
		return m
	}
	for _, s := range []v1alpha1.BootcNodeStatus{full, {}} {
		got, err := StatusPatch(s)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]map[string]any
		if err := json.Unmarshal(got, &doc); err != nil {
			t.Fatal(err)
		}
		d := whole(&s.Daemon).(map[string]any)
		if s.Daemon.LastReboot != nil {
			d["lastReboot"] = whole(s.Daemon.LastReboot)
		}
		want := map[string]any{"booted": whole(s.Booted), "staged": whole(s.Staged), "rollbackImage": whole(s.RollbackImage), "daemon": d}
		wb, _ := json.Marshal(map[string]any{"status": want})
		var w map[string]map[string]any
		_ = json.Unmarshal(wb, &w)
		if !reflect.DeepEqual(doc, w) {
			t.Errorf("StatusPatch =\n%s\nwant\n%s", got, wb)
		}
	}
}
