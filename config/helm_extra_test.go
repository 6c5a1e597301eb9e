package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestHelmControllerExtras: controller.extraEnv, extraVolumes and
// extraVolumeMounts reach the controller's pod, after the chart's own
// environment (README, "Private registries and CA certificates").
func TestHelmControllerExtras(t *testing.T) {
	objs := normalised(t, "the chart", renderChart(t, map[string]any{
		"controller": map[string]any{
			"extraEnv":          []any{map[string]any{"name": "SSL_CERT_FILE", "value": "/etc/bootroll/ca/ca-bundle.crt"}},
			"extraVolumes":      []any{map[string]any{"name": "ca", "configMap": map[string]any{"name": "registry-ca"}}},
			"extraVolumeMounts": []any{map[string]any{"name": "ca", "mountPath": "/etc/bootroll/ca", "readOnly": true}},
		},
	}))
	d, ok := objs["Deployment/bootroll-system/bootroll-controller"]
	if !ok {
		t.Fatal("the chart renders no controller Deployment")
	}
	get := func(path ...string) any {
		t.Helper()
		v, _, err := unstructured.NestedFieldNoCopy(d, path...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ctrs := get("spec", "template", "spec", "containers").([]any)
	ctr := ctrs[0].(map[string]any)
	env := ctr["env"].([]any)
	if got, want := env[len(env)-1], map[string]any{"name": "SSL_CERT_FILE", "value": "/etc/bootroll/ca/ca-bundle.crt"}; !cmp.Equal(got, want) {
		t.Errorf("last env of the controller: got %v, want %v", got, want)
	}
	if got, want := ctr["volumeMounts"], []any{map[string]any{"name": "ca", "mountPath": "/etc/bootroll/ca", "readOnly": true}}; !cmp.Equal(got, want) {
		t.Errorf("controller volumeMounts: got %v, want %v", got, want)
	}
	if got, want := get("spec", "template", "spec", "volumes"), []any{map[string]any{"name": "ca", "configMap": map[string]any{"name": "registry-ca"}}}; !cmp.Equal(got, want) {
		t.Errorf("controller volumes: got %v, want %v", got, want)
	}
}
