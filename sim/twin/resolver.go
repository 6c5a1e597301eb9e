package twin

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/sim/scenario"
)

// registry is the twin's image registry: it resolves the tag references of
// a scenario's images to the digests the scenario gives them, pinned the
// way the production resolver pins them (repository@digest, tag dropped).
type registry struct {
	pinned map[string]string // tag ref -> repo@digest
}

var _ resolve.Resolver = registry{}

func newRegistry(sc *scenario.Scenario) registry {
	r := registry{pinned: map[string]string{}}
	for _, im := range sc.Images {
		if imageref.IsDigest(im.Ref) {
			continue
		}
		p, err := imageref.WithDigest(im.Ref, im.Digest)
		if err != nil {
			panic(err) // the scenario loader validated both
		}
		r.pinned[im.Ref] = p
	}
	return r
}

var errNoSuchTag = errors.New("the twin's registry has no image with this reference")

// Resolve implements resolve.Resolver.
func (r registry) Resolve(_ context.Context, ref string, _ *corev1.Secret) (string, error) {
	if imageref.IsDigest(ref) {
		return ref, nil
	}
	if p, ok := r.pinned[ref]; ok {
		return p, nil
	}
	return "", &resolve.Error{Kind: resolve.KindNotFound, Ref: ref, Err: errNoSuchTag}
}
