package rollout

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestNodeHealth: each check met and unmet, in the order they are judged,
// and readyFor counted from the later of the Ready transition and the
// reboot.
func TestNodeHealth(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	rebooted := now.Add(-5 * time.Minute)
	checks := &v1alpha1.HealthChecks{
		ReadyFor:       &metav1.Duration{Duration: 2 * time.Minute},
		NodeConditions: []v1alpha1.NodeConditionCheck{{Type: "NetworkUnavailable", Status: "False"}},
		DaemonSets:     []v1alpha1.DaemonSetCheck{{Namespace: "kube-system", Name: "cni"}},
	}
	node := func(readySince time.Duration, mut func(n *corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Time{Time: now.Add(-readySince)}},
			{Type: "NetworkUnavailable", Status: corev1.ConditionFalse},
		}
		if mut != nil {
			mut(n)
		}
		return n
	}
	pod := func(name, ns, owner, node string, ready corev1.ConditionStatus) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: owner, Controller: ptr.To(true)}}}}
		p.Spec.NodeName = node
		// Ready (or not) since a minute after the reboot.
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Time{Time: rebooted.Add(time.Minute)}}}
		return p
	}
	good := []corev1.Pod{pod("cni-a", "kube-system", "cni", "n1", corev1.ConditionTrue)}
	stale := pod("cni-a", "kube-system", "cni", "n1", corev1.ConditionTrue)
	stale.Status.Conditions[0].LastTransitionTime = metav1.Time{Time: rebooted.Add(-time.Hour)}
	for _, c := range []struct {
		name   string
		checks *v1alpha1.HealthChecks
		node   *corev1.Node
		pods   []corev1.Pod
		want   Health
	}{
		{"no checks, Ready", nil, node(time.Second, nil), nil, Health{Healthy: true}},
		{"no checks, not Ready", nil, node(time.Hour, func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), nil,
			Health{Unmet: "Node not Ready"}},
		{"all met", checks, node(3*time.Minute, nil), good, Health{Healthy: true}},
		{"Ready too short", checks, node(30*time.Second, nil), good,
			Health{Unmet: "Ready for less than 2m0s", Wait: 90 * time.Second}},
		// Ready since before the reboot (a reboot faster than the node
		// lifecycle controller's grace period): counted from the reboot.
		{"condition wrong", checks, node(time.Hour, func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionTrue }), good,
			Health{Unmet: "condition NetworkUnavailable is True, want False"}},
		{"condition missing", checks, node(time.Hour, func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] }), good,
			Health{Unmet: "condition NetworkUnavailable not reported, want False"}},
		{"DaemonSet pod not Ready", checks, node(time.Hour, nil), []corev1.Pod{pod("cni-a", "kube-system", "cni", "n1", corev1.ConditionFalse)},
			Health{Unmet: "DaemonSet kube-system/cni: pod cni-a not Ready", Wait: HealthPoll}},
		// A reboot faster than the node lifecycle controller's grace
		// period leaves the last boot's Ready condition until the new
		// kubelet restarts the pod.
		{"DaemonSet pod Ready since before the reboot", checks, node(time.Hour, nil), []corev1.Pod{stale},
			Health{Unmet: "DaemonSet kube-system/cni: pod cni-a Ready since before the reboot (2026-01-05T08:55:00Z)", Wait: HealthPoll}},
		{"DaemonSet pod missing", checks, node(time.Hour, nil), nil,
			Health{Unmet: "DaemonSet kube-system/cni: no pod on the node", Wait: HealthPoll}},
		{"Ready pod of another DaemonSet, namespace or node", checks, node(time.Hour, nil), []corev1.Pod{
			pod("x", "kube-system", "other", "n1", corev1.ConditionTrue),
			pod("y", "default", "cni", "n1", corev1.ConditionTrue),
			pod("z", "kube-system", "cni", "n2", corev1.ConditionTrue),
		}, Health{Unmet: "DaemonSet kube-system/cni: no pod on the node", Wait: HealthPoll}},
		{"terminating Ready pod and a new one Ready", checks, node(time.Hour, nil), func() []corev1.Pod {
			old := pod("cni-old", "kube-system", "cni", "n1", corev1.ConditionTrue)
			old.DeletionTimestamp = &metav1.Time{Time: now}
			return []corev1.Pod{old, good[0]}
		}(), Health{Healthy: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := NodeHealth(c.checks, c.node, c.pods, rebooted, now); got != c.want {
				t.Errorf("NodeHealth = %+v, want %+v", got, c.want)
			}
		})
	}
	// Ready since before a reboot 1m ago (one faster than the node
	// lifecycle controller's grace period): counted from the reboot.
	got := NodeHealth(checks, node(time.Hour, nil), good, now.Add(-time.Minute), now)
	if want := (Health{Unmet: "Ready for less than 2m0s", Wait: time.Minute}); got != want {
		t.Errorf("NodeHealth, Ready from before the reboot = %+v, want %+v", got, want)
	}
}

// TestVerifyHealthChecks: a node on its target and Ready waits for the
// pool's checks, fails at healthTimeout naming the unmet one, and the
// planted SkipHealthChecks passes it on Ready alone.
func TestVerifyHealthChecks(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	b := img("B")
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.HealthTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	pool.Spec.HealthChecks.DaemonSets = []v1alpha1.DaemonSetCheck{{Namespace: "kube-system", Name: "cni"}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	rec := func(ago time.Duration) *v1alpha1.BootcNode {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
		bn.Spec.DesiredImage = b
		bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: b, At: metav1.Time{Time: now.Add(-ago)}}
		bn.Status.Phase = v1alpha1.PhaseVerifying
		bn.Status.Rollout.TargetImage = b
		bn.Status.Booted = &v1alpha1.HostImage{Image: b, Digest: dig("B")}
		return bn
	}
	const unmet = "DaemonSet kube-system/cni: no pod on the node"
	for _, c := range []struct {
		name string
		bn   *v1alpha1.BootcNode
		to   TestOnly
		want VerifyDecision
	}{
		{"waits, polling", rec(time.Minute), TestOnly{}, VerifyDecision{Took: time.Minute, Wait: HealthPoll, Unmet: unmet}},
		{"fails at healthTimeout naming the check", rec(5 * time.Minute), TestOnly{}, VerifyDecision{Outcome: VerifyHealthTimeout, Took: 5 * time.Minute, Unmet: unmet}},
		{"planted skipHealthChecks: done on Ready", rec(time.Minute), TestOnly{SkipHealthChecks: true}, VerifyDecision{Outcome: VerifyDone, Took: time.Minute}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := NodeView{Record: c.bn, Node: n, Pool: pool, Now: now}
			if got := Verify(v, c.to); got != c.want {
				t.Errorf("Verify = %+v, want %+v", got, c.want)
			}
			if got, want := VerifyNeedsPods(v, c.to), !c.to.SkipHealthChecks; got != want {
				t.Errorf("VerifyNeedsPods = %v, want %v", got, want)
			}
		})
	}
}
