package prefetch_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/cri/critest"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// These tests run the Runner against a real containerd (critest starts
// Debian's containerd with its own config and socket) pulling from an
// in-process registry with images the test builds. Time is virtual: the
// test passes now to Sync and moves it by the requeue, so backoffs take no
// wall time; the pulls themselves are real.

const mib = 1 << 20

var start = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

type rig struct {
	t      *testing.T
	ctrd   *critest.Containerd
	reg    *critest.Registry
	client *cri.Client
	runner *prefetch.Runner
	now    time.Time
	env    prefetch.Env
	sets   []v1alpha1.NodePinnedImageSet
	last   []v1alpha1.PinnedSetProgress
	// writes counts the progress changes Sync reported (the status writes
	// the daemon would make).
	writes int
}

func newRig(t *testing.T, ctrd *critest.Containerd, cfg prefetch.Config) *rig {
	t.Helper()
	r := &rig{t: t, ctrd: ctrd, reg: critest.NewRegistry(t), client: ctrd.Dial(t), now: start}
	r.runner = r.newRunner(cfg)
	return r
}

// newRunner is a fresh daemon process's Runner (the old one's pulls are
// waited for first).
func (r *rig) newRunner(cfg prefetch.Config) *prefetch.Runner {
	if r.runner != nil {
		r.runner.Wait()
	}
	return &prefetch.Runner{
		Manager: prefetch.New(cfg),
		Images:  &prefetch.CRIImages{Client: r.client},
		Sizes:   prefetch.RegistrySizer{},
	}
}

// maxAdvance caps one move of the virtual clock, so that settle sees a
// quiet stretch before an hour-long re-arm comes due.
const maxAdvance = 10 * time.Minute

// sync runs one Sync, waits for the pulls it started and moves the
// virtual clock by the requeue (1s when none, at most maxAdvance).
func (r *rig) sync() time.Duration {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	progress, requeue, err := r.runner.Sync(ctx, r.now, r.sets, r.last, r.env)
	if err != nil {
		r.t.Fatalf("Sync at %s: %v", r.now.Sub(start), err)
	}
	if !prefetch.Equal(progress, r.last) {
		r.writes++
	}
	r.last = progress
	r.runner.Wait()
	if requeue <= 0 {
		requeue = time.Second
	}
	r.now = r.now.Add(min(requeue, maxAdvance))
	return requeue
}

// settle syncs until the progress stops changing for three syncs in a row
// with no pull running.
func (r *rig) settle() []v1alpha1.PinnedSetProgress {
	r.t.Helper()
	quiet := 0
	for i := 0; i < 200; i++ {
		before := r.last
		r.sync()
		if prefetch.Equal(before, r.last) && len(r.runner.Running()) == 0 {
			quiet++
			if quiet >= 3 {
				return r.last
			}
			continue
		}
		quiet = 0
	}
	r.t.Fatalf("no steady state after 200 syncs: %+v", r.last)
	return nil
}

// syncUntil syncs, at most ten times, until ref's entry satisfies done,
// and returns that entry.
func (r *rig) syncUntil(ref string, done func(v1alpha1.PinnedImageProgress) bool) v1alpha1.PinnedImageProgress {
	r.t.Helper()
	for i := 0; i < 10; i++ {
		r.sync()
		for _, sp := range r.last {
			for _, e := range sp.Images {
				if e.Image == ref && done(e) {
					return e
				}
			}
		}
	}
	r.t.Fatalf("%s: not there after ten syncs: %+v", ref, r.last)
	return v1alpha1.PinnedImageProgress{}
}

func (r *rig) requireState(p []v1alpha1.PinnedSetProgress, ref string, state v1alpha1.PinnedImageState, reason string) v1alpha1.PinnedImageProgress {
	r.t.Helper()
	for _, sp := range p {
		for _, e := range sp.Images {
			if e.Image == ref {
				if e.State != state || e.Reason != reason {
					r.t.Errorf("%s: %s/%s (%s), want %s/%s", ref, e.State, e.Reason, e.Message, state, reason)
				}
				return e
			}
		}
	}
	r.t.Fatalf("%s not in progress %+v", ref, p)
	return v1alpha1.PinnedImageProgress{}
}

