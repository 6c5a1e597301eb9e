package prefetch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
)

// fakeImages is an ImageService whose pulls block until the test releases
// them.
type fakeImages struct {
	mu        sync.Mutex
	present   map[string]bool
	release   map[string]chan error
	started   []string
	auths     []*cri.Auth
	statusErr error
	statuses  int
	removed   []string
	// available, when set, gives FsInfo's free bytes from the images
	// present.
	available func(present map[string]bool) int64
}

func newFakeImages() *fakeImages {
	return &fakeImages{present: map[string]bool{}, release: map[string]chan error{}}
}

func (f *fakeImages) ImageStatus(_ context.Context, ref string) (bool, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses++
	if f.statusErr != nil {
		return false, 0, f.statusErr
	}
	return f.present[ref], 100 * mi, nil
}

func (f *fakeImages) ch(ref string) chan error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.release[ref]
	if !ok {
		c = make(chan error, 1)
		f.release[ref] = c
	}
	return c
}

func (f *fakeImages) Pull(ctx context.Context, ref string, auth *cri.Auth) error {
	f.mu.Lock()
	f.started = append(f.started, ref)
	f.auths = append(f.auths, auth)
	f.mu.Unlock()
	select {
	case err := <-f.ch(ref):
		if err == nil {
			f.mu.Lock()
			f.present[ref] = true
			f.mu.Unlock()
		}
		return err
	case <-ctx.Done():
		return status.Error(codes.Canceled, "context canceled")
	}
}

func (f *fakeImages) FsInfo(context.Context) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.available != nil {
		return 100 * gi, f.available(f.present), nil
	}
	return 100 * gi, 80 * gi, nil
}

func (f *fakeImages) RemoveImage(_ context.Context, ref string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, ref)
	delete(f.present, ref)
	return nil
}

func (f *fakeImages) finish(ref string, err error) { f.ch(ref) <- err }

// waitStarted waits (wall time) until n Pull calls were made.
func waitStarted(t *testing.T, f *fakeImages, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second) // edge: test: waits for real goroutines
	for {
		f.mu.Lock()
		got := len(f.started)
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) { // edge: test
			t.Fatalf("%d pulls started, want %d", got, n)
		}
		time.Sleep(time.Millisecond) // edge: test: polls real goroutines
	}
}

type fakeSizer struct {
	calls []string
	err   error
}

func (s *fakeSizer) Size(_ context.Context, ref string, _ *cri.Auth) (int64, error) {
	s.calls = append(s.calls, ref)
	return 50 * mi, s.err
}

func TestRunner(t *testing.T) {
	a, b, c := img(1), img(2), img(3)
	f := newFakeImages()
	f.present[c] = true
	sizer := &fakeSizer{}
	done := make(chan struct{}, 10)
	r := &Runner{Images: f, Sizes: sizer, OnDone: func() { done <- struct{}{} }}
	sets := []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a, b, c}, Concurrency: 1}}
	ctx := context.Background()

	p, requeue, err := r.Sync(ctx, t0, sets, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if requeue != DefaultPullPoll || p[0].Pulling != 1 || p[0].Present != 1 || p[0].Pending != 1 {
		t.Fatalf("first sync: requeue %v, %+v", requeue, p)
	}
	waitStarted(t, f, 1)
	if got := r.Running(); !slices.Equal(got, []string{a}) {
		t.Errorf("running %v, want [a]", got)
	}
	// Sizes of absent images only, looked up once.
	if !slices.Equal(sizer.calls, []string{a, b}) {
		t.Errorf("size lookups %v, want the two absent images", sizer.calls)
	}

	// A lagging read after the first Sync is not believed.
	p2, _, err := r.Sync(ctx, t0.Add(time.Second), sets, []v1alpha1.PinnedSetProgress{progressOf("web", 1, pending(a), pending(b), pending(c))}, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(p, p2) || len(r.Running()) != 1 {
		t.Errorf("second sync changed the progress or started a pull: %+v, started %v", p2, f.started)
	}

	f.finish(a, errors.New(`failed to pull and unpack image "`+a+`": failed to do request: dial tcp 1.2.3.4:443: connect: connection refused`))
	<-done
	r.Wait()
	p, _, err = r.Sync(ctx, t0.Add(2*time.Second), sets, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	if e := p[0].Images[0]; e.State != v1alpha1.PinnedPending || e.Reason != "RegistryUnreachable" || e.Message != "failed to do request: dial tcp 1.2.3.4:443: connect: connection refused" {
		t.Errorf("after the failure: %+v", e)
	}
	waitStarted(t, f, 2) // b took the slot
	// The result was consumed: the next Sync does not count it again.
	p2, _, _ = r.Sync(ctx, t0.Add(3*time.Second), sets, nil, Env{})
	if p2[0].Images[0].Attempts != 1 {
		t.Errorf("failure counted twice: %+v", p2[0].Images[0])
	}
	if len(sizer.calls) != 2 {
		t.Errorf("sizes looked up again: %v", sizer.calls)
	}

	// b dropped from the set: its pull is canceled.
	sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 2, Images: []string{a, c}, Concurrency: 1}}
	if _, _, err := r.Sync(ctx, t0.Add(4*time.Second), sets, nil, Env{}); err != nil {
		t.Fatal(err)
	}
	r.Wait()
	if len(r.Running()) != 0 {
		t.Errorf("still running: %v", r.Running())
	}

	// The runtime does not answer: Sync fails and changes nothing.
	f.statusErr = status.Error(codes.Unavailable, "connection error")
	if _, _, err := r.Sync(ctx, t0.Add(time.Hour), sets, nil, Env{}); err == nil || cri.Classify(err) != cri.KindRuntimeUnavailable {
		t.Errorf("Sync with the runtime down: %v", err)
	}
	f.statusErr = nil
	_, _, _ = r.Sync(ctx, t0.Add(time.Hour), sets, nil, Env{})
	waitStarted(t, f, 3)
	f.finish(a, nil)
	r.Wait()
	p, requeue, _ = r.Sync(ctx, t0.Add(time.Hour+time.Second), sets, nil, Env{})
	if p[0].Present != 2 || p[0].Generation != 2 || requeue != 0 {
		t.Errorf("end: requeue %v, %+v", requeue, p)
	}
}

