package config_test

// The two install paths, `kubectl apply -k config/default` and the Helm
// chart in charts/bootroll, must install the same objects: the chart is
// rendered with the Helm Go SDK and config/ with kustomize's Go API, and
// the objects are compared after dropping the labels only Helm adds. The
// optional monitoring objects (config/prometheus) are compared with the
// chart rendered with metrics.serviceMonitor and metrics.prometheusRule
// enabled. Both renderings are then applied to a real kube-apiserver with
// server-side dry run.

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/options"
)

const (
	chartDir              = "../charts/bootroll"
	optionalPrometheusDir = "prometheus"
	promOperatorCRDs      = "testdata/prometheus-operator/crds.yaml"
)

// helmOnlyLabels are the labels the chart adds to every object that
// config/ does not set.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

// monitoringValues enable the chart's optional objects, the ones of
// config/prometheus.
var monitoringValues = map[string]any{"metrics": map[string]any{
	"serviceMonitor": map[string]any{"enabled": true},
	"prometheusRule": map[string]any{"enabled": true},
}}

// renderChart renders charts/bootroll as `helm template --include-crds`
// does, into objects.
func renderChart(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart %s: %v", chartDir, err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = "bootroll"
	install.Namespace = "default"
	install.Replace = true
	install.IncludeCRDs = true
	kv, err := common.ParseKubeVersion("v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	install.KubeVersion = kv
	r, err := install.Run(chrt, vals)
	if err != nil {
		t.Fatalf("render chart %s: %v", chartDir, err)
	}
	rel, ok := r.(*releasev1.Release)
	if !ok {
		t.Fatalf("helm returned a %T, not a v1 release", r)
	}
	return parseObjects(t, "chart "+chartDir, []byte(rel.Manifest))
}

// renderKustomize builds the kustomization in dir (relative to config/)
// with kustomize's own Go API, as `kubectl apply -k` does.
func renderKustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build config/%s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, "kustomize build config/"+dir, out)
}

func parseObjects(t *testing.T, what string, data []byte) []*unstructured.Unstructured {
	t.Helper()
	docs, err := splitYAML(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var objs []*unstructured.Unstructured
	for i, doc := range docs {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s, document %d: %v", what, i+1, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			t.Fatalf("%s, document %d: %v", what, i+1, err)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		t.Fatalf("%s rendered no objects", what)
	}
	return objs
}

func uKey(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetKind() + "/" + u.GetName()
	}
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

// normalised indexes objects by kind/namespace/name, without the labels
// only Helm adds.
func normalised(t *testing.T, what string, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, u := range objs {
		u = u.DeepCopy()
		labels := u.GetLabels()
		for _, l := range helmOnlyLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			unstructured.RemoveNestedField(u.Object, "metadata", "labels")
		} else {
			u.SetLabels(labels)
		}
		k := uKey(u)
		if _, dup := out[k]; dup {
			t.Errorf("%s renders %s twice", what, k)
		}
		out[k] = u.Object
	}
	return out
}

