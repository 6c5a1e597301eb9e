package clusterrun

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bootroll/bootroll/sim/apiserver"
)

func claimObj(name, node, expireAfter string, created time.Time, reason string, deleted *time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"expireAfter": expireAfter}}}
	u.SetAPIVersion(KarpenterGroup + "/v1")
	u.SetKind("NodeClaim")
	u.SetName(name)
	u.SetCreationTimestamp(metav1.NewTime(created))
	st := map[string]any{"nodeName": node}
	if reason != "" {
		st["conditions"] = []any{map[string]any{"type": "DisruptionReason", "status": "True", "reason": reason}}
	}
	u.Object["status"] = st
	if deleted != nil {
		d := metav1.NewTime(*deleted)
		u.SetDeletionTimestamp(&d)
	}
	return u
}

// The real Karpenter's decisions, read from the watch, become the fake
// Karpenter's records: a DisruptionReason condition a disruption (once),
// a deletion at expireAfter an expiry, another deletion nothing, the
// disrupted taint and a Node's deletion.
func TestKarpenterDecisions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k := NewKarpenterDecisions()
	kinds := func(ev apiserver.Event) []string {
		var out []string
		for _, r := range k.Observe(ev) {
			s := r.Kind + " " + r.Object
			if r.Details["reason"] != nil {
				s += " " + r.Details["reason"].(string)
			}
			if r.Details["forceful"] == true {
				s += " forceful"
			}
			out = append(out, s)
		}
		return out
	}
	check := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: got %v, want %v", what, got, want)
			return
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: got %v, want %v", what, got, want)
			}
		}
	}
	check("plain claim", kinds(apiserver.Event{Type: apiserver.Added, Object: claimObj("a", "n-a", "90s", t0, "", nil)}))
	check("disruption", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("a", "n-a", "90s", t0, "Empty", nil)}), "karpenter/disrupt node/n-a Empty")
	check("same again", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("a", "n-a", "90s", t0, "Empty", nil)}))
	del := t0.Add(30 * time.Second)
	check("deletion after a disruption", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("a", "n-a", "90s", t0, "Empty", &del)}))

	exp := t0.Add(90 * time.Second)
	check("expiry", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("b", "n-b", "90s", t0, "", &exp)}), "karpenter/disrupt node/n-b Expired forceful")
	early := t0.Add(60 * time.Second)
	check("someone else's delete", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("c", "n-c", "90s", t0, "", &early)}))
	check("never expires", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("d", "n-d", "Never", t0, "", &exp)}))

	plain := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n-a"}}
	tainted := plain.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}
	check("taint", kinds(apiserver.Event{Type: apiserver.Modified, Old: plain, Object: tainted}), "karpenter/tainted node/n-a")
	check("taint kept", kinds(apiserver.Event{Type: apiserver.Modified, Old: tainted, Object: tainted}))
	check("node gone", kinds(apiserver.Event{Type: apiserver.Deleted, Object: tainted}), "karpenter/terminated node/n-a")

	// A command rolled back: the taint goes (command-abandoned) and the
	// claim's DisruptionReason with it; the same reason later is a new
	// decision. A Node being deleted that loses the taint abandons nothing.
	k.Observe(apiserver.Event{Type: apiserver.Added, Object: plain})
	check("e disrupted", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("e", "n-a", "Never", t0, "Drifted", nil)}), "karpenter/disrupt node/n-a Drifted")
	check("e taint", kinds(apiserver.Event{Type: apiserver.Modified, Old: plain, Object: tainted}), "karpenter/tainted node/n-a")
	check("e taint removed", kinds(apiserver.Event{Type: apiserver.Modified, Old: tainted, Object: plain}), "karpenter/command-abandoned node/n-a the karpenter.sh/disrupted taint was removed")
	check("e condition cleared", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("e", "n-a", "Never", t0, "", nil)}))
	check("e disrupted again", kinds(apiserver.Event{Type: apiserver.Modified, Object: claimObj("e", "n-a", "Never", t0, "Drifted", nil)}), "karpenter/disrupt node/n-a Drifted")
	k.Observe(apiserver.Event{Type: apiserver.Modified, Old: plain, Object: tainted})
	going := plain.DeepCopy()
	going.DeletionTimestamp = &metav1.Time{Time: t0}
	check("taint removed while deleted", kinds(apiserver.Event{Type: apiserver.Modified, Old: tainted, Object: going}))
}

