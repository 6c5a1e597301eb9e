package main

import (
	"reflect"
	"slices"
	"testing"

	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/scenario"
)

// TestControllerTestOnlyCoversEveryField turns on each bootroll.testOnly
// setting of the scenario schema alone: it must set the rollout.TestOnly
// field of the same name and nothing else, or be one of the daemon's
// settings; and every rollout.TestOnly field must be reachable, so a
// control's broken mode is never dropped on the way to the controller.
func TestControllerTestOnlyCoversEveryField(t *testing.T) {
	st := reflect.TypeFor[scenario.TestOnly]()
	reached := map[string]bool{}
	for i := range st.NumField() {
		f := st.Field(i)
		var in scenario.TestOnly
		reflect.ValueOf(&in).Elem().Field(i).SetBool(true)
		names := testOnlyNames(in)
		if len(names) != 1 {
			t.Fatalf("%s: testOnlyNames = %v, want one name", f.Name, names)
		}
		back, err := parseTestOnly(names[0])
		if err != nil || back != in {
			t.Errorf("%s: parseTestOnly(%q) = %+v, %v; want %+v", f.Name, names[0], back, err, in)
		}
		got, daemon := controllerTestOnly(in)
		if slices.Contains(daemonTestOnly, names[0]) {
			if got != (rollout.TestOnly{}) || !slices.Equal(daemon, names) {
				t.Errorf("%s: a daemon setting gave %+v and daemon %v", f.Name, got, daemon)
			}
			continue
		}
		var want rollout.TestOnly
		w := reflect.ValueOf(&want).Elem().FieldByName(f.Name)
		if !w.IsValid() {
			t.Errorf("%s: no rollout.TestOnly field of that name and not a daemon setting", f.Name)
			continue
		}
		w.SetBool(true)
		if got != want || len(daemon) > 0 {
			t.Errorf("%s: got %+v, daemon %v; want %+v", f.Name, got, daemon, want)
		}
		reached[f.Name] = true
	}
	rt := reflect.TypeFor[rollout.TestOnly]()
	for i := range rt.NumField() {
		if !reached[rt.Field(i).Name] {
			t.Errorf("rollout.TestOnly.%s: no scenario setting reaches it", rt.Field(i).Name)
		}
	}
}

func TestParseTestOnlyRejectsUnknownNames(t *testing.T) {
	if _, err := parseTestOnly("ignoreSlotLimit,noSuchMode"); err == nil {
		t.Fatal("parseTestOnly accepted noSuchMode")
	}
	got, err := parseTestOnly(" ignoreSlotLimit , skipUncordon,")
	if want := (scenario.TestOnly{IgnoreSlotLimit: true, SkipUncordon: true}); err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
}

func TestTestOnlySkip(t *testing.T) {
	for _, tc := range []struct {
		t                 scenario.TestOnly
		extCtl, extDaemon bool
		skip              bool
	}{
		{scenario.TestOnly{IgnoreSlotLimit: true}, false, false, false},
		{scenario.TestOnly{IgnoreSlotLimit: true}, true, false, true},
		{scenario.TestOnly{IgnoreSlotLimit: true}, false, true, false},
		{scenario.TestOnly{ForgetLastReboot: true}, false, false, false},
		{scenario.TestOnly{ForgetLastReboot: true}, true, false, false},
		{scenario.TestOnly{ForgetLastReboot: true}, false, true, true},
		{scenario.TestOnly{NoStagingReserve: true}, false, false, true},
		{scenario.TestOnly{NoStagingReserve: true, SkipUncordon: true}, false, false, true},
	} {
		if got := testOnlySkip(tc.t, tc.extCtl, tc.extDaemon) != ""; got != tc.skip {
			t.Errorf("testOnlySkip(%+v, %v, %v) skips = %v, want %v", tc.t, tc.extCtl, tc.extDaemon, got, tc.skip)
		}
	}
	if got := controllerNames(scenario.TestOnly{ForgetLastReboot: true, SkipUncordon: true, IgnoreSlotLimit: true}); !slices.Equal(got, []string{"ignoreSlotLimit", "skipUncordon"}) {
		t.Errorf("controllerNames = %v", got)
	}
}
