package clusterrun

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

const testScenario = `
name: t
limit: 1h
images:
  - {name: v1, ref: "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", size: 1Gi}
  - {name: v2, ref: "registry.example/os:v2", digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222", size: 1Gi}
nodeGroups:
  - name: workers
    count: 2
    cordoned: 1
    labels: {pool: workers}
    taints: [{key: dedicated, value: x, effect: NoSchedule}]
    capacity: {cpu: "4", memory: 16Gi}
    bootImage: v1
  - name: kp
    count: 1
    labels: {pool: kp}
    capacity: {cpu: "2", memory: 8Gi}
    bootImage: v1
    karpenter: {nodePool: burst}
karpenter:
  nodeClasses: [{name: default, bootImage: v1}]
  nodePools:
    - name: burst
      consolidationPolicy: WhenEmpty
      consolidateAfter: 30s
      budgets: [{nodes: 1}]
workloads:
  - {name: web, replicas: 5, requests: {cpu: 500m}, nodeSelector: {pool: workers}, pdb: {maxUnavailable: 1}}
  - {name: bare, replicas: 2, unmanaged: true}
bootroll:
  pools:
    - {name: workers, nodeSelector: {pool: workers}, image: v2, maxUnavailable: 1}
`

func parse(t *testing.T, y string) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse("t.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestBuild(t *testing.T) {
	sc := parse(t, testScenario)
	o, err := Build(sc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(o.Nodes), 2; got != want {
		t.Fatalf("static nodes: got %d, want %d", got, want)
	}
	n0, n1 := o.Nodes[0], o.Nodes[1]
	if n0.Name != "workers-0" || n1.Name != "workers-1" {
		t.Errorf("node names: got %s, %s", n0.Name, n1.Name)
	}
	if n0.Annotations[localcluster.KWOKNodeAnnotation] != "fake" {
		t.Errorf("node lacks the kwok annotation: %v", n0.Annotations)
	}
	if n0.Labels["pool"] != "workers" || n0.Labels[GroupLabel] != "workers" {
		t.Errorf("node labels: %v", n0.Labels)
	}
	if !n0.Spec.Unschedulable || n1.Spec.Unschedulable {
		t.Errorf("cordoned: got %v %v, want true false", n0.Spec.Unschedulable, n1.Spec.Unschedulable)
	}
	if cpu := n0.Status.Allocatable[corev1.ResourceCPU]; cpu.String() != "4" {
		t.Errorf("allocatable cpu: got %s", cpu.String())
	}
	if pods := n0.Status.Capacity[corev1.ResourcePods]; pods.String() != "110" {
		t.Errorf("pods: got %s, want 110", pods.String())
	}
	if len(n0.Spec.Taints) != 1 || n0.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints: %v", n0.Spec.Taints)
	}
	if len(o.NodeClaims) != 1 || o.NodeClaims[0].GetName() != "kp-0" {
		t.Fatalf("node claims: %v", o.NodeClaims)
	}
	if l := o.NodeClaims[0].GetLabels(); l["karpenter.sh/nodepool"] != "burst" || l["pool"] != "kp" || l[GroupLabel] != "kp" {
		t.Errorf("node claim labels: %v", l)
	}
	if len(o.NodePools) != 1 {
		t.Fatalf("node pools: %d", len(o.NodePools))
	}
	np := o.NodePools[0]
	if v, _, _ := unstructured.NestedString(np.Object, "spec", "disruption", "consolidateAfter"); v != "30s" {
		t.Errorf("consolidateAfter: got %q", v)
	}
	if v, _, _ := unstructured.NestedString(np.Object, "spec", "disruption", "consolidationPolicy"); v != "WhenEmpty" {
		t.Errorf("consolidationPolicy: got %q", v)
	}
	if len(o.Workloads) != 1 || *o.Workloads[0].Spec.Replicas != 5 || o.Workloads[0].Namespace != "default" {
		t.Errorf("workloads: %+v", o.Workloads)
	}
	if len(o.BarePods) != 2 || len(o.BarePods[0].OwnerReferences) != 0 {
		t.Errorf("bare pods: %d", len(o.BarePods))
	}
	if len(o.PDBs) != 1 || o.PDBs[0].Spec.MaxUnavailable.IntValue() != 1 || o.PDBs[0].Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("PDBs: %+v", o.PDBs)
	}
	if len(o.Pools) != 1 {
		t.Fatalf("pools: %d", len(o.Pools))
	}
	// The tag is pinned to the scenario's digest: the real controller
	// would look the tag up at a registry that does not exist.
	if got, want := string(o.Pools[0].Spec.Image), "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"; got != want {
		t.Errorf("pool image: got %s, want %s", got, want)
	}
	all := o.All()
	if _, ok := all[len(all)-1].(interface{ GetName() string }); !ok || all[len(all)-1].GetName() != "workers" {
		t.Errorf("pools must come last in All")
	}
}

