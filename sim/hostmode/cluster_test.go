package hostmode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/localcluster"
)

// TestRolloutOnLocalCluster rolls a pool of 3 KWOK nodes from v1 to v2 on
// the local control plane of `bootroll cluster up` with the real
// controller (cmd/bootroll-controller) and host mode (`bootroll daemon
// --simulate-hosts FILE --nodes SELECTOR --kubeconfig K`, the command line
// sim/clusterrun runs), each as a process: every node stages, reboots
// (NotReady through the KWOK stage, one at a time for maxUnavailable 1),
// and comes back on v2 with a new boot ID; the pool ends UpToDate. Then
// v3, which fails to boot (FallBack), halts the pool after one node.
func TestRolloutOnLocalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: not with -short")
	}
	repo, err := localcluster.FindRepo(".")
	if err != nil {
		t.Fatal(err)
	}
	binDir := filepath.Join(repo, "bin", "k8s")
	if _, err := localcluster.FindBinaries(binDir); localcluster.IsMissingBinaries(err) {
		t.Skipf("skipping: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	build := exec.CommandContext(ctx, "go", "build", "-o", dir+"/", "./cmd/bootroll", "./cmd/bootroll-controller")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	clusterDir := filepath.Join(dir, "cluster")
	var progress bytes.Buffer
	st, err := localcluster.Up(ctx, localcluster.Options{Dir: clusterDir, BinDir: binDir, Repo: repo, Timeout: 2 * time.Minute, Progress: &progress})
	defer localcluster.Down(localcluster.DownOptions{Dir: clusterDir})
	if err != nil {
		t.Fatalf("cluster up: %v\n%s", err, progress.String())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testScheme(t)})
	if err != nil {
		t.Fatal(err)
	}

	scFile := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(scFile, []byte(fastScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	start := func(name string, args ...string) {
		log, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(dir, name), args...)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
			log.Close()
			if t.Failed() {
				b, _ := os.ReadFile(log.Name())
				t.Logf("%s log (last 4000 bytes):\n%s", name, tailBytes(b, 4000))
			}
		})
	}
	start("bootroll-controller", "--kubeconfig", st.Kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	start("bootroll", "daemon", "--simulate-hosts", scFile, "--nodes", "pool=hm-workers", "--kubeconfig", st.Kubeconfig)

	names := []string{"workers-0", "workers-1", "workers-2"}
	for _, name := range names {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"pool": "hm-workers", "kubernetes.io/hostname": name},
			Annotations: map[string]string{localcluster.KWOKNodeAnnotation: "fake"},
		}}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	getNode := func(name string) *corev1.Node {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			t.Fatal(err)
		}
		return &n
	}
	ready := func(n *corev1.Node) (bool, string) {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status == corev1.ConditionTrue, cond.Reason
			}
		}
		return false, ""
	}
	firstBoot := map[string]string{}
	waitUntil(t, ctx, "the nodes Ready with boot IDs, playing v1", func() bool {
		for _, name := range names {
			n := getNode(name)
			ok, _ := ready(n)
			if !ok || n.Status.NodeInfo.BootID == "" || n.Annotations[AnnotationBooted] != v1Ref {
				return false
			}
			firstBoot[name] = n.Status.NodeInfo.BootID
		}
		return true
	})

	one := intstr.FromInt32(1)
	pool := &v1alpha1.BootcNodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "hm-workers"},
		Spec: v1alpha1.BootcNodePoolSpec{
			NodeSelector: map[string]string{"pool": "hm-workers"},
			Image:        v1Ref,
			Rollout:      v1alpha1.RolloutSpec{MaxUnavailable: &one},
		},
	}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	upToDate := func() bool {
		var p v1alpha1.BootcNodePool
		if err := c.Get(ctx, client.ObjectKey{Name: pool.Name}, &p); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionUpToDate)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == p.Generation
	}
	waitUntil(t, ctx, "the pool UpToDate on v1", upToDate)

	began := time.Now()
	if err := c.Get(ctx, client.ObjectKey{Name: pool.Name}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Image = v2Ref
	if err := c.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	sawRebooting := map[string]bool{}
	maxAtOnce := 0
	waitUntil(t, ctx, "the pool UpToDate on v2", func() bool {
		at := 0
		for _, name := range names {
			n := getNode(name)
			if n.Annotations[localcluster.RebootingAnnotation] == "true" {
				at++
			}
			if ok, reason := ready(n); !ok && reason == "Rebooting" {
				sawRebooting[name] = true
			}
		}
		maxAtOnce = max(maxAtOnce, at)
		return upToDate()
	})
	t.Logf("rolled 3 nodes from v1 to v2 in %v", time.Since(began).Round(100*time.Millisecond))
	if maxAtOnce > 1 {
		t.Errorf("%d nodes rebooting at once, maxUnavailable is 1", maxAtOnce)
	}
	for _, name := range names {
		n := getNode(name)
		var bn v1alpha1.BootcNode
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &bn); err != nil {
			t.Fatal(err)
		}
		if bn.Status.Booted == nil || bn.Status.Booted.Digest != digestOf(v2Ref) {
			t.Errorf("%s: booted %+v, want v2", name, bn.Status.Booted)
		}
		if n.Status.NodeInfo.BootID == firstBoot[name] {
			t.Errorf("%s: boot ID unchanged", name)
		}
		if ok, reason := ready(n); !ok || n.Spec.Unschedulable {
			t.Errorf("%s: Ready %v (%s), unschedulable %v; want Ready and uncordoned", name, ok, reason, n.Spec.Unschedulable)
		}
		if !sawRebooting[name] {
			t.Logf("%s: its NotReady (reason Rebooting) fell between two polls", name)
		}
	}

	// v3 fails to boot (FallBack): the first node to reboot into it comes
	// back on v2, and the pool halts (failurePolicy Halt, maxFailures 1).
	if err := c.Get(ctx, client.ObjectKey{Name: pool.Name}, pool); err != nil {
		t.Fatal(err)
	}
	pool.Spec.Image = v3Ref
	if err := c.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the pool Halted", func() bool {
		var p v1alpha1.BootcNodePool
		if err := c.Get(ctx, client.ObjectKey{Name: pool.Name}, &p); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionHalted)
		return cond != nil && cond.Status == metav1.ConditionTrue
	})
	fellBack := 0
	for _, name := range names {
		var bn v1alpha1.BootcNode
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &bn); err != nil {
			t.Fatal(err)
		}
		if bn.Status.Booted == nil || bn.Status.Booted.Digest != digestOf(v2Ref) {
			t.Errorf("%s: booted %+v after the halt, want still v2", name, bn.Status.Booted)
		}
		if bn.Status.Daemon.LastReboot != nil && bn.Status.Daemon.LastReboot.Image == v3Ref {
			fellBack++
		}
	}
	if fellBack != 1 {
		t.Errorf("%d nodes rebooted into v3, want 1 (maxUnavailable 1, halt after the first failure)", fellBack)
	}
}

func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func digestOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

func tailBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return fmt.Sprintf("%s", b)
}
