package nodedaemon

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// WatchPredicates filters the BootcNode events that wake the daemon of
// node nodeName: its own BootcNode only, and of its updates only those that
// change the spec (metadata.generation). Its own status writes, and the
// controller's record writes, would only wake it for nothing; the host can
// change without an event, which is what Resync and the step's own waits
// are for. The daemon binary and the twin both use it.
func WatchPredicates(nodeName string) []predicate.Predicate {
	return []predicate.Predicate{
		predicate.NewPredicateFuncs(func(obj client.Object) bool { return obj.GetName() == nodeName }),
		predicate.GenerationChangedPredicate{},
	}
}
