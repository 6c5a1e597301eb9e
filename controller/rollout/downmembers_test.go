package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestDownMembers: a member whose Node is not Ready and whose
// daemon never reported to its record (a node left down in a reboot an
// earlier pool ordered, its record made again) counts against
// maxUnavailable at once, so no other node gets the pool's only slot; the
// pool says Degraded/NodesUnavailable, naming it, once DaemonSilence has
// passed, and wakes for that. A Ready member, a member whose daemon
// reported, and one joining on an old image (os-not-ready) do not count.
// A member down for DaemonSilence that reported, is not on the target and
// is not done with it is named too (it holds the pool up); a Failed one
// is not (NodesFailed names it). With failures as well, the down members
// come first.
func TestDownMembers(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
	}
	staged := func(name string) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		bn.Spec.DesiredImage = img("B")
		bn.Status.Booted = &v1alpha1.HostImage{Image: img("A"), Digest: dig("A")}
		bn.Status.Staged = &v1alpha1.HostImage{Image: img("B"), Digest: dig("B")}
		bn.Status.Daemon.Phase, bn.Status.Daemon.BootID = v1alpha1.DaemonIdle, "b0"
		bn.Status.Phase = v1alpha1.PhaseStaged
		bn.Status.Rollout.TargetImage = img("B")
		return derived(Row{Name: name, Record: bn, Node: node(name, corev1.ConditionTrue), Facts: Facts{Phase: v1alpha1.PhaseStaged, Desired: img("B"), Target: img("B"), Booted: dig("A"), Staged: dig("B")}})
	}
	silent := func(name string, created time.Duration, ready corev1.ConditionStatus) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-created))}}
		return derived(Row{Name: name, Record: bn, Node: node(name, ready), Facts: Facts{Phase: v1alpha1.PhasePending}})
	}
	free := func(rows []Row) (int, *Pass) {
		one := intstr.FromInt32(1)
		pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
		pool.Spec.Rollout.MaxUnavailable = &one
		p := &Pass{Pool: pool, Rows: rows, Members: len(rows), Target: img("B"), TargetDigest: dig("B"), Now: now}
		_, _, n, _, err := p.Slots(false, true, true, false)
		if err != nil {
			t.Fatal(err)
		}
		return n, p
	}
	if n, _ := free([]Row{silent("a", time.Second, corev1.ConditionTrue), staged("b")}); n != 1 {
		t.Errorf("a Ready member that has not reported yet: %d free slot(s), want 1", n)
	}
	if n, _ := free([]Row{silent("a", time.Second, corev1.ConditionUnknown), staged("b")}); n != 0 {
		t.Errorf("a member down with no report: %d free slot(s), want 0", n)
	}
	joining := silent("a", time.Second, corev1.ConditionFalse)
	joining.OSNotReady = true
	if n, _ := free([]Row{joining, staged("b")}); n != 1 {
		t.Errorf("a member joining on an old image: %d free slot(s), want 1", n)
	}
	reported := staged("a")
	reported.Node = node("a", corev1.ConditionFalse)
	reported = derived(reported)
	if n, _ := free([]Row{reported, staged("b")}); n != 1 {
		t.Errorf("a member down whose daemon reported it runs another image: %d free slot(s), want 1", n)
	}

	// The condition: not before DaemonSilence (the pass wakes for it), then
	// Degraded/NodesUnavailable naming the node and its Ready condition.
	_, p := free([]Row{silent("a", DaemonSilence-time.Minute, corev1.ConditionUnknown), staged("b")})
	p.conditions(nil, nil, nil, nil, false, true)
	if c := findCondition(p.Pool.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v before DaemonSilence, want False", c)
	}
	if p.Wake != time.Minute {
		t.Errorf("wake in %s, want 1m (when DaemonSilence passes)", p.Wake)
	}
	behind := staged("c")
	behind.Node = node("c", corev1.ConditionFalse)
	behind.Phase = v1alpha1.PhasePending
	failed := staged("d")
	failed.Node = node("d", corev1.ConditionFalse)
	failed.Phase = v1alpha1.PhaseFailed
	behind, failed = derived(behind), derived(failed)
	_, p = free([]Row{silent("a", DaemonSilence, corev1.ConditionUnknown), staged("b"), behind, failed})
	p.conditions(nil, nil, nil, nil, false, true)
	c := findCondition(p.Pool.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonNodesUnavailable || !strings.Contains(c.Message, "a: Ready=Unknown since 2026-01-05T09:00:00Z, its daemon has not reported") {
		t.Errorf("Degraded = %+v, want True/NodesUnavailable naming a", c)
	}
	if c == nil || !strings.Contains(c.Message, "c: Ready=False since 2026-01-05T09:00:00Z, not on the target") || strings.Contains(c.Message, "d:") {
		t.Errorf("Degraded = %+v, want c named as down and behind, not d (failed)", c)
	}

	// With failures short of maxFailures too, the down member is what
	// holds the rollout up: NodesUnavailable, the failures after it
	// (explorer seed 106317 of boot-failure-modes said NodesFailed for
	// hours over a node that never came back).
	p.conditions(nil, nil, []string{"d (BootFailed: came back on A)"}, nil, false, true)
	c = findCondition(p.Pool.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Reason != v1alpha1.ReasonNodesUnavailable || !strings.Contains(c.Message, "a: Ready=Unknown") || !strings.Contains(c.Message, "; failed: d (BootFailed: came back on A)") {
		t.Errorf("Degraded with a failure and a down member = %+v, want NodesUnavailable naming a, then the failure", c)
	}
}

// TestDirectSkipsBackingOffStagings: with maxStaging 1, a node directed
// to the target whose staging failed and backs off (Degraded: its disk
// stays full, say) holds no staging place, so the next node is directed;
// one that stages holds it.
func TestDirectSkipsBackingOffStagings(t *testing.T) {
	one := int32(1)
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	pool.Spec.Rollout.MaxStaging = &one
	row := func(name string, phase v1alpha1.NodePhase, desired string) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		return Row{Name: name, Record: bn, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			Facts: Facts{Phase: phase, Desired: desired, Booted: dig("A")}}
	}
	direct := func(first v1alpha1.NodePhase) []string {
		p := &Pass{Pool: pool, Rows: []Row{row("a", first, img("B")), row("b", v1alpha1.PhasePending, img("A"))}, Members: 2, Target: img("B"), TargetDigest: dig("B")}
		var out []string
		for _, r := range p.Direct() {
			out = append(out, r.Name)
		}
		return out
	}
	if got := direct(v1alpha1.PhasePending); len(got) != 0 {
		t.Errorf("a staging: directed %v, want none (maxStaging 1 is taken)", got)
	}
	if got := direct(v1alpha1.PhaseDegraded); len(got) != 1 || got[0] != "b" {
		t.Errorf("a backing off: directed %v, want [b]", got)
	}
	// A record whose Node left the pool is not directed (its withdrawn
	// boot order stays until its reboot is over).
	left := row("c", v1alpha1.PhaseDraining, img("A"))
	left.Node = nil
	p := &Pass{Pool: pool, Rows: []Row{left}, Members: 0, Target: img("B"), TargetDigest: dig("B")}
	if got := p.Direct(); len(got) != 0 {
		t.Errorf("a record with no member Node: directed %v, want none", got)
	}
}

