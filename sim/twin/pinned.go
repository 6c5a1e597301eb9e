package twin

import (
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/invariant"
	"github.com/bootroll/bootroll/sim/scenario"
)

// This file wires pinned images: the PinnedImageSet controller's queue and
// watches, the scenario's sets and their changes, and each daemon's
// prefetch executor (the cluster model's, running prefetch.Manager on
// virtual time, built by nodedaemon.Wire) with its OS staging reserve.

// listPinnedSets delivers the initial list of PinnedImageSets to a new
// controller process.
func (r *runner) listPinnedSets() {
	var sets v1alpha1.PinnedImageSetList
	if err := r.api.AdminClient().List(r.ctx, &sets); err != nil {
		r.fail(fmt.Errorf("controller start: list PinnedImageSets: %w", err))
		return
	}
	for i := range sets.Items {
		r.dispatchController(apiserver.Event{Type: apiserver.Added, Object: &sets.Items[i]})
	}
}

// stagingReserve is the OS staging reserve every daemon keeps: the
// daemon's own default (--staging-reserve), as a daemon deployed with the
// shipped manifests runs, or none under bootroll.testOnly.noStagingReserve.
// It is not derived from the scenario's images: a reserve that happens to
// fit the images would hide a default that does not.
func stagingReserve(sc *scenario.Scenario) int64 {
	if sc.Bootroll.TestOnly.NoStagingReserve {
		return 0
	}
	return nodedaemon.DefaultStagingReserve
}

// daemonConfig are a daemon process's settings: the binary's defaults,
// the scenario's staging reserve and its deliberately broken daemon
// settings.
func (r *runner) daemonConfig() nodedaemon.Config {
	return nodedaemon.Config{
		Resync:         nodedaemon.DefaultResync,
		StagingReserve: stagingReserve(r.sc),
		TestOnly:       nodedaemon.TestOnly{ForgetLastReboot: r.sc.Bootroll.TestOnly.ForgetLastReboot},
	}
}

// setupPinned gives the invariants the model's answers and creates the
// scenario's PinnedImageSets: at the start, or at their time.
func (r *runner) setupPinned() error {
	r.chk.SetPinnedSources(invariant.PinnedSources{
		TakeStageStarvations: r.cl.TakeStageStarvations,
		PinnedPresent:        r.cl.PinnedPresent,
		DaemonRunning:        r.cl.DaemonRunning,
	})
	for i := range r.sc.PinnedImageSets {
		ps := r.sc.PinnedImageSets[i]
		if ps.At == nil || *ps.At <= 0 {
			if err := r.createPinnedSet(ps); err != nil {
				return err
			}
			continue
		}
		at := r.sc.Start.Add(*ps.At)
		if at.After(r.quietAfter) {
			r.quietAfter = at
		}
		r.eng.At(at, "scenario/pinned-set/"+ps.Name, func() {
			if err := r.createPinnedSet(ps); err != nil {
				r.fail(fmt.Errorf("pinnedImageSets %s at %s: %w", ps.Name, *ps.At, err))
			}
		})
	}
	return nil
}

func (r *runner) createPinnedSet(ps scenario.PinnedImageSet) error {
	set := &v1alpha1.PinnedImageSet{}
	set.Name = ps.Name
	set.Spec.Pool = ps.Pool
	set.Spec.NodeSelector = ps.NodeSelector
	set.Spec.Images = pinnedRefs(ps.Images)
	set.Spec.Concurrency = ps.Concurrency
	r.tr.emit("scenario.pinnedImageSet", "PinnedImageSet/"+ps.Name, map[string]any{"images": len(ps.Images)})
	if err := r.api.AdminClient().Create(r.ctx, set); err != nil {
		return fmt.Errorf("creating PinnedImageSet %s: %w", ps.Name, err)
	}
	return nil
}

func pinnedRefs(ims []scenario.PinnedImage) []v1alpha1.DigestReference {
	out := make([]v1alpha1.DigestReference, 0, len(ims))
	for _, im := range ims {
		out = append(out, v1alpha1.DigestReference(im.Ref))
	}
	return out
}

// setPinnedImages replaces a set's images as a user would.
func (r *runner) setPinnedImages(e *scenario.SetPinnedImages) error {
	c := r.api.AdminClient()
	var set v1alpha1.PinnedImageSet
	if err := c.Get(r.ctx, client.ObjectKey{Name: e.Set}, &set); err != nil {
		return fmt.Errorf("get PinnedImageSet %s: %w", e.Set, err)
	}
	old := set.Spec.Images
	set.Spec.Images = pinnedRefs(e.Images)
	var added, removed int
	for _, im := range set.Spec.Images {
		if !slices.Contains(old, im) {
			added++
		}
	}
	for _, im := range old {
		if !slices.Contains(set.Spec.Images, im) {
			removed++
		}
	}
	r.tr.emit("scenario.setPinnedImages", "PinnedImageSet/"+e.Set, map[string]any{"added": added, "removed": removed, "images": len(e.Images)})
	if err := c.Update(r.ctx, &set); err != nil {
		return fmt.Errorf("update PinnedImageSet %s: %w", e.Set, err)
	}
	return nil
}
