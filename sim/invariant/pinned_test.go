package invariant

import (
	"strings"
	"testing"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

func TestPinnedSetsExact(t *testing.T) {
	const a, b, c = "r/a@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "r/b@sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "r/c@sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	sc := &scenario.Scenario{Name: "p", Expect: scenario.Expect{Invariants: []scenario.Invariant{scenario.InvPinnedSetsExact}}}
	chk, err := New(sc, Sources{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	set := &v1alpha1.PinnedImageSet{Spec: v1alpha1.PinnedImageSetSpec{Images: []v1alpha1.DigestReference{a, b}}}
	set.Name, set.Generation = "s", 2
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: set})
	bn := &v1alpha1.BootcNode{}
	bn.Name = "n-0"
	bn.Spec.PinnedImageSets = []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 2, Images: []string{a, b}}}
	bn.Status.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "s", Generation: 1, Images: []v1alpha1.PinnedImageProgress{{Image: a}, {Image: c}}}}
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: bn})
	chk.Finish(Outcome{Converged: true})
	if chk.Count(string(scenario.InvPinnedSetsExact)) != 1 || !strings.Contains(chk.Violations()[0].Message, "reports set s generation 1") {
		t.Fatalf("stale report: violations %v", chk.Violations())
	}

	chk, _ = New(sc, Sources{}, t0)
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: set})
	good := bn.DeepCopy()
	good.Status.Daemon.PinnedImages = []v1alpha1.PinnedSetProgress{{Name: "s", Generation: 2, Images: []v1alpha1.PinnedImageProgress{{Image: a, State: v1alpha1.PinnedPresent}, {Image: b, State: v1alpha1.PinnedPresent}}}}
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: good})
	chk.SetPinnedSources(PinnedSources{PinnedPresent: func(_, ref string) bool { return ref == a }})
	chk.Finish(Outcome{Converged: true})
	if vs := chk.Violations(); len(vs) != 1 || !strings.Contains(vs[0].Message, "the host does not have it") {
		t.Fatalf("present but not on the host: violations %v", vs)
	}

	// A node whose daemon does not run at the end (a boot that never gets
	// Ready) keeps its daemon's last report: only its spec is judged.
	running := func(node string) bool { return node != "n-0" }
	chk, _ = New(sc, Sources{}, t0)
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: set})
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: bn})
	chk.SetPinnedSources(PinnedSources{DaemonRunning: running})
	chk.Finish(Outcome{Converged: true})
	if vs := chk.Violations(); len(vs) != 0 {
		t.Fatalf("stale report of a node whose daemon does not run: violations %v", vs)
	}
	// ... but its spec still must carry the set's current generation,
	chk, _ = New(sc, Sources{}, t0)
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: set})
	stale := bn.DeepCopy()
	stale.Spec.PinnedImageSets[0].Generation = 1
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: stale})
	chk.SetPinnedSources(PinnedSources{DaemonRunning: running})
	chk.Finish(Outcome{Converged: true})
	if vs := chk.Violations(); len(vs) != 1 || !strings.Contains(vs[0].Message, "spec carries set s generation 1") {
		t.Fatalf("stale spec of a node whose daemon does not run: violations %v", vs)
	}
	// ... and a node whose daemon runs is judged on its report.
	chk, _ = New(sc, Sources{}, t0)
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: set})
	other := bn.DeepCopy()
	other.Name = "n-1"
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: bn})
	chk.Observe(apiserver.Event{Type: apiserver.Added, Object: other})
	chk.SetPinnedSources(PinnedSources{DaemonRunning: running})
	chk.Finish(Outcome{Converged: true})
	if vs := chk.Violations(); len(vs) != 1 || len(vs[0].Objects) != 1 || vs[0].Objects[0] != "Node/n-1" || !strings.Contains(vs[0].Message, "n-1: reports set s generation 1") {
		t.Fatalf("stale report of a node whose daemon runs: violations %v", vs)
	}
}

func TestOSStagingNotStarved(t *testing.T) {
	sc := &scenario.Scenario{Name: "p", Expect: scenario.Expect{Invariants: []scenario.Invariant{scenario.InvOSStagingNotStarved}}}
	chk, _ := New(sc, Sources{}, t0)
	pending := []facts.StageStarvation{
		{Node: "a", Image: "v2", Need: 8, Available: 2, PinnedHeld: 0}, // not the prefetch's doing
		{Node: "b", Image: "v2", Need: 8, Available: 2, PinnedHeld: 3}, // would not fit anyway
		{Node: "c", Image: "v2", Need: 8, Available: 2, PinnedHeld: 6}, // starved
	}
	chk.SetPinnedSources(PinnedSources{TakeStageStarvations: func() []facts.StageStarvation { p := pending; pending = nil; return p }})
	chk.Check(t0)
	if vs := chk.Violations(); len(vs) != 1 || vs[0].Objects[0] != "Node/c" {
		t.Fatalf("violations %v, want node c only", vs)
	}
}
