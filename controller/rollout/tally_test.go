package rollout

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// randomRow is a row of name with a random record (or none) and Node (or
// none), on one of a few images, mostly directed to images[0].
func randomRow(rng *rand.Rand, name string, images []string) Row {
	row := Row{Name: name}
	id := func(s string) string { return s }
	if rng.IntN(8) != 0 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		st := corev1.ConditionTrue
		if rng.IntN(4) == 0 {
			st = corev1.ConditionFalse
		}
		// Not Ready for an hour, or for a minute (not down yet: DaemonSilence).
		since := time.Date(2026, 1, 4, 23, 0, 0, 0, time.UTC)
		if rng.IntN(2) == 0 {
			since = time.Date(2026, 1, 4, 23, 59, 0, 0, time.UTC)
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastTransitionTime: metav1.NewTime(since)}}
		if rng.IntN(10) == 0 {
			n.Spec.Taints = []corev1.Taint{{Key: v1alpha1.TaintOSNotReady, Effect: corev1.TaintEffectNoSchedule}}
		}
		row.SetNode(n)
	}
	if rng.IntN(8) != 0 {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if rng.IntN(12) != 0 {
			bn.Status.Phase = v1alpha1.AllPhases[rng.IntN(len(v1alpha1.AllPhases))]
		}
		if i := rng.IntN(len(images) + 1); i < len(images) {
			bn.Status.Booted = &v1alpha1.HostImage{Image: images[i], Digest: imageref.Digest(images[i])}
		}
		// Mostly directed to the first image (the target of
		// TestTallyKeptEqualsFullCount), as in a rollout, so that some
		// passes have nothing left to direct.
		bn.Spec.DesiredImage = images[0]
		if rng.IntN(20) == 0 {
			bn.Spec.DesiredImage = images[rng.IntN(len(images))]
		}
		if rng.IntN(3) == 0 {
			bn.Status.Daemon.BootID = "b1"
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{BootID: "b1"}
		}
		if rng.IntN(4) == 0 {
			bn.Status.Rollout.FailedImage = images[rng.IntN(len(images))]
		}
		if rng.IntN(4) == 0 {
			bn.Status.Rollout.Reason = "DrainBlocked"
		}
		if rng.IntN(6) == 0 {
			bn.Status.Daemon.Phase, bn.Status.Daemon.LastError = v1alpha1.DaemonError, "bootc: not found"
		}
		row.SetRecord(bn, id)
	}
	return row
}

// TestTallyKeptEqualsFullCount: counts kept row by row (Remove the old
// row, Add the new one) after random changes of rows, rows joining and
// rows leaving equal a full count of the rows, and a pass reports the
// same status from either.
func TestTallyKeptEqualsFullCount(t *testing.T) {
	images := []string{
		"registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111",
		"registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222",
		"registry.example/os@sha256:3333333333333333333333333333333333333333333333333333333333333333",
		"registry.example/os@sha256:4444444444444444444444444444444444444444444444444444444444444444",
	}
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		target := images[0]
		targetDigest := imageref.Digest(target)
		var rows []Row
		for i := range 30 {
			rows = append(rows, randomRow(rng, fmt.Sprintf("n%03d", i), images))
		}
		var kept Tally
		kept.Count(rows, target, targetDigest)
		for step := range 300 {
			i, op := rng.IntN(len(rows)+1), rng.IntN(4)
			if i == len(rows) {
				op = 1 // only a join at the end
			}
			switch op {
			case 0: // a row leaves
				kept.Remove(&rows[i])
				rows = append(rows[:i], rows[i+1:]...)
			case 1: // a row joins
				row := randomRow(rng, fmt.Sprintf("n%03d-%d", i, step), images)
				rows = append(rows[:i], append([]Row{row}, rows[i:]...)...)
				kept.Add(&rows[i])
			default: // a row changes
				kept.Remove(&rows[i])
				rows[i] = randomRow(rng, rows[i].Name, images)
				kept.Add(&rows[i])
			}
			var full Tally
			full.Count(rows, target, targetDigest)
			if !kept.Equal(&full) {
				t.Fatalf("seed %d, step %d: kept counts %+v, full count %+v", seed, step, kept, full)
			}
			if !kept.Counts(target, targetDigest) {
				t.Fatalf("seed %d, step %d: kept tally does not count for its target", seed, step)
			}
			if step%25 != 0 {
				continue
			}
			// A whole pass: its scans skipped on the kept counts, or not.
			report := func(tally *Tally) passResult {
				pool := &v1alpha1.BootcNodePool{}
				pool.Spec.NodeSelector = map[string]string{"pool": "p"}
				pool.Status.TargetImage = target
				p := &Pass{Pool: pool, Rows: rows, Members: len(rows), Tally: tally, Target: target, TargetDigest: targetDigest, Now: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
				if seed%2 == 0 {
					ms := int32(seed % 5)
					pool.Spec.Rollout.MaxStaging = &ms
				}
				var r passResult
				r.halted, r.failed = p.Halt()
				for _, row := range p.Direct() {
					r.direct = append(r.direct, row.Name)
				}
				held, maxU, free, next, err := p.Slots(r.halted, !r.halted, true, false)
				if err != nil {
					t.Fatal(err)
				}
				r.held, r.maxU, r.free = held, maxU, free
				for name, ok := next(); ok; name, ok = next() {
					r.order = append(r.order, name)
				}
				pool.Status.Slots = held
				p.Report(nil, nil, r.failed, r.halted, true)
				r.status, r.wake = pool.Status, p.Wake
				return r
			}
			if got, want := report(&kept), report(nil); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, step %d: status from the kept counts %+v, from a full count %+v", seed, step, got, want)
			}
		}
	}
}

