package options

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The controller caches every Pod and every Node of the cluster; most of
// what the API server sends for them (containers, container statuses,
// images, capacity, managedFields) is never read. TrimPod and TrimNode keep
// only the fields the controller reads, so the cache's size follows the
// number of objects, not their size. They are the one list of what the
// controller may read from a cached Pod or Node: a reader of another field
// must add it here (and to transform_test.go), or it reads a zero value.
//
// Nothing is written back from a trimmed object but what it keeps: Node
// changes are merge patches of annotations, spec.unschedulable and
// spec.taints (patch.Node), each locked on metadata.resourceVersion; Pods
// are only evicted or deleted by name.

// TrimPod keeps of a Pod what the drain, the health checks and the
// pods-by-node index read (controller/node/drain.go,
// controller/rollout/health.go, controller/index): metadata name,
// namespace, uid, resourceVersion, deletionTimestamp, ownerReferences
// (controller: DaemonSet pods stay, and a health check's DaemonSet is
// found by kind and name; none: needs drain.force) and the mirror-pod
// annotation; spec.nodeName and the emptyDir volumes (name and source);
// status.phase and the Ready condition (type, status and lastTransitionTime:
// a health check counts a DaemonSet pod Ready only since the reboot). Any other
// object passes unchanged.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
			OwnerReferences:   p.OwnerReferences,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	if v, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		out.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
	}
	for i := range p.Spec.Volumes {
		if v := &p.Spec.Volumes[i]; v.EmptyDir != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{EmptyDir: v.EmptyDir}})
		}
	}
	return out, nil
}

// TrimNode keeps of a Node what the pool, node and pinned-image-set
// reconcilers and their watches read: metadata name, uid,
// resourceVersion, labels (pool selectors), annotations (the slot marker,
// Karpenter's protection, and the base of the Node merge patches),
// ownerReferences (the NodeClaim), deletionTimestamp; spec.unschedulable
// and spec.taints; status.conditions and status.nodeInfo.bootID. Any
// other object passes unchanged.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              n.Name,
			UID:               n.UID,
			ResourceVersion:   n.ResourceVersion,
			Labels:            n.Labels,
			Annotations:       n.Annotations,
			OwnerReferences:   n.OwnerReferences,
			DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec: corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
		Status: corev1.NodeStatus{
			Conditions: n.Status.Conditions,
			NodeInfo:   corev1.NodeSystemInfo{BootID: n.Status.NodeInfo.BootID},
		},
	}, nil
}

// CacheOptions are the manager's cache settings: Pods and Nodes trimmed
// (TrimPod, TrimNode), and managedFields dropped from every other cached
// object (the controller never reads them; its writes are merge patches
// and status updates, which keep the server's managedFields).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: TrimPod},
			&corev1.Node{}: {Transform: TrimNode},
		},
	}
}
