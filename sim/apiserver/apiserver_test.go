package apiserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

var (
	t0  = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx = context.Background()
)

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, policyv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// newServer returns a server on a fresh engine's clock.
func newServer(t testing.TB) (*apiserver.Server, *engine.Engine) {
	t.Helper()
	e := engine.New(t0, 1)
	return apiserver.New(newScheme(t), e.Clock()), e
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func pod(ns, name, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "main", Image: "img"}},
		},
	}
}

func bootcNode(name string) *v1alpha1.BootcNode {
	return &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.BootcNodeSpec{Pool: "pool"},
	}
}

func mustCreate(t testing.TB, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

func get[T client.Object](t testing.TB, c client.Client, obj T) T {
	t.Helper()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, obj.GetName(), err)
	}
	return obj
}

func TestCreateAndGet(t *testing.T) {
	s, e := newServer(t)
	c := s.Client()
	e.RunUntil(t0.Add(90*time.Second + 500*time.Millisecond))

	n := node("n1")
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	mustCreate(t, c, n)
	if got, want := n.GetUID(), "uid-00000001"; string(got) != want {
		t.Errorf("uid = %q, want %q", got, want)
	}
	if got, want := n.ResourceVersion, "1"; got != want {
		t.Errorf("resourceVersion = %q, want %q", got, want)
	}
	if got, want := n.CreationTimestamp.Time, t0.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("creationTimestamp = %v, want %v (the clock, in whole seconds)", got, want)
	}
	if n.Generation != 0 {
		t.Errorf("generation = %d, want 0 (kube-apiserver gives Nodes none)", n.Generation)
	}
	bn := bootcNode("bn1")
	mustCreate(t, c, bn)
	if bn.Generation != 1 {
		t.Errorf("generation of a custom resource = %d, want 1", bn.Generation)
	}

	// The caller's object and the returned one are copies.
	n.Labels = map[string]string{"mutated": "true"}
	got := get(t, c, node("n1"))
	if got.Labels != nil {
		t.Errorf("store changed through the created object: labels %v", got.Labels)
	}
	got.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("1")
	if again := get(t, c, node("n1")); again.Status.Capacity.Cpu().String() != "4" {
		t.Errorf("store changed through a Get result: cpu %v", again.Status.Capacity.Cpu())
	}
	if got.Kind != "Node" || got.APIVersion != "v1" {
		t.Errorf("Get TypeMeta = %q %q, want Node v1", got.Kind, got.APIVersion)
	}
	if got.Status.Capacity == nil {
		t.Error("Create of a core Node dropped its status")
	}
}

func TestCreateErrors(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, node("taken"))
	withRV := node("rv")
	withRV.ResourceVersion = "5"

	tests := []struct {
		name  string
		obj   client.Object
		check func(error) bool
	}{
		{"exists", node("taken"), apierrors.IsAlreadyExists},
		{"resourceVersion set", withRV, func(err error) bool {
			// kube-apiserver's storage answers a bare 500.
			var st apierrors.APIStatus
			return errors.As(err, &st) && st.Status().Code == 500 && apierrors.ReasonForError(err) == ""
		}},
		{"no namespace for a namespaced kind", pod("", "p", ""), apierrors.IsBadRequest},
		{"no name", &corev1.Node{}, apierrors.IsInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Create(ctx, tt.obj)
			if !tt.check(err) {
				t.Errorf("Create error = %v", err)
			}
		})
	}
}

