package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
	"github.com/bootroll/bootroll/sim/engine"
	"github.com/bootroll/bootroll/sim/scenario"
)

const (
	refA = "registry.example/a@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	refB = "registry.example/b@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	refC = "registry.example/c@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// pfHost is one host with an image filesystem of capacity and used bytes
// and the pinned images a (2Gi, 1Gi of it a shared layer), b (2Gi, the
// same shared layer) and c (8Gi), for the executor alone.
func pfHost(t *testing.T, capacity, used string) (*host, *engine.Engine) {
	t.Helper()
	shared := []scenario.Layer{{Name: "base", Size: resource.MustParse("1Gi")}}
	sc := &scenario.Scenario{
		Host:       scenario.Host{PullBandwidth: resource.MustParse("100Mi")},
		NodeGroups: []scenario.NodeGroup{{Name: "g", ImageFsCapacity: resource.MustParse(capacity), ImageFsUsed: resource.MustParse(used)}},
		PinnedImageSets: []scenario.PinnedImageSet{{Name: "s", Images: []scenario.PinnedImage{
			{Ref: refA, Size: resource.MustParse("2Gi"), Layers: shared},
			{Ref: refB, Size: resource.MustParse("2Gi"), Layers: shared},
			{Ref: refC, Size: resource.MustParse("8Gi")},
		}}},
	}
	eng := engine.New(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), 1)
	c := &Cluster{eng: eng, sc: sc}
	n := &node{name: "g-0", g: &group{spec: &sc.NodeGroups[0]}}
	h := &host{c: c, n: n, daemonUp: true}
	n.host = h
	c.nodes = map[string]*node{n.name: n}
	return h, eng
}

// pull starts a pull through the Runner's seam, as prefetch.Runner does,
// and records its outcome as the Runner classifies it.
func pull(pf *prefetcher, a prefetch.Action, results *[]prefetch.PullResult) {
	pf.beginPull(a, func() {
		err := criImages{pf}.Pull(context.Background(), a.Image, nil)
		res := prefetch.PullResult{Image: a.Image, Attempt: a.Attempt}
		if err != nil {
			res.Kind, res.Message = cri.Classify(err), cri.Message(err)
		}
		*results = append(*results, res)
	})
}

func TestPullSharedLayersCountOnce(t *testing.T) {
	h, eng := pfHost(t, "100Gi", "0")
	pf := h.c.Prefetcher("g-0").(*prefetcher)
	var results []prefetch.PullResult
	pull(pf, prefetch.Action{Type: prefetch.ActionPull, Image: refA, Attempt: 1}, &results)
	if got, want := h.fs().used, int64(4<<30); got != want {
		t.Errorf("while a runs: used %d, want %d (2x its 2Gi)", got, want)
	}
	eng.RunUntil(eng.Now().Add(time.Minute))
	pull(pf, prefetch.Action{Type: prefetch.ActionPull, Image: refB, Attempt: 1}, &results)
	if got, want := h.fs().used, int64(2<<30+2<<30); got != want {
		t.Errorf("while b runs: used %d, want %d (a's 2Gi + 2x b's own 1Gi)", got, want)
	}
	eng.RunUntil(eng.Now().Add(time.Minute))
	if got, want := h.fs().used, int64(3<<30); got != want {
		t.Errorf("after both: used %d, want %d (base once, two own blobs)", got, want)
	}
	if !h.fs().images[refA] || !h.fs().images[refB] || len(results) != 2 || results[1].Kind != "" {
		t.Errorf("images %v, results %+v", h.fs().images, results)
	}
}

