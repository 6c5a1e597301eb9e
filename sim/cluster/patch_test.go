package cluster

import (
	"encoding/json"
	"testing"
)

// The hand-written patches are byte for byte what json.Marshal gives for
// their maps.
func TestPatchesAsJSONMarshal(t *testing.T) {
	strs := []string{"", "workers-1", "a\"b", `back\slash`, "<&>", "tab\there", "ünï", "12345"}
	for _, s := range strs {
		want, err := json.Marshal(map[string]any{"spec": map[string]any{"nodeName": s}})
		if err != nil {
			t.Fatal(err)
		}
		if got := bindPatch(s); string(got) != string(want) {
			t.Errorf("bindPatch(%q) = %s, want %s", s, got, want)
		}
	}
	for _, rest := range [][]string{nil, {}, {"a"}, {"example.com/x", "b<c>"}, strs} {
		for _, rv := range strs {
			want, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": rv}})
			if err != nil {
				t.Fatal(err)
			}
			if got := finalizerPatch(rest, rv); string(got) != string(want) {
				t.Errorf("finalizerPatch(%q, %q) = %s, want %s", rest, rv, got, want)
			}
		}
	}
}