func TestGenerateNameAndScope(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	a := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-", Namespace: "ignored"}}
	b := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "node-"}}
	mustCreate(t, c, a, b)
	if a.Name != "node-00001" || b.Name != "node-00002" {
		t.Errorf("generated names = %q, %q, want node-00001, node-00002", a.Name, b.Name)
	}
	if a.Namespace != "" {
		t.Errorf("cluster-scoped Node kept namespace %q", a.Namespace)
	}
	// A namespace in the key of a cluster-scoped kind is ignored.
	if err := c.Get(ctx, client.ObjectKey{Namespace: "x", Name: a.Name}, &corev1.Node{}); err != nil {
		t.Errorf("Get of a Node with a namespace: %v", err)
	}
	for _, tt := range []struct {
		obj  client.Object
		want bool
	}{
		{&corev1.Node{}, false},
		{&corev1.Pod{}, true},
		{&v1alpha1.BootcNode{}, false},
		{&v1alpha1.BootcNodePool{}, false},
		{&corev1.ConfigMap{}, true},
	} {
		got, err := c.IsObjectNamespaced(tt.obj)
		if err != nil || got != tt.want {
			t.Errorf("IsObjectNamespaced(%T) = %v, %v, want %v", tt.obj, got, err, tt.want)
		}
	}
}

func TestGetNotFound(t *testing.T) {
	s, _ := newServer(t)
	err := s.Client().Get(ctx, client.ObjectKey{Name: "missing"}, &corev1.Node{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Get error = %v, want NotFound", err)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details.Kind != "nodes" || st.Status().Details.Group != "" {
		t.Errorf("NotFound details = %+v, want resource nodes", st.Status().Details)
	}
	err = s.Client().Get(ctx, client.ObjectKey{Name: "missing"}, &v1alpha1.BootcNode{})
	if !errors.As(err, &st) || st.Status().Details.Kind != "bootcnodes" || st.Status().Details.Group != "bootroll.dev" {
		t.Errorf("NotFound details = %+v, want bootcnodes.bootroll.dev", st.Status().Details)
	}
}

func TestUpdate(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, node("n"))

	stale := get(t, c, node("n"))
	fresh := get(t, c, node("n"))
	fresh.Labels = map[string]string{"a": "1"}
	if err := c.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.ResourceVersion != "2" {
		t.Errorf("resourceVersion after update = %q, want 2", fresh.ResourceVersion)
	}
	stale.Labels = map[string]string{"b": "1"}
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Errorf("Update with a stale resourceVersion: %v, want Conflict", err)
	}
	stale.ResourceVersion = ""
	if err := c.Update(ctx, stale); err != nil {
		t.Errorf("Update without resourceVersion: %v, want unconditional update", err)
	}
	if got := get(t, c, node("n")); got.Labels["b"] != "1" || got.ResourceVersion != "3" {
		t.Errorf("after unconditional update: labels %v rv %s", got.Labels, got.ResourceVersion)
	}
	if err := c.Update(ctx, node("missing")); !apierrors.IsNotFound(err) {
		t.Errorf("Update of a missing object: %v, want NotFound", err)
	}
	other := get(t, c, node("n"))
	other.UID = "uid-other"
	if err := c.Update(ctx, other); !apierrors.IsConflict(err) {
		t.Errorf("Update with another UID: %v, want Conflict", err)
	}
}

func TestNoOpWriteIsNotAWrite(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, bootcNode("b"))
	var events int
	s.Subscribe(func(apiserver.Event) { events++ })
	b := get(t, c, bootcNode("b"))
	rv := b.ResourceVersion
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, b, client.MergeFrom(b.DeepCopy())); err != nil {
		t.Fatal(err)
	}
	if b.ResourceVersion != rv || events != 0 {
		t.Errorf("no-op writes: resourceVersion %s → %s, %d events; want unchanged and none", rv, b.ResourceVersion, events)
	}
}