func TestPullOutOfSpaceIsContainerdsError(t *testing.T) {
	h, eng := pfHost(t, "20Gi", "8Gi")
	pf := h.c.Prefetcher("g-0").(*prefetcher)
	var results []prefetch.PullResult
	pull(pf, prefetch.Action{Type: prefetch.ActionPull, Image: refC, Attempt: 1}, &results)
	eng.RunUntil(eng.Now().Add(5 * time.Minute))
	if len(results) != 1 {
		t.Fatalf("results %+v, want one", results)
	}
	r := results[0]
	if r.Kind != cri.KindOutOfSpace || !strings.HasPrefix(r.Message, `failed to pull and unpack image "`+refC+`": failed to copy: write /var/lib/containerd/io.containerd.content.v1.content/ingest/`) ||
		!strings.HasSuffix(r.Message, "/data: no space left on device") {
		t.Errorf("result %+v, want OutOfSpace with containerd's ingest message", r)
	}
	if h.fs().used != 8<<30 || h.fs().pinnedHeld != 0 || h.fs().images[refC] {
		t.Errorf("after the failed pull: used %d, pinned %d, present %v; want all freed", h.fs().used, h.fs().pinnedHeld, h.fs().images[refC])
	}
}

func TestPrefetchKeepsStagingReserve(t *testing.T) {
	h, eng := pfHost(t, "40Gi", "16Gi")
	pf := h.c.Prefetcher("g-0")
	sets := []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 1, Images: []string{refC, refA, refB}}}
	var progress []v1alpha1.PinnedSetProgress
	for range 20 {
		p, _, err := pf.Sync(context.Background(), eng.Now(), sets, progress, prefetch.Env{StagingReserve: prefetch.StagingNeed(4 << 30)})
		if err != nil {
			t.Fatal(err)
		}
		progress = p
		eng.RunUntil(eng.Now().Add(time.Minute))
	}
	// 24Gi free: c (16Gi while it pulls) would leave 8Gi < 4Gi (10%) + 8Gi.
	if st := progress[0].Images[0]; st.State != v1alpha1.PinnedFailed || st.Reason != v1alpha1.PinnedReasonInsufficientSpace {
		t.Errorf("c: %+v, want Failed InsufficientSpace", st)
	}
	if progress[0].Present != 2 {
		t.Errorf("present %d, want a and b", progress[0].Present)
	}
	if ok, _ := h.fs().stageStart(4 << 30); !ok {
		t.Errorf("staging a 4Gi OS image does not fit after the prefetch: available %d", h.fs().available())
	}
}

// TestPrefetchGivesReserveBack: pinned images a and b (sharing a 1Gi
// layer) hold 3Gi, and others fill the disk to 512Mi free, 1.5Gi short of
// the 2Gi staging reserve; a Sync with a staging due removes b (counted
// 2Gi, it frees its own 1Gi only), steps again and removes a (its own and
// the shared layer), and the staging fits.
func TestPrefetchGivesReserveBack(t *testing.T) {
	h, eng := pfHost(t, "40Gi", "16Gi")
	pf := h.c.Prefetcher("g-0")
	sets := []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 1, Images: []string{refA, refB}}}
	env := prefetch.Env{StagingReserve: prefetch.StagingNeed(1 << 30)}
	var progress []v1alpha1.PinnedSetProgress
	for range 5 {
		p, _, err := pf.Sync(context.Background(), eng.Now(), sets, progress, env)
		if err != nil {
			t.Fatal(err)
		}
		progress = p
		eng.RunUntil(eng.Now().Add(time.Minute))
	}
	if progress[0].Present != 2 || h.fs().pinnedHeld != 3<<30 {
		t.Fatalf("after the pulls: %+v, pinned %d", progress[0], h.fs().pinnedHeld)
	}
	h.fs().used = h.fs().capacity - 512<<20 // others fill the disk
	env.StagingDue = true
	p, _, err := pf.Sync(context.Background(), eng.Now(), sets, progress, env)
	if err != nil {
		t.Fatal(err)
	}
	if p[0].Present != 0 || h.fs().pinnedHeld != 0 || h.fs().available() != 3584<<20 {
		t.Errorf("after the reclaim: %+v, pinned %d, available %d; want both removed, 3.5Gi free", p[0], h.fs().pinnedHeld, h.fs().available())
	}
	if ok, _ := h.fs().stageStart(1 << 30); !ok {
		t.Errorf("staging a 1Gi OS image does not fit after the reclaim: available %d", h.fs().available())
	}
}
