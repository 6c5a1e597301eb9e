package apiserver_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// TestDefaultEviction checks the eviction subresource of a server with no
// eviction handler against kube-apiserver's rules (the conformance test
// compares it with a real one; the cases here include those too slow to
// run there).
func TestDefaultEviction(t *testing.T) {
	type want struct {
		check   func(error) bool // nil: success
		deleted bool
		allowed int32 // the budget's disruptionsAllowed after
	}
	tests := []struct {
		name    string
		phase   corev1.PodPhase
		ready   bool
		pdbs    int
		status  policyv1.PodDisruptionBudgetStatus
		specGen bool // the budget's spec changed after its status
		want    want
	}{
		{"no budget", corev1.PodRunning, true, 0, policyv1.PodDisruptionBudgetStatus{}, false, want{nil, true, 0}},
		{"allowed", corev1.PodRunning, true, 1, policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1}, false, want{nil, true, 0}},
		{"none allowed", corev1.PodRunning, true, 1, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 1}, false, want{apierrors.IsTooManyRequests, false, 0}},
		{"stale status", corev1.PodRunning, true, 1, policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1}, true, want{apierrors.IsTooManyRequests, false, 1}},
		{"negative", corev1.PodRunning, true, 1, policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: -1}, false, want{apierrors.IsForbidden, false, -1}},
		{"pending pod", corev1.PodPending, false, 1, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 1}, false, want{nil, true, 0}},
		{"unready pod, budget met", corev1.PodRunning, false, 1, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 1, DesiredHealthy: 1}, false, want{nil, true, 0}},
		{"unready pod, budget short", corev1.PodRunning, false, 1, policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 0, DesiredHealthy: 1}, false, want{apierrors.IsTooManyRequests, false, 0}},
		{"two budgets", corev1.PodRunning, true, 2, policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1}, false, want{func(err error) bool {
			var st apierrors.APIStatus
			return err != nil && apierrors.ReasonForError(err) == "" && asStatus(err, &st) && st.Status().Code == 500
		}, false, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newServer(t)
			c := s.Client()
			p := pod("ns", "p", "")
			p.Labels = map[string]string{"app": "x"}
			mustCreate(t, c, p)
			p.Status.Phase = tt.phase
			ready := corev1.ConditionFalse
			if tt.ready {
				ready = corev1.ConditionTrue
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
			if err := c.Status().Update(ctx, p); err != nil {
				t.Fatal(err)
			}
			var first *policyv1.PodDisruptionBudget
			for i := range tt.pdbs {
				one := intstr.FromInt32(1)
				b := &policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: []string{"b1", "b2"}[i]},
					Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: p.Labels}},
				}
				mustCreate(t, c, b)
				b.Status = tt.status
				b.Status.ObservedGeneration = b.Generation
				if err := c.Status().Update(ctx, b); err != nil {
					t.Fatal(err)
				}
				if tt.specGen {
					b.Spec.MinAvailable = nil
					b.Spec.MaxUnavailable = &one
					if err := c.Update(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
				if first == nil {
					first = b
				}
			}
			var events []apiserver.Event
			s.Subscribe(func(ev apiserver.Event) { events = append(events, ev) })

			err := c.SubResource("eviction").Create(ctx, pod("ns", "p", ""), &policyv1.Eviction{})
			if tt.want.check == nil && err != nil || tt.want.check != nil && !tt.want.check(err) {
				t.Fatalf("eviction: %v", err)
			}
			if gone := !exists(t, c, pod("ns", "p", "")); gone != tt.want.deleted {
				t.Errorf("pod deleted = %t, want %t", gone, tt.want.deleted)
			}
			if first != nil {
				b := get(t, c, first)
				if b.Status.DisruptionsAllowed != tt.want.allowed {
					t.Errorf("disruptionsAllowed = %d, want %d", b.Status.DisruptionsAllowed, tt.want.allowed)
				}
				_, marked := b.Status.DisruptedPods["p"]
				if decremented := tt.want.deleted && tt.status.DisruptionsAllowed > b.Status.DisruptionsAllowed; marked != decremented {
					t.Errorf("disruptedPods has p = %t, want %t", marked, decremented)
				}
			}
			if tt.want.deleted {
				// The pod is marked as a disruption target before it goes.
				var target bool
				for _, ev := range events {
					if ev.Type == apiserver.Modified {
						if p, ok := ev.Object.(*corev1.Pod); ok {
							for _, c := range p.Status.Conditions {
								target = target || c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue
							}
						}
					}
				}
				if !target {
					t.Errorf("no DisruptionTarget condition before the deletion: events %v", events)
				}
			}
		})
	}
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	*st = s
	return ok
}

// TestCustomResourceRequests checks what kube-apiserver refuses for custom
// resources only: strategic merge patches and updates without a
// resourceVersion.
func TestCustomResourceRequests(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	bn := bootcNode("bn")
	mustCreate(t, c, bn)
	err := c.Patch(ctx, bn.DeepCopy(), client.RawPatch("application/strategic-merge-patch+json", []byte(`{"spec":{"pool":"x"}}`)))
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch of a BootcNode: %v, want UnsupportedMediaType", err)
	}
	u := bn.DeepCopy()
	u.ResourceVersion = ""
	if err := c.Update(ctx, u); !apierrors.IsInvalid(err) {
		t.Errorf("update of a BootcNode without a resourceVersion: %v, want Invalid", err)
	}
	n := node("n")
	mustCreate(t, c, n)
	n.ResourceVersion = ""
	n.Labels = map[string]string{"a": "b"}
	if err := c.Update(ctx, n); err != nil {
		t.Errorf("update of a Node without a resourceVersion: %v, want success", err)
	}
	err = c.Patch(ctx, n, client.RawPatch("application/json-patch+json", []byte(`[{"op":"test","path":"/metadata/name","value":"other"}]`)))
	if !apierrors.IsInvalid(err) {
		t.Errorf("json patch with a failing test: %v, want Invalid", err)
	}
}

// TestLastFinalizerEvent checks that removing the last finalizer of an
// object being deleted deletes it in its last stored state.
func TestLastFinalizerEvent(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	n := node("n")
	n.Finalizers = []string{"f"}
	mustCreate(t, c, n)
	if err := c.Delete(ctx, n.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	var events []apiserver.Event
	s.Subscribe(func(ev apiserver.Event) { events = append(events, ev) })
	n = get(t, c, n)
	n.Finalizers = nil
	if err := c.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Type != apiserver.Deleted {
		t.Fatalf("events %v, want one Deleted", events)
	}
	if got := events[0].Object.GetFinalizers(); len(got) != 1 || got[0] != "f" {
		t.Errorf("Deleted event's finalizers = %v, want [f]", got)
	}
	if len(n.Finalizers) != 0 || n.ResourceVersion != events[0].Object.GetResourceVersion() {
		t.Errorf("the writer got finalizers %v, resourceVersion %s; want none, %s", n.Finalizers, n.ResourceVersion, events[0].Object.GetResourceVersion())
	}
}
