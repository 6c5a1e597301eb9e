package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// recorder is a reconciler that logs "<offset> <key>" per call and returns
// what its script says for that call.
type recorder struct {
	e     *Engine
	q     *Queue
	log   []string
	calls int
	do    func(q *Queue, call int, req reconcile.Request) (reconcile.Result, error)
}

func (r *recorder) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.calls++
	r.log = append(r.log, fmt.Sprintf("%v %s", r.e.Now().Sub(t0), req.Name))
	if r.do == nil {
		return reconcile.Result{}, nil
	}
	return r.do(r.q, r.calls, req)
}

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
}

var errBoom = errors.New("boom")

func TestQueue(t *testing.T) {
	tests := []struct {
		name  string
		opts  QueueOptions
		do    func(q *Queue, call int, req reconcile.Request) (reconcile.Result, error)
		setup func(e *Engine, q *Queue)
		want  []string
	}{{
		name: "dedup while queued",
		setup: func(e *Engine, q *Queue) {
			q.Add(req("a"))
			q.Add(req("a"))
			q.Add(req("b"))
			q.Add(req("a"))
		},
		want: []string{"0s a", "0s b"},
	}, {
		name: "AddAfter keeps the earlier ready time",
		setup: func(e *Engine, q *Queue) {
			q.AddAfter(req("a"), 10*time.Second)
			q.AddAfter(req("a"), 5*time.Second)
			q.AddAfter(req("a"), 20*time.Second)
		},
		want: []string{"5s a"},
	}, {
		name: "Add makes a waiting key ready",
		setup: func(e *Engine, q *Queue) {
			q.AddAfter(req("a"), 10*time.Second)
			e.After(time.Second, "poke", func() { q.Add(req("a")) })
		},
		want: []string{"1s a"},
	}, {
		name: "add during reconcile reruns after it",
		opts: QueueOptions{ReconcileLatency: time.Second},
		setup: func(e *Engine, q *Queue) {
			q.Add(req("a"))
			q.Add(req("b"))
			e.After(500*time.Millisecond, "poke", func() { q.Add(req("a")) })
			e.After(600*time.Millisecond, "poke", func() { q.Add(req("a")) })
		},
		// b was ready before a was added again, so b goes first.
		want: []string{"0s a", "1s b", "2s a"},
	}, {
		name: "Duration keeps the worker busy for each reconcile's own time",
		opts: QueueOptions{ReconcileLatency: time.Hour, Duration: durations(2*time.Second, 500*time.Millisecond, time.Second)},
		setup: func(e *Engine, q *Queue) {
			q.Add(req("a"))
			q.Add(req("b"))
			// Added twice while a runs: one more reconcile of a, after b.
			e.After(500*time.Millisecond, "poke", func() { q.Add(req("a")) })
			e.After(600*time.Millisecond, "poke", func() { q.Add(req("a")) })
		},
		want: []string{"0s a", "2s b", "2.5s a"},
	}, {
		name: "add from inside the reconcile reruns it once",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			if call == 1 {
				q.Add(r)
				q.Add(r)
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a", "0s a"},
	}, {
		name: "RequeueAfter",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			if call < 3 {
				return reconcile.Result{RequeueAfter: time.Minute}, nil
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a", "1m0s a", "2m0s a"},
	}, {
		name: "RequeueAfter with latency counts from the end",
		opts: QueueOptions{ReconcileLatency: time.Second},
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			if call == 1 {
				return reconcile.Result{RequeueAfter: time.Minute}, nil
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a", "1m1s a"},
	}, {
		name: "error backoff doubles",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			if call <= 5 {
				return reconcile.Result{}, errBoom
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		// 5ms, 10ms, 20ms, 40ms, 80ms after each failure.
		want: []string{"0s a", "5ms a", "15ms a", "35ms a", "75ms a", "155ms a"},
	}, {
		name: "Requeue backs off like an error",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{Requeue: call <= 2}, nil //nolint:staticcheck // testing Requeue.
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a", "5ms a", "15ms a"},
	}, {
		name: "success forgets the backoff",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			switch call {
			case 1, 2, 4:
				return reconcile.Result{}, errBoom
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) {
			q.Add(req("a"))
			e.After(time.Second, "poke", func() { q.Add(req("a")) })
		},
		want: []string{"0s a", "5ms a", "15ms a", "1s a", "1.005s a"},
	}, {
		name: "RequeueAfter forgets the backoff",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			switch call {
			case 1, 2, 4:
				return reconcile.Result{}, errBoom
			case 3:
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a", "5ms a", "15ms a", "1.015s a", "1.02s a"},
	}, {
		name: "terminal error is not retried",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, reconcile.TerminalError(errBoom)
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a"},
	}, {
		name: "error ignores RequeueAfter",
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			if call == 1 {
				return reconcile.Result{RequeueAfter: time.Hour}, errBoom
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) { q.Add(req("a")) },
		want:  []string{"0s a", "5ms a"},
	}, {
		name: "result priority orders requeues",
		opts: QueueOptions{ReconcileLatency: time.Second},
		do: func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
			if r.Name == "hi" && call == 1 {
				return reconcile.Result{RequeueAfter: time.Millisecond, Priority: new(10)}, nil
			}
			return reconcile.Result{}, nil
		},
		setup: func(e *Engine, q *Queue) {
			q.Add(req("hi"))
			q.Add(req("b"))
			q.Add(req("c"))
		},
		// hi is ready again at 1.001s, after b was handed out at 1s but
		// before c, and its priority puts it first.
		want: []string{"0s hi", "1s b", "2s hi", "3s c"},
	}, {
		name: "two workers never share a key",
		opts: QueueOptions{ReconcileLatency: time.Second, MaxConcurrentReconciles: 2},
		setup: func(e *Engine, q *Queue) {
			q.Add(req("a"))
			q.Add(req("b"))
			q.Add(req("c"))
			e.After(100*time.Millisecond, "poke", func() { q.Add(req("a")) })
		},
		want: []string{"0s a", "0s b", "1s c", "1s a"},
	}, {
		name: "shut down drops everything",
		setup: func(e *Engine, q *Queue) {
			q.AddAfter(req("a"), time.Second)
			q.Add(req("b"))
			q.ShutDown()
			q.Add(req("c"))
		},
		want: nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(t0, 1)
			r := &recorder{e: e, do: tt.do}
			q := NewQueue(e, "test", r, tt.opts)
			r.q = q
			tt.setup(e, q)
			e.RunUntil(t0.Add(time.Hour))
			if !slices.Equal(r.log, tt.want) {
				t.Errorf("reconciles = %q, want %q", r.log, tt.want)
			}
			if q.Len() != 0 {
				t.Errorf("Len after the run = %d, want 0", q.Len())
			}
		})
	}
}

func TestQueueEventNamesAndStats(t *testing.T) {
	e := New(t0, 1)
	var names []string
	e.OnEvent(func(name string) { names = append(names, name) })
	calls := 0
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		calls++
		if calls == 1 {
			return reconcile.Result{}, errBoom
		}
		return reconcile.Result{}, nil
	})
	q := NewQueue(e, "pool", r, QueueOptions{ReconcileLatency: time.Millisecond})
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}})
	e.Run()
	// The names say the queue, not the request (which is in the events'
	// closures): one string per queue, not one per event.
	want := []string{
		"reconcile/pool", "reconciled/pool",
		"requeue/pool",
		"reconcile/pool", "reconciled/pool",
	}
	if !slices.Equal(names, want) {
		t.Errorf("events = %q, want %q", names, want)
	}
	if got, want := q.Stats(), (QueueStats{Reconciles: 2, Errors: 1}); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if got := e.Now().Sub(t0); got != 7*time.Millisecond {
		t.Errorf("run took %v, want 7ms (1ms + 5ms backoff + 1ms)", got)
	}
}

