package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/internal/imageref"
)

// PoolReconciler owns a pool's membership (one BootcNode per member Node),
// its target digest, which nodes may stage, the reboot slot table and the
// pool status.
type PoolReconciler struct {
	client   client.Client
	clock    clock.PassiveClock
	resolver resolve.Resolver
	recorder Recorder
	metrics  *Metrics
	reader   client.Reader
	opts     Options
	feed     *PoolFeed

	// mu guards last, the time and generation of each pool's last pass,
	// and views. last only paces passes (see passInterval); nothing is
	// decided from it, and a restarted controller starts with a full pass.
	mu    sync.Mutex
	last  map[string]pass
	views map[string]*poolView
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
	rows   []poolRow
	// pass is the pass's copy of rows, its array reused from pass to
	// pass (a pool's passes never overlap).
	pass []poolRow
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
// (PoolStatusDebounce) up to 999 nodes, then 1 s per 500 nodes (2 s at
// 1,000, 4 s at 2,000), at most 10 s. A spec change always gets a pass at
// once. Node-level work (cordon, drain, verify) is not paced: it runs in the
// node reconciler; only the grant of a freed slot can wait up to one
// interval.
func passInterval(nodes int32) time.Duration {
	d := time.Duration(nodes/500) * time.Second
	return min(max(d, PoolStatusDebounce), 10*time.Second)
}

// NewPoolReconciler builds the pool reconciler from its edges.
func NewPoolReconciler(c client.Client, opts Options) *PoolReconciler {
	reader := opts.APIReader
	if reader == nil {
		reader = c
	}
	return &PoolReconciler{client: c, clock: opts.Clock, resolver: opts.Resolver, recorder: opts.Recorder, metrics: opts.Metrics, reader: reader, opts: opts, feed: opts.Feed}
}

// Reconcile brings one pool one step closer to its spec.
func (r *PoolReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx).WithValues("pool", req.Name)
	now := r.clock.Now()
	// The pools are read once, as the cache holds them (not copied): the
	// pacing is decided on them (most requests of a busy pool only learn
	// when the next pass is due), the pass works on a copy of its own pool
	// and compares it with the original, and the others give the conflicts.
	pools, err := sharedPools(ctx, r.client)
	if err != nil {
		return reconcile.Result{}, err
	}
	orig := findPool(pools, req.Name)
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
	resolveErr := r.resolveTarget(ctx, &pool, now)
	if !imageref.IsDigest(string(pool.Spec.Image)) {
		wake(ResolveInterval)
	}
	// Interned like the rows' facts, so that comparing is a pointer check.
	target := r.feed.intern(st.TargetImage)
	targetDigest := r.feed.intern(imageref.Digest(target))

	// 2. Membership: one row per node name, sorted, joining the pool's
	// records with the Nodes it selects, from the feed (see rowsFor). The
	// pass works on its own copy of the row table; the objects in it are
	// shared with the cache: never change them in place; every write below
	// works on a DeepCopy.
	rows, members, conflicts := r.rowsFor(&pool, pools, now, log)
	for i := range rows {
		row := &rows[i]
		if row.bn != nil || row.node == nil || row.conflict != "" {
			continue
		}
		bn, err := r.createBootcNode(ctx, &pool, row.node)
		if err != nil {
			return reconcile.Result{}, err
		}
		row.setBN(bn, r.feed.intern)
	}
	for i := range rows {
		row := &rows[i]
		bn := row.bn
		if bn == nil || (row.node != nil && row.conflict == "") {
			continue
		}
		// No longer a member: the node reconciler restores a cordon
		// first; the record goes once nothing of bootroll is left on the Node.
		if bn.Status.Rollout.Cordoned || holdsSlot(row.phase) {
			continue
		}
		if slotGranted(st.Slots, bn, now) {
			// A grant this cache does not show yet (the record's slot
			// phase is the pool's own write): the node reconciler may act
			// on it, so the record and its slot stay until it has left.
			continue
		}
		if row.conflict != "" && row.node != nil {
			continue // left alone while in conflict
		}
		if member, err := r.stillMember(ctx, &pool, row); err != nil || member {
			if err != nil {
				return reconcile.Result{}, err
			}
			continue
		}
		if err := r.client.Delete(ctx, bn.DeepCopy()); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete BootcNode %s that left pool %s: %w", row.name, pool.Name, err)
		}
		row.setBN(nil, r.feed.intern)
	}

	// 3. Halt. The failures of the target are recorded on the pool (the
	// node reconciler writes each one there first); the live records add
	// any not recorded yet. A node rolling back from the target counts as
	// failed while it rolls back. The halt is durable: once set it lasts
	// until the target changes, whatever happens to the failed nodes.
	var live []v1alpha1.NodeFailure
	for i := range rows {
		row := &rows[i]
		if row.bn == nil || target == "" || row.failed != target {
			continue
		}
		if row.phase == v1alpha1.PhaseFailed || row.phase == v1alpha1.PhaseRolledBack || holdsSlot(row.phase) {
			ro := &row.bn.Status.Rollout
			at := now
			if ro.PhaseSince != nil {
				at = ro.PhaseSince.Time
			}
			live = append(live, failureAt(row.name, target, ro.Reason, ro.Message, at))
		}
	}
	maxFailures := maxFailuresOf(&pool)
	halted := settleHalt(st, target, live, maxFailures)
	failed := failureLines(st.Failures)
	if r.opts.TestOnly.HaltFromLiveRecords {
		// The old behaviour: the halt lasts only as long as the failed
		// records do.
		st.Failures, st.Halt = nil, nil
		failed = failureLines(live)
		halted = target != "" && len(live) >= maxFailures
	}
	if stuck, wait := stalled(rows, target, targetDigest, durationOr(pool.Spec.HealthTimeout, DefaultHealthTimeout), now); !halted && target != "" && !pool.Spec.Paused && stuck {
		// Fewer than maxFailures nodes failed, but every node not on the
		// target did: nothing is left to roll, and the pool says so with
		// a halt (durable as any other) instead of rolling out for ever.
		st.Halt = &v1alpha1.HaltRecord{Image: target, Since: metav1.NewTime(now), Failures: failuresOf(st.Failures, target)}
		halted = true
	} else {
		wake(wait)
	}
	open, untilOpen := InWindow(pool.Spec.Windows, now)
	if !open {
		wake(untilOpen)
	}
	active := target != "" && !pool.Spec.Paused && !halted

	// 4. Staging directives, bounded by maxStaging.
	if active {
		retry, err := r.direct(ctx, &pool, target, rows)
		if err != nil {
			return reconcile.Result{}, err
		}
		if retry {
			wake(time.Second)
		}
	}

	// 5. Slots. Drop entries whose node left; grant free slots. A halt
	// withdraws the slots granted for the halted image that no node has
	// started on (the node reconciler also checks before it cordons and
	// before it asks for the reboot).
	if r.opts.TestOnly.ForgetSlotsOnRestart && !seen {
		st.Slots = nil
	}
	var held []v1alpha1.Slot
	for _, s := range st.Slots {
		row := findRow(rows, s.Node)
		if row == nil {
			continue
		}
		down := releasedDown(row, s)
		if !down && (row.bn == nil || !slotInUse(row.bn, s)) {
			continue
		}
		if !down && halted && s.Image == target && !row.bn.Status.Rollout.Cordoned && !holdsSlot(row.phase) {
			continue
		}
		if r.opts.TestOnly.FreeSlotBeforeVerify && (row.phase == v1alpha1.PhaseRebooting || row.phase == v1alpha1.PhaseVerifying) {
			continue
		}
		held = append(held, s)
	}
	maxU, err := MaxUnavailable(pool.Spec.Rollout.MaxUnavailable, members)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	var granted []string
	maxFree := maxU - len(held)
	if r.opts.TestOnly.IgnoreSlotLimit {
		maxFree = len(rows)
	}
	// With no free slot there is nothing to choose: a slot that frees
	// up is a BootcNode change, which brings the pool back.
	if active && open && maxFree > 0 {
		inSlot := map[string]bool{}
		for _, s := range held {
			inSlot[s.Node] = true
		}
		// A member that runs the target but is not Ready, outside any slot,
		// is down on the image this pool rolls out (released mid-boot when
		// an earlier pool or record went, say, and its failure lost with
		// the record): it counts against maxUnavailable as a slot would.
		for i := range rows {
			row := &rows[i]
			if row.node == nil || inSlot[row.name] || row.booted != targetDigest || row.osNotReady ||
				row.phase == v1alpha1.PhaseFailed || row.phase == v1alpha1.PhaseRolledBack || nodeReady(row.node) {
				continue
			}
			maxFree--
		}
		var cands []Candidate
		for i := range rows {
			row := &rows[i]
			bn, name := row.bn, row.name
			if bn == nil || row.conflict != "" || row.node == nil {
				continue
			}
			if row.phase != v1alpha1.PhaseStaged || row.desired != target || row.staged != targetDigest || row.target != target || inSlot[name] {
				continue
			}
			if ra := bn.Status.Rollout.RetryAfter; ra != nil && now.Before(ra.Time) {
				wake(ra.Sub(now))
				continue
			}
			if row.osNotReady {
				continue // updated without a slot by the node reconciler
			}
			since := now
			if bn.Status.Rollout.PhaseSince != nil {
				since = bn.Status.Rollout.PhaseSince.Time
			}
			cands = append(cands, Candidate{Name: name, StagedSince: since})
		}
		// Candidates in order; each is checked for safety (Ready, not being
		// disrupted by Karpenter) only when it is about to get a slot, so
		// the NodeClaim reads are bounded by the free slots.
		next := SlotOrder(cands)
		for len(granted) < maxFree {
			name, ok := next()
			if !ok {
				break
			}
			row := findRow(rows, name)
			// Down on the image it failed (not one it merely runs).
			downOnFailed := row.failed != "" && row.booted == imageref.Digest(row.failed)
			why, err := SlotBlocker(ctx, r.reader, r.client.RESTMapper(), row.node, downOnFailed)
			if err != nil {
				return reconcile.Result{}, err
			}
			if why != "" {
				log.V(1).Info("slot deferred", "node", name, "why", why)
				wake(DrainPoll)
				continue
			}
			granted = append(granted, name)
			held = append(held, v1alpha1.Slot{Node: name, Image: target, Since: metav1.NewTime(now)})
		}
	}
	st.Slots = held

	// 6. Aggregate.
	r.aggregate(&pool, rows, members, target)
	r.conditions(&pool, resolveErr, conflicts, failed, drainsBlocked(rows), halted, open, now)
	st.ObservedGeneration = pool.Generation
	if r.metrics != nil {
		r.metrics.SlotsInUse.WithLabelValues(pool.Name).Set(float64(len(held)))
		r.metrics.SlotsMax.WithLabelValues(pool.Name).Set(float64(maxU))
		for _, pc := range st.Phases {
			r.metrics.Nodes.WithLabelValues(pool.Name, string(pc.Phase)).Set(float64(pc.Nodes))
		}
	}
	if !equalStatus(&orig.Status, st) {
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
	}

	r.mu.Lock()
	if r.last == nil {
		r.last = map[string]pass{}
	}
	r.last[pool.Name] = pass{at: now, gen: pool.Generation}
	r.mu.Unlock()

	// 7. Tell the granted nodes (and any whose grant was not yet seen).
	for _, s := range held {
		row := findRow(rows, s.Node)
		if row == nil || row.bn == nil || !grantPending(row.bn, s) {
			continue
		}
		bn := row.bn
		b := bn.DeepCopy()
		// A node is cordoned and protected from the grant on, not from the
		// node reconciler's first pass some time later (DESIGN §3/§5).
		// The state to give back is read from the API server and recorded
		// before the Node is written, so a crash cannot forget it.
		//   - A Karpenter-managed node: what bootroll adds is recorded
		//     first, still waiting (Pending, staged); then the cordon, slot
		//     marker and Karpenter annotations go on the Node in one patch,
		//     and the annotations on its NodeClaim; only then does the
		//     record enter the slot (Draining). Karpenter never finds a
		//     record in its slot on an unprotected Node, whatever write
		//     fails or crashes part way (a grant left waiting and cordoned
		//     is taken up again by the next pass, which puts back what the
		//     Node misses).
		//   - Any other node: nothing reaps it, so the record enters the
		//     slot in the same write that records the cordon, and the Node
		//     is cordoned after it: two writes where there were three. A
		//     Node patch that fails is redone by the node reconciler's
		//     drain, which cordons before it evicts.
		var grant grantCordon
		karpenter := row.node != nil && nodeClaimName(row.node) != ""
		if karpenter {
			// The Node is written on this grant before the record: only
			// for the record as the API server has it. A cache that lags
			// may still show a grant the node has long finished, and
			// cordoning it again would leave the cordon and protection
			// behind. (Elsewhere the record write, locked on the cached
			// version, comes first and fails on a stale cache.)
			if err := recordCurrent(ctx, r.reader, bn); err != nil {
				if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
					return reconcile.Result{}, fmt.Errorf("before the slot grant: %w", err)
				}
				wake(time.Second)
				continue
			}
		}
		if row.node != nil {
			var err error
			if grant, err = r.planGrantCordon(ctx, &pool, row.node, b, now); err != nil {
				if apierrors.IsConflict(err) {
					wake(time.Second)
					continue
				}
				return reconcile.Result{}, err
			}
			// The slot was chosen on the cached Node; the Node the grant
			// writes is read afresh, and must still be one a slot may go
			// to: a cache that lags does not show that Karpenter has
			// started to delete or disrupt it (karpenter-defaults seed30:
			// the grant cordoned a node Karpenter was draining, and its
			// evictions counted as a reap of a node in its slot).
			downOnFailed := row.failed != "" && row.booted == imageref.Digest(row.failed)
			why, err := SlotBlocker(ctx, r.reader, r.client.RESTMapper(), grant.node, downOnFailed)
			if err != nil {
				return reconcile.Result{}, err
			}
			if why != "" {
				log.V(1).Info("slot not granted after all", "node", s.Node, "reason", why)
				wake(time.Second)
				continue
			}
		}
		if grant.node != nil && karpenter {
			if !apiequality.Semantic.DeepEqual(bn.Status.Rollout, b.Status.Rollout) {
				if err := r.client.Status().Patch(ctx, b, recordPatch(bn)); err != nil {
					if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
						wake(time.Second)
						continue
					}
					return reconcile.Result{}, fmt.Errorf("record the cordon of %s on its slot grant: %w", s.Node, err)
				}
			}
			if err := grant.apply(ctx, r.client); err != nil {
				return reconcile.Result{}, fmt.Errorf("cordon node %s on its slot grant: %w", s.Node, err)
			}
			bn, b = b, b.DeepCopy()
		} else if grant.node == nil {
			b.Status.Rollout.DrainStartedAt = nil
		}
		b.Status.Phase = v1alpha1.PhaseDraining
		b.Status.Rollout.PhaseSince = &metav1.Time{Time: now}
		b.Status.Rollout.Reason, b.Status.Rollout.Message = "SlotGranted", fmt.Sprintf("reboot slot %d/%d", len(held), maxU)
		if err := r.client.Status().Patch(ctx, b, recordPatch(bn)); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				wake(time.Second)
				continue
			}
			return reconcile.Result{}, fmt.Errorf("grant slot to %s: %w", s.Node, err)
		}
		if grant.node != nil && !karpenter {
			if err := grant.apply(ctx, r.client); err != nil {
				// The record is in its slot and says cordoned: the node
				// reconciler's drain cordons before it evicts.
				log.Info("cordon on the slot grant failed; the drain cordons", "node", s.Node, "error", err.Error())
			}
		}
		if grant.node != nil {
			r.event(b, corev1.EventTypeNormal, "Cordoned", "cordoned for the update to %s", s.Image)
		}
		r.event(b, corev1.EventTypeNormal, "SlotGranted", "reboot slot granted for %s", s.Image)
		log.V(1).Info("slot granted", "node", s.Node, "image", s.Image)
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// resolveTarget sets status.targetImage from spec.image. A digest is used
// as is; a tag is resolved when the spec changed or ResolveInterval passed.
// A failure keeps the previous target and is reported as a condition.
func (r *PoolReconciler) resolveTarget(ctx context.Context, pool *v1alpha1.BootcNodePool, now time.Time) error {
	st := &pool.Status
	img := string(pool.Spec.Image)
	if imageref.IsDigest(img) {
		st.TargetImage, st.TargetDigest, st.ResolvedAt = img, imageref.Digest(img), nil
		return nil
	}
	fresh := st.ObservedGeneration == pool.Generation && st.ResolvedAt != nil && now.Sub(st.ResolvedAt.Time) < ResolveInterval
	if fresh && st.TargetImage != "" {
		return nil
	}
	if r.resolver == nil {
		return fmt.Errorf("spec.image %q is a tag and no resolver is configured", img)
	}
	var secret []byte
	if pool.Spec.ImagePullSecret != "" {
		var s corev1.Secret
		key := types.NamespacedName{Namespace: r.opts.SecretNamespace, Name: pool.Spec.ImagePullSecret}
		if err := r.reader.Get(ctx, key, &s); err != nil {
			return fmt.Errorf("read spec.imagePullSecret %s: %w", key, err)
		}
		secret = s.Data[corev1.DockerConfigJsonKey]
	}
	ref, err := r.resolver.Resolve(ctx, img, secret)
	if err != nil {
		return err
	}
	if ref != st.TargetImage {
		r.event(pool, corev1.EventTypeNormal, "Resolved", "%s resolved to %s", img, ref)
	}
	st.TargetImage, st.TargetDigest, st.ResolvedAt = ref, imageref.Digest(ref), &metav1.Time{Time: now}
	return nil
}

