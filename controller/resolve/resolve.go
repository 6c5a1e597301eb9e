// Package resolve pins container image references to digests.
//
// The controller always rolls a pool to a digest so that every node boots
// exactly the same bytes; a tag in BootcNodePool.spec.image is resolved here,
// once per reconcile, and the digest is what lands in status and in each
// BootcNode's desiredImage.
//
// Resolver is the seam the twin fills with its own model; Registry is the
// production implementation and the only part of this package that touches
// the network.
package resolve

import (
	"context"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
)

// Resolver turns an image reference into a digest reference.
type Resolver interface {
	// Resolve returns ref pinned by digest ("registry/repo@sha256:...").
	// A ref that already has a digest is returned normalised without
	// contacting the registry. secret is the pool's pull secret
	// (kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg, matched
	// as the kubelet matches it: see pullsecret.Keychain), or nil for
	// anonymous access. Failures are *Error values; use KindOf to classify
	// them.
	Resolve(ctx context.Context, ref string, secret *corev1.Secret) (string, error)
}

// dockerHub is the registry name go-containerregistry uses for Docker Hub;
// dockerHubCanonical is the spelling bootc, podman and containers/image use,
// so that a resolved ref reads the same as the one bootc reports.
const (
	dockerHub          = name.DefaultRegistry
	dockerHubCanonical = "docker.io"
)

// pinned formats repo@digest the way the controller stores it: registry
// always explicit, Docker Hub spelled "docker.io", any tag dropped.
func pinned(repo name.Repository, digest string) string {
	registry := repo.RegistryStr()
	if registry == dockerHub {
		registry = dockerHubCanonical
	}
	return registry + "/" + repo.RepositoryStr() + "@" + digest
}
