package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/karpenter"
)

// fakeClient is a controller-runtime fake client holding objs, with the
// Kubernetes, bootroll and (unstructured) NodeClaim kinds and the status
// subresource of pools and BootcNodes and the controller's field indexes,
// for unit tests of one reconcile.
func fakeClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	sch.AddKnownTypeWithName(karpenter.NodeClaimGVK, &unstructured.Unstructured{})
	sch.AddKnownTypeWithName(karpenter.NodeClaimGVK.GroupVersion().WithKind("NodeClaimList"), &unstructured.UnstructuredList{})
	b := fake.NewClientBuilder().WithScheme(sch).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.BootcNodePool{}, &v1alpha1.BootcNode{})
	for _, ix := range index.All() {
		b = b.WithIndex(ix.Object, ix.Field, ix.Extract)
	}
	return b.Build()
}
