package invariant

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/facts"
	"github.com/bootroll/bootroll/sim/scenario"
)

// ExpectPinnedSets names the pinnedSets expectation in violations.
const ExpectPinnedSets = "pinned-sets"

// PinnedSources are the cluster model's answers the pinned-image checks
// need; nil funcs skip the checks that use them.
type PinnedSources struct {
	// TakeStageStarvations returns the OS stagings that failed for lack
	// of space since the last call.
	TakeStageStarvations func() []facts.StageStarvation
	// PinnedPresent reports whether a pinned image is on a node.
	PinnedPresent func(node, ref string) bool
	// DaemonRunning reports whether a node's daemon process runs (nil:
	// every daemon does).
	DaemonRunning func(node string) bool
}

// pinnedState follows the PinnedImageSets and the BootcNodes' pinned sets
// and progress.
type pinnedState struct {
	src   PinnedSources
	sets  map[string]*v1alpha1.PinnedImageSet
	nodes map[string]*v1alpha1.BootcNode
	// diskFull is when each node's last OS staging failed for lack of
	// space that the pinned images did not take (its disk is full).
	diskFull map[string]time.Time
}

// diskBlocks reports whether pool p's members that do not run its target
// cannot take it because of the world, by the model's own account: each is
// not Ready, or its last OS staging failed for lack of space, with the
// pinned images not to blame, within StallEvidence; and at least one is
// the latter.
func (c *Checker) diskBlocks(p *Pool) bool {
	if c.pinned == nil || len(c.pinned.diskFull) == 0 {
		return false
	}
	target := imageref.Digest(p.TargetImage)
	full := 0
	for _, name := range c.world.Members(p.Name) {
		n := c.world.Node(name)
		switch at, ok := c.pinned.diskFull[name]; {
		case target != "" && n.Ready && n.BootedDigest == target:
		case ok && c.now().Sub(at) <= StallEvidence:
			full++
		case !n.Ready:
		default:
			return false
		}
	}
	return full > 0
}

// SetPinnedSources gives the checker the cluster model's pinned-image
// answers.
func (c *Checker) SetPinnedSources(src PinnedSources) { c.pinnedState().src = src }

func (c *Checker) pinnedState() *pinnedState {
	if c.pinned == nil {
		c.pinned = &pinnedState{sets: map[string]*v1alpha1.PinnedImageSet{}, nodes: map[string]*v1alpha1.BootcNode{}}
	}
	return c.pinned
}

// observePinned keeps the latest PinnedImageSets and the BootcNodes that
// have pinned sets in spec or status. The objects delivered are the
// store's own copies of that revision, never changed afterwards.
func (c *Checker) observePinned(ev apiserver.Event) {
	switch o := ev.Object.(type) {
	case *v1alpha1.PinnedImageSet:
		ps := c.pinnedState()
		if ev.Type == apiserver.Deleted {
			delete(ps.sets, o.Name)
		} else {
			ps.sets[o.Name] = o
		}
	case *v1alpha1.BootcNode:
		if c.pinned == nil && len(o.Spec.PinnedImageSets) == 0 && len(o.Status.Daemon.PinnedImages) == 0 {
			return
		}
		ps := c.pinnedState()
		if ev.Type == apiserver.Deleted {
			delete(ps.nodes, o.Name)
		} else {
			ps.nodes[o.Name] = o
		}
	}
}

// checkPinned runs os-staging-not-starved after every event.
func (c *Checker) checkPinned(now time.Time) {
	if c.pinned == nil || c.pinned.src.TakeStageStarvations == nil {
		return
	}
	for _, s := range c.pinned.src.TakeStageStarvations() {
		if s.Available+s.PinnedHeld < s.Need {
			// The disk is full without the pinned images: the world's
			// doing (converges, diskBlocks).
			if c.pinned.diskFull == nil {
				c.pinned.diskFull = map[string]time.Time{}
			}
			c.pinned.diskFull[s.Node] = c.now()
		}
		if !c.enabled[scenario.InvOSStagingNotStarved] || s.PinnedHeld <= 0 || s.Available+s.PinnedHeld < s.Need {
			continue
		}
		c.record(Violation{Invariant: string(scenario.InvOSStagingNotStarved), At: now.Sub(c.start), Objects: []string{"Node/" + s.Node},
			Message: fmt.Sprintf("staging %s on node %s failed with no space left on device: it needed %s free, %s were, and pinned images held %s; the staging reserve should have kept that room",
				s.Image, s.Node, gib(s.Need), gib(s.Available), gib(s.PinnedHeld))})
	}
}

func gib(n int64) string { return fmt.Sprintf("%.1fGi", float64(n)/(1<<30)) }

