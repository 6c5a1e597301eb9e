package clusterrun

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/invariant"
)

func pod(name string, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{}
	}
	return p
}

func TestConvert(t *testing.T) {
	old, cur := pod("a", false), pod("a", true)
	ev, ok := Convert(apiserver.Modified, old, cur)
	if !ok || ev.Type != apiserver.Modified || ev.Object != cur || ev.Old != old {
		t.Errorf("modified: got %+v %v", ev, ok)
	}
	ev, ok = Convert(apiserver.Added, nil, cur)
	if !ok || ev.Old != nil {
		t.Errorf("added: got %+v %v", ev, ok)
	}
	ev, ok = Convert(apiserver.Deleted, nil, toolscache.DeletedFinalStateUnknown{Key: "default/a", Obj: old})
	if !ok || ev.Object != old || ev.Type != apiserver.Deleted {
		t.Errorf("tombstone: got %+v %v", ev, ok)
	}
	if _, ok := Convert(apiserver.Added, nil, "not an object"); ok {
		t.Errorf("a non-object converted")
	}
}

func TestPodRemoval(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   apiserver.Event
		want bool
	}{
		{"starts terminating", apiserver.Event{Type: apiserver.Modified, Old: pod("a", false), Object: pod("a", true)}, true},
		{"still terminating", apiserver.Event{Type: apiserver.Modified, Old: pod("a", true), Object: pod("a", true)}, false},
		{"deleted at once", apiserver.Event{Type: apiserver.Deleted, Object: pod("a", false)}, true},
		{"deleted after terminating", apiserver.Event{Type: apiserver.Deleted, Object: pod("a", true)}, false},
		{"added", apiserver.Event{Type: apiserver.Added, Object: pod("a", false)}, false},
		{"not a pod", apiserver.Event{Type: apiserver.Deleted, Object: &corev1.Node{}}, false},
	} {
		if _, got := PodRemoval(tc.ev); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func node(name string, rebooting bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if rebooting {
		n.Annotations[localcluster.RebootingAnnotation] = "true"
	}
	return n
}

func TestRebootStarted(t *testing.T) {
	if _, ok := RebootStarted(apiserver.Event{Type: apiserver.Modified, Old: node("n", false), Object: node("n", true)}); !ok {
		t.Errorf("annotation set: want a reboot")
	}
	if _, ok := RebootStarted(apiserver.Event{Type: apiserver.Modified, Old: node("n", true), Object: node("n", true)}); ok {
		t.Errorf("annotation kept: want no new reboot")
	}
	if _, ok := RebootStarted(apiserver.Event{Type: apiserver.Modified, Old: node("n", true), Object: node("n", false)}); ok {
		t.Errorf("annotation removed: want no reboot")
	}
}

func TestPDBState(t *testing.T) {
	p := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Status: policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 3, ExpectedPods: 4, DisruptionsAllowed: 0}}
	got := PDBState(p)
	if got.Healthy != 2 || got.DesiredHealthy != 3 || got.ExpectedPods != 4 || !got.Violated || got.Name != "web" {
		t.Errorf("got %+v", got)
	}
}

// TestObserverBlamesOnlyAskedRemovals checks that the checker counts a
// pod removal as bootroll's only when bootroll's proxy saw it asked.
func TestObserverBlamesOnlyAskedRemovals(t *testing.T) {
	sc := parse(t, testScenario)
	asked := map[string]bool{"default/mine": true}
	o := NewObserver(func() time.Time { return time.Unix(0, 0) }, func(k string) bool { return asked[k] }, nil)
	chk, err := invariant.New(sc, o.Sources(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	o.Attach(chk)
	removals := o.Sources().PodRemovals
	o.Apply(apiserver.Event{Type: apiserver.Added, Object: pod("other", false)})
	o.Apply(apiserver.Event{Type: apiserver.Modified, Old: pod("other", false), Object: pod("other", true)})
	if removals() != 0 {
		t.Errorf("a removal nobody asked for counted as bootroll's")
	}
	o.Apply(apiserver.Event{Type: apiserver.Added, Object: pod("mine", false)})
	o.Apply(apiserver.Event{Type: apiserver.Modified, Old: pod("mine", false), Object: pod("mine", true)})
	if removals() != 1 {
		t.Errorf("bootroll's eviction: removals %d, want 1", removals())
	}
	o.Apply(apiserver.Event{Type: apiserver.Modified, Old: node("workers-0", false), Object: node("workers-0", true)})
	if o.Reboots != 1 {
		t.Errorf("reboots: got %d, want 1", o.Reboots)
	}
}
