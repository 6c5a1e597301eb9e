package prefetch_test

import (
	"context"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// setTheirPin pins ref with containerd's label alone, as a person with
// ctr or a provisioning script would: a pin bootroll did not make.
func setTheirPin(ctx context.Context, c *cri.Client, ref string) error {
	conn, err := grpc.NewClient("unix://"+c.Socket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-namespace", cri.Namespace)
	images := imagesapi.NewImagesClient(conn)
	got, err := images.Get(ctx, &imagesapi.GetImageRequest{Name: ref})
	if err != nil {
		return err
	}
	_, err = images.Update(ctx, &imagesapi.UpdateImageRequest{
		Image:      &imagesapi.Image{Name: ref, Target: got.GetImage().GetTarget(), Labels: map[string]string{cri.PinnedLabel: cri.PinnedValue}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels." + cri.PinnedLabel}},
	})
	return err
}