func (r *rig) requirePresent(refs ...string) {
	r.t.Helper()
	for _, ref := range refs {
		img, err := r.client.ImageStatus(context.Background(), ref)
		if err != nil || img == nil {
			r.t.Errorf("containerd does not have %s: %v", ref, err)
		}
	}
}

func (r *rig) push(n int, layerBytes int64) []critest.Image {
	r.t.Helper()
	var out []critest.Image
	for i := 0; i < n; i++ {
		out = append(out, r.reg.Push(r.t, fmt.Sprintf("apps/app-%d", i), critest.RandomImage(r.t, int64(100+i), layerBytes, 2)))
	}
	return out
}

func refs(imgs ...critest.Image) []string {
	var out []string
	for _, i := range imgs {
		out = append(out, i.Ref)
	}
	return out
}

// blobGets lists the blob downloads of repo in the registry's log.
func blobGets(reg *critest.Registry, repo string) []string {
	var out []string
	for _, l := range reg.RequestLog() {
		if strings.HasPrefix(l, "GET /v2/"+repo+"/blobs/") {
			out = append(out, l)
		}
	}
	return out
}

// TestPrefetchSetOfThree: three images pulled and reported Present; a
// restarted daemon finds them present without contacting the registry.
func TestPrefetchSetOfThree(t *testing.T) {
	r := newRig(t, critest.StartContainerd(t, ownImageFS(t)), prefetch.Config{})
	imgs := r.push(3, 2*mib)
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: refs(imgs...)}}
	// The size the space check uses before a pull is the size containerd
	// reports after it.
	var sizes []int64
	for _, i := range imgs {
		size, err := prefetch.RegistrySizer{}.Size(context.Background(), i.Ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, size)
	}

	p := r.settle()
	for k, i := range imgs {
		e := r.requireState(p, i.Ref, v1alpha1.PinnedPresent, "")
		if e.Attempts != 1 {
			t.Errorf("%s took %d attempts", i.Ref, e.Attempts)
		}
		st, err := r.client.ImageStatus(context.Background(), i.Ref)
		if err != nil || st == nil || st.Size != sizes[k] {
			t.Errorf("%s: containerd says %+v (%v), the registry's manifest %d bytes", i.Ref, st, err, sizes[k])
		}
	}
	if p[0].Present != 3 || p[0].Pending+p[0].Pulling+p[0].Failed != 0 {
		t.Errorf("set counts %+v", p[0])
	}
	r.requirePresent(refs(imgs...)...)
	// Status writes: pulls start two at a time, then the third, then the end.
	if r.writes > 5 {
		t.Errorf("%d progress changes for 3 images", r.writes)
	}

	// A restarted daemon (new Runner, progress read back from the API):
	// ImageStatus finds everything, nothing is pulled, the registry is
	// not contacted, the progress does not change.
	r.reg.ResetRequests()
	r.runner = r.newRunner(prefetch.Config{})
	stored := r.last
	r.writes = 0
	p = r.settle()
	if n := r.reg.Requests(); n != 0 {
		t.Errorf("present images: %d registry requests: %v", n, r.reg.RequestLog())
	}
	if !prefetch.Equal(p, stored) || r.writes != 0 {
		t.Errorf("restart changed the progress (%d writes):\n%+v\nwant\n%+v", r.writes, p, stored)
	}

	// Restarted with a lost pull on record: found present, not re-pulled.
	lost := slices.Clone(stored)
	lost[0].Images = slices.Clone(lost[0].Images)
	lost[0].Images[1].State = v1alpha1.PinnedPulling
	r.runner = r.newRunner(prefetch.Config{})
	r.last = lost
	p = r.settle()
	r.requireState(p, imgs[1].Ref, v1alpha1.PinnedPresent, "")
	if n := r.reg.Requests(); n != 0 {
		t.Errorf("restart with a lost pull: %d registry requests: %v", n, r.reg.RequestLog())
	}
}

