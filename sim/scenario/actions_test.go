package scenario

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// actionsBase is poolDoc plus a second image and a Karpenter section;
// appended events start at line 19 ("events:" is line 18).
var actionsBase = strings.Replace(poolDoc, "images:\n  - {name: v1, ref: \"r.example/os:v1\", size: 1Gi}\n",
	"images:\n  - {name: v1, ref: \"r.example/os:v1\", size: 1Gi}\n  - {name: v2, ref: \"r.example/os:v2\", size: 1Gi}\n", 1) +
	"karpenter:\n  nodeClasses: [{name: default, bootImage: v1}]\n  nodePools: [{name: kp}]\nevents:\n"

func TestParseActions(t *testing.T) {
	doc := actionsBase + `  - {at: 1m, deletePool: {pool: workers}}
  - at: 2m
    setPool:
      pool: workers
      image: v2
      nodeSelector: {pool: other}
      maxUnavailable: 50%
      maxStaging: 0
      paused: false
      failurePolicy: {action: Rollback, maxFailures: 2}
      windows: []
      drainTimeout: 5m
      healthTimeout: 20m
  - {at: 3m, setPool: {pool: workers, windows: [{start: "01:00", duration: 2h}]}}
  - {at: 4m, relabelNode: {node: workers-1, set: {pool: other}, remove: [zone]}}
  - {at: 5m, deleteNode: {node: workers-2}}
  - {at: 6m, deleteBootcNode: {node: workers-0}}
  - {at: 7m, cordonNode: {node: kp-7}}
  - {at: 8m, uncordonNode: {node: workers-0}}
  - {at: 9m, setPDB: {workload: web, minAvailable: 1}}
  - {at: 10m, deletePDB: {workload: web}}
  - {at: 11m, karpenterCRDs: {installed: false}}
  - {at: 12m, createPool: {name: more, nodeSelector: {pool: more}, image: v2, maxUnavailable: 2}}
  - {at: 13m, setPool: {pool: more, paused: true}}
faults:
  - {at: 1m, powerCycle: {node: workers-0}}
  - {at: 2m, longReboot: {group: workers, count: 2, duration: 1h}}
  - {at: 3m, bootFailure: {node: workers-1, mode: CrashLoop}}
  - {at: 4m, registryOutage: {for: 10m}}
  - {at: 5m, slowPulls: {for: 10m}}
  - {at: 6m, diskFill: {node: workers-2, size: 10Gi, for: 5m}}
  - {at: 7m, diskFill: {group: workers, size: 1Gi}}
`
	s, err := Parse("t.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"deletePool", s.Events[0].DeletePool, &DeletePool{Pool: "workers"}},
		{"setPool all", s.Events[1].SetPool, &SetPool{
			Pool: "workers", Image: "v2", NodeSelector: map[string]string{"pool": "other"},
			RolloutSpec: v1alpha1.RolloutSpec{MaxUnavailable: ptr(intstr.FromString("50%")), MaxStaging: ptr(int32(0))}, Paused: ptr(false),
			FailurePolicy: &v1alpha1.FailurePolicy{Action: "Rollback", MaxFailures: ptr(int32(2))},
			Windows:       &[]v1alpha1.MaintenanceWindow{}, DrainTimeout: &metav1.Duration{Duration: 5 * time.Minute}, HealthTimeout: &metav1.Duration{Duration: 20 * time.Minute},
		}},
		{"setPool windows only", s.Events[2].SetPool, &SetPool{Pool: "workers", Windows: &[]v1alpha1.MaintenanceWindow{{Start: "01:00", Duration: metav1.Duration{Duration: 2 * time.Hour}}}}},
		{"relabelNode", s.Events[3].RelabelNode, &RelabelNode{Node: "workers-1", Set: map[string]string{"pool": "other"}, Remove: []string{"zone"}}},
		{"deleteNode", s.Events[4].DeleteNode, &NodeRef{Node: "workers-2"}},
		{"deleteBootcNode", s.Events[5].DeleteBootcNode, &NodeRef{Node: "workers-0"}},
		{"cordonNode Karpenter-launched", s.Events[6].CordonNode, &NodeRef{Node: "kp-7"}},
		{"uncordonNode", s.Events[7].UncordonNode, &NodeRef{Node: "workers-0"}},
		{"setPDB", s.Events[8].SetPDB, &SetPDB{Workload: "web", MinAvailable: ptr(intstr.FromInt32(1))}},
		{"deletePDB", s.Events[9].DeletePDB, &DeletePDB{Workload: "web"}},
		{"karpenterCRDs", s.Events[10].KarpenterCRDs, &KarpenterCRDs{Installed: false}},
		{"createPool", s.Events[11].CreatePool, &Pool{Name: "more", NodeSelector: map[string]string{"pool": "more"}, Image: "v2", RolloutSpec: v1alpha1.RolloutSpec{MaxUnavailable: ptr(intstr.FromInt32(2))}}},
		{"setPool of a created pool", s.Events[12].SetPool.Pool, "more"},
		{"powerCycle default", s.Faults[0].PowerCycle, &PowerCycle{Target: Target{Node: "workers-0", Count: 1}, OffFor: 30 * time.Second}},
		{"longReboot", s.Faults[1].LongReboot, &LongReboot{Target: Target{Group: "workers", Count: 2}, Duration: time.Hour}},
		{"bootFailure", s.Faults[2].BootFailure, &BootFailureFault{Target: Target{Node: "workers-1", Count: 1}, Mode: BootCrashLoop}},
		{"registryOutage", s.Faults[3].RegistryOutage, &RegistryOutage{For: 10 * time.Minute}},
		{"slowPulls default", s.Faults[4].SlowPulls, &SlowPulls{For: 10 * time.Minute, Factor: 10}},
		{"diskFill for", s.Faults[5].DiskFill, &DiskFill{Target: Target{Node: "workers-2", Count: 1}, Size: resource.MustParse("10Gi"), For: ptr(5 * time.Minute)}},
		{"diskFill for good", s.Faults[6].DiskFill.For, (*time.Duration)(nil)},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
}

func TestParseActionErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"unknown pool", actionsBase + "  - {at: 1m, deletePool: {pool: wrk}}\n  - {at: 2m, setPool: {pool: wrk, paused: true}}\n", []string{
			`t.yaml:19: events[0].deletePool.pool: unknown pool "wrk" (known: workers)`,
			`t.yaml:20: events[1].setPool.pool: unknown pool "wrk" (known: workers)`,
		}},
		{"setPool fields", actionsBase + "  - {at: 1m, setPool: {pool: workers, image: v3, nodeSelector: {}, drainTimeout: 0s}}\n  - {at: 2m, setPool: {pool: workers}}\n  - {at: 3m, setPool: {pool: workers, windows: [{start: \"01:00\", duration: 25h}]}}\n", []string{
			`t.yaml:19: events[0].setPool.image: unknown image "v3" (known: v1, v2) (did you mean "v1"?)`,
			`t.yaml:19: events[0].setPool.nodeSelector: must not be empty`,
			`t.yaml:19: events[0].setPool.drainTimeout: invalid value 0s: must be more than 0s`,
			`t.yaml:20: events[1].setPool: nothing to change: give at least one field besides pool`,
			`t.yaml:21: events[2].setPool.windows[0].duration: invalid value 25h0m0s: must be more than 0s and at most 24h`,
		}},
		{"unknown nodes", actionsBase + "  - {at: 1m, deleteNode: {node: workers-3}}\n  - {at: 2m, cordonNode: {node: nope-0}}\n  - {at: 3m, uncordonNode: {node: workers}}\n  - {at: 4m, deleteBootcNode: {node: kp-x}}\n", []string{
			`t.yaml:19: events[0].deleteNode.node: unknown node "workers-3": node names are <group>-<i> for a group's nodes, counting nodes added by events (any i for nodes Karpenter launches)`,
			`t.yaml:20: events[1].cordonNode.node: unknown node "nope-0": node names are <group>-<i> for a group's nodes, counting nodes added by events (any i for nodes Karpenter launches)`,
			`t.yaml:21: events[2].uncordonNode.node: unknown node "workers": node names are <group>-<i> for a group's nodes, counting nodes added by events (any i for nodes Karpenter launches)`,
			`t.yaml:22: events[3].deleteBootcNode.node: unknown node "kp-x": node names are <group>-<i> for a group's nodes, counting nodes added by events (any i for nodes Karpenter launches)`,
		}},
		{"relabel", actionsBase + "  - {at: 1m, relabelNode: {node: workers-9}}\n  - {at: 2m, relabelNode: {node: workers-0, set: {pool: x, \"a b\": y}, remove: [pool]}}\n", []string{
			`t.yaml:19: events[0].relabelNode.node: unknown node "workers-9": node names are <group>-<i> for a group's nodes, counting nodes added by events (any i for nodes Karpenter launches)`,
			`t.yaml:19: events[0].relabelNode: nothing to change: give set or remove`,
			`t.yaml:20: events[1].relabelNode.set["a b"]: invalid label key "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			`t.yaml:20: events[1].relabelNode.remove[0]: label "pool" is both set and removed`,
		}},
		{"annotate", actionsBase + "  - {at: 1m, annotateNode: {node: workers-0}}\n  - {at: 2m, annotateNode: {node: workers-0, set: {karpenter.sh/do-not-disrupt: \"true\"}, remove: [karpenter.sh/do-not-disrupt, \"a b\"]}}\n", []string{
			`t.yaml:19: events[0].annotateNode: nothing to change: give set or remove`,
			`t.yaml:20: events[1].annotateNode.remove[0]: annotation "karpenter.sh/do-not-disrupt" is both set and removed`,
			`t.yaml:20: events[1].annotateNode.remove[1]: invalid annotation key "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		}},
		{"createPool", actionsBase + "  - {at: 1m, createPool: {name: more, nodeSelector: {}, image: v9}}\n  - {at: 2m, createPool: {name: Bad_Name, nodeSelector: {pool: x}, image: v1}}\n", []string{
			`t.yaml:19: events[0].createPool.nodeSelector: must not be empty`,
			`t.yaml:19: events[0].createPool.image: unknown image "v9" (known: v1, v2) (did you mean "v1"?)`,
			`t.yaml:20: events[1].createPool.name: invalid value "Bad_Name": want a DNS label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit`,
		}},
		{"pdb", actionsBase + "  - {at: 1m, setPDB: {workload: api, minAvailable: 1}}\n  - {at: 2m, deletePDB: {workload: api}}\n  - {at: 3m, setPDB: {workload: web}}\n", []string{
			`t.yaml:19: events[0].setPDB.workload: unknown workload "api" (known: web)`,
			`t.yaml:20: events[1].deletePDB.workload: unknown workload "api" (known: web)`,
			`t.yaml:21: events[2].setPDB: one of maxUnavailable, minAvailable is required`,
		}},
		{"karpenterCRDs without karpenter", poolDoc + "events:\n  - {at: 1m, karpenterCRDs: {installed: true}}\n  - {at: 2m, karpenterCRDs: {}}\n", []string{
			`t.yaml:15: events[0].karpenterCRDs.installed: Karpenter's CRDs need a karpenter section`,
			`t.yaml:16: events[1].karpenterCRDs.installed: required field is missing`,
		}},
		{"faults", poolDoc + "faults:\n  - {at: 1m, powerCycle: {node: workers-5}}\n  - {at: 2m, longReboot: {group: wrk}}\n  - {at: 3m, bootFailure: {node: workers-0, mode: Sometimes}}\n  - {at: 4m, registryOutage: {for: 0s}}\n  - {at: 5m, slowPulls: {for: 1m, factor: 1}}\n  - {at: 6m, diskFill: {group: workers, count: 4, size: 0}}\n", []string{
			`t.yaml:15: faults[0].powerCycle.node: unknown node "workers-5": node names are <group>-<i> for a group's nodes, counting nodes added by events`,
			`t.yaml:16: faults[1].longReboot.group: unknown node group "wrk" (known: workers)`,
			`t.yaml:17: faults[2].bootFailure.mode: invalid value "Sometimes": want one of FallBack, NeverReady, Flapping, NetworkNotReady, CrashLoop`,
			`t.yaml:18: faults[3].registryOutage.for: invalid value 0s: must be more than 0s`,
			`t.yaml:19: faults[4].slowPulls.factor: invalid value 1: must be at least 2`,
			`t.yaml:20: faults[5].diskFill.count: invalid value 4: group workers has at most 3 nodes`,
			`t.yaml:20: faults[5].diskFill.size: invalid value 0: must be more than 0`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.doc))
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error %T is not Errors: %v", err, err)
			}
			if got, want := err.Error(), strings.Join(tt.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
