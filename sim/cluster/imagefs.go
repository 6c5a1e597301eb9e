package cluster

import (
	"slices"

	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file is the host's image filesystem: the one filesystem that OS
// staging (bootc) and container image pulls (containerd) share, with its
// capacity from the node group and what is in use.
//
// The model, kept simple on purpose:
//   - the filesystem starts with imageFsUsed in use (the booted OS and
//     whatever else the node holds); nothing is ever garbage collected
//     except what is said below;
//   - a container image is its layers plus a blob of its own (what its
//     size holds beyond the layers); a layer on the node already is not
//     downloaded again and is stored once;
//   - a pull holds PullFactor (2) times the bytes it downloads while it
//     runs (the compressed blobs in the content store and their unpacked
//     copy) and keeps the bytes it downloaded once it ends; when that
//     hold does not fit in what is free, the pull fails with containerd's
//     ENOSPC error after downloading what fitted, and frees it all;
//   - staging an OS image holds PullFactor times its size while it runs
//     (prefetch.StagingNeed) and keeps its size once staged; the next boot
//     frees the staged bytes again (the deployment it replaces is pruned);
//   - a staging or a pull that ends early (canceled, aborted) frees its
//     hold.

// imageFs is one host's image filesystem.
type imageFs struct {
	capacity int64 // 0: unbounded
	used     int64
	// layers holds the bytes of the layers (and own blobs) on disk, by
	// layer key.
	layers map[string]int64
	// images are the pinned images present, by reference.
	images map[string]bool
	// pins are the present images the daemon pinned in the runtime
	// (containerd's pinned label with bootroll's): the kubelet's image GC
	// would keep them. The runtime modelled honours the label, as
	// containerd 1.7 and later do.
	pins map[string]bool
	// unpinned are the present images the daemon unpinned (no set of its
	// node listed them any more) and has not pinned again: bootroll let
	// them go to the kubelet's image GC, which removes unused images
	// under disk pressure (docs/pinning.md), so they are no longer what
	// bootroll holds (bootrollHeld).
	unpinned map[string]bool
	// pinnedHeld is the bytes the pinned images hold: their layers on
	// disk and the holds of the pulls that run.
	pinnedHeld int64
	// stageHold is the bytes the running OS staging holds; staged the
	// bytes of the staged deployment.
	stageHold, staged int64
}

func newImageFs(g *scenario.NodeGroup) *imageFs {
	return &imageFs{
		capacity: g.ImageFsCapacity.Value(),
		used:     g.ImageFsUsed.Value(),
		layers:   map[string]int64{},
		images:   map[string]bool{},
		pins:     map[string]bool{},
		unpinned: map[string]bool{},
	}
}

// fs returns the host's image filesystem, made on first use.
func (h *host) fs() *imageFs {
	if h.imgfs == nil {
		h.imgfs = newImageFs(h.n.g.spec)
	}
	return h.imgfs
}

// available is the free space; with no capacity it is effectively
// unbounded.
func (f *imageFs) available() int64 {
	if f.capacity <= 0 {
		return 1 << 62
	}
	return max(f.capacity-f.used, 0)
}

func (f *imageFs) space() prefetch.Space {
	if f.capacity <= 0 {
		return prefetch.Space{Capacity: 1 << 62, Available: 1 << 62}
	}
	return prefetch.Space{Capacity: f.capacity, Available: f.available()}
}

// pinnedImage is the registry's model of one pinned image.
type pinnedImage struct {
	ref  string
	size int64
	// sizeUnknown: the daemon cannot learn size before the pull.
	sizeUnknown bool
	// layers are the image's blobs by key, its own blob last.
	layers []imageLayer
}

type imageLayer struct {
	key  string
	size int64
}

// pinnedImages is the registry's catalogue of the scenario's pinned
// images, from the sets and the events that change them; the first
// mention of a reference wins.
func (c *Cluster) pinnedImages() map[string]*pinnedImage {
	if c.pinned != nil {
		return c.pinned
	}
	c.pinned = map[string]*pinnedImage{}
	add := func(ims []scenario.PinnedImage) {
		for _, im := range ims {
			if c.pinned[im.Ref] != nil {
				continue
			}
			p := &pinnedImage{ref: im.Ref, size: im.Size.Value(), sizeUnknown: im.SizeUnknown}
			rest := p.size
			for _, l := range im.Layers {
				p.layers = append(p.layers, imageLayer{key: "layer/" + l.Name, size: l.Size.Value()})
				rest -= l.Size.Value()
			}
			if rest > 0 {
				p.layers = append(p.layers, imageLayer{key: "image/" + im.Ref, size: rest})
			}
			c.pinned[im.Ref] = p
		}
	}
	for _, s := range c.sc.PinnedImageSets {
		add(s.Images)
	}
	for _, ev := range c.sc.Events {
		if ev.SetPinnedImages != nil {
			add(ev.SetPinnedImages.Images)
		}
	}
	return c.pinned
}

// missing lists the blobs of im not on disk, and their bytes.
func (f *imageFs) missing(im *pinnedImage) ([]imageLayer, int64) {
	var out []imageLayer
	var n int64
	for _, l := range im.layers {
		if _, ok := f.layers[l.key]; ok || slices.ContainsFunc(out, func(o imageLayer) bool { return o.key == l.key }) {
			continue
		}
		out = append(out, l)
		n += l.size
	}
	return out, n
}

// hold takes n bytes for a pinned pull.
func (f *imageFs) holdPinned(n int64) {
	f.used += n
	f.pinnedHeld += n
}

func (f *imageFs) releasePinned(n int64) {
	f.used -= n
	f.pinnedHeld -= n
}

// store puts the blobs on disk (those not there yet) and marks the image
// present.
func (f *imageFs) store(ref string, blobs []imageLayer) {
	for _, l := range blobs {
		if _, ok := f.layers[l.key]; ok {
			continue
		}
		f.layers[l.key] = l.size
		f.holdPinned(l.size)
	}
	f.images[ref] = true
}

// remove removes the pinned image ref and frees its blobs that no other
// present image uses, as the runtime's RemoveImage and its garbage
// collection do. catalog gives the images' blobs.
func (f *imageFs) remove(ref string, catalog map[string]*pinnedImage) {
	if !f.images[ref] {
		return
	}
	delete(f.images, ref)
	delete(f.pins, ref) // the labels go with the image record
	delete(f.unpinned, ref)
	im := catalog[ref]
	if im == nil {
		return
	}
	inUse := f.layersOf(catalog, func(string) bool { return true })
	for _, l := range im.layers {
		if n, ok := f.layers[l.key]; ok && !inUse[l.key] {
			delete(f.layers, l.key)
			f.releasePinned(n)
		}
	}
}

// layersOf is the set of blob keys the present images that keep selects
// use. catalog gives the images' blobs.
func (f *imageFs) layersOf(catalog map[string]*pinnedImage, keep func(ref string) bool) map[string]bool {
	out := map[string]bool{}
	for ref := range f.images {
		if im := catalog[ref]; im != nil && keep(ref) {
			for _, l := range im.layers {
				out[l.key] = true
			}
		}
	}
	return out
}

// bootrollHeld is what the daemon's pinned images hold, the room it can
// give an OS staging back: pinnedHeld less the blobs that only images it
// unpinned use (a blob an image it still holds shares stays counted).
// catalog gives the images' blobs.
func (f *imageFs) bootrollHeld(catalog map[string]*pinnedImage) int64 {
	if len(f.unpinned) == 0 {
		return f.pinnedHeld
	}
	held := f.layersOf(catalog, func(ref string) bool { return !f.unpinned[ref] })
	n := f.pinnedHeld
	gone := map[string]bool{}
	for ref := range f.unpinned {
		im := catalog[ref]
		if im == nil {
			continue
		}
		for _, l := range im.layers {
			if size, ok := f.layers[l.key]; ok && !held[l.key] && !gone[l.key] {
				gone[l.key] = true
				n -= size
			}
		}
	}
	return n
}

// stageStart takes the hold of an OS staging of size bytes, or says why it
// does not fit.
func (f *imageFs) stageStart(size int64) (ok bool, need int64) {
	need = prefetch.StagingNeed(size)
	if f.capacity > 0 && need > f.available() {
		return false, need
	}
	f.stageHold = need
	f.used += need
	return true, need
}

// stageEnd frees the staging hold; a finished staging keeps size bytes.
func (f *imageFs) stageEnd(staged bool, size int64) {
	f.used -= f.stageHold
	f.stageHold = 0
	if staged {
		f.used -= f.staged
		f.staged = size
		f.used += size
	}
}

// booted frees the staged deployment's bytes at a boot.
func (f *imageFs) booted() {
	f.used -= f.staged
	f.staged = 0
}

// TakeStageStarvations returns the stagings that failed for lack of space
// since the last call.
func (c *Cluster) TakeStageStarvations() []facts.StageStarvation {
	out := c.starved
	c.starved = nil
	return out
}

// PinnedPresent reports whether a pinned image is on the node's image
// filesystem.
func (c *Cluster) PinnedPresent(node, ref string) bool {
	n := c.nodes[node]
	if n == nil || n.host.imgfs == nil {
		return false
	}
	return n.host.imgfs.images[ref]
}

// PinnedInRuntime reports whether a pinned image is on the node's image
// filesystem and pinned in the runtime (exempt from the kubelet's image
// garbage collection).
func (c *Cluster) PinnedInRuntime(node, ref string) bool {
	n := c.nodes[node]
	if n == nil || n.host.imgfs == nil {
		return false
	}
	return n.host.imgfs.images[ref] && n.host.imgfs.pins[ref]
}

// DaemonRunning reports whether the node's daemon process runs now: not
// while the host is down, rebooting or hung in a boot that never gets
// Ready, nor while a crashed daemon has not started again.
func (c *Cluster) DaemonRunning(node string) bool {
	n := c.nodes[node]
	return n != nil && !n.gone && n.host.daemonUp
}

// ImageFsUsage is a node's image filesystem: capacity, used, and what
// pinned images hold.
func (c *Cluster) ImageFsUsage(node string) (capacity, used, pinned int64) {
	n := c.nodes[node]
	if n == nil {
		return 0, 0, 0
	}
	f := n.host.fs()
	return f.capacity, f.used, f.pinnedHeld
}
