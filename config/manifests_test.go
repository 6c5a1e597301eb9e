// Package config_test keeps the deployment manifests in config/ from
// drifting from the code: every manifest decodes strictly into its Go type,
// the generated CRDs and controller role match what controller-gen makes of
// the code now, the kustomizations list every manifest, the RBAC is wired to
// the workloads that use it, and (on a real API server) the manifests are
// accepted and grant what the components need and no more.
package config_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// The tests run in config/; paths are relative to it.
const (
	moduleRoot    = ".."
	controllerGen = "../bin/controller-gen"
	defaultDir    = "default"

	namespace         = "bootroll-system"
	controllerName    = "bootroll-controller"
	daemonName        = "bootroll-daemon"
	controllerImage   = "bootroll-controller"
	daemonImage       = "bootroll-daemon"
	daemonPolicyName  = "bootroll-daemon-own-bootcnode"
	controllerRoleYML = "rbac/role.yaml"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strictDecoder is the API machinery's YAML decoder in strict mode: unknown
// and duplicate fields are errors, and field names match case-sensitively.
var strictDecoder = serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme, scheme,
	serializerjson.SerializerOptions{Yaml: true, Strict: true})

// manifest is one object of a YAML file in config/.
type manifest struct {
	file string // relative to config/
	obj  client.Object
}

func (m manifest) key() string { return objKey(m.obj) }

func objKey(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if o.GetNamespace() == "" {
		return kind + "/" + o.GetName()
	}
	return kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

// kustomization is the part of a kustomization.yaml these manifests use;
// decoding it strictly fails on any other field, so a new field means
// teaching this test about it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

func isKustomization(path string) bool { return filepath.Base(path) == "kustomization.yaml" }

// yamlFiles lists the YAML files below config/, kustomizations included.
func yamlFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir // test fixtures, not bootroll's manifests
		}
		if d.IsDir() && path == optionalPrometheusDir {
			// Optional, not in config/default, and of kinds (monitoring.coreos.com)
			// this package has no Go types for: helm_test.go checks it.
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// splitYAML returns the non-empty documents of a multi-document YAML file.
func splitYAML(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue // only comments or "---"
		}
		docs = append(docs, doc)
	}
}

// decodeFile strictly decodes every document of a manifest file into the
// typed object of its kind.
func decodeFile(path string) ([]manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := splitYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no objects", path)
	}
	var out []manifest
	var errs []error
	for i, doc := range docs {
		obj, gvk, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s, document %d: %w", path, i+1, err))
			continue
		}
		co, ok := obj.(client.Object)
		if !ok {
			errs = append(errs, fmt.Errorf("%s, document %d: %s is not an object with metadata", path, i+1, gvk))
			continue
		}
		if co.GetName() == "" {
			errs = append(errs, fmt.Errorf("%s, document %d: %s has no metadata.name", path, i+1, gvk.Kind))
		}
		out = append(out, manifest{file: path, obj: co})
	}
	return out, errors.Join(errs...)
}

func readKustomization(path string) (*kustomization, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		return nil, fmt.Errorf("%s: apiVersion/kind %s/%s, want kustomize.config.k8s.io/v1beta1/Kustomization", path, k.APIVersion, k.Kind)
	}
	return &k, nil
}

// loadAll decodes every manifest below config/ and fails the test on any
// error.
func loadAll(t *testing.T) []manifest {
	t.Helper()
	var all []manifest
	for _, f := range yamlFiles(t) {
		if isKustomization(f) {
			continue
		}
		ms, err := decodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ms...)
	}
	return all
}

// byKey indexes manifests by kind/namespace/name and fails on duplicates.
func byKey(t *testing.T, ms []manifest) map[string]manifest {
	t.Helper()
	idx := map[string]manifest{}
	for _, m := range ms {
		if prev, ok := idx[m.key()]; ok {
			t.Errorf("%s is defined twice: in %s and %s", m.key(), prev.file, m.file)
		}
		idx[m.key()] = m
	}
	return idx
}

