package rollout

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A pool whose drains PodDisruptionBudgets hold up says so in Degraded
// (DrainsBlocked), naming the nodes and what their records say; a drain
// under way or a node that waits for anything else is no such report.
func TestDrainsBlockedIsReported(t *testing.T) {
	row := func(name string, phase v1alpha1.NodePhase, reason, msg string) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		bn.Status.Phase = phase
		bn.Status.Rollout.Reason, bn.Status.Rollout.Message = reason, msg
		return derived(Row{Name: name, Record: bn, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, Facts: Facts{Phase: phase}})
	}
	retry := row("e", v1alpha1.PhaseDraining, "SlotGranted", "reboot slot granted")
	retry.Record.Status.Rollout.Failures = 2
	retry = derived(retry)
	rows := []Row{
		row("a", v1alpha1.PhaseDraining, "DrainBlocked", "eviction refused by a PodDisruptionBudget: default/web-1"),
		row("b", v1alpha1.PhasePending, "DrainTimeout", "drain did not finish in 10m0s"),
		row("c", v1alpha1.PhaseDraining, "SlotGranted", "reboot slot 1/2"),
		row("d", v1alpha1.PhaseStaged, "", ""),
		retry,
	}
	got := DrainsBlocked(rows)
	if len(got) != 3 || !strings.HasPrefix(got[0], "a (eviction refused") || !strings.HasPrefix(got[1], "b (drain did not finish") ||
		!strings.HasPrefix(got[2], "e (draining again after 2 drain timeout(s)") {
		t.Fatalf("drainsBlocked = %q, want a and b with their messages, and e retrying", got)
	}

	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	p := &Pass{Pool: pool, Now: time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)}
	p.conditions(nil, nil, nil, got, false, true)
	c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDrainsBlocked || !strings.Contains(c.Message, "a (eviction refused") {
		t.Errorf("Degraded = %+v, want True/DrainsBlocked naming node a", c)
	}
	// With failed nodes too the drains come first: they hold the rollout
	// up now; the failures follow in the message.
	p.conditions(nil, nil, []string{"f (HealthTimeout)"}, got, false, true)
	if c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Reason != v1alpha1.ReasonDrainsBlocked || !strings.Contains(c.Message, "; failed: f (HealthTimeout)") {
		t.Errorf("Degraded = %+v with failed nodes and blocked drains, want DrainsBlocked naming the failure too", c)
	}
	p.conditions(nil, nil, nil, DrainsBlocked(rows[2:4]), false, true)
	if c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v with no drain held up, want False", c)
	}
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// A record whose node left the pool keeps its slot while the grant is
// fresh and the pool's cache does not show it on the record yet (issue 11,
// node-relabelled-out-mid-drain.max-unavailable.seed2008: the record was
// deleted, its slot given to the next node while the node reconciler
// drained the first), but not past GrantSettle.
func TestSlotGrantedToALeavingNode(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	img := "repo@sha256:" + zeros(64)
	bn.Spec.DesiredImage = img
	bn.Status.Staged = &v1alpha1.HostImage{Digest: "sha256:" + zeros(64)} // staged, as the pool reads the report
	bn.Status.Rollout.TargetImage = img
	bn.Status.Rollout.PhaseSince = &metav1.Time{Time: now.Add(-time.Hour)}
	slot := func(node string, ago time.Duration) []v1alpha1.Slot {
		return []v1alpha1.Slot{{Node: node, Image: img, Since: metav1.NewTime(now.Add(-ago))}}
	}
	for _, c := range []struct {
		name  string
		slots []v1alpha1.Slot
		want  bool
	}{
		{"fresh grant", slot("a", 10*time.Second), true},
		{"grant of another node", slot("b", 10*time.Second), false},
		{"grant older than GrantSettle", slot("a", GrantSettle+time.Second), false},
	} {
		if got := SlotGranted(c.slots, bn, now); got != c.want {
			t.Errorf("%s: slotGranted = %v, want %v", c.name, got, c.want)
		}
	}
	// A record that entered its slot and left it again (its phase moved
	// after the grant) was told: the slot is not kept for it.
	left := bn.DeepCopy()
	left.Status.Rollout.PhaseSince = &metav1.Time{Time: now.Add(-5 * time.Second)}
	if SlotGranted(slot("a", 10*time.Second), left, now) {
		t.Error("a record whose phase moved after the grant: slotGranted = true, want false")
	}
}

