package prefetch

import (
	"context"
	"fmt"
	"runtime"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// CRIImages is the ImageService of a real runtime, over its CRI socket:
// Client, or when it is nil the one Finder finds (each call fails with a
// KindRuntimeUnavailable error while none answers).
type CRIImages struct {
	Client *cri.Client
	Finder *cri.Finder
}

var _ ImageService = CRIImages{}

func (c CRIImages) client(ctx context.Context) (*cri.Client, error) {
	if c.Client != nil {
		return c.Client, nil
	}
	if c.Finder == nil {
		return nil, &cri.NoRuntimeError{}
	}
	return c.Finder.Client(ctx)
}

// ImageStatus implements ImageService; the CRI's size is the compressed
// size.
func (c CRIImages) ImageStatus(ctx context.Context, ref string) (bool, int64, error) {
	cl, err := c.client(ctx)
	if err != nil {
		return false, 0, err
	}
	img, err := cl.ImageStatus(ctx, ref)
	if err != nil || img == nil {
		return false, 0, err
	}
	return true, img.Size, nil
}

// Pull implements ImageService.
func (c CRIImages) Pull(ctx context.Context, ref string, auth *cri.Auth) error {
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	_, err = cl.PullImage(ctx, ref, auth)
	return err
}

// FsInfo implements ImageService: the runtime's image filesystem, measured
// with statfs.
func (c CRIImages) FsInfo(ctx context.Context) (int64, int64, error) {
	cl, err := c.client(ctx)
	if err != nil {
		return 0, 0, err
	}
	sp, err := cl.ImageFs(ctx)
	if err != nil {
		return 0, 0, err
	}
	return sp.Capacity, sp.Available, nil
}

// RemoveImage implements ImageService.
func (c CRIImages) RemoveImage(ctx context.Context, ref string) error {
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	return cl.RemoveImage(ctx, ref)
}

// RegistrySizer reads an image's compressed size (manifest, config and
// layers, as containerd's CRI reports it for a present image) from its
// manifest in the registry, for this machine's platform when the
// reference names an index. It fetches manifests only, never layers. It
// talks to the registry directly, not through the runtime: registry
// mirrors configured in containerd do not apply, and where the registry is
// reachable only through them the lookup fails and the manager assumes
// Config.EstimatedSize.
type RegistrySizer struct {
	// Options are extra go-containerregistry options (a transport, say).
	Options []remote.Option
}

var _ Sizer = RegistrySizer{}

// Size implements Sizer.
func (s RegistrySizer) Size(ctx context.Context, ref string, auth *cri.Auth) (int64, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", ref, err)
	}
	opts := append([]remote.Option{
		remote.WithContext(ctx),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
	}, s.Options...)
	if auth != nil {
		opts = append(opts, remote.WithAuth(authn.FromConfig(authn.AuthConfig{
			Username: auth.Username, Password: auth.Password, Auth: auth.Auth,
			IdentityToken: auth.IdentityToken, RegistryToken: auth.RegistryToken,
		})))
	}
	img, err := remote.Image(r, opts...)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", ref, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", ref, err)
	}
	// As containerd counts an image's size: manifest, config and layers.
	size, err := img.Size()
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", ref, err)
	}
	size += m.Config.Size
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}
