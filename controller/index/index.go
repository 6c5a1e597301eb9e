// Package index names the field indexes the controller's reconcilers
// list by, and how each is extracted.
package index

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// The field indexes, by the field they index.
const (
	// PodNode indexes Pods by spec.nodeName.
	PodNode = "spec.nodeName"
	// BootcNodePool indexes BootcNodes by spec.pool.
	BootcNodePool = "spec.pool"
	// BootcNodePinnedSet indexes BootcNodes by the names of the
	// PinnedImageSets in their spec.
	BootcNodePinnedSet = "spec.pinnedImageSets.name"
)

// Index is a field index the reconcilers rely on.
type Index struct {
	Object  client.Object
	Field   string
	Extract client.IndexerFunc
}

// All lists the field indexes the reconcilers need; the manager (Setup)
// and the twin register each.
func All() []Index {
	return []Index{
		{Object: &corev1.Pod{}, Field: PodNode, Extract: func(o client.Object) []string {
			if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
				return []string{n}
			}
			return nil
		}},
		{Object: &v1alpha1.BootcNode{}, Field: BootcNodePool, Extract: func(o client.Object) []string {
			return []string{o.(*v1alpha1.BootcNode).Spec.Pool}
		}},
		{Object: &v1alpha1.BootcNode{}, Field: BootcNodePinnedSet, Extract: func(o client.Object) []string {
			var names []string
			for _, e := range o.(*v1alpha1.BootcNode).Spec.PinnedImageSets {
				names = append(names, e.Name)
			}
			return names
		}},
	}
}