// TestReleasedDown: a slot stays held while its node is down after the
// record that held it was deleted (issue 11,
// bootcnode-deleted-mid-reboot.max-unavailable.seed51), and only then.
func TestReleasedDown(t *testing.T) {
	grant := time.Date(2026, 1, 5, 0, 6, 43, 0, time.UTC)
	slot := v1alpha1.Slot{Node: "n", Since: metav1.NewTime(grant)}
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
		return n
	}
	record := func(created time.Time, phase v1alpha1.NodePhase, deleting bool) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", CreationTimestamp: metav1.NewTime(created)}}
		bn.Status.Phase = phase
		if deleting {
			bn.DeletionTimestamp = &metav1.Time{Time: grant.Add(time.Minute)}
		}
		return bn
	}
	before, after := grant.Add(-time.Hour), grant.Add(15*time.Minute)
	cases := []struct {
		name string
		node *corev1.Node
		bn   *v1alpha1.BootcNode
		want bool
	}{
		{"new record, node down", node(corev1.ConditionUnknown), record(after, v1alpha1.PhasePending, false), true},
		{"no record, node down", node(corev1.ConditionFalse), nil, true},
		{"released record being deleted, node down", node(corev1.ConditionFalse), record(before, v1alpha1.PhasePending, true), true},
		{"new record, node Ready again", node(corev1.ConditionTrue), record(after, v1alpha1.PhasePending, false), false},
		{"the same record, node down", node(corev1.ConditionFalse), record(before, v1alpha1.PhaseUpdated, false), false},
		{"new record with a verdict", node(corev1.ConditionFalse), record(after, v1alpha1.PhaseFailed, false), false},
		{"not a member", nil, record(after, v1alpha1.PhasePending, false), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := &Row{Name: "n"}
			row.SetNode(c.node)
			row.SetRecord(c.bn, func(s string) string { return s })
			if got := ReleasedDown(row, slot); got != c.want {
				t.Fatalf("releasedDown = %v, want %v", got, c.want)
			}
		})
	}
}

// A grant is the record's to take up only if it was made to that record
// (the slot's UID): a record made again after a deletion stands for the
// same node but must not take the old record's grant from a pool status
// that still lists it (explorer seed 70283 of node-churn: the new record
// took it up from a stale cache and the node rebooted after the pool had
// dropped the slot). A slot without a UID (given before the field) is
// any record's, as before. Clock-independent: the slot's time is the
// controller's, a record's creation the API server's (a first fix by
// creation time failed TestMaintenanceWindowWithInjectedClock).
func TestGrantPendingOnlyForTheGrantedRecord(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 6, 38, 0, time.UTC)
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	record := func(uid string) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "kp-2", UID: types.UID(uid), CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))}}
		bn.Status.Phase = v1alpha1.PhaseStaged
		bn.Status.Rollout.TargetImage = img
		bn.Status.Staged = &v1alpha1.HostImage{Image: img, Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}
		return bn
	}
	slot := v1alpha1.Slot{Node: "kp-2", Image: img, Since: metav1.NewTime(t0), UID: "uid-1"}
	if !GrantPending(record("uid-1"), slot) {
		t.Error("the record the grant was made to (created later by the API server's clock) does not see it pending")
	}
	if GrantPending(record("uid-2"), slot) {
		t.Error("a record made again under the node's name takes up its predecessor's grant")
	}
	slot.UID = ""
	if !GrantPending(record("uid-2"), slot) {
		t.Error("a slot without a UID is not pending for the node's record")
	}
}

// TestGrantPendingAfterPartTakeUp: a take-up that recorded the grant and
// the cordon (status.rollout.slotGrantedAt, cordoned) and stopped before
// the Node was written or the record entered its slot is still pending, so
// the next pass takes it up again; a grant taken up and left (the cordon
// given back) in the same second is not (explorer seed 116144 of
// cluster-crd-install-mid-rollout: read as left, the part take-up held
// the slot and the node's protection until GrantSettle).
func TestGrantPendingAfterPartTakeUp(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 1, 51, 0, time.UTC)
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "kp-0", UID: "uid-1"}}
	bn.Status.Phase = v1alpha1.PhasePending
	ro := &bn.Status.Rollout
	ro.TargetImage = img
	ro.PhaseSince = &metav1.Time{Time: t0.Add(-3 * time.Second)}
	bn.Status.Staged = &v1alpha1.HostImage{Image: img, Digest: "sha256:2222222222222222222222222222222222222222222222222222222222222222"}
	slot := v1alpha1.Slot{Node: "kp-0", Image: img, Since: metav1.NewTime(t0), UID: "uid-1"}
	ro.SlotGrantedAt, ro.Cordoned, ro.DrainStartedAt = slot.Since.DeepCopy(), true, &metav1.Time{Time: t0}
	if !GrantPending(bn, slot) {
		t.Error("a take-up recorded and stopped part way is not pending: it is never finished")
	}
	ro.Cordoned, ro.DrainStartedAt = false, nil
	if GrantPending(bn, slot) {
		t.Error("a grant taken up and left in the same second is pending again")
	}
}

