package scenario

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

func TestLoadFull(t *testing.T) {
	s, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	tagDigest := "sha256:357b7f271486bf652a4c08594fe0a6f5b5f28f641220f4e0b8fabe30cd360569" // sha256("registry.example/os:v2")
	tests := []struct {
		name      string
		got, want any
	}{
		{"file", s.File, "testdata/full.yaml"},
		{"seed", s.Seed, uint64(7)},
		{"limit", s.Limit, 6 * time.Hour},
		{"start", s.Start, time.Date(2026, 1, 6, 2, 0, 0, 0, time.UTC)},
		{"digest from digest ref", s.Images[0].Digest, "sha256:" + strings.Repeat("1", 64)},
		{"digest from tag ref", s.Images[1].Digest, tagDigest},
		{"explicit digest", s.Images[2].Digest, "sha256:" + strings.Repeat("2", 64)},
		{"bootFailure default", s.Images[0].BootFailure, BootFailure("FallBack")},
		{"bootFailure", s.Images[2].BootFailure, BootFailure("NeverReady")},
		{"size", s.Images[1].Size.String(), "1300Mi"},
		{"pullBandwidth", s.Host.PullBandwidth.String(), "50Mi"},
		{"reboot", s.Host.Reboot, Distribution{Dist: DistNormal, Mean: 2 * time.Minute, Stddev: 30 * time.Second, Min: 30 * time.Second}},
		{"stageOverhead shorthand", s.Host.StageOverhead, Distribution{Dist: DistFixed, Value: 45 * time.Second}},
		{"daemonStartup default", s.Host.DaemonStartup, Distribution{Dist: DistFixed, Value: 5 * time.Second}},
		{"label with dots", s.NodeGroups[0].Labels["node-role.kubernetes.io/worker"], ""},
		{"pods default", ptr(s.NodeGroups[0].Capacity["pods"]).String(), "110"},
		{"pods", ptr(s.NodeGroups[1].Capacity["pods"]).String(), "200"},
		{"integer cpu", ptr(s.NodeGroups[1].Capacity["cpu"]).String(), "8"},
		{"imageFsCapacity default", s.NodeGroups[0].ImageFsCapacity.String(), "100Gi"},
		{"taint", s.NodeGroups[1].Taints, []Taint{{Key: "bootroll.dev/os-not-ready", Effect: "NoSchedule"}}},
		{"group karpenter", s.NodeGroups[1].Karpenter, &NodeGroupKarpenter{NodePool: "default"}},
		{"pdb int", s.Workloads[0].PDB, &PDB{MaxUnavailable: ptr(intstr.FromInt32(1))}},
		{"pdb percent", s.Workloads[1].PDB, &PDB{MinAvailable: ptr(intstr.FromString("66%"))}},
		{"pool", s.Bootroll.Pools[0], Pool{
			Name: "workers", NodeSelector: map[string]string{"pool": "workers"}, Image: "v2",
			RolloutSpec:  v1alpha1.RolloutSpec{MaxUnavailable: ptr(intstr.FromString("20%")), MaxStaging: ptr(int32(3))},
			DrainTimeout: &metav1.Duration{Duration: 10 * time.Minute}, HealthTimeout: &metav1.Duration{Duration: 15 * time.Minute},
			Windows:       []v1alpha1.MaintenanceWindow{{Days: []v1alpha1.Weekday{"Mon", "Tue"}, Start: "01:00", Duration: metav1.Duration{Duration: 4 * time.Hour}}},
			FailurePolicy: v1alpha1.FailurePolicy{Action: "Rollback", MaxFailures: ptr(int32(2))},
			Karpenter:     v1alpha1.KarpenterOptions{Protect: ptr(true), PostUpdateProtection: &metav1.Duration{Duration: 5 * time.Minute}},
		}},
		{"karpenter version", s.Karpenter.Version, KarpenterVersion("v1.14")},
		{"repairToleration default", s.Karpenter.RepairToleration, 10 * time.Minute},
		{"installCRDsAt", s.Karpenter.InstallCRDsAt, ptr(30 * time.Minute)},
		{"nodeClass default", s.Karpenter.NodePools[0].NodeClass, "default"},
		{"consolidateAfter Never", s.Karpenter.NodePools[0].ConsolidateAfter, NeverDuration{Never: true}},
		{"expireAfter default", s.Karpenter.NodePools[0].ExpireAfter, NeverDuration{Duration: 720 * time.Hour}},
		{"budget", s.Karpenter.NodePools[0].Budgets[1], Budget{Nodes: intstr.FromInt32(0), Schedule: "0 9 * * mon-fri", Duration: ptr(8 * time.Hour), Reasons: []DisruptionReason{"Drifted"}}},
		{"pinned", s.PinnedImageSets[0].Images[0].Size.String(), "200Mi"},
		{"event", s.Events[0], Event{At: 30 * time.Minute, SetPoolImage: &SetPoolImage{Pool: "workers", Image: "v2-bad"}}},
		{"pause default", s.Events[1].Pause, &Pause{Pool: "workers", Paused: true}},
		{"resume", s.Events[2].Pause, &Pause{Pool: "workers", Paused: false}},
		{"scale", s.Events[3].ScaleWorkload, &ScaleWorkload{Workload: "web", Replicas: 40}},
		{"restart", s.Faults[0], Fault{At: ptr(10 * time.Minute), ControllerRestart: &ControllerRestart{}}},
		{"window daemon crash", s.Faults[1], Fault{Window: &TimeRange{From: 5 * time.Minute, To: 20 * time.Minute}, DaemonCrash: &DaemonCrash{Target: Target{Group: "workers", Count: 2}, DownFor: 10 * time.Second}}},
		{"node crash", s.Faults[2].NodeCrash, &NodeCrash{Target: Target{Node: "workers-11", Count: 1}, DownFor: 3 * time.Minute}},
		{"restart downFor", s.Faults[3].ControllerRestart, &ControllerRestart{DownFor: 2 * time.Minute}},
		{"invariants", s.Expect.Invariants, []Invariant{InvMaxUnavailable, InvPDBRespected, InvConverges}},
		{"completesWithin", s.Expect.CompletesWithin, ptr(5 * time.Hour)},
		{"failedNodes", s.Expect.FailedNodes, map[string]CountRange{"workers": {Min: 1, Max: ptr(3)}}},
		{"halted", s.Expect.Halted, map[string]bool{"workers": false}},
		{"controls", len(s.NegativeControls), 2},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
}

// base is the smallest valid scenario; test cases append to it from line 5.
const base = `name: t
limit: 1h
images:
  - {name: v1, ref: "r.example/os:v1", size: 1Gi}
`

func TestParseDefaults(t *testing.T) {
	s, err := Parse("t.yaml", []byte(base))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"seed", s.Seed, uint64(1)},
		{"start", s.Start, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)},
		{"pullBandwidth", s.Host.PullBandwidth.Cmp(resource.MustParse("100Mi")), 0},
		{"stageOverhead", s.Host.StageOverhead, Distribution{Dist: DistFixed, Value: 20 * time.Second}},
		{"reboot", s.Host.Reboot, Distribution{Dist: DistUniform, Min: time.Minute, Max: 3 * time.Minute}},
		{"invariants", s.Expect.Invariants, AllInvariants},
		{"karpenter", s.Karpenter, (*Karpenter)(nil)},
		{"testOnly", s.Bootroll.TestOnly, TestOnly{}},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
}

