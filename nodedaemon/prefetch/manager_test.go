package prefetch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/cri"
)

const (
	mi = int64(1 << 20)
	gi = int64(1 << 30)
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func img(i int) string {
	return fmt.Sprintf("registry.example.com/apps/app-%d@sha256:%064x", i, i)
}

func pset(name string, gen int64, images ...string) v1alpha1.NodePinnedImageSet {
	return v1alpha1.NodePinnedImageSet{Name: name, Generation: gen, Images: images}
}

func mt(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

// roomy is a filesystem where nothing is short of space.
var roomy = Space{Capacity: 100 * gi, Available: 80 * gi}

// absent is an observation of images that are all absent, 100 MiB each.
func absent(refs ...string) map[string]ImageInfo {
	m := map[string]ImageInfo{}
	for _, r := range refs {
		m[r] = ImageInfo{Size: 100 * mi}
	}
	return m
}

func with(m map[string]ImageInfo, ref string, info ImageInfo) map[string]ImageInfo {
	m[ref] = info
	return m
}

func pending(ref string) v1alpha1.PinnedImageProgress {
	return v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedPending}
}

func pulling(ref string, attempt int32, at time.Time) v1alpha1.PinnedImageProgress {
	return v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedPulling, Attempts: attempt, LastAttempt: mt(at)}
}

func present(ref string) v1alpha1.PinnedImageProgress {
	return v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedPresent}
}

// progressOf is the progress of one set with counts filled in.
func progressOf(name string, gen int64, images ...v1alpha1.PinnedImageProgress) v1alpha1.PinnedSetProgress {
	sp := v1alpha1.PinnedSetProgress{Name: name, Generation: gen, Images: images}
	for _, e := range images {
		switch e.State {
		case v1alpha1.PinnedPresent:
			sp.Present++
		case v1alpha1.PinnedPulling:
			sp.Pulling++
		case v1alpha1.PinnedFailed:
			sp.Failed++
		default:
			sp.Pending++
		}
	}
	return sp
}

func pullAction(ref, set string, attempt int32) Action {
	return Action{Type: ActionPull, Image: ref, Set: set, Attempt: attempt, Size: 100 * mi}
}

type stepCase struct {
	name    string
	now     time.Time
	sets    []v1alpha1.NodePinnedImageSet
	current []v1alpha1.PinnedSetProgress
	obs     Observation

	wantActions  []Action
	wantProgress []v1alpha1.PinnedSetProgress
	wantRequeue  time.Duration
	// check, when set, replaces the comparison of wantProgress (for long
	// messages).
	check func(t *testing.T, progress []v1alpha1.PinnedSetProgress)
}

func runStep(t *testing.T, m *Manager, cases []stepCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			if tc.obs.Fs == (Space{}) {
				tc.obs.Fs = roomy
			}
			actions, progress, requeue := m.Step(now, tc.sets, tc.current, tc.obs)
			if diff := cmp.Diff(tc.wantActions, actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, progress)
			} else if diff := cmp.Diff(tc.wantProgress, progress); diff != "" {
				t.Errorf("progress (-want +got):\n%s", diff)
			}
			if requeue != tc.wantRequeue {
				t.Errorf("requeue = %v, want %v", requeue, tc.wantRequeue)
			}
			// Idempotent: the same call with the progress it returned and
			// the pulls it started running gives the same progress and no
			// new pulls.
			obs2 := tc.obs
			obs2.Results = nil
			obs2.Pulling = map[string]int32{}
			for ref, a := range tc.obs.Pulling {
				obs2.Pulling[ref] = a
			}
			for _, a := range actions {
				switch a.Type {
				case ActionPull:
					obs2.Pulling[a.Image] = a.Attempt
				case ActionCancel:
					delete(obs2.Pulling, a.Image)
				}
			}
			actions2, progress2, _ := m.Step(now, tc.sets, progress, obs2)
			if len(actions2) != 0 {
				t.Errorf("repeated Step asks for %v", actions2)
			}
			if diff := cmp.Diff(progress, progress2); diff != "" {
				t.Errorf("repeated Step changes the progress (-first +second):\n%s", diff)
			}
		})
	}
}

