package cluster_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// webNode is a node that runs a pod of web (never workers-0, the cordoned
// one).
func (h *harness) webNode() string {
	for _, p := range h.podsOf("web") {
		return p.Spec.NodeName
	}
	h.t.Fatal("no web pod")
	return ""
}

// on returns the pods bound to node.
func (h *harness) on(node string) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range h.pods() {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

func (h *harness) traced(kind string) int {
	n := 0
	for _, l := range h.trace {
		if strings.Contains(l, " "+kind+" ") {
			n++
		}
	}
	return n
}

func TestWorkloadPodsTolerateNotReadyFor300s(t *testing.T) {
	h := newHarness(t, options{})
	for _, p := range h.podsOf("web") {
		var got []string
		for _, tol := range p.Spec.Tolerations {
			if tol.TolerationSeconds != nil && *tol.TolerationSeconds == 300 && tol.Effect == corev1.TaintEffectNoExecute {
				got = append(got, tol.Key)
			}
		}
		if want := []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}; !slices.Equal(got, want) {
			t.Errorf("pod %s tolerations %v, want 300 s of %v", p.Name, got, want)
		}
	}
}

func TestNodeLifecycleEvictsPodsOfNotReadyNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		down    time.Duration
		evicted bool
	}{
		{"back before the timeout", 4 * time.Minute, false},
		{"down past the timeout", 10 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, options{})
			n := h.webNode()
			before := h.on(n)
			if err := h.cl.CrashNode(ctx, n, tc.down); err != nil {
				t.Fatal(err)
			}
			h.runFor(cluster.NodeMonitorGracePeriod - time.Second)
			if !ready(h.node(n)) {
				t.Fatal("the API said NotReady before the grace period passed")
			}
			for _, p := range h.on(n) {
				if !podReady(&p) {
					t.Fatalf("pod %s not Ready in the API before the grace period passed", p.Name)
				}
			}
			h.runFor(2 * time.Second)
			for _, c := range h.node(n).Status.Conditions {
				if c.Type == corev1.NodeReady && (c.Status != corev1.ConditionUnknown || c.Reason != cluster.ReasonNodeStatusUnknown) {
					t.Fatalf("Ready after the grace period = %s/%s, want Unknown/%s", c.Status, c.Reason, cluster.ReasonNodeStatusUnknown)
				}
			}
			for _, p := range h.on(n) {
				if podReady(&p) {
					t.Fatalf("pod %s still Ready on a node gone Unknown", p.Name)
				}
			}
			h.runFor(cluster.NotReadyEvictionTimeout - 2*time.Second)
			for _, p := range h.on(n) {
				if p.DeletionTimestamp != nil {
					t.Fatalf("pod %s deleted before the timeout", p.Name)
				}
			}
			if len(h.on(n)) != len(before) {
				t.Fatalf("%d pods on the crashed node, want the %d it had (still bound)", len(h.on(n)), len(before))
			}
			h.runFor(2 * time.Second)
			var terminating, daemon int
			for _, p := range h.on(n) {
				if p.DeletionTimestamp != nil {
					terminating++
				}
				if p.Namespace == cluster.DaemonSetNamespace && p.DeletionTimestamp == nil {
					daemon++
				}
			}
			workload := len(before) - 1
			if tc.evicted && (terminating != workload || daemon != 1 || h.traced("node-lifecycle/evict") != 1) {
				t.Fatalf("after the timeout: %d pods terminating, %d DaemonSet pods left; want %d and 1", terminating, daemon, workload)
			}
			if !tc.evicted && (terminating != 0 || h.traced("node-lifecycle/evict") != 0) {
				t.Fatalf("a node down %s had %d pods evicted", tc.down, terminating)
			}
			h.runFor(time.Minute)
			if tc.evicted {
				// Replacements run elsewhere (web's PDB is whole again
				// without the crashed node).
				if got := h.pdb("web"); got.Violated {
					t.Errorf("web PDB after the eviction = %+v, want its replacements healthy", got)
				}
			}
			h.runFor(tc.down)
			if !ready(h.node(n)) {
				t.Fatal("not Ready after the node came back")
			}
			for _, p := range h.on(n) {
				if p.DeletionTimestamp != nil {
					t.Errorf("pod %s still terminating after its node came back", p.Name)
				}
			}
		})
	}
}

