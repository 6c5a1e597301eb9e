// Package cri is the node daemon's client of the container runtime's CRI
// image service (k8s.io/cri-api v1 over gRPC on a unix socket): it checks,
// pulls, lists and removes images and reports the image filesystem, and it
// classifies the runtime's errors into kinds the prefetch manager acts on.
//
// It is an edge of the daemon: the twin replaces it with its host model.
package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DefaultSocket is containerd's CRI endpoint on a standard host.
const DefaultSocket = "/run/containerd/containerd.sock"

// maxMsgSize bounds the runtime's answers, as the kubelet does: a node with
// thousands of images lists more than gRPC's default 4 MiB.
const maxMsgSize = 16 << 20

// Client talks to the CRI image service on a unix socket. It is safe for
// concurrent use.
type Client struct {
	conn   *grpc.ClientConn
	images runtimeapi.ImageServiceClient
	socket string
}

// Image is what the runtime knows of one image.
type Image struct {
	// ID is the image ID (the config digest); PullImage returns the same.
	ID string
	// RepoTags and RepoDigests are the names the image is known by; the
	// manifest digest is in RepoDigests.
	RepoTags    []string
	RepoDigests []string
	// Size is the image's compressed size in bytes (what a pull downloads).
	Size int64
	// Pinned is the runtime's own pin (exempt from the kubelet's image GC).
	Pinned bool
}

// FsUsage is one image filesystem as the runtime reports it. The CRI gives
// no capacity or free space: Statfs(Mountpoint) does.
type FsUsage struct {
	// Mountpoint is the runtime's image store, e.g.
	// /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs.
	Mountpoint string
	// UsedBytes is what the images use there.
	UsedBytes uint64
	// InodesUsed is the inodes the images use there.
	InodesUsed uint64
	// Timestamp is when the runtime measured, in ns since the epoch.
	Timestamp int64
}

// Dial connects to the CRI endpoint at socketPath and waits, until ctx ends,
// for the connection to be ready. A runtime that is not listening fails at
// once with a KindRuntimeUnavailable error.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("CRI socket %q: %w", socketPath, err)
	}
	conn, err := grpc.NewClient("unix://"+abs,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	)
	if err != nil {
		return nil, fmt.Errorf("CRI socket %s: %w", abs, err)
	}
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			break
		}
		if s == connectivity.TransientFailure || s == connectivity.Shutdown {
			conn.Close()
			return nil, &unavailableError{socket: abs, state: s.String()}
		}
		if !conn.WaitForStateChange(ctx, s) {
			conn.Close()
			return nil, fmt.Errorf("connect to CRI socket %s: %w", abs, ctx.Err())
		}
	}
	return &Client{conn: conn, images: runtimeapi.NewImageServiceClient(conn), socket: abs}, nil
}

// unavailableError is Dial's error for a runtime that does not listen; it
// classifies as KindRuntimeUnavailable.
type unavailableError struct {
	socket, state string
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("connect to CRI socket %s: runtime unavailable (connection %s): is containerd running?", e.socket, e.state)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Socket is the endpoint's absolute path.
func (c *Client) Socket() string { return c.socket }

// ImageStatus returns what the runtime knows of ref, or nil when the image
// is not present (the CRI answers that with an empty response, not an
// error). It never contacts the registry.
func (c *Client) ImageStatus(ctx context.Context, ref string) (*Image, error) {
	resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return nil, fmt.Errorf("image status of %s: %w", ref, err)
	}
	if resp.GetImage() == nil {
		return nil, nil
	}
	return imageOf(resp.GetImage()), nil
}

// PullImage pulls ref with auth (nil: anonymous) and returns the image ID.
// The runtime contacts the registry even when the image is present: call
// ImageStatus first. Errors keep the gRPC status for Classify.
func (c *Client) PullImage(ctx context.Context, ref string, auth *Auth) (string, error) {
	req := &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}
	if auth != nil {
		// ServerAddress stays empty: containerd 1.6 parses it as a URL and
		// fails the pull on a bare "host:port" ("first path segment in URL
		// cannot contain colon"), silently drops the credentials for a bare
		// "host" (the URL has no host), and compares it with the host it
		// pulls from, which for Docker Hub is registry-1.docker.io, not the
		// key of the pull secret. AuthFor already chose the entry for the
		// ref's registry.
		req.Auth = &runtimeapi.AuthConfig{
			Username:      auth.Username,
			Password:      auth.Password,
			Auth:          auth.Auth,
			IdentityToken: auth.IdentityToken,
			RegistryToken: auth.RegistryToken,
		}
	}
	resp, err := c.images.PullImage(ctx, req)
	if err != nil {
		return "", fmt.Errorf("pull %s: %w", ref, err)
	}
	return resp.GetImageRef(), nil
}

// ListImages returns every image the runtime has.
func (c *Client) ListImages(ctx context.Context) ([]Image, error) {
	resp, err := c.images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]Image, 0, len(resp.GetImages()))
	for _, im := range resp.GetImages() {
		out = append(out, *imageOf(im))
	}
	return out, nil
}

// RemoveImage removes ref; removing an absent image succeeds.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	if _, err := c.images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// ImageFsInfo returns the runtime's image filesystems.
func (c *Client) ImageFsInfo(ctx context.Context) ([]FsUsage, error) {
	resp, err := c.images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("image filesystem info: %w", err)
	}
	out := make([]FsUsage, 0, len(resp.GetImageFilesystems()))
	for _, fs := range resp.GetImageFilesystems() {
		out = append(out, FsUsage{
			Mountpoint: fs.GetFsId().GetMountpoint(),
			UsedBytes:  fs.GetUsedBytes().GetValue(),
			InodesUsed: fs.GetInodesUsed().GetValue(),
			Timestamp:  fs.GetTimestamp(),
		})
	}
	return out, nil
}

// ErrNoImageFs is returned by ImageFs when the runtime reports no image
// filesystem.
var ErrNoImageFs = errors.New("the runtime reports no image filesystem")

// ImageFs returns the size and free space of the runtime's first image
// filesystem: ImageFsInfo for its mountpoint, then statfs of it. The
// daemon must see the host's mounts for the path to mean the same thing.
func (c *Client) ImageFs(ctx context.Context) (Space, error) {
	fss, err := c.ImageFsInfo(ctx)
	if err != nil {
		return Space{}, err
	}
	if len(fss) == 0 || fss[0].Mountpoint == "" {
		return Space{}, ErrNoImageFs
	}
	return Statfs(fss[0].Mountpoint)
}

// Space is a filesystem's size and the bytes an unprivileged writer can
// still use.
type Space struct {
	Mountpoint string
	Capacity   int64
	Available  int64
}

func imageOf(im *runtimeapi.Image) *Image {
	return &Image{
		ID:          im.GetId(),
		RepoTags:    im.GetRepoTags(),
		RepoDigests: im.GetRepoDigests(),
		Size:        int64(im.GetSize()),
		Pinned:      im.GetPinned(),
	}
}
