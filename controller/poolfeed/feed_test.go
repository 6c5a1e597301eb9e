package poolfeed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
)

func feedNode(name, pool string, deleting bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	if pool == "both" {
		n.Labels = map[string]string{"pool": "p", "also": "q"}
	}
	if deleting {
		n.DeletionTimestamp = &metav1.Time{}
	}
	return n
}

func feedBN(name, pool string) *v1alpha1.BootcNode {
	return &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.BootcNodeSpec{Pool: pool}}
}

// scopeP is pool p (nodes labelled pool=p), with pool q (also=q) as the
// other pool.
func scopeP() *Scope {
	return &Scope{Pool: "p", Sel: labels.SelectorFromSet(labels.Set{"pool": "p"}),
		Others: []Other{{"q", labels.SelectorFromSet(labels.Set{"also": "q"})}}}
}

type rowView struct {
	name           string
	hasBN, hasNode bool
	conflict       string
}

func viewRows(t *testing.T, rows []rollout.Row) []rowView {
	t.Helper()
	var out []rowView
	for i, r := range rows {
		if i > 0 && rows[i-1].Name >= r.Name {
			t.Errorf("rows not sorted: %q before %q", rows[i-1].Name, r.Name)
		}
		if r.Record != nil && r.Record.Name != r.Name || r.Node != nil && r.Node.Name != r.Name {
			t.Errorf("row %s holds %v / %v", r.Name, r.Record, r.Node)
		}
		out = append(out, rowView{r.Name, r.Record != nil, r.Node != nil, r.Conflict})
	}
	return out
}

// The pool's rows join its records with the Nodes it selects: records of
// nodes that left, selected Nodes without a record yet, Nodes another pool
// also selects; not records of other pools, Nodes of other pools or Nodes
// being deleted.
func TestPoolFeedRows(t *testing.T) {
	f := New()
	for _, o := range []client.Object{
		feedNode("a", "p", false), feedBN("a", "p"),
		feedNode("b", "p", false),
		feedNode("c", "both", false), feedBN("c", "p"),
		feedBN("d", "p"),
		feedNode("e", "q", false), feedBN("e", "q"),
		feedNode("g", "p", true),
	} {
		f.Observe(o, false)
	}
	got := viewRows(t, f.Rows(scopeP()))
	want := []rowView{{"a", true, true, ""}, {"b", false, true, ""}, {"c", true, true, "q"}, {"d", true, false, ""}}
	if !slices.Equal(got, want) {
		t.Errorf("rows = %+v, want %+v", got, want)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		rows := f.Rows(scopeP())
		if r := rollout.FindRow(rows, n); r == nil || r.Name != n {
			t.Errorf("rollout.FindRow(%q) = %v", n, r)
		}
	}
	for _, n := range []string{"", "aa", "e", "z"} {
		if r := rollout.FindRow(f.Rows(scopeP()), n); r != nil {
			t.Errorf("rollout.FindRow(%q) = %v, want nil", n, r)
		}
	}
}

// A pool's rows kept up to date from the changes equal rows built afresh,
// whatever happens to the objects: a random walk of creates, label moves,
// deletions and pool changes, checked after every few events.
func TestPoolFeedUpdateMatchesRebuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	f := New()
	sc := scopeP()
	if _, _, ok := f.Update(sc, nil); ok {
		t.Fatalf("update of a pool whose rows were never built reports ok")
	}
	rows := f.Rows(sc)
	pools := []string{"p", "q", "both", "none"}
	for step := 0; step < 3000; step++ {
		name := fmt.Sprintf("n%02d", rng.IntN(40))
		switch rng.IntN(6) {
		case 0, 1:
			f.Observe(feedNode(name, pools[rng.IntN(len(pools))], rng.IntN(8) == 0), false)
		case 2:
			f.Observe(feedNode(name, "p", false), true)
		case 3, 4:
			f.Observe(feedBN(name, pools[rng.IntN(2)]), false)
		case 5:
			f.Observe(feedBN(name, "p"), true)
		}
		if rng.IntN(5) == 0 {
			var ok bool
			if rows, _, ok = f.Update(sc, rows); !ok {
				t.Fatalf("step %d: update lost track of the pool", step)
			}
			fresh := f.Rows(sc)
			if !slices.Equal(rows, fresh) {
				t.Fatalf("step %d: updated rows %+v\nfresh rows %+v", step, viewRows(t, rows), viewRows(t, fresh))
			}
		}
	}
	if len(rows) == 0 {
		t.Fatalf("the walk never gave the pool a row: the test checks nothing")
	}
}

