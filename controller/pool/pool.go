package pool

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/cached"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/patch"
	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
)

// Reconciler owns a pool's membership (one BootcNode per member Node),
// its target digest, which nodes may stage, the reboot slot table and the
// pool status.
type Reconciler struct {
	client   client.Client
	clock    clock.PassiveClock
	resolver resolve.Resolver
	recorder options.Recorder
	metrics  *options.Metrics
	reader   client.Reader
	opts     options.Options
	feed     *poolfeed.Feed

	// mu guards last, the time and generation of each pool's last pass,
	// and views. last only paces passes (see passInterval); nothing is
	// decided from it, and a restarted controller starts with a full pass.
	mu    sync.Mutex
	last  map[string]pass
	views map[string]*poolView
	// wrote is the status each pool's last status write stored (by pool
	// name, for the pool's UID): a cache that has not shown that write
	// yet must not make a pass skip the write it needs (cacheBehind).
	wrote map[string]wroteStatus
}

// wroteStatus is a pool status this controller wrote.
type wroteStatus struct {
	uid    types.UID
	status v1alpha1.BootcNodePoolStatus
}

// CacheLagPoll is how soon a pass looks again when the cache has not yet
// shown the pool's last status write.
const CacheLagPoll = time.Second

// cacheBehind reports whether the pool as cached (its status cached) is
// older than this controller's last status write of it, which differs
// from st, the status the pass computed: a pass that found cached equal
// to st would write nothing, and the API server would keep the older
// write for good (a pool's own status writes do not wake it). Explorer
// seed 96057 of cluster-pool-image-revert-mid-reboot: a record deleted
// and made again was "1 pending" at the last write; the pool's event of
// that write reached the cache 20 s late, and the pass after the node
// was updated found the cache's older "3/3 updated" equal to its own and
// wrote nothing, so the pool said "1 pending" to the end.
func (r *Reconciler) cacheBehind(pool *v1alpha1.BootcNodePool, cached, st *v1alpha1.BootcNodePoolStatus) bool {
	r.mu.Lock()
	w, ok := r.wrote[pool.Name]
	r.mu.Unlock()
	return ok && w.uid == pool.UID && !equalStatus(&w.status, st) && !equalStatus(&w.status, cached)
}

// poolView is a pool's row table kept between passes and updated from the
// feed's changes. It is rebuilt from the whole feed when the pool's spec or
// the other pools' selectors change, and every FullPassInterval, which
// also checks the change tracking (a difference is logged and counted in
// bootroll_pool_view_mismatches_total).
type poolView struct {
	gen    int64
	others string
	built  time.Time
	rows   []rollout.Row
	// tally counts rows for the pool's target (rollout.Pass.Tally): the
	// feed keeps it as it changes rows, and it is counted afresh when the
	// rows are rebuilt or the target changes.
	tally rollout.Tally
	// gauges are the pool's series of Options.Metrics, looked up once for
	// the view instead of by their labels (hashed under the vector's lock)
	// on every pass; nil until the first pass with metrics. A pool being
	// deleted drops its view (forget) before its series go (finalize).
	gauges *poolGauges
}

type poolGauges struct {
	slotsInUse, slotsMax, halted prometheus.Gauge
}

// rowEdits are the changes a pass makes to its rows (the records it
// creates, directs or deletes), which are the pass's own: the pass works
// on its view's rows in place (a pool's passes never overlap), and undo
// puts back each row it changed, so the view keeps saying what the feed
// says. Copying the table for each pass instead (a pool of 200 nodes: some
// 35 KB of rows holding pointers) was about 1% of a twin run's CPU.
type rowEdits struct {
	rows   []rollout.Row
	tally  *rollout.Tally // counts rows, and is kept counting them
	intern func(string) string
	// saved holds each changed row as it was before its first change.
	saved []rollout.Row
}

// setRecord sets row's record (row is one of e.rows) for this pass.
func (e *rowEdits) setRecord(row *rollout.Row, bn *v1alpha1.BootcNode) {
	if !slices.ContainsFunc(e.saved, func(s rollout.Row) bool { return s.Name == row.Name }) {
		e.saved = append(e.saved, *row)
	}
	e.tally.Remove(row)
	row.SetRecord(bn, e.intern)
	e.tally.Add(row)
}

