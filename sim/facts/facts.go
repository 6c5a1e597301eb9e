// Package facts holds what the cluster model reports to the invariant
// checker beyond the API objects: plain data, so that the checker depends
// on neither the model nor the production code the model runs (the
// invariants judge that code, and must not compute what is allowed with it).
package facts

import "fmt"

// PDBState is the state of one PodDisruptionBudget.
type PDBState struct {
	Namespace, Name string
	// Healthy counts the covered pods that are Running, Ready and not
	// terminating.
	Healthy int
	// DesiredHealthy is how many must be healthy: minAvailable, or
	// expected minus maxUnavailable (percentages rounded up).
	DesiredHealthy int
	// ExpectedPods is the covered workloads' replica count.
	ExpectedPods int
	// DisruptionsAllowed is how many more covered pods may be evicted now.
	DisruptionsAllowed int
	// Violated is true when Healthy < DesiredHealthy.
	Violated bool
}

// StageStarvation is an OS staging that failed for lack of space.
type StageStarvation struct {
	Node, Image string
	// Need is the free space the staging needed, Available what was free,
	// PinnedHeld what the daemon's pinned images held then (the pulls
	// running and the images present, less what only images it unpinned
	// hold: those are the kubelet's image GC's).
	Need, Available, PinnedHeld int64
}

// String describes the failure.
func (s StageStarvation) String() string {
	return fmt.Sprintf("node %s: staging %s needed %d bytes free, %d were, pinned images held %d", s.Node, s.Image, s.Need, s.Available, s.PinnedHeld)
}