func TestStepPulls(t *testing.T) {
	m := New(Config{})
	a, b, c, d := img(1), img(2), img(3), img(4)
	poll := DefaultPullPoll
	runStep(t, m, []stepCase{
		{
			name:        "nothing to do",
			wantRequeue: 0,
		},
		{
			name:        "two of three at once by default",
			sets:        []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b, c)},
			obs:         Observation{Images: absent(a, b, c)},
			wantActions: []Action{pullAction(a, "web", 1), pullAction(b, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1,
				pulling(a, 1, t0), pulling(b, 1, t0), pending(c))},
			wantRequeue: poll,
		},
		{
			name:         "present images are skipped",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b)},
			obs:          Observation{Images: map[string]ImageInfo{a: {Present: true, Size: mi}, b: {Present: true}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a), present(b))},
		},
		{
			name:         "present skipped, the absent one pulled",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b)},
			obs:          Observation{Images: with(absent(b), a, ImageInfo{Present: true})},
			wantActions:  []Action{pullAction(b, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a), pulling(b, 1, t0))},
			wantRequeue:  poll,
		},
		{
			name:         "set concurrency 1",
			sets:         []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a, b}, Concurrency: 1}},
			obs:          Observation{Images: absent(a, b)},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pending(b))},
			wantRequeue:  poll,
		},
		{
			name:         "control plane pulls one at a time",
			sets:         []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a, b}, Concurrency: 4}},
			obs:          Observation{Images: absent(a, b), ControlPlane: true},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pending(b))},
			wantRequeue:  poll,
		},
		{
			name:         "control plane counts running pulls of every set",
			sets:         []v1alpha1.NodePinnedImageSet{pset("a", 1, a), pset("b", 1, b)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("a", 1, pulling(a, 1, t0))},
			obs:          Observation{Images: absent(a, b), Pulling: map[string]int32{a: 1}, ControlPlane: true},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("a", 1, pulling(a, 1, t0)), progressOf("b", 1, pending(b))},
			wantRequeue:  poll,
		},
		{
			name:        "concurrency is per set",
			sets:        []v1alpha1.NodePinnedImageSet{{Name: "a", Generation: 1, Images: []string{a, b}, Concurrency: 1}, {Name: "b", Generation: 1, Images: []string{c, d}, Concurrency: 1}},
			current:     []v1alpha1.PinnedSetProgress{progressOf("a", 1, pulling(a, 1, t0), pending(b))},
			obs:         Observation{Images: absent(a, b, c, d), Pulling: map[string]int32{a: 1}},
			wantActions: []Action{pullAction(c, "b", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{
				progressOf("a", 1, pulling(a, 1, t0), pending(b)),
				progressOf("b", 1, pulling(c, 1, t0), pending(d)),
			},
			wantRequeue: poll,
		},
		{
			name: "an image of two sets is pulled once, with the set that has a pull secret, and reported in both",
			sets: []v1alpha1.NodePinnedImageSet{
				pset("b", 2, a, b),
				{Name: "c", Generation: 1, Images: []string{a}, PullSecret: &v1alpha1.SecretReference{Namespace: "x", Name: "y"}},
			},
			obs:         Observation{Images: absent(a, b)},
			wantActions: []Action{pullAction(a, "c", 1), pullAction(b, "b", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{
				progressOf("b", 2, pulling(a, 1, t0), pulling(b, 1, t0)),
				progressOf("c", 1, pulling(a, 1, t0)),
			},
			wantRequeue: poll,
		},
		{
			name: "sets are taken and reported in name order",
			sets: []v1alpha1.NodePinnedImageSet{
				{Name: "zeta", Generation: 1, Images: []string{a}, Concurrency: 1},
				{Name: "alpha", Generation: 1, Images: []string{b}, Concurrency: 1},
			},
			obs:         Observation{Images: absent(a, b), ControlPlane: true},
			wantActions: []Action{pullAction(b, "alpha", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{
				progressOf("alpha", 1, pulling(b, 1, t0)),
				progressOf("zeta", 1, pending(a)),
			},
			wantRequeue: poll,
		},
	})
}

func TestStepThrottle(t *testing.T) {
	m := New(Config{})
	a, b := img(1), img(2)
	sets := []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a, b}, Throttle: &metav1.Duration{Duration: time.Minute}}}
	pulled := func(ref string, at time.Time) v1alpha1.PinnedImageProgress {
		return v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedPresent, Attempts: 1, LastAttempt: mt(at)}
	}
	runStep(t, m, []stepCase{
		{
			name:         "first pull starts, the second waits for the throttle",
			sets:         sets,
			obs:          Observation{Images: absent(a, b)},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pending(b))},
			// The throttle's minute is further off than the poll of the running pull.
			wantRequeue: DefaultPullPoll,
		},
		{
			name:         "the throttle counts from the start, also after the pull ended",
			now:          t0.Add(20 * time.Second),
			sets:         sets,
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pending(b))},
			obs:          Observation{Images: with(absent(b), a, ImageInfo{Present: true, Size: 100 * mi}), Results: []PullResult{{Image: a, Attempt: 1}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulled(a, t0), pending(b))},
			wantRequeue:  40 * time.Second,
		},
		{
			name:         "throttle over",
			now:          t0.Add(time.Minute),
			sets:         sets,
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulled(a, t0), pending(b))},
			obs:          Observation{Images: with(absent(b), a, ImageInfo{Present: true, Size: 100 * mi})},
			wantActions:  []Action{pullAction(b, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulled(a, t0), pulling(b, 1, t0.Add(time.Minute)))},
			wantRequeue:  DefaultPullPoll,
		},
	})
}

