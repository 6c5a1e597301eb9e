package hostmode

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

const (
	v1Ref = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	v2Ref = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	v3Ref = "registry.example/os@sha256:3333333333333333333333333333333333333333333333333333333333333333"
)

const testScenario = `
name: hostmode-test
limit: 1h
images:
  - {name: v1, ref: ` + v1Ref + `, size: 1Gi}
  - {name: v2, ref: ` + v2Ref + `, size: 100Mi}
  - {name: v3, ref: ` + v3Ref + `, size: 100Mi, failsToBoot: true, bootFailure: CrashLoop}
host:
  pullBandwidth: 10Mi
  stageOverhead: 20s
  reboot: 60s
  daemonStartup: 5s
nodeGroups:
  - {name: workers, count: 3, labels: {pool: workers}, capacity: {cpu: "4", memory: 16Gi}, bootImage: v2}
  - {name: infra, count: 1, capacity: {cpu: "4", memory: 16Gi}, bootImage: v1, imageFsCapacity: 50Gi, imageFsUsed: 10Gi}
karpenter:
  nodeClasses: [{name: default, bootImage: v3}]
  nodePools: [{name: general}]
faults:
  - {at: 10m, bootFailure: {node: workers-0, mode: NeverReady}}
  - {window: {from: 1m, to: 2m}, longReboot: {group: workers, count: 2, duration: 10m}}
  - {at: 1m, daemonCrash: {node: workers-1}}
`

func loadTest(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse("test.yaml", []byte(testScenario))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestBoot(t *testing.T) {
	sc := loadTest(t)
	v1, v2, v3 := sc.Image("v1"), sc.Image("v2"), sc.Image("v3")
	dep := func(im *scenario.Image, downloadOnly bool) *deployment {
		return &deployment{im: im, ref: digestRef(im), downloadOnly: downloadOnly}
	}
	booted, rb := dep(v1, false), dep(v2, false)
	tests := []struct {
		name         string
		d            Deployments
		clean        bool
		mode         scenario.BootFailure
		wantBooted   *scenario.Image
		wantRollback *scenario.Image
		want         Outcome
		wantAttempts int
	}{
		{"nothing staged", Deployments{Booted: booted}, true, "", v1, nil, Booted, 1},
		{"unlocked staged", Deployments{Booted: booted, Staged: dep(v2, false)}, true, "", v2, v1, Booted, 1},
		{"download-only staged stays", Deployments{Booted: booted, Staged: dep(v2, true)}, true, "", v1, nil, Booted, 1},
		{"crash does not boot the staged", Deployments{Booted: booted, Staged: dep(v2, false)}, false, "", v1, nil, Booted, 1},
		{"rollback queued", Deployments{Booted: booted, Rollback: rb, RollbackQueued: true}, true, "", v2, v1, Booted, 1},
		{"fault fall back", Deployments{Booted: booted, Staged: dep(v2, false)}, true, scenario.BootFallBack, v1, nil, FellBack, 1},
		{"fault never ready", Deployments{Booted: booted, Staged: dep(v2, false)}, true, scenario.BootNeverReady, v2, v1, NeverReady, 1},
		{"fault network", Deployments{Booted: booted, Staged: dep(v2, false)}, true, scenario.BootNetworkNotReady, v2, v1, NetworkNotReady, 1},
		{"fault flapping", Deployments{Booted: booted, Staged: dep(v2, false)}, true, scenario.BootFlapping, v2, v1, Flapping, 1},
		{"image crash loops", Deployments{Booted: booted, Staged: dep(v3, false)}, true, "", v1, nil, FellBack, cluster.CrashLoopBootAttempts},
		{"fault on a boot into the same image does nothing", Deployments{Booted: booted}, true, scenario.BootNeverReady, v1, nil, Booted, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, outcome, attempts := Boot(tt.d, tt.clean, tt.mode)
			if got.Booted.im != tt.wantBooted {
				t.Errorf("booted %s, want %s", got.Booted.im.Name, tt.wantBooted.Name)
			}
			if (got.Rollback == nil) != (tt.wantRollback == nil) || got.Rollback != nil && got.Rollback.im != tt.wantRollback {
				t.Errorf("rollback %v, want %v", got.Rollback, tt.wantRollback)
			}
			if got.Staged != nil || got.RollbackQueued {
				t.Errorf("after a boot: staged %v, rollback queued %v; want neither", got.Staged, got.RollbackQueued)
			}
			if outcome != tt.want || attempts != tt.wantAttempts {
				t.Errorf("outcome %s in %d attempts, want %s in %d", outcome, attempts, tt.want, tt.wantAttempts)
			}
		})
	}
}