// TestRunnerReclaim: with a staging due and the reserve taken, Sync
// removes images and steps again until the reserve is back, since a
// removal frees less than the image's size when layers are shared.
func TestRunnerReclaim(t *testing.T) {
	a, b, c := img(1), img(2), img(3)
	f := newFakeImages()
	f.present[a], f.present[b], f.present[c] = true, true, true
	// 100 MiB images sharing 60 MiB: each frees 40 MiB, the last one 100.
	f.available = func(present map[string]bool) int64 {
		n := len(present)
		used := int64(0)
		if n > 0 {
			used = 60*mi + int64(n)*40*mi
		}
		return 300*mi - used
	}
	r := &Runner{Images: f}
	sets := []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b, c)}
	// 120 MiB free, 170 MiB wanted: counted at 100 MiB each, one removal
	// would do; it frees 40 MiB, so a second round removes another.
	progress, _, err := r.Sync(context.Background(), t0, sets, nil, Env{StagingReserve: 170 * mi, StagingDue: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{c, b}; !slices.Equal(f.removed, want) {
		t.Errorf("removed %v, want %v", f.removed, want)
	}
	if got := progress[0]; got.Present != 1 || got.Failed != 2 {
		t.Errorf("progress %+v", got)
	}
	// Without a staging due the images stay.
	f2 := newFakeImages()
	f2.present[a] = true
	f2.available = func(map[string]bool) int64 { return 0 }
	r2 := &Runner{Images: f2}
	if _, _, err := r2.Sync(context.Background(), t0, sets, nil, Env{StagingReserve: 170 * mi}); err != nil {
		t.Fatal(err)
	}
	if len(f2.removed) != 0 {
		t.Errorf("removed %v with no staging due", f2.removed)
	}
}

func TestRunnerCredentials(t *testing.T) {
	a, b := img(1), img(2)
	f := newFakeImages()
	secret := &v1alpha1.SecretReference{Namespace: "ns", Name: "creds"}
	sets := []v1alpha1.NodePinnedImageSet{
		{Name: "a", Generation: 1, Images: []string{a}},
		{Name: "b", Generation: 1, Images: []string{a, b}, PullSecret: secret},
		{Name: "c", Generation: 1, Images: []string{b}, PullSecret: &v1alpha1.SecretReference{Namespace: "ns", Name: "broken"}},
	}
	var asked []string
	r := &Runner{Images: f, Credentials: func(_ context.Context, s v1alpha1.NodePinnedImageSet, ref string) (*cri.Auth, error) {
		asked = append(asked, s.Name+" "+ref)
		if s.PullSecret.Name == "broken" {
			return nil, errors.New(`secret "broken" not found`)
		}
		return &cri.Auth{Username: "u", Password: "p"}, nil
	}}
	_, requeue, err := r.Sync(context.Background(), t0, sets, nil, Env{})
	if err != nil {
		t.Fatal(err)
	}
	// a uses b's secret (the first set with one); b is pulled under b too.
	waitStarted(t, f, 2)
	if !slices.Equal(asked, []string{"b " + a, "b " + b}) {
		t.Errorf("credentials asked %v", asked)
	}
	if requeue != DefaultPullPoll {
		t.Errorf("requeue %v", requeue)
	}
	f.mu.Lock()
	auths := slices.Clone(f.auths)
	f.mu.Unlock()
	for _, au := range auths {
		if au == nil || au.Username != "u" {
			t.Errorf("pull without the credentials: %v", au)
		}
	}
	f.finish(a, nil)
	f.finish(b, nil)
	r.Wait()

	// A secret that cannot be read fails the pull as Unauthorized at once.
	c := img(3)
	sets = []v1alpha1.NodePinnedImageSet{{Name: "c", Generation: 1, Images: []string{c}, PullSecret: &v1alpha1.SecretReference{Namespace: "ns", Name: "broken"}}}
	_, requeue, _ = r.Sync(context.Background(), t0.Add(time.Second), sets, nil, Env{})
	if requeue != time.Second {
		t.Errorf("requeue after a credentials failure: %v", requeue)
	}
	p, _, _ := r.Sync(context.Background(), t0.Add(2*time.Second), sets, nil, Env{})
	if e := p[0].Images[0]; e.State != v1alpha1.PinnedFailed || e.Reason != "Unauthorized" || e.Message != `credentials of set c for `+c+`: secret "broken" not found` {
		t.Errorf("unreadable secret: %+v", e)
	}
}

func TestRunnerSizeLookupsBounded(t *testing.T) {
	f := newFakeImages()
	sizer := &fakeSizer{err: errors.New("registry down")}
	r := &Runner{Images: f, Sizes: sizer, Manager: New(Config{})}
	var images []string
	for i := 0; i < 20; i++ {
		images = append(images, img(i))
	}
	sets := []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: images, Concurrency: 1}}
	if _, _, err := r.Sync(context.Background(), t0, sets, nil, Env{}); err != nil {
		t.Fatal(err)
	}
	if len(sizer.calls) != maxSizeLookups {
		t.Errorf("%d lookups in one Sync, want %d", len(sizer.calls), maxSizeLookups)
	}
	// Failed lookups wait a minute; the next ones are tried.
	_, _, _ = r.Sync(context.Background(), t0.Add(time.Second), sets, nil, Env{})
	if len(sizer.calls) != 2*maxSizeLookups || slices.Contains(sizer.calls[maxSizeLookups:], images[1]) {
		t.Errorf("lookups %v", sizer.calls)
	}
	f.finish(images[0], nil)
	r.Wait()
}