// TestPrefetchRegistryOutage: the registry goes down after the first image
// of three and comes back: the pull is retried after its backoff and the
// set completes.
func TestPrefetchRegistryOutage(t *testing.T) {
	r := newRig(t, critest.StartContainerd(t, ownImageFS(t)), prefetch.Config{})
	imgs := r.push(3, mib)
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: refs(imgs...), Concurrency: 1}}

	// The registry goes down as image 2's pull starts. Which Sync records
	// the refusal depends on how fast it comes (a Sync that pins steps
	// twice, and its second step sees a refusal that came first), so the
	// test syncs until it is recorded.
	r.runner.Images = &downBefore{CRIImages: r.runner.Images.(*prefetch.CRIImages), ref: imgs[2].Ref, reg: r.reg}
	e := r.syncUntil(imgs[2].Ref, func(e v1alpha1.PinnedImageProgress) bool { return e.Reason != "" })
	r.requireState(r.last, imgs[0].Ref, v1alpha1.PinnedPresent, "")
	r.requireState(r.last, imgs[1].Ref, v1alpha1.PinnedPresent, "")
	r.requireState(r.last, imgs[2].Ref, v1alpha1.PinnedPending, v1alpha1.PinnedReasonRegistryUnreachable)
	t.Logf("registry down: %s: %s (attempt %d, retry %s after it started)", e.Reason, e.Message, e.Attempts, e.RetryAfter.Sub(e.LastAttempt.Time))
	if !strings.Contains(e.Message, "connect: connection refused") || e.RetryAfter == nil || e.Attempts != 1 {
		t.Errorf("registry down: %+v", e)
	}
	if strings.HasPrefix(e.Message, "failed to pull and unpack image") {
		t.Errorf("message repeats the image: %q", e.Message)
	}
	// A second failure while down doubles the backoff.
	for r.now.Before(e.RetryAfter.Time) {
		r.sync()
	}
	r.syncUntil(imgs[2].Ref, func(e v1alpha1.PinnedImageProgress) bool { return e.Attempts == 2 && e.Reason != "" })
	e2 := r.requireState(r.last, imgs[2].Ref, v1alpha1.PinnedPending, v1alpha1.PinnedReasonRegistryUnreachable)
	if e2.Attempts != 2 || e2.RetryAfter.Sub(e2.LastAttempt.Time) < time.Minute {
		t.Errorf("second failure: %+v", e2)
	}

	r.reg.Up(t)
	p := r.settle()
	e = r.requireState(p, imgs[2].Ref, v1alpha1.PinnedPresent, "")
	if e.Attempts != 3 {
		t.Errorf("image 2 took %d attempts, want 3", e.Attempts)
	}
	r.requirePresent(refs(imgs...)...)
}

// downBefore takes the registry down when the first pull of ref starts.
type downBefore struct {
	*prefetch.CRIImages
	ref  string
	reg  *critest.Registry
	once sync.Once
}

func (d *downBefore) Pull(ctx context.Context, ref string, auth *cri.Auth) error {
	if ref == d.ref {
		d.once.Do(d.reg.Down)
	}
	return d.CRIImages.Pull(ctx, ref, auth)
}

