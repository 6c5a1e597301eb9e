// Package poolfeed is what the pool reconciler knows of the BootcNodes and
// Nodes between passes: its watch handlers feed it every event, and a
// pass reads the names that changed since its last one.
package poolfeed

import (
	"context"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
)

// Feed is what the pool reconciler knows of the BootcNodes and Nodes,
// fed by the pool controller's watch handlers (controller.Controllers) with every
// event, and which names changed since each pool's last pass. A pass then
// re-reads only the changed names instead of listing the whole pool: its
// reads cost O(changes), not O(pool) (docs/decisions.md, "incremental pool
// pass").
//
// The feed holds the objects the events carry, which are shared with the
// informer's cache: they are never changed. Per object, events arrive in
// order, so the feed never goes back in time; and a controller starts its
// workers only once every handler has seen the informers' initial lists,
// so the feed is complete before the first pass. Safe for concurrent use.
type Feed struct {
	mu sync.Mutex
	// objs holds, by name, the latest BootcNode and Node of each name that
	// has one or both.
	objs map[string]*entry
	// sorted are the entries of objs sorted by name; nil when a name came
	// or went since they were sorted.
	sorted []*entry
	// dirty holds, per pool that keeps a view, the names seen in an event
	// since that pool last took them.
	dirty map[string]map[string]struct{}
	// strings holds one copy of each image reference and digest the rows
	// carry (see rowFacts); there are few of them.
	strings map[string]string
}

// entry is what the feed holds of one name: its record and its Node, nil
// when there is none.
type entry struct {
	name string
	bn   *v1alpha1.BootcNode
	node *corev1.Node
}

// New returns an empty feed.
func New() *Feed {
	f := &Feed{}
	f.Reset()
	return f
}

// Reset forgets everything, as a restarted controller process does.
func (f *Feed) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs = map[string]*entry{}
	f.sorted = nil
	f.dirty = map[string]map[string]struct{}{}
	f.strings = map[string]string{}
}

// intern returns the feed's copy of s.
func (f *Feed) Intern(s string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.internLocked(s)
}

func (f *Feed) internLocked(s string) string {
	if s == "" {
		return ""
	}
	if c, ok := f.strings[s]; ok {
		return c
	}
	f.strings[s] = s
	return s
}

// observe records the latest state of o (nil state when gone).
func (f *Feed) Observe(o client.Object, gone bool) {
	name := o.GetName()
	f.mu.Lock()
	defer f.mu.Unlock()
	e, had := f.objs[name]
	if !had {
		e = &entry{name: name}
	}
	switch obj := o.(type) {
	case *v1alpha1.BootcNode:
		if gone {
			obj = nil
		}
		e.bn = obj
	case *corev1.Node:
		if gone {
			obj = nil
		}
		e.node = obj
	default:
		return
	}
	if has := e.bn != nil || e.node != nil; has != had {
		if has {
			f.objs[name] = e
		} else {
			delete(f.objs, name)
		}
		f.sorted = nil
	}
	for _, names := range f.dirty {
		names[name] = struct{}{}
	}
}

// feeding wraps a pool controller handler of BootcNodes or Nodes so that
// every event reaches f first, whatever inner does with it. It is a type of
// its own, not a handler.Funcs: the inner handler keeps its queue handling
// (priorities), and an event does not pay handler.Funcs' per-call
// reflection twice.
func Feeding(f *Feed, inner handler.EventHandler) handler.EventHandler {
	if f == nil {
		return inner
	}
	return feedingHandler{f: f, inner: inner}
}

// Unwrap returns the feed and the inner handler of h when Feeding made it
// (ok), so that a caller can rebuild it around another inner handler.
func Unwrap(h handler.EventHandler) (f *Feed, inner handler.EventHandler, ok bool) {
	fh, ok := h.(feedingHandler)
	if !ok {
		return nil, nil, false
	}
	return fh.f, fh.inner, true
}

type feedingHandler struct {
	f     *Feed
	inner handler.EventHandler
}

func (h feedingHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.f.Observe(e.Object, false)
	h.inner.Create(ctx, e, q)
}

func (h feedingHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.f.Observe(e.ObjectNew, false)
	h.inner.Update(ctx, e, q)
}

func (h feedingHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.f.Observe(e.Object, true)
	h.inner.Delete(ctx, e, q)
}

func (h feedingHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Generic(ctx, e, q)
}

// Scope is what decides a pool's rows: its name, its selector and the
// other pools' selectors (for conflicts).
type Scope struct {
	Pool   string
	Sel    labels.Selector
	Others []Other
	// Tally, when not nil, counts the rows Update (and Rebuild) is given:
	// each row they replace, insert or remove is taken out of it and the
	// new one put in, so it keeps counting the rows they return.
	Tally *rollout.Tally
}

type Other struct {
	Name string
	Sel  labels.Selector
}

// row builds the row of name from the feed's objects e (nil for none),
// and whether there is one (a record of the pool, or a Node the pool
// selects). f.mu is held.
func (f *Feed) row(sc *Scope, name string, e *entry) (rollout.Row, bool) {
	row := rollout.Row{Name: name}
	if e == nil {
		return row, false
	}
	if n := e.node; n != nil && n.DeletionTimestamp == nil && sc.Sel.Matches(labels.Set(n.Labels)) {
		row.SetNode(n)
		for _, o := range sc.Others {
			if o.Sel.Matches(labels.Set(n.Labels)) {
				row.Conflict = o.Name
				break
			}
		}
	}
	if bn := e.bn; bn != nil && bn.Spec.Pool == sc.Pool {
		row.SetRecord(bn, f.internLocked)
	}
	return row, row.Record != nil || row.Node != nil
}