// rebuild reports the names where kept rows went wrong (a missed change),
// and nothing when they are right.
func TestPoolFeedRebuildReportsDivergence(t *testing.T) {
	f := New()
	sc := scopeP()
	f.Observe(feedNode("a", "p", false), false)
	f.Observe(feedNode("b", "p", false), false)
	rows := f.Rows(sc)
	f.Observe(feedBN("a", "p"), false)
	if _, diff := f.Rebuild(sc, slices.Clone(rows)); len(diff) != 0 {
		t.Errorf("rebuild after a tracked change reports %v", diff)
	}
	// A change the tracking missed: b's row dropped from the kept rows.
	rows = f.Rows(sc)
	fresh, diff := f.Rebuild(sc, rows[:1])
	if !slices.Equal(diff, []string{"b"}) {
		t.Errorf("diff = %v, want [b]", diff)
	}
	if len(fresh) != 2 {
		t.Errorf("rebuild returned %d rows, want 2", len(fresh))
	}
}

// A full rebuild lends the kept row of a name whose record and Node are
// still the feed's objects; a kept row naming an older object (an event the
// tracking missed) is built again and reported, even when the facts it
// carries are the same.
func TestPoolFeedRebuildChecksEveryObject(t *testing.T) {
	f := New()
	sc := scopeP()
	for _, n := range []string{"a", "b", "c"} {
		f.Observe(feedNode(n, "p", false), false)
		f.Observe(feedBN(n, "p"), false)
	}
	rows := f.Rows(sc)
	fresh, diff := f.Rebuild(sc, slices.Clone(rows))
	if len(diff) != 0 || !slices.Equal(fresh, rows) {
		t.Fatalf("rebuild of unchanged rows: diff %v, rows equal %v", diff, slices.Equal(fresh, rows))
	}
	stale := slices.Clone(rows)
	stale[1].Record = feedBN("b", "p") // same content, another object
	stale[2].Node = feedNode("c", "p", false)
	fresh, diff = f.Rebuild(sc, stale)
	if !slices.Equal(diff, []string{"b", "c"}) {
		t.Errorf("diff = %v, want [b c]", diff)
	}
	if !slices.Equal(fresh, rows) {
		t.Errorf("rebuild kept a stale row: %+v", fresh)
	}
}

// rebuild returns the rows a full build gives, whatever the kept rows
// were, and names exactly the kept rows that differ from them: a random
// walk of events, with the kept rows sometimes spoiled (a row dropped, an
// extra row, a row holding an older object or another conflict).
func TestPoolFeedRebuildMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	f := New()
	sc := scopeP()
	rows := f.Rows(sc)
	pools := []string{"p", "q", "both", "none"}
	spoiled := 0
	for step := 0; step < 3000; step++ {
		name := fmt.Sprintf("n%02d", rng.IntN(40))
		switch rng.IntN(6) {
		case 0, 1:
			f.Observe(feedNode(name, pools[rng.IntN(len(pools))], rng.IntN(8) == 0), false)
		case 2:
			f.Observe(feedNode(name, "p", false), true)
		case 3, 4:
			f.Observe(feedBN(name, pools[rng.IntN(2)]), false)
		case 5:
			f.Observe(feedBN(name, "p"), true)
		}
		if rng.IntN(5) != 0 {
			continue
		}
		var want []string
		if len(rows) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(rows))
			want = []string{rows[i].Name}
			switch rng.IntN(4) {
			case 0:
				rows = slices.Delete(rows, i, i+1)
			case 1:
				if rows[i].Record != nil {
					rows[i].Record = rows[i].Record.DeepCopy()
				} else {
					rows[i].Conflict = "x"
				}
			case 2:
				// The conflict of a row holding the feed's record and
				// Node is theirs (a full build lends the row): spoil it
				// on the others only.
				if rows[i].Record != nil && rows[i].Node != nil {
					rows[i].Node = rows[i].Node.DeepCopy()
				} else {
					rows[i].Conflict = "x"
				}
			case 3:
				extra := rollout.Row{Name: rows[i].Name + "x"}
				if i+1 < len(rows) && rows[i+1].Name <= extra.Name {
					want = nil // not where it sorts: spoil nothing
					break
				}
				rows = slices.Insert(rows, i+1, extra)
				want = []string{extra.Name}
			}
		}
		// The spoilt row's name may be one the pending changes rebuild
		// anyway: those are not differences.
		pending := map[string]bool{}
		for n := range f.dirty[sc.Pool] {
			pending[n] = true
		}
		if len(want) == 1 && pending[want[0]] {
			want = nil
		}
		fresh, diff := f.Rebuild(sc, rows)
		if all := f.Rows(sc); !slices.Equal(fresh, all) {
			t.Fatalf("step %d: rebuilt rows %+v\nfull build %+v", step, viewRows(t, fresh), viewRows(t, all))
		}
		if !slices.Equal(diff, want) {
			t.Fatalf("step %d: diff %v, want %v", step, diff, want)
		}
		spoiled += len(want)
		rows = fresh
	}
	if spoiled == 0 {
		t.Fatalf("no row was spoilt: the test checks nothing")
	}
}

