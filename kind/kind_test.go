// Package kind_test checks kind/ on machines without a container engine:
// the cluster config decodes with kind's own config API, the overlay
// renders and a real kube-apiserver accepts every object of it, the Chaos
// Mesh CRDs are those of the pinned module, and the make targets refuse to
// run without Docker.
package kind_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	yaml "go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"
)

const (
	overlayDir      = "overlay"
	defaultDir      = "../config/default"
	hostsFile       = "/etc/bootroll/hosts.yaml"
	controllerImage = "kind.local/bootroll/bootroll-controller:dev"
	daemonImage     = "kind.local/bootroll/bootroll:dev" // host mode is the CLI's daemon command
)

// decodeKindConfig decodes a kind cluster config as `kind create cluster
// --config` does (sigs.k8s.io/kind/pkg/internal/apis/config/encoding.Parse,
// which other modules cannot import): apiVersion and kind first, then the
// v1alpha4 types with go.yaml.in/yaml/v3 and unknown fields refused.
func decodeKindConfig(data []byte) (*kindv1alpha4.Cluster, error) {
	var tm struct {
		Kind       string `yaml:"kind"`
		APIVersion string `yaml:"apiVersion"`
	}
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion != "kind.x-k8s.io/v1alpha4" || tm.Kind != "Cluster" {
		return nil, &unknownKind{tm.APIVersion, tm.Kind}
	}
	cfg := &kindv1alpha4.Cluster{}
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	if err := d.Decode(cfg); err != nil {
		return nil, err
	}
	kindv1alpha4.SetDefaultsCluster(cfg)
	return cfg, nil
}

type unknownKind struct{ apiVersion, kind string }

func (e *unknownKind) Error() string {
	return "not a kind.x-k8s.io/v1alpha4 Cluster: apiVersion " + e.apiVersion + ", kind " + e.kind
}

// TestClusterConfig: kind/cluster.yaml decodes strictly with kind's config
// API into one control plane and three labelled workers; the same file with
// an unknown field is refused, so the decoding is strict.
func TestClusterConfig(t *testing.T) {
	data, err := os.ReadFile("cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := decodeKindConfig(data)
	if err != nil {
		t.Fatalf("kind/cluster.yaml: %v", err)
	}
	var roles []string
	for _, n := range cfg.Nodes {
		roles = append(roles, string(n.Role))
		if n.Role == kindv1alpha4.WorkerRole && n.Labels["bootroll.dev/test-pool"] != "workers" {
			t.Errorf("worker %+v lacks the label bootroll.dev/test-pool=workers (kind/README.md's pool selects it)", n)
		}
	}
	if want := []string{"control-plane", "worker", "worker", "worker"}; !slices.Equal(roles, want) {
		t.Errorf("kind/cluster.yaml has nodes %v, want %v", roles, want)
	}
	if cfg.Name != "bootroll" {
		t.Errorf("cluster name %q, want bootroll (KIND_CLUSTER in the Makefile)", cfg.Name)
	}

	bad := bytes.Replace(data, []byte("- role: worker\n"), []byte("- role: worker\n  rol: worker\n"), 1)
	if _, err := decodeKindConfig(bad); err == nil || !strings.Contains(err.Error(), "rol") {
		t.Errorf("a node with the unknown field rol: error %v, want one naming it: the decoding is not strict", err)
	}
}

func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		// Through JSON: the API machinery's number types (int64, float64).
		j, err := sigsyaml.YAMLToJSON(y)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("kustomize build %s: %v", dir, err)
		}
		objs = append(objs, u)
	}
	return objs
}

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s: %v", key(u), err)
	}
	return out
}

