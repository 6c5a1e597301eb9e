package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/scenario"
)

// daemonTestOnly are the scenario's testOnly settings that break the node
// daemon rather than the controller (nodedaemon.TestOnly and the staging
// reserve); hostModeTestOnly are those of them host mode (sim/hostmode)
// plays, from the scenario it is given.
var (
	daemonTestOnly   = []string{"forgetLastReboot", "noStagingReserve"}
	hostModeTestOnly = []string{"forgetLastReboot"}
)

// controllerNames lists the settings of t that break the controller, by
// their scenario names, sorted (the testonly-controller's --test-only).
func controllerNames(t scenario.TestOnly) []string {
	var out []string
	for _, n := range testOnlyNames(t) {
		if !slices.Contains(daemonTestOnly, n) {
			out = append(out, n)
		}
	}
	return out
}

// testOnlyNames lists the settings t turns on by their scenario names
// (bootroll.testOnly.<name>), sorted.
func testOnlyNames(t scenario.TestOnly) []string {
	data, err := json.Marshal(t)
	if err != nil {
		panic(err) // a struct of bools always marshals
	}
	var m map[string]bool
	if err := json.Unmarshal(data, &m); err != nil {
		panic(err)
	}
	var out []string
	for k, on := range m {
		if on {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// parseTestOnly reads a comma-separated list of bootroll.testOnly setting
// names (as the scenario schema spells them) into scenario.TestOnly.
func parseTestOnly(list string) (scenario.TestOnly, error) {
	var t scenario.TestOnly
	m := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			m[name] = true
		}
	}
	data, err := json.Marshal(m)
	if err != nil {
		return t, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, fmt.Errorf("--test-only %q: %w (the names of bootroll.testOnly in the scenario schema)", list, err)
	}
	return t, nil
}

// controllerTestOnly maps the scenario's settings to the controller's
// rollout.TestOnly by field name, as sim/twin's testOnly does field by
// field; the daemon's settings are returned by name, for the caller to
// refuse (TestControllerTestOnlyCoversEveryField keeps the two in step).
func controllerTestOnly(t scenario.TestOnly) (rollout.TestOnly, []string) {
	var out rollout.TestOnly
	var daemon []string
	src := reflect.ValueOf(t)
	dst := reflect.ValueOf(&out).Elem()
	for i := range src.NumField() {
		f := src.Type().Field(i)
		if !src.Field(i).Bool() {
			continue
		}
		if d := dst.FieldByName(f.Name); d.IsValid() {
			d.SetBool(true)
			continue
		}
		daemon = append(daemon, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	return out, daemon
}
