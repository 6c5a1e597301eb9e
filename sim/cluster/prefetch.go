package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/engine"
)

// PullOverhead is the time a pinned pull takes beyond its download
// (resolving, unpacking).
const PullOverhead = 2 * time.Second

// This file is the prefetch runner's edge as the daemon reaches it: the
// production prefetch.Runner (over the same prefetch.Manager) runs
// unchanged, and only what it calls is simulated: the runtime's CRI image
// service (criImages: ImageStatus, PullImage, RemoveImage, and the image
// filesystem that ImageFsInfo and statfs measure), the registry's
// manifests (registrySizes) and the background of its pulls (beginPull:
// an engine event at the simulated download's end instead of a goroutine).

// prefetcher is one daemon process's prefetch runner and the pulls its
// runtime runs for it. It lives as long as the process: the pulls are the
// daemon's CRI calls, so they end when it stops.
type prefetcher struct {
	h     *host
	r     *prefetch.Runner
	pulls map[string]*pullRun
}

// pullRun is one pull in progress.
type pullRun struct {
	ref     string
	attempt int32
	hold    int64
	blobs   []imageLayer
	err     error // the pull's outcome at done
	done    *engine.Handle
	ran     bool
}

var _ nodedaemon.Prefetcher = (*prefetcher)(nil)

// Prefetcher returns the prefetch runner of node's running daemon process
// (a new one after each daemon start), or nil.
func (c *Cluster) Prefetcher(node string) nodedaemon.Prefetcher {
	n := c.nodes[node]
	if n == nil {
		return nil
	}
	return n.host.held().pf
}

// stopPrefetch ends the daemon's pulls with the process.
func (h *host) stopPrefetch(reason string) {
	if h.proc == nil {
		return
	}
	pf := h.proc.pf
	for _, ref := range pfSortedKeys(pf.pulls) {
		p := pf.pulls[ref]
		p.done.Cancel()
		h.fs().releasePinned(p.hold)
		h.c.trace("node/pull-abort", h.object(), map[string]any{"image": ref, "reason": reason})
	}
	pf.pulls = nil
}

// Sync implements nodedaemon.Prefetcher: the process's prefetch.Runner,
// while the process runs.
func (p *prefetcher) Sync(ctx context.Context, now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	h := p.h
	if err := h.usable("prefetch"); err != nil {
		return nil, 0, err
	}
	if h.proc == nil || h.proc.pf != p {
		return nil, 0, fmt.Errorf("prefetch on node %s: %w", h.n.name, ErrNotRunning)
	}
	return p.r.Sync(ctx, now, sets, current, env)
}

// beginPull is prefetch.Runner.Go: the runtime starts pulling the image's
// missing blobs at the node's bandwidth while holding PullFactor times
// their bytes, and pull (the Runner's PullImage call) returns when the
// download ends, after PullOverhead. When that hold does not fit, it
// downloads what fits and fails with containerd's ENOSPC error; with the
// registry down or the image unknown it fails after PullOverhead. stop
// (the pull's context canceled) returns the call at once.
func (p *prefetcher) beginPull(a prefetch.Action, pull func()) (stop func()) {
	h := p.h
	f := h.fs()
	image := a.Image
	run := &pullRun{ref: image, attempt: a.Attempt}
	bw := h.c.pullBandwidth()
	im := h.c.pinnedImages()[image]
	d := PullOverhead
	switch {
	case h.c.registryDown():
		run.err = status.Errorf(codes.Unavailable, "failed to pull and unpack image %q: failed to resolve reference %q: %s", image, image, registryError)
	case im == nil:
		run.err = status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", image, image, image)
	default:
		blobs, bytes := f.missing(im)
		need := prefetch.PullNeed(bytes)
		avail := f.available()
		if f.capacity > 0 && need > avail {
			// It downloads what fits, then the write fails.
			run.hold = avail
			d += downloadTime(avail/prefetch.PullFactor, bw)
			run.err = status.Errorf(codes.Unknown, "failed to pull and unpack image %q: failed to copy: write /var/lib/containerd/io.containerd.content.v1.content/ingest/%s/data: no space left on device", image, ingestID(image, run.attempt))
			h.c.trace("node/pull-start", h.object(), map[string]any{"image": image, "attempt": int(run.attempt), "bytes": bytes, "fits": "no"})
		} else {
			run.hold, run.blobs = need, blobs
			d += downloadTime(bytes, bw)
			h.c.trace("node/pull-start", h.object(), map[string]any{"image": image, "attempt": int(run.attempt), "bytes": bytes})
		}
		f.holdPinned(run.hold)
	}
	run.done = h.c.eng.After(d, "node/pull/"+h.n.name, func() {
		run.ran = true
		pull()
	})
	p.pulls[image] = run
	return func() {
		if !run.ran {
			run.ran = true
			run.done.Cancel()
			pull()
		}
	}
}

// ingestID is a stable stand-in for containerd's ingest directory name.
func ingestID(ref string, attempt int32) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(ref); i++ {
		h = (h ^ uint64(ref[i])) * 1099511628211
	}
	return fmt.Sprintf("%016x%08x", h, attempt)
}