func TestStepSpace(t *testing.T) {
	m := New(Config{})
	a, b := img(1), img(2)
	one := []v1alpha1.NodePinnedImageSet{pset("web", 1, a)}
	sized := func(size int64, refs ...string) map[string]ImageInfo {
		out := map[string]ImageInfo{}
		for _, r := range refs {
			out[r] = ImageInfo{Size: size}
		}
		return out
	}
	insufficient := func(want ...string) func(t *testing.T, p []v1alpha1.PinnedSetProgress) {
		return func(t *testing.T, p []v1alpha1.PinnedSetProgress) {
			t.Helper()
			e := p[0].Images[0]
			if e.State != v1alpha1.PinnedFailed || e.Reason != v1alpha1.PinnedReasonInsufficientSpace || e.Attempts != 0 {
				t.Errorf("want Failed/InsufficientSpace with no attempt, got %+v", e)
			}
			for _, w := range want {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q does not say %q", e.Message, w)
				}
			}
			if p[0].Failed != 1 {
				t.Errorf("set counts %+v", p[0])
			}
		}
	}
	runStep(t, m, []stepCase{
		{
			name:        "needs twice the size above the default 10%",
			sets:        one,
			obs:         Observation{Images: sized(500*mi, a), Fs: Space{Capacity: 10 * gi, Available: 1*gi + 999*mi}},
			check:       insufficient("needs about 1000.0 MiB free (2 x 500.0 MiB compressed)", "must leave 1.0 GiB (minFreeAfterPull) + 0 B (OS staging reserve)", "of 10.0 GiB available"),
			wantRequeue: DefaultSpacePoll, // no event says when space is freed
		},
		{
			name:         "fits exactly",
			sets:         one,
			obs:          Observation{Images: sized(500*mi, a), Fs: Space{Capacity: 10 * gi, Available: 1*gi + 1000*mi}},
			wantActions:  []Action{{Type: ActionPull, Image: a, Set: "web", Attempt: 1, Size: 500 * mi}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:        "the staging reserve is never taken",
			sets:        []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a}, MinFreeAfterPull: ptr.To(intstr.FromString("1Gi"))}},
			obs:         Observation{Images: sized(gi, a), Fs: Space{Capacity: 10 * gi, Available: 5 * gi}, StagingReserve: StagingNeed(1280 * mi)},
			check:       insufficient("+ 2.5 GiB (OS staging reserve)", "5.0 GiB of 10.0 GiB available"),
			wantRequeue: DefaultSpacePoll, // no event says when space is freed
		},
		{
			name:         "without the reserve it fits",
			sets:         []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a}, MinFreeAfterPull: ptr.To(intstr.FromString("1Gi"))}},
			obs:          Observation{Images: sized(gi, a), Fs: Space{Capacity: 10 * gi, Available: 5 * gi}},
			wantActions:  []Action{{Type: ActionPull, Image: a, Set: "web", Attempt: 1, Size: gi}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:        "unknown size: the estimate",
			sets:        one,
			obs:         Observation{Images: map[string]ImageInfo{}, Fs: Space{Capacity: 10 * gi, Available: 2 * gi}},
			check:       insufficient("2 x 1.0 GiB compressed, estimated"),
			wantRequeue: DefaultSpacePoll, // no event says when space is freed
		},
		{
			name:        "the strictest minFreeAfterPull of the sets listing the image",
			sets:        []v1alpha1.NodePinnedImageSet{pset("a", 1, a), {Name: "b", Generation: 1, Images: []string{a}, MinFreeAfterPull: ptr.To(intstr.FromString("50%"))}},
			obs:         Observation{Images: sized(gi, a), Fs: Space{Capacity: 10 * gi, Available: 6 * gi}},
			check:       insufficient("must leave 5.0 GiB (minFreeAfterPull)"),
			wantRequeue: DefaultSpacePoll, // no event says when space is freed
		},
		{
			name:         "a second pull that fits alone waits for the first, it is not failed",
			sets:         []v1alpha1.NodePinnedImageSet{{Name: "web", Generation: 1, Images: []string{a, b}, MinFreeAfterPull: ptr.To(intstr.FromString("1Gi"))}},
			obs:          Observation{Images: sized(gi, a, b), Fs: Space{Capacity: 10 * gi, Available: 4 * gi}},
			wantActions:  []Action{{Type: ActionPull, Image: a, Set: "web", Attempt: 1, Size: gi}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pending(b))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:        "a smaller image after one that does not fit is still pulled",
			sets:        []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b)},
			obs:         Observation{Images: map[string]ImageInfo{a: {Size: 5 * gi}, b: {Size: 100 * mi}}, Fs: Space{Capacity: 10 * gi, Available: 4 * gi}},
			wantActions: []Action{pullAction(b, "web", 1)},
			check: func(t *testing.T, p []v1alpha1.PinnedSetProgress) {
				if got := p[0].Images; got[0].Reason != v1alpha1.PinnedReasonInsufficientSpace || got[1].State != v1alpha1.PinnedPulling {
					t.Errorf("progress %+v", got)
				}
			},
			wantRequeue: DefaultPullPoll,
		},
		{
			name: "space freed: an InsufficientSpace image is pulled",
			sets: one,
			current: []v1alpha1.PinnedSetProgress{progressOf("web", 1, v1alpha1.PinnedImageProgress{
				Image: a, State: v1alpha1.PinnedFailed, Reason: v1alpha1.PinnedReasonInsufficientSpace, Message: "not pulled: ..."})},
			obs:          Observation{Images: absent(a)},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))},
			wantRequeue:  DefaultPullPoll,
		},
	})
}

