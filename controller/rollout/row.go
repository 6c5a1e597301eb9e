package rollout

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/imageref"
)

// Row is one node name of a pool pass: its record (nil when there is
// none, or it was deleted in this pass), its Node when the Node is a
// member (nil otherwise), and the other pool that also selects it.
type Row struct {
	Name     string
	Record   *v1alpha1.BootcNode
	Node     *corev1.Node
	Conflict string
	Facts
}

// Facts are the fields of a row's record and Node that a pass reads,
// copied into the row when it is built (SetRecord) so that a pass reads
// one table instead of 2,000 objects spread over the heap. The image
// strings may be interned (equal ones share their bytes, so comparing
// them is a pointer check).
type Facts struct {
	Phase    v1alpha1.NodePhase // ObservedPhase of the record, Pending when empty
	PhaseIdx int8               // its v1alpha1.PhaseIndex, -1 for none
	Desired  string             // spec.desiredImage
	Failed   string             // status.rollout.failedImage
	// FailedRollback is the digest of status.rollout.rollbackTo while the
	// record is Failed (its rollback failed), "" otherwise.
	FailedRollback string
	Target         string // status.rollout.targetImage
	Booted         string // status.booted.digest
	Staged         string // status.staged.digest
	// RebootUnreported is RebootUnreported of the record: its daemon has
	// not reported since the reboot it asked for.
	RebootUnreported bool
	// DrainHeld says the record's drain is held up, as DrainsBlocked
	// lists it: refused by a budget, timed out, or retried after a
	// timeout.
	DrainHeld bool
	// DaemonSuspect says the record's daemon reports an error or has
	// never reported (Unreported): the rows DaemonTrouble looks at.
	DaemonSuspect bool
	OSNotReady    bool // the Node has the startup taint
	Ready         bool // the Node is Ready (NodeReady)
}

// SetRecord sets the row's record and the facts taken from it; intern
// maps each string to its shared copy (the identity will do).
func (row *Row) SetRecord(bn *v1alpha1.BootcNode, intern func(string) string) {
	row.Record = bn
	f := &row.Facts
	if bn == nil {
		*f = Facts{PhaseIdx: -1, OSNotReady: f.OSNotReady, Ready: f.Ready}
		return
	}
	f.SetFrom(bn, intern)
}

// SetFrom sets the facts taken from record bn (not nil).
func (f *Facts) SetFrom(bn *v1alpha1.BootcNode, intern func(string) string) {
	f.Phase = v1alpha1.NodePhase(intern(string(ObservedPhase(bn))))
	f.PhaseIdx = -1
	if i, ok := v1alpha1.PhaseIndex(f.Phase); ok {
		f.PhaseIdx = int8(i)
	}
	f.Desired = intern(bn.Spec.DesiredImage)
	f.Failed = intern(bn.Status.Rollout.FailedImage)
	f.FailedRollback = ""
	if f.Phase == v1alpha1.PhaseFailed {
		f.FailedRollback = intern(imageref.Digest(bn.Status.Rollout.RollbackTo))
	}
	f.Target = intern(bn.Status.Rollout.TargetImage)
	f.Booted = intern(DigestOfHost(bn.Status.Booted))
	f.Staged = intern(DigestOfHost(bn.Status.Staged))
	f.RebootUnreported = RebootUnreported(bn)
	f.DrainHeld = drainHeld(f.Phase, bn)
	f.DaemonSuspect = daemonSuspect(bn)
}

// daemonSuspect is Facts.DaemonSuspect of record bn.
func daemonSuspect(bn *v1alpha1.BootcNode) bool {
	return DaemonFailing(&bn.Status.Daemon) || Unreported(bn)
}

// DaemonFailing reports whether daemon status d reports an error: it says
// Error, or it says Staging again after failed stages (StageAttempts, with
// the last one's error kept in LastError) and none has worked yet. A retry
// is the daemon's way out of the error, not its end: read as healthy, a
// pool whose cache showed the retry's start but not yet its failure said
// Degraded=False/AsExpected for that while, at each retry (explorer seed
// 176739 of pool-image-revert-mid-reboot's seed 80071 regression, a stale
// cache: a disk full for good, the pool's DaemonErrors cleared for about
// 24 s every 10 minutes, and the run ended in such a gap).
func DaemonFailing(d *v1alpha1.DaemonStatus) bool {
	if d.LastError == "" {
		return false
	}
	return d.Phase == v1alpha1.DaemonError || (d.Phase == v1alpha1.DaemonStaging && d.StageAttempts > 0)
}

// SetNode sets the row's member Node and the facts taken from it.
func (row *Row) SetNode(n *corev1.Node) {
	row.Node = n
	row.OSNotReady = n != nil && HasTaint(n, v1alpha1.TaintOSNotReady)
	row.Ready = n != nil && NodeReady(n)
}

// FailedOn reports whether the row's node failed target (whose digest is
// targetDigest) and is out of its slot (Failed or RolledBack): the image
// it failed, or the one its failed rollback was to return it to. The pool
// does not direct such a node to target again.
func (f *Facts) FailedOn(target, targetDigest string) bool {
	return Done(f.Phase) && (f.Failed == target || (f.FailedRollback != "" && f.FailedRollback == targetDigest))
}

// FindRow returns the row of name in rows sorted by name, or nil.
func FindRow(rows []Row, name string) *Row {
	if i := rowIndex(rows, name); i >= 0 {
		return &rows[i]
	}
	return nil
}

// rowIndex returns the index of name's row in rows sorted by name, or -1.
func rowIndex(rows []Row, name string) int {
	if i := SearchRows(rows, name); i < len(rows) && rows[i].Name == name {
		return i
	}
	return -1
}

// SearchRows returns the index of name's row in rows sorted by name, or
// where it goes: sort.Search written out (a pass looks up every slot's
// row, the feed every changed one, and the call of sort.Search's
// predicate cost as much as the comparisons).
func SearchRows(rows []Row, name string) int {
	i, j := 0, len(rows)
	for i < j {
		h := int(uint(i+j) >> 1)
		if rows[h].Name < name {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}