func TestInstanceType(t *testing.T) {
	for _, tc := range []struct{ cpu, mem, want string }{
		{"4", "16Gi", "s-4x-amd64-linux"},
		{"2", "8Gi", "s-2x-amd64-linux"},
		{"2", "4Gi", "c-2x-amd64-linux"},
		{"3", "1Gi", "c-4x-amd64-linux"},
		{"1", "9Gi", "m-2x-amd64-linux"},
		{"500m", "512Mi", "c-1x-amd64-linux"},
	} {
		if got := InstanceType(resource.MustParse(tc.cpu), resource.MustParse(tc.mem)); got != tc.want {
			t.Errorf("cpu %s memory %s: got %s, want %s", tc.cpu, tc.mem, got, tc.want)
		}
	}
}

func TestTargets(t *testing.T) {
	nodes := map[string]string{"kwok-kp-0-x": "kp", "kwok-kp-1-y": "kp", "workers-0": "workers"}
	rng := rand.New(rand.NewPCG(1, 2))
	got := Targets(scenario.Target{Group: "kp", Count: 5}, nodes, rng)
	slices.Sort(got)
	if want := []string{"kwok-kp-0-x", "kwok-kp-1-y"}; !slices.Equal(got, want) {
		t.Errorf("group kp: got %v, want %v", got, want)
	}
	if got := Targets(scenario.Target{Group: "workers", Count: 1}, nodes, rng); !slices.Equal(got, []string{"workers-0"}) {
		t.Errorf("group workers: got %v", got)
	}
	if got := Targets(scenario.Target{Node: "n"}, nodes, rng); !slices.Equal(got, []string{"n"}) {
		t.Errorf("named node: got %v", got)
	}
}

// The Karpenter group's node as the run creates it when it starts
// Karpenter itself: named as in the twin, a KWOK provider ID that names
// it, the labels Karpenter's disruption needs, and a claim of the same
// name marked launched on it.
func TestAdoption(t *testing.T) {
	sc := parse(t, testScenario)
	o, err := Build(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.KarpenterNodes) != 1 || len(o.AdoptingClaims) != 1 {
		t.Fatalf("karpenter nodes %d, adopting claims %d, want 1 and 1", len(o.KarpenterNodes), len(o.AdoptingClaims))
	}
	n, c := o.KarpenterNodes[0], o.AdoptingClaims[0]
	if n.Name != "kp-0" || c.GetName() != "kp-0" {
		t.Errorf("names: node %s, claim %s, want kp-0", n.Name, c.GetName())
	}
	if n.Spec.ProviderID != "kwok://kp-0" {
		t.Errorf("provider ID: got %q", n.Spec.ProviderID)
	}
	for _, l := range []map[string]string{n.Labels, c.GetLabels()} {
		for k, v := range map[string]string{"karpenter.sh/nodepool": "burst", "pool": "kp", GroupLabel: "kp",
			corev1.LabelInstanceTypeStable: "s-2x-amd64-linux", "karpenter.sh/capacity-type": "on-demand", corev1.LabelTopologyZone: KWOKZone} {
			if l[k] != v {
				t.Errorf("label %s: got %q, want %q", k, l[k], v)
			}
		}
	}
	if n.Annotations[localcluster.KWOKNodeAnnotation] != "fake" {
		t.Errorf("adopted node lacks the kwok annotation")
	}
	for _, x := range o.All() {
		if _, ok := x.(*corev1.Node); ok && x.GetName() == "kp-0" {
			t.Errorf("All lists Node kp-0: on the launch path Karpenter's KWOK provider makes it")
		}
	}
	st := AdoptingStatus(n, metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))["status"].(map[string]any)
	if st["providerID"] != "kwok://kp-0" {
		t.Errorf("status providerID: %v", st["providerID"])
	}
	cond := st["conditions"].([]any)[0].(map[string]any)
	if cond["type"] != "Launched" || cond["status"] != "True" || cond["lastTransitionTime"] != "2026-01-02T03:04:05Z" {
		t.Errorf("launched condition: %v", cond)
	}
	if a := st["allocatable"].(map[string]any); a["cpu"] != "2" || a["pods"] != "110" {
		t.Errorf("allocatable: %v", a)
	}
}

