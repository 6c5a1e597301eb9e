package clusterrun

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const faultScenario = `
name: f
limit: 1h
images:
  - {name: v1, ref: "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", size: 1Gi}
  - {name: v2, ref: "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222", size: 1Gi}
nodeGroups:
  - {name: workers, count: 3, labels: {pool: workers}, capacity: {cpu: "4", memory: 16Gi}, bootImage: v1}
bootroll:
  pools:
    - {name: workers, nodeSelector: {pool: workers}, image: v1}
  testOnly: {ignoreSlotLimit: true}
events:
  - {at: 5m, setPoolImage: {pool: workers, image: v2}}
  - {at: 1m, cordonNode: {node: workers-0}}
faults:
  - {at: 5m, controllerRestart: {downFor: 10s}}
  - {at: 2m, watchFaults: {drop: 0.5}}
  - {window: {from: 10m, to: 20m}, longReboot: {node: workers-1}}
  - {at: 3m, daemonCrash: {node: workers-2}}
  - {at: 4m, apiErrors: {rate: 0.5, codes: [timeout]}}
  - {at: 6m, diskFill: {node: workers-1, size: 1Gi}}
`

func TestPlan(t *testing.T) {
	sc := parse(t, faultScenario)
	steps, notices := Plan(sc, PlanOptions{Seed: 1})
	var order []string
	for _, s := range steps {
		order = append(order, s.Name)
	}
	want := []string{"cordonNode", "watchFaults", "daemonCrash", "apiErrors", "setPoolImage", "controllerRestart", "diskFill", "longReboot"}
	if !slices.Equal(order, want) {
		t.Fatalf("order: got %v, want %v", order, want)
	}
	byName := map[string]Step{}
	for _, s := range steps {
		byName[s.Name] = s
	}
	for _, name := range []string{"watchFaults", "diskFill"} {
		if byName[name].Skip == "" {
			t.Errorf("%s: want skipped", name)
		}
	}
	for _, name := range []string{"cordonNode", "setPoolImage", "controllerRestart", "daemonCrash", "apiErrors"} {
		if byName[name].Skip != "" {
			t.Errorf("%s: skipped (%s), want carried out", name, byName[name].Skip)
		}
	}
	if byName["daemonCrash"].Approx == "" || byName["apiErrors"].Approx == "" || byName["longReboot"].Approx == "" {
		t.Errorf("daemonCrash, a timeout apiErrors and longReboot (played by the host-mode daemon) are approximations")
	}
	if s := byName["controllerRestart"]; s.Until != 5*time.Minute+10*time.Second {
		t.Errorf("controllerRestart until: got %s", s.Until)
	}
	if s := byName["longReboot"]; s.At < 10*time.Minute || s.At >= 20*time.Minute {
		t.Errorf("window fault at %s, outside its window", s.At)
	}
	if len(notices) != 1 || notices[0].Name != "bootroll.testOnly" || !strings.HasPrefix(notices[0].String(), "skipped: bootroll.testOnly: ") {
		t.Errorf("notices: %v", notices)
	}

	ext, _ := Plan(sc, PlanOptions{Seed: 1, ExternalController: true})
	for _, s := range ext {
		if s.Name == "controllerRestart" && s.Skip != whyExternal {
			t.Errorf("controllerRestart with an external controller: skip %q", s.Skip)
		}
	}
}