// TestOverlay: kind/overlay renders config/default, object for object, plus
// the hosts ConfigMap, with the images kind-deploy loads and the daemon in
// host mode: exactly `daemon --simulate-hosts=/etc/bootroll/hosts.yaml` of the CLI image, the
// ConfigMap there, and nothing of the host (no host root, no hostPID, not
// privileged).
func TestOverlay(t *testing.T) {
	objs := render(t, overlayDir)
	var got, want []string
	var daemon *appsv1.DaemonSet
	var controller *appsv1.Deployment
	var hosts *corev1.ConfigMap
	for _, u := range objs {
		switch {
		case u.GetKind() == "ConfigMap" && strings.HasPrefix(u.GetName(), "bootroll-hosts-"):
			hosts = typed[corev1.ConfigMap](t, u)
			continue // not in config/default
		case u.GetKind() == "DaemonSet" && u.GetName() == "bootroll-daemon":
			daemon = typed[appsv1.DaemonSet](t, u)
		case u.GetKind() == "Deployment" && u.GetName() == "bootroll-controller":
			controller = typed[appsv1.Deployment](t, u)
		}
		got = append(got, key(u))
	}
	for _, u := range render(t, defaultDir) {
		want = append(want, key(u))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("kind/overlay renders\n  %v\nbesides the hosts ConfigMap; config/default renders\n  %v", got, want)
	}
	if daemon == nil || controller == nil || hosts == nil {
		t.Fatalf("kind/overlay lacks the daemon (%v), the controller (%v) or the hosts ConfigMap (%v)", daemon != nil, controller != nil, hosts != nil)
	}
	if img := controller.Spec.Template.Spec.Containers[0].Image; img != controllerImage {
		t.Errorf("controller image %s, want %s (what make kind-deploy loads)", img, controllerImage)
	}

	spec := daemon.Spec.Template.Spec
	c := spec.Containers[0]
	if c.Image != daemonImage {
		t.Errorf("daemon image %s, want %s (what make kind-deploy loads)", c.Image, daemonImage)
	}
	if want := []string{"daemon", "--simulate-hosts=" + hostsFile}; !slices.Equal(c.Args, want) {
		t.Errorf("daemon args %q, want %q", c.Args, want)
	}
	if spec.HostPID || (c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged) {
		t.Errorf("the host-mode daemon runs with hostPID %v, securityContext %+v: it needs nothing of the host", spec.HostPID, c.SecurityContext)
	}
	mounted := ""
	for _, m := range c.VolumeMounts {
		if strings.HasPrefix(hostsFile, m.MountPath+"/") {
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.ConfigMap != nil {
					mounted = v.ConfigMap.Name
				}
			}
		}
	}
	if mounted != hosts.Name {
		t.Errorf("%s comes from ConfigMap %q, want the overlay's %s", hostsFile, mounted, hosts.Name)
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("the host-mode daemon mounts hostPath %s", v.HostPath.Path)
		}
	}
	if _, ok := hosts.Data[filepath.Base(hostsFile)]; !ok {
		t.Errorf("ConfigMap %s has keys %v, want %s", hosts.Name, keys(hosts.Data), filepath.Base(hostsFile))
	}
	if c.Env == nil || c.Env[0].Name != "NODE_NAME" {
		t.Errorf("daemon env %v: the node name must still come from the pod (NODE_NAME)", c.Env)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestHostsFileIsAScenario: the overlay's hosts.yaml is a valid scenario
// file, checked by `bootroll scenario validate` (this package may not
// import the twin).
func TestHostsFileIsAScenario(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the bootroll binary")
	}
	bin := filepath.Join(t.TempDir(), "bootroll")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/bootroll").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/bootroll: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "scenario", "validate", filepath.Join(overlayDir, "hosts.yaml")).CombinedOutput()
	if err != nil {
		t.Errorf("bootroll scenario validate kind/overlay/hosts.yaml: %v\n%s", err, out)
	}
	// The check checks: a host section with a field the format lacks fails.
	data, err := os.ReadFile(filepath.Join(overlayDir, "hosts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(bad, bytes.Replace(data, []byte("host:\n"), []byte("host:\n  rebootTime: 1m\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "scenario", "validate", bad).CombinedOutput(); err == nil {
		t.Errorf("a hosts.yaml with host.rebootTime validates:\n%s", out)
	}
}

// TestOverlayOnAPIServer: a real kube-apiserver accepts every object of
// kind/overlay: its CRDs (config/crd/bases, through config/default) are
// installed, its Namespaces created, and every other object created with a
// server-side dry run and strict field validation. The daemon DaemonSet
// with a field the schema lacks is refused, so the dry run does validate.
func TestOverlayOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a kube-apiserver")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: this test needs a real kube-apiserver and etcd. " +
			"Run `make test`, which builds them into bin/k8s and sets KUBEBUILDER_ASSETS.")
	}
	objs := render(t, overlayDir)
	var crds []*apiextensionsv1.CustomResourceDefinition
	var namespaces, rest []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, typed[apiextensionsv1.CustomResourceDefinition](t, u))
		case "Namespace":
			namespaces = append(namespaces, u)
		default:
			rest = append(rest, u)
		}
	}
	if len(crds) != 3 || len(namespaces) == 0 {
		t.Fatalf("kind/overlay renders %d CRDs and %d Namespaces, want bootroll's 3 and its namespaces", len(crds), len(namespaces))
	}
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{CRDs: crds}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest with the overlay's CRDs: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range namespaces {
		if err := c.Create(ctx, ns, client.FieldValidation("Strict")); err != nil {
			t.Fatalf("create %s: %v", key(ns), err)
		}
	}
	var daemon *unstructured.Unstructured
	for _, u := range rest {
		if u.GetKind() == "DaemonSet" {
			daemon = u.DeepCopy()
		}
		if err := c.Create(ctx, u.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			t.Errorf("dry-run create %s: %v", key(u), err)
		}
	}
	if daemon == nil {
		t.Fatal("no DaemonSet in kind/overlay")
	}
	if err := unstructured.SetNestedField(daemon.Object, true, "spec", "template", "spec", "hostPIDs"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, daemon, client.DryRunAll, client.FieldValidation("Strict")); err == nil || !strings.Contains(err.Error(), "hostPIDs") {
		t.Errorf("a DaemonSet with the unknown field hostPIDs: error %v, want one naming it: the dry run does not validate", err)
	}
}

