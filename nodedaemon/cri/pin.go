package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The labels that pin an image in containerd. containerd's CRI plugin
// (1.7 and later) reports an image whose record carries PinnedLabel =
// PinnedValue as pinned, and the kubelet's image garbage collection keeps
// pinned images. OwnLabel records that bootroll set the pin, so that it
// only ever removes pins it made.
const (
	PinnedLabel = "io.cri-containerd.pinned"
	PinnedValue = "pinned"
	OwnLabel    = "bootroll.dev/pinned"
	OwnValue    = "true"
	// Namespace is the containerd namespace of the CRI plugin's images.
	Namespace = "k8s.io"
)

// Containerd reports whether the runtime is containerd.
func (r Runtime) Containerd() bool { return r.Name == "containerd" }

// String is "name version".
func (r Runtime) String() string { return strings.TrimSpace(r.Name + " " + r.Version) }

// Runtime asks the runtime its name and version (CRI Version).
func (c *Client) Runtime(ctx context.Context) (Runtime, error) {
	v, err := runtimeapi.NewRuntimeServiceClient(c.conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return Runtime{}, fmt.Errorf("runtime version on %s: %w", c.socket, err)
	}
	return Runtime{Socket: c.socket, Name: v.GetRuntimeName(), Version: v.GetRuntimeVersion()}, nil
}

// Containerd is containerd's own image service (containerd.services.images.v1,
// namespace k8s.io), over the same socket as the CRI: it sets and removes
// the labels that pin images, which the CRI cannot do.
type Containerd struct {
	images imagesapi.ImagesClient
	socket string
}

// Containerd returns the containerd image service on the client's socket.
// It answers only when the runtime is containerd.
func (c *Client) Containerd() *Containerd {
	return &Containerd{images: imagesapi.NewImagesClient(c.conn), socket: c.socket}
}

func nsContext(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", Namespace)
}

// Pin labels the image record ref (as the CRI named it when it pulled it:
// the digest reference) pinned, with OwnLabel beside containerd's label.
// An image already pinned by someone else is left as it is: bootroll does
// not take over a pin it did not make. An absent image is a NotFound
// error.
func (c *Containerd) Pin(ctx context.Context, ref string) error {
	img, err := c.get(ctx, ref)
	if err != nil {
		return fmt.Errorf("pin %s: %w", ref, err)
	}
	l := img.GetLabels()
	if l[OwnLabel] == OwnValue && l[PinnedLabel] == PinnedValue {
		return nil
	}
	if l[PinnedLabel] == PinnedValue && l[OwnLabel] != OwnValue {
		return nil // pinned by someone else
	}
	return c.setLabels(ctx, img, map[string]string{PinnedLabel: PinnedValue, OwnLabel: OwnValue})
}

// Unpin removes the pin of ref if bootroll made it (OwnLabel is there);
// a pin bootroll did not make, and an absent image, are left alone.
func (c *Containerd) Unpin(ctx context.Context, ref string) error {
	img, err := c.get(ctx, ref)
	if s, ok := status.FromError(errors.Unwrap(err)); ok && s.Code() == codes.NotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unpin %s: %w", ref, err)
	}
	if img.GetLabels()[OwnLabel] != OwnValue {
		return nil
	}
	// containerd drops a label set to the empty string.
	return c.setLabels(ctx, img, map[string]string{PinnedLabel: "", OwnLabel: ""})
}

// Pins lists the image records that carry OwnLabel, sorted.
func (c *Containerd) Pins(ctx context.Context) ([]string, error) {
	resp, err := c.images.List(nsContext(ctx), &imagesapi.ListImagesRequest{
		Filters: []string{fmt.Sprintf("labels.%q==%s", OwnLabel, OwnValue)},
	})
	if err != nil {
		return nil, fmt.Errorf("list pinned images on %s: %w", c.socket, err)
	}
	var out []string
	for _, img := range resp.GetImages() {
		out = append(out, img.GetName())
	}
	slices.Sort(out)
	return out, nil
}

// Labels returns the labels of the image record ref.
func (c *Containerd) Labels(ctx context.Context, ref string) (map[string]string, error) {
	img, err := c.get(ctx, ref)
	if err != nil {
		return nil, err
	}
	return img.GetLabels(), nil
}

func (c *Containerd) get(ctx context.Context, ref string) (*imagesapi.Image, error) {
	resp, err := c.images.Get(nsContext(ctx), &imagesapi.GetImageRequest{Name: ref})
	if err != nil {
		return nil, fmt.Errorf("containerd image %s on %s: %w", ref, c.socket, err)
	}
	return resp.GetImage(), nil
}

// setLabels updates only the given labels of ref (an update mask of
// labels.<key> paths), so a concurrent change of other labels or of the
// target is not overwritten.
func (c *Containerd) setLabels(ctx context.Context, img *imagesapi.Image, labels map[string]string) error {
	ref := img.GetName()
	mask := &fieldmaskpb.FieldMask{}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		mask.Paths = append(mask.Paths, "labels."+k)
	}
	_, err := c.images.Update(nsContext(ctx), &imagesapi.UpdateImageRequest{
		// The target goes along unchanged: containerd 2.x converts it
		// without a nil check.
		Image:      &imagesapi.Image{Name: ref, Target: img.GetTarget(), Labels: labels},
		UpdateMask: mask,
	})
	if err != nil {
		return fmt.Errorf("label containerd image %s on %s: %w", ref, c.socket, err)
	}
	return nil
}