func TestNoticeString(t *testing.T) {
	if got, want := (Notice{Name: "watchFaults@2m0s", Why: "w"}).String(), "skipped: watchFaults@2m0s: w"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := (Notice{Name: "n", Why: "h", Approx: true}).String(), "approximated: n: h"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFaultKindCoversEveryKind(t *testing.T) {
	// Every fault kind maps to a name; a kind Plan does not know is
	// skipped as a host fault, never dropped.
	sc := parse(t, faultScenario)
	steps, _ := Plan(sc, PlanOptions{Seed: 1})
	if len(steps) != len(sc.Events)+len(sc.Faults) {
		t.Fatalf("steps: got %d, want %d", len(steps), len(sc.Events)+len(sc.Faults))
	}
	for _, s := range steps {
		if s.Name == "" || s.Name == "unknown" {
			t.Errorf("step without a name: %+v", s)
		}
	}
}

// TestPlanChaosAndExternalDaemon: with Chaos Mesh, the faults sim/chaos
// maps are injected by it even with an external controller, the ones it
// cannot express are skipped with its reason (never dropped), and host
// faults stay with the daemon; with external daemons, what only the
// run's host-mode daemon can do is skipped.
func TestPlanChaosAndExternalDaemon(t *testing.T) {
	sc := parse(t, faultScenario+"  - {at: 7m, apiErrors: {latency: {dist: fixed, value: 200ms}}}\n  - {at: 8m, nodeCrash: {node: workers-0, downFor: 30s}}\n")
	steps, _ := Plan(sc, PlanOptions{Seed: 1, ExternalController: true, ExternalDaemon: true, Chaos: true})
	chaosOK := map[string]bool{}
	for _, s := range steps {
		if s.Fault == nil {
			continue
		}
		label := s.Label()
		switch s.Name {
		case "controllerRestart", "daemonCrash", "nodeCrash":
			if !s.Chaos || s.Skip != "" {
				t.Errorf("%s: chaos %v, skip %q: want injected by Chaos Mesh", label, s.Chaos, s.Skip)
			}
			chaosOK[s.Name] = true
		case "apiErrors":
			if s.Fault.APIErrors.Rate > 0 {
				if s.Chaos || !strings.Contains(s.Skip, "cannot be expressed as Chaos Mesh objects") {
					t.Errorf("%s (failing requests): chaos %v, skip %q: want skipped with sim/chaos's reason", label, s.Chaos, s.Skip)
				}
			} else if !s.Chaos || s.Skip != "" {
				t.Errorf("%s (latency only): chaos %v, skip %q: want injected by Chaos Mesh", label, s.Chaos, s.Skip)
			}
		case "watchFaults":
			if s.Chaos || !strings.Contains(s.Skip, "Chaos Mesh") {
				t.Errorf("%s: chaos %v, skip %q: want skipped with sim/chaos's reason", label, s.Chaos, s.Skip)
			}
		case "longReboot":
			if s.Chaos || s.Skip != whyExternalDaemon {
				t.Errorf("%s: chaos %v, skip %q: want skipped, the daemons are external", label, s.Chaos, s.Skip)
			}
		case "diskFill":
			if s.Chaos || s.Skip != whyHostFault {
				t.Errorf("%s: chaos %v, skip %q: want the host-fault skip", label, s.Chaos, s.Skip)
			}
		}
	}
	if len(chaosOK) != 3 {
		t.Errorf("faults injected by Chaos Mesh: %v, want controllerRestart, daemonCrash, nodeCrash", chaosOK)
	}
	// Without Chaos Mesh, an external daemon cannot be crashed.
	plain, _ := Plan(sc, PlanOptions{Seed: 1, ExternalDaemon: true})
	for _, s := range plain {
		if s.Name == "daemonCrash" && (s.Chaos || s.Skip != whyExternalDaemon) {
			t.Errorf("daemonCrash with external daemons and no Chaos Mesh: chaos %v, skip %q", s.Chaos, s.Skip)
		}
	}
}

const karpenterScenario = `
name: k
limit: 1h
images:
  - {name: v1, ref: "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", size: 1Gi}
nodeGroups:
  - {name: kp, count: 1, labels: {pool: kp}, capacity: {cpu: "4", memory: 16Gi}, bootImage: v1, karpenter: {nodePool: workers}}
karpenter:
  installCRDsAt: 3m
  nodeRepair: true
  repairToleration: 5m
  nodeClasses: [{name: default, bootImage: v1}]
  nodePools:
    - {name: workers, consolidationPolicy: WhenEmpty, consolidateAfter: 30s, expireAfter: 90s}
bootroll:
  pools:
    - {name: kp, nodeSelector: {pool: kp}, image: v1}
`

// A run that starts Karpenter itself carries out installCRDsAt and
// nodeRepair (and says how the nodes are adopted and that the provider's
// toleration is fixed); on a given cluster they are skipped, and
// expireAfter counts from the setup.
func TestPlanKarpenterNotices(t *testing.T) {
	sc := parse(t, karpenterScenario)
	names := func(o PlanOptions) map[string]bool {
		_, ns := Plan(sc, o)
		m := map[string]bool{}
		for _, n := range ns {
			m[n.String()[:strings.Index(n.String(), ": ")]+" "+n.Name] = true
		}
		return m
	}
	own := names(PlanOptions{OwnKarpenter: true})
	for _, want := range []string{"approximated nodeGroups.kp.karpenter", "approximated karpenter.repairToleration=5m0s"} {
		if !own[want] {
			t.Errorf("own Karpenter: no notice %q in %v", want, own)
		}
	}
	for _, not := range []string{"skipped karpenter.installCRDsAt", "skipped karpenter.nodeRepair", "approximated karpenter.nodePools.workers.expireAfter"} {
		if own[not] {
			t.Errorf("own Karpenter: notice %q, want none", not)
		}
	}
	given := names(PlanOptions{})
	for _, want := range []string{"skipped karpenter.installCRDsAt", "skipped karpenter.nodeRepair", "approximated karpenter.nodePools.workers.expireAfter"} {
		if !given[want] {
			t.Errorf("given cluster: no notice %q in %v", want, given)
		}
	}
}

// A controllerCrash is carried out through the controller's API proxy
// when the run starts the controller, over its whole window, and a
// daemonWriteCrash by the host-mode daemon; with an external controller
// or external daemons (with or without Chaos Mesh) they are skipped.
func TestPlanControllerCrash(t *testing.T) {
	sc := parse(t, faultScenario+"  - {window: {from: 9m, to: 12m}, controllerCrash: {rate: 0.1, downFor: 5s}}\n  - {at: 13m, daemonWriteCrash: {afterWrites: 2}}\n")
	find := func(steps []Step, name string) Step {
		t.Helper()
		for _, s := range steps {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no %s step", name)
		return Step{}
	}
	for _, o := range []PlanOptions{{Seed: 1}, {Seed: 1, Chaos: true}} {
		steps, _ := Plan(sc, o)
		s := find(steps, "controllerCrash")
		if s.Skip != "" || s.Chaos || s.Approx != whyControllerCrash {
			t.Errorf("chaos %v: controllerCrash: skip %q, chaos %v, approx %q: want carried out by the proxy", o.Chaos, s.Skip, s.Chaos, s.Approx)
		}
		if s.At != 9*time.Minute || s.Until != 12*time.Minute {
			t.Errorf("chaos %v: controllerCrash in effect %s-%s, want its window 9m-12m", o.Chaos, s.At, s.Until)
		}
		if w := find(steps, "daemonWriteCrash"); w.Skip != "" || w.Chaos || w.Approx != whyDaemonWriteCrash || w.At != 13*time.Minute {
			t.Errorf("chaos %v: daemonWriteCrash: skip %q, chaos %v, approx %q, at %s: want played by the host-mode daemon from 13m", o.Chaos, w.Skip, w.Chaos, w.Approx, w.At)
		}
	}
	for _, o := range []PlanOptions{{Seed: 1, ExternalController: true, ExternalDaemon: true}, {Seed: 1, ExternalController: true, ExternalDaemon: true, Chaos: true}} {
		steps, _ := Plan(sc, o)
		if s := find(steps, "controllerCrash"); s.Skip == "" || s.Chaos {
			t.Errorf("external controller, chaos %v: controllerCrash skip %q, chaos %v: want skipped", o.Chaos, s.Skip, s.Chaos)
		}
		if s := find(steps, "daemonWriteCrash"); s.Skip == "" || s.Chaos {
			t.Errorf("external daemons, chaos %v: daemonWriteCrash skip %q, chaos %v: want skipped", o.Chaos, s.Skip, s.Chaos)
		}
	}
}
