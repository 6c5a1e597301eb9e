package twin

import (
	"reflect"
	"testing"

	"github.com/bootroll/bootroll/sim/scenario"
)

// TestTestOnlyMapsEverySetting sets each published testOnly switch alone
// and checks that it turns on exactly one rollout.TestOnly field, of
// the same name (the daemons' two switches turn on none: configureDaemon
// applies them), so no switch is published and silently ignored.
func TestTestOnlyMapsEverySetting(t *testing.T) {
	daemonOnly := map[string]bool{"NoStagingReserve": true, "ForgetLastReboot": true}
	st := reflect.TypeOf(scenario.TestOnly{})
	if got := reflect.TypeOf(testOnly(scenario.TestOnly{})).NumField(); got != st.NumField()-len(daemonOnly) {
		t.Errorf("rollout.TestOnly has %d fields, scenario.TestOnly %d controller switches: one side has a switch the other lacks", got, st.NumField()-len(daemonOnly))
	}
	for i := 0; i < st.NumField(); i++ {
		name := st.Field(i).Name
		var in scenario.TestOnly
		reflect.ValueOf(&in).Elem().Field(i).SetBool(true)
		out := reflect.ValueOf(testOnly(in))
		var on []string
		for j := 0; j < out.NumField(); j++ {
			if out.Field(j).Bool() {
				on = append(on, out.Type().Field(j).Name)
			}
		}
		switch {
		case daemonOnly[name]:
			if len(on) != 0 {
				t.Errorf("daemon switch %s turned on controller settings %v", name, on)
			}
		case len(on) != 1 || on[0] != name:
			t.Errorf("switch %s turned on controller settings %v, want [%s]", name, on, name)
		}
	}
}
