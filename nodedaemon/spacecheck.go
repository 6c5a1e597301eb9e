package nodedaemon

import (
	"context"
	"fmt"

	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// SpaceCheckedHost refuses to stage an OS image that does not fit, before
// bootc starts downloading it: staging needs about twice the image's
// compressed size free (prefetch.StagingNeed). Pinned-image pulls keep that
// reserve free (the daemon's StagingReserve), so they never starve it; this
// check catches everything else filling the disk. When the size or the free
// space cannot be read, staging goes ahead and bootc reports what happens.
type SpaceCheckedHost struct {
	Host
	// Size returns the compressed size of an image (e.g. from its manifest).
	Size func(ctx context.Context, image string) (int64, error)
	// Available returns the free bytes of the filesystem bootc stages to.
	Available func(ctx context.Context) (int64, error)
}

// ErrNoSpace is returned by SpaceCheckedHost.Stage when the image does not fit.
type ErrNoSpace struct {
	Image           string
	Need, Available int64
}

func (e *ErrNoSpace) Error() string {
	return fmt.Sprintf("not enough space to stage %s: need about %d MiB free (twice its compressed size), %d MiB are", e.Image, e.Need>>20, e.Available>>20)
}

// Stage checks space, then stages.
func (h SpaceCheckedHost) Stage(ctx context.Context, image string) error {
	if h.Size != nil && h.Available != nil {
		size, err1 := h.Size(ctx, image)
		avail, err2 := h.Available(ctx)
		if err1 == nil && err2 == nil && !prefetch.CanStage(avail, size) {
			return &ErrNoSpace{Image: image, Need: prefetch.StagingNeed(size), Available: avail}
		}
	}
	return h.Host.Stage(ctx, image)
}