// TestRunnerGo: with Go set no goroutine pulls: Go gets the Step's action,
// the pull runs when Go runs it, and canceling it calls Go's stop, which
// runs the pull with its context canceled.
func TestRunnerGo(t *testing.T) {
	a, b := img(1), img(2)
	f := newFakeImages()
	var started []Action
	pulls := map[string]func(){}
	stops := 0
	done := 0
	r := &Runner{Images: f, OnDone: func() { done++ }, Go: func(act Action, pull func()) func() {
		started = append(started, act)
		pulls[act.Image] = pull
		return func() { stops++; pull() }
	}}
	sets := []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a, b}, Concurrency: 1}}
	ctx := context.Background()
	if _, _, err := r.Sync(ctx, t0, sets, nil, Env{}); err != nil {
		t.Fatal(err)
	}
	if len(started) != 1 || started[0].Image != a || started[0].Attempt != 1 || len(f.started) != 0 {
		t.Fatalf("after the first Sync: Go got %+v, runtime pulls %v; want a, not yet pulled", started, f.started)
	}
	if got := r.Running(); !slices.Equal(got, []string{a}) {
		t.Errorf("running %v, want [a]", got)
	}
	f.finish(a, nil)
	pulls[a]()
	if done != 1 || len(r.Running()) != 0 || !f.present[a] {
		t.Fatalf("after a's pull: done %d, running %v, present %v", done, r.Running(), f.present)
	}
	if _, _, err := r.Sync(ctx, t0.Add(time.Second), sets, nil, Env{}); err != nil {
		t.Fatal(err)
	}
	if len(started) != 2 || started[1].Image != b {
		t.Fatalf("Go got %+v, want b second", started)
	}
	// b dropped from the set: its pull is canceled through stop.
	sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 2, Images: []string{a}, Concurrency: 1}}
	if _, _, err := r.Sync(ctx, t0.Add(2*time.Second), sets, nil, Env{}); err != nil {
		t.Fatal(err)
	}
	if stops != 1 || done != 2 || len(r.Running()) != 0 || f.present[b] {
		t.Errorf("after the cancel: stops %d, done %d, running %v, present %v", stops, done, r.Running(), f.present)
	}
	r.Wait()
}

