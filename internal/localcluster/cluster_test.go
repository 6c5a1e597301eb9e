package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// clusterBinDir is where TestUpDown looks for the binaries: bin/k8s of the
// repository, or $KUBEBUILDER_ASSETS (make test sets it to bin/k8s).
func clusterBinDir(t *testing.T) string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(t), "bin", "k8s")
}

// TestUpDown starts the whole local control plane, has real Karpenter and
// kwok give a pending pod a Ready node, reboots that node through the
// node-rebooting stage, and stops everything.
func TestUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: not with -short")
	}
	binDir := clusterBinDir(t)
	if _, err := FindBinaries(binDir); IsMissingBinaries(err) {
		t.Skipf("skipping: %v", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var progress strings.Builder
	start := time.Now()
	st, err := Up(ctx, Options{Dir: dir, BinDir: binDir, Repo: repoRoot(t), Timeout: 90 * time.Second, Progress: &progress})
	t.Logf("up in %v:\n%s", time.Since(start).Round(100*time.Millisecond), progress.String())
	stopped := false
	defer func() {
		if !stopped {
			Down(DownOptions{Dir: dir})
		}
	}()
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	if len(st.Processes) != len(Order) {
		t.Fatalf("state lists %d processes, want %d", len(st.Processes), len(Order))
	}
	for _, name := range Order {
		if b, err := os.Stat(Layout{Dir: dir}.Log(name)); err != nil || b.Size() == 0 {
			t.Errorf("log of %s: %v (empty or missing)", name, err)
		}
	}
	if err := refuseRunning(Layout{Dir: dir}); err == nil {
		t.Errorf("a second up in the same directory is not refused")
	}

	c, err := newClient(st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// One replica that needs a whole core: no node exists, so Karpenter
	// must launch one and kwok must make it Ready.
	labels := map[string]string{"app": "needs-node"}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "needs-node", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.example/app:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
				}}},
			},
		},
	}
	provisionStart := time.Now()
	if err := c.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	var node string
	poll(ctx, t, "a Running pod of the Deployment on a Ready Karpenter node", func() (bool, string) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels(labels)); err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("pod %s on %q, %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &n); err != nil {
			return false, err.Error()
		}
		if n.Labels["karpenter.sh/nodepool"] != "default" || n.Annotations[KWOKNodeAnnotation] != "fake" {
			return false, fmt.Sprintf("node %s: labels %v, annotations %v: not a Karpenter KWOK node", n.Name, n.Labels, n.Annotations)
		}
		if ready(n) != corev1.ConditionTrue {
			return false, "node " + n.Name + " not Ready"
		}
		node = n.Name
		return true, ""
	})
	t.Logf("Karpenter + kwok: pod Running on Ready node %s in %v", node, time.Since(provisionStart).Round(100*time.Millisecond))

	// The node-rebooting stage: NotReady while annotated, Ready after.
	setRebooting := func(on bool) {
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(n.DeepCopy())
		if on {
			n.Annotations[RebootingAnnotation] = "true"
		} else {
			delete(n.Annotations, RebootingAnnotation)
		}
		if err := c.Patch(ctx, &n, patch); err != nil {
			t.Fatal(err)
		}
	}
	nodeReady := func(want corev1.ConditionStatus) func() (bool, string) {
		return func() (bool, string) {
			var n corev1.Node
			if err := c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
				return false, err.Error()
			}
			got := ready(n)
			return got == want, "Ready=" + string(got)
		}
	}
	setRebooting(true)
	poll(ctx, t, "node NotReady while annotated "+RebootingAnnotation, nodeReady(corev1.ConditionFalse))
	setRebooting(false)
	poll(ctx, t, "node Ready again without the annotation", nodeReady(corev1.ConditionTrue))

	stopStart := time.Now()
	if err := Down(DownOptions{Dir: dir, Progress: &progress}); err != nil {
		t.Fatalf("Down: %v", err)
	}
	stopped = true
	t.Logf("down in %v", time.Since(stopStart).Round(100*time.Millisecond))
	for _, p := range st.Processes {
		// The reaping goroutine of Up may need a moment after the exit.
		gone := false
		for i := 0; i < 50 && !gone; i++ {
			gone = errors.Is(syscall.Kill(p.PID, 0), syscall.ESRCH)
			if !gone {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if !gone {
			t.Errorf("%s (pid %d) still exists after Down", p.Name, p.PID)
		}
	}
	for _, name := range Order {
		if _, err := os.Stat(Layout{Dir: dir}.Log(name)); err != nil {
			t.Errorf("log of %s after Down: %v, want it kept", name, err)
		}
	}
}

func ready(n corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// poll calls f every 200ms until it returns true; it fails the test with
// f's last explanation after 30s or when ctx ends.
func poll(ctx context.Context, t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	last := ""
	for {
		ok, why := f()
		if ok {
			return
		}
		last = why
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; last: %s", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