func get[T client.Object](t *testing.T, idx map[string]manifest, key string) T {
	t.Helper()
	m, ok := idx[key]
	if !ok {
		t.Fatalf("no %s in config/", key)
	}
	o, ok := m.obj.(T)
	if !ok {
		t.Fatalf("%s in %s is a %T", key, m.file, m.obj)
	}
	return o
}

// TestManifestsDecodeStrictly: every YAML file in config/ holds only objects
// of known kinds without unknown or duplicate fields, and every
// kustomization.yaml only fields this test knows.
func TestManifestsDecodeStrictly(t *testing.T) {
	files := yamlFiles(t)
	if len(files) == 0 {
		t.Fatal("no YAML files found in config/")
	}
	n := 0
	for _, f := range files {
		if isKustomization(f) {
			if _, err := readKustomization(f); err != nil {
				t.Error(err)
			}
			continue
		}
		ms, err := decodeFile(f)
		if err != nil {
			t.Error(err)
		}
		n += len(ms)
	}
	t.Logf("%d files, %d objects", len(files), n)
}

// clusterScoped are the kinds in config/ that have no namespace.
var clusterScoped = []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

// pullSecretNamespace holds only the mirrored pull secrets of
// PinnedImageSets (pinned.PinnedSecretNamespace) and the Roles that let
// the controller write and the daemons read them.
const pullSecretNamespace = "bootroll-pull-secrets"

// TestManifestNamespaces: every namespaced object is in bootroll-system
// (nothing sets it later, see config/default), except the pull-secret
// Roles in bootroll-pull-secrets; no cluster-scoped one has a namespace, and
// both Namespaces are defined.
func TestManifestNamespaces(t *testing.T) {
	idx := byKey(t, loadAll(t))
	for _, ns := range []string{namespace, pullSecretNamespace} {
		if _, ok := idx["Namespace/"+ns]; !ok {
			t.Errorf("no Namespace %s in config/", ns)
		}
	}
	for _, m := range idx {
		kind := m.obj.GetObjectKind().GroupVersionKind().Kind
		switch ns := m.obj.GetNamespace(); {
		case slices.Contains(clusterScoped, kind) && ns != "":
			t.Errorf("config/%s: %s is cluster-scoped but has namespace %q", m.file, m.key(), ns)
		case ns == pullSecretNamespace && (kind == "Role" || kind == "RoleBinding"):
		case !slices.Contains(clusterScoped, kind) && ns != namespace:
			t.Errorf("config/%s: %s has namespace %q, want %q (add %s to clusterScoped if it has none)", m.file, m.key(), ns, namespace, kind)
		}
	}
}

// resolveKustomization returns the manifest files a kustomization includes,
// recursively, relative to config/.
func resolveKustomization(t *testing.T, dir string, seen map[string]bool) []string {
	t.Helper()
	if seen[dir] {
		t.Fatalf("kustomization cycle through %s", dir)
	}
	seen[dir] = true
	k, err := readKustomization(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s/kustomization.yaml: resource %s: %v", dir, r, err)
			continue
		}
		if fi.IsDir() {
			files = append(files, resolveKustomization(t, p, seen)...)
		} else {
			files = append(files, filepath.Clean(p))
		}
	}
	return files
}

