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
// none), on one of a few images.
func randomRow(rng *rand.Rand, name string, images []string) Row {
	row := Row{Name: name}
	id := func(s string) string { return s }
	if rng.IntN(8) != 0 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		st := corev1.ConditionTrue
		if rng.IntN(4) == 0 {
			st = corev1.ConditionFalse
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
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
		bn.Spec.DesiredImage = images[rng.IntN(len(images))]
		if rng.IntN(3) == 0 {
			bn.Status.Daemon.BootID = "b1"
			bn.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{BootID: "b1"}
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
		target := images[rng.IntN(len(images))]
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
			report := func(tally *Tally) v1alpha1.BootcNodePoolStatus {
				pool := &v1alpha1.BootcNodePool{}
				p := &Pass{Pool: pool, Rows: rows, Members: len(rows), Tally: tally, Target: target, TargetDigest: targetDigest, Now: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
				p.aggregate()
				return pool.Status
			}
			if got, want := report(&kept), report(nil); !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d, step %d: status from the kept counts %+v, from a full count %+v", seed, step, got, want)
			}
		}
	}
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
