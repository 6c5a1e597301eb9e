package apiserver

import (
	"encoding/json"
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
