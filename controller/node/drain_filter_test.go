package node

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// TestDrainPodFilter holds the drain's pod filter to kubectl drain's
// rules: which pods stay, and which opt-in of spec.drain a pod that must
// leave needs.
func TestDrainPodFilter(t *testing.T) {
	owned := func(apiVersion, kind string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "u", Controller: ptr.To(true)}}
		}
	}
	rs := owned("apps/v1", "ReplicaSet")
	emptyDir := func(medium corev1.StorageMedium) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}})
		}
	}
	const (
		force    = "no controller recreates it: set spec.drain.force"
		emptyMsg = "emptyDir data would be lost: set spec.drain.deleteEmptyDirData"
	)
	for _, tc := range []struct {
		name     string
		mutate   []func(*corev1.Pod)
		opts     v1alpha1.DrainSpec
		leave    bool
		needsOpt string
	}{
		{name: "replicaset pod", mutate: []func(*corev1.Pod){rs}, leave: true},
		{name: "daemonset pod stays", mutate: []func(*corev1.Pod){owned("apps/v1", "DaemonSet")}},
		{name: "daemonset pod with emptyDir stays", mutate: []func(*corev1.Pod){owned("apps/v1", "DaemonSet"), emptyDir("")}},
		{name: "a DaemonSet kind of another group is a controller like any", mutate: []func(*corev1.Pod){owned("example.com/v1", "DaemonSet")}, leave: true},
		{name: "owner that is not the controller", mutate: []func(*corev1.Pod){func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "o", UID: "u"}}
		}}, leave: true, needsOpt: force},
		{name: "mirror pod stays", mutate: []func(*corev1.Pod){func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "h"} }}},
		{name: "finished unmanaged pod stays", mutate: []func(*corev1.Pod){func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }}},
		{name: "failed pod with emptyDir stays", mutate: []func(*corev1.Pod){rs, emptyDir(""), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }}},
		{name: "unmanaged pod needs force", leave: true, needsOpt: force},
		{name: "unmanaged pod with force", opts: v1alpha1.DrainSpec{Force: true}, leave: true},
		{name: "unmanaged pod: deleteEmptyDirData is not force", opts: v1alpha1.DrainSpec{DeleteEmptyDirData: true}, leave: true, needsOpt: force},
		{name: "emptyDir pod needs deleteEmptyDirData", mutate: []func(*corev1.Pod){rs, emptyDir("")}, leave: true, needsOpt: emptyMsg},
		{name: "memory emptyDir needs it too", mutate: []func(*corev1.Pod){rs, emptyDir(corev1.StorageMediumMemory)}, leave: true, needsOpt: emptyMsg},
		{name: "emptyDir pod: force is not deleteEmptyDirData", mutate: []func(*corev1.Pod){rs, emptyDir("")}, opts: v1alpha1.DrainSpec{Force: true}, leave: true, needsOpt: emptyMsg},
		{name: "emptyDir pod with deleteEmptyDirData", mutate: []func(*corev1.Pod){rs, emptyDir("")}, opts: v1alpha1.DrainSpec{DeleteEmptyDirData: true}, leave: true},
		{name: "hostPath is not emptyDir", mutate: []func(*corev1.Pod){rs, func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var"}}}}
		}}, leave: true},
		{name: "unmanaged emptyDir pod needs both", mutate: []func(*corev1.Pod){emptyDir("")}, leave: true, needsOpt: emptyMsg + "; " + force},
		{name: "unmanaged emptyDir pod with both", mutate: []func(*corev1.Pod){emptyDir("")}, opts: v1alpha1.DrainSpec{Force: true, DeleteEmptyDirData: true}, leave: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
			for _, m := range tc.mutate {
				m(p)
			}
			if got := mustLeave(p); got != tc.leave {
				t.Fatalf("mustLeave = %v, want %v", got, tc.leave)
			}
			if !tc.leave {
				return
			}
			if got := needsOptIn(p, tc.opts); got != tc.needsOpt {
				t.Errorf("needsOptIn = %q, want %q", got, tc.needsOpt)
			}
		})
	}
}

// TestRefusalReason: an eviction refused by a PodDisruptionBudget is
// reported by the budget's name, from the cause the API server adds.
func TestRefusalReason(t *testing.T) {
	withCause := func(err *apierrors.StatusError, msg string) error {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"429 with the budget", withCause(apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0),
			"The disruption budget web-pdb needs 2 healthy pods and has 2 currently"), "PDB web-pdb"},
		{"budget not processed yet", withCause(apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10),
			"The disruption budget db is still being processed by the server."), "PDB db"},
		{"403 negative disruptions", withCause(apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudget"}, "neg", errors.New("pdb disruptions allowed is negative")),
			"The disruption budget neg does not allow evicting pods currently: pdb disruptions allowed is negative"), "PDB neg"},
		{"429 without a cause", apierrors.NewTooManyRequests("slow down", 1), "slow down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := refusalReason(tc.err); got != tc.want {
				t.Errorf("refusalReason = %q, want %q", got, tc.want)
			}
		})
	}
	if budgetRefusal(apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p", errors.New("rbac"))) != "" {
		t.Error("a 403 without a budget cause reads as a budget refusal")
	}
}

// TestBlockedMessage: a blocked drain names its first five pods, each
// with why it holds the drain up, and counts the others.
func TestBlockedMessage(t *testing.T) {
	refused := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	refused.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 2 healthy pods and has 2 currently"}}
	var blocked []BlockedPod
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		blocked = append(blocked, BlockedPod{Namespace: "ns", Name: name, refused: refused})
	}
	blocked[0] = BlockedPod{Namespace: "ns", Name: "a", why: "no controller recreates it: set spec.drain.force"}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{1, "ns/a (no controller recreates it: set spec.drain.force)"},
		{2, "ns/a (no controller recreates it: set spec.drain.force), ns/b (PDB web)"},
		{5, "ns/a (no controller recreates it: set spec.drain.force), ns/b (PDB web), ns/c (PDB web), ns/d (PDB web), ns/e (PDB web)"},
		{7, "ns/a (no controller recreates it: set spec.drain.force), ns/b (PDB web), ns/c (PDB web), ns/d (PDB web), ns/e (PDB web) and 2 more"},
	} {
		if got := blockedMessage(blocked[:tc.n]); got != tc.want {
			t.Errorf("%d blocked: %q, want %q", tc.n, got, tc.want)
		}
	}
}