// rowsFor returns the pass's copy of the pool's rows, the number of member
// Nodes and the conflicts (one "node (also selected by pool p)" per node
// another pool selects too). The rows come from the pool's view, updated
// with the feed's changes since the last pass, or rebuilt (see poolView).
func (r *PoolReconciler) rowsFor(pool *v1alpha1.BootcNodePool, pools []v1alpha1.BootcNodePool, now time.Time, log logr.Logger) ([]poolRow, int, []string) {
	sc := &poolScope{pool: pool.Name, sel: labels.SelectorFromSet(pool.Spec.NodeSelector)}
	var key strings.Builder
	for j := range pools {
		o := &pools[j]
		if osel := poolSelector(o); o.Name != pool.Name && osel != nil {
			sc.others = append(sc.others, otherPool{o.Name, osel})
		}
	}
	sort.Slice(sc.others, func(i, j int) bool { return sc.others[i].name < sc.others[j].name })
	for _, o := range sc.others {
		fmt.Fprintf(&key, "%s=%s;", o.name, o.sel)
	}
	r.mu.Lock()
	v := r.views[pool.Name]
	r.mu.Unlock()
	switch {
	case v == nil || v.gen != pool.Generation || v.others != key.String():
		var pass []poolRow
		if v != nil {
			pass = v.pass
		}
		v = &poolView{gen: pool.Generation, others: key.String(), built: now, rows: r.feed.rows(sc), pass: pass}
	case now.Sub(v.built) >= FullPassInterval:
		fresh, diff := r.feed.rebuild(sc, v.rows)
		if len(diff) > 0 {
			log.Error(nil, "the pool's kept node table differed from a full rebuild; using the rebuild (a bootroll bug in change tracking: please report it)", "rows", len(diff), "nodes", truncateList(diff))
			if r.metrics != nil {
				r.metrics.ViewMismatches.WithLabelValues(pool.Name).Add(float64(len(diff)))
			}
		}
		v.rows, v.built = fresh, now
	default:
		rows, _, ok := r.feed.update(sc, v.rows)
		if !ok { // the feed was reset
			rows, v.built = r.feed.rows(sc), now
		}
		v.rows = rows
	}
	r.mu.Lock()
	if r.views == nil {
		r.views = map[string]*poolView{}
	}
	r.views[pool.Name] = v
	r.mu.Unlock()

	v.pass = append(v.pass[:0], v.rows...)
	rows := v.pass
	members := 0
	var conflicts []string
	for _, row := range rows {
		if row.node != nil {
			members++
			if row.conflict != "" {
				conflicts = append(conflicts, fmt.Sprintf("%s (also selected by pool %s)", row.name, row.conflict))
			}
		}
	}
	return rows, members, conflicts
}

