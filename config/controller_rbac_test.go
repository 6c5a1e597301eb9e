package config_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	ctrlopts "github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/resolve"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// testControllerAsItsServiceAccount runs the real controller, wired as
// cmd/bootroll-controller wires it (cache options, leader election, event
// recorder), as its service account, through a pool's life: membership,
// finalizer, status, a PinnedImageSet with a mirrored pull secret, and
// the pool's deletion. Every request the API server refuses fails the
// test; config/rbac_test.go's table is what it is checked against.
func testControllerAsItsServiceAccount(t *testing.T, cfg *rest.Config, admin client.Client) {
	ctx := context.Background()
	imp := rest.CopyConfig(cfg)
	imp.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + controllerName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	var mu sync.Mutex
	var refused []string
	imp.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusForbidden {
				mu.Lock()
				refused = append(refused, r.Method+" "+r.URL.RequestURI())
				mu.Unlock()
			}
			return resp, err
		})
	})

	// The world: a Ready node with a pod, a pool selecting it with a pull
	// secret, and a PinnedImageSet of the pool with a pull secret.
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	label := map[string]string{"bootroll-test": "rbac"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-rbac", Labels: label}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred", Namespace: namespace}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "work", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: v1alpha1.BootcNodePoolSpec{
		NodeSelector: label, Image: v1alpha1.ImageReference("quay.io/example/os@" + digest), ImagePullSecret: secret.Name}}
	set := &v1alpha1.PinnedImageSet{ObjectMeta: metav1.ObjectMeta{Name: "rbac"}, Spec: v1alpha1.PinnedImageSetSpec{
		Pool: pool.Name, Images: []v1alpha1.DigestReference{v1alpha1.DigestReference("quay.io/example/app@" + digest)},
		PullSecret: &v1alpha1.SecretReference{Namespace: namespace, Name: secret.Name}}}
	for _, o := range []client.Object{node, secret, pod, pool, set} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := admin.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}

	mgr, err := ctrl.NewManager(imp, ctrl.Options{
		Scheme:                  scheme,
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        "bootroll-controller.bootroll.dev",
		LeaderElectionNamespace: namespace,
	})
	if err != nil {
		t.Fatal(err)
	}
	err = controller.Setup(mgr, ctrlopts.Options{
		Clock:           clock.RealClock{},
		Resolver:        &resolve.Registry{},
		Recorder:        mgr.GetEventRecorderFor("bootroll-controller"), //nolint:staticcheck // as cmd/bootroll-controller
		Metrics:         ctrlopts.NewMetrics(nil),
		SecretNamespace: namespace,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; refused requests: %v", what, refused)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("the leader lease", func() bool {
		return admin.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "bootroll-controller.bootroll.dev"}, &coordinationv1.Lease{}) == nil
	})
	waitFor("BootcNode "+node.Name+" with the pool's image", func() bool {
		var bn v1alpha1.BootcNode
		return admin.Get(ctx, client.ObjectKey{Name: node.Name}, &bn) == nil && bn.Spec.DesiredImage != "" && len(bn.Spec.PinnedImageSets) == 1
	})
	waitFor("the pool's finalizer and status", func() bool {
		var p v1alpha1.BootcNodePool
		return admin.Get(ctx, client.ObjectKey{Name: pool.Name}, &p) == nil && slices.Contains(p.Finalizers, v1alpha1.Finalizer) && p.Status.ObservedGeneration > 0
	})
	waitFor("the mirrored pull secret", func() bool {
		var l corev1.SecretList
		return admin.List(ctx, &l, client.InNamespace(pullSecretNamespace)) == nil && len(l.Items) == 1
	})
	waitFor("the PinnedImageSet's status", func() bool {
		var s v1alpha1.PinnedImageSet
		return admin.Get(ctx, client.ObjectKey{Name: set.Name}, &s) == nil && len(s.Status.Conditions) > 0
	})
	if err := admin.Delete(ctx, pool); err != nil {
		t.Fatal(err)
	}
	waitFor("the pool and its BootcNode to go", func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: pool.Name}, &v1alpha1.BootcNodePool{})) &&
			apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Name: node.Name}, &v1alpha1.BootcNode{}))
	})
	var events corev1.EventList
	if err := admin.List(ctx, &events); err == nil {
		for _, e := range events.Items {
			if e.Source.Component == "bootroll-controller" || e.ReportingController == "bootroll-controller" {
				t.Logf("event %s %s: %s", e.Reason, e.InvolvedObject.Name, e.Message)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) > 0 {
		t.Errorf("the API server refused the controller's service account:\n  %s", strings.Join(refused, "\n  "))
	}
}
