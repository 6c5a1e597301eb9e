package twin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/engine"
)

// recorder is a workqueue that records what it is handed.
type recordQueue struct {
	queueRef
	name string
	got  *[]string
}

func (q recordQueue) Add(r reconcile.Request) { *q.got = append(*q.got, q.name+" "+r.Name) }
func (q recordQueue) AddAfter(r reconcile.Request, d time.Duration) {
	*q.got = append(*q.got, fmt.Sprintf("%s %s after %s", q.name, r.Name, d))
}

// AddWithOpts records the adds of the priority queue's interface, with
// the priority when one is set.
func (q recordQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	for _, r := range items {
		s := q.name + " " + r.Name
		if o.After > 0 {
			s += " after " + o.After.String()
		}
		if o.Priority != nil {
			s += fmt.Sprintf(" at priority %d", *o.Priority)
		}
		*q.got = append(*q.got, s)
	}
}

// TestWatchMappings holds the twin's watches to controller.Setup's: each
// event must enqueue what the manager's watches enqueue.
func TestWatchMappings(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), 1)
	api := apiserver.New(scheme, eng.Clock())
	ctx := context.Background()
	c := api.AdminClient()
	mustCreate := func(o client.Object) {
		t.Helper()
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1},
		Spec: v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": "p"}, Image: "r/os:v1"}}
	mustCreate(pool)
	other := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec: v1alpha1.BootcNodePoolSpec{NodeSelector: map[string]string{"pool": "q"}, Image: "r/os:v1"}}
	mustCreate(other)
	mustCreate(&v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1alpha1.BootcNodeSpec{Pool: "p"}})

	node := func(name, pool string, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
		return n
	}
	bn := func(phase v1alpha1.NodePhase, mutate ...func(*v1alpha1.BootcNode)) *v1alpha1.BootcNode {
		b := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1alpha1.BootcNodeSpec{Pool: "p"}}
		b.Status.Phase = phase
		for _, m := range mutate {
			m(b)
		}
		return b
	}
	withGen := func(p *v1alpha1.BootcNodePool, gen int64, summary string) *v1alpha1.BootcNodePool {
		p = p.DeepCopy()
		p.Generation = gen
		p.Status.Summary = summary
		return p
	}
	debounce := rollout.PoolStatusDebounce.String()
	for _, tc := range []struct {
		name string // "initial ...": an event of a new process's initial list
		ev   apiserver.Event
		want []string
	}{
		{"pool created", apiserver.Event{Type: apiserver.Added, Object: pool}, []string{"pool p"}},
		{"pool status only", apiserver.Event{Type: apiserver.Modified, Old: withGen(pool, 1, ""), Object: withGen(pool, 1, "1/2")}, nil},
		{"pool spec", apiserver.Event{Type: apiserver.Modified, Old: withGen(pool, 1, ""), Object: withGen(pool, 2, "")}, []string{"pool p"}},
		{"pool deleted", apiserver.Event{Type: apiserver.Deleted, Object: pool}, []string{"pool p"}},
		// NodeToPools (debounced): the selecting pools, plus the pool of the BootcNode.
		{"node created", apiserver.Event{Type: apiserver.Added, Object: node("n1", "p", true)}, []string{"pool p after " + debounce, "node n1"}},
		{"node readiness", apiserver.Event{Type: apiserver.Modified, Old: node("n1", "p", true), Object: node("n1", "p", false)}, []string{"pool p after " + debounce, "node n1"}},
		{"node cordon only", apiserver.Event{Type: apiserver.Modified, Old: node("n1", "p", true), Object: func() client.Object {
			n := node("n1", "p", true)
			n.Spec.Unschedulable = true
			return n
		}()}, []string{"node n1"}},
		{"node moves pools", apiserver.Event{Type: apiserver.Modified, Old: node("n1", "p", true), Object: node("n1", "q", true)}, []string{"pool q after " + debounce, "pool p after " + debounce, "node n1"}},
		{"node of no pool", apiserver.Event{Type: apiserver.Added, Object: node("n9", "none", true)}, []string{"node n9"}},
		{"bootcnode created", apiserver.Event{Type: apiserver.Added, Object: bn("")}, []string{"pool p after " + debounce, "node n1"}},
		{"bootcnode phase", apiserver.Event{Type: apiserver.Modified, Old: bn(v1alpha1.PhaseStaging), Object: bn(v1alpha1.PhaseStaged)}, []string{"pool p after " + debounce, "node n1"}},
		{"bootcnode daemon detail", apiserver.Event{Type: apiserver.Modified, Old: bn(v1alpha1.PhaseStaging), Object: bn(v1alpha1.PhaseStaging, func(b *v1alpha1.BootcNode) {
			b.Status.Daemon.LastAttempt = &metav1.Time{Time: eng.Now()}
		})}, []string{"node n1"}},
		{"bootcnode deleted", apiserver.Event{Type: apiserver.Deleted, Object: bn(v1alpha1.PhaseUpdated)}, []string{"pool p after " + debounce, "node n1"}},
		// The initial list of a new controller process: controller-runtime's
		// handlers (handler.Funcs, EnqueueRequestForObject, the map
		// funcs) queue it at LowPriority on its priority queue, the
		// default, behind the events of changes.
		{"initial pool", apiserver.Event{Type: apiserver.Added, Object: pool}, []string{"pool p at priority -100"}},
		{"initial node", apiserver.Event{Type: apiserver.Added, Object: node("n1", "p", true)}, []string{"pool p after " + debounce + " at priority -100", "node n1 at priority -100"}},
		{"initial bootcnode", apiserver.Event{Type: apiserver.Added, Object: bn("")}, []string{"pool p after " + debounce + " at priority -100", "node n1 at priority -100"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			none := queueRef{func() *engine.Queue { return nil }}
			watches := func(got *[]string) []watch {
				queues := map[string]workqueue.TypedRateLimitingInterface[reconcile.Request]{
					controller.PoolController: recordQueue{none, "pool", got},
					controller.NodeController: recordQueue{none, "node", got},
				}
				return controllerWatches(controller.Controllers(c, poolfeed.New()), func(name string) workqueue.TypedRateLimitingInterface[reconcile.Request] {
					return queues[name]
				})
			}
			var got, gotSet []string
			ws := watches(&got)
			set := newWatchSet(watches(&gotSet))
			ev := tc.ev
			if ev.Type == apiserver.Modified {
				// A watch event's objects differ in resourceVersion (an
				// equal one is a resync's, queued at LowPriority).
				ev.Old, ev.Object = ev.Old.DeepCopyObject().(client.Object), ev.Object.DeepCopyObject().(client.Object)
				ev.Old.SetResourceVersion("1")
				ev.Object.SetResourceVersion("2")
			}
			initial := strings.HasPrefix(tc.name, "initial ")
			for i := range ws {
				ws[i].deliver(ctx, ev, initial)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("enqueued %q, want %q", got, tc.want)
			}
			// The twin delivers through a watchSet, which offers the
			// event to the watches of its type only: the same adds, in
			// the same order.
			set.deliver(ctx, ev, initial)
			if !slices.Equal(gotSet, tc.want) {
				t.Errorf("through the watchSet: enqueued %q, want %q", gotSet, tc.want)
			}
		})
	}
}