// TestStepReclaim: OS staging outranks pinned images (issue 11,
// storage-exhaustion-during-prefetch.os-staging-not-starved.seed13: a disk
// filled by others after the pulls starved the staging while pinned images
// held room enough). With a staging due and free space below the reserve,
// present images are removed, the last in pull order first, until their
// sizes cover the shortfall, and recorded InsufficientSpace; without a
// staging due, or with the reserve free, nothing is removed. (Not through
// runStep: a removal changes what the next observation sees.)
func TestStepReclaim(t *testing.T) {
	m := New(Config{})
	a, b, c := img(1), img(2), img(3)
	sets := []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b, c)}
	all := []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a), present(b), present(c))}
	images := map[string]ImageInfo{a: {Present: true, Size: 2 * gi}, b: {Present: true, Size: 2 * gi}, c: {Present: true, Size: 2 * gi}}
	cases := []struct {
		name string
		obs  Observation
		want []string
	}{
		{"staging due, 7Gi short: all three go, the last first", Observation{Fs: Space{Capacity: 40 * gi, Available: gi}, StagingReserve: 8 * gi, StagingDue: true}, []string{c, b, a}},
		{"staging due, 3Gi short: two go", Observation{Fs: Space{Capacity: 40 * gi, Available: 5 * gi}, StagingReserve: 8 * gi, StagingDue: true}, []string{c, b}},
		{"no staging due: the images stay", Observation{Fs: Space{Capacity: 40 * gi, Available: gi}, StagingReserve: 8 * gi}, nil},
		{"the reserve is free: the images stay", Observation{Fs: Space{Capacity: 40 * gi, Available: 8 * gi}, StagingReserve: 8 * gi, StagingDue: true}, nil},
		{"no reserve: nothing to give back", Observation{Fs: Space{Capacity: 40 * gi, Available: gi}, StagingDue: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.Images = images
			actions, progress, _ := m.Step(t0, sets, all, tc.obs)
			var got []string
			for _, act := range actions {
				if act.Type != ActionRemove {
					t.Errorf("unexpected action %v", act)
				}
				got = append(got, act.Image)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("removed %v, want %v", got, tc.want)
			}
			for _, e := range progress[0].Images {
				gone := slices.Contains(tc.want, e.Image)
				ok := e.State == v1alpha1.PinnedPresent
				if gone {
					ok = e.State == v1alpha1.PinnedFailed && e.Reason == v1alpha1.PinnedReasonInsufficientSpace && strings.Contains(e.Message, "removed to give OS staging its reserve (8.0 GiB) back")
				}
				if !ok {
					t.Errorf("image %s (removed %v): %+v", e.Image, gone, e)
				}
			}
			// Once removed and absent, with the reserve back, nothing more
			// goes and nothing is pulled into the reserve.
			obs2 := tc.obs
			obs2.Images = map[string]ImageInfo{}
			for ref, info := range images {
				if slices.Contains(tc.want, ref) {
					info.Present = false
					obs2.Fs.Available += info.Size
				}
				obs2.Images[ref] = info
			}
			obs2.Fs.Available = max(obs2.Fs.Available, obs2.StagingReserve)
			if actions2, _, _ := m.Step(t0, sets, progress, obs2); len(actions2) != 0 {
				t.Errorf("next Step asks for %v", actions2)
			}
		})
	}
}

// TestStepReclaimCancelsPulls: with a staging due and the reserve still
// short once the present images are removed, pulls in flight hold room
// too (PullNeed of their size) and are canceled, the last in pull order
// first, recorded InsufficientSpace without counting the attempt (explorer
// seed 119053 of pinned-set-changed-mid-pull: the staging failed for room
// two pulls held). Pulls of unknown size yield as before, and a pull is
// not canceled while present images cover the shortfall.
func TestStepReclaimCancelsPulls(t *testing.T) {
	m := New(Config{})
	a, b, c := img(1), img(2), img(3)
	sets := []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b, c)}
	cur := []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a), pulling(b, 1, t0), pulling(c, 2, t0))}
	images := map[string]ImageInfo{a: {Present: true, Size: gi}, b: {Size: gi}, c: {Size: gi}}
	for _, tc := range []struct {
		name      string
		available int64
		want      []string
	}{
		{"3Gi short: a goes, then c's pull (2Gi held)", 5 * gi, []string{"Remove " + a, "Cancel " + c}},
		{"5Gi short: a, then both pulls, the last first", 3 * gi, []string{"Remove " + a, "Cancel " + c, "Cancel " + b}},
		{"1Gi short: a covers it, the pulls go on", 7 * gi, []string{"Remove " + a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := Observation{Fs: Space{Capacity: 40 * gi, Available: tc.available}, StagingReserve: 8 * gi, StagingDue: true,
				Images: images, Pulling: map[string]int32{b: 1, c: 2}}
			actions, progress, _ := m.Step(t0, sets, cur, obs)
			var got []string
			for _, act := range actions {
				got = append(got, string(act.Type)+" "+act.Image)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("actions %v, want %v", got, tc.want)
			}
			for _, e := range progress[0].Images {
				if !slices.Contains(got, "Cancel "+e.Image) {
					continue
				}
				want := int32(0)
				if e.Image == c {
					want = 1
				}
				if e.State != v1alpha1.PinnedFailed || e.Reason != v1alpha1.PinnedReasonInsufficientSpace || e.Attempts != want || !strings.Contains(e.Message, "pull canceled to give OS staging its reserve") {
					t.Errorf("canceled %s: %+v, want Failed/InsufficientSpace, %d attempt(s)", e.Image, e, want)
				}
			}
		})
	}
}

