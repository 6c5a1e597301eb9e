package hostmode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// fastScenario is testScenario's images on timings for wall-clock tests:
// a stage takes about 1.1s, a reboot 2s.
const fastScenario = `
name: hostmode-fast
limit: 1h
images:
  - {name: v1, ref: ` + v1Ref + `, size: 100Mi}
  - {name: v2, ref: ` + v2Ref + `, size: 100Mi}
  - {name: v3, ref: ` + v3Ref + `, size: 100Mi, failsToBoot: true, bootFailure: FallBack}
host:
  pullBandwidth: 1Gi
  stageOverhead: 1s
  reboot: 2s
  daemonStartup: 200ms
nodeGroups:
  - {name: workers, count: 3, labels: {pool: workers}, capacity: {cpu: "4", memory: 16Gi}, bootImage: v1}
`

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startEnvtest starts kube-apiserver and etcd with bootroll's CRDs, or
// skips the test when the binaries are absent or under -short.
func startEnvtest(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiserver: not with -short")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join("..", "..", "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Skipf("no kube-apiserver in %s (KUBEBUILDER_ASSETS): %v", assets, err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	return cfg
}

// TestHostModeOnAPIServer plays a Node on a real API server with the
// controller's part done by hand: a desired image makes the daemon stage
// it; a boot order on the cordoned Node with the slot marker makes it
// reboot, seen on the Node (annotated rebooting, then a new boot ID) and in
// the BootcNode's status (booted the new image).
func TestHostModeOnAPIServer(t *testing.T) {
	cfg := startEnvtest(t)
	sc, err := scenario.Parse("fast.yaml", []byte(fastScenario))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "workers-0", Labels: map[string]string{"pool": "workers", "hostmode-test": "yes"}}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "other-0", Labels: map[string]string{"pool": "workers"}}}
	for _, n := range []*corev1.Node{node, other} {
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "workers-0"}, Spec: v1alpha1.BootcNodeSpec{Pool: "workers"}}
	if err := c.Create(ctx, bn); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{"hostmode-test": "yes"})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	readyC := make(chan struct{})
	go func() {
		done <- Run(runCtx, Options{Scenario: sc, Seed: 1, Selector: sel, Config: cfg, Clock: clock.RealClock{}, Log: testLog(), Ready: func() { close(readyC) }})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	getNode := func(name string) *corev1.Node {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		return &n
	}
	getBN := func() *v1alpha1.BootcNode {
		var b v1alpha1.BootcNode
		if err := c.Get(ctx, client.ObjectKey{Name: "workers-0"}, &b); err != nil {
			t.Fatal(err)
		}
		return &b
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	select {
	case <-readyC:
	case <-ctx.Done():
		t.Fatal("Options.Ready was not called")
	}
	v1, v2 := sc.Image("v1"), sc.Image("v2")
	eventually("the daemon to report the booted image", func() bool {
		b := getBN().Status.Booted
		return b != nil && b.Digest == v1.Digest
	})
	firstBoot := getNode("workers-0").Status.NodeInfo.BootID
	if firstBoot == "" {
		t.Fatal("no boot ID on the played Node")
	}
	if getNode("other-0").Annotations[AnnotationBooted] != "" {
		t.Error("a Node the selector does not match was played")
	}

	// The controller's staging order: spec.desiredImage.
	b := getBN()
	b.Spec.DesiredImage = v2Ref
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually("v2 staged", func() bool {
		s := getBN().Status.Staged
		return s != nil && s.Digest == v2.Digest
	})
	if phase := getBN().Status.Daemon.Phase; phase != v1alpha1.DaemonPhase("Staged") {
		t.Errorf("daemon phase %q after staging, want Staged", phase)
	}

	// The controller's slot: cordon with the slot marker, then the boot
	// order.
	n := getNode("workers-0")
	n.Spec.Unschedulable = true
	n.Annotations[v1alpha1.AnnotationSlot] = "test"
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	b = getBN()
	b.Spec.BootOrder = &v1alpha1.BootOrder{Image: v2Ref, At: metav1.Now()}
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually("the Node annotated rebooting", func() bool {
		return getNode("workers-0").Annotations[localcluster.RebootingAnnotation] == "true"
	})
	if r := getBN().Status.Daemon.LastReboot; r == nil || r.BootID != firstBoot || r.Image != v2Ref {
		t.Errorf("lastReboot %+v, want the reboot into v2 from boot %s", r, firstBoot)
	}
	eventually("the reboot over", func() bool {
		_, ok := getNode("workers-0").Annotations[localcluster.RebootingAnnotation]
		return !ok
	})
	n = getNode("workers-0")
	if n.Status.NodeInfo.BootID == firstBoot || n.Annotations[AnnotationBooted] != v2Ref {
		t.Errorf("after the reboot: boot ID %q (was %q), booted %q; want a new boot of v2", n.Status.NodeInfo.BootID, firstBoot, n.Annotations[AnnotationBooted])
	}
	eventually("the new daemon to report v2 booted", func() bool {
		st := getBN().Status
		return st.Booted != nil && st.Booted.Digest == v2.Digest && st.Daemon.BootID == n.Status.NodeInfo.BootID
	})

	// The Node goes and comes back (Karpenter reuses no names, but a
	// static node can): the old player ends and a new one plays the new
	// Node from its node group's image, with a boot ID of its own.
	if err := c.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	eventually("the Node gone", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "workers-0"}, &corev1.Node{}))
	})
	again := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "workers-0", Labels: map[string]string{"pool": "workers", "hostmode-test": "yes"}}}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	eventually("the new Node played", func() bool {
		n := getNode("workers-0")
		return n.Status.NodeInfo.BootID != "" && n.Annotations[AnnotationBooted] == v1Ref
	})
}

// testLog logs to stderr under -v, else nowhere (the players' goroutines
// may log after the test).
func testLog() logr.Logger {
	if testing.Verbose() {
		return zap.New(zap.WriteTo(os.Stderr))
	}
	return logr.Discard()
}
