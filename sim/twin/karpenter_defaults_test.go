package twin

import (
	"reflect"
	"testing"

	"github.com/bootroll/bootroll/sim/scenario"
)

// TestNodePoolDefaults checks that a scenario NodePool that leaves the
// disruption settings out gets Karpenter's defaults (reference
// karpenter.md: WhenEmptyOrUnderutilized, consolidateAfter 0s, expireAfter
// 720h, budgets [{nodes: 10%}]), and that tuned settings come through.
func TestNodePoolDefaults(t *testing.T) {
	const doc = `name: t
limit: 1h
images: [{name: v1, ref: "r.example/os:v1", size: 1Gi}]
karpenter:
  nodeClasses: [{name: default, bootImage: v1}]
  nodePools:
    - {name: plain}
    - {name: tuned, consolidationPolicy: WhenEmpty, consolidateAfter: Never, expireAfter: 2h, budgets: [{nodes: "100%"}]}
`
	sc, err := scenario.Parse("t.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []map[string]any{
		{"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s", "expireAfter": "720h0m0s", "budgets": []any{map[string]any{"nodes": "10%"}}},
		{"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never", "expireAfter": "2h0m0s", "budgets": []any{map[string]any{"nodes": "100%"}}},
	} {
		u := nodePoolObject(sc.Karpenter.NodePools[i])
		spec := u.Object["spec"].(map[string]any)
		d := spec["disruption"].(map[string]any)
		tmpl := spec["template"].(map[string]any)["spec"].(map[string]any)
		got := map[string]any{"consolidationPolicy": d["consolidationPolicy"], "consolidateAfter": d["consolidateAfter"], "expireAfter": tmpl["expireAfter"], "budgets": d["budgets"]}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("NodePool %s: got %v, want %v", u.GetName(), got, want)
		}
	}
}
