package cluster_test

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/engine"
)

// TestDaemonDrivesHost runs the real node daemon against a simulated host,
// wired through the hooks as the runner wires it: the daemon stages the
// desired image, reboots into it, and a fresh daemon reports it booted.
func TestDaemonDrivesHost(t *testing.T) {
	h := newHarness(t, options{})
	const n = "workers-1"
	queues := map[string]*engine.Queue{}
	start := func(node string) {
		if q := queues[node]; q != nil {
			q.ShutDown()
		}
		d := nodedaemon.New(node, h.api.Client(), h.cl.Host(node), h.eng.Clock(), logr.Discard())
		q := engine.NewQueue(h.eng, "daemon-"+node, d, engine.QueueOptions{})
		queues[node] = q
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
	}
	// The cluster started before these hooks were set, so the first
	// daemon is started by hand.
	h.onRestart = start
	h.onDown = func(node string) {
		if q := queues[node]; q != nil {
			q.ShutDown()
			delete(queues, node)
		}
	}
	h.onChanged = func(node string) {
		if q := queues[node]; q != nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: node}})
		}
	}
	start(n)

	bn := &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: n},
		Spec:       v1alpha1.BootcNodeSpec{Pool: "workers", DesiredImage: refV2},
	}
	if err := h.api.AdminClient().Create(ctx, bn); err != nil {
		t.Fatal(err)
	}
	queues[n].Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	h.runFor(2 * time.Minute)
	get := func() *v1alpha1.BootcNode {
		var got v1alpha1.BootcNode
		if err := h.api.Client().Get(ctx, client.ObjectKey{Name: n}, &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	if st := get().Status; st.Daemon.Phase != v1alpha1.DaemonStaged || st.Staged == nil || st.Staged.Digest != digestV2 {
		t.Fatalf("after staging: phase %q, staged %+v; want Staged %s", st.Daemon.Phase, st.Staged, digestV2)
	}

	// As the controller does for a slot: cordon the Node with bootroll's
	// slot marker before the boot order; the daemon reboots no other Node.
	var node corev1.Node
	if err := h.api.AdminClient().Get(ctx, client.ObjectKey{Name: n}, &node); err != nil {
		t.Fatal(err)
	}
	node.Spec.Unschedulable = true
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[v1alpha1.AnnotationSlot] = "workers"
	if err := h.api.AdminClient().Update(ctx, &node); err != nil {
		t.Fatal(err)
	}
	cur := get()
	cur.Spec.BootOrder = &v1alpha1.BootOrder{Image: cur.Spec.DesiredImage, At: metav1.NewTime(h.eng.Now())}
	if err := h.api.AdminClient().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	queues[n].Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
	h.runFor(5 * time.Minute)
	st := get().Status
	if st.Daemon.Phase != v1alpha1.DaemonIdle || st.Booted == nil || st.Booted.Digest != digestV2 || st.Daemon.BootID != n+"-boot-2" {
		t.Fatalf("after the reboot: phase %q, booted %+v, bootID %q; want Idle on %s in boot 2", st.Daemon.Phase, st.Booted, st.Daemon.BootID, digestV2)
	}
	if got := h.cl.RebootsFor(n, refV2); got != 1 {
		t.Errorf("RebootsFor = %d, want 1", got)
	}
}
