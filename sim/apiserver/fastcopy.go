package apiserver

import (
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// copier copies stored objects of one Go type without reflection: into
// deep-copies src into dst, both of the type; fill sets the Items of a list
// of the type to the objects of entries, deep-copied unless share is set,
// reusing the array of the Items it had when it is large enough.
type copier struct {
	into func(src, dst client.Object)
	fill func(list client.ObjectList, entries []*entry, share bool) bool
}

// deepCopyable is a pointer to a generated API type.
type deepCopyable[T any] interface {
	*T
	client.Object
	DeepCopyInto(*T)
}

func copierFor[T any, P deepCopyable[T], L any, LP interface {
	*L
	client.ObjectList
}](items func(LP) *[]T) copier {
	return copier{
		into: func(src, dst client.Object) { src.(P).DeepCopyInto(dst.(P)) },
		fill: func(list client.ObjectList, entries []*entry, share bool) bool {
			l, ok := list.(LP)
			if !ok {
				return false
			}
			// A list passed in again keeps its array (controller-runtime's
			// cache makes a new one): callers that reuse a list object
			// must not hold on to its items between calls.
			out := *items(l)
			if cap(out) >= len(entries) {
				// Zero what the last listing left past the new length:
				// it would keep old stored objects alive.
				clear(out[len(entries):cap(out)])
				out = out[:len(entries)]
			} else {
				out = make([]T, len(entries))
			}
			for i, e := range entries {
				if share {
					out[i] = *e.obj.(P)
				} else {
					e.obj.(P).DeepCopyInto(&out[i])
				}
			}
			*items(l) = out
			return true
		},
	}
}

// copiers holds the copiers of the kinds the twin reads most.
var copiers = map[reflect.Type]copier{
	reflect.TypeFor[corev1.Node](): copierFor[corev1.Node, *corev1.Node, corev1.NodeList](func(l *corev1.NodeList) *[]corev1.Node { return &l.Items }),
	reflect.TypeFor[corev1.Pod]():  copierFor[corev1.Pod, *corev1.Pod, corev1.PodList](func(l *corev1.PodList) *[]corev1.Pod { return &l.Items }),
	reflect.TypeFor[policyv1.PodDisruptionBudget](): copierFor[policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudget, policyv1.PodDisruptionBudgetList](
		func(l *policyv1.PodDisruptionBudgetList) *[]policyv1.PodDisruptionBudget { return &l.Items }),
	reflect.TypeFor[appsv1.DaemonSet](): copierFor[appsv1.DaemonSet, *appsv1.DaemonSet, appsv1.DaemonSetList](func(l *appsv1.DaemonSetList) *[]appsv1.DaemonSet { return &l.Items }),
	reflect.TypeFor[v1alpha1.BootcNode](): copierFor[v1alpha1.BootcNode, *v1alpha1.BootcNode, v1alpha1.BootcNodeList](
		func(l *v1alpha1.BootcNodeList) *[]v1alpha1.BootcNode { return &l.Items }),
	reflect.TypeFor[v1alpha1.BootcNodePool](): copierFor[v1alpha1.BootcNodePool, *v1alpha1.BootcNodePool, v1alpha1.BootcNodePoolList](
		func(l *v1alpha1.BootcNodePoolList) *[]v1alpha1.BootcNodePool { return &l.Items }),
	reflect.TypeFor[v1alpha1.PinnedImageSet](): copierFor[v1alpha1.PinnedImageSet, *v1alpha1.PinnedImageSet, v1alpha1.PinnedImageSetList](
		func(l *v1alpha1.PinnedImageSetList) *[]v1alpha1.PinnedImageSet { return &l.Items }),
}
