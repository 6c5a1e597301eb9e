package rollout

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// MaxFailuresOf is the pool's failurePolicy.maxFailures, or its default.
func MaxFailuresOf(p *v1alpha1.BootcNodePool) int {
	if m := p.Spec.FailurePolicy.MaxFailures; m != nil {
		return int(*m)
	}
	return int(DefaultMaxFailures)
}

// The failure record of a pool has two fields and one writer for each
// (docs/fields.md): status.failures, the nodes that failed the target, is
// the node reconciler's (NoteFailure), which adds a failure before it
// touches anything else, so that no conflict or deletion can lose it;
// status.halt and status.lastHalt are the pool reconciler's (SettleHalt).
// A halt holds from the moment the maxFailures-th failure is written, not
// from the pool's next pass (HaltedFor counts the failures).

// NoteFailure adds f to the pool status's failures (one entry per node and
// image; a repeat changes nothing) when f's image is the pool's target,
// and drops the entries of other images. It reports whether the failures
// changed. It is the node reconciler's, the one writer of status.failures.
func NoteFailure(st *v1alpha1.BootcNodePoolStatus, f v1alpha1.NodeFailure) bool {
	if f.Image == "" || f.Image != st.TargetImage {
		return false // an old target's failure: the BootcNode keeps it
	}
	kept := st.Failures[:0:0]
	found := false
	for _, g := range st.Failures {
		if !current(st, g, f.Image) {
			continue
		}
		found = found || g.Node == f.Node
		kept = append(kept, g)
	}
	if found && len(kept) == len(st.Failures) {
		return false
	}
	if !found {
		kept = append(kept, f)
	}
	st.Failures = kept
	return true
}

// HasStaleFailures reports whether the pool's status.failures holds a
// failure DropStaleFailures would drop.
func HasStaleFailures(st *v1alpha1.BootcNodePoolStatus) bool {
	for _, f := range st.Failures {
		if !current(st, f, st.TargetImage) {
			return true
		}
	}
	return false
}

// DropStaleFailures drops the failures of images other than the pool's
// target from its status.failures, and reports whether there were any. The
// node reconciler does it when it takes up a slot for the target, which
// the slot table it read names, so the target it compares with is current.
func DropStaleFailures(st *v1alpha1.BootcNodePoolStatus) bool {
	kept := CurrentFailures(st, st.TargetImage)
	if len(kept) == len(st.Failures) {
		return false
	}
	st.Failures = kept
	return true
}

// CurrentFailures returns copies of the failures of image recorded in the
// current rollout: not before status.targetSince (failures of an earlier
// rollout of the same image, before a revert, do not count).
func CurrentFailures(st *v1alpha1.BootcNodePoolStatus, image string) []v1alpha1.NodeFailure {
	var out []v1alpha1.NodeFailure
	for _, f := range st.Failures {
		if current(st, f, image) {
			out = append(out, f)
		}
	}
	return out
}

func current(st *v1alpha1.BootcNodePoolStatus, f v1alpha1.NodeFailure, image string) bool {
	return f.Image == image && (st.TargetSince == nil || !f.Time.Before(st.TargetSince))
}

// FailureOf returns the failure of node recorded on the pool in the
// current rollout of image (CurrentFailures), or nil.
func FailureOf(st *v1alpha1.BootcNodePoolStatus, node, image string) *v1alpha1.NodeFailure {
	for i := range st.Failures {
		if f := &st.Failures[i]; f.Node == node && current(st, *f, image) {
			return f
		}
	}
	return nil
}

// Failed lists the failures of target, one per node, in the order of the
// lists given: for example those of the halt, those recorded on the pool,
// then those seen on live records and not recorded yet.
func Failed(target string, lists ...[]v1alpha1.NodeFailure) []v1alpha1.NodeFailure {
	var failed []v1alpha1.NodeFailure
	for _, fs := range lists {
		for _, f := range fs {
			if f.Image == target && !slices.ContainsFunc(failed, func(g v1alpha1.NodeFailure) bool { return g.Node == f.Node }) {
				failed = append(failed, f)
			}
		}
	}
	return failed
}

// SettleHalt brings the pool's halt up to date for its target: a halt of
// another image (spec.image changed) moves to lastHalt, and a halt is set
// when maxFailures nodes failed the target, counting the failures recorded
// on the pool and those seen on live records (live) that are not recorded
// yet. It returns whether the pool is halted for target. It writes only
// status.halt and status.lastHalt (the pool reconciler's): a halt, once
// set, lasts until the target changes, whatever happens to the records.
func SettleHalt(st *v1alpha1.BootcNodePoolStatus, target string, live []v1alpha1.NodeFailure, maxFailures int) bool {
	if target == "" {
		return false
	}
	if st.Halt != nil && st.Halt.Image != target {
		st.LastHalt, st.Halt = st.Halt, nil
	}
	if st.Halt != nil {
		return true
	}
	failed := Failed(target, CurrentFailures(st, target), live)
	if len(failed) < maxFailures || len(failed) == 0 {
		return false
	}
	since := failed[0].Time
	for _, f := range failed {
		if since.Before(&f.Time) {
			since = f.Time
		}
	}
	st.Halt = &v1alpha1.HaltRecord{Image: target, Since: since, Failures: failed}
	return true
}

// FailureLines describes failures for a condition message.
func FailureLines(fs []v1alpha1.NodeFailure) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s (%s: %s)", f.Node, f.Reason, f.Message))
	}
	return out
}

// HaltedFor reports whether the pool is halted for image: its halt names
// image, or maxFailures nodes have failed image (the pool's next pass
// writes that halt; a node reconciler that reads the pool before then
// must not take the image further).
func HaltedFor(p *v1alpha1.BootcNodePool, image string) bool {
	if p == nil || image == "" {
		return false
	}
	if p.Status.Halt != nil && p.Status.Halt.Image == image {
		return true
	}
	n := len(CurrentFailures(&p.Status, image))
	return n > 0 && n >= MaxFailuresOf(p)
}

// FailureAt builds the failure record of node for image.
func FailureAt(node, image, reason, msg string, now time.Time) v1alpha1.NodeFailure {
	if len(msg) > 2048 {
		msg = msg[:2045] + "..."
	}
	return v1alpha1.NodeFailure{Node: node, Image: image, Reason: reason, Message: msg, Time: metav1.NewTime(now)}
}
