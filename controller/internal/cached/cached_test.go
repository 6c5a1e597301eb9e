package cached

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestPoolAsFind checks that Pool (one Get by name) answers as Find over
// Pools does: the named pool, nil for a name no pool has or an empty name,
// and errors other than NotFound passed on.
func TestPoolAsFind(t *testing.T) {
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for _, name := range []string{"a", "b", "workers"} {
		p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.NodeSelector = map[string]string{"pool": name}
		objs = append(objs, p)
	}
	c := fake.NewClientBuilder().WithScheme(sch).WithObjects(objs...).Build()
	ctx := context.Background()
	pools, err := Pools(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "workers", "c", ""} {
		got, err := Pool(ctx, c, name)
		if err != nil {
			t.Fatalf("Pool(%q): %v", name, err)
		}
		want := Find(pools, name)
		if (got == nil) != (want == nil) {
			t.Fatalf("Pool(%q) = %v, Find gives %v", name, got, want)
		}
		if got != nil && (got.Name != want.Name || got.Spec.NodeSelector["pool"] != name) {
			t.Fatalf("Pool(%q) = %+v, want %+v", name, got, want)
		}
	}
	boom := errors.New("boom")
	failing := fake.NewClientBuilder().WithScheme(sch).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		},
	}).Build()
	if _, err := Pool(ctx, failing, "a"); !errors.Is(err, boom) {
		t.Fatalf("Pool with a failing Get: err %v, want %v", err, boom)
	}
}