func TestDeleteNode(t *testing.T) {
	h := newHarness(t, options{})
	n := h.webNode()
	if err := h.cl.DeleteNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := h.api.Client().Get(ctx, client.ObjectKey{Name: n}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Node %s after DeleteNode: %v, want NotFound", n, err)
	}
	if len(h.on(n)) != 0 || slices.Contains(h.cl.Nodes(), n) {
		t.Errorf("pods still on deleted node %s, or it is listed", n)
	}
	h.runFor(time.Minute)
	if got := len(h.podsOf("web")); got != 3 {
		t.Errorf("web has %d pods after its node was deleted, want 3 replacements", got)
	}
	if err := h.cl.DeleteNode(ctx, n); err == nil {
		t.Error("deleting a deleted node succeeded")
	}
}

func TestAdminCordonAndRelabel(t *testing.T) {
	h := newHarness(t, options{})
	const n = "workers-2"
	if err := h.cl.SetUnschedulable(ctx, n, true); err != nil {
		t.Fatal(err)
	}
	node := h.node(n)
	if !node.Spec.Unschedulable || len(node.Annotations) != 0 || len(node.Spec.Taints) != 0 {
		t.Errorf("after cordon: unschedulable %v, annotations %v, taints %v; want cordoned and nothing else", node.Spec.Unschedulable, node.Annotations, node.Spec.Taints)
	}
	if _, nodes := h.cl.SchedulableCapacity(); nodes != 2 {
		t.Errorf("schedulable nodes after a cordon = %d, want 2", nodes)
	}
	if err := h.cl.SetUnschedulable(ctx, n, false); err != nil {
		t.Fatal(err)
	}
	if h.node(n).Spec.Unschedulable {
		t.Error("still cordoned after uncordon")
	}
	if err := h.cl.Relabel(ctx, n, map[string]string{"pool": "other", "zone": "b"}, []string{"kubernetes.io/os"}); err != nil {
		t.Fatal(err)
	}
	l := h.node(n).Labels
	if l["pool"] != "other" || l["zone"] != "b" || l[corev1.LabelHostname] != n {
		t.Errorf("labels after relabel: %v", l)
	}
	if _, ok := l["kubernetes.io/os"]; ok {
		t.Error("removed label still there")
	}
	// web selects pool=workers: a web pod evicted now cannot land on n.
	for _, p := range h.podsOf("web") {
		if p.Spec.NodeName == n {
			continue
		}
		if err := h.cl.SetPDB(ctx, "web", scenario.PDB{MaxUnavailable: new(intstr.FromInt32(3))}); err != nil {
			t.Fatal(err)
		}
		if err := h.evict(&p); err != nil {
			t.Fatal(err)
		}
		break
	}
	h.runFor(time.Minute)
	for _, p := range h.podsOf("web") {
		if p.Spec.NodeName == n && p.CreationTimestamp.After(t0) {
			t.Errorf("a new web pod landed on relabelled node %s", n)
		}
	}
	if err := h.cl.Relabel(ctx, "nope-1", nil, []string{"a"}); err == nil {
		t.Error("relabelling an unknown node succeeded")
	}
}

