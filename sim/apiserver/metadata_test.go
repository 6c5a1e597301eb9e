package apiserver_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A Get of PartialObjectMetadata returns the stored object's metadata (its
// resourceVersion follows every write), and NotFound for a missing one,
// as a real API server serves as=PartialObjectMetadata.
func TestGetPartialObjectMetadata(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	p := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}}}
	p.Spec.Image = "registry.example/os@sha256:" + "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2"
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	get := func(name string) (*metav1.PartialObjectMetadata, error) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("BootcNodePool"))
		return m, c.Get(ctx, client.ObjectKey{Name: name}, m)
	}
	m, err := get("p")
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "p" || m.UID != p.UID || m.ResourceVersion != p.ResourceVersion || m.Labels["a"] != "b" {
		t.Fatalf("metadata %+v, want that of %+v", m.ObjectMeta, p.ObjectMeta)
	}
	m.Labels["a"] = "changed" // a copy: the stored object is untouched
	p.Status.Summary = "written"
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if m, err = get("p"); err != nil || m.ResourceVersion != p.ResourceVersion || m.Labels["a"] != "b" {
		t.Fatalf("after a status write: metadata %+v (%v), want resourceVersion %s and label a=b", m.ObjectMeta, err, p.ResourceVersion)
	}
	if _, err := get("missing"); !apierrors.IsNotFound(err) {
		t.Fatalf("missing pool: %v, want NotFound", err)
	}
}