// TestKustomizationsIncludeEveryManifest: config/default includes every
// manifest file (so a new CRD or role cannot be forgotten), every listed
// resource exists, and the images it sets are the ones the workloads use.
func TestKustomizationsIncludeEveryManifest(t *testing.T) {
	included := map[string]bool{}
	for _, f := range resolveKustomization(t, defaultDir, map[string]bool{}) {
		if included[f] {
			t.Errorf("%s is included twice by config/%s", f, defaultDir)
		}
		included[f] = true
	}
	for _, f := range yamlFiles(t) {
		if !isKustomization(f) && !included[f] {
			t.Errorf("config/%s is not included by config/%s: add it to the kustomization.yaml of its directory", f, defaultDir)
		}
	}

	k, err := readKustomization(filepath.Join(defaultDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Namespace != "" {
		t.Errorf("config/%s sets namespace %q: kustomize would not change the namespace written in the daemon policy and the generated Role, "+
			"and would put one on cluster-scoped ValidatingAdmissionPolicies", defaultDir, k.Namespace)
	}
	var names []string
	for _, im := range k.Images {
		names = append(names, im.Name)
	}
	idx := byKey(t, loadAll(t))
	var used []string
	for _, m := range idx {
		if spec := podSpec(m.obj); spec != nil {
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				used = append(used, c.Image)
			}
		}
	}
	sort.Strings(names)
	sort.Strings(used)
	if !slices.Equal(names, used) {
		t.Errorf("config/%s sets images %v, the workloads use %v", defaultDir, names, used)
	}
}

func podSpec(o client.Object) *corev1.PodSpec {
	switch w := o.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &w.Spec.Template.Spec
	case *corev1.Pod:
		return &w.Spec
	}
	return nil
}

// runControllerGen runs bin/controller-gen in the module root.
func runControllerGen(t *testing.T, args ...string) {
	t.Helper()
	if _, err := os.Stat(controllerGen); err != nil {
		t.Fatalf("%s: %v; run `make manifests` (it builds bin/controller-gen and regenerates config/)", controllerGen, err)
	}
	abs, err := filepath.Abs(controllerGen)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(abs, args...)
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// compareGenerated fails for every file of want (generated now) that
// differs from, or is missing in, the checked-in got, and for every file of
// got that controller-gen no longer generates. files are base names.
func compareGenerated(t *testing.T, gotDir, wantDir string, gotFiles []string) {
	t.Helper()
	entries, err := os.ReadDir(wantDir)
	if err != nil {
		t.Fatal(err)
	}
	generated := map[string]bool{}
	for _, e := range entries {
		generated[e.Name()] = true
		want, err := os.ReadFile(filepath.Join(wantDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(gotDir, e.Name()))
		if err != nil {
			t.Errorf("config/%s/%s is missing: run `make manifests`", gotDir, e.Name())
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("config/%s/%s is out of date (%s): run `make manifests`", gotDir, e.Name(), firstDiff(got, want))
		}
	}
	for _, f := range gotFiles {
		if !generated[f] {
			t.Errorf("config/%s/%s is no longer generated by controller-gen: delete it (and its kustomization entry)", gotDir, f)
		}
	}
}

func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d is %q, controller-gen now writes %q", i+1, gl, wl)
		}
	}
	return "same lines, different bytes"
}

