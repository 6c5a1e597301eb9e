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

// prefetcher is the twin's executor of the prefetch manager on one node:
// it implements nodedaemon.Prefetcher as prefetch.Runner does, observing
// the host's image filesystem, calling the same prefetch.Manager.Step and
// running the pulls it asks for as engine events on virtual time. It lives
// as long as the daemon process: the pulls are the daemon's CRI calls, so
// they end when it stops.
type prefetcher struct {
	h       *host
	m       *prefetch.Manager
	pulls   map[string]*pullRun
	results []prefetch.PullResult
	// last is the progress the last Step returned, as the Runner keeps it.
	last     []v1alpha1.PinnedSetProgress
	haveLast bool
}

// pullRun is one pull in progress.
type pullRun struct {
	ref     string
	attempt int32
	hold    int64
	blobs   []imageLayer
	done    *engine.Handle
}

var _ nodedaemon.Prefetcher = (*prefetcher)(nil)

// Prefetcher returns the twin's prefetch executor of node's running
// daemon process (a new one after each daemon start), or nil.
func (c *Cluster) Prefetcher(node string) nodedaemon.Prefetcher {
	n := c.nodes[node]
	if n == nil {
		return nil
	}
	h := n.host
	if h.pf == nil {
		h.pf = &prefetcher{h: h, m: prefetch.New(prefetch.Config{}), pulls: map[string]*pullRun{}}
	}
	return h.pf
}

// stopPrefetch ends the daemon's pulls with the process.
func (h *host) stopPrefetch(reason string) {
	pf := h.pf
	if pf == nil {
		return
	}
	h.pf = nil
	for _, ref := range pfSortedKeys(pf.pulls) {
		p := pf.pulls[ref]
		p.done.Cancel()
		h.fs().releasePinned(p.hold)
		h.c.trace("node/pull-abort", h.object(), map[string]any{"image": ref, "reason": reason})
	}
}

// Sync implements nodedaemon.Prefetcher. As prefetch.Runner does, it
// observes and steps again after Step removed images, at most
// prefetch.ReclaimRounds times, until Step removes no more.
func (p *prefetcher) Sync(_ context.Context, now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	h := p.h
	if err := h.usable("prefetch"); err != nil {
		return nil, 0, err
	}
	if p.h.pf != p {
		return nil, 0, fmt.Errorf("prefetch on node %s: %w", h.n.name, ErrNotRunning)
	}
	for round := 1; ; round++ {
		progress, requeue, removed := p.syncOnce(now, sets, current, env)
		if !removed || round >= prefetch.ReclaimRounds {
			return progress, requeue, nil
		}
	}
}

func (p *prefetcher) syncOnce(now time.Time, sets []v1alpha1.NodePinnedImageSet, current []v1alpha1.PinnedSetProgress, env prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, bool) {
	h := p.h
	if p.haveLast {
		current = p.last
	}
	f := h.fs()
	catalog := h.c.pinnedImages()
	obs := prefetch.Observation{
		Images:         map[string]prefetch.ImageInfo{},
		Pulling:        map[string]int32{},
		Results:        slices.Clone(p.results),
		Fs:             f.space(),
		StagingReserve: env.StagingReserve,
		ControlPlane:   env.ControlPlane,
		StagingDue:     env.StagingDue,
	}
	for ref, run := range p.pulls {
		obs.Pulling[ref] = run.attempt
	}
	for _, set := range sets {
		for _, ref := range set.Images {
			var size int64
			if im := catalog[ref]; im != nil && (!im.sizeUnknown || f.images[ref]) {
				size = im.size // the manifest's, or the runtime's once present
			}
			obs.Images[ref] = prefetch.ImageInfo{Present: f.images[ref], Size: size}
		}
	}
	actions, progress, requeue := p.m.Step(now, sets, current, obs)
	p.results = slices.Clone(p.results[len(obs.Results):])
	p.last, p.haveLast = progress, true
	removed := false
	for _, a := range actions {
		switch a.Type {
		case prefetch.ActionPull:
			p.start(a)
		case prefetch.ActionCancel:
			p.cancel(a.Image)
		case prefetch.ActionRemove:
			f.remove(a.Image, catalog)
			removed = true
			h.c.trace("node/image-remove", h.object(), map[string]any{"image": a.Image, "available": f.available()})
		}
	}
	return progress, requeue, removed
}