// undo puts back the rows the pass changed.
func (e *rowEdits) undo() {
	for _, s := range e.saved {
		row := rollout.FindRow(e.rows, s.Name)
		e.tally.Remove(row)
		*row = s
		e.tally.Add(row)
	}
	e.saved = nil
}

// FullPassInterval is how often a pool's row table is rebuilt from
// everything the controller knows instead of from the changes.
const FullPassInterval = time.Minute

type pass struct {
	at  time.Time
	gen int64
}

// passInterval is the least time between two full passes over a pool of n
// nodes. A pass costs O(n), so a large pool is summarised less often: 1 s
// (rollout.PoolStatusDebounce) up to 999 nodes, then 1 s per 500 nodes (2 s at
// 1,000, 4 s at 2,000), at most 10 s. A spec change always gets a pass at
// once. Node-level work (cordon, drain, verify) is not paced: it runs in the
// node reconciler; only the grant of a freed slot can wait up to one
// interval.
func passInterval(nodes int32) time.Duration {
	d := time.Duration(nodes/500) * time.Second
	return min(max(d, rollout.PoolStatusDebounce), 10*time.Second)
}

// NewReconciler builds the pool reconciler from its edges.
func NewReconciler(c client.Client, opts options.Options) *Reconciler {
	return &Reconciler{client: c, clock: opts.Clock, resolver: opts.Resolver, recorder: opts.Recorder, metrics: opts.Metrics, reader: opts.Reader(c), opts: opts, feed: opts.Feed}
}

