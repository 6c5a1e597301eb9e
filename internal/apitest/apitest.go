// Package apitest starts a real kube-apiserver and etcd (envtest) for
// tests: the binaries of KUBEBUILDER_ASSETS (make test builds them into
// bin/k8s), the CRDs of the given directories, stopped when the test ends.
// Only tests import it.
package apitest

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Start starts the API server with the CRDs of crdDirs (each must exist)
// and returns its config. It fails the test when KUBEBUILDER_ASSETS is not
// set, saying how to get the binaries, and skips it under -short.
func Start(t *testing.T, crdDirs ...string) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a kube-apiserver")
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: this test needs a real kube-apiserver and etcd. " +
			"Run `make test`, which builds them into bin/k8s and sets KUBEBUILDER_ASSETS.")
	}
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{CRDDirectoryPaths: crdDirs, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return cfg
}

// Client returns a client of cfg whose scheme has client-go's kinds and
// those the adders add.
func Client(t *testing.T, cfg *rest.Config, adders ...func(*runtime.Scheme) error) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, adders...) {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
