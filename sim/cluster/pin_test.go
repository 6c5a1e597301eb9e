package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// TestPrefetchPinsInTheTwin: the twin's runtime pins what the daemon's
// Runner pins, reports it pinned in the progress, and unpins what no set
// lists any more (the image stays on the node); a removed image loses its
// pin with it.
func TestPrefetchPinsInTheTwin(t *testing.T) {
	h, eng := pfHost(t, "40Gi", "16Gi")
	pf := h.c.Prefetcher("g-0")
	sync := func(sets []v1alpha1.NodePinnedImageSet, progress []v1alpha1.PinnedSetProgress) []v1alpha1.PinnedSetProgress {
		t.Helper()
		for range 10 {
			p, _, err := pf.Sync(context.Background(), eng.Now(), sets, progress, prefetch.Env{})
			if err != nil {
				t.Fatal(err)
			}
			progress = p
			eng.RunUntil(eng.Now().Add(time.Minute))
		}
		return progress
	}
	sets := []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 1, Images: []string{refA, refB}}}
	progress := sync(sets, nil)
	for _, e := range progress[0].Images {
		if e.State != v1alpha1.PinnedPresent || !e.Pinned {
			t.Errorf("%s: %+v, want present and pinned", e.Image, e)
		}
		if !h.c.PinnedInRuntime("g-0", e.Image) {
			t.Errorf("%s not pinned in the runtime", e.Image)
		}
	}

	sets = []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 2, Images: []string{refA}}}
	sync(sets, progress)
	if !h.c.PinnedPresent("g-0", refB) || h.c.PinnedInRuntime("g-0", refB) {
		t.Errorf("b left the set: present %v, pinned %v; want present and unpinned", h.c.PinnedPresent("g-0", refB), h.c.PinnedInRuntime("g-0", refB))
	}
	if !h.c.PinnedInRuntime("g-0", refA) {
		t.Errorf("a, still in the set, lost its pin")
	}
	h.fs().remove(refA, h.c.pinnedImages())
	if h.c.PinnedInRuntime("g-0", refA) || h.fs().pins[refA] {
		t.Errorf("a removed but still pinned")
	}
}