// Reconcile brings one pool one step closer to its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// The pool's name goes into the lines logged (rarely: a deferred
	// slot, a bug report), not into the logger of every pass, where
	// WithValues allocated for nothing.
	log := logf.FromContext(ctx)
	now := r.clock.Now()
	// The pools are read once, as the cache holds them (not copied): the
	// pacing is decided on them (most requests of a busy pool only learn
	// when the next pass is due), the pass works on a copy of its own pool
	// and compares it with the original, and the others give the conflicts.
	pools, err := cached.Pools(ctx, r.client)
	if err != nil {
		return reconcile.Result{}, err
	}
	orig := cached.Find(pools, req.Name)
	if orig == nil {
		r.forget(req.Name)
		return reconcile.Result{}, nil
	}
	if orig.DeletionTimestamp != nil {
		r.forget(req.Name)
		return r.finalize(ctx, orig)
	}
	if r.feed == nil {
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("pool reconciler built without Options.Feed: nothing tells it about BootcNodes and Nodes"))
	}
	r.mu.Lock()
	last, seen := r.last[req.Name]
	r.mu.Unlock()
	if every := passInterval(orig.Status.Nodes); seen && last.gen == orig.Generation && now.Sub(last.at) < every {
		return reconcile.Result{RequeueAfter: every - now.Sub(last.at)}, nil
	}
	pool := *orig.DeepCopy()
	if !controllerutil.ContainsFinalizer(&pool, v1alpha1.Finalizer) {
		// Before the pool can go, its nodes are cleaned up (finalize).
		before := pool.DeepCopy()
		controllerutil.AddFinalizer(&pool, v1alpha1.Finalizer)
		if err := r.client.Patch(ctx, &pool, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return reconcile.Result{RequeueAfter: time.Second}, nil
			}
			return reconcile.Result{}, fmt.Errorf("add finalizer %s to pool %s: %w", v1alpha1.Finalizer, pool.Name, err)
		}
	}
	st := &pool.Status
	var requeue time.Duration
	wake := func(d time.Duration) {
		if d > 0 && (requeue == 0 || d < requeue) {
			requeue = d
		}
	}

	// 1. Target digest.
	resolvedFrom := st.TargetImage
	resolveErr := r.resolveTarget(ctx, &pool, now)
	if !imageref.IsDigest(string(pool.Spec.Image)) {
		wake(rollout.ResolveInterval)
	}
	// Interned like the rows' facts, so that comparing is a pointer check.
	target := r.feed.Intern(st.TargetImage)
	targetDigest := r.feed.Intern(imageref.Digest(target))

	// 2. Membership: one row per node name, sorted, joining the pool's
	// records with the Nodes it selects, from the feed (see rowsFor). The
	// pass changes rows only through edits, which puts them back when the
	// pass ends; the objects in them are shared with the cache: never
	// change them in place; every write below works on a DeepCopy.
	rows, view, members, conflicts := r.rowsFor(&pool, pools, target, targetDigest, now, log)
	tally := &view.tally
	edits := &rowEdits{rows: rows, tally: tally, intern: r.feed.Intern}
	defer edits.undo()
	// A member Node without a record gets one. It is created after the
	// staging directives are decided (step 4), already directed when the
	// rules direct it: one write where there were two, and its daemon's
	// first report already says what it does about the target.
	// The tally says how many rows each of these two scans acts on: most
	// passes, none.
	unborn := map[string]bool{}
	unrecorded, unheld := tally.Unrecorded(), tally.Unheld()
	for i := 0; i < len(rows) && len(unborn) < unrecorded; i++ {
		row := &rows[i]
		if row.Record != nil || row.Node == nil || row.Conflict != "" {
			continue
		}
		unborn[row.Name] = true
		edits.setRecord(row, r.newBootcNode(&pool, row.Node))
	}
	for i := 0; i < len(rows) && unheld > 0; i++ {
		row := &rows[i]
		bn := row.Record
		if bn == nil || (row.Node != nil && row.Conflict == "") {
			continue
		}
		unheld--
		// No longer a member: the node reconciler restores a cordon
		// first; the record goes once nothing of bootroll is left on the Node.
		if bn.Status.Rollout.Cordoned || rollout.HoldsSlot(row.Phase) {
			continue
		}
		if rollout.SlotGranted(st.Slots, bn, now) {
			// A grant this cache does not show yet (the record's slot
			// phase is the pool's own write): the node reconciler may act
			// on it, so the record and its slot stay until it has left.
			continue
		}
		if row.Conflict != "" && row.Node != nil {
			continue // left alone while in conflict
		}
		if member, err := r.stillMember(ctx, &pool, row); err != nil || member {
			if err != nil {
				return reconcile.Result{}, err
			}
			continue
		}
		if err := r.client.Delete(ctx, bn.DeepCopy()); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete BootcNode %s that left pool %s: %w", row.Name, pool.Name, err)
		}
		edits.setRecord(row, nil)
	}

	// 3-6: the rollout rules (package rollout) decide; this reconciler
	// reads for them and writes what they decide.
	p := &rollout.Pass{Pool: &pool, Rows: rows, Members: members, Tally: tally, Target: target, TargetDigest: targetDigest, Now: now, TestOnly: r.opts.TestOnly}
	p.Wake = requeue

	// 3. Halt, and the maintenance window.
	halted, failed := p.Halt()
	open := p.Open()
	active := target != "" && !pool.Spec.Paused && !halted

	// 4. Staging directives, bounded by maxStaging; a paused pool directs
	// only the nodes that run its target already (DirectPaused).
	var todo []*rollout.Row
	switch {
	case active:
		todo = p.Direct()
	case target != "" && pool.Spec.Paused && !halted:
		todo = p.DirectPaused()
	}
	if len(todo) > 0 {
		retry, err := r.direct(ctx, &pool, target, todo, unborn, edits)
		if err != nil {
			return reconcile.Result{}, err
		}
		if retry {
			p.WakeIn(time.Second)
		}
	}
	// The records not directed are created as they are.
	for _, name := range slices.Sorted(maps.Keys(unborn)) {
		row := rollout.FindRow(rows, name)
		bn, err := r.createBootcNode(ctx, &pool, row.Record)
		if err != nil {
			return reconcile.Result{}, err
		}
		edits.setRecord(row, bn)
	}

	// 5. Slots. The rules keep the slots in use and order the
	// candidates; each is checked for safety (Ready, not being disrupted
	// by Karpenter) only when it is about to get a slot, so the NodeClaim
	// reads are bounded by the free slots.
	held, maxU, free, next, err := p.Slots(halted, active, open, !seen)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	// A node down in the reboot of a deleted record's slot, whose new
	// record is staged for the target, gets a fresh grant in place of the
	// entry it holds: it takes no free slot, and may take it while not
	// Ready (it is down because of bootroll), as a node down on the
	// image it failed may.
	for _, name := range p.Takeovers {
		row := rollout.FindRow(rows, name)
		why, err := karpenter.SlotBlocker(ctx, r.reader, r.client.RESTMapper(), row.Node, true)
		if err != nil {
			return reconcile.Result{}, err
		}
		if why != "" {
			p.Defer(name, why)
			p.WakeIn(rollout.DrainPoll)
			continue
		}
		slot := v1alpha1.Slot{Node: name, Image: target, Since: metav1.NewTime(now), UID: string(row.Record.UID), Down: true}
		held = slices.DeleteFunc(held, func(s v1alpha1.Slot) bool { return s.Node == name })
		held = append(held, slot)
	}
	firstNew := len(held)
	for granted := 0; granted < free; {
		name, ok := next()
		if !ok {
			break
		}
		row := rollout.FindRow(rows, name)
		// Down on the image it failed (not one it merely runs).
		downOnFailed := row.Failed != "" && row.Booted == imageref.Digest(row.Failed)
		why, err := karpenter.SlotBlocker(ctx, r.reader, r.client.RESTMapper(), row.Node, downOnFailed)
		if err != nil {
			return reconcile.Result{}, err
		}
		if why != "" {
			log.V(1).Info("slot deferred", "pool", req.Name, "node", name, "why", why)
			p.Defer(name, why)
			p.WakeIn(rollout.DrainPoll)
			continue
		}
		granted++
		slot := v1alpha1.Slot{Node: name, Image: target, Since: metav1.NewTime(now)}
		if row.Record != nil {
			slot.UID = string(row.Record.UID)
		}
		held = append(held, slot)
	}
	if len(held) > firstNew {
		if held, err = r.confirmMembers(ctx, &pool, p, held, firstNew, members, maxU, free); err != nil {
			return reconcile.Result{}, err
		}
		maxU = p.MaxU
	}
	st.Slots = held

	// 6. Aggregate.
	p.Report(resolveErr, conflicts, failed, halted, open)
	requeue = p.Wake
	if r.metrics != nil {
		g := view.gauges
		if g == nil {
			g = &poolGauges{slotsInUse: r.metrics.SlotsInUse.WithLabelValues(pool.Name), slotsMax: r.metrics.SlotsMax.WithLabelValues(pool.Name), halted: r.metrics.Halted.WithLabelValues(pool.Name)}
			view.gauges = g
		}
		g.slotsInUse.Set(float64(len(held)))
		g.slotsMax.Set(float64(maxU))
		r.metrics.SetPoolPhases(pool.Name, st.Phases)
		g.halted.Set(b2f(halted))
	}
	same := equalStatus(&orig.Status, st)
	if same && r.cacheBehind(&pool, &orig.Status, st) && (requeue == 0 || requeue > CacheLagPoll) {
		requeue = CacheLagPoll
	}
	if !same {
		// The controller is the only writer of a pool's status, so it is
		// replaced whole. The update carries the resourceVersion read, an
		// optimistic lock that makes the slot table safe: a reconcile that
		// read a stale pool cannot hand out a slot twice.
		write := func() error { return r.client.Status().Update(ctx, &pool) }
		if r.opts.TestOnly.CountSlotsFromCache {
			// No optimistic lock: what the cache said is written over
			// whatever another pass wrote.
			write = func() error { return r.client.Status().Patch(ctx, &pool, client.MergeFrom(orig)) }
		}
		if err := write(); err != nil {
			if apierrors.IsConflict(err) {
				return reconcile.Result{Requeue: true}, nil
			}
			return reconcile.Result{}, fmt.Errorf("update status of pool %s: %w", pool.Name, err)
		}
		r.mu.Lock()
		if r.wrote == nil {
			r.wrote = map[string]wroteStatus{}
		}
		r.wrote[pool.Name] = wroteStatus{uid: pool.UID, status: *pool.Status.DeepCopy()}
		r.mu.Unlock()
		// Once written: a tag resolved to a new digest is said by the
		// pass whose write records it. Said at the resolution, each pass
		// on a cache that did not show the write yet resolved the tag
		// again, said it again and lost its write to a conflict (the
		// seed 120245 regression of cluster-halt-lifted-by-node-delete-
		// karpenter, stale profile: fourteen Resolved events for one
		// digest in the first 19 s).
		if !imageref.IsDigest(string(pool.Spec.Image)) && st.TargetImage != resolvedFrom {
			r.event(&pool, corev1.EventTypeNormal, "Resolved", "%s resolved to %s", pool.Spec.Image, st.TargetImage)
		}
		// A reason the rollout stopped moving for is also an Event, so
		// `kubectl describe` and event exporters show it.
		for _, e := range rollout.StuckEvents(orig.Status.Conditions, st.Conditions) {
			r.event(&pool, corev1.EventTypeWarning, e.Reason, "%s", e.Message)
		}
	}

	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]pass{}
	}
	r.last[pool.Name] = pass{at: now, gen: pool.Generation}
	r.mu.Unlock()

	// 7. The granted nodes take their slots up themselves: the node
	// reconciler, the one writer of a record's phase and rollout record,
	// sees its node in status.slots (it watches the pool's slot table)
	// and cordons it (takeSlot).
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// confirmMembers checks the new grants of a pass, held[firstNew:], against
// the pool's members as the API server has them, when maxUnavailable is a
// percentage: the cache may still show a member that is gone or being
// deleted (Karpenter deletes nodes on its own), and a smaller pool has
// fewer slots (explorer seed 122078 of karpenter-defaults: a stale cache
// still counted a node Karpenter had been deleting for 3 s, and the pass
// granted two slots where the three members left allowed one). The count
// is a metadata-only listing, and only on passes that grant. The grants
// beyond what the listed members allow are deferred; a member the cache
// does not show yet does not add slots before the cache shows it.
func (r *Reconciler) confirmMembers(ctx context.Context, pool *v1alpha1.BootcNodePool, p *rollout.Pass, held []v1alpha1.Slot, firstNew, members, maxU, free int) ([]v1alpha1.Slot, error) {
	mu := pool.Spec.Rollout.MaxUnavailable
	if mu == nil || mu.Type != intstr.String {
		return held, nil
	}
	var l metav1.PartialObjectMetadataList
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	if err := r.reader.List(ctx, &l, client.MatchingLabels(pool.Spec.NodeSelector), client.UnsafeDisableDeepCopy); err != nil {
		return held, fmt.Errorf("count the members of pool %s before granting slots: %w", pool.Name, err)
	}
	listed := 0
	for i := range l.Items {
		if l.Items[i].DeletionTimestamp == nil {
			listed++
		}
	}
	if listed >= members {
		return held, nil
	}
	maxListed, err := rollout.MaxUnavailable(mu, listed)
	if err != nil {
		return held, reconcile.TerminalError(err)
	}
	keep := min(len(held)-firstNew, max(free-(maxU-maxListed), 0))
	why := fmt.Sprintf("pool has %d members on the API server, %d in the cache: maxUnavailable %s allows %d", listed, members, mu.StrVal, maxListed)
	for _, s := range held[firstNew+keep:] {
		p.Defer(s.Node, why)
	}
	p.MaxU = maxListed
	p.WakeIn(rollout.DrainPoll)
	return held[:firstNew+keep], nil
}