// A pod leaving a Node that carries the karpenter.sh/disrupted taint,
// which bootroll did not ask to remove, is Karpenter's eviction; one
// bootroll asked for, one on an untainted Node, and one on a Node whose
// taint is gone again are not.
func TestKarpenterEvictions(t *testing.T) {
	k := NewKarpenterDecisions()
	asked := map[string]bool{"default/web-1": true}
	k.Asked = func(key string) bool { return asked[key] }
	node := func(name string, tainted bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if tainted {
			n.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}
		}
		return n
	}
	pod := func(name, node string, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	leaves := func(name, node string) string {
		var out []string
		for _, r := range k.Observe(apiserver.Event{Type: apiserver.Modified, Old: pod(name, node, false), Object: pod(name, node, true)}) {
			out = append(out, fmt.Sprintf("%s %s %v", r.Kind, r.Object, r.Details["node"]))
		}
		return strings.Join(out, ", ")
	}
	k.Observe(apiserver.Event{Type: apiserver.Added, Object: node("a", false)})
	k.Observe(apiserver.Event{Type: apiserver.Added, Object: node("b", false)})
	if got := leaves("web-0", "a"); got != "" {
		t.Errorf("untainted node: %q", got)
	}
	k.Observe(apiserver.Event{Type: apiserver.Modified, Old: node("a", false), Object: node("a", true)})
	if got, want := leaves("web-0", "a"), "karpenter/evicted pod/default/web-0 a"; got != want {
		t.Errorf("tainted node: %q, want %q", got, want)
	}
	if got := leaves("web-1", "a"); got != "" {
		t.Errorf("bootroll's own eviction: %q", got)
	}
	if got := leaves("web-2", "b"); got != "" {
		t.Errorf("another node: %q", got)
	}
	gone := k.Observe(apiserver.Event{Type: apiserver.Deleted, Object: pod("web-3", "a", false)})
	if len(gone) != 1 || gone[0].Kind != "karpenter/evicted" {
		t.Errorf("deleted outright on the tainted node: %v", gone)
	}
	k.Observe(apiserver.Event{Type: apiserver.Modified, Old: node("a", true), Object: node("a", false)})
	if got := leaves("web-4", "a"); got != "" {
		t.Errorf("taint removed: %q", got)
	}
}

// Karpenter v1.14 repairs by deleting the NodeClaim (node.health), with no
// DisruptionReason: with RepairAfter set, a claim deleted while its Node
// has been not Ready at least that long is a karpenter/repair record; one
// deleted sooner, or with RepairAfter unset (v1.15, whose repair goes
// through the disruption queue), is nothing. Found running the
// repair-during-slow-reboot control profile-v1-14 on v1.14.3: the node was
// repaired and the run passed, where the twin catches it.
func TestKarpenterV114Repair(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	notReady := func(name string, since time.Time) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(since)}}
		return n
	}
	run := func(repairAfter time.Duration, deletedAfter time.Duration) []KarpenterRecord {
		k := NewKarpenterDecisions()
		k.RepairAfter = repairAfter
		k.Observe(apiserver.Event{Type: apiserver.Added, Object: claimObj("kp-0", "kp-0", "Never", t0, "", nil)})
		k.Observe(apiserver.Event{Type: apiserver.Modified, Object: notReady("kp-0", t0.Add(time.Minute))})
		del := t0.Add(time.Minute + deletedAfter)
		return k.Observe(apiserver.Event{Type: apiserver.Modified, Object: claimObj("kp-0", "kp-0", "Never", t0, "", &del)})
	}
	if got := run(10*time.Minute, 10*time.Minute+5*time.Second); len(got) != 1 || got[0].Kind != "karpenter/repair" || got[0].Object != "node/kp-0" {
		t.Errorf("v1.14, deleted 10m5s after NotReady: %v, want one karpenter/repair of node/kp-0", got)
	}
	if got := run(10*time.Minute, 3*time.Minute); len(got) != 0 {
		t.Errorf("v1.14, deleted 3m after NotReady: %v, want none (not a repair)", got)
	}
	if got := run(0, 10*time.Minute+5*time.Second); len(got) != 0 {
		t.Errorf("v1.15 reader: %v, want none", got)
	}
}