// forget drops what the reconciler keeps of a pool that is gone.
func (r *PoolReconciler) forget(pool string) {
	r.mu.Lock()
	delete(r.views, pool)
	delete(r.last, pool)
	r.mu.Unlock()
	if r.feed != nil {
		r.feed.forget(pool)
	}
}

// stillMember double-checks, with a read of the Node, a record the pool's
// rows say has no member Node before the record is deleted: deleting is
// the one step a lagging feed must not take.
func (r *PoolReconciler) stillMember(ctx context.Context, pool *v1alpha1.BootcNodePool, row *poolRow) (bool, error) {
	if row.node != nil {
		return true, nil
	}
	var n corev1.Node
	if err := r.client.Get(ctx, types.NamespacedName{Name: row.name}, &n); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return n.DeletionTimestamp == nil && selects(pool, &n), nil
}

func (r *PoolReconciler) createBootcNode(ctx context.Context, pool *v1alpha1.BootcNodePool, n *corev1.Node) (*v1alpha1.BootcNode, error) {
	bn := &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{v1alpha1.LabelPool: pool.Name}, Finalizers: []string{v1alpha1.Finalizer}},
		Spec:       v1alpha1.BootcNodeSpec{Pool: pool.Name},
	}
	if err := controllerutil.SetControllerReference(pool, bn, r.client.Scheme()); err != nil {
		return nil, fmt.Errorf("own BootcNode %s: %w", n.Name, err)
	}
	if err := r.client.Create(ctx, bn); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil // another pool's, or our cache is behind
		}
		return nil, fmt.Errorf("create BootcNode %s for pool %s: %w", n.Name, pool.Name, err)
	}
	return bn, nil
}

