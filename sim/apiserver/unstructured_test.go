package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

var (
	nodeClaimGVK     = schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"}
	nodeClaimListGVK = nodeClaimGVK.GroupVersion().WithKind("NodeClaimList")
)

func nodeClaim(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nodeClaimGVK)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, "default", "spec", "nodeClassRef", "name")
	return u
}

func newClaimList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(nodeClaimListGVK)
	return l
}

func TestUnstructuredKind(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	if err := c.Get(ctx, client.ObjectKey{Name: "x"}, nodeClaim("x")); !meta.IsNoMatchError(err) {
		t.Fatalf("Get of an unregistered kind: %v, want NoKindMatchError", err)
	}
	if err := s.RegisterUnstructured(nodeClaimGVK, schema.GroupVersionKind{}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterUnstructured(corev1.SchemeGroupVersion.WithKind("Node"), schema.GroupVersionKind{}, false); err == nil {
		t.Error("registering a typed kind as unstructured succeeded")
	}
	if err := s.IndexField(ctx, nodeClaim(""), "status.nodeName", func(o client.Object) []string {
		n, _, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "status", "nodeName")
		return []string{n}
	}); err != nil {
		t.Fatal(err)
	}

	nc := nodeClaim("b")
	_ = unstructured.SetNestedField(nc.Object, "dropped", "status", "nodeName")
	mustCreate(t, c, nc, nodeClaim("a"))
	if _, found, _ := unstructured.NestedString(nc.Object, "status", "nodeName"); found {
		t.Error("Create kept status behind the status subresource")
	}
	if nc.GetUID() == "" || nc.GetResourceVersion() == "" || nc.GetGeneration() != 1 {
		t.Errorf("server fields not set: %v", nc.Object["metadata"])
	}

	_ = unstructured.SetNestedField(nc.Object, "n1", "status", "nodeName")
	if err := c.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	base := nc.DeepCopy()
	nc.SetLabels(map[string]string{"l": "v"})
	_ = unstructured.SetNestedField(nc.Object, "other", "spec", "nodeClassRef", "name")
	_ = unstructured.SetNestedField(nc.Object, "ignored", "status", "nodeName")
	if err := c.Patch(ctx, nc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	got := nodeClaim("b")
	if err := c.Get(ctx, client.ObjectKey{Name: "b"}, got); err != nil {
		t.Fatal(err)
	}
	node, _, _ := unstructured.NestedString(got.Object, "status", "nodeName")
	class, _, _ := unstructured.NestedString(got.Object, "spec", "nodeClassRef", "name")
	if node != "n1" || class != "other" || got.GetLabels()["l"] != "v" || got.GetGeneration() != 2 {
		t.Errorf("after status update and patch: node %q class %q labels %v generation %d; want n1 other l=v 2",
			node, class, got.GetLabels(), got.GetGeneration())
	}
	if err := c.Patch(ctx, got, client.RawPatch(types.StrategicMergePatchType, []byte(`{}`))); !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch of a custom resource: %v, want UnsupportedMediaType", err)
	}

	list := newClaimList()
	if err := c.List(ctx, list, client.MatchingFields{"status.nodeName": "n1"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].GetName() != "b" {
		t.Errorf("indexed unstructured List = %v, want [b]", list.Items)
	}
	if err := c.List(ctx, list); err != nil || len(list.Items) != 2 || list.Items[0].GetName() != "a" {
		t.Errorf("unstructured List = %v, %v; want [a b]", list.Items, err)
	}
	if err := c.List(ctx, &corev1.NodeList{}, client.MatchingFields{"status.nodeName": "n1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("index of another kind used: %v", err)
	}

	mapping, err := c.RESTMapper().RESTMapping(nodeClaimGVK.GroupKind(), "v1")
	if err != nil || mapping.Resource.Resource != "nodeclaims" || mapping.Scope.Name() != meta.RESTScopeNameRoot {
		t.Errorf("RESTMapping = %+v, %v; want nodeclaims, cluster-scoped", mapping, err)
	}
}

func TestRemoveAndAddKind(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	if err := s.RegisterUnstructured(nodeClaimGVK, nodeClaimListGVK, false); err != nil {
		t.Fatal(err)
	}
	claim := nodeClaim("a")
	mustCreate(t, c, claim)
	dependent := pod("ns", "p", "")
	dependent.OwnerReferences = []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "a", UID: claim.GetUID()}}
	mustCreate(t, c, dependent)
	var events []string
	s.Subscribe(func(ev apiserver.Event) { events = append(events, string(ev.Type)+" "+ev.Object.GetName()) })

	if err := s.RemoveKind(nodeClaimGVK); err != nil {
		t.Fatal(err)
	}
	if want := []string{"DELETED a", "DELETED p"}; !equalStrings(events, want) {
		t.Errorf("events of RemoveKind = %v, want %v", events, want)
	}
	for name, err := range map[string]error{
		"Get":    c.Get(ctx, client.ObjectKey{Name: "a"}, nodeClaim("a")),
		"List":   c.List(ctx, newClaimList()),
		"Create": c.Create(ctx, nodeClaim("b")),
	} {
		if !meta.IsNoMatchError(err) {
			t.Errorf("%s after RemoveKind: %v, want NoKindMatchError", name, err)
		}
	}
	if _, err := c.RESTMapper().RESTMapping(nodeClaimGVK.GroupKind(), "v1"); !meta.IsNoMatchError(err) {
		t.Errorf("RESTMapping after RemoveKind: %v, want NoKindMatchError", err)
	}
	if _, err := c.IsObjectNamespaced(nodeClaim("a")); !meta.IsNoMatchError(err) {
		t.Errorf("IsObjectNamespaced after RemoveKind: %v, want NoKindMatchError", err)
	}

	if err := s.AddKind(nodeClaimGVK); err != nil {
		t.Fatal(err)
	}
	list := newClaimList()
	if err := c.List(ctx, list); err != nil || len(list.Items) != 0 {
		t.Errorf("List after AddKind = %v, %v; want empty", list.Items, err)
	}
	mustCreate(t, c, nodeClaim("b"))
	if _, err := c.RESTMapper().RESTMapping(nodeClaimGVK.GroupKind(), "v1"); err != nil {
		t.Errorf("RESTMapping after AddKind: %v", err)
	}
	if err := s.AddKind(schema.GroupVersionKind{Group: "x", Version: "v1", Kind: "Unknown"}); err == nil {
		t.Error("AddKind of an unknown kind succeeded")
	}
}