func TestStepFailures(t *testing.T) {
	m := New(Config{})
	a, b, c := img(1), img(2), img(3)
	web := []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b, c)}
	unreachable := `failed to pull and unpack image "` + a + `": failed to resolve reference "` + a + `": failed to do request: Head "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused`
	short := `failed to resolve reference "` + a + `": failed to do request: Head "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: connect: connection refused`
	retrying := func(attempts int32, started, retry time.Time) v1alpha1.PinnedImageProgress {
		return v1alpha1.PinnedImageProgress{Image: a, State: v1alpha1.PinnedPending, Reason: "RegistryUnreachable", Message: short,
			Attempts: attempts, LastAttempt: mt(started), RetryAfter: mt(retry)}
	}
	failedAt := func(ref, reason, msg string, attempts int32, started time.Time, retry *metav1.Time) v1alpha1.PinnedImageProgress {
		return v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedFailed, Reason: reason, Message: msg, Attempts: attempts, LastAttempt: mt(started), RetryAfter: retry}
	}
	blocked := func(ref string) v1alpha1.PinnedImageProgress {
		return v1alpha1.PinnedImageProgress{Image: ref, State: v1alpha1.PinnedPending, Reason: v1alpha1.PinnedReasonBlocked,
			Message: "not started: " + a + " ran out of space on this node; no pinned image is pulled until its set changes or drops it"}
	}
	t1 := t0.Add(5 * time.Second)
	enospc := `failed to pull and unpack image "` + a + `": failed to copy: write /var/lib/containerd/io.containerd.content.v1.content/ingest/1/data: no space left on device`
	runStep(t, m, []stepCase{
		{
			name:    "transient failure: backoff 30s, the next image takes the slot",
			now:     t1,
			sets:    web,
			current: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pulling(b, 1, t0), pending(c))},
			obs: Observation{Images: absent(a, b, c), Pulling: map[string]int32{b: 1},
				Results: []PullResult{{Image: a, Attempt: 1, Kind: cri.KindRegistryUnreachable, Message: unreachable}}},
			wantActions:  []Action{pullAction(c, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, retrying(1, t0, t1.Add(30*time.Second)), pulling(b, 1, t0), pulling(c, 1, t1))},
			wantRequeue:  30 * time.Second,
		},
		{
			name:         "backoff doubles",
			now:          t1,
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 3, t0))},
			obs:          Observation{Images: absent(a), Results: []PullResult{{Image: a, Attempt: 3, Kind: cri.KindRegistryUnreachable, Message: unreachable}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, retrying(3, t0, t1.Add(2*time.Minute)))},
			wantRequeue:  2 * time.Minute,
		},
		{
			name:         "retry not due",
			now:          t1.Add(119 * time.Second),
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, retrying(3, t0, t1.Add(2*time.Minute)))},
			obs:          Observation{Images: absent(a)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, retrying(3, t0, t1.Add(2*time.Minute)))},
			wantRequeue:  time.Second,
		},
		{
			name:         "retry due",
			now:          t1.Add(2 * time.Minute),
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, retrying(3, t0, t1.Add(2*time.Minute)))},
			obs:          Observation{Images: absent(a)},
			wantActions:  []Action{pullAction(a, "web", 4)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 4, t1.Add(2*time.Minute)))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:    "fifth failure gives up, re-armed after an hour",
			now:     t1,
			sets:    []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 5, t0))},
			obs:     Observation{Images: absent(a), Results: []PullResult{{Image: a, Attempt: 5, Kind: cri.KindRegistryUnreachable, Message: unreachable}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1,
				failedAt(a, "RegistryUnreachable", "gave up after 5 attempts: "+short, 5, t0, mt(t1.Add(time.Hour))))},
			wantRequeue: time.Hour,
		},
		{
			name:         "re-armed: five fresh tries",
			now:          t1.Add(time.Hour),
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, failedAt(a, "RegistryUnreachable", "gave up", 5, t0, mt(t1.Add(time.Hour))))},
			obs:          Observation{Images: absent(a)},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t1.Add(time.Hour)))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:    "not found fails at once; the others are still pulled",
			now:     t1,
			sets:    web,
			current: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pulling(b, 1, t0), pending(c))},
			obs: Observation{Images: absent(a, b, c), Pulling: map[string]int32{b: 1},
				Results: []PullResult{{Image: a, Attempt: 1, Kind: cri.KindNotFound, Message: `failed to pull and unpack image "` + a + `": failed to resolve reference "` + a + `": ` + a + `: not found`}}},
			wantActions: []Action{pullAction(c, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1,
				failedAt(a, "NotFound", `failed to resolve reference "`+a+`": `+a+`: not found`, 1, t0, mt(t1.Add(time.Hour))),
				pulling(b, 1, t0), pulling(c, 1, t1))},
			wantRequeue: DefaultPullPoll,
		},
		{
			name:    "out of space fails at once and stops further pulls",
			now:     t1,
			sets:    web,
			current: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pulling(b, 1, t0), pending(c))},
			obs: Observation{Images: absent(a, b, c), Pulling: map[string]int32{b: 1},
				Results: []PullResult{{Image: a, Attempt: 1, Kind: cri.KindOutOfSpace, Message: enospc}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1,
				failedAt(a, "OutOfSpace", "failed to copy: write /var/lib/containerd/io.containerd.content.v1.content/ingest/1/data: no space left on device", 1, t0, nil),
				pulling(b, 1, t0), blocked(c))},
			wantRequeue: DefaultPullPoll,
		},
		{
			name: "out of space blocks other sets too and is not re-armed by time",
			now:  t1.Add(24 * time.Hour),
			sets: []v1alpha1.NodePinnedImageSet{pset("web", 1, a), pset("zz", 1, c)},
			current: []v1alpha1.PinnedSetProgress{
				progressOf("web", 1, failedAt(a, "OutOfSpace", "no space left on device", 1, t0, nil)),
				progressOf("zz", 1, pending(c)),
			},
			obs: Observation{Images: absent(a, c)},
			wantProgress: []v1alpha1.PinnedSetProgress{
				progressOf("web", 1, failedAt(a, "OutOfSpace", "no space left on device", 1, t0, nil)),
				progressOf("zz", 1, blocked(c)),
			},
		},
		{
			name: "a changed set lifts the stop and retries its failures",
			now:  t1,
			sets: []v1alpha1.NodePinnedImageSet{pset("web", 2, a), pset("zz", 1, c)},
			current: []v1alpha1.PinnedSetProgress{
				progressOf("web", 1, failedAt(a, "OutOfSpace", "no space left on device", 1, t0, nil)),
				progressOf("zz", 1, blocked(c)),
			},
			obs:         Observation{Images: absent(a, c)},
			wantActions: []Action{pullAction(a, "web", 1), pullAction(c, "zz", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{
				progressOf("web", 2, pulling(a, 1, t1)),
				progressOf("zz", 1, pulling(c, 1, t1)),
			},
			wantRequeue: DefaultPullPoll,
		},
		{
			name: "dropping the image that ran out of space lifts the stop",
			now:  t1,
			sets: []v1alpha1.NodePinnedImageSet{pset("web", 1, b)},
			current: []v1alpha1.PinnedSetProgress{
				progressOf("web", 1, failedAt(a, "OutOfSpace", "no space left on device", 1, t0, nil), blocked(b)),
			},
			obs:          Observation{Images: absent(b)},
			wantActions:  []Action{pullAction(b, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(b, 1, t1))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:         "canceled is not a failure",
			now:          t1,
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 2, t0))},
			obs:          Observation{Images: absent(a), Results: []PullResult{{Image: a, Attempt: 2, Kind: cri.KindCanceled, Message: "context canceled"}}},
			wantActions:  []Action{pullAction(a, "web", 2)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 2, t1))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:    "success without the image is a transient failure",
			now:     t1,
			sets:    []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))},
			obs:     Observation{Images: absent(a), Results: []PullResult{{Image: a, Attempt: 1}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, v1alpha1.PinnedImageProgress{Image: a, State: v1alpha1.PinnedPending,
				Reason: "Unknown", Message: "the pull reported success but ImageStatus does not find the image", Attempts: 1, LastAttempt: mt(t0), RetryAfter: mt(t1.Add(30 * time.Second))})},
			wantRequeue: 30 * time.Second,
		},
		{
			name:         "a stale result is ignored",
			now:          t1,
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 2, t0))},
			obs:          Observation{Images: absent(a), Pulling: map[string]int32{a: 2}, Results: []PullResult{{Image: a, Attempt: 1, Kind: cri.KindNotFound}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 2, t0))},
			wantRequeue:  DefaultPullPoll,
		},
	})
}