// direct writes spec.desiredImage for nodes that should stage the target,
// keeping at most maxStaging nodes staging at once. Nodes that already run
// the target, or that failed this very target, are not counted. A node
// asked to reboot (Rebooting, Verifying) keeps its image until it has
// finished and been verified; then it stages the new target and takes a
// fresh slot, cordon and drain for it. Each write is locked on the record
// read, so a stale row is never retargeted; retry reports such a row.
func (r *PoolReconciler) direct(ctx context.Context, pool *v1alpha1.BootcNodePool, target string, rows []poolRow) (retry bool, err error) {
	limit := -1
	if ms := pool.Spec.Rollout.MaxStaging; ms != nil && *ms > 0 {
		limit = int(*ms)
	}
	staging := 0
	targetDigest := r.feed.intern(imageref.Digest(target))
	var todo []*poolRow
	for i := range rows {
		row := &rows[i]
		if row.bn == nil || row.conflict != "" {
			continue
		}
		if row.desired == target {
			if row.booted != targetDigest && row.staged != targetDigest {
				staging++
			}
			continue
		}
		if row.failed == target && (row.phase == v1alpha1.PhaseFailed || row.phase == v1alpha1.PhaseRolledBack) {
			// It failed this target and is still down on that failure:
			// not tried again (a new spec.image retargets it). A failure
			// of the target the record keeps from an earlier rollout of
			// it, the node since updated to another image, is history
			// (the pool forgot it when its target changed): the node is
			// directed again (host-faults-mid-rollout seed54: B failed,
			// back to A, B again, and the pool skipped the node for good).
			continue
		}
		if row.phase == v1alpha1.PhaseRebooting || row.phase == v1alpha1.PhaseVerifying {
			continue
		}
		todo = append(todo, row)
	}
	for _, row := range todo {
		bn := row.bn
		// A node that joined with an old boot image (startup taint) is
		// updated at once: it is outside the staging bound.
		onIt := row.booted == targetDigest || (row.node != nil && row.osNotReady)
		if !onIt && limit >= 0 && staging >= limit {
			continue
		}
		b, err := r.retarget(ctx, bn, target)
		if apierrors.IsConflict(err) {
			// The row was stale (a daemon reporting often can keep it
			// so): decide again on the record read afresh, once.
			var fresh v1alpha1.BootcNode
			if err = r.reader.Get(ctx, types.NamespacedName{Name: bn.Name}, &fresh); err == nil {
				if p := fresh.Status.Phase; p == v1alpha1.PhaseRebooting || p == v1alpha1.PhaseVerifying ||
					fresh.Spec.DesiredImage == target || fresh.Status.Rollout.FailedImage == target {
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
		row.setBN(b, r.feed.intern)
		if !onIt {
			staging++
		}
	}
	return retry, nil
}

// retarget writes target as bn's desired image, locked on bn's
// resourceVersion, and returns the record written. The boot order, if
// any, goes with the old image (desiredState Staged) unless the node is in
// its slot.
func (r *PoolReconciler) retarget(ctx context.Context, bn *v1alpha1.BootcNode, target string) (*v1alpha1.BootcNode, error) {
	b := bn.DeepCopy()
	b.Spec.DesiredImage = target
	b.Spec.Rollback = false
	if !holdsSlot(bn.Status.Phase) && !r.opts.TestOnly.KeepBootOrder {
		b.Spec.DesiredState = v1alpha1.DesiredStaged
	}
	if err := r.client.Patch(ctx, b, specPatch(bn, true)); err != nil {
		return nil, err
	}
	return b, nil
}

func (r *PoolReconciler) aggregate(pool *v1alpha1.BootcNodePool, rows []poolRow, members int, target string) {
	st := &pool.Status
	counts := make([]int32, len(v1alpha1.AllPhases))
	// The few distinct digests, found by comparing interned strings.
	type digestCount struct {
		digest string
		n      int32
	}
	var digests []digestCount
	targetDigest := r.feed.intern(imageref.Digest(target))
	var updated int32
	for i := range rows {
		row := &rows[i]
		if row.bn == nil {
			continue // deleted above, or not created
		}
		if row.phaseIdx >= 0 {
			counts[row.phaseIdx]++
		}
		if d := row.booted; d != "" {
			j := 0
			for j < len(digests) && digests[j].digest != d {
				j++
			}
			if j == len(digests) {
				digests = append(digests, digestCount{digest: d})
			}
			digests[j].n++
			if target != "" && d == targetDigest && onTarget(row) {
				updated++
			}
		}
	}
	sort.Slice(digests, func(i, j int) bool { return digests[i].digest < digests[j].digest })
	st.Phases = nil
	for i, p := range v1alpha1.AllPhases {
		if counts[i] > 0 {
			st.Phases = append(st.Phases, v1alpha1.PhaseCount{Phase: p, Nodes: counts[i]})
		}
	}
	st.DeployedDigests = nil
	for _, d := range digests {
		st.DeployedDigests = append(st.DeployedDigests, v1alpha1.DigestCount{Digest: d.digest, Nodes: d.n})
	}
	st.Nodes = int32(members)
	st.UpdatedNodes = updated
	st.Summary = Summary(updated, st.Nodes, st.Phases)
}

// onTarget reports whether a row that booted the target counts as
// updated: it is out of its slot, and not a Failed node that is down (a
// node that failed the target and is not Ready has not been updated).
func onTarget(row *poolRow) bool {
	return !holdsSlot(row.phase) && !(row.phase == v1alpha1.PhaseFailed && (row.node == nil || !nodeReady(row.node)))
}

// stalled reports whether the rollout of target cannot go on: some
// member failed it, and every member is either updated or failed it and
// is out of its slot (Failed or RolledBack; the pool never directs such
// a node to the target again). A node that failed while still coming up
// from its reboot (its daemon has not reported since) may yet boot
// healthy: it is given healthTimeout more, and wait says when to look again.
func stalled(rows []poolRow, target, targetDigest string, healthTimeout time.Duration, now time.Time) (bool, time.Duration) {
	failed := false
	var wait time.Duration
	for i := range rows {
		row := &rows[i]
		if row.node == nil {
			continue
		}
		if row.bn == nil || row.conflict != "" {
			return false, 0
		}
		ro, d := &row.bn.Status.Rollout, &row.bn.Status.Daemon
		switch {
		case row.booted == targetDigest && onTarget(row):
		case row.failed == target && (row.phase == v1alpha1.PhaseFailed || row.phase == v1alpha1.PhaseRolledBack) && !ro.Cordoned:
			if row.phase == v1alpha1.PhaseFailed && d.LastReboot != nil && d.LastReboot.BootID == d.BootID && ro.PhaseSince != nil {
				if left := ro.PhaseSince.Add(healthTimeout).Sub(now); left > 0 {
					if wait == 0 || left < wait {
						wait = left
					}
					continue
				}
			}
			failed = true
		default:
			return false, 0
		}
	}
	if wait > 0 {
		return false, wait
	}
	return failed, 0
}

// drainsBlocked lists the members whose drain PodDisruptionBudgets hold
// up: draining with evictions refused, or back to Staged after a drain
// timeout and waiting to try again. Each entry names the node and what its
// record says.
func drainsBlocked(rows []poolRow) []string {
	var out []string
	for i := range rows {
		row := &rows[i]
		if row.bn == nil || row.node == nil {
			continue
		}
		ro := &row.bn.Status.Rollout
		switch {
		case row.phase == v1alpha1.PhaseDraining && ro.Reason == "DrainBlocked",
			row.bn.Status.Phase == v1alpha1.PhasePending && ro.Reason == "DrainTimeout":
			out = append(out, row.name+" ("+ro.Message+")")
		}
	}
	return out
}

func (r *PoolReconciler) conditions(pool *v1alpha1.BootcNodePool, resolveErr error, conflicts, failed, blocked []string, halted, open bool, now time.Time) {
	st := &pool.Status
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: pool.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	switch {
	case resolveErr != nil:
		kind := resolve.KindOf(resolveErr)
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonResolveFailed, fmt.Sprintf("%s: %v; keeping target %q", kind, resolveErr, st.TargetImage))
	case len(conflicts) > 0:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodeConflict, "nodes left alone because more than one pool selects them: "+truncateList(conflicts))
	case len(failed) > 0:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodesFailed, "failed: "+truncateList(failed))
	case len(blocked) > 0:
		set(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonDrainsBlocked,
			"PodDisruptionBudgets refuse the evictions a drain needs (check that the workloads have room on other nodes and that their budgets allow a disruption): "+truncateList(blocked))
	default:
		set(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, st.Summary)
	}
	if halted {
		if st.Halt != nil {
			failed = failureLines(st.Halt.Failures)
		}
		if max := maxFailuresOf(pool); len(failed) < max {
			set(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonRemainingFailed,
				fmt.Sprintf("every node not on %s failed it (%d node(s), maxFailures %d): nothing is left to roll; set a new spec.image to recover: %s", st.TargetImage, len(failed), max, truncateList(failed)))
		} else {
			set(v1alpha1.ConditionHalted, metav1.ConditionTrue, v1alpha1.ReasonMaxFailures,
				fmt.Sprintf("%d node(s) failed %s (maxFailures reached); set a new spec.image to recover: %s", len(failed), st.TargetImage, truncateList(failed)))
		}
	} else {
		set(v1alpha1.ConditionHalted, metav1.ConditionFalse, v1alpha1.ReasonAsExpected, "")
	}
	switch {
	case st.TargetImage == "":
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonResolveFailed, "no target digest yet")
	case st.Nodes == 0:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionTrue, v1alpha1.ReasonNoNodes, "the pool selects no nodes")
	case st.UpdatedNodes == st.Nodes:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionTrue, v1alpha1.ReasonAllUpdated, st.Summary)
	case pool.Spec.Paused:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonPaused, st.Summary)
	case !open:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonOutsideWindow, st.Summary)
	default:
		set(v1alpha1.ConditionUpToDate, metav1.ConditionFalse, v1alpha1.ReasonRollingOut, st.Summary)
	}
}