type passResult struct {
	halted        bool
	failed, order []string
	direct        []string
	held          []v1alpha1.Slot
	maxU, free    int
	status        v1alpha1.BootcNodePoolStatus
	wake          time.Duration
}

// TestTallyCountsOneTarget: a tally counts for the target it was counted
// for; Add and Remove do nothing once it is invalidated, and a pass counts
// the rows itself when its tally counts for another target.
func TestTallyCountsOneTarget(t *testing.T) {
	const v1, v2 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	rng := rand.New(rand.NewPCG(7, 0))
	var rows []Row
	for i := range 20 {
		rows = append(rows, randomRow(rng, fmt.Sprintf("n%02d", i), []string{v1, v2}))
	}
	var zero Tally
	if zero.Counts("", "") {
		t.Error("the zero Tally counts")
	}
	var kept Tally
	kept.Count(rows, v1, imageref.Digest(v1))
	if kept.Counts(v2, imageref.Digest(v2)) {
		t.Error("a tally of v1 counts for v2")
	}
	kept.Invalidate()
	kept.Remove(&rows[0])
	if kept.Counts(v1, imageref.Digest(v1)) {
		t.Error("an invalidated tally counts")
	}
	var v1Count Tally
	v1Count.Count(rows, v1, imageref.Digest(v1))
	report := func(tally *Tally) v1alpha1.BootcNodePoolStatus {
		pool := &v1alpha1.BootcNodePool{}
		p := &Pass{Pool: pool, Rows: rows, Members: len(rows), Tally: tally, Target: v2, TargetDigest: imageref.Digest(v2)}
		p.aggregate()
		return pool.Status
	}
	if got, want := report(&v1Count), report(nil); !reflect.DeepEqual(got, want) {
		t.Errorf("pass of v2 given a tally of v1: status %+v, want %+v", got, want)
	}
}

// TestTallyPassHaltsWhenStalled: a pass on kept counts still finds the
// rollout stalled (Stalled) when every member not updated failed the
// target: the scan is skipped only when no record failed it.
func TestTallyPassHaltsWhenStalled(t *testing.T) {
	const v1, v2 = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111", "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	id := func(s string) string { return s }
	var rows []Row
	for i := range 5 {
		name := fmt.Sprintf("n%d", i)
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.BootcNodeSpec{DesiredImage: v2}}
		bn.Status.Phase = v1alpha1.PhaseUpdated
		bn.Status.Booted = &v1alpha1.HostImage{Image: v2, Digest: imageref.Digest(v2)}
		if i == 3 {
			bn.Status.Phase = v1alpha1.PhaseRolledBack
			bn.Status.Booted = &v1alpha1.HostImage{Image: v1, Digest: imageref.Digest(v1)}
			bn.Status.Rollout.FailedImage = v2
		}
		row := Row{Name: name}
		row.SetNode(n)
		row.SetRecord(bn, id)
		rows = append(rows, row)
	}
	var kept Tally
	kept.Count(rows, v2, imageref.Digest(v2))
	for _, tally := range []*Tally{nil, &kept} {
		pool := &v1alpha1.BootcNodePool{}
		pool.Status.TargetImage = v2
		maxFailures := int32(3) // not reached: the pool halts because it stalled
		pool.Spec.FailurePolicy.MaxFailures = &maxFailures
		p := &Pass{Pool: pool, Rows: rows, Members: len(rows), Tally: tally, Target: v2, TargetDigest: imageref.Digest(v2), Now: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
		if halted, _ := p.Halt(); !halted {
			t.Errorf("tally %v: every member updated but one that failed the target: not halted", tally != nil)
		}
	}
}
