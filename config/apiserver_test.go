package config_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/apitest"
)

// applyOrder creates namespaces and service accounts before what refers to
// them, and policies before their bindings.
var applyOrder = []string{"Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

func kindRank(kind string) int {
	if i := slices.Index(applyOrder, kind); i >= 0 {
		return i
	}
	return len(applyOrder)
}

// startEnvtest starts a real kube-apiserver and etcd (envtest, from
// KUBEBUILDER_ASSETS) with the CRDs of crdDirs, stopped when t ends, and
// returns its config and a client of the config scheme.
func startEnvtest(t *testing.T, crdDirs ...string) (*rest.Config, client.Client) {
	t.Helper()
	cfg := apitest.Start(t, crdDirs...)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// startAPIServer starts envtest with the CRDs of config/crd/bases and
// creates every other manifest of config/ on it, with strict server-side
// field validation.
func startAPIServer(t *testing.T) (*rest.Config, client.Client, map[string]manifest) {
	t.Helper()
	cfg, c := startEnvtest(t, filepath.Join("crd", "bases"))

	all := loadAll(t)
	idx := byKey(t, all)
	slices.SortStableFunc(all, func(a, b manifest) int {
		return kindRank(a.obj.GetObjectKind().GroupVersionKind().Kind) - kindRank(b.obj.GetObjectKind().GroupVersionKind().Kind)
	})
	ctx := context.Background()
	for _, m := range all {
		if m.obj.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
			continue // installed by envtest, which waits for them
		}
		obj := m.obj.DeepCopyObject().(client.Object)
		if err := c.Create(ctx, obj, client.FieldValidation("Strict")); err != nil {
			t.Fatalf("create %s from config/%s: %v", m.key(), m.file, err)
		}
	}
	return cfg, c, idx
}

type access struct {
	verb, group, resource, subresource, namespace string
}

func (a access) String() string {
	r := a.resource
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.group != "" {
		r = a.group + "/" + r
	}
	if a.namespace != "" {
		return a.verb + " " + r + " in " + a.namespace
	}
	return a.verb + " " + r
}

// allowed asks the API server's authorizer whether user may do a.
func allowed(t *testing.T, c client.Client, user string, a access) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace,
		},
	}}
	if err := c.Create(context.Background(), sar); err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	return sar.Status.Allowed
}

func checkAccess(t *testing.T, c client.Client, sa string, allow, deny []access) {
	t.Helper()
	user := "system:serviceaccount:" + namespace + ":" + sa
	for _, a := range allow {
		if !allowed(t, c, user, a) {
			t.Errorf("%s may not %s", sa, a)
		}
	}
	for _, a := range deny {
		if allowed(t, c, user, a) {
			t.Errorf("%s may %s, and should not", sa, a)
		}
	}
}