func TestStepChangesAndRestarts(t *testing.T) {
	m := New(Config{})
	a, b, c := img(1), img(2), img(3)
	runStep(t, m, []stepCase{
		{
			name:         "an image dropped from its set is dropped from progress and its pull canceled",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 2, b)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pending(b))},
			obs:          Observation{Images: absent(b), Pulling: map[string]int32{a: 1}},
			wantActions:  []Action{pullAction(b, "web", 1), {Type: ActionCancel, Image: a}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 2, pulling(b, 1, t0))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:        "a removed set is dropped",
			sets:        []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:     []v1alpha1.PinnedSetProgress{progressOf("old", 1, present(c)), progressOf("web", 1, present(a))},
			obs:         Observation{Images: map[string]ImageInfo{a: {Present: true}}},
			wantActions: nil, wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a))},
		},
		{
			name:         "no sets, no progress",
			current:      []v1alpha1.PinnedSetProgress{progressOf("old", 1, present(c))},
			wantProgress: nil,
		},
		{
			name:         "an added image is pulled; the present ones are not",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 2, a, c)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a))},
			obs:          Observation{Images: with(absent(c), a, ImageInfo{Present: true})},
			wantActions:  []Action{pullAction(c, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 2, present(a), pulling(c, 1, t0))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:         "restart: a lost pull starts again under the same attempt",
			now:          t0.Add(time.Minute),
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 2, t0))},
			obs:          Observation{Images: absent(a)},
			wantActions:  []Action{pullAction(a, "web", 2)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 2, t0.Add(time.Minute)))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:         "restart: what was pulled before is found present, not pulled",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a, b)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0), pulling(b, 1, t0))},
			obs:          Observation{Images: map[string]ImageInfo{a: {Present: true}, b: {Present: true}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, v1alpha1.PinnedImageProgress{Image: a, State: v1alpha1.PinnedPresent, Attempts: 1, LastAttempt: mt(t0)}, v1alpha1.PinnedImageProgress{Image: b, State: v1alpha1.PinnedPresent, Attempts: 1, LastAttempt: mt(t0)})},
		},
		{
			name:         "a lagging read: the running pull is adopted",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, pending(a))},
			obs:          Observation{Images: absent(a), Pulling: map[string]int32{a: 3}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 3, t0))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:        "a lagging read: a newer result still counts",
			now:         t0.Add(5 * time.Second),
			sets:        []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:     []v1alpha1.PinnedSetProgress{progressOf("web", 1, pending(a))},
			obs:         Observation{Images: absent(a), Results: []PullResult{{Image: a, Attempt: 2, Kind: cri.KindDeadline, Message: "context deadline exceeded"}}},
			wantActions: nil,
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, v1alpha1.PinnedImageProgress{Image: a, State: v1alpha1.PinnedPending,
				Reason: "DeadlineExceeded", Message: "context deadline exceeded", Attempts: 2, RetryAfter: mt(t0.Add(65 * time.Second))})},
			wantRequeue: time.Minute,
		},
		{
			name:         "a present image that disappears is pulled again",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 1, v1alpha1.PinnedImageProgress{Image: a, State: v1alpha1.PinnedPresent, Attempts: 2, LastAttempt: mt(t0.Add(-time.Hour))})},
			obs:          Observation{Images: absent(a)},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))},
			wantRequeue:  DefaultPullPoll,
		},
		{
			name:         "the generation follows the set",
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 7, a)},
			current:      []v1alpha1.PinnedSetProgress{progressOf("web", 6, present(a))},
			obs:          Observation{Images: map[string]ImageInfo{a: {Present: true}}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 7, present(a))},
		},
		{
			name:         "times are kept to the second",
			now:          t0.Add(1500 * time.Millisecond),
			sets:         []v1alpha1.NodePinnedImageSet{pset("web", 1, a)},
			obs:          Observation{Images: absent(a)},
			wantActions:  []Action{pullAction(a, "web", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0.Add(time.Second)))},
			wantRequeue:  DefaultPullPoll,
		},
	})
}