func TestSetAndDeletePDB(t *testing.T) {
	h := newHarness(t, options{})
	c := h.api.Client()
	// batch has no PDB: setPDB creates one.
	if err := h.cl.SetPDB(ctx, "batch", scenario.PDB{MinAvailable: new(intstr.FromInt32(3))}); err != nil {
		t.Fatal(err)
	}
	var obj policyv1.PodDisruptionBudget
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.WorkloadNamespace, Name: "batch"}, &obj); err != nil {
		t.Fatalf("PDB batch after setPDB: %v", err)
	}
	if obj.Spec.MinAvailable == nil || obj.Spec.MinAvailable.IntValue() != 3 || obj.Spec.Selector.MatchLabels[cluster.LabelApp] != "batch" {
		t.Errorf("PDB batch spec = %+v", obj.Spec)
	}
	h.runFor(time.Second)
	if got := h.pdb("batch"); got.Healthy != 3 || got.DisruptionsAllowed != 0 {
		t.Errorf("batch PDB state = %+v, want 3 healthy, none allowed", got)
	}
	if err := h.evict(&h.podsOf("batch")[0]); !apierrors.IsTooManyRequests(err) {
		t.Errorf("evicting a batch pod under minAvailable 3 = %v, want 429", err)
	}
	// web allows nothing; setPDB changes the budget.
	if err := h.evict(&h.podsOf("web")[0]); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting web under maxUnavailable 0 = %v, want 429", err)
	}
	if err := h.cl.SetPDB(ctx, "web", scenario.PDB{MaxUnavailable: new(intstr.FromInt32(1))}); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.WorkloadNamespace, Name: "web"}, &obj); err != nil || obj.Spec.MaxUnavailable.IntValue() != 1 || obj.Spec.MinAvailable != nil {
		t.Fatalf("PDB web after setPDB: %+v, %v", obj.Spec, err)
	}
	if err := h.evict(&h.podsOf("web")[0]); err != nil {
		t.Errorf("evicting web under maxUnavailable 1 = %v, want allowed", err)
	}
	// deletePDB removes it; evictions are then unlimited.
	found, err := h.cl.DeletePDB(ctx, "api")
	if err != nil || !found {
		t.Fatalf("DeletePDB api = %v, %v", found, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.WorkloadNamespace, Name: "api"}, &obj); !apierrors.IsNotFound(err) {
		t.Errorf("PDB api after deletePDB: %v, want NotFound", err)
	}
	for _, s := range h.cl.PDBStatus() {
		if s.Name == "api" {
			t.Error("PDBStatus still lists api")
		}
	}
	for _, p := range h.podsOf("api") {
		if err := h.evict(&p); err != nil {
			t.Errorf("evicting api pod %s with no PDB = %v", p.Name, err)
		}
	}
	h.runFor(time.Minute)
	if found, err := h.cl.DeletePDB(ctx, "api"); found || err != nil {
		t.Errorf("deleting a deleted PDB = %v, %v; want false, nil", found, err)
	}
}

func TestPowerCycle(t *testing.T) {
	for _, off := range []time.Duration{30 * time.Second, 2 * time.Minute} {
		t.Run(off.String(), func(t *testing.T) {
			h := newHarness(t, options{})
			n := h.webNode()
			if err := h.cl.PowerCycle(n, off); err != nil {
				t.Fatal(err)
			}
			if !h.cl.Unavailable(n) || h.traced("node/power-cycle") != 1 || len(h.on(n)) == 0 {
				t.Fatalf("right after the power cycle: unavailable %v, traced %d, %d pods bound; want unavailable, traced, pods still bound", h.cl.Unavailable(n), h.traced("node/power-cycle"), len(h.on(n)))
			}
			sawNotReady, sawPodUnready := false, false
			for range int(off/time.Second) + 1 {
				h.runFor(time.Second)
				sawNotReady = sawNotReady || !ready(h.node(n))
				for _, p := range h.on(n) {
					sawPodUnready = sawPodUnready || !podReady(&p)
				}
			}
			// Off for less than the grace period, the Node never shows
			// NotReady; its pods restart (not ready a moment) all the same.
			if want := off > cluster.NodeMonitorGracePeriod; sawNotReady != want || !sawPodUnready {
				t.Errorf("off %s: NotReady seen %v (want %v), a pod not ready seen %v (want true)", off, sawNotReady, want, sawPodUnready)
			}
			h.runFor(10 * time.Second)
			if !ready(h.node(n)) || h.node(n).Status.NodeInfo.BootID != n+"-boot-2" {
				t.Errorf("after offFor: Ready %v, boot %s", ready(h.node(n)), h.node(n).Status.NodeInfo.BootID)
			}
			for _, p := range h.on(n) {
				if !podReady(&p) {
					t.Errorf("pod %s not Ready again after the power cycle", p.Name)
				}
			}
		})
	}
}

// applyV2 stages v2 on a node and reboots it into it; it returns when the
// reboot was requested.
func (h *harness) applyV2(n string) {
	h.t.Helper()
	host := func() nodedaemon.Host { return h.cl.Host(n) }
	if err := host().Stage(ctx, refV2); err != nil {
		h.t.Fatal(err)
	}
	h.runFor(time.Minute)
	if err := host().Apply(ctx, refV2); err != nil {
		h.t.Fatal(err)
	}
}

