// Package fakeapi is the controller-runtime fake client the controller's
// unit tests share: the Kubernetes, bootroll and (unstructured) NodeClaim
// kinds, the status subresource of pools and BootcNodes, and the
// controller's field indexes. Only tests import it.
package fakeapi

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

// Client returns a fake client holding objs, for unit tests of one
// reconcile.
func Client(t testing.TB, objs ...client.Object) client.Client {
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