// resolveTarget sets status.targetImage from spec.image. A digest is used
// as is; a tag is resolved when the spec changed or rollout.ResolveInterval passed.
// A failure keeps the previous target and is reported as a condition.
func (r *Reconciler) resolveTarget(ctx context.Context, pool *v1alpha1.BootcNodePool, now time.Time) error {
	st := &pool.Status
	img := string(pool.Spec.Image)
	if imageref.IsDigest(img) {
		setTarget(st, img, nil, now)
		return nil
	}
	fresh := st.ObservedGeneration == pool.Generation && st.ResolvedAt != nil && now.Sub(st.ResolvedAt.Time) < rollout.ResolveInterval
	if fresh && st.TargetImage != "" {
		return nil
	}
	if r.resolver == nil {
		return fmt.Errorf("spec.image %q is a tag and no resolver is configured", img)
	}
	var secret *corev1.Secret
	if pool.Spec.ImagePullSecret != "" {
		secret = &corev1.Secret{}
		key := types.NamespacedName{Namespace: r.opts.SecretNamespace, Name: pool.Spec.ImagePullSecret}
		if err := r.reader.Get(ctx, key, secret); err != nil {
			return fmt.Errorf("read spec.imagePullSecret %s: %w", key, err)
		}
	}
	ref, err := r.resolver.Resolve(ctx, img, secret)
	if err != nil {
		return err
	}
	// A new digest is said once the status that records it is written
	// (Reconcile).
	setTarget(st, ref, &metav1.Time{Time: now}, now)
	return nil
}

