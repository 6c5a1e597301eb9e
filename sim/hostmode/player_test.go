package hostmode

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/cluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// playerFixture is a Node workers-0 of pool workers on a fake API server
// and a fake clock at the scenario's start. The Node is marked rebooting
// (a reboot an earlier host-mode process played): its player boots it,
// and the daemon starts after host.daemonStartup.
func playerFixture() (*corev1.Node, client.WithWatch, *clocktesting.FakeClock) {
	return nodeFixture(map[string]string{localcluster.RebootingAnnotation: "true"})
}

// playerEnv is the env of a player on fake client c and clock fc.
func playerEnv(sc *scenario.Scenario, c client.WithWatch, fc *clocktesting.FakeClock) *env {
	return &env{
		sc: sc, seed: 1, clk: fc, log: logr.Discard(), api: clientNodeAPI{c}, client: c, apiReader: c,
		resync: time.Hour, retry: time.Second, wake: func(string) {},
	}
}

// nodeFixture is playerFixture's Node with annotations.
func nodeFixture(annotations map[string]string) (*corev1.Node, client.WithWatch, *clocktesting.FakeClock) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "workers-0", Labels: map[string]string{"pool": "workers"}, Annotations: annotations}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node).WithStatusSubresource(&corev1.Node{}).Build()
	return node, c, clocktesting.NewFakeClock(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
}

