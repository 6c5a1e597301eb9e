package prefetch

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// vnode is a node with an image service on virtual time, driven the way
// the twin drives the manager: one thread, Step, perform, advance to the
// next event. It checks the manager's promises at every pull start.
type vnode struct {
	t        *testing.T
	m        *Manager
	sets     []v1alpha1.NodePinnedImageSet
	capacity int64
	used     int64
	reserve  int64
	sizes    map[string]int64
	duration time.Duration
	// down is when the registry refuses connections.
	downFrom, downTo time.Time

	now      time.Time
	present  map[string]bool
	inflight map[string]*vpull
	results  []PullResult
	current  []v1alpha1.PinnedSetProgress
	starts   []time.Time
	trace    []string
	maxInFly int
}

type vpull struct {
	attempt int32
	end     time.Time
	fail    cri.Kind
}

func (n *vnode) down(t time.Time) bool { return !t.Before(n.downFrom) && t.Before(n.downTo) }

func (n *vnode) observe() Observation {
	obs := Observation{
		Images:         map[string]ImageInfo{},
		Pulling:        map[string]int32{},
		Results:        n.results,
		Fs:             Space{Capacity: n.capacity, Available: n.capacity - n.used},
		StagingReserve: n.reserve,
	}
	for ref, size := range n.sizes {
		obs.Images[ref] = ImageInfo{Present: n.present[ref], Size: size}
	}
	for ref, p := range n.inflight {
		obs.Pulling[ref] = p.attempt
	}
	return obs
}

// run steps until every image is present or until limit; it returns the
// virtual time taken.
func (n *vnode) run(limit time.Duration) time.Duration {
	start := n.now
	for i := 0; i < 100000; i++ {
		obs := n.observe()
		actions, progress, requeue := n.m.Step(n.now, n.sets, n.current, obs)
		n.current, n.results = progress, nil
		for _, a := range actions {
			n.perform(a)
		}
		if n.done() {
			return n.now.Sub(start)
		}
		next := time.Time{}
		for _, p := range n.inflight {
			if next.IsZero() || p.end.Before(next) {
				next = p.end
			}
		}
		if requeue > 0 && (next.IsZero() || n.now.Add(requeue).Before(next)) {
			next = n.now.Add(requeue)
		}
		if next.IsZero() || next.Sub(start) > limit {
			return n.now.Sub(start) // idle, or out of time
		}
		// An outage cuts the pulls that run when it starts.
		if n.now.Before(n.downFrom) && !next.Before(n.downFrom) {
			for _, p := range n.inflight {
				if p.fail == "" {
					p.fail, p.end = cri.KindRegistryUnreachable, n.downFrom
				}
			}
			next = n.downFrom
		}
		n.now = next
		for _, ref := range slices.Sorted(maps.Keys(n.inflight)) {
			p := n.inflight[ref]
			if p.end.After(n.now) {
				continue
			}
			delete(n.inflight, ref)
			res := PullResult{Image: ref, Attempt: p.attempt, Kind: p.fail}
			if p.fail == "" {
				n.present[ref] = true
				n.used += PullNeed(n.sizes[ref])
			} else {
				res.Message = "dial tcp 127.0.0.1:5000: connect: connection refused"
			}
			n.results = append(n.results, res)
			n.trace = append(n.trace, fmt.Sprintf("%s end %s #%d %s", n.now.Sub(start), ref[len(ref)-4:], p.attempt, p.fail))
		}
	}
	n.t.Fatal("no end after 100000 steps")
	return 0
}

func (n *vnode) perform(a Action) {
	n.t.Helper()
	switch a.Type {
	case ActionCancel:
		delete(n.inflight, a.Image)
		return
	case ActionPull:
	}
	if n.present[a.Image] {
		n.t.Errorf("%s: pull of a present image %s", n.now, a.Image)
	}
	if _, ok := n.inflight[a.Image]; ok {
		n.t.Errorf("%s: second pull of %s", n.now, a.Image)
	}
	// Space: what runs and this pull together leave the floor free.
	need := PullNeed(n.sizes[a.Image])
	for ref := range n.inflight {
		need += PullNeed(n.sizes[ref])
	}
	floor := MinFreeBytes(n.sets[0].MinFreeAfterPull, n.capacity) + n.reserve
	if n.capacity-n.used-need < floor {
		n.t.Errorf("%s: pull of %s admitted with %d available, %d needed, floor %d", n.now, a.Image, n.capacity-n.used, need, floor)
	}
	// Throttle.
	if th := n.sets[0].Throttle; th != nil && len(n.starts) > 0 && n.now.Sub(n.starts[len(n.starts)-1]) < th.Duration {
		n.t.Errorf("%s: pull started %s after the previous one, throttle %s", n.now, n.now.Sub(n.starts[len(n.starts)-1]), th.Duration)
	}
	n.starts = append(n.starts, n.now)
	p := &vpull{attempt: a.Attempt, end: n.now.Add(n.duration)}
	if n.down(n.now) {
		p.fail, p.end = cri.KindRegistryUnreachable, n.now.Add(time.Second)
	}
	n.inflight[a.Image] = p
	n.maxInFly = max(n.maxInFly, len(n.inflight))
	n.trace = append(n.trace, fmt.Sprintf("%s start %s #%d", n.now.Sub(t0), a.Image[len(a.Image)-4:], a.Attempt))
}