// TestManifestsOnAPIServer creates the manifests on a real API server and
// checks what they grant, and that the daemon's admission policy confines a
// daemon to its own node's BootcNode.
func TestManifestsOnAPIServer(t *testing.T) {
	cfg, c, idx := startAPIServer(t)
	ctx := context.Background()

	const bn = "bootroll.dev"
	t.Run("controller RBAC", func(t *testing.T) {
		// Exactly what the code uses (config/rbac_test.go), and
		// nothing it stopped using.
		checkAccess(t, c, controllerName, accessesOf(grantsOf(controllerUses)), append(accessesOf(removedGrants[controllerName]), []access{
			{"update", bn, "bootcnodepools", "", ""},
			{"create", bn, "bootcnodepools", "", ""},
			{"delete", bn, "bootcnodepools", "", ""},
			{"update", "", "nodes", "", ""},
			{"delete", "", "nodes", "", ""},
			{"delete", "", "pods", "", "default"},
			{"get", "", "secrets", "", "default"},
			{"list", "", "secrets", "", namespace},
			{"watch", "", "secrets", "", namespace},
			{"get", "", "configmaps", "", namespace},
			{"get", "coordination.k8s.io", "leases", "", "kube-system"},
			{"delete", "coordination.k8s.io", "leases", "", namespace},
			{"delete", "karpenter.sh", "nodeclaims", "", ""},
			{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", ""},
		}...))
	})
	t.Run("daemon RBAC", func(t *testing.T) {
		checkAccess(t, c, daemonName, accessesOf(grantsOf(daemonUses)), append(accessesOf(removedGrants[daemonName]), []access{
			{"update", bn, "bootcnodes", "status", ""},
			{"patch", bn, "bootcnodes", "", ""},
			{"update", bn, "bootcnodes", "", ""},
			{"create", bn, "bootcnodes", "", ""},
			{"delete", bn, "bootcnodes", "", ""},
			{"get", bn, "bootcnodepools", "", ""},
			{"list", "", "nodes", "", ""},
			{"patch", "", "nodes", "", ""},
			{"get", "", "secrets", "", namespace},
			{"list", "", "pods", "", ""},
		}...))
	})

	t.Run("daemon writes only its own BootcNode", func(t *testing.T) {
		for _, name := range []string{"node-a", "node-b"} {
			if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.BootcNodeSpec{Pool: "workers"}}); err != nil {
				t.Fatal(err)
			}
		}
		// A daemon pod on node-a, from the DaemonSet's template: this also
		// shows the template passes the API server's validation and Pod
		// Security admission in the namespace.
		ds := get[*appsv1.DaemonSet](t, idx, "DaemonSet/"+namespace+"/"+daemonName)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "daemon-node-a", Namespace: namespace, Labels: ds.Spec.Template.Labels},
			Spec:       *ds.Spec.Template.Spec.DeepCopy(),
		}
		pod.Spec.NodeName = "node-a"
		if err := c.Create(ctx, pod, client.FieldValidation("Strict")); err != nil {
			t.Fatalf("create a pod from the DaemonSet template: %v", err)
		}

		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		token := func(bound *authenticationv1.BoundObjectReference) client.Client {
			t.Helper()
			tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, ds.Spec.Template.Spec.ServiceAccountName,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600), BoundObjectRef: bound}},
				metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("token request: %v", err)
			}
			dc, err := client.New(&rest.Config{Host: cfg.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}},
				client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			return dc
		}
		podClient := token(&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
		unboundClient := token(nil)

		patch := func(dc client.Client, node string) error {
			b := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: node}}
			return dc.Status().Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"status":{"daemon":{"phase":"Idle"}}}`)))
		}

		// The daemon reads its BootcNode as its cache does: a list
		// selected by name.
		var own v1alpha1.BootcNodeList
		if err := podClient.List(ctx, &own, client.MatchingFields{"metadata.name": "node-a"}); err != nil || len(own.Items) != 1 {
			t.Fatalf("daemon on node-a cannot list BootcNode node-a: %v (%d items)", err, len(own.Items))
		}
		if err := patch(podClient, "node-a"); err != nil {
			t.Fatalf("daemon on node-a cannot patch the status of BootcNode node-a: %v", err)
		}

		// The policy takes effect once the API server has loaded it; until
		// then the write is allowed, so wait for the first denial.
		var err2 error
		deadline := time.Now().Add(30 * time.Second)
		for {
			err2 = patch(podClient, "node-b")
			if err2 != nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err2 == nil {
			t.Fatal("daemon on node-a patched the status of BootcNode node-b")
		}
		t.Logf("API server: %v", err2)
		if !apierrors.IsForbidden(err2) || !strings.Contains(err2.Error(), "may only write BootcNode node-a, not node-b") {
			t.Errorf("want a Forbidden error from %s naming both nodes, got %v", daemonPolicyName, err2)
		}

		// A token with no node name: one not bound to a pod, and a user
		// with no extras at all (request.userInfo.extra absent).
		noNode := "bootroll-daemon: the service account token has no node name (authentication.kubernetes.io/node-name); " +
			"a daemon must use a bound token of its pod"
		err = patch(unboundClient, "node-a")
		t.Logf("API server, token not bound to a pod: %v", err)
		wantRefused(t, "daemon token not bound to a pod", err, noNode)
		imp := rest.CopyConfig(cfg)
		imp.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + daemonName,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
		noExtra, err := client.New(imp, client.Options{Scheme: scheme})
		if err != nil {
			t.Fatal(err)
		}
		err = patch(noExtra, "node-a")
		t.Logf("API server, user with no extras: %v", err)
		wantRefused(t, "daemon user with no extras", err, noNode)

		// The daemon's own node still works, and others are not matched.
		if err := patch(podClient, "node-a"); err != nil {
			t.Errorf("daemon on node-a cannot patch BootcNode node-a with the policy active: %v", err)
		}
		if err := patch(c, "node-b"); err != nil {
			t.Errorf("the policy blocks other users: %v", err)
		}
		if err := podClient.Patch(ctx, &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
			client.RawPatch(types.MergePatchType, []byte(`{"spec":{"bootOrder":{"image":"x","at":"2026-01-05T00:00:00Z"}}}`))); !apierrors.IsForbidden(err) {
			t.Errorf("daemon patching its BootcNode's spec: want Forbidden, got %v", err)
		}

		t.Run("controller's status fields", func(t *testing.T) { testDaemonStatusFields(t, c, podClient, "node-a") })
		t.Run("only the status subresource", func(t *testing.T) { testDaemonMainResource(t, c, podClient, "node-a") })
	})

	t.Run("controller runs as its service account", func(t *testing.T) {
		testControllerAsItsServiceAccount(t, cfg, c)
	})
}