// TestPrefetchNotFound: a digest the registry does not have is reported
// NotFound at once; the other images are still pulled.
func TestPrefetchNotFound(t *testing.T) {
	// The missing image has no size to look up: a small estimate, so that
	// the space check lets the pull reach the registry's 404.
	r := newRig(t, critest.StartContainerd(t, ownImageFS(t)), prefetch.Config{EstimatedSize: 4 * mib})
	imgs := r.push(2, mib)
	missing := r.reg.MissingRef("apps/missing")
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{imgs[0].Ref, missing, imgs[1].Ref}, Concurrency: 1}}

	p := r.settle()
	e := r.requireState(p, missing, v1alpha1.PinnedFailed, v1alpha1.PinnedReasonNotFound)
	t.Logf("missing digest: %s: %s", e.Reason, e.Message)
	if e.Attempts != 1 || !strings.HasSuffix(e.Message, ": not found") {
		t.Errorf("missing digest: %+v", e)
	}
	r.requireState(p, imgs[0].Ref, v1alpha1.PinnedPresent, "")
	r.requireState(p, imgs[1].Ref, v1alpha1.PinnedPresent, "")
	if p[0].Present != 2 || p[0].Failed != 1 {
		t.Errorf("set counts %+v", p[0])
	}
}

// TestPrefetchPullSecret: a set's pull secret reaches the pull, and the
// size lookup, through Credentials.
func TestPrefetchPullSecret(t *testing.T) {
	// Without credentials the size lookup fails too: a small estimate.
	r := newRig(t, critest.StartContainerd(t, ownImageFS(t)), prefetch.Config{EstimatedSize: 4 * mib})
	r.reg.RequireAuth("puller", "s3cret")
	imgs := r.push(1, mib)
	secret := []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, r.reg.Host, base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))))
	ref := &v1alpha1.SecretReference{Namespace: "bootroll-system", Name: "web-pull"}
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: refs(imgs...), PullSecret: ref}}

	// Without credentials: Unauthorized, at once.
	p := r.settle()
	e := r.requireState(p, imgs[0].Ref, v1alpha1.PinnedFailed, v1alpha1.PinnedReasonUnauthorized)
	t.Logf("no credentials: %s: %s", e.Reason, e.Message)

	r.runner = r.newRunner(prefetch.Config{EstimatedSize: 4 * mib})
	var asked []string
	r.runner.Credentials = func(_ context.Context, set v1alpha1.NodePinnedImageSet, image string) (*cri.Auth, error) {
		asked = append(asked, set.PullSecret.Name)
		return cri.AuthFor(secret, image)
	}
	r.sets[0].Generation = 2 // the user fixed the secret and the set changed
	p = r.settle()
	r.requireState(p, imgs[0].Ref, v1alpha1.PinnedPresent, "")
	if len(asked) == 0 || asked[0] != "web-pull" {
		t.Errorf("credentials asked for %v", asked)
	}
}

