package rollout

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

func TestSettleHalt(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := func(node, image string) v1alpha1.NodeFailure {
		return v1alpha1.NodeFailure{Node: node, Image: image, Reason: "BootFailed", Time: metav1.NewTime(t0)}
	}
	halt := func(image string, fs ...v1alpha1.NodeFailure) *v1alpha1.HaltRecord {
		return &v1alpha1.HaltRecord{Image: image, Since: metav1.NewTime(t0), Failures: fs}
	}
	for _, tc := range []struct {
		name        string
		st          v1alpha1.BootcNodePoolStatus
		target      string
		live        []v1alpha1.NodeFailure
		maxFailures int
		halted      bool
		halt, last  *v1alpha1.HaltRecord
		failures    int
	}{
		{name: "no failures", target: "B", maxFailures: 1},
		// The pool writes the halt only; status.failures is the node
		// reconciler's, so a live failure counts but is not added.
		{name: "a live failure halts", target: "B", live: []v1alpha1.NodeFailure{fail("n1", "B")}, maxFailures: 1,
			halted: true, halt: halt("B", fail("n1", "B"))},
		{name: "below maxFailures", target: "B", live: []v1alpha1.NodeFailure{fail("n1", "B")}, maxFailures: 2},
		{name: "a recorded and a live failure halt together", target: "B", st: v1alpha1.BootcNodePoolStatus{Failures: []v1alpha1.NodeFailure{fail("n1", "B")}},
			live: []v1alpha1.NodeFailure{fail("n2", "B")}, maxFailures: 2, halted: true, halt: halt("B", fail("n1", "B"), fail("n2", "B")), failures: 1},
		{name: "the same node twice counts once", target: "B", st: v1alpha1.BootcNodePoolStatus{Failures: []v1alpha1.NodeFailure{fail("n1", "B")}},
			live: []v1alpha1.NodeFailure{fail("n1", "B")}, maxFailures: 2, failures: 1},
		{name: "a recorded halt outlives its records", target: "B",
			st:          v1alpha1.BootcNodePoolStatus{Failures: []v1alpha1.NodeFailure{fail("n1", "B")}, Halt: halt("B", fail("n1", "B"))},
			maxFailures: 1, halted: true, halt: halt("B", fail("n1", "B")), failures: 1},
		{name: "a recorded failure halts without its record", target: "B",
			st:          v1alpha1.BootcNodePoolStatus{Failures: []v1alpha1.NodeFailure{fail("n1", "B")}},
			maxFailures: 1, halted: true, halt: halt("B", fail("n1", "B")), failures: 1},
		{name: "a new target lifts the halt and keeps it", target: "C",
			st:          v1alpha1.BootcNodePoolStatus{Failures: []v1alpha1.NodeFailure{fail("n1", "B")}, Halt: halt("B", fail("n1", "B"))},
			maxFailures: 1, last: halt("B", fail("n1", "B")), failures: 1},
		{name: "failures of an old target do not halt the new one", target: "C",
			st:          v1alpha1.BootcNodePoolStatus{Failures: []v1alpha1.NodeFailure{fail("n1", "B")}},
			maxFailures: 1, failures: 1},
		{name: "a live failure of an old target does not halt the new one", target: "C",
			live: []v1alpha1.NodeFailure{fail("n1", "B")}, maxFailures: 1},
		{name: "no target: nothing decided", target: "",
			st:          v1alpha1.BootcNodePoolStatus{Halt: halt("B", fail("n1", "B"))},
			maxFailures: 1, halt: halt("B", fail("n1", "B"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			st.TargetImage = tc.target
			got := SettleHalt(&st, tc.target, tc.live, tc.maxFailures)
			if got != tc.halted {
				t.Errorf("halted = %v, want %v", got, tc.halted)
			}
			if !equalHalt(st.Halt, tc.halt) {
				t.Errorf("halt = %+v, want %+v", st.Halt, tc.halt)
			}
			if !equalHalt(st.LastHalt, tc.last) {
				t.Errorf("lastHalt = %+v, want %+v", st.LastHalt, tc.last)
			}
			if len(st.Failures) != tc.failures {
				t.Errorf("failures = %+v, want %d", st.Failures, tc.failures)
			}
		})
	}
}

func equalHalt(a, b *v1alpha1.HaltRecord) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Image != b.Image || len(a.Failures) != len(b.Failures) {
		return false
	}
	for i := range a.Failures {
		if a.Failures[i].Node != b.Failures[i].Node || a.Failures[i].Image != b.Failures[i].Image {
			return false
		}
	}
	return true
}

