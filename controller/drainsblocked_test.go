package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// A pool whose drains PodDisruptionBudgets hold up says so in Degraded
// (DrainsBlocked), naming the nodes and what their records say; a drain
// under way or a node that waits for anything else is no such report.
func TestDrainsBlockedIsReported(t *testing.T) {
	row := func(name string, phase v1alpha1.NodePhase, reason, msg string) poolRow {
		bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		bn.Status.Phase = phase
		bn.Status.Rollout.Reason, bn.Status.Rollout.Message = reason, msg
		return poolRow{name: name, bn: bn, node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, rowFacts: rowFacts{phase: phase}}
	}
	rows := []poolRow{
		row("a", v1alpha1.PhaseDraining, "DrainBlocked", "eviction refused by a PodDisruptionBudget: default/web-1"),
		row("b", v1alpha1.PhaseStaged, "DrainTimeout", "drain did not finish in 10m0s"),
		row("c", v1alpha1.PhaseDraining, "SlotGranted", "reboot slot 1/2"),
		row("d", v1alpha1.PhaseStaged, "", ""),
	}
	got := drainsBlocked(rows)
	if len(got) != 2 || !strings.HasPrefix(got[0], "a (eviction refused") || !strings.HasPrefix(got[1], "b (drain did not finish") {
		t.Fatalf("drainsBlocked = %q, want a and b with their messages", got)
	}

	r := &PoolReconciler{}
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	r.conditions(pool, nil, nil, nil, got, false, true, now)
	c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDrainsBlocked || !strings.Contains(c.Message, "a (eviction refused") {
		t.Errorf("Degraded = %+v, want True/DrainsBlocked naming node a", c)
	}
	r.conditions(pool, nil, nil, nil, drainsBlocked(rows[2:]), false, true, now)
	if c := findCondition(pool.Status.Conditions, v1alpha1.ConditionDegraded); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Degraded = %+v with no drain held up, want False", c)
	}
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}