const poolDoc = base + `nodeGroups:
  - {name: workers, count: 3, capacity: {cpu: 4, memory: 8Gi}, bootImage: v1, labels: {pool: workers}}
workloads:
  - {name: web, replicas: 2}
bootroll:
  pools:
    - name: workers
      nodeSelector: {pool: workers}
      image: v1
`

// poolDoc lines: 5 nodeGroups, 6 group, 7 workloads, 8 web, 9 bootroll,
// 10 pools, 11 name, 12 nodeSelector, 13 image; appended text starts at 14.

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"unknown top-level field", base + "limt: 2h\n", []string{
			`t.yaml:5: limt: unknown field "limt" (did you mean "limit"?)`,
		}},
		{"unknown nested field", poolDoc + "      maxUnavailble: 2\n", []string{
			`t.yaml:14: bootroll.pools[0].maxUnavailble: unknown field "maxUnavailble" (did you mean "maxUnavailable"?)`,
		}},
		{"wrong type int", base + "nodeGroups:\n  - {name: g, count: ten, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1}\n", []string{
			`t.yaml:6: nodeGroups[0].count: want an integer, got string "ten"`,
		}},
		{"wrong type string", base + "description: 5\n", []string{
			`t.yaml:5: description: want a string, got integer 5 (quote it to make it a string)`,
		}},
		{"wrong type list", base + "events: {at: 1m}\n", []string{
			`t.yaml:5: events: want a list, got a mapping`,
		}},
		{"negative count", base + "nodeGroups:\n  - {name: g, count: -1, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1}\n", []string{
			`t.yaml:6: nodeGroups[0].count: invalid value -1: must be at least 0`,
		}},
		{"percent over 100", poolDoc + "      maxUnavailable: 150%\n", []string{
			`t.yaml:14: bootroll.pools[0].maxUnavailable: invalid value string "150%": want an integer >= 0 or a percentage from 0% to 100%`,
		}},
		{"quoted count", poolDoc + "      maxUnavailable: \"2\"\n", []string{
			`t.yaml:14: bootroll.pools[0].maxUnavailable: invalid value string "2": want an integer >= 0 or a percentage from 0% to 100% (write a count without quotes: 2)`,
		}},
		{"bad duration", poolDoc + "      drainTimeout: 10 minutes\n", []string{
			`t.yaml:14: bootroll.pools[0].drainTimeout: invalid duration "10 minutes": want a Go duration such as 90s, 10m or 1h30m`,
		}},
		{"flat API field", poolDoc + "      maxStaging: -1\n", []string{
			`t.yaml:14: bootroll.pools[0].maxStaging: invalid value -1: must be at least 0`,
		}},
		{"bad API duration", poolDoc + "      karpenter: {postUpdateProtection: 5 minutes}\n", []string{
			`t.yaml:14: bootroll.pools[0].karpenter.postUpdateProtection: invalid duration "5 minutes": want a Go duration such as 90s, 10m or 1h30m`,
		}},
		{"bad API enum", poolDoc + "      failurePolicy: {action: Rolback}\n", []string{
			`t.yaml:14: bootroll.pools[0].failurePolicy.action: invalid value "Rolback": want one of Halt, Rollback (did you mean "Rollback"?)`,
		}},
		{"bad API rules", poolDoc + "      failurePolicy: {maxFailures: 0}\n      windows:\n        - {days: [Mon, Sunday], duration: 25h}\n", []string{
			`t.yaml:14: bootroll.pools[0].failurePolicy.maxFailures: invalid value 0: must be at least 1`,
			`t.yaml:16: bootroll.pools[0].windows[0].days[1]: invalid value "Sunday": want one of Mon, Tue, Wed, Thu, Fri, Sat, Sun (did you mean "Sun"?)`,
			`t.yaml:16: bootroll.pools[0].windows[0].start: required field is missing`,
		}},
		{"API pattern", poolDoc + "      windows:\n        - {start: \"25:00\", duration: 1h}\n", []string{
			`t.yaml:15: bootroll.pools[0].windows[0].start: invalid value "25:00": want a time of day, HH:MM`,
		}},
		{"API duration out of range", poolDoc + "      windows:\n        - {start: \"01:00\", duration: 25h}\n", []string{
			`t.yaml:15: bootroll.pools[0].windows[0].duration: invalid value 25h0m0s: must be more than 0s and at most 24h`,
		}},
		{"unquoted number duration", base + "events:\n  - at: 90\n    pause: {pool: x}\n", []string{
			`t.yaml:6: events[0].at: want a Go duration such as 90s, 10m or 1h30m, got integer 90`,
		}},
		{"negative duration", base + "events:\n  - at: -5m\n    addNodes: {group: g, count: 1}\n", []string{
			`t.yaml:6: events[0].at: invalid duration "-5m": must not be negative`,
		}},
		{"bad quantity", base + "host:\n  pullBandwidth: fast\n", []string{
			`t.yaml:6: host.pullBandwidth: invalid quantity "fast": want a Kubernetes quantity such as 1Gi, 1.5G or 500m`,
		}},
		{"bad enum", base + "host:\n  reboot: {dist: unifrom, min: 1m, max: 2m}\n", []string{
			`t.yaml:6: host.reboot.dist: invalid value "unifrom": want one of fixed, uniform, normal, lognormal (did you mean "uniform"?)`,
		}},
		{"min above max", base + "host:\n  reboot: {dist: uniform, min: 3m, max: 2m}\n", []string{
			`t.yaml:6: host.reboot.min: min 3m0s is more than max 2m0s`,
		}},
		{"missing and foreign dist params", base + "host:\n  reboot:\n    dist: normal\n    mean: 2m\n    max: 1m\n    value: 5s\n", []string{
			`t.yaml:6: host.reboot.stddev: required for a normal distribution`,
			`t.yaml:8: host.reboot.mean: mean 2m0s is outside [min, max]`,
			`t.yaml:10: host.reboot.value: value is not a parameter of a normal distribution (want mean, stddev, min, max)`,
		}},
		{"unknown image in pool", strings.Replace(poolDoc, "      image: v1\n", "      image: v9\n", 1), []string{
			`t.yaml:13: bootroll.pools[0].image: unknown image "v9" (known: v1) (did you mean "v1"?)`,
		}},
		{"unknown image in group", base + "nodeGroups:\n  - {name: g, count: 1, capacity: {cpu: 1, memory: 1Gi}, bootImage: v2}\n", []string{
			`t.yaml:6: nodeGroups[0].bootImage: unknown image "v2" (known: v1) (did you mean "v1"?)`,
		}},
		{"unknown names in events", poolDoc + "events:\n  - at: 1m\n    setPoolImage: {pool: wrk, image: v3}\n  - at: 2m\n    scaleWorkload: {workload: api, replicas: 1}\n  - at: 3m\n    removeNodes: {group: nope, count: 1}\n", []string{
			`t.yaml:16: events[0].setPoolImage.pool: unknown pool "wrk" (known: workers)`,
			`t.yaml:16: events[0].setPoolImage.image: unknown image "v3" (known: v1) (did you mean "v1"?)`,
			`t.yaml:18: events[1].scaleWorkload.workload: unknown workload "api" (known: web)`,
			`t.yaml:20: events[2].removeNodes.group: unknown node group "nope" (known: workers)`,
		}},
		{"node class image change without karpenter", poolDoc + "events:\n  - at: 1m\n    setNodeClassImage: {nodeClass: default, image: v7}\n", []string{
			`t.yaml:16: events[0].setNodeClassImage.nodeClass: unknown node class "default" (none are defined)`,
			`t.yaml:16: events[0].setNodeClassImage.image: unknown image "v7" (known: v1) (did you mean "v1"?)`,
		}},
		{"too many nodes in all", base + "nodeGroups:\n  - {name: a, count: 60000, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1}\n  - {name: b, count: 30000, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1}\nevents:\n  - at: 1m\n    addNodes: {group: b, count: 20000}\n", []string{
			`t.yaml:10: events[0].addNodes.count: with the nodes added up to here the run has 110000 nodes, more than the 100000 a run accepts`,
		}},
		{"too many pods in all", base + "nodeGroups:\n  - {name: a, count: 1, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1}\nworkloads:\n  - {name: x, replicas: 400000, requests: {cpu: 1m}}\n  - {name: y, replicas: 1, requests: {cpu: 1m}}\nevents:\n  - at: 1m\n    scaleWorkload: {workload: y, replicas: 100001}\n", []string{
			`t.yaml:9: workloads[1].replicas: the workloads have up to 500001 pods up to here (with scaleWorkload events), more than the 500000 a run accepts`,
		}},
		{"negative registration delay", base + "karpenter:\n  nodeClasses: [{name: d, bootImage: v1, registrationDelay: -5s}]\n", []string{
			`t.yaml:6: karpenter.nodeClasses[0].registrationDelay: invalid duration "-5s": must not be negative`,
		}},
		{"duplicate names", base + "  - {name: v1, ref: \"r.example/os:v2\", size: 1Gi}\n", []string{
			`t.yaml:5: images[1].name: duplicate name "v1" (also at line 4)`,
		}},
		{"at beyond limit", poolDoc + "events:\n  - at: 2h\n    pause: {pool: workers}\n", []string{
			`t.yaml:15: events[0].at: 2h0m0s is not before limit 1h0m0s`,
		}},
		{"window beyond limit", poolDoc + "faults:\n  - window: {from: 30m, to: 20m}\n    controllerRestart: {}\n  - window: {from: 10m, to: 2h}\n    nodeCrash: {node: workers-3}\n", []string{
			`t.yaml:15: faults[0].window.to: to 20m0s is not after from 30m0s`,
			`t.yaml:17: faults[1].window.to: 2h0m0s is beyond limit 1h0m0s`,
			`t.yaml:18: faults[1].nodeCrash.node: unknown node "workers-3": node names are <group>-<i> for a group's nodes, counting nodes added by events`,
		}},
		{"invalid invariant", base + "expect:\n  invariants: [max-unavailable, no-leaks]\n", []string{
			`t.yaml:6: expect.invariants[1]: invalid value "no-leaks": want one of max-unavailable, pdb-respected, no-reap-while-updating, no-leaked-cordon, no-leaked-annotation, no-double-reboot, no-churn, converges, os-staging-not-starved, pinned-sets-exact, no-unprotected-reboot, halt-is-final, cleanup, no-stranded-node, updated-healthy, grant-in-window`,
		}},
		{"expect refs", poolDoc + "expect:\n  finalImages: {workers: v2}\n  failedNodes: {workers: {min: 2, max: 1}, other: 0}\n  completesWithin: 3h\n", []string{
			`t.yaml:15: expect.finalImages.workers: unknown image "v2" (known: v1) (did you mean "v1"?)`,
			`t.yaml:16: expect.failedNodes.other: unknown pool "other" (known: workers)`,
			`t.yaml:16: expect.failedNodes.workers: min 2 is more than max 1`,
			`t.yaml:17: expect.completesWithin: 3h0m0s is beyond limit 1h0m0s`,
		}},
		{"required missing", "name: t\nimages: []\n", []string{
			`t.yaml:1: limit: required field is missing`,
			`t.yaml:2: images: has 0 items, want at least 1`,
		}},
		{"nested required missing", base + "nodeGroups:\n  - name: g\n    count: 1\n", []string{
			`t.yaml:6: nodeGroups[0].capacity: required field is missing`,
			`t.yaml:6: nodeGroups[0].bootImage: required field is missing`,
		}},
		{"no event action", base + "events:\n  - at: 1m\n", []string{
			`t.yaml:6: events[0]: one of setPoolImage, pause, scaleWorkload, addNodes, removeNodes, setPinnedImages, setNodeClassImage, setNodePoolLabels, deletePool, createPool, setPool, relabelNode, annotateNode, deleteNode, deleteBootcNode, cordonNode, uncordonNode, setPDB, deletePDB, karpenterCRDs is required`,
		}},
		{"two event actions", poolDoc + "events:\n  - at: 1m\n    pause: {pool: workers}\n    addNodes: {group: workers, count: 1}\n", []string{
			`t.yaml:17: events[0].addNodes: only one of setPoolImage, pause, scaleWorkload, addNodes, removeNodes, setPinnedImages, setNodeClassImage, setNodePoolLabels, deletePool, createPool, setPool, relabelNode, annotateNode, deleteNode, deleteBootcNode, cordonNode, uncordonNode, setPDB, deletePDB, karpenterCRDs may be given, got pause and addNodes`,
		}},
		{"fault time", poolDoc + "faults:\n  - daemonCrash: {node: workers-0}\n", []string{
			`t.yaml:15: faults[0]: one of at, window is required`,
		}},
		{"fault target", poolDoc + "faults:\n  - at: 1m\n    daemonCrash: {node: workers-0, count: 2}\n  - at: 1m\n    daemonCrash: {group: workers}\n    nodeCrash: {group: workers}\n", []string{
			`t.yaml:16: faults[0].daemonCrash.count: count goes with group, not with node`,
			`t.yaml:19: faults[1].nodeCrash: only one of controllerRestart, daemonCrash, nodeCrash, apiErrors, watchFaults, controllerCrash, daemonWriteCrash, powerCycle, clockSkew, longReboot, bootFailure, registryOutage, slowPulls, diskFill, nodeConditionAfterBoot, daemonSetNotReadyAfterBoot, readyFlapsAfterBoot may be given, got daemonCrash and nodeCrash`,
		}},
		{"api fault", poolDoc + "profile: fresh\nfaults:\n  - window: {from: 1m, to: 2m}\n    apiErrors: {verbs: [update, frob], codes: [409], rate: 2}\n  - at: 1m\n    controllerCrash: {afterWrites: 1, rate: 0.5}\n", []string{
			`t.yaml:14: profile: invalid value "fresh": want one of default, stale, instant`,
			`t.yaml:17: faults[0].apiErrors.codes[0]: want a string, got integer 409 (quote it to make it a string)`,
			`t.yaml:17: faults[0].apiErrors.rate: invalid value 2: must be at most 1`,
			`t.yaml:19: faults[1].controllerCrash.rate: only one of afterWrites, rate may be given, got afterWrites and rate`,
		}},
		{"api fault verb", poolDoc + "faults:\n  - window: {from: 1m, to: 2m}\n    apiErrors: {verbs: [update, frob], codes: [conflict, timeout], rate: 0.5, who: daemon}\n", []string{
			`t.yaml:16: faults[0].apiErrors.verbs[1]: invalid value "frob": want one of get, list, create, update, patch, delete, deletecollection, update/status, patch/status, create/eviction`,
		}},
		{"clock skew", poolDoc + "faults:\n  - at: 1m\n    clockSkew: {node: workers-0, offset: 0s}\n  - at: 1m\n    clockSkew: {node: workers-0, offset: -25h}\n  - at: 1m\n    clockSkew: {node: workers-0, offset: -3s, for: -1m}\n", []string{
			`t.yaml:16: faults[0].clockSkew.offset: invalid value 0s: want a duration other than 0s, at most 24h0m0s ahead or behind, e.g. -3s`,
			`t.yaml:18: faults[1].clockSkew.offset: invalid value -25h0m0s: want a duration other than 0s, at most 24h0m0s ahead or behind, e.g. -3s`,
			`t.yaml:20: faults[2].clockSkew.for: invalid duration "-1m": must not be negative`,
		}},
		{"conflict on reads", poolDoc + "faults:\n  - window: {from: 1m, to: 2m}\n    apiErrors: {verbs: [get, list], codes: [conflict], rate: 0.5}\n", []string{
			`t.yaml:16: faults[0].apiErrors.codes: codes [conflict] fail only writes (no API server answers a read with 409), and verbs [get list] are reads: the fault would fail nothing; add a write verb or another code`,
		}},
		{"target count", poolDoc + "faults:\n  - at: 1m\n    nodeCrash: {group: workers, count: 4}\n", []string{
			`t.yaml:16: faults[0].nodeCrash.count: invalid value 4: group workers has at most 3 nodes`,
		}},
		{"many errors at once", poolDoc + "seed: -1\nworkloads2: []\nevents:\n  - at: 5m\n    pause: {pool: nope}\n  - at: 1m\n    addNodes: {group: workers, count: 0}\nexpect:\n  halted: {other: true}\n", []string{
			`t.yaml:14: seed: invalid value -1: want an integer from 0 to 18446744073709551615`,
			`t.yaml:15: workloads2: unknown field "workloads2" (did you mean "workloads"?)`,
			`t.yaml:18: events[0].pause.pool: unknown pool "nope" (known: workers)`,
			`t.yaml:20: events[1].addNodes.count: invalid value 0: must be at least 1`,
			`t.yaml:22: expect.halted.other: unknown pool "other" (known: workers)`,
		}},
		{"null mapping", poolDoc + "faults:\n  - at: 1m\n    controllerRestart:\n", []string{
			`t.yaml:16: faults[0].controllerRestart: want a mapping, got null (write {} for an empty mapping)`,
		}},
		{"pdb needs one", base + "workloads:\n  - name: w\n    replicas: 1\n    pdb: {}\n", []string{
			`t.yaml:8: workloads[0].pdb: one of maxUnavailable, minAvailable is required`,
		}},
		{"duplicate key", base + "seed: 1\nseed: 2\n", []string{
			`t.yaml:6: seed: duplicate key "seed" (first at line 5)`,
		}},
		{"bad pattern", base + "nodeGroups:\n  - {name: Workers_1, count: 1, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1}\n", []string{
			`t.yaml:6: nodeGroups[0].name: invalid value "Workers_1": want a DNS label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit`,
		}},
		{"cordoned above count", base + "nodeGroups:\n  - {name: g, count: 1, cordoned: 2, capacity: {cpu: 1}, bootImage: v1}\n", []string{
			`t.yaml:6: nodeGroups[0].capacity: capacity.memory is required`,
			`t.yaml:6: nodeGroups[0].cordoned: invalid value 2: more than count 1`,
		}},
		{"karpenter group without section", base + "nodeGroups:\n  - {name: g, count: 1, capacity: {cpu: 1, memory: 1Gi}, bootImage: v1, karpenter: {nodePool: default}}\n", []string{
			`t.yaml:6: nodeGroups[0].karpenter.nodePool: node pool "default" needs a karpenter section`,
		}},
		{"syntax error", base + "seed: [1\n", []string{
			`t.yaml:5: invalid YAML: did not find expected ',' or ']'`,
		}},
		{"empty file", "", []string{
			`t.yaml: empty scenario file`,
		}},
		{"two documents", base + "---\nname: u\n", []string{
			`t.yaml:5: a scenario file holds one YAML document; found another`,
		}},
		{"not a mapping", "- a\n", []string{
			`t.yaml:1: want a mapping, got a list`,
		}},
		{"control with unknown path", base + "negativeControls:\n  - name: c\n    set: [bootroll.testOnly.ignoreSlots=true]\n    caughtBy: max-unavailable\n", []string{
			`t.yaml:7: negativeControls[0].set[0]: unknown field "ignoreSlots" in bootroll.testOnly`,
		}},
		{"control that breaks the file", base + "negativeControls:\n  - name: c\n    set: [limit=soon]\n    caughtBy: converges\n", []string{
			`t.yaml:7: negativeControls[0].set: the overrides make the scenario invalid: limit: invalid duration "soon": want a Go duration such as 90s, 10m or 1h30m (from --set limit=soon)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.doc))
			if err == nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			if s != nil {
				t.Errorf("Parse returned a scenario with its error")
			}
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

func TestAliases(t *testing.T) {
	doc := base + "nodeGroups:\n  - {name: a, count: 1, capacity: &cap {cpu: 2, memory: 4Gi}, bootImage: v1}\n  - {name: b, count: 1, capacity: *cap, bootImage: v1}\n"
	s, err := Parse("t.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr(s.NodeGroups[1].Capacity["memory"]).String(); got != "4Gi" {
		t.Errorf("aliased capacity memory = %s", got)
	}
	// A billion laughs: lists of aliases nested three deep.
	rep := func(s string) string { return "[" + strings.TrimSuffix(strings.Repeat(s+", ", 100), ", ") + "]" }
	var b strings.Builder
	b.WriteString(base)
	fmt.Fprintf(&b, "x1: &r %s\n", rep("Empty"))
	fmt.Fprintf(&b, "x2: &bs %s\n", rep("{nodes: 1, reasons: *r}"))
	fmt.Fprintf(&b, "karpenter: {nodePools: %s}\n", rep("{name: a, budgets: *bs}"))
	start := time.Now() // edge: a test's own timing
	_, err = Parse("t.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), ": the document expands to more than 200000 values") {
		t.Errorf("alias bomb: got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second { // edge: a test's own timing
		t.Errorf("alias bomb took %s", d)
	}
}

func TestErrorsUnwrap(t *testing.T) {
	_, err := Parse("t.yaml", []byte(base+"limt: 1h\nseeds: 2\n"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Line != 5 || fe.Field != "limt" {
		t.Errorf("errors.As(*FieldError) = %+v from %v", fe, err)
	}
	if n := len(err.(Errors)); n != 2 {
		t.Errorf("got %d errors, want 2: %v", n, err)
	}
}

func TestSample(t *testing.T) {
	dists := []Distribution{
		{Dist: DistFixed, Value: time.Minute},
		{Dist: DistUniform, Min: time.Minute, Max: 3 * time.Minute},
		{Dist: DistNormal, Mean: 2 * time.Minute, Stddev: time.Minute, Min: 30 * time.Second, Max: 4 * time.Minute},
		{Dist: DistLognormal, Median: 2 * time.Minute, Sigma: 0.5, Max: 10 * time.Minute},
	}
	for _, d := range dists {
		r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
		lo, hi := d.Min, d.Max
		if d.Dist == DistFixed {
			lo, hi = d.Value, d.Value
		}
		for range 1000 {
			a, b := d.Sample(r1), d.Sample(r2)
			if a != b {
				t.Fatalf("%s: same seed gave %s and %s", d.Dist, a, b)
			}
			if a < lo || a > hi {
				t.Fatalf("%s: sample %s outside [%s, %s]", d.Dist, a, lo, hi)
			}
		}
	}
}

func TestPoolSpec(t *testing.T) {
	s, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := s.PoolSpec(s.Bootroll.Pools[0])
	if got, want := string(spec.Image), "registry.example/os:v2"; got != want {
		t.Errorf("image = %s, want %s", got, want)
	}
	if got := spec.Rollout.MaxUnavailable.String(); got != "20%" {
		t.Errorf("maxUnavailable = %s, want 20%%", got)
	}
	if spec.DrainTimeout == nil || spec.DrainTimeout.Duration != 10*time.Minute {
		t.Errorf("drainTimeout = %v, want 10m", spec.DrainTimeout)
	}
	if got := spec.Windows[0].Days; len(got) != 2 || got[0] != "Mon" {
		t.Errorf("windows days = %v", got)
	}
	if spec.Karpenter.PostUpdateProtection.Duration != 5*time.Minute {
		t.Errorf("postUpdateProtection = %v", spec.Karpenter.PostUpdateProtection)
	}
}

func FuzzParse(f *testing.F) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full, "bootroll.pools[0].maxUnavailable=3")
	f.Add([]byte(base), "seed=2")
	f.Add([]byte(poolDoc), `nodeGroups[0].labels["a.b/c"]=x`)
	f.Fuzz(func(t *testing.T, data []byte, set string) {
		s, err := ParseWithSets("f.yaml", data, []string{set})
		if (s == nil) == (err == nil) {
			t.Fatalf("got scenario %v and error %v", s != nil, err)
		}
		if err != nil {
			for _, e := range err.(Errors) {
				if e.File != "f.yaml" || e.Msg == "" {
					t.Fatalf("malformed error %+v", e)
				}
			}
		}
	})
}