// compareInstalls fails for every object only one side renders and for
// every object the two render differently.
func compareInstalls(t *testing.T, helm, kust []*unstructured.Unstructured) {
	t.Helper()
	h, k := normalised(t, "the chart", helm), normalised(t, "kustomize", kust)
	var keys []string
	for key := range h {
		keys = append(keys, key)
	}
	for key := range k {
		if _, ok := h[key]; !ok {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		ho, inHelm := h[key]
		ko, inKust := k[key]
		switch {
		case !inHelm:
			t.Errorf("%s: kustomize installs it, the chart does not", key)
		case !inKust:
			t.Errorf("%s: the chart installs it, kustomize does not", key)
		default:
			if d := cmp.Diff(ko, ho); d != "" {
				t.Errorf("%s differs (-kustomize +chart):\n%s", key, d)
			}
		}
	}
	t.Logf("%d objects compared", len(keys))
}

// TestHelmMatchesKustomize: the chart with its default values renders
// exactly what config/default does, and with the monitoring options on
// exactly what config/default and config/prometheus do together.
func TestHelmMatchesKustomize(t *testing.T) {
	def := renderKustomize(t, defaultDir)
	t.Run("default values", func(t *testing.T) {
		compareInstalls(t, renderChart(t, nil), def)
	})
	t.Run("monitoring", func(t *testing.T) {
		kust := append(slices.Clone(def), renderKustomize(t, optionalPrometheusDir)...)
		compareInstalls(t, renderChart(t, monitoringValues), kust)
	})
}

// TestHelmValues: the values that differ from config/default reach the
// objects they are for.
func TestHelmValues(t *testing.T) {
	objs := normalised(t, "the chart", renderChart(t, map[string]any{
		"namespace": map[string]any{"name": "ops"},
		"controller": map[string]any{
			"image":             map[string]any{"repository": "r.example/c", "tag": "v1", "digest": "sha256:" + strings.Repeat("a", 64), "pullPolicy": "Always"},
			"priorityClassName": "system-cluster-critical",
		},
		"daemon": map[string]any{
			"image":       map[string]any{"repository": "r.example/d", "tag": "", "digest": "sha256:" + strings.Repeat("b", 64)},
			"tolerations": []any{map[string]any{"key": "only", "operator": "Exists"}},
			"resources":   map[string]any{"requests": map[string]any{"cpu": "20m"}},
		},
		"metrics": map[string]any{"port": 9090},
	}))
	str := func(key string, path ...string) string {
		t.Helper()
		o, ok := objs[key]
		if !ok {
			t.Fatalf("the chart renders no %s", key)
		}
		v, _, err := unstructured.NestedFieldNoCopy(o, path...)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		b, _ := yaml.Marshal(v)
		return strings.TrimSpace(string(b))
	}
	containers := []string{"spec", "template", "spec", "containers"}
	checks := []struct{ key, got, want string }{
		{"Namespace/ops", str("Namespace/ops", "metadata", "name"), "ops"},
		{"daemon tolerations", str("DaemonSet/ops/bootroll-daemon", "spec", "template", "spec", "tolerations"), "- key: only\n  operator: Exists"},
		{"controller priority class", str("Deployment/ops/bootroll-controller", "spec", "template", "spec", "priorityClassName"), "system-cluster-critical"},
		{"daemon policy user", str("ValidatingAdmissionPolicy/bootroll-daemon-own-bootcnode", "spec", "matchConditions"),
			"- expression: request.userInfo.username == 'system:serviceaccount:ops:bootroll-daemon'\n  name: bootroll-daemon"},
		{"controller binding subject", str("ClusterRoleBinding/bootroll-controller", "subjects"),
			"- kind: ServiceAccount\n  name: bootroll-controller\n  namespace: ops"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.key, c.got, c.want)
		}
	}
	ctr := str("Deployment/ops/bootroll-controller", containers...)
	for _, want := range []string{"image: r.example/c:v1@sha256:" + strings.Repeat("a", 64), "imagePullPolicy: Always",
		"--metrics-bind-address=:9090", "containerPort: 9090"} {
		if !strings.Contains(ctr, want) {
			t.Errorf("the controller container has no %q:\n%s", want, ctr)
		}
	}
	ds := str("DaemonSet/ops/bootroll-daemon", containers...)
	for _, want := range []string{"image: r.example/d@sha256:" + strings.Repeat("b", 64), "cpu: 20m", "--metrics-bind-address=:9090"} {
		if !strings.Contains(ds, want) {
			t.Errorf("the daemon container has no %q:\n%s", want, ds)
		}
	}
	for _, key := range []string{"Role/ops/bootroll-controller", "RoleBinding/ops/bootroll-controller", "ServiceAccount/ops/bootroll-daemon"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("the chart renders no %s with namespace.name=ops", key)
		}
	}
	for key := range objs {
		if strings.Contains(key, "bootroll-system") {
			t.Errorf("with namespace.name=ops the chart still renders %s", key)
		}
	}
}

// TestChartCopiesAreCurrent: the chart's CRDs are the generated ones of
// config/crd/bases, and its alert rules those of config/prometheus, byte
// for byte (`make chart` copies them).
func TestChartCopiesAreCurrent(t *testing.T) {
	crds, err := os.ReadDir("crd/bases")
	if err != nil {
		t.Fatal(err)
	}
	pairs := map[string]string{filepath.Join(chartDir, "files", "prometheusrule.yaml"): filepath.Join(optionalPrometheusDir, "prometheusrule.yaml")}
	for _, e := range crds {
		pairs[filepath.Join(chartDir, "crds", e.Name())] = filepath.Join("crd", "bases", e.Name())
	}
	inChart, err := os.ReadDir(filepath.Join(chartDir, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range inChart {
		if _, ok := pairs[filepath.Join(chartDir, "crds", e.Name())]; !ok {
			t.Errorf("charts/bootroll/crds/%s is not in config/crd/bases: run `make chart`", e.Name())
		}
	}
	for chartFile, src := range pairs {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(chartFile)
		if err != nil {
			t.Errorf("%v: run `make chart`", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from config/%s (%s): run `make chart`", chartFile, src, firstDiff(got, want))
		}
	}
}

// metricLabels are the controller's metrics and their labels, read from
// the collectors of options.Metrics.
func metricLabels(t *testing.T) map[string][]string {
	t.Helper()
	m := options.NewMetrics(nil)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	varLabels := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	out := map[string][]string{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue // what Metrics keeps for itself (its gauge lookups)
		}
		c, ok := v.Field(i).Interface().(prometheus.Collector)
		if !ok {
			continue
		}
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			n, l := fqName.FindStringSubmatch(s), varLabels.FindStringSubmatch(s)
			if n == nil || l == nil {
				t.Fatalf("cannot read the name and labels of %s", s)
			}
			out[n[1]] = strings.FieldsFunc(l[1], func(r rune) bool { return r == ',' || r == ' ' })
		}
	}
	if len(out) == 0 {
		t.Fatal("options.Metrics has no collectors")
	}
	return out
}

var (
	metricRef     = regexp.MustCompile(`\b(bootroll_[a-z_]+)(\{[^}]*\})?`)
	labelMatcher  = regexp.MustCompile(`([a-zA-Z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	groupingLabel = regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\(([^)]*)\)`)
)

// TestAlertsUseRealMetrics: every metric an alert of config/prometheus
// uses is one the controller exports, with labels it has, and every phase
// it matches is a phase.
func TestAlertsUseRealMetrics(t *testing.T) {
	metrics := metricLabels(t)
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert, Expr string
				}
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(optionalPrometheusDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			checkExpr(t, metrics, r.Alert, r.Expr)
		}
	}
	want := []string{"BootrollDrainBlocked", "BootrollNodeFailed", "BootrollPoolHalted", "BootrollSlotsStuck"}
	sort.Strings(alerts)
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}

