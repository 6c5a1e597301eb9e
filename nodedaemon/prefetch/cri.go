package prefetch

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// CRIImages is the ImageService of a real runtime, over its CRI socket.
// A *CRIImages is also its Pinner: on containerd it pins with
// containerd's pinned label (cri.Containerd); on another runtime (CRI-O
// pins by its pinned_images configuration) it cannot, and says so.
//
// The client is Client, or when it is nil the one Finder finds (each call
// fails with a KindRuntimeUnavailable error while none answers).
type CRIImages struct {
	Client *cri.Client
	Finder *cri.Finder

	mu      sync.Mutex
	runtime *cri.Runtime // learnt at the first PinState
}

var (
	_ ImageService = (*CRIImages)(nil)
	_ Pinner       = (*CRIImages)(nil)
)

func (c *CRIImages) client(ctx context.Context) (*cri.Client, error) {
	if c.Client != nil {
		return c.Client, nil
	}
	if c.Finder == nil {
		return nil, &cri.NoRuntimeError{}
	}
	return c.Finder.Client(ctx)
}

// PinState implements Pinner. The runtime is asked its name once (CRI
// Version), at the first call that it answers.
func (c *CRIImages) PinState(ctx context.Context) (bool, string, []string, error) {
	c.mu.Lock()
	rt := c.runtime
	c.mu.Unlock()
	if rt == nil {
		cl, err := c.client(ctx)
		if err != nil {
			return false, "", nil, err
		}
		got, err := cl.Runtime(ctx)
		if err != nil {
			return false, "", nil, err
		}
		rt = &got
		c.mu.Lock()
		c.runtime = rt
		c.mu.Unlock()
	}
	if !rt.Containerd() {
		return false, PinNote(*rt), nil, nil
	}
	cl, err := c.client(ctx)
	if err != nil {
		return false, "", nil, err
	}
	own, err := cl.Containerd().Pins(ctx)
	if err != nil {
		return false, "", nil, err
	}
	return true, PinNote(*rt), own, nil
}

// PinNote is what the daemon reports on a present image that rt does not
// report pinned: "" where pins work.
func PinNote(rt cri.Runtime) string {
	v := strings.TrimPrefix(rt.Version, "v")
	switch {
	case rt.Name == "cri-o":
		return rt.String() + " pins only by configuration: add this image to pinned_images in crio.conf ([crio.image]) and reload CRI-O (docs/pinning.md)"
	case !rt.Containerd():
		return rt.String() + ": bootroll cannot pin images on this runtime (docs/pinning.md)"
	case strings.HasPrefix(v, "1.6.") || strings.HasPrefix(v, "1.5."):
		return rt.String() + ": bootroll set " + cri.PinnedLabel + "=" + cri.PinnedValue + ", which containerd's CRI honours only from 1.7; upgrade containerd (docs/pinning.md)"
	}
	return ""
}

// Pinned implements Pinner: CRI ImageStatus's pinned.
func (c *CRIImages) Pinned(ctx context.Context, ref string) (bool, error) {
	cl, err := c.client(ctx)
	if err != nil {
		return false, err
	}
	img, err := cl.ImageStatus(ctx, ref)
	if err != nil || img == nil {
		return false, err
	}
	return img.Pinned, nil
}

// Pin implements Pinner.
func (c *CRIImages) Pin(ctx context.Context, ref string) error {
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	return cl.Containerd().Pin(ctx, ref)
}

// Unpin implements Pinner.
func (c *CRIImages) Unpin(ctx context.Context, ref string) error {
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	return cl.Containerd().Unpin(ctx, ref)
}

// ImageStatus implements ImageService; the CRI's size is the compressed
// size.
func (c *CRIImages) ImageStatus(ctx context.Context, ref string) (bool, int64, error) {
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
func (c *CRIImages) Pull(ctx context.Context, ref string, auth *cri.Auth) error {
	cl, err := c.client(ctx)
	if err != nil {
		return err
	}
	_, err = cl.PullImage(ctx, ref, auth)
	return err
}

// FsInfo implements ImageService: the runtime's image filesystem, measured
// with statfs.
func (c *CRIImages) FsInfo(ctx context.Context) (int64, int64, error) {
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
func (c *CRIImages) RemoveImage(ctx context.Context, ref string) error {
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
