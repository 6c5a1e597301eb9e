// Package podorder orders pods by namespace and name without copying
// them: a Pod is a kilobyte to swap.
package podorder

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ByName returns pointers to items in namespace, then name, order; items
// itself is left as it is.
func ByName(items []corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
