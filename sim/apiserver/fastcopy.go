package apiserver

import (
	"maps"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// copier copies stored objects of one Go type without reflection: into
// deep-copies src into dst, both of the type; clone returns a new deep
// copy of src; shallow returns a new object with src's fields (its maps,
// slices and pointers shared); fill sets the Items of a list of the type
// to the objects of entries, deep-copied unless share is set, reusing the
// array of the Items it had when it is large enough; share sets dst to
// src's fields (Shared); status, when set, deep-copies the status of src
// into dst's.
type copier struct {
	into    func(src, dst client.Object)
	share   func(src, dst client.Object)
	clone   func(src client.Object) client.Object
	shallow func(src client.Object) client.Object
	fill    func(list client.ObjectList, entries []*entry, share bool) bool
	status  func(src, dst client.Object)
}

// withStatus returns c with status, the status copier of statusCopier.
func (c copier) withStatus(status func(src, dst client.Object)) copier {
	c.status = status
	return c
}

// statusCopier deep-copies the status of an object of Go type T, which
// field gives.
func statusCopier[T any, P deepCopyable[T], S any, SP interface {
	*S
	DeepCopyInto(*S)
}](field func(P) SP) func(src, dst client.Object) {
	return func(src, dst client.Object) { field(src.(P)).DeepCopyInto(field(dst.(P))) }
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
}](items func(LP) *[]T, deep func(in, out P)) copier {
	if deep == nil {
		deep = func(in, out P) { in.DeepCopyInto(out) }
	}
	return copier{
		into:  func(src, dst client.Object) { deep(src.(P), dst.(P)) },
		share: func(src, dst client.Object) { *dst.(P) = *src.(P) },
		clone: func(src client.Object) client.Object {
			out := P(new(T))
			deep(src.(P), out)
			return out
		},
		shallow: func(src client.Object) client.Object {
			out := P(new(T))
			*out = *src.(P)
			return out
		},
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
					deep(e.obj.(P), &out[i])
				}
			}
			*items(l) = out
			return true
		},
	}
}

// copiers holds the copiers of the kinds the twin reads most.
var copiers = map[reflect.Type]copier{
	reflect.TypeFor[corev1.Node](): copierFor[corev1.Node, *corev1.Node, corev1.NodeList](func(l *corev1.NodeList) *[]corev1.Node { return &l.Items },
		func(in, out *corev1.Node) {
			out.TypeMeta = in.TypeMeta
			copyMeta(&in.ObjectMeta, &out.ObjectMeta)
			in.Spec.DeepCopyInto(&out.Spec)
			in.Status.DeepCopyInto(&out.Status)
		}).withStatus(statusCopier(func(n *corev1.Node) *corev1.NodeStatus { return &n.Status })),
	reflect.TypeFor[corev1.Pod](): copierFor[corev1.Pod, *corev1.Pod, corev1.PodList](func(l *corev1.PodList) *[]corev1.Pod { return &l.Items },
		func(in, out *corev1.Pod) {
			out.TypeMeta = in.TypeMeta
			copyMeta(&in.ObjectMeta, &out.ObjectMeta)
			in.Spec.DeepCopyInto(&out.Spec)
			in.Status.DeepCopyInto(&out.Status)
		}).withStatus(statusCopier(func(p *corev1.Pod) *corev1.PodStatus { return &p.Status })),
	reflect.TypeFor[policyv1.PodDisruptionBudget](): copierFor[policyv1.PodDisruptionBudget, *policyv1.PodDisruptionBudget, policyv1.PodDisruptionBudgetList](
		func(l *policyv1.PodDisruptionBudgetList) *[]policyv1.PodDisruptionBudget { return &l.Items }, nil).
		withStatus(statusCopier(func(b *policyv1.PodDisruptionBudget) *policyv1.PodDisruptionBudgetStatus { return &b.Status })),
	reflect.TypeFor[appsv1.DaemonSet](): copierFor[appsv1.DaemonSet, *appsv1.DaemonSet, appsv1.DaemonSetList](func(l *appsv1.DaemonSetList) *[]appsv1.DaemonSet { return &l.Items }, nil).
		withStatus(statusCopier(func(d *appsv1.DaemonSet) *appsv1.DaemonSetStatus { return &d.Status })),
	reflect.TypeFor[v1alpha1.BootcNode](): copierFor[v1alpha1.BootcNode, *v1alpha1.BootcNode, v1alpha1.BootcNodeList](
		func(l *v1alpha1.BootcNodeList) *[]v1alpha1.BootcNode { return &l.Items },
		func(in, out *v1alpha1.BootcNode) {
			out.TypeMeta = in.TypeMeta
			copyMeta(&in.ObjectMeta, &out.ObjectMeta)
			in.Spec.DeepCopyInto(&out.Spec)
			copyBootcNodeStatus(&in.Status, &out.Status)
		}).withStatus(func(src, dst client.Object) {
		copyBootcNodeStatus(&src.(*v1alpha1.BootcNode).Status, &dst.(*v1alpha1.BootcNode).Status)
	}),
	reflect.TypeFor[v1alpha1.BootcNodePool](): copierFor[v1alpha1.BootcNodePool, *v1alpha1.BootcNodePool, v1alpha1.BootcNodePoolList](
		func(l *v1alpha1.BootcNodePoolList) *[]v1alpha1.BootcNodePool { return &l.Items }, nil).
		withStatus(statusCopier(func(p *v1alpha1.BootcNodePool) *v1alpha1.BootcNodePoolStatus { return &p.Status })),
	reflect.TypeFor[v1alpha1.PinnedImageSet](): copierFor[v1alpha1.PinnedImageSet, *v1alpha1.PinnedImageSet, v1alpha1.PinnedImageSetList](
		func(l *v1alpha1.PinnedImageSetList) *[]v1alpha1.PinnedImageSet { return &l.Items }, nil).
		withStatus(statusCopier(func(p *v1alpha1.PinnedImageSet) *v1alpha1.PinnedImageSetStatus { return &p.Status })),
}