func TestNoteFailure(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pool := &v1alpha1.BootcNodePool{Status: v1alpha1.BootcNodePoolStatus{TargetImage: "B"}}
	pool.Spec.FailurePolicy.MaxFailures = ptr.To(int32(2))
	st := &pool.Status
	f := func(node, image string) v1alpha1.NodeFailure {
		return v1alpha1.NodeFailure{Node: node, Image: image, Reason: "HealthTimeout", Time: now}
	}
	if NoteFailure(st, f("n1", "A")) {
		t.Errorf("a failure of an old target changed the status: %+v", st)
	}
	if !NoteFailure(st, f("n1", "B")) || len(st.Failures) != 1 || st.Halt != nil || HaltedFor(pool, "B") {
		t.Fatalf("first failure: %+v", st)
	}
	if NoteFailure(st, f("n1", "B")) {
		t.Errorf("a repeated failure changed the status: %+v", st)
	}
	// The second failure halts at once, before the pool writes status.halt.
	if !NoteFailure(st, f("n2", "B")) || st.Halt != nil || !HaltedFor(pool, "B") || HaltedFor(pool, "A") {
		t.Fatalf("maxFailures reached: %+v", st)
	}
	if !SettleHalt(st, "B", nil, 2) || st.Halt == nil || len(st.Halt.Failures) != 2 {
		t.Fatalf("the pool did not record the halt: %+v", st)
	}
	halt := st.Halt
	if NoteFailure(st, f("n3", "B")); st.Halt != halt || len(st.Halt.Failures) != 2 || len(st.Failures) != 3 {
		t.Errorf("a later failure rewrote the halt: %+v", st)
	}
	// A new target: a slot take-up (DropStaleFailures) or the next
	// failure drops the old target's entries.
	st.TargetImage = "C"
	old := st.DeepCopy()
	if !HasStaleFailures(old) || !DropStaleFailures(old) || len(old.Failures) != 0 || HasStaleFailures(old) || DropStaleFailures(old) {
		t.Errorf("stale failures after DropStaleFailures: %+v", old.Failures)
	}
	if !NoteFailure(st, f("n1", "C")) || len(st.Failures) != 1 || st.Failures[0].Image != "C" {
		t.Errorf("failures of the old target kept: %+v", st.Failures)
	}
	// Reverted to B before any take-up for C dropped B's failures: they
	// are older than targetSince and count no more.
	st = &pool.Status
	*st = v1alpha1.BootcNodePoolStatus{TargetImage: "B", Failures: []v1alpha1.NodeFailure{f("n1", "B"), f("n2", "B")}}
	if !HaltedFor(pool, "B") {
		t.Fatalf("two failures of B, maxFailures 2: not halted")
	}
	st.TargetSince = &metav1.Time{Time: now.Add(time.Minute)}
	if HaltedFor(pool, "B") || SettleHalt(st, "B", nil, 2) || len(CurrentFailures(st, "B")) != 0 {
		t.Errorf("failures from before the revert count: %+v", st)
	}
	if !NoteFailure(st, v1alpha1.NodeFailure{Node: "n3", Image: "B", Reason: "BootFailed", Time: metav1.NewTime(now.Add(2 * time.Minute))}) || len(st.Failures) != 1 || st.Failures[0].Node != "n3" {
		t.Errorf("a failure after the revert: %+v", st.Failures)
	}
}

func TestStalled(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const target, digest = "repo@sha256:bb", "sha256:bb"
	ready := func(ok bool) *corev1.Node {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}}}
	}
	row := func(name string, phase v1alpha1.NodePhase, booted, failed string, up bool, mid bool) Row {
		bn := &v1alpha1.BootcNode{}
		bn.Status.Phase = phase
		bn.Status.Rollout.FailedImage = failed
		bn.Status.Rollout.PhaseSince = &metav1.Time{Time: t0}
		bn.Status.Daemon.BootID = "b1"
		if mid {
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: target, BootID: "b1"}
		}
		if booted != "" {
			bn.Status.Booted = &v1alpha1.HostImage{Digest: booted}
		}
		r := Row{Name: name}
		r.SetNode(ready(up))
		r.SetRecord(bn, func(s string) string { return s })
		return r
	}
	updated := row("a", v1alpha1.PhaseUpdated, digest, "", true, false)
	for _, tc := range []struct {
		name  string
		rows  []Row
		want  bool
		wait  time.Duration
		after time.Duration
		// recorded names a node the pool's failures list for the target.
		recorded string
	}{
		{name: "all updated", rows: []Row{updated}},
		{name: "the rest rolled back", rows: []Row{updated, row("b", v1alpha1.PhaseRolledBack, "sha256:aa", target, true, false)}, want: true},
		{name: "the rest failed down on the target", rows: []Row{updated, row("b", v1alpha1.PhaseFailed, digest, target, false, false)}, want: true},
		{name: "a node still to roll", rows: []Row{row("b", v1alpha1.PhaseRolledBack, "sha256:aa", target, true, false), row("c", v1alpha1.PhaseStaged, "sha256:aa", "", true, false)}},
		{name: "failed while still rebooting: waits", rows: []Row{updated, row("b", v1alpha1.PhaseFailed, "sha256:aa", target, false, true)}, after: time.Minute, wait: 4 * time.Minute},
		{name: "failed while still rebooting: healthTimeout later", rows: []Row{updated, row("b", v1alpha1.PhaseFailed, "sha256:aa", target, false, true)}, after: 5 * time.Minute, want: true},
		{name: "failed on target, Ready again: updated", rows: []Row{updated, row("b", v1alpha1.PhaseFailed, digest, target, true, false)}},
		// A record made again after the pool recorded its node's failure
		// (explorer seed 102121 of pool-edited-mid-rollout).
		{name: "a new record of a node the pool recorded failing, down", rows: []Row{updated, row("b", v1alpha1.PhasePending, "", "", false, false)}, recorded: "b", want: true},
		{name: "a new record of a node the pool recorded failing, Ready", rows: []Row{updated, row("b", v1alpha1.PhasePending, "", "", true, false)}, recorded: "b"},
		{name: "a new record, down, no failure recorded", rows: []Row{updated, row("b", v1alpha1.PhasePending, "", "", false, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recorded map[string]bool
			if tc.recorded != "" {
				recorded = map[string]bool{tc.recorded: true}
			}
			got, wait := Stalled(tc.rows, target, digest, 5*time.Minute, t0.Add(tc.after), recorded)
			if got != tc.want || wait != tc.wait {
				t.Errorf("stalled = %v, %s; want %v, %s", got, wait, tc.want, tc.wait)
			}
		})
	}
}
