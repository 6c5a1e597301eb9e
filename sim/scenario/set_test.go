package scenario

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

func TestParseWithSets(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		get  func(*Scenario) any
		want any
	}{
		{"existing key", []string{"limit=2h"},
			func(s *Scenario) any { return s.Limit }, 2 * time.Hour},
		{"absent optional field", []string{"bootroll.pools[0].maxUnavailable=20%"},
			func(s *Scenario) any { return s.Bootroll.Pools[0].MaxUnavailable }, ptr(intstr.FromString("20%"))},
		{"absent section", []string{"bootroll.testOnly.ignoreSlotLimit=true"},
			func(s *Scenario) any { return s.Bootroll.TestOnly.IgnoreSlotLimit }, true},
		{"absent pointer section", []string{"karpenter.version=v1.14"},
			func(s *Scenario) any { return s.Karpenter.Version }, KarpenterVersion("v1.14")},
		{"list item field", []string{"nodeGroups[0].count=5"},
			func(s *Scenario) any { return s.NodeGroups[0].Count }, 5},
		{"quoted map key", []string{`nodeGroups[0].labels["node-role.kubernetes.io/worker"]=x`},
			func(s *Scenario) any { return s.NodeGroups[0].Labels }, map[string]string{"pool": "workers", "node-role.kubernetes.io/worker": "x"}},
		{"new map key", []string{"expect.finalImages.workers=v1"},
			func(s *Scenario) any { return s.Expect.FinalImages }, map[string]string{"workers": "v1"}},
		{"flow list value", []string{"expect.invariants=[converges, no-churn]"},
			func(s *Scenario) any { return s.Expect.Invariants }, []Invariant{InvConverges, InvNoChurn}},
		{"whole list item", []string{"workloads[0]={name: api, replicas: 3}"},
			func(s *Scenario) any { return s.Workloads[0] }, Workload{Name: "api", Replicas: 3}},
		{"value with =", []string{"description=a=b"},
			func(s *Scenario) any { return s.Description }, "a=b"},
		{"duration", []string{"bootroll.pools[0].drainTimeout=90s"},
			func(s *Scenario) any { return s.Bootroll.Pools[0].DrainTimeout }, &metav1.Duration{Duration: 90 * time.Second}},
		{"API duration in a sub-struct", []string{"bootroll.pools[0].karpenter.postUpdateProtection=5m"},
			func(s *Scenario) any { return s.Bootroll.Pools[0].Karpenter.PostUpdateProtection }, &metav1.Duration{Duration: 5 * time.Minute}},
		{"API enum in a sub-struct", []string{"bootroll.pools[0].failurePolicy.action=Rollback"},
			func(s *Scenario) any { return s.Bootroll.Pools[0].FailurePolicy.Action }, v1alpha1.FailureRollback},
		{"distribution field", []string{"host.reboot={dist: fixed, value: 1m}", "host.reboot.value=2m"},
			func(s *Scenario) any { return s.Host.Reboot }, Distribution{Dist: DistFixed, Value: 2 * time.Minute}},
		{"last set wins", []string{"seed=3", "seed=4"},
			func(s *Scenario) any { return s.Seed }, uint64(4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseWithSets("t.yaml", []byte(poolDoc), tt.sets)
			if err != nil {
				t.Fatalf("ParseWithSets: %v", err)
			}
			if got := tt.get(s); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestParseWithSetsErrors(t *testing.T) {
	tests := []struct {
		name string
		sets []string
		want []string
	}{
		{"unknown field", []string{"bootroll.pools[0].maxUnavail=1"}, []string{
			`t.yaml: --set bootroll.pools[0].maxUnavail=1: unknown field "maxUnavail" in bootroll.pools[0] (did you mean "maxUnavailable"?)`,
		}},
		{"unknown top-level field", []string{"seeds=1"}, []string{
			`t.yaml: --set seeds=1: unknown field "seeds" in the scenario (did you mean "seed"?)`,
		}},
		{"index out of range", []string{"bootroll.pools[1].image=v1"}, []string{
			`t.yaml: --set bootroll.pools[1].image=v1: index 1 out of range: bootroll.pools has 1 items`,
		}},
		{"index into absent list", []string{"events[0].at=1m"}, []string{
			`t.yaml: --set events[0].at=1m: index 0 out of range: events has 0 items`,
		}},
		{"index into a mapping", []string{"bootroll[0]=x"}, []string{
			`t.yaml: --set bootroll[0]=x: bootroll is not a list`,
		}},
		{"field of a scalar", []string{"limit.hours=1"}, []string{
			`t.yaml: --set limit.hours=1: limit is a single value and has no field "hours"`,
		}},
		{"field of a shorthand", []string{"host.reboot=90s", "host.reboot.value=1m"}, []string{
			`t.yaml: --set host.reboot.value=1m: host.reboot is string "90s" in the document, not a mapping; set it whole`,
		}},
		{"bad path", []string{"bootroll..pools=1", "a[x]=1", "seed"}, []string{
			`t.yaml: --set bootroll..pools=1: invalid path "bootroll..pools": misplaced . at offset 8`,
			`t.yaml: --set a[x]=1: invalid path "a[x]": bad list index "x"`,
			`t.yaml: --set seed: want path=value`,
		}},
		{"value breaks a field", []string{"bootroll.pools[0].maxUnavailable=150%"}, []string{
			`t.yaml:11: bootroll.pools[0].maxUnavailable: invalid value string "150%": want an integer >= 0 or a percentage from 0% to 100% (from --set bootroll.pools[0].maxUnavailable=150%)`,
		}},
		{"value breaks an API field", []string{"bootroll.pools[0].karpenter.postUpdateProtection=soon", "bootroll.pools[0].failurePolicy.action=Stop"}, []string{
			`t.yaml:11: bootroll.pools[0].karpenter.postUpdateProtection: invalid duration "soon": want a Go duration such as 90s, 10m or 1h30m (from --set bootroll.pools[0].karpenter.postUpdateProtection=soon)`,
			`t.yaml:11: bootroll.pools[0].failurePolicy.action: invalid value "Stop": want one of Halt, Rollback (from --set bootroll.pools[0].failurePolicy.action=Stop)`,
		}},
		{"value breaks an existing field", []string{"nodeGroups[0].count=-2"}, []string{
			`t.yaml:6: nodeGroups[0].count: invalid value -2: must be at least 0 (from --set nodeGroups[0].count=-2)`,
		}},
		{"value breaks a reference", []string{"bootroll.pools[0].image=v7"}, []string{
			`t.yaml:13: bootroll.pools[0].image: unknown image "v7" (known: v1) (did you mean "v1"?) (from --set bootroll.pools[0].image=v7)`,
		}},
		{"value of the wrong shape", []string{"bootroll.pools=3"}, []string{
			`t.yaml:10: bootroll.pools: want a list, got integer 3 (from --set bootroll.pools=3)`,
		}},
		{"new item misses fields", []string{"workloads[0]={name: api}"}, []string{
			`t.yaml:8: workloads[0].replicas: required field is missing (from --set workloads[0]={name: api})`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWithSets("t.yaml", []byte(poolDoc), tt.sets)
			if err == nil {
				t.Fatalf("ParseWithSets succeeded, want errors")
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestApplySets(t *testing.T) {
	doc := base + "# the pools\nbootroll:\n  pools:\n    - {name: p, nodeSelector: {a: b}, image: v1}\n"
	got, err := ApplySets("t.yaml", []byte(doc), []string{"bootroll.pools[0].maxUnavailable=20%", "seed=9"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the pools", "maxUnavailable: 20%", "seed: 9"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("ApplySets output lacks %q:\n%s", want, got)
		}
	}
	s, err := Parse("t.yaml", got)
	if err != nil {
		t.Fatalf("Parse(ApplySets output): %v", err)
	}
	if s.Seed != 9 || s.Bootroll.Pools[0].MaxUnavailable.String() != "20%" {
		t.Errorf("reparsed seed %d, maxUnavailable %v", s.Seed, s.Bootroll.Pools[0].MaxUnavailable)
	}
	if _, err := ApplySets("t.yaml", []byte(doc), []string{"bootroll.pools[3].image=v1"}); err == nil ||
		err.Error() != `t.yaml: --set bootroll.pools[3].image=v1: index 3 out of range: bootroll.pools has 1 items` {
		t.Errorf("out-of-range set: got %v", err)
	}
}

func TestPaths(t *testing.T) {
	for _, p := range []string{
		"name",
		"bootroll.pools[0].maxUnavailable",
		`nodeGroups[12].labels["node-role.kubernetes.io/worker"]`,
		`expect.finalImages.workers`,
		`a[0][1].b`,
	} {
		segs, err := parsePath(p)
		if err != nil {
			t.Errorf("parsePath(%q): %v", p, err)
			continue
		}
		if got := formatPath(segs); got != p {
			t.Errorf("formatPath(parsePath(%q)) = %q", p, got)
		}
	}
	for _, p := range []string{"", ".a", "a.", "a[", "a[-1]", "a[01]", `a["x]`, "a[0]b", "a b"} {
		if _, err := parsePath(p); err == nil {
			t.Errorf("parsePath(%q) succeeded", p)
		}
	}
	if got := parentPath(`a.b["c.d"]`); got != "a.b" {
		t.Errorf("parentPath = %q", got)
	}
}