func TestStageTime(t *testing.T) {
	tests := []struct {
		size, bw int64
		overhead time.Duration
		want     time.Duration
	}{
		{100 << 20, 10 << 20, 20 * time.Second, 30 * time.Second},
		{1 << 30, 100 << 20, 0, 10240 * time.Millisecond},
		{1 << 30, 0, 5 * time.Second, 5 * time.Second},
		{1 << 62, 1, 0, 1<<63 - 1},
	}
	for _, tt := range tests {
		if got := StageTime(tt.size, tt.bw, tt.overhead); got != tt.want {
			t.Errorf("StageTime(%d, %d, %v) = %v, want %v", tt.size, tt.bw, tt.overhead, got, tt.want)
		}
	}
}

func TestRebootTime(t *testing.T) {
	sc := loadTest(t)
	r := rand.New(rand.NewPCG(1, 2))
	if got := RebootTime(sc.Host, r, 0, 1); got != time.Minute {
		t.Errorf("one attempt: %v, want 1m", got)
	}
	if got := RebootTime(sc.Host, r, 10*time.Minute, 1); got != 10*time.Minute {
		t.Errorf("long reboot: %v, want 10m", got)
	}
	if got, want := RebootTime(sc.Host, r, 0, 3), 3*time.Minute+2*cluster.CrashLoopPanic; got != want {
		t.Errorf("crash loop: %v, want %v", got, want)
	}
}

// waitFor polls cond (the host's goroutines run beside the test).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestHostThroughAdapters drives the simulated host through the
// production adapters, as the daemon does: a stage takes size/bandwidth
// plus overhead on the clock, Apply reboots, and the boot brings the
// staged image and a new boot ID.
func TestHostThroughAdapters(t *testing.T) {
	sc := loadTest(t)
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	rebooted := make(chan struct{}, 1)
	h := NewHost("workers-0", sc, fc, NodeRand(1, "workers-0"), sc.Image("v1"), v1Ref, "boot-1", 50<<30, func() { rebooted <- struct{}{} })
	async, _ := nodedaemon.Adapters(nodedaemon.HostEdges{Bootc: h, BootID: h.BootID, Statfs: h.Statfs, StageSize: h.StageSize})
	ctx := context.Background()

	if err := async.Stage(ctx, v2Ref); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stage to wait on the clock", fc.HasWaiters)
	fc.Step(29 * time.Second) // 100Mi at 10Mi/s + 20s is 30s
	if !fc.HasWaiters() {
		t.Fatal("the stage stopped waiting before 30s")
	}
	obs, err := async.Observe(ctx)
	if err != nil || !obs.Staging {
		t.Fatalf("after 29s: staging %v, err %v; want still staging", obs.Staging, err)
	}
	fc.Step(time.Second)
	waitFor(t, "the stage to end", func() bool { o, _ := async.Observe(ctx); return !o.Staging })
	obs, _ = async.Observe(ctx)
	if obs.LastStage == nil || obs.LastStage.Err != "" || obs.Staged == nil || obs.Staged.Digest != sc.Image("v2").Digest {
		t.Fatalf("after 30s: last stage %+v, staged %+v; want v2 staged", obs.LastStage, obs.Staged)
	}
	if err := async.Apply(ctx, v2Ref); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rebooted:
	default:
		t.Fatal("Apply did not reboot")
	}
	total, up := h.ShutDown()
	if total != time.Minute {
		t.Errorf("reboot takes %v, want host.reboot's 1m", total)
	}
	outcome, bootID := up()
	obs, _ = async.Observe(ctx)
	if outcome != Booted || obs.Booted.Digest != sc.Image("v2").Digest || obs.Rollback.Digest != sc.Image("v1").Digest || obs.Staged != nil {
		t.Errorf("after the boot: %s, booted %+v, rollback %+v, staged %+v; want v2 booted, v1 rollback", outcome, obs.Booted, obs.Rollback, obs.Staged)
	}
	if bootID == "boot-1" || obs.BootID != bootID {
		t.Errorf("boot ID %q (observed %q), want a new one", bootID, obs.BootID)
	}
}