func TestQueueNumRequeues(t *testing.T) {
	e := New(t0, 1)
	fail := true
	r := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		if fail {
			return reconcile.Result{}, errBoom
		}
		return reconcile.Result{}, nil
	})
	q := NewQueue(e, "q", r, QueueOptions{})
	q.Add(req("a"))
	e.RunUntil(t0.Add(16 * time.Millisecond)) // runs at 0, 5ms, 15ms
	if got := q.NumRequeues(req("a")); got != 3 {
		t.Errorf("NumRequeues after 3 failures = %d, want 3", got)
	}
	fail = false
	e.Run()
	if got := q.NumRequeues(req("a")); got != 0 {
		t.Errorf("NumRequeues after success = %d, want 0", got)
	}
}

// durations returns a Duration func that gives ds in turn, the last
// repeating.
func durations(ds ...time.Duration) func() time.Duration {
	i := 0
	return func() time.Duration {
		d := ds[min(i, len(ds)-1)]
		i++
		return d
	}
}

// A key stays in the queue once idle (Queue.keys) and is added again as
// a new one would be: nothing of its last stay (priority, ready time,
// order, backoff) carries over.
func TestQueueIdleKeyAddedAgain(t *testing.T) {
	e := New(t0, 1)
	rec := &recorder{e: e}
	q := NewQueue(e, "q", rec, QueueOptions{ReconcileLatency: time.Millisecond})
	rec.q = q
	rec.do = func(q *Queue, call int, r reconcile.Request) (reconcile.Result, error) {
		if call == 1 {
			return reconcile.Result{}, errBoom // a backoff, forgotten on success
		}
		return reconcile.Result{}, nil
	}
	q.AddWithPriority(req("a"), 0, false, 10)
	e.Run() // a fails at 0s, succeeds at 6ms: idle
	if n := q.NumRequeues(req("a")); n != 0 {
		t.Fatalf("NumRequeues of the idle key = %d, want 0", n)
	}
	// At 7ms, after the last reconcile's end:
	q.Add(req("x"))                           // takes the worker for 1ms
	q.AddWithPriority(req("a"), 0, false, -5) // behind b, whatever it had
	q.Add(req("b"))
	q.AddAfter(req("c"), time.Second)
	e.Run()
	q.AddAfter(req("a"), time.Minute) // at 1.008s
	e.Run()
	got := rec.log
	want := []string{"0s a", "6ms a", "7ms x", "8ms b", "9ms a", "1.007s c", "1m1.008s a"}
	if !slices.Equal(got, want) {
		t.Errorf("reconciled %q, want %q", got, want)
	}
}