func (r *PoolReconciler) event(obj client.Object, typ, reason, f string, args ...any) {
	if r.recorder != nil {
		r.recorder.Eventf(obj, typ, reason, f, args...)
	}
}

// slotInUse reports whether a slot table entry is still needed by its node.
// This is how slots are given back: the node reconciler records that the
// node left its slot (phase and cordon), and the pool drops the entry.
// Nodes enter a slot only from Staged, and the cache never goes back in
// time, so a node seen Updated, Failed or Pending and not cordoned has left
// its slot (this also drops an entry granted from a stale read of a node
// that had just finished).
//
// A node is Staged in its slot between the grant and the pool's write of
// Draining; a Staged node whose drain timed out after the grant (retryAfter
// set later than the grant) has given its slot back.
func slotInUse(bn *v1alpha1.BootcNode, s v1alpha1.Slot) bool {
	return bn.Status.Rollout.Cordoned || holdsSlot(bn.Status.Phase) || grantPending(bn, s)
}

// releasedDown reports whether slot s stays held although no record is in
// it: the record that held it was deleted (a new one may stand in its
// place) and the member Node is not Ready. A record being deleted is
// released at the latest healthTimeout after its reboot request, while the
// node may still be down in that reboot; the node is unavailable because of
// bootroll until it is back, whatever happened to its record (DESIGN §4),
// and its new record cannot tell (its daemon is down), so the slot table
// keeps counting it until the Node is Ready again or its new record has a
// verdict (Failed, RolledBack).
func releasedDown(row *poolRow, s v1alpha1.Slot) bool {
	if row.node == nil || nodeReady(row.node) {
		return false
	}
	bn := row.bn
	if bn == nil {
		return true
	}
	if row.phase == v1alpha1.PhaseFailed || row.phase == v1alpha1.PhaseRolledBack {
		return false
	}
	return bn.DeletionTimestamp != nil || bn.CreationTimestamp.After(s.Since.Time)
}

