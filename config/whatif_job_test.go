package config_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestWhatifJobOnAPIServer: the manifest of bootroll whatif --emit-job (a
// ConfigMap and an Indexed Job) is accepted by a real kube-apiserver with
// a server-side dry run and strict field validation, with an emptyDir and
// with a PVC for the shard files; the same Job made invalid is refused, so
// the dry run does validate.
func TestWhatifJobOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the bootroll binary and starts a kube-apiserver")
	}
	bin := filepath.Join(t.TempDir(), "bootroll")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/bootroll").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/bootroll: %v\n%s", err, out)
	}
	_, c := startEnvtest(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sweeps"}}); err != nil {
		t.Fatal(err)
	}
	sweep := []string{"whatif", "../scenarios/whatif/pool-200-static.yaml", "--vary", "bootroll.pools[0].maxUnavailable=1,2,5%,10%,20%", "--seeds", "50", "--emit-job"}
	for _, extra := range [][]string{
		{"--shards", "3"},
		{"--shards", "10", "--parallelism", "4", "--namespace", "sweeps", "--results-pvc", "whatif-results", "--cpu", "1500m", "--memory", "3Gi", "--image", "registry.example/bootroll:v1"},
	} {
		out, err := exec.Command(bin, append(sweep, extra...)...).Output()
		if err != nil {
			t.Fatalf("%v: %v", extra, err)
		}
		var job *unstructured.Unstructured
		for _, doc := range strings.Split(string(out), "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%v: %v\n%s", extra, err, doc)
			}
			if u.GetKind() == "Job" {
				job = u.DeepCopy() // before the dry run fills in the selector
			}
			if err := c.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
				t.Errorf("%v: dry-run create %s %s: %v", extra, u.GetKind(), u.GetName(), err)
			}
		}
		if job == nil {
			t.Fatalf("%v: no Job in the manifest:\n%s", extra, out)
		}
		bad := job.DeepCopy()
		if err := unstructured.SetNestedField(bad.Object, "Always", "spec", "template", "spec", "restartPolicy"); err != nil {
			t.Fatal(err)
		}
		err = c.Create(ctx, bad, client.DryRunAll, client.FieldValidation("Strict"))
		if err == nil || !strings.Contains(err.Error(), "restartPolicy") {
			t.Errorf("%v: a Job with restartPolicy Always: error %v, want one about restartPolicy: the dry run does not validate", extra, err)
		}
	}
}
