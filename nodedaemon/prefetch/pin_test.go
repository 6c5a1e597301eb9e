package prefetch

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestStepPins: present images the runtime does not report pinned are
// pinned once (bootroll's record stops a repeat, whatever the runtime
// makes of it), reported as the runtime says, and bootroll's pins that no
// set lists are unpinned; pins bootroll did not make are never touched.
func TestStepPins(t *testing.T) {
	m := New(Config{})
	sets := []v1alpha1.NodePinnedImageSet{pset("a", 1, img(1), img(2)), pset("b", 1, img(2), img(3))}
	present := func(pinned ...string) map[string]ImageInfo {
		out := map[string]ImageInfo{}
		for _, ref := range []string{img(1), img(2), img(3)} {
			out[ref] = ImageInfo{Present: true, Size: 100 * mi}
		}
		for _, ref := range pinned {
			out[ref] = ImageInfo{Present: true, Size: 100 * mi, Pinned: true}
		}
		return out
	}
	pinnedOf := func(p []v1alpha1.PinnedSetProgress) map[string]bool {
		out := map[string]bool{}
		for _, sp := range p {
			for _, e := range sp.Images {
				out[e.Image] = e.Pinned
			}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		images      map[string]ImageInfo
		pin         PinObservation
		wantActions []Action
		wantPinned  map[string]bool
		wantMessage string
	}{{
		name:        "cannot pin, no note",
		images:      present(),
		wantPinned:  map[string]bool{img(1): false, img(2): false, img(3): false},
		wantActions: nil,
	}, {
		name:   "pins what is not pinned",
		images: present(img(3)), // img(3) pinned by someone else
		pin:    PinObservation{Can: true},
		wantActions: []Action{
			{Type: ActionPin, Image: img(1)}, {Type: ActionPin, Image: img(2)},
		},
		wantPinned: map[string]bool{img(1): false, img(2): false, img(3): true},
	}, {
		name:       "pinned by bootroll, reported pinned",
		images:     present(img(1), img(2)),
		pin:        PinObservation{Can: true, Own: []string{img(1), img(2)}},
		wantPinned: map[string]bool{img(1): true, img(2): true, img(3): false},
		wantActions: []Action{
			{Type: ActionPin, Image: img(3)},
		},
	}, {
		name:        "labelled but the runtime ignores it: no repeat, the note",
		images:      present(),
		pin:         PinObservation{Can: true, Own: []string{img(1), img(2), img(3)}, Note: "containerd 1.6: upgrade"},
		wantPinned:  map[string]bool{img(1): false, img(2): false, img(3): false},
		wantMessage: "containerd 1.6: upgrade",
	}, {
		name:   "unpins bootroll's pins no set lists",
		images: present(img(1), img(2), img(3)),
		pin:    PinObservation{Can: true, Own: []string{img(9), img(1), img(2), img(3), img(8)}},
		wantActions: []Action{
			{Type: ActionUnpin, Image: img(8)}, {Type: ActionUnpin, Image: img(9)},
		},
		wantPinned: map[string]bool{img(1): true, img(2): true, img(3): true},
	}, {
		name:        "CRI-O: nothing to do but say so",
		images:      present(img(2)),
		pin:         PinObservation{Note: "add to pinned_images"},
		wantPinned:  map[string]bool{img(1): false, img(2): true, img(3): false},
		wantMessage: "add to pinned_images",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			actions, progress, _ := m.Step(t0, sets, nil, Observation{Images: tc.images, Fs: roomy, Pin: tc.pin})
			if diff := cmp.Diff(tc.wantActions, actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantPinned, pinnedOf(progress)); diff != "" {
				t.Errorf("pinned (-want +got):\n%s", diff)
			}
			for _, sp := range progress {
				for _, e := range sp.Images {
					want := ""
					if !e.Pinned {
						want = tc.wantMessage
					}
					if e.Message != want || e.Reason != "" || e.State != v1alpha1.PinnedPresent {
						t.Errorf("%s: %s/%s %q, want Present with message %q", e.Image, e.State, e.Reason, e.Message, want)
					}
				}
			}
		})
	}
}

// TestStepPinOnlyPresent: an image that is absent or pulling is neither
// pinned nor reported pinned, even if a stale record said so.
func TestStepPinOnlyPresent(t *testing.T) {
	m := New(Config{})
	sets := []v1alpha1.NodePinnedImageSet{pset("a", 1, img(1))}
	cur := []v1alpha1.PinnedSetProgress{{Name: "a", Generation: 1, Present: 1, Images: []v1alpha1.PinnedImageProgress{{Image: img(1), State: v1alpha1.PinnedPresent, Pinned: true}}}}
	for _, obs := range []Observation{
		{Images: absent(img(1)), Fs: roomy, Pin: PinObservation{Can: true}},
		{Images: absent(img(1)), Pulling: map[string]int32{img(1): 1}, Fs: roomy, Pin: PinObservation{Can: true}},
	} {
		actions, progress, _ := m.Step(t0, sets, cur, obs)
		for _, a := range actions {
			if a.Type == ActionPin || a.Type == ActionUnpin {
				t.Errorf("action %v on an image that is not present", a)
			}
		}
		if e := progress[0].Images[0]; e.Pinned {
			t.Errorf("%s image reported pinned: %+v", e.State, e)
		}
	}
}