// grantSettle bounds how long a grant that the pool's cache does not show
// on the record keeps a record of a node that left the pool: longer than a
// watch event takes, short enough that a grant whose record write never
// landed does not hold its slot for good.
const grantSettle = 2 * time.Minute

// slotGranted reports whether slots hold a grant for bn's node, made less
// than grantSettle before now, that bn has not been told of yet
// (grantPending).
func slotGranted(slots []v1alpha1.Slot, bn *v1alpha1.BootcNode, now time.Time) bool {
	for _, s := range slots {
		if s.Node == bn.Name && grantPending(bn, s) && now.Sub(s.Since.Time) < grantSettle {
			return true
		}
	}
	return false
}

// grantPending reports whether a node was given slot s and has not yet
// been told: it is still waiting, staged for the slot's image, and its
// phase has not moved since the grant (a record that entered the slot and
// left it again, its Node gone or relabelled, moved; so did one whose
// drain timed out). It reads only what the grant itself was decided on
// (the record's target, phase and the daemon's staged image), never the
// spec: the pool may have written the spec in the same pass, and its
// cache may not show that write yet. Times are kept to the second: a
// phase that moved in the second of the grant reads as not moved, which
// keeps the slot (for at most grantSettle) rather than hand it out twice.
func grantPending(bn *v1alpha1.BootcNode, s v1alpha1.Slot) bool {
	if !waiting(bn.Status.Phase) {
		return false
	}
	ro := &bn.Status.Rollout
	return ro.TargetImage == s.Image && digestOfHost(bn.Status.Staged) == imageref.Digest(s.Image) &&
		(ro.PhaseSince == nil || !ro.PhaseSince.After(s.Since.Time)) &&
		(ro.RetryAfter == nil || !ro.RetryAfter.After(s.Since.Time))
}