// setTarget records ref as the pool's target, resolved at resolvedAt (nil
// for a digest), and when the target changes, since when it is the target.
func setTarget(st *v1alpha1.BootcNodePoolStatus, ref string, resolvedAt *metav1.Time, now time.Time) {
	if ref != st.TargetImage {
		st.TargetSince = &metav1.Time{Time: now}
	}
	st.TargetImage, st.TargetDigest, st.ResolvedAt = ref, imageref.Digest(ref), resolvedAt
}

// rowsFor returns the pool's rows (its view's own table: the pass changes
// them only through rowEdits, which puts them back), the view, whose tally
// counts the rows for target (whose digest is targetDigest), the number of member Nodes and the
// conflicts (one "node (also selected by pool p)" per node another pool
// selects too). The rows come from the pool's view, updated with the feed's
// changes since the last pass, or rebuilt (see poolView).
func (r *Reconciler) rowsFor(pool *v1alpha1.BootcNodePool, pools []v1alpha1.BootcNodePool, target, targetDigest string, now time.Time, log logr.Logger) ([]rollout.Row, *poolView, int, []string) {
	sc := &poolfeed.Scope{Pool: pool.Name, Sel: labels.SelectorFromSet(pool.Spec.NodeSelector)}
	var key strings.Builder
	for j := range pools {
		o := &pools[j]
		if o.Name == pool.Name {
			continue
		}
		if osel := rollout.PoolSelector(o); osel != nil {
			sc.Others = append(sc.Others, poolfeed.Other{Name: o.Name, Sel: osel})
		}
	}
	sort.Slice(sc.Others, func(i, j int) bool { return sc.Others[i].Name < sc.Others[j].Name })
	for _, o := range sc.Others {
		fmt.Fprintf(&key, "%s=%s;", o.Name, o.Sel)
	}
	r.mu.Lock()
	v := r.views[pool.Name]
	r.mu.Unlock()
	switch {
	case v == nil || v.gen != pool.Generation || v.others != key.String():
		v = &poolView{gen: pool.Generation, others: key.String(), built: now, rows: r.feed.Rows(sc)}
	case now.Sub(v.built) >= FullPassInterval:
		sc.Tally = &v.tally
		fresh, diff := r.feed.Rebuild(sc, v.rows)
		if len(diff) > 0 {
			log.Error(nil, "the pool's kept node table differed from a full rebuild; using the rebuild (a bootroll bug in change tracking: please report it)", "pool", pool.Name, "rows", len(diff), "nodes", rollout.TruncateList(diff))
			if r.metrics != nil {
				r.metrics.ViewMismatches.WithLabelValues(pool.Name).Add(float64(len(diff)))
			}
		}
		v.rows, v.built = fresh, now
		// The kept tally is checked as the rows are: counted afresh.
		var count rollout.Tally
		count.Count(v.rows, target, targetDigest)
		if len(diff) == 0 && v.tally.Counts(target, targetDigest) && !count.Equal(&v.tally) {
			log.Error(nil, "the pool's kept node counts differed from a full count; using the full count (a bootroll bug in change tracking: please report it)", "pool", pool.Name)
		}
		v.tally = count
	default:
		sc.Tally = &v.tally
		rows, _, ok := r.feed.Update(sc, v.rows)
		if !ok { // the feed was reset
			rows, v.built = r.feed.Rows(sc), now
			v.tally.Invalidate()
		}
		v.rows = rows
	}
	if !v.tally.Counts(target, targetDigest) {
		v.tally.Count(v.rows, target, targetDigest)
	}
	r.mu.Lock()
	if r.views == nil {
		r.views = map[string]*poolView{}
	}
	r.views[pool.Name] = v
	r.mu.Unlock()

	rows := v.rows
	var conflicts []string
	for i := 0; i < len(rows) && len(conflicts) < v.tally.Conflicts(); i++ {
		row := &rows[i] // not a copy: a row is some 200 bytes
		if row.Node != nil && row.Conflict != "" {
			conflicts = append(conflicts, fmt.Sprintf("%s (also selected by pool %s)", row.Name, row.Conflict))
		}
	}
	return rows, v, v.tally.Members(), conflicts
}

