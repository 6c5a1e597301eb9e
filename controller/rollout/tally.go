package rollout

import (
	"slices"
	"strings"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// Tally holds the counts a pass reports from its rows (Pass.Report: members
// per phase, deployed digests, updated nodes, records leaving) for one
// target. The pool reconciler keeps one per pool and updates it row by row
// as the rows change (Remove the old row, Add the new one), so that a pass
// does not count every row again; each count is a sum over the rows, so
// the kept counts equal a full count (Count) of the same rows.
//
// The zero Tally counts nothing (Counts reports false) until Count.
type Tally struct {
	valid                bool
	target, targetDigest string
	phases               [numPhases]int32
	// digests counts the members booted on each digest other than the
	// target's (few), in no order; none has a zero count.
	digests                    []digestCount
	onTarget, updated, leaving int32
	// The rows that the pass's scans for exceptions look at (see their
	// uses): without any, a scan finds nothing and is skipped.
	//   - failing: records that failed the target (Halt's live failures);
	//   - notReady: member Nodes not Ready and not joining on an old image
	//     (os-not-ready), with a record or not (Slots);
	//   - down: those with a record (DownMembers);
	//   - suspect: members whose record's daemon is suspect (DaemonTrouble);
	//   - drainHeld: members whose record's drain is held (DrainsBlocked);
	//   - undirected: members, in no conflict, whose record Direct may
	//     direct to the target (not directed to it, Directable).
	failing, notReady, down, suspect, drainHeld, undirected int32
	// members counts the member Nodes; conflicts those another pool
	// selects too; unrecorded those without a record, in no conflict; and
	// unheld the records without a member Node or whose Node is in
	// conflict.
	members, conflicts, unrecorded, unheld int32
}

// Members returns the number of member Nodes.
func (t *Tally) Members() int { return int(t.members) }

// Conflicts returns the number of member Nodes another pool selects too.
func (t *Tally) Conflicts() int { return int(t.conflicts) }

// Unrecorded returns the number of member Nodes, in no conflict, without
// a record.
func (t *Tally) Unrecorded() int { return int(t.unrecorded) }

// Unheld returns the number of records without a member Node, or whose
// Node another pool selects too.
func (t *Tally) Unheld() int { return int(t.unheld) }

// numPhases is len(v1alpha1.AllPhases).
const numPhases = 10

// stagedIndex is the v1alpha1.PhaseIndex of PhaseStaged: Tally.phases
// at it counts the members in Staged.
var stagedIndex, _ = v1alpha1.PhaseIndex(v1alpha1.PhaseStaged)

func init() {
	if len(v1alpha1.AllPhases) != numPhases {
		panic("rollout: numPhases is not len(v1alpha1.AllPhases)")
	}
}

type digestCount struct {
	digest string
	n      int32
}

// Count counts rows afresh for target (whose digest is targetDigest).
func (t *Tally) Count(rows []Row, target, targetDigest string) {
	*t = Tally{valid: true, target: target, targetDigest: targetDigest, digests: t.digests[:0]}
	for i := range rows {
		t.apply(&rows[i], 1)
	}
}

// Counts reports whether t holds the counts for target and targetDigest.
func (t *Tally) Counts(target, targetDigest string) bool {
	return t.valid && t.target == target && t.targetDigest == targetDigest
}

// Invalidate drops the counts: they are to be counted afresh (Count).
func (t *Tally) Invalidate() { t.valid = false }

// Add counts row, which joined the rows counted; Remove uncounts a row
// that left them (row as it was counted). Both do nothing while t counts
// nothing.
func (t *Tally) Add(row *Row) {
	if t.valid {
		t.apply(row, 1)
	}
}

// Remove: see Add.
func (t *Tally) Remove(row *Row) {
	if t.valid {
		t.apply(row, -1)
	}
}

// apply adds d to the counts row contributes to.
func (t *Tally) apply(row *Row, d int32) {
	notReady := row.Node != nil && !row.Ready && !row.OSNotReady
	if notReady {
		t.notReady += d
	}
	if row.Node != nil {
		t.members += d
		if row.Conflict != "" {
			t.conflicts += d
		}
	}
	if row.Record == nil {
		if row.Node != nil && row.Conflict == "" {
			t.unrecorded += d
		}
		return // deleted, or not created
	}
	if row.Node == nil || row.Conflict != "" {
		t.unheld += d
	}
	if t.target != "" && ((row.Failed == t.target && HoldsSlot(row.Phase)) || row.FailedOn(t.target, t.targetDigest)) {
		t.failing += d
	}
	if row.Node == nil {
		// A record whose Node left the pool (or is gone), kept until
		// bootroll has given the node back: not a member, so not in
		// status.phases (members per phase), which counted it (a pool of
		// 2 said "0/2 updated; 3 staged"); the summary says how many are
		// leaving.
		t.leaving += d
		return
	}
	if row.PhaseIdx >= 0 {
		t.phases[row.PhaseIdx] += d
	}
	if notReady {
		t.down += d
	}
	if row.DaemonSuspect {
		t.suspect += d
	}
	if row.DrainHeld {
		t.drainHeld += d
	}
	if row.Conflict == "" && row.Desired != t.target && Directable(row.Phase, row.Desired, t.target, row.FailedOn(t.target, t.targetDigest)) {
		t.undirected += d
	}
	// The few distinct digests, found by comparing (interned) strings;
	// the target's, most rows' in a rollout, counted on its own.
	switch b := row.Booted; {
	case b == "":
	case b == t.targetDigest:
		t.onTarget += d
		if t.target != "" && OnTarget(row) {
			t.updated += d
		}
	default:
		j := 0
		for j < len(t.digests) && t.digests[j].digest != b {
			j++
		}
		if j == len(t.digests) {
			t.digests = append(t.digests, digestCount{digest: b})
		}
		if t.digests[j].n += d; t.digests[j].n == 0 {
			t.digests = append(t.digests[:j], t.digests[j+1:]...)
		}
	}
}

// kept returns p.Tally when it counts the pass's rows for its target, or
// nil: only then may a scan be skipped on its counts.
func (p *Pass) kept() *Tally {
	if t := p.Tally; t != nil && t.Counts(p.Target, p.TargetDigest) {
		return t
	}
	return nil
}

// Equal reports whether t and o hold the same counts.
func (t *Tally) Equal(o *Tally) bool {
	if t.valid != o.valid || t.target != o.target || t.targetDigest != o.targetDigest || t.phases != o.phases ||
		t.onTarget != o.onTarget || t.updated != o.updated || t.leaving != o.leaving || len(t.digests) != len(o.digests) ||
		t.failing != o.failing || t.notReady != o.notReady || t.down != o.down || t.suspect != o.suspect || t.drainHeld != o.drainHeld || t.undirected != o.undirected ||
		t.members != o.members || t.conflicts != o.conflicts || t.unrecorded != o.unrecorded || t.unheld != o.unheld {
		return false
	}
	for _, d := range t.digests {
		found := false
		for _, e := range o.digests {
			if e.digest == d.digest {
				found = e.n == d.n
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// report writes the counts into st, for a pool of members member Nodes.
// Each list is made as long as it will be (nil when empty, as appending
// to nil left it): grown by appending, and the digests sorted by
// sort.Slice (a reflective swapper), they took about seven allocations a
// pass where two do.
func (t *Tally) report(st *v1alpha1.BootcNodePoolStatus, members int) {
	st.Phases = nil
	phases := 0
	for _, c := range t.phases {
		if c > 0 {
			phases++
		}
	}
	if phases > 0 {
		st.Phases = make([]v1alpha1.PhaseCount, 0, phases)
		for i, ph := range v1alpha1.AllPhases {
			if t.phases[i] > 0 {
				st.Phases = append(st.Phases, v1alpha1.PhaseCount{Phase: ph, Nodes: t.phases[i]})
			}
		}
	}
	st.DeployedDigests = nil
	n := len(t.digests)
	if t.onTarget > 0 {
		n++
	}
	if n > 0 {
		dd := make([]v1alpha1.DigestCount, 0, n)
		for _, d := range t.digests {
			dd = append(dd, v1alpha1.DigestCount{Digest: d.digest, Nodes: d.n})
		}
		if t.onTarget > 0 {
			dd = append(dd, v1alpha1.DigestCount{Digest: t.targetDigest, Nodes: t.onTarget})
		}
		// The digests are distinct: any sort gives the one order.
		slices.SortFunc(dd, func(a, b v1alpha1.DigestCount) int { return strings.Compare(a.Digest, b.Digest) })
		st.DeployedDigests = dd
	}
	st.Nodes = int32(members)
	st.UpdatedNodes = t.updated
	st.Summary = Summary(t.updated, st.Nodes, st.Phases, t.leaving)
}