func checkExpr(t *testing.T, metrics map[string][]string, alert, expr string) {
	t.Helper()
	var phases []string
	for _, p := range v1alpha1.AllPhases {
		phases = append(phases, string(p))
	}
	refs := metricRef.FindAllStringSubmatch(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s uses no bootroll metric: %s", alert, expr)
	}
	var common []string // labels every metric of the expression has
	for i, ref := range refs {
		name, labels := ref[1], []string(nil)
		if l, ok := metrics[name]; ok {
			labels = l
		} else {
			for _, suffix := range []string{"_count", "_sum", "_bucket"} {
				if l, ok := metrics[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) {
					labels = l
					if suffix == "_bucket" {
						labels = append(slices.Clone(l), "le")
					}
				}
			}
			if labels == nil {
				t.Errorf("%s uses %s, which the controller does not export (controller/options/metrics.go)", alert, name)
				continue
			}
		}
		for _, m := range labelMatcher.FindAllStringSubmatch(ref[2], -1) {
			if !slices.Contains(labels, m[1]) {
				t.Errorf("%s matches label %s of %s, which has only %v", alert, m[1], name, labels)
			}
			if m[1] == "phase" {
				for _, v := range strings.Split(m[3], "|") {
					if !slices.Contains(phases, v) {
						t.Errorf("%s matches phase %q, not one of %v", alert, v, phases)
					}
				}
			}
		}
		if i == 0 {
			common = slices.Clone(labels)
		} else {
			common = slices.DeleteFunc(common, func(l string) bool { return !slices.Contains(labels, l) })
		}
	}
	for _, g := range groupingLabel.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.FieldsFunc(g[1], func(r rune) bool { return r == ',' || r == ' ' }) {
			if !slices.Contains(common, l) {
				t.Errorf("%s groups or joins on %s, which not every metric it uses has (common: %v)", alert, l, common)
			}
		}
	}
}

// applyDryRun applies objs server-side with dry run (as `kubectl apply
// --server-side --dry-run=server` does) and strict field validation.
func applyDryRun(t *testing.T, c client.Client, what string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, u := range objs {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
			client.FieldOwner("bootroll-install-test"), client.ForceOwnership, client.DryRunAll)
		if err != nil {
			t.Errorf("%s: dry-run apply of %s: %v", what, uKey(u), err)
		}
	}
	t.Logf("%s: %d objects accepted by a dry-run apply", what, len(objs))
}

// TestInstallsDryRunOnAPIServer: both installs, monitoring included, are
// accepted by a real kube-apiserver in a server-side dry run. The CRDs (of
// config/crd/bases, and minimal prometheus-operator ones from testdata)
// and the Namespaces are created for real first, as an install would, so
// that the objects that depend on them can be checked.
func TestInstallsDryRunOnAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a kube-apiserver")
	}
	kust := append(renderKustomize(t, defaultDir), renderKustomize(t, optionalPrometheusDir)...)
	helm := renderChart(t, monitoringValues)

	_, c := startEnvtest(t, filepath.Join("crd", "bases"), promOperatorCRDs)
	ctx := context.Background()
	for _, u := range kust {
		if u.GetKind() != "Namespace" {
			continue
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()), client.FieldOwner("bootroll-install-test"))
		if err != nil {
			t.Fatalf("create %s: %v", uKey(u), err)
		}
	}
	var kinds []string
	for _, u := range helm {
		kinds = append(kinds, u.GetKind())
	}
	for _, want := range []string{"CustomResourceDefinition", "Deployment", "DaemonSet", "ValidatingAdmissionPolicy", "ServiceMonitor", "PrometheusRule"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("the chart renders no %s", want)
		}
	}
	applyDryRun(t, c, "config/default + config/prometheus", kust)
	applyDryRun(t, c, "charts/bootroll", helm)

	// The dry run must have checked something: an object with a field the
	// schema does not have is refused.
	bad := helm[slices.IndexFunc(helm, func(u *unstructured.Unstructured) bool { return u.GetKind() == "PrometheusRule" })].DeepCopy()
	if err := unstructured.SetNestedField(bad.Object, "x", "spec", "notAField"); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(bad), client.FieldOwner("bootroll-install-test"), client.DryRunAll); err == nil {
		t.Error("a PrometheusRule with spec.notAField was accepted: the dry run checks no schema")
	} else {
		t.Logf("as expected, refused: %v", err)
	}
}