func truncateList(items []string) string {
	const max = 10
	if len(items) > max {
		return strings.Join(items[:max], "; ") + fmt.Sprintf("; and %d more", len(items)-max)
	}
	return strings.Join(items, "; ")
}

// poolRow is one node name of a pool pass: its record (nil when there is
// none, or it was deleted in this pass), its Node when the Node is a member
// (nil otherwise), and the other pool that also selects it.
type poolRow struct {
	name     string
	bn       *v1alpha1.BootcNode
	node     *corev1.Node
	conflict string
	rowFacts
}

// rowFacts are the fields of a row's record and Node that the pass's loops
// read, copied into the row when it is built (setBN, PoolFeed.row) so that a
// pass reads one table instead of 2,000 objects spread over the heap. The
// image strings are interned (PoolFeed.intern): equal ones share their
// bytes, so comparing them is a pointer check.
type rowFacts struct {
	phase      v1alpha1.NodePhase // status.phase, Pending when empty
	phaseIdx   int8               // its v1alpha1.PhaseIndex, -1 for none
	desired    string             // spec.desiredImage
	failed     string             // status.rollout.failedImage
	target     string             // status.rollout.targetImage
	booted     string             // status.booted.digest
	staged     string             // status.staged.digest
	osNotReady bool               // the Node has the startup taint
}