// finishPinned runs pinned-sets-exact and the pinnedSets expectation.
func (c *Checker) finishPinned(at time.Duration) {
	ps := c.pinned
	if ps == nil {
		ps = &pinnedState{}
	}
	if c.enabled[scenario.InvPinnedSetsExact] {
		c.pinnedExact(ps, at)
	}
	for _, name := range slices.Sorted(maps.Keys(c.sc.Expect.PinnedSets)) {
		want := c.sc.Expect.PinnedSets[name]
		set := ps.sets[name]
		obj := []string{"PinnedImageSet/" + name}
		if set == nil {
			c.record(Violation{Invariant: ExpectPinnedSets, At: at, Objects: obj, Message: fmt.Sprintf("PinnedImageSet %s does not exist at the end", name)})
			continue
		}
		st := set.Status
		var bad []string
		cond := meta.FindStatusCondition(st.Conditions, string(want.Condition))
		switch {
		case st.ObservedGeneration != set.Generation:
			bad = append(bad, fmt.Sprintf("status is of generation %d, spec at %d", st.ObservedGeneration, set.Generation))
		case cond == nil || cond.Status != "True":
			bad = append(bad, fmt.Sprintf("condition %s is not True (%s)", want.Condition, conditions(st.Conditions)))
		case want.Reason != "" && cond.Reason != want.Reason:
			bad = append(bad, fmt.Sprintf("condition %s has reason %s, want %s (%s)", want.Condition, cond.Reason, want.Reason, cond.Message))
		}
		if !inRange(int(st.Failed), want.Failed) {
			bad = append(bad, fmt.Sprintf("status.failed is %d, want %s", st.Failed, rangeString(want.Failed)))
		}
		if !inRange(int(st.Done), want.Done) {
			bad = append(bad, fmt.Sprintf("status.done is %d, want %s", st.Done, rangeString(want.Done)))
		}
		if len(bad) > 0 {
			c.record(Violation{Invariant: ExpectPinnedSets, At: at, Objects: obj,
				Message: fmt.Sprintf("PinnedImageSet %s at the end: %s", name, strings.Join(bad, "; "))})
		}
	}
}

// pinnedExact checks that every BootcNode's spec carries its sets as the
// PinnedImageSets say now, that the daemon reports exactly those sets and
// images for the current generation, and that what it reports present is
// on the host. The report is checked only on a node whose daemon runs at
// the end: the daemon is the only writer of BootcNode status (DESIGN.md
// section 2), so a node whose host is down or hung in a boot that never
// gets Ready (left Failed, DESIGN.md section 4) keeps the last report its
// daemon wrote, and nothing may write a newer one.
func (c *Checker) pinnedExact(ps *pinnedState, at time.Duration) {
	var wrong, parts []string
	for _, name := range slices.Sorted(maps.Keys(ps.nodes)) {
		bn := ps.nodes[name]
		var why []string
		spec := map[string]v1alpha1.NodePinnedImageSet{}
		for _, e := range bn.Spec.PinnedImageSets {
			spec[e.Name] = e
			set := ps.sets[e.Name]
			switch {
			case set == nil:
				why = append(why, fmt.Sprintf("spec carries set %s, which does not exist", e.Name))
			case e.Generation != set.Generation || !slices.Equal(e.Images, digestStrings(set.Spec.Images)):
				why = append(why, fmt.Sprintf("spec carries set %s generation %d, the set is at generation %d", e.Name, e.Generation, set.Generation))
			}
		}
		if ps.src.DaemonRunning == nil || ps.src.DaemonRunning(name) {
			why = append(why, reportWrong(ps, bn, spec)...)
		}
		if len(why) > 0 {
			wrong = append(wrong, name)
			parts = append(parts, name+": "+strings.Join(why, ", "))
		}
	}
	if len(wrong) > 0 {
		c.record(Violation{Invariant: string(scenario.InvPinnedSetsExact), At: at, Objects: nodeObjects(wrong),
			Message: fmt.Sprintf("%d node(s) do not report exactly their current pinned sets at the end: %s", len(wrong), short(parts))})
	}
}

// reportWrong says how a node's daemon report differs from the sets its
// spec carries, and which images it reports present the host lacks.
func reportWrong(ps *pinnedState, bn *v1alpha1.BootcNode, spec map[string]v1alpha1.NodePinnedImageSet) []string {
	name := bn.Name
	var why []string
	reported := map[string]bool{}
	for _, p := range bn.Status.Daemon.PinnedImages {
		reported[p.Name] = true
		e, ok := spec[p.Name]
		if !ok {
			why = append(why, fmt.Sprintf("reports set %s, which its spec does not carry", p.Name))
			continue
		}
		var imgs []string
		for _, im := range p.Images {
			imgs = append(imgs, im.Image)
			if im.State == v1alpha1.PinnedPresent && ps.src.PinnedPresent != nil && !ps.src.PinnedPresent(name, im.Image) {
				why = append(why, fmt.Sprintf("reports %s of set %s present, the host does not have it", im.Image, p.Name))
			}
		}
		if p.Generation != e.Generation || !slices.Equal(imgs, e.Images) {
			why = append(why, fmt.Sprintf("reports set %s generation %d with %d images, the spec has generation %d with %d", p.Name, p.Generation, len(imgs), e.Generation, len(e.Images)))
		}
	}
	for _, e := range bn.Spec.PinnedImageSets {
		if !reported[e.Name] {
			why = append(why, fmt.Sprintf("does not report set %s", e.Name))
		}
	}
	return why
}

func digestStrings(in []v1alpha1.DigestReference) []string {
	out := make([]string, len(in))
	for i, d := range in {
		out[i] = string(d)
	}
	return out
}

func conditions(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, ", ")
}

func inRange(n int, r scenario.CountRange) bool {
	return n >= r.Min && (r.Max == nil || n <= *r.Max)
}

func rangeString(r scenario.CountRange) string {
	switch {
	case r.Max == nil:
		return fmt.Sprintf("at least %d", r.Min)
	case *r.Max == r.Min:
		return fmt.Sprint(r.Min)
	}
	return fmt.Sprintf("%d to %d", r.Min, *r.Max)
}

// PinnedSettled reports whether no PinnedImageSet is in progress: each
// has a status of its generation with Progressing False. A run is not done
// while nodes still pull.
func (c *Checker) PinnedSettled() bool {
	if c.pinned == nil {
		return true
	}
	for _, set := range c.pinned.sets {
		if set.Status.ObservedGeneration != set.Generation || meta.IsStatusConditionTrue(set.Status.Conditions, v1alpha1.ConditionProgressing) {
			return false
		}
	}
	return true
}