// TestDirectSkipsDownMembers: with maxStaging 1, a member directed to the
// target and not staged on it whose Node has not been Ready for
// DaemonSilence or more (down: its daemon does not run, it pulls nothing)
// holds no staging place, so the next node is directed (explorer seed
// 176437 of pool-edited-mid-rollout: workers-3, down since a reboot 20m
// in, held the only place for good and workers-10 was never directed). One
// NotReady for less (a kubelet restart mid-staging) keeps its place and
// the pass wakes when DaemonSilence has passed; so does a Ready one, and
// one joining on an old image (os-not-ready).
func TestDirectSkipsDownMembers(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	one := int32(1)
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	pool.Spec.Rollout.MaxStaging = &one
	row := func(name string, ready corev1.ConditionStatus, since time.Duration, desired string) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-since))}}}}
		return derived(Row{Name: name, Record: bn, Node: n, Facts: Facts{Phase: v1alpha1.PhasePending, Desired: desired, Booted: dig("A")}})
	}
	direct := func(first Row) ([]string, time.Duration) {
		p := &Pass{Pool: pool, Rows: []Row{first, row("b", corev1.ConditionTrue, time.Hour, img("A"))}, Members: 2, Target: img("B"), TargetDigest: dig("B"), Now: now}
		var out []string
		for _, r := range p.Direct() {
			out = append(out, r.Name)
		}
		return out, p.Wake
	}
	for _, tc := range []struct {
		name     string
		first    Row
		want     []string
		wantWake time.Duration
	}{
		{"a down for an hour", row("a", corev1.ConditionFalse, time.Hour, img("B")), []string{"b"}, 0},
		{"a unknown for DaemonSilence", row("a", corev1.ConditionUnknown, DaemonSilence, img("B")), []string{"b"}, 0},
		{"a NotReady for a minute", row("a", corev1.ConditionFalse, time.Minute, img("B")), nil, DaemonSilence - time.Minute},
		{"a Ready", row("a", corev1.ConditionTrue, time.Hour, img("B")), nil, 0},
		{"a joining on an old image", func() Row { r := row("a", corev1.ConditionFalse, time.Hour, img("B")); r.OSNotReady = true; return r }(), nil, 0},
	} {
		got, wake := direct(tc.first)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: directed %v, want %v", tc.name, got, tc.want)
		}
		if wake != tc.wantWake {
			t.Errorf("%s: wake in %s, want %s", tc.name, wake, tc.wantWake)
		}
	}
}

