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

// TestUnpinnedImagesAreNotHeld: what the daemon's pinned images hold for
// os-staging-not-starved (bootrollHeld) leaves out the blobs that only
// images it unpinned use, since those are the kubelet's image GC's now
// (explorer seed 176180 of the storage-exhaustion-during-prefetch
// regression: a pool deleted and created again, the daemon unpinned its
// images on the new record before the sets came back, and the staging
// that followed was blamed on them). A layer shared with an image still
// held stays counted, an image pinned again counts again, and so does a
// pull that runs.
func TestUnpinnedImagesAreNotHeld(t *testing.T) {
	h, eng := pfHost(t, "40Gi", "16Gi")
	pf := h.c.Prefetcher("g-0")
	sync := func(sets []v1alpha1.NodePinnedImageSet) {
		t.Helper()
		var progress []v1alpha1.PinnedSetProgress
		for range 10 {
			p, _, err := pf.Sync(context.Background(), eng.Now(), sets, progress, prefetch.Env{})
			if err != nil {
				t.Fatal(err)
			}
			progress = p
			eng.RunUntil(eng.Now().Add(time.Minute))
		}
	}
	held := func() int64 { return h.fs().bootrollHeld(h.c.pinnedImages()) }
	both := []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 1, Images: []string{refA, refB}}}
	sync(both)
	if got, want := held(), int64(3<<30); got != want || h.fs().pinnedHeld != want {
		t.Fatalf("a and b pinned: held %d (pinnedHeld %d), want %d (the shared 1Gi once)", got, h.fs().pinnedHeld, want)
	}
	sync([]v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 2, Images: []string{refA}}})
	if got, want := held(), int64(2<<30); got != want {
		t.Errorf("b unpinned: held %d, want %d (a's own and the layer it shares with b)", got, want)
	}
	sync(nil)
	if got := held(); got != 0 || !h.c.PinnedPresent("g-0", refA) || !h.c.PinnedPresent("g-0", refB) {
		t.Errorf("both unpinned: held %d, present a %v b %v; want 0, both still present", got, h.c.PinnedPresent("g-0", refA), h.c.PinnedPresent("g-0", refB))
	}
	sync(both)
	if got, want := held(), int64(3<<30); got != want {
		t.Errorf("both pinned again: held %d, want %d", got, want)
	}
	sync(nil)
	p := h.c.Prefetcher("g-0").(*prefetcher)
	var results []prefetch.PullResult
	pull(p, prefetch.Action{Type: prefetch.ActionPull, Image: refC, Attempt: 1}, &results)
	if got, want := held(), int64(16<<30); got != want {
		t.Errorf("a and b unpinned, c pulling: held %d, want %d (c's hold, twice its 8Gi)", got, want)
	}
	eng.RunUntil(eng.Now().Add(5 * time.Minute))
	if got, want := held(), int64(8<<30); got != want || len(results) != 1 || results[0].Kind != "" {
		t.Errorf("c pulled, not pinned yet: held %d, want %d; results %+v", got, want, results)
	}
}