// TestCRDsAreGenerated: config/crd/bases is what controller-gen generates
// from api/ now.
func TestCRDsAreGenerated(t *testing.T) {
	tmp := t.TempDir()
	runControllerGen(t, "crd", "paths=./api/...", "output:crd:artifacts:config="+tmp)
	entries, err := os.ReadDir("crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	compareGenerated(t, "crd/bases", tmp, files)
}

// TestControllerRoleIsGenerated: config/rbac/role.yaml is what
// controller-gen generates from the +kubebuilder:rbac markers of
// controller/ now (the same command as `make manifests`).
func TestControllerRoleIsGenerated(t *testing.T) {
	tmp := t.TempDir()
	runControllerGen(t, "rbac:roleName="+controllerName, "paths=./controller/...", "output:rbac:artifacts:config="+tmp)
	compareGenerated(t, "rbac", tmp, []string{filepath.Base(controllerRoleYML)})
}

// grants flattens RBAC rules into "group/resource:verb" strings (resource
// names are not used by these roles and are rejected).
func grants(t *testing.T, where string, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	var out []string
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: rule %v uses resourceNames or nonResourceURLs; teach this test about them", where, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("%s: wildcard in rule %v", where, r)
					}
					out = append(out, g+"/"+res+":"+v)
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// boundGrants is what the manifests grant a service account: the rules of
// every role bound to it, as "group/resource:verb" strings, with the
// namespace for grants of a Role ("ns:group/resource:verb").
func boundGrants(t *testing.T, idx map[string]manifest, ns, sa string) []string {
	t.Helper()
	var out []string
	isSubject := func(subjects []rbacv1.Subject, bindingNS string) bool {
		for _, s := range subjects {
			sns := s.Namespace
			if sns == "" {
				sns = bindingNS
			}
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && sns == ns {
				return true
			}
		}
		return false
	}
	for _, m := range idx {
		switch b := m.obj.(type) {
		case *rbacv1.ClusterRoleBinding:
			if isSubject(b.Subjects, "") {
				cr := get[*rbacv1.ClusterRole](t, idx, "ClusterRole/"+b.RoleRef.Name)
				out = append(out, grants(t, "ClusterRole "+cr.Name, cr.Rules)...)
			}
		case *rbacv1.RoleBinding:
			if isSubject(b.Subjects, b.Namespace) {
				var rules []rbacv1.PolicyRule
				if b.RoleRef.Kind == "ClusterRole" {
					rules = get[*rbacv1.ClusterRole](t, idx, "ClusterRole/"+b.RoleRef.Name).Rules
				} else {
					rules = get[*rbacv1.Role](t, idx, "Role/"+b.Namespace+"/"+b.RoleRef.Name).Rules
				}
				for _, g := range grants(t, "RoleBinding "+b.Name, rules) {
					out = append(out, b.Namespace+":"+g)
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestRBACWiring: every binding refers to a role and service accounts that
// exist, each workload runs as a service account that exists, the daemon
// gets exactly its few grants, nothing grants secrets cluster-wide, and
// the daemon policy names the daemon's service account.
func TestRBACWiring(t *testing.T) {
	idx := byKey(t, loadAll(t))
	for _, m := range idx {
		switch b := m.obj.(type) {
		case *rbacv1.ClusterRoleBinding:
			if b.RoleRef.Kind != "ClusterRole" {
				t.Errorf("%s (%s): roleRef kind %s", m.key(), m.file, b.RoleRef.Kind)
			} else if _, ok := idx["ClusterRole/"+b.RoleRef.Name]; !ok {
				t.Errorf("%s (%s): no ClusterRole %s in config/", m.key(), m.file, b.RoleRef.Name)
			}
			checkSubjects(t, idx, m, b.Subjects, "")
		case *rbacv1.RoleBinding:
			key := "Role/" + b.Namespace + "/" + b.RoleRef.Name
			if b.RoleRef.Kind == "ClusterRole" {
				key = "ClusterRole/" + b.RoleRef.Name
			}
			if _, ok := idx[key]; !ok {
				t.Errorf("%s (%s): no %s in config/", m.key(), m.file, key)
			}
			checkSubjects(t, idx, m, b.Subjects, b.Namespace)
		case *rbacv1.ClusterRole:
			for _, g := range grants(t, m.key(), b.Rules) {
				if strings.HasPrefix(g, "/secrets:") || strings.HasPrefix(g, "/configmaps:") {
					t.Errorf("%s (%s) grants %s cluster-wide; use a Role in %s", m.key(), m.file, g, namespace)
				}
			}
		}
		if spec := podSpec(m.obj); spec != nil {
			if _, ok := idx["ServiceAccount/"+m.obj.GetNamespace()+"/"+spec.ServiceAccountName]; !ok || spec.ServiceAccountName == "" {
				t.Errorf("%s (%s) runs as service account %q, which is not in config/", m.key(), m.file, spec.ServiceAccountName)
			}
		}
	}

	ds := get[*appsv1.DaemonSet](t, idx, "DaemonSet/"+namespace+"/"+daemonName)
	daemonSA := ds.Spec.Template.Spec.ServiceAccountName
	wantDaemon := []string{
		"/nodes:get", // its own Node before a reboot (nodedaemon.NodeFacts)
		pullSecretNamespace + ":/secrets:get",
		"bootroll.dev/bootcnodes/status:patch",
		"bootroll.dev/bootcnodes:list",
		"bootroll.dev/bootcnodes:watch",
	}
	if got := boundGrants(t, idx, namespace, daemonSA); !slices.Equal(got, wantDaemon) {
		t.Errorf("service account %s/%s of the node daemon is granted\n  %v\nwant exactly\n  %v", namespace, daemonSA, got, wantDaemon)
	}

	dep := get[*appsv1.Deployment](t, idx, "Deployment/"+namespace+"/"+controllerName)
	ctrlGrants := boundGrants(t, idx, namespace, dep.Spec.Template.Spec.ServiceAccountName)
	for _, want := range []string{
		"bootroll.dev/bootcnodepools:watch",
		"bootroll.dev/bootcnodes:create",
		"/pods/eviction:create",
		namespace + ":/secrets:get",
		namespace + ":coordination.k8s.io/leases:update",
	} {
		if !slices.Contains(ctrlGrants, want) {
			t.Errorf("the controller's service account lacks %s; it has %v", want, ctrlGrants)
		}
	}

	vap := get[*admissionregistrationv1.ValidatingAdmissionPolicy](t, idx, "ValidatingAdmissionPolicy/"+daemonPolicyName)
	user := fmt.Sprintf("'system:serviceaccount:%s:%s'", ds.Namespace, daemonSA)
	found := false
	for _, mc := range vap.Spec.MatchConditions {
		found = found || strings.Contains(mc.Expression, user)
	}
	if !found {
		t.Errorf("ValidatingAdmissionPolicy %s does not match the daemon's user %s in a matchCondition", vap.Name, user)
	}
	bound := false
	for _, m := range idx {
		if b, ok := m.obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok && b.Spec.PolicyName == vap.Name {
			bound = slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny)
		}
	}
	if !bound {
		t.Errorf("no ValidatingAdmissionPolicyBinding with action Deny for %s", vap.Name)
	}
}

func checkSubjects(t *testing.T, idx map[string]manifest, m manifest, subjects []rbacv1.Subject, bindingNS string) {
	t.Helper()
	if len(subjects) == 0 {
		t.Errorf("%s (%s) has no subjects", m.key(), m.file)
	}
	for _, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind {
			continue
		}
		ns := s.Namespace
		if ns == "" {
			ns = bindingNS
		}
		if _, ok := idx["ServiceAccount/"+ns+"/"+s.Name]; !ok {
			t.Errorf("%s (%s) binds service account %s/%s, which is not in config/", m.key(), m.file, ns, s.Name)
		}
	}
}

// tolerates reports whether tols tolerate taint (the scheduler's rule).
func tolerates(tols []corev1.Toleration, taint corev1.Taint) bool {
	for _, t := range tols {
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			if t.Key == "" || t.Key == taint.Key {
				return true
			}
		case corev1.TolerationOpEqual, "":
			if t.Key == taint.Key && t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}

func envFieldRef(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// TestDaemonSet: the daemon can reach its host and knows its node, and it
// runs on every node it may have to update.
func TestDaemonSet(t *testing.T) {
	idx := byKey(t, loadAll(t))
	ds := get[*appsv1.DaemonSet](t, idx, "DaemonSet/"+namespace+"/"+daemonName)
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Error("the daemon needs hostPID: true to enter the host's namespaces (nsenter -t 1)")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("the daemon has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != daemonImage {
		t.Errorf("daemon image %q, want %q (set by config/%s)", c.Image, daemonImage, defaultDir)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Error("the daemon container must be privileged to run bootc on the host")
	}
	if got := envFieldRef(c, "NODE_NAME"); got != "spec.nodeName" {
		t.Errorf("daemon env NODE_NAME comes from %q, want fieldRef spec.nodeName", got)
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		t.Errorf("daemon has a memory limit %s: bootc runs in the pod's cgroup and must not be OOM-killed mid-stage", lim.String())
	}
	for _, taint := range []corev1.Taint{
		{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Effect: corev1.TaintEffectNoSchedule},
		{Key: v1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
	} {
		if !tolerates(spec.Tolerations, taint) {
			t.Errorf("the daemon does not tolerate taint %s", taint.ToString())
		}
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("daemon priorityClassName %q, want system-node-critical (it must not be preempted or evicted before workloads)", spec.PriorityClassName)
	}
	checkProbes(t, "daemon", c)

	// Every socket the daemon tries for the runtime is the host's: a
	// hostPath volume mounted where the daemon looks, mapping the path it
	// tries to the runtime's socket on the host.
	args := map[string]string{}
	for _, a := range c.Args {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k] = v
		}
	}
	criSocket, ok := args["--cri-socket"]
	if !ok {
		criSocket = "auto" // the flag's default
	}
	if criSocket != "auto" {
		t.Fatalf("the daemon runs with --cri-socket=%s; want auto, which finds containerd's or CRI-O's socket", criSocket)
	}
	tried := cri.Candidates(args["--host-root"])
	for i, sock := range tried {
		host, ok := hostPathOf(spec, c, sock)
		if !ok {
			t.Errorf("the daemon tries the runtime socket %s, which no hostPath volume mounts", sock)
			continue
		}
		if want := cri.WellKnownSockets[i]; host != want {
			t.Errorf("the daemon's %s is the host's %s, want %s", sock, host, want)
		}
	}
}

// hostPathOf maps path, as container c of spec sees it, to the host's
// path through the hostPath volume mounted deepest above it.
func hostPathOf(spec corev1.PodSpec, c corev1.Container, path string) (string, bool) {
	best := -1
	var host string
	for _, m := range c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || len(m.MountPath) <= best {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				best, host = len(m.MountPath), filepath.Join(v.HostPath.Path, m.SubPath, rel)
			}
		}
	}
	return host, best >= 0
}

// checkProbes: c has HTTP liveness and readiness probes on /healthz and
// /readyz, on the port its --health-probe-bind-address serves.
func checkProbes(t *testing.T, what string, c corev1.Container) {
	t.Helper()
	probePort := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address="); ok {
			probePort = v[strings.LastIndex(v, ":")+1:]
		}
	}
	if probePort == "" {
		t.Errorf("the %s sets no --health-probe-bind-address for its probes", what)
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	for _, pr := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("the %s has no HTTP %s probe", what, pr.name)
			continue
		}
		if pr.probe.HTTPGet.Path != pr.path {
			t.Errorf("the %s's %s probe gets %s, want %s", what, pr.name, pr.probe.HTTPGet.Path, pr.path)
		}
		port := pr.probe.HTTPGet.Port.String()
		if n, ok := ports[port]; ok {
			port = n
		}
		if port != probePort {
			t.Errorf("the %s's %s probe on port %s, --health-probe-bind-address on port %q", what, pr.name, port, probePort)
		}
	}
}