func TestStageInterruptedByReboot(t *testing.T) {
	sc := loadTest(t)
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	h := NewHost("n", sc, fc, NodeRand(1, "n"), sc.Image("v1"), v1Ref, "b", 50<<30, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := h.Run(context.Background(), "bootc", "switch", "--download-only", "--", v2Ref)
		errc <- err
	}()
	waitFor(t, "the stage to wait", fc.HasWaiters)
	_, up := h.ShutDown()
	up()
	fc.Step(time.Minute)
	if err := <-errc; err == nil {
		t.Fatal("a stage that outlived a reboot succeeded")
	}
	if h.d.Staged != nil {
		t.Errorf("staged %v after an interrupted stage", h.d.Staged)
	}
}

func TestInitialState(t *testing.T) {
	sc := loadTest(t)
	node := func(name string, labels, annotations map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	}
	tests := []struct {
		name     string
		node     *corev1.Node
		want     string
		wantRB   string
		wantFree int64
	}{
		{"by labels", node("kwok-a", map[string]string{"pool": "workers"}, nil), "v2", "", 100 << 30},
		{"by name", node("infra-0", nil, nil), "v1", "", 40 << 30},
		{"karpenter node class", node("general-x", map[string]string{karpenterNodePoolLabel: "general"}, nil), "v3", "", 100 << 30},
		{"first image", node("other", nil, nil), "v1", "", 100 << 30},
		{"what the Node says", node("workers-1", map[string]string{"pool": "workers"}, map[string]string{AnnotationBooted: v3Ref, AnnotationRollback: v2Ref}), "v3", "v2", 100 << 30},
		{"unknown image on the Node", node("infra-0", nil, map[string]string{AnnotationBooted: "registry.example/other:v9"}), "v1", "", 40 << 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := InitialState(sc, tt.node)
			if in.Booted.Name != tt.want || in.Ref != digestRef(in.Booted) {
				t.Errorf("booted %s (%s), from %s; want %s", in.Booted.Name, in.Ref, in.From, tt.want)
			}
			if rb := ""; in.Rollback != nil {
				rb = in.Rollback.Name
				if rb != tt.wantRB {
					t.Errorf("rollback %s, want %q", rb, tt.wantRB)
				}
			} else if tt.wantRB != "" {
				t.Errorf("no rollback, want %s", tt.wantRB)
			}
			if got := available(in.Group); got != tt.wantFree {
				t.Errorf("free space %d, want %d", got, tt.wantFree)
			}
		})
	}
}

func TestFaultPlan(t *testing.T) {
	sc := loadTest(t)
	fp := planFaults(sc, 7)
	if len(fp.skipped) != 0 {
		t.Errorf("skipped %v, want none", fp.skipped)
	}
	if len(fp.timed) != 3 || fp.timed[0].name != "faults[2].daemonCrash" || fp.timed[0].at != time.Minute ||
		fp.timed[1].name != "faults[1].longReboot" || fp.timed[2].at != 10*time.Minute {
		t.Fatalf("timed %+v, want daemonCrash at 1m, longReboot in [1m,2m), then bootFailure at 10m", fp.timed)
	}
	if at := fp.timed[1].at; at < time.Minute || at >= 2*time.Minute {
		t.Errorf("window draw %v outside [1m, 2m)", at)
	}
	again := planFaults(sc, 7)
	if again.timed[1].at != fp.timed[1].at {
		t.Errorf("one seed drew %v and %v", fp.timed[1].at, again.timed[1].at)
	}
	played := []string{"infra-0", "workers-0", "workers-1", "workers-10", "workers-2", "workers-x"}
	got := Targets(scenario.Target{Group: "workers", Count: 2}, played, NodeRand(7, "t"))
	if len(got) != 2 || got[0] == got[1] {
		t.Errorf("targets %v, want 2 distinct workers", got)
	}
	for _, n := range got {
		if n == "infra-0" || n == "workers-x" {
			t.Errorf("target %s is not a node of group workers", n)
		}
	}
	if got := Targets(scenario.Target{Node: "workers-9"}, played, nil); len(got) != 0 {
		t.Errorf("a node not played: targets %v", got)
	}
}
