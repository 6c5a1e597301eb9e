package hostmode

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/scenario"
)

// TestWriteCrashesStep: a daemonWriteCrash counts each node's steps
// while in effect and crashes after the afterWrites-th once per node;
// host calls count only with hostCalls; a rate crashes on its draw.
func TestWriteCrashesStep(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	w := planFaults(&scenario.Scenario{Faults: []scenario.Fault{
		{Window: &scenario.TimeRange{From: time.Minute, To: 2 * time.Minute}, DaemonWriteCrash: &scenario.DaemonWriteCrash{AfterWrites: 2, DownFor: 7 * time.Second}},
	}}, 1).crashes(start, 1)
	if w == nil {
		t.Fatal("no write crashes planned")
	}
	step := func(at time.Duration, node string, hostCall bool) bool {
		_, _, crash := w.step(start.Add(at), node, hostCall)
		return crash
	}
	if step(30*time.Second, "a", false) || step(2*time.Minute, "a", false) {
		t.Fatal("a step outside the window counted")
	}
	if step(61*time.Second, "a", true) {
		t.Fatal("a host call crashed a fault without hostCalls")
	}
	if step(62*time.Second, "a", false) {
		t.Fatal("crashed after the first write (a host call or a step outside the window counted)")
	}
	if step(63*time.Second, "b", false) {
		t.Fatal("node b crashed after its first write: the count is per node")
	}
	fault, down, crash := w.step(start.Add(64*time.Second), "a", false)
	if !crash || fault != "faults[0].daemonWriteCrash" || down != 7*time.Second {
		t.Fatalf("second write of a: crash %v fault %q down %s", crash, fault, down)
	}
	if step(65*time.Second, "a", false) || step(66*time.Second, "a", false) {
		t.Error("an afterWrites crash happened twice on one node")
	}
	if !step(67*time.Second, "b", false) {
		t.Error("node b's second write did not crash it")
	}

	hc := planFaults(&scenario.Scenario{Faults: []scenario.Fault{
		{At: ptrTo(time.Duration(0)), DaemonWriteCrash: &scenario.DaemonWriteCrash{AfterWrites: 1, HostCalls: true}},
		{At: ptrTo(time.Duration(0)), DaemonWriteCrash: &scenario.DaemonWriteCrash{Rate: 1}},
	}}, 1).crashes(start, 1)
	if fault, _, crash := hc.step(start.Add(time.Hour), "a", true); !crash || fault != "faults[0].daemonWriteCrash" {
		t.Errorf("host call under hostCalls: crash %v by %q", crash, fault)
	}
	if fault, _, crash := hc.step(start.Add(time.Hour), "a", false); !crash || fault != "faults[1].daemonWriteCrash" {
		t.Errorf("rate 1: crash %v by %q", crash, fault)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestCrashGateKillsTheProcess: the process dies right after the write
// that crashes it: the player's daemon is down, and the dead process's
// later reads, writes and host calls fail without reaching the API
// server or the host.
func TestCrashGateKillsTheProcess(t *testing.T) {
	sc := loadTest(t)
	sc.Faults = []scenario.Fault{{At: ptrTo(time.Duration(0)), DaemonWriteCrash: &scenario.DaemonWriteCrash{AfterWrites: 1, DownFor: time.Minute}}}
	node, c, fc := playerFixture()
	e := playerEnv(sc, c, fc)
	e.crashes = planFaults(sc, 1).crashes(fc.Now(), 1)
	p, daemon := runningPlayer(t, e, node, fc)
	ctx := context.Background()
	p.mu.Lock()
	g := &crashGate{p: p, gen: p.gen}
	p.mu.Unlock()
	gc := g.client(c)

	var n corev1.Node
	if err := gc.Get(ctx, types.NamespacedName{Name: node.Name}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"written":"yes"}}}`))
	if err := gc.Patch(ctx, &n, patch); err != nil {
		t.Fatalf("the crashing write failed: %v", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: node.Name}, &n); err != nil || n.Labels["written"] != "yes" {
		t.Fatalf("the crashing write did not land: %v %v", err, n.Labels)
	}
	if daemon() != nil {
		t.Fatal("the daemon still runs after the write that crashed it")
	}
	later := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"later":"yes"}}}`))
	for what, err := range map[string]error{
		"get":          gc.Get(ctx, types.NamespacedName{Name: node.Name}, &n),
		"patch":        gc.Patch(ctx, &n, later),
		"status patch": gc.Status().Patch(ctx, &n, later),
	} {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s of the dead process: %v, want ErrCrashed", what, err)
		}
	}
	h, _ := g.hold(&nodedaemon.AsyncHost{}, nil)
	if err := h.Reboot(ctx); !errors.Is(err, ErrCrashed) {
		t.Errorf("host reboot of the dead process: %v, want ErrCrashed", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: node.Name}, &n); err != nil || n.Labels["later"] != "" {
		t.Errorf("a write of the dead process landed: %v %v", err, n.Labels)
	}
	// A new process starts downFor plus daemonStartup later.
	waitFor(t, "the restart to wait", fc.HasWaiters)
	fc.Step(time.Minute)
	waitFor(t, "daemonStartup to wait", fc.HasWaiters)
	fc.Step(5 * time.Second)
	waitFor(t, "a new daemon", func() bool { return daemon() != nil })
}