// copyMeta deep-copies an ObjectMeta as its generated DeepCopyInto does,
// but clones the label and annotation maps whole: maps.Clone copies a
// map's table at once where the generated code inserts key by key, which
// was 60% of the copy of a BootcNode, Node or Pod (the kinds the twin
// copies most, with their own copiers above). TestCopyMetaIsDeepCopy keeps
// it equal to DeepCopyInto and fails when ObjectMeta gains a field.
func copyMeta(in, out *metav1.ObjectMeta) {
	*out = *in
	if in.DeletionTimestamp != nil {
		out.DeletionTimestamp = in.DeletionTimestamp.DeepCopy()
	}
	if in.DeletionGracePeriodSeconds != nil {
		v := *in.DeletionGracePeriodSeconds
		out.DeletionGracePeriodSeconds = &v
	}
	out.Labels = maps.Clone(in.Labels)
	out.Annotations = maps.Clone(in.Annotations)
	if in.OwnerReferences != nil {
		out.OwnerReferences = make([]metav1.OwnerReference, len(in.OwnerReferences))
		for i := range in.OwnerReferences {
			in.OwnerReferences[i].DeepCopyInto(&out.OwnerReferences[i])
		}
	}
	if in.Finalizers != nil {
		out.Finalizers = make([]string, len(in.Finalizers))
		copy(out.Finalizers, in.Finalizers)
	}
	if in.ManagedFields != nil {
		out.ManagedFields = make([]metav1.ManagedFieldsEntry, len(in.ManagedFields))
		for i := range in.ManagedFields {
			in.ManagedFields[i].DeepCopyInto(&out.ManagedFields[i])
		}
	}
}

// copyBootcNodeStatus deep-copies a BootcNodeStatus as its generated
// DeepCopyInto does, but with the host images, times, reboot record and
// bool its pointers point to in one allocation (statusBlock) instead of
// one each: up to fourteen allocations for a copy of a BootcNode, the
// object the twin copies most. The generated code copies the rest (and
// any field added later).
func copyBootcNodeStatus(in, out *v1alpha1.BootcNodeStatus) {
	rest := *in
	rest.Booted, rest.Staged, rest.RollbackImage = nil, nil, nil
	rest.Daemon.LastAttempt, rest.Daemon.LastReboot = nil, nil
	ro := &rest.Rollout
	ro.PhaseSince, ro.PriorUnschedulable, ro.ProtectUntil, ro.SlotGrantedAt, ro.DrainStartedAt, ro.RetryAfter = nil, nil, nil, nil, nil, nil
	rest.DeepCopyInto(out)
	r := &in.Rollout
	if in.Booted == nil && in.Staged == nil && in.RollbackImage == nil && in.Daemon.LastAttempt == nil && in.Daemon.LastReboot == nil &&
		r.PhaseSince == nil && r.PriorUnschedulable == nil && r.ProtectUntil == nil && r.SlotGrantedAt == nil && r.DrainStartedAt == nil && r.RetryAfter == nil {
		return
	}
	b := new(statusBlock)
	out.Booted = b.host(0, in.Booted)
	out.Staged = b.host(1, in.Staged)
	out.RollbackImage = b.host(2, in.RollbackImage)
	out.Daemon.LastAttempt = b.time(in.Daemon.LastAttempt)
	if in.Daemon.LastReboot != nil {
		in.Daemon.LastReboot.DeepCopyInto(&b.reboot)
		out.Daemon.LastReboot = &b.reboot
	}
	o := &out.Rollout
	o.PhaseSince = b.time(r.PhaseSince)
	if r.PriorUnschedulable != nil {
		b.prior = *r.PriorUnschedulable
		o.PriorUnschedulable = &b.prior
	}
	o.ProtectUntil = b.time(r.ProtectUntil)
	o.SlotGrantedAt = b.time(r.SlotGrantedAt)
	o.DrainStartedAt = b.time(r.DrainStartedAt)
	o.RetryAfter = b.time(r.RetryAfter)
}

// statusBlock holds what the pointers of a BootcNodeStatus copy point to
// (copyBootcNodeStatus): each pointer gets its own element.
type statusBlock struct {
	hosts [3]v1alpha1.HostImage
	// times: three host image timestamps, the daemon's last attempt and
	// five of the rollout.
	times  [9]metav1.Time
	nTimes int
	reboot v1alpha1.RebootRecord
	prior  bool
}

// host copies the host image h, if any, into hosts[i].
func (b *statusBlock) host(i int, h *v1alpha1.HostImage) *v1alpha1.HostImage {
	if h == nil {
		return nil
	}
	c := *h
	c.Timestamp = nil
	c.DeepCopyInto(&b.hosts[i])
	b.hosts[i].Timestamp = b.time(h.Timestamp)
	return &b.hosts[i]
}

// time copies the time t, if any, into the next of times.
func (b *statusBlock) time(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	p := &b.times[b.nTimes]
	b.nTimes++
	*p = *t
	return p
}