// TestDaemonSetFlagsExist: every flag the DaemonSet passes is one the
// daemon binary has (its --help lists it).
func TestDaemonSetFlagsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the daemon binary")
	}
	idx := byKey(t, loadAll(t))
	ds := get[*appsv1.DaemonSet](t, idx, "DaemonSet/"+namespace+"/"+daemonName)
	bin := filepath.Join(t.TempDir(), "bootroll-daemon")
	build := exec.Command("go", "build", "-o", bin, "../cmd/bootroll-daemon")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/bootroll-daemon: %v\n%s", err, out)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, line := range strings.Split(string(help), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
			flags[strings.Fields(f)[0]] = true
		}
	}
	if !flags["node-name"] {
		t.Fatalf("the daemon's --help lists no flags:\n%s", help)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			name, ok := strings.CutPrefix(a, "--")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(name, "=")
			if !flags[name] {
				t.Errorf("the DaemonSet passes %s, which bootroll-daemon does not have", a)
			}
		}
	}
}

// TestControllerDeployment: the controller runs locked down, with the
// flags and probes its binary serves.
func TestControllerDeployment(t *testing.T) {
	idx := byKey(t, loadAll(t))
	dep := get[*appsv1.Deployment](t, idx, "Deployment/"+namespace+"/"+controllerName)
	spec := dep.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("the controller has %d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != controllerImage {
		t.Errorf("controller image %q, want %q (set by config/%s)", c.Image, controllerImage, defaultDir)
	}
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the controller container has no securityContext")
	}
	if sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		t.Error("the controller must run as non-root")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("the controller must have a read-only root filesystem")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("the controller must set allowPrivilegeEscalation: false")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Error("the controller must drop all capabilities")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("the controller must not be privileged")
	}
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Error("the controller must run with --leader-elect (a rolling update briefly runs two)")
	}
	if got := envFieldRef(c, "POD_NAMESPACE"); got != "metadata.namespace" {
		t.Errorf("controller env POD_NAMESPACE comes from %q, want fieldRef metadata.namespace", got)
	}
	// The probes must hit the port --health-probe-bind-address serves.
	probePort := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address="); ok {
			probePort = v[strings.LastIndex(v, ":")+1:]
		}
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("the controller has no HTTP %s probe", name)
			continue
		}
		port := p.HTTPGet.Port.String()
		if n, ok := ports[port]; ok {
			port = n
		}
		if port != probePort {
			t.Errorf("%s probe on port %s, --health-probe-bind-address on port %q", name, port, probePort)
		}
	}
}

