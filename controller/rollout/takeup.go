package rollout

import (
	"strings"
	"time"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TakeUpWrite is one write of a slot take-up.
type TakeUpWrite int

const (
	// WriteCordonRecord records on the BootcNode what the cordon will
	// change (prior cordon state, annotations bootroll adds), still
	// waiting for its turn.
	WriteCordonRecord TakeUpWrite = iota
	// WriteNode cordons the Node, marks it with the slot marker and adds
	// the protection annotations, in one patch.
	WriteNode
	// WriteClaim adds the protection annotations to the Node's NodeClaim.
	WriteClaim
	// WriteDraining enters the slot: phase Draining.
	WriteDraining
)

var takeUpWriteNames = [...]string{"cordonRecord", "node", "claim", "draining"}

func (w TakeUpWrite) String() string { return takeUpWriteNames[w] }

// TakeUpDecision is TakeUp's answer: the writes to make, in order, or why
// none (Skip, with a Wait when the node should look again).
type TakeUpDecision struct {
	Writes []TakeUpWrite
	Skip   string
	Wait   time.Duration
}

func (d TakeUpDecision) String() string {
	if d.Skip != "" {
		s := "skip: " + d.Skip
		if d.Wait > 0 {
			s += " wait=" + d.Wait.String()
		}
		return s
	}
	names := make([]string, len(d.Writes))
	for i, w := range d.Writes {
		names[i] = w.String()
	}
	return "writes: " + strings.Join(names, ",")
}

// TakeUp is the rule for a node taking up slot s, which its pool granted
// (GrantedSlot): fresh is the pool as the API server has it (nil when
// gone), claimed whether the Node has a NodeClaim (Karpenter can disrupt
// it), and blocker why the Node, read afresh, may not take a slot now
// (karpenter.SlotBlocker; "" when it may).
//
// A grant no longer in the pool's table, or for a target the pool has
// halted on, is not taken up. Every node records what the cordon changes
// first, then has its Node (and its NodeClaim, when it has one) protected,
// and only then enters the slot: Karpenter never finds a record in its
// slot on an unprotected Node, whatever write fails part way. That holds
// for a node without a NodeClaim too, which nothing reaps today but
// Karpenter may come to manage while the controller is down (explorer
// seed 123060 of nodeclass-drift-mid-rollout: the take-up entered the slot
// first and cordoned after, the controller crashed between the two, and
// Karpenter, installed again meanwhile, drifted the unprotected node).
func TakeUp(fresh *v1alpha1.BootcNodePool, s v1alpha1.Slot, claimed bool, blocker string) TakeUpDecision {
	switch {
	case fresh == nil || fresh.DeletionTimestamp != nil:
		return TakeUpDecision{Skip: "the pool is gone or being deleted"}
	case !Listed(fresh, s):
		return TakeUpDecision{Skip: "the slot is no longer in the pool's table"}
	case HaltedFor(fresh, s.Image):
		return TakeUpDecision{Skip: "the pool halted on " + s.Image}
	case blocker != "":
		return TakeUpDecision{Skip: blocker, Wait: DrainPoll}
	}
	writes := []TakeUpWrite{WriteCordonRecord, WriteNode}
	if claimed {
		writes = append(writes, WriteClaim)
	}
	return TakeUpDecision{Writes: append(writes, WriteDraining)}
}