// forget drops what the reconciler keeps of a pool that is gone.
func (r *Reconciler) forget(pool string) {
	r.mu.Lock()
	delete(r.views, pool)
	delete(r.last, pool)
	r.mu.Unlock()
	if r.feed != nil {
		r.feed.Forget(pool)
	}
}

// stillMember double-checks, with a read of the Node, a record the pool's
// rows say has no member Node before the record is deleted: deleting is
// the one step a lagging feed must not take.
func (r *Reconciler) stillMember(ctx context.Context, pool *v1alpha1.BootcNodePool, row *rollout.Row) (bool, error) {
	if row.Node != nil {
		return true, nil
	}
	var n corev1.Node
	if err := r.client.Get(ctx, types.NamespacedName{Name: row.Name}, &n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return n.DeletionTimestamp == nil && rollout.Selects(pool, &n), nil
}

// newBootcNode is the record the pool makes for member Node n, not yet
// created (createBootcNode).
func (r *Reconciler) newBootcNode(pool *v1alpha1.BootcNodePool, n *corev1.Node) *v1alpha1.BootcNode {
	return &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{v1alpha1.LabelPool: pool.Name}, Finalizers: []string{v1alpha1.Finalizer}},
		Spec:       v1alpha1.BootcNodeSpec{Pool: pool.Name},
	}
}