// fakePinner is fakeImages with containerd's pins (Pinner).
type fakePinner struct {
	*fakeImages
	pins []string // bootroll's, sorted
	log  []string
}

func (p *fakePinner) PinState(context.Context) (bool, string, []string, error) {
	return true, "", slices.Clone(p.pins), nil
}

func (p *fakePinner) Pinned(_ context.Context, ref string) (bool, error) {
	return slices.Contains(p.pins, ref), nil
}

func (p *fakePinner) Pin(_ context.Context, ref string) error {
	p.log = append(p.log, "pin "+ref)
	if !slices.Contains(p.pins, ref) {
		p.pins = append(p.pins, ref)
		slices.Sort(p.pins)
	}
	return nil
}

func (p *fakePinner) Unpin(_ context.Context, ref string) error {
	p.log = append(p.log, "unpin "+ref)
	p.pins = slices.DeleteFunc(p.pins, func(s string) bool { return s == ref })
	return nil
}

// TestRunnerKeepsPinsOfARecordJustMade: a BootcNode made again (deleted
// and created, its node back in its pool) carries no sets at first; the
// daemon's pass on it keeps the images it pinned for the old record, and
// once the PinnedImageSet controller writes the set back nothing was
// unpinned or pinned again. An image the new record's set listed and
// drops is unpinned at once; one the new record's sets never list stays
// pinned until the record's UnpinGrace ends. current is what the daemon
// passes: the new record's stored progress, empty until it writes one.
func TestRunnerKeepsPinsOfARecordJustMade(t *testing.T) {
	a, b, c := img(1), img(2), img(3)
	f := newFakeImages()
	f.present[a], f.present[b], f.present[c] = true, true, true
	p := &fakePinner{fakeImages: f}
	r := &Runner{Images: p}
	ctx := context.Background()

	old := Env{RecordCreated: t0.Add(-time.Hour)}
	if _, _, err := r.Sync(ctx, t0, []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b, c)}, nil, old); err != nil {
		t.Fatal(err)
	}
	if want := []string{"pin " + a, "pin " + b, "pin " + c}; !slices.Equal(p.log, want) {
		t.Fatalf("on the old record: %v, want %v", p.log, want)
	}
	p.log = nil

	// The record is made again at t0+10s; the daemon's first pass finds
	// no sets in it, and no progress of its own on it.
	made := Env{RecordCreated: t0.Add(10 * time.Second)}
	_, requeue, err := r.Sync(ctx, t0.Add(10*time.Second), nil, nil, made)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.log) != 0 || !slices.Equal(p.pins, []string{a, b, c}) {
		t.Errorf("first pass on the new record: %v, pins %v; want none, all kept", p.log, p.pins)
	}
	if requeue != DefaultUnpinGrace {
		t.Errorf("requeue %v, want the grace (%v)", requeue, DefaultUnpinGrace)
	}
	// The set is written back a second later, without c (changed while
	// the node was away).
	sets := []v1alpha1.NodePinnedImageSet{pset("web", 2, a, b)}
	stored, requeue, err := r.Sync(ctx, t0.Add(11*time.Second), sets, nil, made)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.log) != 0 || stored[0].Present != 2 || !stored[0].Images[0].Pinned || !stored[0].Images[1].Pinned {
		t.Errorf("with the set back: %v, %+v; want no pin or unpin, both present and pinned", p.log, stored)
	}
	if requeue != DefaultUnpinGrace-time.Second {
		t.Errorf("requeue %v, want the rest of the grace (%v) for c", requeue, DefaultUnpinGrace-time.Second)
	}

	// The set drops b: this record's set listed it, so it goes at once;
	// c, which this record never listed, waits for the grace.
	sets = []v1alpha1.NodePinnedImageSet{pset("web", 3, a)}
	if _, _, err := r.Sync(ctx, t0.Add(12*time.Second), sets, stored, made); err != nil {
		t.Fatal(err)
	}
	if want := []string{"unpin " + b}; !slices.Equal(p.log, want) || !slices.Equal(p.pins, []string{a, c}) {
		t.Errorf("b dropped by the record's set: %v, pins %v; want %v, a and c kept", p.log, p.pins, want)
	}
	p.log = nil
	if _, _, err := r.Sync(ctx, t0.Add(10*time.Second+DefaultUnpinGrace), sets, stored, made); err != nil {
		t.Fatal(err)
	}
	if want := []string{"unpin " + c}; !slices.Equal(p.log, want) || !slices.Equal(p.pins, []string{a}) {
		t.Errorf("when the grace ends: %v, pins %v; want %v, a kept", p.log, p.pins, want)
	}
}