// Reset forgets objects and tracking, as a new controller process.
func TestPoolFeedReset(t *testing.T) {
	f := New()
	sc := scopeP()
	f.Observe(feedNode("a", "p", false), false)
	f.Rows(sc)
	f.Reset()
	if _, _, ok := f.Update(sc, nil); ok {
		t.Errorf("update after Reset reports ok")
	}
	if rows := f.Rows(sc); len(rows) != 0 {
		t.Errorf("rows after Reset = %+v", viewRows(t, rows))
	}
}

// feeding records every event, also the ones its inner handler ignores.
func TestFeedingRecordsEveryEvent(t *testing.T) {
	f := New()
	sc := scopeP()
	f.Rows(sc)
	h := Feeding(f, handler.Funcs{}) // enqueues nothing
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: feedNode("a", "p", false)}, nil)
	h.Update(ctx, event.UpdateEvent{ObjectOld: feedBN("b", "p"), ObjectNew: feedBN("b", "p")}, nil)
	h.Create(ctx, event.CreateEvent{Object: feedNode("c", "p", false)}, nil)
	h.Delete(ctx, event.DeleteEvent{Object: feedNode("c", "p", false)}, nil)
	rows, changed, ok := f.Update(sc, nil)
	if !ok || changed != 3 {
		t.Errorf("update: changed %d ok %v, want 3 true", changed, ok)
	}
	if got, want := viewRows(t, rows), []rowView{{"a", false, true, ""}, {"b", true, false, ""}}; !slices.Equal(got, want) {
		t.Errorf("rows = %+v, want %+v", got, want)
	}
}

// A tally kept by Update (Scope.Tally) counts the rows Update returns, as
// a full count of them does, whatever happens to the objects: a random walk
// of records changing phase and image, Nodes coming, going and changing
// pool, checked after every update.
func TestPoolFeedUpdateKeepsTally(t *testing.T) {
	const target = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	digests := []string{"", "sha256:1111111111111111111111111111111111111111111111111111111111111111", "sha256:2222222222222222222222222222222222222222222222222222222222222222", "sha256:3333333333333333333333333333333333333333333333333333333333333333"}
	targetDigest := digests[2]
	rng := rand.New(rand.NewPCG(3, 5))
	f := New()
	sc := scopeP()
	rows := f.Rows(sc)
	sc.Tally = &rollout.Tally{}
	sc.Tally.Count(rows, target, targetDigest)
	pools := []string{"p", "q", "both", "none"}
	counted := 0
	for step := 0; step < 3000; step++ {
		name := fmt.Sprintf("n%02d", rng.IntN(40))
		switch rng.IntN(6) {
		case 0, 1:
			f.Observe(feedNode(name, pools[rng.IntN(len(pools))], rng.IntN(8) == 0), false)
		case 2:
			f.Observe(feedNode(name, "p", false), true)
		case 3, 4:
			bn := feedBN(name, pools[rng.IntN(2)])
			bn.Status.Phase = v1alpha1.AllPhases[rng.IntN(len(v1alpha1.AllPhases))]
			if d := digests[rng.IntN(len(digests))]; d != "" {
				bn.Status.Booted = &v1alpha1.HostImage{Image: "registry.example/os@" + d, Digest: d}
			}
			f.Observe(bn, false)
		case 5:
			f.Observe(feedBN(name, "p"), true)
		}
		if rng.IntN(3) != 0 {
			continue
		}
		var ok bool
		if rows, _, ok = f.Update(sc, rows); !ok {
			t.Fatalf("step %d: update lost track of the pool", step)
		}
		var full rollout.Tally
		full.Count(rows, target, targetDigest)
		if !sc.Tally.Equal(&full) {
			t.Fatalf("step %d: kept tally %+v, full count %+v", step, *sc.Tally, full)
		}
		counted += len(rows)
	}
	if counted == 0 {
		t.Fatalf("the walk never gave the pool a row: the test checks nothing")
	}
}