// createBootcNode creates bn (from newBootcNode), owned by pool, and
// returns it; nil when a record of that name exists already (another
// pool's, or the cache is behind).
func (r *Reconciler) createBootcNode(ctx context.Context, pool *v1alpha1.BootcNodePool, bn *v1alpha1.BootcNode) (*v1alpha1.BootcNode, error) {
	bn = bn.DeepCopy()
	if err := controllerutil.SetControllerReference(pool, bn, r.client.Scheme()); err != nil {
		return nil, fmt.Errorf("own BootcNode %s: %w", bn.Name, err)
	}
	if err := r.client.Create(ctx, bn); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("create BootcNode %s for pool %s: %w", bn.Name, pool.Name, err)
	}
	return bn, nil
}

// direct writes target as spec.desiredImage of the rows the rules chose
// (rollout.Pass.Direct). Each write is locked on the record read, so a
// stale row is never retargeted: on a conflict the record is read afresh
// and decided again, once; retry reports a row still not written.
func (r *Reconciler) direct(ctx context.Context, pool *v1alpha1.BootcNodePool, target string, todo []*rollout.Row, unborn map[string]bool, edits *rowEdits) (retry bool, err error) {
	for _, row := range todo {
		bn := row.Record
		if unborn[row.Name] {
			// A new record is created directed.
			delete(unborn, row.Name)
			b := bn.DeepCopy()
			b.Spec.DesiredImage = target
			if b, err = r.createBootcNode(ctx, pool, b); err != nil {
				return retry, err
			}
			edits.setRecord(row, b)
			continue
		}
		b, err := r.retarget(ctx, bn, target)
		if apierrors.IsConflict(err) {
			// The row was stale (a daemon reporting often can keep it
			// so): decide again on the record read afresh, once.
			var fresh v1alpha1.BootcNode
			if err = r.reader.Get(ctx, types.NamespacedName{Name: bn.Name}, &fresh); err == nil {
				var f rollout.Facts
				f.SetFrom(&fresh, func(s string) string { return s })
				if !rollout.Directable(fresh.Status.Phase, fresh.Spec.DesiredImage, target, f.FailedOn(target, imageref.Digest(target))) {
					continue
				}
				b, err = r.retarget(ctx, &fresh, target)
			}
		}
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			if apierrors.IsConflict(err) {
				retry = true
				continue
			}
			return retry, fmt.Errorf("set desired image of BootcNode %s: %w", bn.Name, err)
		}
		edits.setRecord(row, b)
	}
	return retry, nil
}

// retarget writes target as bn's desired image, locked on bn's
// resourceVersion, and returns the record written. It never writes
// spec.bootOrder: the node reconciler is its one writer. A record the pool
// directs outside a slot (Directable) holds no order that stands: the node
// reconciler withdraws one not carried out before the node leaves its
// slot phase (finish), and the new desired image voids the rest.
func (r *Reconciler) retarget(ctx context.Context, bn *v1alpha1.BootcNode, target string) (*v1alpha1.BootcNode, error) {
	b := bn.DeepCopy()
	b.Spec.DesiredImage = target
	if err := r.client.Patch(ctx, b, patch.Spec(bn, true)); err != nil {
		return nil, err
	}
	return b, nil
}

func (r *Reconciler) event(obj client.Object, typ, reason, f string, args ...any) {
	if r.recorder != nil {
		r.recorder.Eventf(obj, typ, reason, f, args...)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