func TestTypedKindAsUnstructured(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	mustCreate(t, c, node("n"))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	if err := c.Get(ctx, client.ObjectKey{Name: "n"}, u); err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"via": "unstructured"})
	if err := c.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, node("n")); got.Labels["via"] != "unstructured" {
		t.Errorf("labels = %v after an unstructured update", got.Labels)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "n"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of a pod named like the node: %v, want NotFound", err)
	}
}

func TestRESTMapperAndGVK(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	for _, tt := range []struct {
		gk       schema.GroupKind
		resource string
		scope    meta.RESTScopeName
	}{
		{schema.GroupKind{Kind: "Node"}, "nodes", meta.RESTScopeNameRoot},
		{schema.GroupKind{Kind: "Pod"}, "pods", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}, "poddisruptionbudgets", meta.RESTScopeNameNamespace},
		{schema.GroupKind{Group: "bootroll.dev", Kind: "BootcNodePool"}, "bootcnodepools", meta.RESTScopeNameRoot},
	} {
		m, err := c.RESTMapper().RESTMapping(tt.gk)
		if err != nil || m.Resource.Resource != tt.resource || m.Scope.Name() != tt.scope {
			t.Errorf("RESTMapping(%v) = %+v, %v; want %s %s", tt.gk, m, err, tt.resource, tt.scope)
		}
	}
	if _, err := c.RESTMapper().RESTMapping(schema.GroupKind{Group: "policy", Kind: "Eviction"}); !meta.IsNoMatchError(err) {
		t.Errorf("Eviction is not a served kind, RESTMapping: %v", err)
	}
	gvk, err := c.GroupVersionKindFor(&corev1.Pod{})
	if err != nil || gvk != corev1.SchemeGroupVersion.WithKind("Pod") {
		t.Errorf("GroupVersionKindFor(Pod) = %v, %v", gvk, err)
	}
	if c.Scheme() == nil {
		t.Error("Scheme() = nil")
	}
}
