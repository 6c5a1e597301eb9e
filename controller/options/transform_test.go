package options

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

var (
	t0      = metav1.NewTime(time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC))
	managed = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}}
	owner   = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: ptr.To(true)}}
)

func fullPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1-a", Namespace: "shop", UID: types.UID("p1"), ResourceVersion: "42", Generation: 3,
			DeletionTimestamp: &t0, OwnerReferences: owner, ManagedFields: managed, Finalizers: []string{"x"},
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "m", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		},
		Spec: corev1.PodSpec{
			NodeName:                      "n1",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Volumes: []corev1.Volume{
				{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			},
			Containers: []corev1.Container{{Name: "web", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: t0},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0, Message: "m"},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", Ready: true}},
		},
	}
}

// A trimmed Pod keeps exactly what the drain and the pods-by-node index
// read, and drops managedFields and everything else.
func TestTrimPodKeepsWhatTheDrainReads(t *testing.T) {
	in := fullPod()
	got, err := TrimPod(in)
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*corev1.Pod)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1-a", Namespace: "shop", UID: "p1", ResourceVersion: "42",
			DeletionTimestamp: &t0, OwnerReferences: owner,
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "m"},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1",
			Volumes:  []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: t0}}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("trimmed pod\n got %+v\nwant %+v", p, want)
	}
	// The fields read, one by one (controller/node/drain.go, controller/index).
	if p.Name != in.Name || p.Namespace != in.Namespace || p.ResourceVersion != in.ResourceVersion ||
		p.DeletionTimestamp == nil || metav1.GetControllerOf(p) == nil || p.Spec.NodeName != "n1" ||
		p.Status.Phase != corev1.PodRunning || p.Annotations[corev1.MirrorPodAnnotationKey] != "m" ||
		len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("a field the controller reads was dropped: %+v", p)
	}
	if p.ManagedFields != nil || p.Labels != nil || p.Spec.Containers != nil || p.Status.ContainerStatuses != nil {
		t.Errorf("unread fields kept: %+v", p)
	}
	// A pod without the mirror annotation, emptyDir or Ready condition
	// keeps neither map nor slice.
	plain := fullPod()
	plain.Annotations = map[string]string{"a": "b"}
	plain.Spec.Volumes = plain.Spec.Volumes[1:]
	plain.Status.Conditions = plain.Status.Conditions[:1]
	got, _ = TrimPod(plain)
	if q := got.(*corev1.Pod); q.Annotations != nil || q.Spec.Volumes != nil || q.Status.Conditions != nil {
		t.Errorf("plain pod kept annotations %v, volumes %v, conditions %v", q.Annotations, q.Spec.Volumes, q.Status.Conditions)
	}
}

// A trimmed Node keeps what the reconcilers, watches and Node patches
// read, and drops managedFields and the rest.
func TestTrimNodeKeepsWhatTheReconcilersRead(t *testing.T) {
	taints := []corev1.Taint{{Key: v1alpha1.KarpenterDisruptedTaint, Effect: corev1.TaintEffectNoSchedule}}
	conds := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: t0, Reason: "KubeletNotReady"}}
	nodeOwner := []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "nc"}}
	in := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n1", UID: "u1", ResourceVersion: "7", DeletionTimestamp: &t0, ManagedFields: managed,
			Labels:          map[string]string{"pool": "web"},
			Annotations:     map[string]string{v1alpha1.AnnotationSlot: "web"},
			OwnerReferences: nodeOwner, Finalizers: []string{"f"},
		},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: taints, ProviderID: "kwok://n1", PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{
			Conditions: conds,
			NodeInfo:   corev1.NodeSystemInfo{BootID: "b1", KernelVersion: "6.1", MachineID: "m"},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Images:     []corev1.ContainerImage{{Names: []string{"nginx"}, SizeBytes: 1}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		},
	}
	got, err := TrimNode(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n1", UID: "u1", ResourceVersion: "7", DeletionTimestamp: &t0,
			Labels: in.Labels, Annotations: in.Annotations, OwnerReferences: nodeOwner,
		},
		Spec:   corev1.NodeSpec{Unschedulable: true, Taints: taints},
		Status: corev1.NodeStatus{Conditions: conds, NodeInfo: corev1.NodeSystemInfo{BootID: "b1"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("trimmed node\n got %+v\nwant %+v", got, want)
	}
}

// Other objects pass unchanged; the manager trims Pods and Nodes and strips
// managedFields from the rest.
func TestCacheOptions(t *testing.T) {
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if got, _ := TrimPod(bn); got != bn {
		t.Error("TrimPod changed a BootcNode")
	}
	if got, _ := TrimNode(bn); got != bn {
		t.Error("TrimNode changed a BootcNode")
	}
	o := CacheOptions()
	if o.DefaultTransform == nil || len(o.ByObject) != 2 {
		t.Fatalf("cache options %+v: want a default transform and Pod and Node transforms", o)
	}
	for obj, by := range o.ByObject {
		if by.Transform == nil {
			t.Errorf("%T has no transform", obj)
		}
	}
	withManaged := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: managed}}
	got, err := o.DefaultTransform(withManaged)
	if err != nil {
		t.Fatal(err)
	}
	if got.(*v1alpha1.BootcNode).ManagedFields != nil {
		t.Error("the default transform kept managedFields")
	}
}