// TestChaosMeshCRDs: kind/chaos-mesh-crds holds what controller-gen
// generates now from the chaos-mesh/api module that go.mod pins, for the
// kinds sim/chaos emits. After a change of that pin, regenerate with the
// command of kind/chaos-mesh-crds/README.md.
func TestChaosMeshCRDs(t *testing.T) {
	gen, err := filepath.Abs("../bin/controller-gen")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(gen); err != nil {
		t.Fatalf("%v; run `make tools` (it builds bin/controller-gen)", err)
	}
	tmp := t.TempDir()
	cmd := exec.Command(gen, "crd", "paths=github.com/chaos-mesh/chaos-mesh/api/v1alpha1", "output:crd:artifacts:config="+tmp)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}
	files, err := filepath.Glob(filepath.Join("chaos-mesh-crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range files {
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(tmp, filepath.Base(f)))
		if err != nil {
			t.Errorf("kind/%s: controller-gen no longer generates it: %v", f, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("kind/%s differs from what controller-gen generates from the pinned chaos-mesh/api: regenerate it (kind/chaos-mesh-crds/README.md)", f)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := sigsyaml.UnmarshalStrict(got, &crd); err != nil {
			t.Fatalf("kind/%s: %v", f, err)
		}
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	sort.Strings(kinds)
	if want := []string{"NetworkChaos", "PodChaos"}; !slices.Equal(kinds, want) {
		t.Errorf("kind/chaos-mesh-crds holds %v, want the kinds sim/chaos emits, %v", kinds, want)
	}
}

// TestKindTargetsNeedDocker: where `docker info` fails (as on the
// development machines), each kind-* make target stops at once with a
// message that says so.
func TestKindTargetsNeedDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs make")
	}
	if exec.Command("docker", "info").Run() == nil {
		t.Skip("docker info works here: the targets would really run")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	for _, target := range []string{"kind-up", "kind-deploy", "kind-scenario", "kind-down"} {
		cmd := exec.Command("make", "--no-print-directory", target)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "KIND=/nonexistent/kind") // never reached
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("make %s succeeded without Docker:\n%s", target, out)
			continue
		}
		if !strings.Contains(string(out), "docker info failed") {
			t.Errorf("make %s without Docker says\n%s\nwant a message that docker info failed", target, out)
		}
		if strings.Contains(string(out), "go run") || strings.Contains(string(out), "hack/images") {
			t.Errorf("make %s without Docker did work before failing:\n%s", target, out)
		}
	}
}