func TestStepDoesNotAliasCurrent(t *testing.T) {
	m := New(Config{})
	a := img(1)
	current := []v1alpha1.PinnedSetProgress{progressOf("web", 1, pulling(a, 1, t0))}
	_, progress, _ := m.Step(t0, []v1alpha1.NodePinnedImageSet{pset("web", 1, a)}, current, Observation{Images: absent(a), Pulling: map[string]int32{a: 1}, Fs: roomy})
	progress[0].Images[0].LastAttempt.Time = t0.Add(time.Hour)
	if !current[0].Images[0].LastAttempt.Time.Equal(t0) {
		t.Errorf("the progress shares memory with current")
	}
}

func TestBackoff(t *testing.T) {
	m := New(Config{})
	var got []time.Duration
	for i := int32(0); i <= 8; i++ {
		got = append(got, m.Backoff(i))
	}
	want := []time.Duration{0, 30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Backoff (-want +got):\n%s", diff)
	}
}

func TestMinFreeBytes(t *testing.T) {
	const capacity = 200 * gi
	for _, tc := range []struct {
		v       *intstr.IntOrString
		want    int64
		wantErr bool
	}{
		{nil, 20 * gi, false},
		{ptr.To(intstr.FromString("10%")), 20 * gi, false},
		{ptr.To(intstr.FromString("0%")), 0, false},
		{ptr.To(intstr.FromString("99%")), 198 * gi, false},
		{ptr.To(intstr.FromString("5Gi")), 5 * gi, false},
		{ptr.To(intstr.FromString("500M")), 500_000_000, false},
		{ptr.To(intstr.FromString("150%")), 20 * gi, true},
		{ptr.To(intstr.FromString("abc")), 20 * gi, true},
		{ptr.To(intstr.FromString("-1Gi")), 20 * gi, true},
		{ptr.To(intstr.FromInt32(10)), 20 * gi, true},
	} {
		got, err := ParseMinFree(tc.v, capacity)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseMinFree(%v): err %v, want error %v", tc.v, err, tc.wantErr)
		}
		if fb := MinFreeBytes(tc.v, capacity); fb != tc.want {
			t.Errorf("MinFreeBytes(%v) = %d, want %d", tc.v, fb, tc.want)
		}
		if !tc.wantErr && got != tc.want {
			t.Errorf("ParseMinFree(%v) = %d, want %d", tc.v, got, tc.want)
		}
	}
	if got := MinFreeBytes(ptr.To(intstr.FromString("10%")), 1<<62); got != (1<<62)/10 {
		t.Errorf("10%% of 4 EiB = %d", got)
	}
}

func TestCanStage(t *testing.T) {
	if !CanStage(2*gi, gi) || CanStage(2*gi-1, gi) {
		t.Errorf("CanStage: an OS image needs twice its size")
	}
	// What Step admits never takes the reserve: after the admitted pull
	// the staging still fits.
	m := New(Config{})
	a := img(1)
	reserve := StagingNeed(2 * gi)
	fs := Space{Capacity: 20 * gi, Available: 8 * gi}
	actions, _, _ := m.Step(t0, []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 1, Images: []string{a}, MinFreeAfterPull: ptr.To(intstr.FromString("0%"))}}, nil,
		Observation{Images: map[string]ImageInfo{a: {Size: 2 * gi}}, Fs: fs, StagingReserve: reserve})
	if len(actions) != 1 {
		t.Fatalf("want the pull admitted, got %v", actions)
	}
	if after := fs.Available - PullNeed(2*gi); !CanStage(after, 2*gi) {
		t.Errorf("after the admitted pull %d bytes are left, staging needs %d", after, reserve)
	}
	actions, _, _ = m.Step(t0, []v1alpha1.NodePinnedImageSet{{Name: "s", Generation: 1, Images: []string{a}, MinFreeAfterPull: ptr.To(intstr.FromString("0%"))}}, nil,
		Observation{Images: map[string]ImageInfo{a: {Size: 2*gi + 1}}, Fs: fs, StagingReserve: reserve})
	if len(actions) != 0 {
		t.Errorf("a pull that would take the reserve was admitted: %v", actions)
	}
}

func TestReasonsAreAPIReasons(t *testing.T) {
	for kind, reason := range map[cri.Kind]string{
		cri.KindNotFound:            v1alpha1.PinnedReasonNotFound,
		cri.KindOutOfSpace:          v1alpha1.PinnedReasonOutOfSpace,
		cri.KindAuth:                v1alpha1.PinnedReasonUnauthorized,
		cri.KindRegistryUnreachable: v1alpha1.PinnedReasonRegistryUnreachable,
		cri.KindRuntimeUnavailable:  v1alpha1.PinnedReasonRuntimeUnavailable,
		cri.KindDeadline:            v1alpha1.PinnedReasonDeadlineExceeded,
		cri.KindInvalidReference:    v1alpha1.PinnedReasonInvalidReference,
		cri.KindUnknown:             v1alpha1.PinnedReasonUnknown,
	} {
		if string(kind) != reason {
			t.Errorf("kind %s is reported as %q, the API says %q", kind, kind, reason)
		}
	}
}