// TestPrefetchOutOfSpace: containerd's root on a 64 MiB tmpfs. The Runner
// has no size lookup and assumes 4 MiB per image, so a 100 MiB image is
// admitted and fills the disk: the pull fails OutOfSpace, no further image
// is pulled (not a byte of them is asked of the registry), and the set is
// Degraded: one image Failed, the rest not attempted.
func TestPrefetchOutOfSpace(t *testing.T) {
	critest.RequireContainerd(t)
	root := critest.MountTmpfs(t, "64m")
	r := newRig(t, critest.StartContainerd(t, critest.Options{Root: root}), prefetch.Config{EstimatedSize: 4 * mib})
	r.runner.Sizes = nil
	small := r.reg.Push(t, "apps/small", critest.RandomImage(t, 1, mib, 1))
	huge := r.reg.Push(t, "apps/huge", critest.RandomImage(t, 2, 100*mib, 1))
	after := []critest.Image{
		r.reg.Push(t, "apps/after-0", critest.RandomImage(t, 3, mib, 1)),
		r.reg.Push(t, "apps/after-1", critest.RandomImage(t, 4, mib, 1)),
	}
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Concurrency: 1,
		Images: []string{small.Ref, huge.Ref, after[0].Ref, after[1].Ref}}}

	p := r.settle()
	r.requireState(p, small.Ref, v1alpha1.PinnedPresent, "")
	e := r.requireState(p, huge.Ref, v1alpha1.PinnedFailed, v1alpha1.PinnedReasonOutOfSpace)
	t.Logf("disk full: %s: %s", e.Reason, e.Message)
	if !strings.Contains(e.Message, "no space left on device") || e.Attempts != 1 {
		t.Errorf("out of space: %+v", e)
	}
	for _, a := range after {
		b := r.requireState(p, a.Ref, v1alpha1.PinnedPending, v1alpha1.PinnedReasonBlocked)
		if b.Attempts != 0 || b.LastAttempt != nil {
			t.Errorf("%s was attempted: %+v", a.Ref, b)
		}
		if gets := blobGets(r.reg, strings.TrimPrefix(strings.SplitN(a.Ref, "@", 2)[0], r.reg.Host+"/")); len(gets) > 0 {
			t.Errorf("%s: blobs downloaded after out of space: %v", a.Ref, gets)
		}
	}
	if p[0].Failed != 1 || p[0].Present != 1 || p[0].Pending != 2 {
		t.Errorf("set counts %+v", p[0])
	}
	// Still stopped a virtual day later: out of space waits for the set to
	// change.
	r.now = r.now.Add(24 * time.Hour)
	p = r.settle()
	r.requireState(p, huge.Ref, v1alpha1.PinnedFailed, v1alpha1.PinnedReasonOutOfSpace)
	r.requireState(p, after[0].Ref, v1alpha1.PinnedPending, v1alpha1.PinnedReasonBlocked)

	// containerd frees the partial download shortly after the failure.
	waitFreed(t, r.client, 32*mib)

	// The user drops the huge image: the rest is pulled.
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 2, Concurrency: 1,
		Images: []string{small.Ref, after[0].Ref, after[1].Ref}}}
	p = r.settle()
	for _, a := range append([]critest.Image{small}, after...) {
		r.requireState(p, a.Ref, v1alpha1.PinnedPresent, "")
	}
	if slices.ContainsFunc(p[0].Images, func(e v1alpha1.PinnedImageProgress) bool { return e.Image == huge.Ref }) {
		t.Errorf("the dropped image is still reported: %+v", p)
	}
}

// TestPrefetchSpaceCheck: the same small disk with sizes read from the
// registry: the huge image is refused before any of its layers is
// downloaded (InsufficientSpace), the others are pulled, and the OS
// staging reserve stays free.
func TestPrefetchSpaceCheck(t *testing.T) {
	critest.RequireContainerd(t)
	root := critest.MountTmpfs(t, "64m")
	r := newRig(t, critest.StartContainerd(t, critest.Options{Root: root}), prefetch.Config{})
	const stagingSize = 15 * mib
	r.env.StagingReserve = prefetch.StagingNeed(stagingSize)
	small := r.reg.Push(t, "apps/small", critest.RandomImage(t, 1, mib, 1))
	huge := r.reg.Push(t, "apps/huge", critest.RandomImage(t, 2, 20*mib, 1))
	other := r.reg.Push(t, "apps/other", critest.RandomImage(t, 3, 2*mib, 1))
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, MinFreeAfterPull: ptr.To(intstr.FromString("8Mi")),
		Images: []string{small.Ref, huge.Ref, other.Ref}}}

	p := r.settle()
	r.requireState(p, small.Ref, v1alpha1.PinnedPresent, "")
	r.requireState(p, other.Ref, v1alpha1.PinnedPresent, "")
	e := r.requireState(p, huge.Ref, v1alpha1.PinnedFailed, v1alpha1.PinnedReasonInsufficientSpace)
	t.Logf("space check: %s", e.Message)
	if gets := blobGets(r.reg, "apps/huge"); len(gets) > 0 {
		t.Errorf("the refused image's blobs were downloaded: %v", gets)
	}
	if e.Attempts != 0 {
		t.Errorf("refused image counted as attempted: %+v", e)
	}
	sp, err := r.client.ImageFs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("left: %d of %d bytes", sp.Available, sp.Capacity)
	if !prefetch.CanStage(sp.Available-8*mib, stagingSize) {
		t.Errorf("%d bytes left: the OS staging reserve of %d was taken", sp.Available, r.env.StagingReserve)
	}
}

