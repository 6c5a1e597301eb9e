package twin_test

import (
	"strings"
	"testing"

	"github.com/bootroll/bootroll/sim/twin"
)

// The checks of the scenarios that exercise the human and Karpenter
// actions and the host faults: each must still do what its name says.
func init() {
	for name, check := range map[string]func(*testing.T, *twin.Result, []traceLine){
		"admin-node-actions.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			// workers-5 was cordoned by the admin before bootroll took it;
			// its last cordon line must leave it cordoned with no slot.
			var last traceLine
			slotted := false
			for _, l := range find(tr, "node.cordon", "Node/workers-5") {
				last = l
				slotted = slotted || l.Details["slot"] != nil
			}
			if !slotted || last.Details["unschedulable"] != true || last.Details["slot"] != nil {
				t.Errorf("workers-5: held a slot %v, last cordon %v; want a slot and the admin's cordon kept", slotted, last.Details)
			}
			if len(find(tr, "bootcnode.deleted", "workers-4")) == 0 || len(find(tr, "bootcnode.created", "spare-0")) == 0 {
				t.Error("relabelling did not move workers-4 out of the pool and spare-0 into it")
			}
		},
		"controller-restarts-overlapping.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			up, starts, whileDown := false, 0, 0
			for _, l := range tr {
				switch l.Kind {
				case "controller.start":
					if up {
						t.Errorf("a second controller started at %s", l.T)
					}
					up = true
					starts++
				case "controller.stop":
					up = false
				case "fault.controllerRestart":
					if l.Details["while"] == "down" {
						whileDown++
					}
				}
			}
			if whileDown < 2 {
				t.Errorf("%d restarts while the controller was down, want at least 2", whileDown)
			}
		},
		"host-faults-mid-rollout.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			var registry, space int
			for _, l := range find(tr, "node/stage-fail", "") {
				msg, _ := l.Details["error"].(string)
				switch {
				case strings.Contains(msg, "503 Service Unavailable"):
					registry++
				case strings.Contains(msg, "not enough space to stage") && l.Object == "node/workers-5":
					// nodedaemon.SpaceCheckedHost refuses it before bootc
					// would fail with ENOSPC.
					space++
				}
			}
			if registry == 0 || space == 0 {
				t.Errorf("stagings failed by the registry outage %d, by the full disk of workers-5 %d; want both", registry, space)
			}
			if len(find(tr, "node-lifecycle/evict", "workers-6")) != 1 || len(find(tr, "node/long-reboot", "workers-3")) != 1 || len(find(tr, "node/power-cycle", "")) != 2 {
				t.Error("the crash eviction, the long reboot or the two power cycles are missing from the trace")
			}
		},
		"pool-edited-mid-rollout.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			for _, l := range tr {
				if l.Kind == "bootcnode.phase" && l.Details["reason"] == "SlotGranted" && l.T > "2026-01-05T00:06" && l.T < "2026-01-05T00:20" {
					t.Errorf("slot granted at %s while the pool was paused or outside its window", l.T)
				}
			}
			if len(find(tr, "scenario.setPool", "")) != 6 {
				t.Error("not every setPool event ran")
			}
		},
		"pdb-changed-mid-rollout.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			timeouts := 0
			for _, l := range tr {
				if l.Kind == "bootcnode.phase" && l.Details["reason"] == "DrainTimeout" {
					timeouts++
				}
			}
			if timeouts == 0 || len(find(tr, "pod/evict-refused", "")) == 0 {
				t.Error("the tightened PDB blocked no drain")
			}
		},
		"karpenter-removed-mid-rollout.yaml": func(t *testing.T, res *twin.Result, tr []traceLine) {
			if len(find(tr, "karpenter.remove", "")) != 1 || len(find(tr, "karpenter.install", "")) != 2 || !res.Converged {
				t.Error("Karpenter was not removed and installed again, or the pool did not converge")
			}
		},
		"boot-failure-modes.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			outcomes := map[string]bool{}
			for _, l := range find(tr, "node/reboot-done", "") {
				outcomes[l.Details["outcome"].(string)] = true
			}
			for _, o := range []string{"fell-back", "never-ready", "flapping", "network-not-ready"} {
				if !outcomes[o] {
					t.Errorf("no boot with outcome %s", o)
				}
			}
			if len(find(tr, "node/boot-crash", "cl-")) == 0 || len(find(tr, "node/boot-crash", "good-")) == 0 {
				t.Error("no crash loop in pool cl or good")
			}
		},
		"admin-uncordon-mid-drain.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			var uncordoned, rebooted string
			for _, l := range tr {
				switch {
				case l.Kind == "scenario.uncordonNode":
					uncordoned = l.T
				case l.Kind == "node/reboot-request" && l.Object == "node/workers-0" && rebooted == "":
					rebooted = l.T
				case l.Kind == "pod/scheduled" && l.Details["node"] == "workers-0" && uncordoned != "" && rebooted == "":
					t.Errorf("pod %s landed on workers-0 at %s, between the admin's uncordon and the reboot", l.Object, l.T)
				}
			}
			if uncordoned == "" || rebooted == "" || rebooted < uncordoned {
				t.Errorf("uncordon at %q, reboot at %q: want the uncordon during the drain", uncordoned, rebooted)
			}
		},
		"node-relabelled-out-mid-drain.yaml": func(t *testing.T, _ *twin.Result, tr []traceLine) {
			var last traceLine
			for _, l := range find(tr, "node.cordon", "Node/workers-0") {
				last = l
			}
			if last.Details["unschedulable"] != false || last.Details["slot"] != nil || len(find(tr, "bootcnode.deleted", "workers-0")) != 1 {
				t.Errorf("workers-0 after leaving the pool: last cordon %v; want uncordoned, no slot marker, its BootcNode gone", last.Details)
			}
		},
	} {
		scenarioChecks[name] = check
	}
}