// TestPlayerReboot plays a reboot on a Node: annotated rebooting for the
// reboot's length, then a new boot ID in status.nodeInfo.bootID, the
// annotation gone, the booted image recorded, and a new daemon process.
func TestPlayerReboot(t *testing.T) {
	sc := loadTest(t)
	node, c, fc := playerFixture()
	var mu sync.Mutex
	wakes := 0
	e := &env{
		sc: sc, seed: 1, clk: fc, log: logr.Discard(), api: clientNodeAPI{c}, client: c, apiReader: c,
		resync: time.Hour, retry: time.Second,
		wake: func(string) { mu.Lock(); wakes++; mu.Unlock() },
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newPlayer(ctx, e, node)
	defer p.end()
	get := func() *corev1.Node {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: "workers-0"}, &n); err != nil {
			t.Fatal(err)
		}
		return &n
	}
	daemonUp := func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.daemon != nil }

	waitFor(t, "the start to wait daemonStartup", fc.HasWaiters)
	n := get()
	firstBoot := n.Status.NodeInfo.BootID
	if firstBoot == "" || n.Annotations[AnnotationBooted] != v2Ref {
		t.Fatalf("at start: bootID %q, booted %q; want a boot ID and v2 (the group's)", firstBoot, n.Annotations[AnnotationBooted])
	}
	if daemonUp() {
		t.Fatal("daemon up before daemonStartup")
	}
	fc.Step(5 * time.Second)
	waitFor(t, "the daemon to start", daemonUp)

	// The daemon stages v1 and applies it.
	staged := make(chan error, 1)
	go func() {
		_, err := p.host.Run(ctx, "bootc", "switch", "--download-only", "--", v1Ref)
		staged <- err
	}()
	waitFor(t, "the stage to wait", fc.HasWaiters)
	fc.Step(123 * time.Second) // 1Gi at 10Mi/s + 20s
	if err := <-staged; err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"bootc", "switch", "--from-downloaded"}, {"systemctl", "reboot"}} {
		if _, err := p.host.Run(ctx, cmd[0], cmd[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	// The shutdown, as in the twin (cluster.ShutdownDelay): the Node is
	// not annotated and the daemon runs, and systemd says stopping.
	waitFor(t, "the shutdown to wait", fc.HasWaiters)
	time.Sleep(20 * time.Millisecond)
	if _, ok := get().Annotations[localcluster.RebootingAnnotation]; ok || !daemonUp() {
		t.Errorf("during the shutdown: annotated rebooting %v, daemon up %v; want not annotated, up", ok, daemonUp())
	}
	if out, _ := p.host.Run(ctx, "systemctl", "is-system-running"); string(out) != "stopping\n" {
		t.Errorf("systemctl is-system-running during the shutdown printed %q, want stopping", out)
	}
	fc.Step(cluster.ShutdownDelay)
	waitFor(t, "the Node to be annotated rebooting", func() bool { return get().Annotations[localcluster.RebootingAnnotation] == "true" })
	if daemonUp() {
		t.Error("daemon still up during the reboot")
	}
	waitFor(t, "the reboot to wait", fc.HasWaiters)
	fc.Step(59*time.Second - cluster.ShutdownDelay)
	time.Sleep(20 * time.Millisecond)
	if get().Annotations[localcluster.RebootingAnnotation] != "true" || get().Status.NodeInfo.BootID != firstBoot {
		t.Fatal("the reboot ended before host.reboot's 60s")
	}
	fc.Step(time.Second)
	waitFor(t, "the reboot to end", func() bool { _, ok := get().Annotations[localcluster.RebootingAnnotation]; return !ok })
	n = get()
	if n.Status.NodeInfo.BootID == firstBoot || n.Status.NodeInfo.BootID == "" {
		t.Errorf("boot ID %q after the reboot, want a new one", n.Status.NodeInfo.BootID)
	}
	if n.Annotations[AnnotationBooted] != v1Ref || n.Annotations[AnnotationRollback] != v2Ref {
		t.Errorf("booted %q, rollback %q; want v1, v2", n.Annotations[AnnotationBooted], n.Annotations[AnnotationRollback])
	}
	waitFor(t, "the daemon start to wait", fc.HasWaiters)
	fc.Step(5 * time.Second)
	waitFor(t, "a new daemon", daemonUp)
	mu.Lock()
	defer mu.Unlock()
	if wakes != 2 {
		t.Errorf("%d wake-ups, want one per daemon start", wakes)
	}
}

// runningPlayer plays node on e and waits for its daemon to start (after
// host.daemonStartup); it returns the player, which ends with the test,
// and a reader of its running daemon (nil while none runs).
func runningPlayer(t *testing.T, e *env, node *corev1.Node, fc *clocktesting.FakeClock) (*player, func() *nodedaemon.Daemon) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := newPlayer(ctx, e, node)
	t.Cleanup(func() { p.end(); cancel() })
	daemon := func() *nodedaemon.Daemon { p.mu.Lock(); defer p.mu.Unlock(); return p.daemon }
	waitFor(t, "the start to wait daemonStartup", fc.HasWaiters)
	fc.Step(5 * time.Second)
	waitFor(t, "the daemon to start", func() bool { return daemon() != nil })
	return p, daemon
}

// TestPlayerDaemonCrash: a daemonCrash stops the node's daemon process
// alone, and a new one starts downFor plus daemonStartup later, as in the
// twin; one that ends while the host reboots starts none (the boot does);
// a daemon that is down is not crashed.
func TestPlayerDaemonCrash(t *testing.T) {
	sc := loadTest(t)
	node, c, fc := playerFixture()
	p, daemon := runningPlayer(t, playerEnv(sc, c, fc), node, fc)
	ctx := context.Background()
	first := daemon()

	p.crashDaemon(10 * time.Second)
	if daemon() != nil {
		t.Fatal("daemon still up after the crash")
	}
	if !p.host.Up() {
		t.Fatal("the crash took the host down")
	}
	// Still down a second before downFor, then before daemonStartup ends.
	for _, wait := range []struct {
		what string
		d    time.Duration
	}{{"downFor", 10 * time.Second}, {"daemonStartup", 5 * time.Second}} {
		waitFor(t, wait.what+" to wait", fc.HasWaiters)
		fc.Step(wait.d - time.Second)
		time.Sleep(20 * time.Millisecond)
		if daemon() != nil {
			t.Fatalf("daemon back a second before %s ended", wait.what)
		}
		fc.Step(time.Second)
	}
	waitFor(t, "a new daemon", func() bool { d := daemon(); return d != nil && d != first })

	// A crash, then a reboot while it is down: the restart finds the host
	// down and leaves the start to the boot.
	p.crashDaemon(10 * time.Second)
	waitFor(t, "the restart to wait", fc.HasWaiters)
	if _, err := p.host.Run(ctx, "systemctl", "reboot"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host to go down", func() bool { return !p.host.Up() })
	fc.Step(10 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if daemon() != nil {
		t.Error("a daemon started on a host that is down")
	}
	p.crashDaemon(time.Second) // down already: nothing to crash, nothing to restart
	fc.Step(10 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if daemon() != nil {
		t.Error("a crash of a daemon that was down started one")
	}
}

// TestPlayerDaemonTestOnly: a scenario's bootroll.testOnly.forgetLastReboot
// reaches the daemons host mode starts (a negative control on the
// cluster), and without it they run as shipped.
func TestPlayerDaemonTestOnly(t *testing.T) {
	for _, forget := range []bool{false, true} {
		sc := loadTest(t)
		sc.Bootroll.TestOnly.ForgetLastReboot = forget
		node, c, fc := playerFixture()
		e := playerEnv(sc, c, fc)
		ctx, cancel := context.WithCancel(context.Background())
		p := newPlayer(ctx, e, node)
		waitFor(t, "the start to wait daemonStartup", fc.HasWaiters)
		fc.Step(5 * time.Second)
		var d *nodedaemon.Daemon
		waitFor(t, "the daemon to start", func() bool { p.mu.Lock(); defer p.mu.Unlock(); d = p.daemon; return d != nil })
		if d.TestOnly.ForgetLastReboot != forget {
			t.Errorf("scenario forgetLastReboot %v: the daemon's TestOnly is %+v", forget, d.TestOnly)
		}
		p.end()
		cancel()
	}
}

// A Node that runs already (the setup's, without a boot ID) has its daemon
// running from the player's start, as the twin starts the daemons of the
// nodes that exist at time 0: host mode started them after
// host.daemonStartup, and every cluster run began 5 s behind the twin.
func TestPlayerRunningNodeStartsItsDaemonAtOnce(t *testing.T) {
	sc := loadTest(t)
	node, c, fc := nodeFixture(nil)
	e := playerEnv(sc, c, fc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newPlayer(ctx, e, node)
	defer p.end()
	waitFor(t, "the daemon to start without the clock moving", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.daemon != nil })
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "workers-0"}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Status.NodeInfo.BootID == "" {
		t.Error("the Node got no boot ID")
	}
}