// waitFreed waits (wall time) until the image filesystem has free bytes.
func waitFreed(t *testing.T, c *cri.Client, free int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second) // edge: test: waits on a real containerd
	for {
		sp, err := c.ImageFs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if sp.Available >= free {
			return
		}
		if time.Now().After(deadline) { // edge: test
			t.Fatalf("image filesystem still full 10s after the failure: %+v", sp)
		}
		time.Sleep(50 * time.Millisecond) // edge: test: polls a real containerd
	}
}

// TestPrefetchPins: the Runner over the real containerd pins the images of
// a set once they are present (containerd's label with bootroll's beside
// it), reports what the CRI says of them, and unpins them when no set
// lists them any more; an image pinned by someone else keeps its pin.
// Debian's containerd 1.6 keeps the labels but its CRI reports pinned:
// false, which the progress says with the note of PinNote.
func TestPrefetchPins(t *testing.T) {
	r := newRig(t, critest.StartContainerd(t, ownImageFS(t)), prefetch.Config{})
	imgs := r.push(2, 256<<10)
	r.sets = []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: refs(imgs...)}}
	ctx := context.Background()
	rt, err := r.client.Runtime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	note := prefetch.PinNote(rt)
	t.Logf("runtime %s; note %q", rt, note)
	ctr := r.client.Containerd()

	p := r.settle()
	for _, i := range imgs {
		e := r.requireState(p, i.Ref, v1alpha1.PinnedPresent, "")
		l, err := ctr.Labels(ctx, i.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if l[cri.PinnedLabel] != cri.PinnedValue || l[cri.OwnLabel] != cri.OwnValue {
			t.Errorf("%s: labels %v, want it pinned by bootroll", i.Ref, l)
		}
		st, err := r.client.ImageStatus(ctx, i.Ref)
		if err != nil || st == nil {
			t.Fatal(st, err)
		}
		if e.Pinned != st.Pinned {
			t.Errorf("%s: progress says pinned %v, the CRI %v", i.Ref, e.Pinned, st.Pinned)
		}
		if note == "" && !e.Pinned {
			t.Errorf("%s not pinned on %s: %+v", i.Ref, rt, e)
		}
		if !e.Pinned && e.Message != note {
			t.Errorf("%s: message %q, want %q", i.Ref, e.Message, note)
		}
	}

	// Someone else pins the second image too; then the set drops both.
	if err := r.client.Containerd().Unpin(ctx, imgs[1].Ref); err != nil {
		t.Fatal(err)
	}
	if err := setTheirPin(ctx, r.client, imgs[1].Ref); err != nil {
		t.Fatal(err)
	}
	r.sets = nil
	r.settle()
	l, _ := ctr.Labels(ctx, imgs[0].Ref)
	if _, ok := l[cri.PinnedLabel]; ok || l[cri.OwnLabel] != "" {
		t.Errorf("%s left every set but keeps labels %v", imgs[0].Ref, l)
	}
	l, _ = ctr.Labels(ctx, imgs[1].Ref)
	if l[cri.PinnedLabel] != cri.PinnedValue {
		t.Errorf("%s, pinned by someone else, lost the pin: %v", imgs[1].Ref, l)
	}
	if pins, err := ctr.Pins(ctx); err != nil || len(pins) != 0 {
		t.Errorf("bootroll's pins after the sets dropped the images: %v, %v", pins, err)
	}
	r.requirePresent(refs(imgs...)...) // unpinned, not removed
}

// ownImageFS gives containerd an image filesystem of its own, a 128 MiB
// tmpfs, for the tests that pull a few MiB and do not test the space
// check: on the host's disk they depended on its free space, as the
// default minFreeAfterPull (10% of the filesystem) must stay free after
// every pull, and failed with InsufficientSpace on a host with 21.9 GiB of
// 252 GiB available. The space tests mount smaller ones themselves.
func ownImageFS(t *testing.T) critest.Options {
	return critest.Options{Root: critest.MountTmpfs(t, "128m")}
}