// holds reports whether row's record and Node are the objects e, the
// feed's for its name, both present (a row without one is built again:
// the feed may hold an object the scope does not select).
func (e *entry) holds(row *rollout.Row) bool {
	return row.Record != nil && row.Node != nil && e.bn == row.Record && e.node == row.Node
}

// rows builds the pool's rows, sorted by name, from everything in the feed,
// and starts (or restarts) tracking the pool's changes from this moment.
func (f *Feed) Rows(sc *Scope) []rollout.Row {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rowsLocked(sc, nil)
}

// rowsLocked builds the rows; prev (sorted by name, built for the same
// scope, or nil) lends a row whose record and Node are the very objects the
// feed holds for its name: a row is a function of those two objects and
// the scope, and the feed's objects are never changed, so building it again
// gives the same row. A row the change tracking missed names an object the
// feed no longer holds, and is built afresh.
func (f *Feed) rowsLocked(sc *Scope, prev []rollout.Row) []rollout.Row {
	entries := f.sortedEntries()
	rows := make([]rollout.Row, 0, len(entries))
	k := 0
	for _, e := range entries {
		name := e.name
		for k < len(prev) && prev[k].Name < name {
			k++
		}
		if k < len(prev) && prev[k].Name == name && e.holds(&prev[k]) {
			rows = append(rows, prev[k])
			continue
		}
		if row, ok := f.row(sc, name, e); ok {
			rows = append(rows, row)
		}
	}
	f.dirty[sc.Pool] = map[string]struct{}{}
	return rows
}

// sortedEntries returns f.sorted, sorting the entries again if a name
// came or went. The slice is shared: the caller must not change it.
func (f *Feed) sortedEntries() []*entry {
	if f.sorted == nil {
		sorted := make([]*entry, 0, len(f.objs))
		for _, e := range f.objs {
			sorted = append(sorted, e)
		}
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
		f.sorted = sorted
	}
	return f.sorted
}

// update applies to rows (sorted by name, built by rows) the changes seen
// since the pool's last rows or update, and returns them and how many
// names changed. ok is false when the pool is not tracked (its rows were
// not built since the feed was reset): the caller must build them.
func (f *Feed) Update(sc *Scope, rows []rollout.Row) (out []rollout.Row, changed int, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.updateLocked(sc, rows)
}

func (f *Feed) updateLocked(sc *Scope, rows []rollout.Row) ([]rollout.Row, int, bool) {
	dirty, tracked := f.dirty[sc.Pool]
	if !tracked {
		return rows, 0, false
	}
	f.dirty[sc.Pool] = map[string]struct{}{}
	for name := range dirty {
		row, has := f.row(sc, name, f.objs[name])
		i := rollout.SearchRows(rows, name)
		found := i < len(rows) && rows[i].Name == name
		switch {
		case has && found:
			sc.untally(&rows[i])
			rows[i] = row
			sc.tally(&rows[i])
		case has:
			rows = append(rows, rollout.Row{})
			copy(rows[i+1:], rows[i:])
			rows[i] = row
			sc.tally(&rows[i])
		case found:
			sc.untally(&rows[i])
			rows = append(rows[:i], rows[i+1:]...)
		}
	}
	return rows, len(dirty), true
}

// tally and untally keep the scope's Tally, if it has one, counting the
// rows the feed adds and removes.
func (sc *Scope) tally(row *rollout.Row) {
	if sc.Tally != nil {
		sc.Tally.Add(row)
	}
}

func (sc *Scope) untally(row *rollout.Row) {
	if sc.Tally != nil {
		sc.Tally.Remove(row)
	}
}

// rebuild is a full build that checks the incremental one: it applies the
// pending changes to rows, builds the rows afresh, and returns the fresh
// rows and the names where the two differ, which is a bug in the change
// tracking. Both are built at one instant of the feed.
//
// A kept row whose record and Node are the feed's objects is the row a
// full build lends (rowsLocked), so it is equal by construction: only the
// other names are built again and compared. Without a difference the kept
// rows are the fresh ones and are returned as they are; with one, the rows
// are built afresh (lending as rowsLocked does).
func (f *Feed) Rebuild(sc *Scope, rows []rollout.Row) (fresh []rollout.Row, diff []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rows, _, ok := f.updateLocked(sc, rows)
	if !ok {
		return f.rowsLocked(sc, nil), nil
	}
	k := 0
	for _, e := range f.sortedEntries() {
		name := e.name
		for k < len(rows) && rows[k].Name < name {
			diff = append(diff, rows[k].Name) // a row of a name the feed does not hold
			k++
		}
		kept := k < len(rows) && rows[k].Name == name
		if kept && e.holds(&rows[k]) {
			k++
			continue
		}
		row, ok := f.row(sc, name, e)
		switch {
		case ok && kept:
			if row != rows[k] {
				diff = append(diff, name)
			}
			k++
		case ok:
			diff = append(diff, name)
		case kept:
			diff = append(diff, name)
			k++
		}
	}
	for ; k < len(rows); k++ {
		diff = append(diff, rows[k].Name)
	}
	if len(diff) == 0 {
		return rows, nil
	}
	return f.rowsLocked(sc, rows), diff
}

// forget stops tracking pool.
func (f *Feed) Forget(pool string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.dirty, pool)
}