// start starts a pull: it downloads the image's missing blobs at the
// node's bandwidth while holding PullFactor times their bytes, or fails
// with containerd's ENOSPC error once the filesystem is full.
func (p *prefetcher) start(a prefetch.Action) {
	h := p.h
	if p.pulls[a.Image] != nil {
		return
	}
	f := h.fs()
	run := &pullRun{ref: a.Image, attempt: a.Attempt}
	bw := h.c.pullBandwidth()
	im := h.c.pinnedImages()[a.Image]
	if h.c.registryDown() {
		run.done = h.c.eng.After(PullOverhead, "node/pull/"+h.n.name, func() {
			p.end(run, status.Errorf(codes.Unavailable, "failed to pull and unpack image %q: failed to resolve reference %q: %s", a.Image, a.Image, registryError))
		})
		p.pulls[a.Image] = run
		return
	}
	if im == nil {
		run.done = h.c.eng.After(PullOverhead, "node/pull/"+h.n.name, func() {
			p.end(run, status.Errorf(codes.NotFound, "failed to pull and unpack image %q: failed to resolve reference %q: %s: not found", a.Image, a.Image, a.Image))
		})
		p.pulls[a.Image] = run
		return
	}
	blobs, bytes := f.missing(im)
	need := prefetch.PullNeed(bytes)
	avail := f.available()
	if f.capacity > 0 && need > avail {
		// It downloads what fits, then the write fails.
		run.hold = avail
		f.holdPinned(run.hold)
		d := PullOverhead + downloadTime(avail/prefetch.PullFactor, bw)
		msg := fmt.Sprintf("failed to pull and unpack image %q: failed to copy: write /var/lib/containerd/io.containerd.content.v1.content/ingest/%s/data: no space left on device", a.Image, ingestID(a.Image, a.Attempt))
		run.done = h.c.eng.After(d, "node/pull/"+h.n.name, func() { p.end(run, status.Error(codes.Unknown, msg)) })
		h.c.trace("node/pull-start", h.object(), map[string]any{"image": a.Image, "attempt": int(a.Attempt), "bytes": bytes, "fits": "no"})
	} else {
		run.hold, run.blobs = need, blobs
		f.holdPinned(run.hold)
		d := PullOverhead + downloadTime(bytes, bw)
		run.done = h.c.eng.After(d, "node/pull/"+h.n.name, func() { p.end(run, nil) })
		h.c.trace("node/pull-start", h.object(), map[string]any{"image": a.Image, "attempt": int(a.Attempt), "bytes": bytes})
	}
	p.pulls[a.Image] = run
}

// ingestID is a stable stand-in for containerd's ingest directory name.
func ingestID(ref string, attempt int32) string {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(ref); i++ {
		h = (h ^ uint64(ref[i])) * 1099511628211
	}
	return fmt.Sprintf("%016x%08x", h, attempt)
}

// end finishes a pull and wakes the daemon.
func (p *prefetcher) end(run *pullRun, err error) {
	h := p.h
	delete(p.pulls, run.ref)
	f := h.fs()
	f.releasePinned(run.hold)
	res := prefetch.PullResult{Image: run.ref, Attempt: run.attempt}
	if err == nil {
		f.store(run.ref, run.blobs)
		h.c.trace("node/pull-done", h.object(), map[string]any{"image": run.ref, "attempt": int(run.attempt)})
	} else {
		res.Kind, res.Message = cri.Classify(err), cri.Message(err)
		h.c.trace("node/pull-fail", h.object(), map[string]any{"image": run.ref, "attempt": int(run.attempt), "kind": string(res.Kind), "error": res.Message})
	}
	p.results = append(p.results, res)
	if h.c.hooks.HostChanged != nil && h.daemonUp && h.pf == p {
		h.c.hooks.HostChanged(h.n.name)
	}
}

// cancel cancels a running pull, as the Runner cancels its context.
func (p *prefetcher) cancel(ref string) {
	run := p.pulls[ref]
	if run == nil {
		return
	}
	run.done.Cancel()
	delete(p.pulls, ref)
	p.h.fs().releasePinned(run.hold)
	p.results = append(p.results, prefetch.PullResult{Image: ref, Attempt: run.attempt, Kind: cri.KindCanceled, Message: "context canceled"})
	p.h.c.trace("node/pull-cancel", p.h.object(), map[string]any{"image": ref})
}

func pfSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