// TestTakeoverOfASlotReleasedDown: a slot held for a node whose record
// was deleted while it was down in that slot's reboot (ReleasedDown) is
// offered back to the node's new record once it is staged for the target
// (Takeovers), so the node is rebooted out of the bad image instead of
// holding its slot down for good; not while the new record is not ready,
// nor when the node is Ready (the entry is then dropped).
func TestTakeoverOfASlotReleasedDown(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-time.Hour))
	two := intstr.FromInt32(2)
	row := func(ready corev1.ConditionStatus, phase v1alpha1.NodePhase, staged string) Row {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "new"}}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		return derived(Row{Name: "a", Record: bn, Node: n, Facts: Facts{Phase: phase, Desired: img("B"), Target: img("B"), Booted: dig("X"), Staged: staged}})
	}
	takeovers := func(r Row) []string {
		pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
		pool.Spec.Rollout.MaxUnavailable = &two
		pool.Status.Slots = []v1alpha1.Slot{{Node: "a", Image: img("X"), Since: since, UID: "old"}}
		p := &Pass{Pool: pool, Rows: []Row{r}, Members: 1, Target: img("B"), TargetDigest: dig("B"), Now: now}
		if _, _, _, _, err := p.Slots(false, true, true, false); err != nil {
			t.Fatal(err)
		}
		return p.Takeovers
	}
	if got := takeovers(row(corev1.ConditionFalse, v1alpha1.PhaseStaged, dig("B"))); len(got) != 1 || got[0] != "a" {
		t.Errorf("down, new record staged: takeovers %v, want [a]", got)
	}
	if got := takeovers(row(corev1.ConditionFalse, v1alpha1.PhaseStaging, "")); len(got) != 0 {
		t.Errorf("down, new record staging: takeovers %v, want none", got)
	}
	if got := takeovers(row(corev1.ConditionTrue, v1alpha1.PhaseStaged, dig("B"))); len(got) != 0 {
		t.Errorf("Ready: takeovers %v, want none", got)
	}
}