func TestShorten(t *testing.T) {
	ref := img(1)
	long := strings.Repeat("x", 2*MaxMessage) + ": no space left on device"
	got := shorten(`failed to pull and unpack image "`+ref+`": `+long, ref)
	if len(got) > MaxMessage || !strings.HasSuffix(got, "no space left on device") || !strings.HasPrefix(got, "…") {
		t.Errorf("shorten kept %d bytes: %q", len(got), got)
	}
	if got := shorten("short", ref); got != "short" {
		t.Errorf("shorten(short) = %q", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536 * mi: "1.5 GiB", 3 << 40: "3.0 TiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// An image of unknown size is admitted on an estimate, so its pull may take
// any free space, the staging reserve included: while an OS staging is due
// it is neither started nor left running (storage-exhaustion-during-prefetch
// seed 47: a daemon restarted on a crashed node started such a pull in the
// pass before Stage, and the staging found the disk full).
func TestStepUnknownSizeYieldsToStaging(t *testing.T) {
	m := New(Config{})
	a, b := img(1), img(2)
	sets := []v1alpha1.NodePinnedImageSet{pset("edge", 1, a, b)}
	images := func() map[string]ImageInfo { return with(absent(b), a, ImageInfo{}) } // a: size unknown
	fs := Space{Capacity: 30 * gi, Available: 22 * gi}
	aPending := v1alpha1.PinnedImageProgress{Image: a, State: v1alpha1.PinnedPending, LastAttempt: mt(t0.Add(-5 * time.Minute))}
	runStep(t, m, []stepCase{
		{
			name:        "restarted with the pull lost, staging due: the unknown one waits, the known one starts",
			sets:        sets,
			current:     []v1alpha1.PinnedSetProgress{progressOf("edge", 1, pulling(a, 1, t0.Add(-5*time.Minute)), pending(b))},
			obs:         Observation{Images: images(), Fs: fs, StagingReserve: 8 * gi, StagingDue: true},
			wantActions: []Action{pullAction(b, "edge", 1)},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("edge", 1,
				aPending, pulling(b, 1, t0))},
			wantRequeue: DefaultPullPoll,
		},
		{
			name:        "staging due while the unknown one runs: it is canceled, its attempt not counted",
			sets:        sets,
			current:     []v1alpha1.PinnedSetProgress{progressOf("edge", 1, pulling(a, 1, t0.Add(-5*time.Minute)), present(b))},
			obs:         Observation{Images: with(images(), b, ImageInfo{Present: true, Size: 100 * mi}), Pulling: map[string]int32{a: 1}, Fs: Space{Capacity: 30 * gi, Available: 8 * gi}, StagingReserve: 8 * gi, StagingDue: true},
			wantActions: []Action{{Type: ActionCancel, Image: a}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("edge", 1,
				aPending, present(b))},
		},
		{
			name:        "no staging due: the estimate admits it",
			sets:        sets,
			current:     []v1alpha1.PinnedSetProgress{progressOf("edge", 1, aPending, present(b))},
			obs:         Observation{Images: with(images(), b, ImageInfo{Present: true, Size: 100 * mi}), Fs: fs, StagingReserve: 8 * gi},
			wantActions: []Action{{Type: ActionPull, Image: a, Set: "edge", Attempt: 1, Size: DefaultEstimatedSize}},
			wantProgress: []v1alpha1.PinnedSetProgress{progressOf("edge", 1,
				pulling(a, 1, t0), present(b))},
			wantRequeue: DefaultPullPoll,
		},
	})

	// The unknown one filled the disk (containerd writes until ENOSPC):
	// canceling it gives the room back, so present images stay.
	current := []v1alpha1.PinnedSetProgress{progressOf("edge", 1, pulling(a, 1, t0.Add(-5*time.Minute)), present(b))}
	obs := Observation{Images: with(images(), b, ImageInfo{Present: true, Size: 100 * mi}), Pulling: map[string]int32{a: 1}, Fs: Space{Capacity: 30 * gi}, StagingReserve: 8 * gi, StagingDue: true}
	actions, _, _ := m.Step(t0, sets, current, obs)
	if want := []Action{{Type: ActionCancel, Image: a}}; !cmp.Equal(actions, want) {
		t.Errorf("disk full by the unknown pull: actions %v, want %v", actions, want)
	}
}

// TestStepWithoutSets checks Step's shortcut for a node without pinned
// sets, pulls or pins of its own against the full step.
func TestStepWithoutSets(t *testing.T) {
	a := img(1)
	old := []v1alpha1.PinnedSetProgress{progressOf("web", 1, present(a))}
	for name, tc := range map[string]struct {
		cfg     Config
		current []v1alpha1.PinnedSetProgress
		obs     Observation
	}{
		"nothing":         {obs: Observation{Fs: roomy}},
		"sets dropped":    {current: old, obs: Observation{Fs: roomy, Reported: old}},
		"results left":    {obs: Observation{Fs: roomy, Results: []PullResult{{Image: a, Attempt: 1}}}},
		"images observed": {obs: Observation{Fs: roomy, Images: with(absent(), a, ImageInfo{Present: true, Size: mi})}},
		"staging short": {current: old, obs: Observation{
			Fs: Space{Capacity: 10 * gi, Available: gi}, StagingReserve: 8 * gi, StagingDue: true, Images: with(absent(), a, ImageInfo{Present: true, Size: gi}),
		}},
		"pins possible": {cfg: Config{UnpinGrace: time.Hour}, obs: Observation{Fs: roomy, ControlPlane: true, RecordCreated: t0, Pin: PinObservation{Can: true, Note: "note"}}},
	} {
		t.Run(name, func(t *testing.T) {
			m := New(tc.cfg)
			actions, progress, requeue := m.Step(t0, nil, tc.current, tc.obs)
			wantActions, wantProgress, wantRequeue := m.step(t0, nil, tc.current, tc.obs)
			if diff := cmp.Diff(wantActions, actions); diff != "" {
				t.Errorf("actions (-full +shortcut):\n%s", diff)
			}
			if diff := cmp.Diff(wantProgress, progress); diff != "" {
				t.Errorf("progress (-full +shortcut):\n%s", diff)
			}
			if requeue != wantRequeue {
				t.Errorf("requeue = %v, full step %v", requeue, wantRequeue)
			}
			if actions != nil || progress != nil || requeue != 0 {
				t.Errorf("Step = %v, %v, %v; want nothing", actions, progress, requeue)
			}
		})
	}
}