// kustomizeBuild renders config/default with kustomize, or kubectl's
// built-in kustomize.
func kustomizeBuild(t *testing.T) []byte {
	t.Helper()
	var cmd *exec.Cmd
	if p, err := exec.LookPath("kustomize"); err == nil {
		cmd = exec.Command(p, "build", defaultDir)
	} else if p, err := exec.LookPath("kubectl"); err == nil {
		cmd = exec.Command(p, "kustomize", defaultDir)
	} else {
		t.Skip("neither kustomize nor kubectl is on PATH; config/default is not rendered")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	return out
}

// TestKustomizeBuild: config/default renders, holds exactly the manifests
// of config/ (in namespace bootroll-system), and sets the images.
func TestKustomizeBuild(t *testing.T) {
	out := kustomizeBuild(t)
	docs, err := splitYAML(out)
	if err != nil {
		t.Fatal(err)
	}
	var rendered []string
	images := map[string]string{}
	for i, doc := range docs {
		obj, _, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("kustomize output, document %d: %v", i+1, err)
		}
		co := obj.(client.Object)
		rendered = append(rendered, objKey(co))
		if spec := podSpec(co); spec != nil {
			for _, c := range spec.Containers {
				images[objKey(co)] = c.Image
			}
		}
	}
	var want []string
	for _, m := range loadAll(t) {
		want = append(want, m.key())
	}
	sort.Strings(rendered)
	sort.Strings(want)
	if !slices.Equal(rendered, want) {
		t.Errorf("kustomize renders\n  %v\nconfig/ defines\n  %v", rendered, want)
	}
	k, err := readKustomization(filepath.Join(defaultDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range k.Images {
		want := im.NewName + ":" + im.NewTag
		found := false
		for _, got := range images {
			found = found || got == want
		}
		if !found {
			t.Errorf("no workload renders with image %s: %v", want, images)
		}
	}
}