// TestGrantToANodeGoneIsDroppedAfterGrantSettle: a slot granted to a
// record whose Node left the pool (or was deleted) before it took the
// grant up is held for GrantSettle, with the pass woken for its end, and
// dropped after it.
func TestGrantToANodeGoneIsDroppedAfterGrantSettle(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	one := intstr.FromInt32(1)
	held := func(age time.Duration) ([]v1alpha1.Slot, time.Duration) {
		since := metav1.NewTime(now.Add(-age))
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u"}}
		bn.Status.Phase = v1alpha1.PhasePending
		bn.Status.Rollout.TargetImage = img("B")
		bn.Status.Staged = &v1alpha1.HostImage{Image: img("B"), Digest: dig("B")}
		row := Row{Name: "a", Record: bn, Facts: Facts{Phase: v1alpha1.PhaseStaged, Desired: img("B"), Target: img("B"), Staged: dig("B")}}
		pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
		pool.Spec.Rollout.MaxUnavailable = &one
		pool.Status.Slots = []v1alpha1.Slot{{Node: "a", Image: img("B"), Since: since, UID: "u"}}
		p := &Pass{Pool: pool, Rows: []Row{row}, Target: img("B"), TargetDigest: dig("B"), Now: now}
		h, _, _, _, err := p.Slots(false, true, true, false)
		if err != nil {
			t.Fatal(err)
		}
		return h, p.Wake
	}
	if h, wake := held(GrantSettle - time.Minute); len(h) != 1 || wake != time.Minute {
		t.Errorf("a minute before GrantSettle: held %v, wake %s; want the slot, and a wake in 1m", h, wake)
	}
	if h, _ := held(GrantSettle); len(h) != 0 {
		t.Errorf("after GrantSettle: held %v, want none", h)
	}
}

// TestArrivedNotBeforeAnAskedReboot: a record whose node runs its desired
// image has not arrived while its daemon has asked, from the boot it
// reports, for a reboot not yet seen (the pool went back to the image the
// host runs just after the daemon asked to reboot into another): the
// host is about to go down (explorer seed 94094 of rollout-100-nodes).
func TestArrivedNotBeforeAnAskedReboot(t *testing.T) {
	bn := &v1alpha1.BootcNode{}
	bn.Spec.DesiredImage = img("B")
	bn.Status.Booted = &v1alpha1.HostImage{Image: img("B"), Digest: dig("B")}
	bn.Status.Daemon.BootID = "boot-1"
	if !Arrived(bn) {
		t.Fatal("on its desired image, no reboot asked: want arrived")
	}
	bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: img("A"), BootID: "boot-1"}
	if Arrived(bn) {
		t.Error("a reboot into A asked from this boot: want not arrived")
	}
	bn.Status.Daemon.BootID = "boot-2"
	if !Arrived(bn) {
		t.Error("reported from the boot after it: want arrived")
	}
}

// TestDownMembersInAPredecessorsSlot: a node down in a slot held for an
// earlier record of it (released down: the record was deleted mid-reboot)
// is a down member of its current record once DaemonSilence has passed; one
// down in its own record's slot is judged by the slot's timeouts (explorer
// seed 98400 of boot-failure-modes).
func TestDownMembersInAPredecessorsSlot(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	down := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "new", CreationTimestamp: metav1.NewTime(now.Add(-10 * time.Minute))}}
	rows := []Row{{Name: "a", Record: bn, Node: down, Facts: Facts{Phase: v1alpha1.PhasePending}}}
	for _, tc := range []struct {
		name string
		uid  string
		want int
	}{
		{"slot of an earlier record", "old", 1},
		{"slot of this record", "new", 0},
		{"slot from before slot UIDs", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := DownMembers(rows, []v1alpha1.Slot{{Node: "a", Image: img("B"), UID: tc.uid, Down: true}}, dig("B"), now)
			if len(got) != tc.want {
				t.Errorf("DownMembers = %q, want %d", got, tc.want)
			}
		})
	}
}