func TestLongReboot(t *testing.T) {
	for _, during := range []bool{false, true} {
		name := "next reboot"
		if during {
			name = "reboot in progress"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, options{})
			n := h.webNode()
			if !during {
				if err := h.cl.LongReboot(n, 30*time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			start := h.eng.Now().Add(time.Minute)
			h.applyV2(n)
			if during {
				h.runFor(30 * time.Second)
				if err := h.cl.LongReboot(n, 30*time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			h.eng.RunUntil(start.Add(29 * time.Minute))
			if ready(h.node(n)) {
				t.Fatal("Ready before the long reboot ended")
			}
			if h.traced("node-lifecycle/evict") != 1 {
				t.Error("the pods of the node were not evicted during a 30-minute reboot")
			}
			h.eng.RunUntil(start.Add(30*time.Minute + time.Second))
			if !ready(h.node(n)) || h.cl.Booted(n) != refV2 {
				t.Errorf("after 30 minutes: Ready %v, booted %s", ready(h.node(n)), h.cl.Booted(n))
			}
			// The next reboot is a usual one again.
			h.runFor(10 * time.Second) // the daemon starts
			if err := h.cl.Host(n).Reboot(ctx); err != nil {
				t.Fatal(err)
			}
			h.runFor(91 * time.Second)
			if !ready(h.node(n)) {
				t.Error("the reboot after the long one was long too")
			}
		})
	}
}

func TestBootFailureModes(t *testing.T) {
	// A fault makes a good image (v2) fail; an image with failsToBoot
	// (bad) fails in its own way.
	for _, tc := range []struct {
		name, mode string
		image      bool
	}{
		{"fault CrashLoop", "CrashLoop", false},
		{"fault Flapping", "Flapping", false},
		{"fault NeverReady", "NeverReady", false},
		{"fault FallBack", "FallBack", false},
		{"fault NetworkNotReady", "NetworkNotReady", false},
		{"image CrashLoop", "CrashLoop", true},
		{"image NetworkNotReady", "NetworkNotReady", true},
		{"image Flapping", "Flapping", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options{}
			if tc.image {
				o.bootFailure = tc.mode
			}
			h := newHarness(t, o)
			const n = "workers-2"
			ref, short := refV2, "v2"
			if tc.image {
				ref, short = refBad, "bad"
			} else if err := h.cl.FailNextBoot(n, scenario.BootFailure(tc.mode)); err != nil {
				t.Fatal(err)
			}
			host := func() nodedaemon.Host { return h.cl.Host(n) }
			if err := host().Stage(ctx, ref); err != nil {
				t.Fatal(err)
			}
			h.runFor(time.Minute)
			if err := host().Apply(ctx, ref); err != nil {
				t.Fatal(err)
			}
			switch tc.mode {
			case "CrashLoop":
				h.runFor(2 * time.Minute)
				if ready(h.node(n)) || h.traced("node/boot-crash") == 0 {
					t.Fatalf("2 minutes in: Ready %v, %d boot crashes; want NotReady, crashing", ready(h.node(n)), h.traced("node/boot-crash"))
				}
				h.runFor(10 * time.Minute)
				if got := h.traced("node/boot-crash"); got != cluster.CrashLoopBootAttempts || !ready(h.node(n)) || h.cl.Booted(n) != refV1 {
					t.Errorf("after the crash loop: %d boot crashes, Ready %v, booted %s; want %d, Ready on v1", got, ready(h.node(n)), h.cl.Booted(n), cluster.CrashLoopBootAttempts)
				}
				if h.cl.RebootsFor(n, short) != 1 {
					t.Errorf("RebootsFor %s = %d, want 1 (the loop is one requested reboot)", short, h.cl.RebootsFor(n, short))
				}
			case "Flapping":
				h.runFor(90*time.Second + 5*time.Second)
				restarts := h.restarted[n]
				if !ready(h.node(n)) || h.cl.Booted(n) != ref {
					t.Fatalf("after the reboot: Ready %v, booted %s; want Ready on %s", ready(h.node(n)), h.cl.Booted(n), short)
				}
				flapsSeen, readySeen := false, false
				for range 40 {
					h.runFor(5 * time.Second)
					if !ready(h.node(n)) {
						flapsSeen = true
					} else if flapsSeen {
						readySeen = true
					}
				}
				if !flapsSeen || !readySeen {
					t.Errorf("flapping: NotReady seen %v, Ready again %v; want both", flapsSeen, readySeen)
				}
				if h.restarted[n] != restarts {
					t.Errorf("the daemon restarted while the node flapped; it keeps running")
				}
				if _, err := host().Observe(ctx); err != nil {
					t.Errorf("the daemon cannot observe its flapping host: %v", err)
				}
			case "NetworkNotReady":
				h.runFor(5 * time.Minute)
				if ready(h.node(n)) || h.cl.Booted(n) != ref || !h.cl.Unavailable(n) {
					t.Fatalf("NetworkNotReady: Ready %v, booted %s; want NotReady on %s", ready(h.node(n)), h.cl.Booted(n), short)
				}
				// The daemon runs: it can observe and roll back.
				obs, err := host().Observe(ctx)
				if err != nil || obs.Booted.Digest == digestV1 {
					t.Fatalf("the daemon of a NetworkNotReady node: %+v, %v; want it running on the new image", obs, err)
				}
				if err := host().Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				if err := host().Reboot(ctx); err != nil {
					t.Fatal(err)
				}
				h.runFor(3 * time.Minute)
				if !ready(h.node(n)) || h.cl.Booted(n) != refV1 {
					t.Fatalf("after the rollback: Ready %v, booted %s; want Ready on v1", ready(h.node(n)), h.cl.Booted(n))
				}
			case "NeverReady":
				h.runFor(5 * time.Minute)
				if ready(h.node(n)) || h.cl.Booted(n) != ref {
					t.Errorf("NeverReady: Ready %v, booted %s", ready(h.node(n)), h.cl.Booted(n))
				}
			case "FallBack":
				h.runFor(5 * time.Minute)
				if !ready(h.node(n)) || h.cl.Booted(n) != refV1 {
					t.Errorf("FallBack: Ready %v, booted %s", ready(h.node(n)), h.cl.Booted(n))
				}
			}
			if !tc.image {
				// The fault hits one boot: v2 boots fine the next time.
				if err := h.cl.CrashNode(ctx, n, time.Minute); err != nil {
					t.Fatal(err)
				}
				h.runFor(2 * time.Minute)
				if h.cl.Booted(n) != refV2 {
					if err := host().Stage(ctx, refV2); err != nil {
						t.Fatal(err)
					}
					h.runFor(time.Minute)
					if err := host().Apply(ctx, refV2); err != nil {
						t.Fatal(err)
					}
					h.runFor(5 * time.Minute)
				}
				if h.cl.Booted(n) != refV2 || !ready(h.node(n)) {
					t.Errorf("the second boot into v2: booted %s, Ready %v", h.cl.Booted(n), ready(h.node(n)))
				}
			}
		})
	}
}

func TestRegistryOutageAndSlowPulls(t *testing.T) {
	h := newHarness(t, options{})
	const n = "workers-1"
	h.cl.RegistryOutage(10 * time.Minute)
	if got := h.stageErr(n, refV2); !strings.Contains(got, "503 Service Unavailable") {
		t.Fatalf("Stage during the outage ended with %q, want a 503", got)
	}
	h.runFor(10 * time.Minute)
	h.cl.SlowPulls(time.Hour, 10)
	if err := h.cl.Host(n).Stage(ctx, refV2); err != nil {
		t.Fatalf("Stage after the outage: %v", err)
	}
	// 2Gi at 100Mi/s is 20.48s, plus 20s; ten times slower is 204.8s + 20s.
	h.runFor(224 * time.Second)
	if h.observe(n).Staged != nil {
		t.Fatal("staged before the slow download could end")
	}
	h.runFor(2 * time.Second)
	if h.observe(n).Staged == nil {
		t.Error("not staged after the slow download")
	}
}

func TestFillDisk(t *testing.T) {
	h := newHarness(t, options{})
	const n = "workers-1"
	_, used0, _ := h.cl.ImageFsUsage(n)
	took, err := h.cl.FillDisk(n, 10<<30, 5*time.Minute)
	if err != nil || took != 10<<30 {
		t.Fatalf("FillDisk = %d, %v", took, err)
	}
	if _, used, _ := h.cl.ImageFsUsage(n); used != used0+10<<30 {
		t.Errorf("used after the fill = %d, want %d", used, used0+10<<30)
	}
	capacity, _, _ := h.cl.ImageFsUsage(n)
	took, err = h.cl.FillDisk(n, capacity*2, 0)
	if err != nil || took != capacity-used0-10<<30 {
		t.Fatalf("FillDisk beyond the free space took %d, %v; want what was free", took, err)
	}
	// The space check (nodedaemon.SpaceCheckedHost) refuses it before
	// bootc starts the download.
	if got := h.stageErr(n, refV2); !strings.Contains(got, "not enough space to stage") {
		t.Errorf("Stage on a full disk ended with %q, want the space check's refusal", got)
	}
	h.runFor(5 * time.Minute)
	if _, used, _ := h.cl.ImageFsUsage(n); used != capacity-10<<30 {
		t.Errorf("used after the first fill ended = %d, want %d", used, capacity-10<<30)
	}
}