// TestNodeClasses: each scenario node class becomes a KWOKNodeClass of its
// name whose nodeRegistrationDelay is its registrationDelay in whole
// seconds (the CRD's pattern), and NodePools launch from their class.
func TestNodeClasses(t *testing.T) {
	sc := parse(t, `
name: nc
limit: 1h
images: [{name: v1, ref: "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", size: 1Gi}]
karpenter:
  nodeClasses: [{name: slow, bootImage: v1, registrationDelay: 1m30s}, {name: fast, bootImage: v1, registrationDelay: 0s}]
  nodePools: [{name: a, nodeClass: slow}, {name: b, nodeClass: fast}]
`)
	o, err := Build(sc)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, nc := range o.NodeClasses {
		got[nc.GetName()] = nc.Object["spec"].(map[string]any)["nodeRegistrationDelay"]
	}
	if want := map[string]any{"slow": "90s", "fast": "0s"}; !reflect.DeepEqual(got, want) {
		t.Errorf("KWOKNodeClasses: got %v, want %v", got, want)
	}
	for _, np := range o.NodePools {
		ref, _, _ := unstructured.NestedString(np.Object, "spec", "template", "spec", "nodeClassRef", "name")
		if want := map[string]string{"a": "slow", "b": "fast"}[np.GetName()]; ref != want {
			t.Errorf("NodePool %s launches from %q, want %q", np.GetName(), ref, want)
		}
	}
}

// TestOneZone: every node of a run is in one zone, static and adopted,
// and NodePools launch into it, unless the scenario's labels name
// another: kube-scheduler's default topology spread prefers nodes without
// the zone label, so a zone on the Karpenter nodes only left them empty.
func TestOneZone(t *testing.T) {
	sc := parse(t, testScenario)
	o, err := Build(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(slices.Clone(o.Nodes), o.KarpenterNodes...) {
		if z := n.Labels[corev1.LabelTopologyZone]; z != KWOKZone {
			t.Errorf("node %s: zone %q, want %s", n.Name, z, KWOKZone)
		}
	}
	zoneReq := func(np *unstructured.Unstructured) []any {
		reqs, _, _ := unstructured.NestedSlice(np.Object, "spec", "template", "spec", "requirements")
		for _, r := range reqs {
			if m := r.(map[string]any); m["key"] == corev1.LabelTopologyZone && m["operator"] == "In" {
				return m["values"].([]any)
			}
		}
		return nil
	}
	if len(o.NodePools) != 1 || !reflect.DeepEqual(zoneReq(o.NodePools[0]), []any{KWOKZone}) {
		t.Errorf("NodePool zone requirement: %v", zoneReq(o.NodePools[0]))
	}
	// A zone the scenario names is kept.
	sc = parse(t, strings.Replace(testScenario, "labels: {pool: workers}", "labels: {pool: workers, topology.kubernetes.io/zone: z9}", 1))
	if o, err = Build(sc); err != nil {
		t.Fatal(err)
	}
	if z := o.Nodes[0].Labels[corev1.LabelTopologyZone]; z != "z9" {
		t.Errorf("a zone of the scenario's labels: got %q, want z9", z)
	}
}

// TestUnregisteredV114: for Karpenter v1.14 the adopted nodes carry
// karpenter.sh/unregistered (v1.14 registers no node without it) and every
// pod tolerates it; for v1.15 neither.
func TestUnregisteredV114(t *testing.T) {
	for _, v := range []string{"v1.15", "v1.14"} {
		sc := parse(t, strings.Replace(testScenario, "karpenter:\n  nodeClasses", "karpenter:\n  version: "+v+"\n  nodeClasses", 1))
		o, err := Build(sc)
		if err != nil {
			t.Fatal(err)
		}
		want := v == "v1.14"
		has := slices.ContainsFunc(o.KarpenterNodes[0].Spec.Taints, func(tt corev1.Taint) bool {
			return tt.Key == TaintUnregistered && tt.Effect == corev1.TaintEffectNoExecute
		})
		tolerates := func(ts []corev1.Toleration) bool {
			return slices.ContainsFunc(ts, func(tt corev1.Toleration) bool { return tt.Key == TaintUnregistered })
		}
		if has != want || tolerates(o.Workloads[0].Spec.Template.Spec.Tolerations) != want || tolerates(o.BarePods[0].Spec.Tolerations) != want {
			t.Errorf("%s: taint %v, deployment tolerates %v, bare pod tolerates %v; want %v", v, has,
				tolerates(o.Workloads[0].Spec.Template.Spec.Tolerations), tolerates(o.BarePods[0].Spec.Tolerations), want)
		}
		if slices.ContainsFunc(o.Nodes[0].Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == TaintUnregistered }) {
			t.Errorf("%s: a static node has the taint", v)
		}
	}
}
