package clusterrun

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/internal/apitest"
)

// TestFaultsThroughChaosMesh: on a real API server with Chaos Mesh's CRDs,
// a run with an external controller uses Chaos Mesh (auto), creates the
// objects of a fault step when it comes (a controllerRestart's PodChaos; a
// nodeCrash's partition, towards the address of the kubernetes Service's
// endpoint, and its daemon PodChaos) and deletes them when the fault ends.
// Without the CRDs, auto does not use Chaos Mesh and on is an error naming
// what is missing; with a controller the run started, auto does not use it.
func TestFaultsThroughChaosMesh(t *testing.T) {
	c := apitest.Client(t, apitest.Start(t, "../../kind/chaos-mesh-crds"), chaosv1alpha1.AddToScheme)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bootroll-system"}}); err != nil {
		t.Fatal(err)
	}
	sc := parse(t, faultScenario+"  - {at: 8m, nodeCrash: {node: workers-0, downFor: 30s}}\n")
	r := &runner{ctx: ctx, sc: sc, opts: Options{ExternalController: true, ExternalDaemon: true},
		c: c, act: newActor(c, sc), rng: rand.New(rand.NewPCG(1, 2)), nodes: map[string]string{}, start: time.Now()}
	on, err := r.useChaos()
	if err != nil || !on {
		t.Fatalf("auto with an external controller and Chaos Mesh's CRDs: use %v, %v; want true", on, err)
	}
	r.chaosOn = true
	steps, _ := Plan(sc, PlanOptions{Seed: 1, ExternalController: true, ExternalDaemon: true, Chaos: true})
	var restart, crash Step
	for _, s := range steps {
		switch s.Name {
		case "controllerRestart":
			restart = s
		case "nodeCrash":
			crash = s
		}
	}
	r.step(restart)
	r.step(crash)
	for _, n := range r.notices {
		t.Errorf("notice: %s", n)
	}
	var pods chaosv1alpha1.PodChaosList
	if err := c.List(ctx, &pods, client.InNamespace("bootroll-system")); err != nil {
		t.Fatal(err)
	}
	var nets chaosv1alpha1.NetworkChaosList
	if err := c.List(ctx, &nets, client.InNamespace("bootroll-system")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 || len(nets.Items) != 1 {
		t.Fatalf("after the two fault steps: %d PodChaos, %d NetworkChaos; want 2 and 1", len(pods.Items), len(nets.Items))
	}
	// The API server's address as the cluster publishes it (read here from
	// the legacy Endpoints object, the run reads the EndpointSlice).
	var ep corev1.Endpoints
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, &ep); err != nil || len(ep.Subsets) == 0 || len(ep.Subsets[0].Addresses) == 0 {
		t.Fatalf("the kubernetes Service's endpoints: %v %+v", err, ep.Subsets)
	}
	if got, want := nets.Items[0].Spec.ExternalTargets, ep.Subsets[0].Addresses[0].IP; len(got) != 1 || got[0] != want {
		t.Errorf("partition towards %v, want the kubernetes Service's endpoint [%s]", got, want)
	}
	if got := nets.Items[0].Spec.Selector.Nodes; len(got) != 1 || got[0] != "workers-0" {
		t.Errorf("partition of nodes %v, want [workers-0]", got)
	}
	// The faults end: what runs at their end deletes the objects.
	if len(r.pend) != 2 {
		t.Fatalf("%d actions pending, want the two deletions", len(r.pend))
	}
	for _, p := range r.pend {
		p.fn()
	}
	if err := c.List(ctx, &pods, client.InNamespace("bootroll-system")); err != nil {
		t.Fatal(err)
	}
	if err := c.List(ctx, &nets, client.InNamespace("bootroll-system")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items)+len(nets.Items) != 0 {
		t.Errorf("after the faults ended: %d PodChaos, %d NetworkChaos left", len(pods.Items), len(nets.Items))
	}

	r.opts.ExternalController = false
	if on, err := r.useChaos(); err != nil || on {
		t.Errorf("auto with a controller the run starts: use %v, %v; want false", on, err)
	}
}

func TestChaosModeWithoutChaosMesh(t *testing.T) {
	c := apitest.Client(t, apitest.Start(t), chaosv1alpha1.AddToScheme)
	r := &runner{ctx: context.Background(), opts: Options{ExternalController: true}, c: c}
	if on, err := r.useChaos(); err != nil || on {
		t.Errorf("auto without Chaos Mesh: use %v, %v; want false", on, err)
	}
	r.opts.Chaos = ChaosOn
	if _, err := r.useChaos(); err == nil || !strings.Contains(err.Error(), "does not serve chaos-mesh.org/v1alpha1") {
		t.Errorf("on without Chaos Mesh: %v; want an error naming chaos-mesh.org/v1alpha1", err)
	}
	if _, err := ParseChaosMode("sometimes"); err == nil || !strings.Contains(err.Error(), `"sometimes"`) {
		t.Errorf("ParseChaosMode(sometimes): %v", err)
	}
}