// setBN sets the row's record and the facts taken from it.
func (row *poolRow) setBN(bn *v1alpha1.BootcNode, intern func(string) string) {
	row.bn = bn
	f := &row.rowFacts
	if bn == nil {
		*f = rowFacts{phaseIdx: -1, osNotReady: f.osNotReady}
		return
	}
	f.phase = v1alpha1.NodePhase(intern(string(ObservedPhase(bn))))
	f.phaseIdx = -1
	if i, ok := v1alpha1.PhaseIndex(f.phase); ok {
		f.phaseIdx = int8(i)
	}
	f.desired = intern(bn.Spec.DesiredImage)
	f.failed = intern(bn.Status.Rollout.FailedImage)
	f.target = intern(bn.Status.Rollout.TargetImage)
	f.booted = intern(digestOfHost(bn.Status.Booted))
	f.staged = intern(digestOfHost(bn.Status.Staged))
}

// findRow returns the row of name, or nil.
func findRow(rows []poolRow, name string) *poolRow {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].name >= name })
	if i < len(rows) && rows[i].name == name {
		return &rows[i]
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// equalIgnoringTransitions compares two statuses (of a struct type S
// with a Conditions field, reached by conds) ignoring condition transition
// times, so an unchanged object is not written. It copies the structs
// shallowly: nothing is deep-copied.
func equalIgnoringTransitions[S any](a, b *S, conds func(*S) *[]metav1.Condition) bool {
	ca, cb := *conds(a), *conds(b)
	if len(ca) != len(cb) {
		return false
	}
	for i := range ca {
		x, y := ca[i], cb[i]
		x.LastTransitionTime, y.LastTransitionTime = metav1.Time{}, metav1.Time{}
		if x != y {
			return false
		}
	}
	sa, sb := *a, *b
	*conds(&sa), *conds(&sb) = nil, nil
	return apiequality.Semantic.DeepEqual(sa, sb)
}

func equalStatus(a, b *v1alpha1.BootcNodePoolStatus) bool {
	return equalIgnoringTransitions(a, b, func(s *v1alpha1.BootcNodePoolStatus) *[]metav1.Condition { return &s.Conditions })
}
