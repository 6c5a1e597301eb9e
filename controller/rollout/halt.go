package rollout

import (
	"fmt"
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

// NoteFailure adds f to the pool status (one entry per node and image; a
// repeat updates nothing) and sets status.halt when f's image is the
// target and maxFailures nodes have now failed it. It reports whether the
// status changed.
func NoteFailure(st *v1alpha1.BootcNodePoolStatus, f v1alpha1.NodeFailure, maxFailures int) bool {
	if f.Image == "" || f.Image != st.TargetImage {
		return false // an old target's failure: the BootcNode keeps it
	}
	changed := false
	found := false
	for _, g := range st.Failures {
		if g.Node == f.Node && g.Image == f.Image {
			found = true
			break
		}
	}
	if !found {
		st.Failures = append(st.Failures, f)
		changed = true
	}
	if st.Halt == nil {
		if failed := FailuresOf(st.Failures, f.Image); len(failed) >= maxFailures {
			st.Halt = &v1alpha1.HaltRecord{Image: f.Image, Since: f.Time, Failures: failed}
			changed = true
		}
	}
	return changed
}

// FailuresOf returns copies of the failures of image.
func FailuresOf(fs []v1alpha1.NodeFailure, image string) []v1alpha1.NodeFailure {
	var out []v1alpha1.NodeFailure
	for _, f := range fs {
		if f.Image == image {
			out = append(out, f)
		}
	}
	return out
}

// SettleHalt brings the durable failure record of a pool up to date for
// its target: a halt of another image (spec.image changed) moves to
// lastHalt, failures of other images are dropped, the failures seen on
// live records (live) are added, and a halt is set when maxFailures nodes
// failed the target. It returns whether the pool is halted for target.
// Nothing here is derived from live records alone: a halt, once set,
// lasts until the target changes, whatever happens to the records.
func SettleHalt(st *v1alpha1.BootcNodePoolStatus, target string, live []v1alpha1.NodeFailure, maxFailures int) bool {
	if target == "" {
		return false
	}
	if st.Halt != nil && st.Halt.Image != target {
		st.LastHalt, st.Halt = st.Halt, nil
	}
	kept := st.Failures[:0:0]
	for _, f := range st.Failures {
		if f.Image == target {
			kept = append(kept, f)
		}
	}
	st.Failures = kept
	if len(st.Failures) == 0 {
		st.Failures = nil
	}
	for _, f := range live {
		NoteFailure(st, f, maxFailures)
	}
	if st.Halt == nil && len(st.Failures) >= maxFailures {
		st.Halt = &v1alpha1.HaltRecord{Image: target, Since: st.Failures[len(st.Failures)-1].Time, Failures: FailuresOf(st.Failures, target)}
	}
	return st.Halt != nil && st.Halt.Image == target
}

// FailureLines describes failures for a condition message.
func FailureLines(fs []v1alpha1.NodeFailure) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s (%s: %s)", f.Node, f.Reason, f.Message))
	}
	return out
}

// HaltedFor reports whether the pool is halted for image.
func HaltedFor(p *v1alpha1.BootcNodePool, image string) bool {
	return p != nil && p.Status.Halt != nil && image != "" && p.Status.Halt.Image == image
}

// FailureAt builds the failure record of node for image.
func FailureAt(node, image, reason, msg string, now time.Time) v1alpha1.NodeFailure {
	if len(msg) > 2048 {
		msg = msg[:2045] + "..."
	}
	return v1alpha1.NodeFailure{Node: node, Image: image, Reason: reason, Message: msg, Time: metav1.NewTime(now)}
}