// TestStepUnpinGrace: on a record younger than UnpinGrace, bootroll's
// pins of images that no set lists and the record's progress does not
// name are kept (the PinnedImageSet controller writes the sets of a
// record made again after it, set by set), and Step asks to be called
// when the grace ends; past it, or when the record's age is unknown, they
// are unpinned as before. An image the record's progress names was
// listed by one of its sets and dropped: it is unpinned at once. An OS
// staging due and short of its reserve ends the grace at once.
func TestStepUnpinGrace(t *testing.T) {
	a, b, c := img(1), img(2), img(3)
	onNode := map[string]ImageInfo{
		a: {Present: true, Size: 100 * mi, Pinned: true},
		b: {Present: true, Size: 100 * mi, Pinned: true},
		c: {Present: true, Size: 100 * mi, Pinned: true},
	}
	own := PinObservation{Can: true, Own: []string{a, b, c}}
	short := Space{Capacity: 100 * gi, Available: 1 * gi}
	unpin := func(refs ...string) []Action {
		var out []Action
		for _, ref := range refs {
			out = append(out, Action{Type: ActionUnpin, Image: ref})
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		cfg         Config
		sets        []v1alpha1.NodePinnedImageSet
		created     time.Time
		reported    []v1alpha1.PinnedSetProgress
		stagingDue  bool
		fs          Space
		wantActions []Action
		wantRequeue time.Duration
	}{{
		name:        "record made a second ago, no sets yet: kept until the grace ends",
		created:     t0.Add(-time.Second),
		wantRequeue: DefaultUnpinGrace - time.Second,
	}, {
		name:        "record made a second ago, one of its sets written: the others' images kept",
		sets:        []v1alpha1.NodePinnedImageSet{pset("a", 1, a)},
		created:     t0.Add(-time.Second),
		wantRequeue: DefaultUnpinGrace - time.Second,
	}, {
		name:        "a set of this record listed b and dropped it: b unpinned at once, c kept",
		sets:        []v1alpha1.NodePinnedImageSet{pset("a", 2, a)},
		created:     t0.Add(-time.Minute),
		reported:    []v1alpha1.PinnedSetProgress{progressOf("a", 1, present(a), present(b))},
		wantActions: unpin(b),
		wantRequeue: DefaultUnpinGrace - time.Minute,
	}, {
		name:        "record older than the grace: unpinned",
		sets:        []v1alpha1.NodePinnedImageSet{pset("a", 1, a)},
		created:     t0.Add(-DefaultUnpinGrace - time.Second),
		wantActions: unpin(b, c),
	}, {
		name:        "the grace just ended: unpinned",
		created:     t0.Add(-DefaultUnpinGrace),
		wantActions: unpin(a, b, c),
	}, {
		name:        "the record's age unknown: unpinned",
		wantActions: unpin(a, b, c),
	}, {
		name:        "no grace configured: unpinned",
		cfg:         Config{UnpinGrace: -1},
		created:     t0.Add(-time.Second),
		wantActions: unpin(a, b, c),
	}, {
		name:        "a shorter grace",
		cfg:         Config{UnpinGrace: 30 * time.Second},
		created:     t0.Add(-10 * time.Second),
		wantRequeue: 20 * time.Second,
	}, {
		name:        "an OS staging due with its reserve: kept",
		created:     t0.Add(-time.Second),
		stagingDue:  true,
		wantRequeue: DefaultUnpinGrace - time.Second,
	}, {
		name:        "an OS staging due and short of its reserve: unpinned",
		created:     t0.Add(-time.Second),
		stagingDue:  true,
		fs:          short,
		wantActions: unpin(a, b, c),
	}, {
		name:        "short of the reserve but no staging due: kept",
		created:     t0.Add(-time.Second),
		fs:          short,
		wantRequeue: DefaultUnpinGrace - time.Second,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			fs := tc.fs
			if fs == (Space{}) {
				fs = roomy
			}
			obs := Observation{Images: onNode, Fs: fs, Pin: own, RecordCreated: tc.created, Reported: tc.reported, StagingDue: tc.stagingDue, StagingReserve: 4 * gi}
			actions, _, requeue := New(tc.cfg).Step(t0, tc.sets, nil, obs)
			if diff := cmp.Diff(tc.wantActions, actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if requeue != tc.wantRequeue {
				t.Errorf("requeue %v, want %v", requeue, tc.wantRequeue)
			}
		})
	}
}
