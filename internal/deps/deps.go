//go:build tools

// Package deps pins modules the project depends on as a whole but that no
// package imports yet (ginkgo, for suites that will need it), so go.mod
// keeps them at the versions DEVELOPERS.md asks for. It is never built.
package deps

import (
	_ "github.com/google/go-containerregistry/pkg/authn"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/gomega"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "google.golang.org/grpc"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/component-base/featuregate"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
