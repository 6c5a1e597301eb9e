package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestCordonedByOther: the owners of spec.unschedulable as kube-apiserver
// writes them (sim/apiserver/conformance TestCordonOwners compares the
// twin's with a real one's).
func TestCordonedByOther(t *testing.T) {
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	const cordon = `{"f:spec":{"f:unschedulable":{}}}`
	const marker = `{"f:metadata":{"f:annotations":{"f:bootroll.dev/slot":{}}}}`
	for _, tc := range []struct {
		name    string
		entries []metav1.ManagedFieldsEntry
		want    bool
	}{
		{"bootroll's cordon", []metav1.ManagedFieldsEntry{entry(v1alpha1.FieldManager, `{"f:metadata":{"f:annotations":{"f:bootroll.dev/slot":{}}},"f:spec":{"f:unschedulable":{}}}`)}, false},
		{"an admin's cordon beside bootroll's marker", []metav1.ManagedFieldsEntry{entry(v1alpha1.FieldManager, marker), entry("kubectl-cordon", cordon)}, true},
		{"no managedFields", nil, false},
		{"others own other fields", []metav1.ManagedFieldsEntry{entry("kubelet", `{"f:metadata":{"f:labels":{"f:kubernetes.io/hostname":{}}}}`)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{ManagedFields: tc.entries}, Spec: corev1.NodeSpec{Unschedulable: true}}
			if got := cordonedByOther(n); got != tc.want {
				t.Errorf("cordonedByOther = %v, want %v", got, tc.want)
			}
		})
	}
}
