package rollout

// TestOnly holds deliberately broken behaviour for the twin's negative
// controls. Production never sets it; it exists so that each invariant can
// be shown to catch the bug it guards against.
type TestOnly struct {
	// IgnoreSlotLimit hands out reboot slots without bound.
	IgnoreSlotLimit bool
	// SkipUncordon leaves nodes cordoned after their update.
	SkipUncordon bool
	// DeleteInsteadOfEvict makes the Drainer delete pods directly instead
	// of evicting them, so no PodDisruptionBudget is honoured (see
	// NewDrainer).
	DeleteInsteadOfEvict bool
	// FreeSlotBeforeVerify gives a node's slot back as soon as its reboot
	// is requested, before the node is verified, so more than
	// maxUnavailable nodes can be down at once.
	FreeSlotBeforeVerify bool
	// KeepBootOrder never withdraws a boot order, and carries a node's
	// last one over to each new desired image the pool gives it, so the
	// next slot's cordon lets the daemon boot the new image before the
	// drain.
	KeepBootOrder bool
	// CountSlotsFromCache writes the pool's slot table with a plain merge
	// patch of what the cache said, without the optimistic lock, so a
	// pass on a stale pool hands out slots another pass already gave; and
	// a node takes up a slot its cached pool shows without reading the
	// table afresh.
	CountSlotsFromCache bool
	// ForgetPriorCordon does not record a Node's cordon state before
	// bootroll cordons it, so a node an admin had cordoned is uncordoned.
	ForgetPriorCordon bool
	// HaltFromLiveRecords computes the halt from the live BootcNodes only
	// (the old behaviour), ignoring status.halt: deleting the failed
	// node's record lifts the halt.
	HaltFromLiveRecords bool
	// SkipCleanupOnDelete removes bootroll's finalizers without undoing
	// anything, and the node reconciler does not give back what a node of
	// a deleted pool holds, so a deleted pool or record leaves its Nodes
	// cordoned and annotated.
	SkipCleanupOnDelete bool
	// DropAnnotationOwnership records every Karpenter protection
	// annotation as added by bootroll, also those that were there before,
	// and removes them without asking who wrote them since, so bootroll
	// removes annotations it did not add.
	DropAnnotationOwnership bool
	// IgnoreWindows hands out reboot slots whether or not one of the
	// pool's maintenance windows is open (Slots).
	IgnoreWindows bool
	// SkipKarpenterProtection never sets do-not-disrupt or do-not-repair.
	SkipKarpenterProtection bool
	// KeepAnnotations never removes the annotations bootroll added.
	KeepAnnotations bool
	// ForgetSlotsOnRestart makes a new pool reconciler (a restarted
	// controller) ignore the slot table it reads on its first pass of a
	// pool, so it hands the recorded slots out again.
	ForgetSlotsOnRestart bool
	// NoHealthTimeout never fails a node that does not come back healthy.
	NoHealthTimeout bool
	// SkipHealthChecks verifies a node on Ready alone, ignoring the pool's
	// spec.healthChecks, so a node whose checks fail counts as Updated.
	SkipHealthChecks bool
	// VerifyOnCache takes a node's verdict (Updated, RolledBack) on the
	// cached Node and pods alone, without reading them from the API
	// server: a node whose cache still shows it Ready, which the API
	// server no longer does, counts as Updated.
	VerifyOnCache bool
	// ForgetDownOnLeft is the behaviour before explorer seed 158119 of
	// rollback-on-failed-boot: a node down on the image its pool leaves,
	// never failed on it, is retargeted as a healthy one and can take no
	// slot while down, so nothing brings it back.
	ForgetDownOnLeft bool
	// SettleOnOrderedAt is the behaviour before explorer seed 176610 of
	// cluster-repair-during-slow-reboot: BootOrderSettled waits only on
	// the order for the desired image (OrderedAt), not on a voided one
	// whose reboot the daemon has not reported from (RebootClock), so the
	// release of a record deleted mid-reboot gives the node back, still
	// down in that reboot, as soon as the pool's image changes.
	SettleOnOrderedAt bool
}