func TestGenerationAndStatusSubresource(t *testing.T) {
	tests := []struct {
		name     string
		write    func(c client.Client, b *v1alpha1.BootcNode) error
		wantGen  int64
		wantPool string
		wantPh   v1alpha1.NodePhase
		wantLbl  string
	}{{
		name: "update of spec bumps generation",
		write: func(c client.Client, b *v1alpha1.BootcNode) error {
			b.Spec.Pool = "other"
			return c.Update(ctx, b)
		},
		wantGen: 2, wantPool: "other",
	}, {
		name: "update of metadata keeps generation",
		write: func(c client.Client, b *v1alpha1.BootcNode) error {
			b.Labels = map[string]string{"l": "v"}
			return c.Update(ctx, b)
		},
		wantGen: 1, wantPool: "pool", wantLbl: "v",
	}, {
		name: "update ignores status",
		write: func(c client.Client, b *v1alpha1.BootcNode) error {
			b.Status.Phase = "Changed"
			return c.Update(ctx, b)
		},
		wantGen: 1, wantPool: "pool", wantPh: "Seeded",
	}, {
		name: "status update ignores spec and metadata",
		write: func(c client.Client, b *v1alpha1.BootcNode) error {
			b.Spec.Pool = "other"
			b.Labels = map[string]string{"l": "v"}
			b.Status.Phase = "Changed"
			return c.Status().Update(ctx, b)
		},
		wantGen: 1, wantPool: "pool", wantPh: "Changed",
	}, {
		name: "merge patch ignores status",
		write: func(c client.Client, b *v1alpha1.BootcNode) error {
			base := b.DeepCopy()
			b.Spec.Pool = "other"
			b.Status.Phase = "Changed"
			return c.Patch(ctx, b, client.MergeFrom(base))
		},
		wantGen: 2, wantPool: "other", wantPh: "Seeded",
	}, {
		name: "status merge patch changes only status",
		write: func(c client.Client, b *v1alpha1.BootcNode) error {
			base := b.DeepCopy()
			b.Spec.Pool = "other"
			b.Status.Phase = "Changed"
			return c.Status().Patch(ctx, b, client.MergeFrom(base))
		},
		wantGen: 1, wantPool: "pool", wantPh: "Changed",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			c := s.Client()
			b := bootcNode("b")
			b.Status.Phase = "Dropped"
			mustCreate(t, c, b)
			if b.Status.Phase != "" {
				t.Fatalf("Create kept status %q behind a status subresource", b.Status.Phase)
			}
			b.Status.Phase = "Seeded"
			if err := c.Status().Update(ctx, b); err != nil {
				t.Fatal(err)
			}
			if err := tt.write(c, b); err != nil {
				t.Fatal(err)
			}
			got := get(t, c, bootcNode("b"))
			if got.Generation != tt.wantGen || got.Spec.Pool != tt.wantPool ||
				got.Status.Phase != tt.wantPh && tt.wantPh != "" || got.Labels["l"] != tt.wantLbl {
				t.Errorf("got generation %d pool %q phase %q label %q, want %d %q %q %q",
					got.Generation, got.Spec.Pool, got.Status.Phase, got.Labels["l"],
					tt.wantGen, tt.wantPool, tt.wantPh, tt.wantLbl)
			}
			if b.ResourceVersion != got.ResourceVersion {
				t.Errorf("written object has resourceVersion %s, stored %s", b.ResourceVersion, got.ResourceVersion)
			}
		})
	}
}

func TestStatusSubresourceSettings(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm"}}
	mustCreate(t, c, cm)
	if err := c.Status().Update(ctx, cm); !apierrors.IsNotFound(err) {
		t.Errorf("Status().Update of a ConfigMap: %v, want NotFound (no such path)", err)
	}
	bn := schema.GroupVersionKind{Group: "bootroll.dev", Version: "v1alpha1", Kind: "BootcNode"}
	if err := s.SetStatusSubresource(bn, false); err != nil {
		t.Fatal(err)
	}
	b := bootcNode("b")
	b.Status.Phase = "Kept"
	mustCreate(t, c, b)
	b.Status.Phase = "Updated"
	if err := c.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, bootcNode("b")); got.Status.Phase != "Updated" || got.Generation != 2 {
		t.Errorf("without a status subresource: phase %q generation %d, want Updated 2", got.Status.Phase, got.Generation)
	}
	if err := s.SetStatusSubresource(corev1.SchemeGroupVersion.WithKind("ConfigMap"), true); err == nil {
		t.Error("SetStatusSubresource of a kind without a Status field succeeded")
	}
}
