package apiserver

import (
	"encoding/json"
	"strconv"
	"testing"
)

// fieldsV1Of encodes what json.Marshal encodes from the maps
// manageAnnotations built.
func TestFieldsV1OfAsMarshal(t *testing.T) {
	for _, keys := range [][]string{
		{unschedulableField},
		{"bootroll.dev/slot"},
		{"b", "a", unschedulableField, "karpenter.sh/do-not-disrupt"},
		{"x<y>&z", "quote\"d", "back\\slash", "tab\tkey", "é", "\xff", unschedulableField},
	} {
		set := map[string]any{}
		annotations := map[string]struct{}{}
		for _, k := range keys {
			if k == unschedulableField {
				set["f:spec"] = map[string]any{"f:unschedulable": struct{}{}}
				continue
			}
			annotations["f:"+k] = struct{}{}
		}
		if len(annotations) > 0 {
			set["f:metadata"] = map[string]any{"f:annotations": annotations}
		}
		want, _ := json.Marshal(set)
		if got := fieldsV1Of(keys); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", keys, got, want)
		}
	}
}

// parseRV agrees with strconv.ParseUint(rv, 10, 64).
func TestParseRVAsParseUint(t *testing.T) {
	for _, rv := range []string{"", "0", "7", "1234", "007", "12a", "-1", "+1", "1_000", " 1", "9999999999999999999",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "1234567890123456789"} {
		want, err := strconv.ParseUint(rv, 10, 64)
		if got, ok := parseRV(rv); ok != (err == nil) || (ok && got != want) {
			t.Errorf("parseRV(%q) = %d, %v; ParseUint %d, %v", rv, got, ok, want, err)
		}
	}
}