// criImages is the runtime's CRI image service as the daemon process sees
// it, with the errors of containerd 1.6 (cri-errors.md) wrapped as
// cri.Client wraps them.
type criImages struct{ p *prefetcher }

var (
	_ prefetch.ImageService = criImages{}
	_ prefetch.Pinner       = criImages{}
)

// ImageStatus implements prefetch.ImageService: a present image has the
// registry's compressed size.
func (c criImages) ImageStatus(_ context.Context, ref string) (bool, int64, error) {
	f := c.p.h.fs()
	if !f.images[ref] {
		return false, 0, nil
	}
	var size int64
	if im := c.p.h.c.pinnedImages()[ref]; im != nil {
		size = im.size
	}
	return true, size, nil
}

// Pull implements prefetch.ImageService: PullImage returns when the
// download beginPull started ends, or at once when ctx is canceled.
func (c criImages) Pull(ctx context.Context, ref string, _ *cri.Auth) error {
	p := c.p
	h := p.h
	run := p.pulls[ref]
	if run == nil {
		return fmt.Errorf("pull %s: %w", ref, status.Error(codes.Unknown, "no pull of "+ref+" was started"))
	}
	delete(p.pulls, ref)
	f := h.fs()
	f.releasePinned(run.hold)
	if err := ctx.Err(); err != nil {
		h.c.trace("node/pull-cancel", h.object(), map[string]any{"image": ref})
		return fmt.Errorf("pull %s: %w", ref, status.FromContextError(err).Err())
	}
	if run.err != nil {
		h.c.trace("node/pull-fail", h.object(), map[string]any{"image": ref, "attempt": int(run.attempt), "kind": string(cri.Classify(run.err)), "error": cri.Message(run.err)})
		return fmt.Errorf("pull %s: %w", ref, run.err)
	}
	f.store(ref, run.blobs)
	h.c.trace("node/pull-done", h.object(), map[string]any{"image": ref, "attempt": int(run.attempt)})
	return nil
}

// FsInfo implements prefetch.ImageService: statfs of the image
// filesystem.
func (c criImages) FsInfo(context.Context) (int64, int64, error) {
	sp := c.p.h.fs().space()
	return sp.Capacity, sp.Available, nil
}

// RemoveImage implements prefetch.ImageService: the image goes, and the
// blobs no other present image uses with it.
func (c criImages) RemoveImage(_ context.Context, ref string) error {
	h := c.p.h
	f := h.fs()
	f.remove(ref, h.c.pinnedImages())
	h.c.trace("node/image-remove", h.object(), map[string]any{"image": ref, "available": f.available()})
	return nil
}

// PinState implements prefetch.Pinner: the runtime modelled is a
// containerd that honours its pinned label (1.7 and later), and the
// daemon's own pins are the images carrying bootroll's label.
func (c criImages) PinState(context.Context) (bool, string, []string, error) {
	return true, "", pfSortedKeys(c.p.h.fs().pins), nil
}

// Pinned implements prefetch.Pinner: CRI ImageStatus's pinned.
func (c criImages) Pinned(_ context.Context, ref string) (bool, error) {
	f := c.p.h.fs()
	return f.images[ref] && f.pins[ref], nil
}

// Pin implements prefetch.Pinner: an absent image is containerd's
// NotFound.
func (c criImages) Pin(_ context.Context, ref string) error {
	f := c.p.h.fs()
	if !f.images[ref] {
		return fmt.Errorf("pin %s: %w", ref, status.Errorf(codes.NotFound, "image %q: not found", ref))
	}
	if !f.pins[ref] {
		c.p.h.c.trace("node/pin", c.p.h.object(), map[string]any{"image": ref})
	}
	f.pins[ref] = true
	delete(f.unpinned, ref)
	return nil
}

// Unpin implements prefetch.Pinner: the image stays, given up to the
// kubelet's image GC.
func (c criImages) Unpin(_ context.Context, ref string) error {
	f := c.p.h.fs()
	if f.pins[ref] && f.images[ref] {
		f.unpinned[ref] = true
		c.p.h.c.trace("node/unpin", c.p.h.object(), map[string]any{"image": ref})
	}
	delete(f.pins, ref)
	return nil
}

// registrySizes is the registry's answer to the runner's manifest lookups:
// the size of a pinned image, unless the daemon cannot read it
// (sizeUnknown).
type registrySizes struct{ c *Cluster }

var _ prefetch.Sizer = registrySizes{}

// Size implements prefetch.Sizer.
func (s registrySizes) Size(_ context.Context, ref string, _ *cri.Auth) (int64, error) {
	im := s.c.pinnedImages()[ref]
	switch {
	case im == nil:
		return 0, fmt.Errorf("size of %s: MANIFEST_UNKNOWN: manifest unknown", ref)
	case im.sizeUnknown:
		return 0, fmt.Errorf("size of %s: GET https://registry.example/v2/: unexpected status code 401 Unauthorized", ref)
	}
	return im.size, nil
}

func pfSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