// TestNoSlotForANodeThatFailedEarlier: a node whose failure of the target
// the pool recorded in this rollout (status.failures, at or after
// targetSince) is no slot candidate, whatever its record says: a record
// made again after the failed one was deleted does not know, and its
// daemon has no reboot record to refuse a second boot of the image
// (explorer seed 118173 of bootcnode-deleted-mid-reboot). A failure from
// before targetSince (an earlier rollout of the image) does not count.
func TestNoSlotForANodeThatFailedEarlier(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 9, 48, 0, time.UTC)
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	const digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Status.TargetImage = img
	pool.Status.TargetSince = &metav1.Time{Time: t0.Add(-10 * time.Minute)}
	pool.Status.Failures = []v1alpha1.NodeFailure{{Node: "w-2", Image: img, Reason: "BootFailed", Time: metav1.Time{Time: t0}}}
	row := func(name string) *Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return &Row{Name: name, Record: bn, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			Facts: Facts{Phase: v1alpha1.PhaseStaged, Desired: img, Staged: digest, Target: img}}
	}
	p := &Pass{Pool: pool, Target: img, TargetDigest: digest, Now: t0.Add(time.Minute)}
	if _, ok := p.candidate(row("w-1")); !ok {
		t.Fatal("a staged node with no failure is no candidate")
	}
	if _, ok := p.candidate(row("w-2")); ok {
		t.Error("a node whose failure of the target is on the pool is a slot candidate")
	}
	if f := FailureOf(&pool.Status, "w-2", img); f == nil || f.Reason != "BootFailed" {
		t.Errorf("FailureOf = %+v, want w-2's BootFailed", f)
	}
	pool.Status.TargetSince = &metav1.Time{Time: t0.Add(time.Second)}
	if _, ok := p.candidate(row("w-2")); !ok || FailureOf(&pool.Status, "w-2", img) != nil {
		t.Error("a failure of an earlier rollout of the image keeps the node out")
	}
}

// TestSlotsOnlyInAWindow: outside the pool's maintenance windows Slots
// offers no free slot, and gives no takeover a fresh grant either (a
// grant outside a window is what grant-in-window judges); the planted
// testOnly.ignoreWindows offers them anyway.
func TestSlotsOnlyInAWindow(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 5, 0, 0, time.UTC)
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	const digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.Windows = []v1alpha1.MaintenanceWindow{{Start: "00:10", Duration: metav1.Duration{Duration: 25 * time.Minute}}}
	pool.Status.TargetImage = img
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	rows := []Row{{Name: "a", Record: bn, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		Facts: Facts{Phase: v1alpha1.PhaseStaged, Desired: img, Staged: digest, Target: img, Ready: true}}}
	for _, tc := range []struct {
		name   string
		at     time.Time
		to     TestOnly
		open   bool
		wantOK bool
	}{
		{"before the window", now, TestOnly{}, false, false},
		{"in the window", now.Add(5 * time.Minute), TestOnly{}, true, true},
		{"at its end", now.Add(30 * time.Minute), TestOnly{}, false, false},
		{"planted ignoreWindows, before the window", now, TestOnly{IgnoreWindows: true}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pass{Pool: pool.DeepCopy(), Rows: rows, Members: 1, Target: img, TargetDigest: digest, Now: tc.at, TestOnly: tc.to}
			if open := p.Open(); open != tc.open {
				t.Fatalf("Open() = %v, want %v", open, tc.open)
			}
			_, _, free, next, err := p.Slots(false, true, p.Open(), false)
			if err != nil {
				t.Fatal(err)
			}
			name, ok := next()
			if got := free > 0 && ok && name == "a"; got != tc.wantOK {
				t.Errorf("free %d, next %q %v: a slot offered = %v, want %v", free, name, ok, got, tc.wantOK)
			}
		})
	}
}
