package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

// A named kubeconfig gets the same unthrottled client as one
// controller-runtime finds: client-go's default (QPS 0, read as 5 per
// second) would throttle the controller's cleanup of a large pool.
func TestNamedKubeconfigIsNotThrottled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t" {
		t.Fatalf("config of %s: host %q token %q", path, cfg.Host, cfg.BearerToken)
	}
	if cfg.QPS >= 0 || cfg.RateLimiter != nil {
		t.Fatalf("QPS %v, RateLimiter %v: want client-side rate limiting off (QPS < 0)", cfg.QPS, cfg.RateLimiter)
	}
}

func TestMissingKubeconfigNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent")
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig "+path) {
		t.Fatalf("Load(%s) = %v, want an error naming --kubeconfig and the path", path, err)
	}
}