func (n *vnode) done() bool {
	for _, s := range n.sets {
		for _, ref := range s.Images {
			if !n.present[ref] {
				return false
			}
		}
	}
	return true
}

func newVnode(t *testing.T, images int, set v1alpha1.NodePinnedImageSet) *vnode {
	n := &vnode{
		t: t, m: New(Config{}), capacity: 100 * gi, sizes: map[string]int64{},
		duration: 20 * time.Second, now: t0, present: map[string]bool{}, inflight: map[string]*vpull{},
	}
	for i := 0; i < images; i++ {
		ref := img(i)
		set.Images = append(set.Images, ref)
		n.sizes[ref] = int64(i+1) * 100 * mi
	}
	n.sets = []v1alpha1.NodePinnedImageSet{set}
	return n
}

// TestVirtualRegistryOutage: a 3-minute outage in the middle of a set of
// ten, concurrency 3 and a 5s throttle: pulls retry with backoff and the
// set completes; the bounds hold throughout; the run is deterministic.
func TestVirtualRegistryOutage(t *testing.T) {
	run := func() *vnode {
		n := newVnode(t, 10, v1alpha1.NodePinnedImageSet{Name: "web", Generation: 1, Concurrency: 3, Throttle: &metav1.Duration{Duration: 5 * time.Second}})
		n.downFrom, n.downTo = t0.Add(50*time.Second), t0.Add(50*time.Second+3*time.Minute)
		took := n.run(time.Hour)
		if !n.done() {
			t.Fatalf("not done after %s: %+v", took, n.current)
		}
		return n
	}
	n := run()
	if n.maxInFly != 3 {
		t.Errorf("at most %d pulls ran at once, want 3", n.maxInFly)
	}
	retried := false
	for _, e := range n.current[0].Images {
		if e.State != v1alpha1.PinnedPresent {
			t.Errorf("%s: %s", e.Image, e.State)
		}
		retried = retried || e.Attempts > 1
	}
	if !retried {
		t.Errorf("the outage caused no retry:\n%s", strings.Join(n.trace, "\n"))
	}
	if again := run(); strings.Join(again.trace, "\n") != strings.Join(n.trace, "\n") {
		t.Errorf("two runs differ:\n%s\n---\n%s", strings.Join(n.trace, "\n"), strings.Join(again.trace, "\n"))
	}
}

// TestVirtualLongOutage: an outage longer than five backoffs: the images
// give up (Failed) and are pulled when re-armed an hour later.
func TestVirtualLongOutage(t *testing.T) {
	n := newVnode(t, 2, v1alpha1.NodePinnedImageSet{Name: "web", Generation: 1})
	n.downFrom, n.downTo = t0, t0.Add(30*time.Minute)
	n.run(20 * time.Minute)
	for _, e := range n.current[0].Images {
		if e.State != v1alpha1.PinnedFailed || e.Attempts != DefaultMaxAttempts || !strings.HasPrefix(e.Message, "gave up after 5 attempts") {
			t.Errorf("after 20 minutes of outage: %+v", e)
		}
	}
	took := n.run(2 * time.Hour)
	if !n.done() {
		t.Fatalf("not done after re-arm: %+v", n.current)
	}
	if took < 30*time.Minute {
		t.Errorf("re-armed after %s, want about an hour", took)
	}
}

// TestVirtualSmallDisk: a set larger than the disk with a staging reserve:
// what fits is pulled, the rest is InsufficientSpace, and the reserve is
// still free at the end.
func TestVirtualSmallDisk(t *testing.T) {
	n := newVnode(t, 8, v1alpha1.NodePinnedImageSet{Name: "web", Generation: 1, MinFreeAfterPull: ptr.To(intstr.FromString("1Gi"))})
	n.capacity = 6 * gi
	n.reserve = StagingNeed(gi)
	n.run(time.Hour)
	var present, short int
	for _, e := range n.current[0].Images {
		switch {
		case e.State == v1alpha1.PinnedPresent:
			present++
		case e.State == v1alpha1.PinnedFailed && e.Reason == v1alpha1.PinnedReasonInsufficientSpace:
			short++
		default:
			t.Errorf("unexpected %+v", e)
		}
	}
	if present == 0 || short == 0 {
		t.Errorf("%d present, %d short of space; want some of each", present, short)
	}
	if free := n.capacity - n.used; !CanStage(free-gi, gi) {
		t.Errorf("%d bytes left: minFreeAfterPull and the staging reserve were taken", free)
	}
}
