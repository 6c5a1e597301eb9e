package fakekarpenter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// DisruptionKey is the disruption loop's only key.
var DisruptionKey = request("disruption")

// The disruption methods, in the order a pass tries them.
const (
	MethodRepair       = "repair"
	MethodEmptiness    = "emptiness"
	MethodStaticDrift  = "static-drift"
	MethodDrift        = "drift"
	MethodMultiNode    = "multi-node-consolidation"
	MethodSingleNode   = "single-node-consolidation"
	requeueImmediately = time.Millisecond
)

var methodNames = []string{MethodRepair, MethodEmptiness, MethodStaticDrift, MethodDrift, MethodMultiNode, MethodSingleNode}

// class is how a method treats blocking pods and do-not-disrupt.
type class int

const (
	// graceful methods are blocked by do-not-disrupt (node and pods) and
	// by PDBs.
	graceful class = iota
	// eventual methods (drift) are blocked by node do-not-disrupt, and by
	// blocking pods only when the NodeClaim has no terminationGracePeriod.
	eventual
	// repair ignores node do-not-disrupt and needs a
	// terminationGracePeriod to pass blocking pods.
	repairClass
)

// method is one disruption method.
type method struct {
	name, reason string
	class        class
	// validate methods wait ValidationDelay and check their command again
	// before executing it.
	validate bool
	// should is the method's own filter of candidates (ShouldDisrupt).
	should func(s *snapshot, sn *stateNode) bool
	// compute picks a command from the sorted candidates, or nil.
	compute func(s *snapshot, cands []*stateNode, budgets map[string]int) *command
}

// command is a disruption decision.
type command struct {
	method       *method
	candidates   []*stateNode
	replacements []*plannedClaim
	validateAt   time.Time
}

func (c *command) names() []string {
	out := make([]string, len(c.candidates))
	for i, sn := range c.candidates {
		out[i] = sn.name
	}
	return out
}

// Disruption is Karpenter's singleton disruption loop. Each pass removes
// stale karpenter.sh/disrupted taints, then tries the methods in order
// ([repair (v1.15)], emptiness, static drift, drift, multi-node and
// single-node consolidation) and lets the first that finds a command act.
// Emptiness and consolidation commands are validated again ValidationDelay
// later and executed only if still valid; after a failed validation the
// pass goes on with the next method. A pass that acts is followed at once
// by another; one that does nothing, PollingPeriod later.
type Disruption struct {
	k       *Karpenter
	pending *command
}

// Map enqueues nothing: the loop polls.
func (d *Disruption) Map(apiserver.Event) []reconcile.Request { return nil }

// Reconcile runs one pass, or the validation of the pass's command.
func (d *Disruption) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	k := d.k
	now := k.now()
	methods := k.methods()
	start := 0
	var s *snapshot
	var err error
	if cmd := d.pending; cmd != nil {
		if now.Before(cmd.validateAt) {
			return reconcile.Result{RequeueAfter: cmd.validateAt.Sub(now)}, nil
		}
		d.pending = nil
		if s, err = k.snapshot(ctx); err != nil {
			return reconcile.Result{}, err
		}
		valid, why := k.validate(s, cmd)
		if valid != nil {
			if err := k.execute(ctx, valid); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{RequeueAfter: requeueImmediately}, nil
		}
		k.trace("karpenter/validation-failed", "node/"+strings.Join(cmd.names(), ","), map[string]any{
			"method": cmd.method.name, "reason": why,
		})
		start = slices.IndexFunc(methods, func(m *method) bool { return m.name == cmd.method.name }) + 1
	} else {
		if s, err = k.snapshot(ctx); err != nil {
			return reconcile.Result{}, err
		}
		if err := k.untaintStale(ctx, s); err != nil {
			return reconcile.Result{}, err
		}
	}
	for _, m := range methods[start:] {
		if m.compute == nil {
			continue
		}
		cands := k.candidates(s, m)
		if len(cands) == 0 {
			continue
		}
		cmd := m.compute(s, cands, k.budgets(s, m.reason))
		if cmd == nil {
			continue
		}
		if m.validate {
			cmd.validateAt = now.Add(ValidationDelay)
			d.pending = cmd
			k.trace("karpenter/disruption-considered", "node/"+strings.Join(cmd.names(), ","), map[string]any{
				"method": m.name, "reason": m.reason, "validateAt": cmd.validateAt.UTC().Format(time.RFC3339),
			})
			return reconcile.Result{RequeueAfter: ValidationDelay}, nil
		}
		if err := k.execute(ctx, cmd); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{RequeueAfter: requeueImmediately}, nil
	}
	return reconcile.Result{RequeueAfter: PollingPeriod}, nil
}

// methods returns the disruption methods of k's profile, in order; the
// methods the model does not implement (static drift, multi-node
// consolidation) have no compute and keep their place in the order.
func (k *Karpenter) methods() []*method {
	var out []*method
	if k.opts.Profile != ProfileV114 {
		out = append(out, &method{name: MethodRepair, reason: ReasonUnhealthy, class: repairClass, should: k.shouldRepair, compute: k.computeRepair})
	}
	return append(out,
		&method{name: MethodEmptiness, reason: ReasonEmpty, class: graceful, validate: true, should: shouldEmpty, compute: k.computeEmptiness},
		&method{name: MethodStaticDrift, reason: ReasonDrifted, class: eventual},
		&method{name: MethodDrift, reason: ReasonDrifted, class: eventual, should: shouldDrift, compute: k.computeDrift},
		&method{name: MethodMultiNode, reason: ReasonUnderutilized, class: graceful},
		&method{name: MethodSingleNode, reason: ReasonUnderutilized, class: graceful, validate: true, should: shouldConsolidate, compute: k.computeSingleNode},
	)
}

// candidates returns the nodes m may disrupt: managed, registered, of a
// known NodePool, not being deleted or queued, passing m's own filter and
// not blocked. Blocked ones are traced.
func (k *Karpenter) candidates(s *snapshot, m *method) []*stateNode {
	var out []*stateNode
	for _, sn := range s.nodes {
		if !sn.managed() || sn.node == nil || sn.pool == nil || sn.node.Labels[LabelNodePool] == "" || k.markedForDeletion(sn) {
			continue
		}
		if !m.should(s, sn) {
			continue
		}
		if b := k.blocker(s, sn, m.class); b != "" {
			k.traceBlocked(m.name, sn.name, b)
			continue
		}
		out = append(out, sn)
	}
	return out
}

// blocker says why sn may not be disrupted by a method of class c, or "".
func (k *Karpenter) blocker(s *snapshot, sn *stateNode, c class) string {
	if !sn.initialized() {
		return "node is not initialized"
	}
	if k.isNominated(s, sn) {
		return "node is nominated for a pending pod"
	}
	if c != repairClass && sn.annotations()[AnnotationDoNotDisrupt] == "true" {
		return "disruption is blocked through the " + AnnotationDoNotDisrupt + " annotation"
	}
	if pb := s.podBlocker(sn); pb != "" {
		tgp := sn.claim.spec.TerminationGracePeriod != ""
		switch {
		case c == graceful, c == eventual && !tgp:
			return pb
		case c == repairClass && !tgp:
			return "repair requires a termination grace period to bypass blocking pods (" + pb + ")"
		}
	}
	return ""
}

func shouldEmpty(_ *snapshot, sn *stateNode) bool {
	return sn.pool.consolidateAfter != nil && sn.claim.isTrue(ConditionConsolidatable) && len(sn.reschedulable()) == 0
}

func shouldDrift(_ *snapshot, sn *stateNode) bool {
	return sn.claim.isTrue(ConditionDrifted) && len(sn.reschedulable()) > 0
}

func shouldConsolidate(_ *snapshot, sn *stateNode) bool {
	return sn.pool.policy == WhenEmptyOrUnderutilized && sn.pool.consolidateAfter != nil && sn.claim.isTrue(ConditionConsolidatable)
}

func (k *Karpenter) shouldRepair(_ *snapshot, sn *stateNode) bool {
	if !k.opts.NodeRepair || sn.annotations()[AnnotationDoNotRepair] == "true" {
		return false
	}
	since, bad := unhealthySince(sn.node)
	return bad && !k.now().Before(since.Add(k.opts.RepairToleration))
}

// budgetBlocker is the trace of a candidate its NodePool's budget holds.
func budgetBlocker(reason, pool string) string {
	return fmt.Sprintf("disruption budget for reason %s is exhausted in NodePool %q", reason, pool)
}

// computeEmptiness deletes every empty candidate the Empty budgets allow.
func (k *Karpenter) computeEmptiness(_ *snapshot, cands []*stateNode, budgets map[string]int) *command {
	var picked []*stateNode
	for _, c := range cands {
		if budgets[c.pool.name] == 0 {
			k.traceBlocked(MethodEmptiness, c.name, budgetBlocker(ReasonEmpty, c.pool.name))
			continue
		}
		budgets[c.pool.name]--
		picked = append(picked, c)
	}
	if len(picked) == 0 {
		return nil
	}
	return &command{method: k.method(MethodEmptiness), candidates: picked}
}

// computeDrift replaces the candidate that drifted first and whose Drifted
// budget allows it: replacements for the pods that fit nowhere else are
// launched first.
func (k *Karpenter) computeDrift(s *snapshot, cands []*stateNode, budgets map[string]int) *command {
	slices.SortStableFunc(cands, func(a, b *stateNode) int {
		return cmp.Or(a.claim.cond(ConditionDrifted).LastTransitionTime.Compare(b.claim.cond(ConditionDrifted).LastTransitionTime.Time),
			strings.Compare(a.name, b.name))
	})
	return k.firstReplaceable(s, MethodDrift, ReasonDrifted, cands, budgets)
}

// computeRepair replaces the node unhealthy longest whose NodePool has
// Unhealthy budget and is not over the unhealthy threshold.
func (k *Karpenter) computeRepair(s *snapshot, cands []*stateNode, budgets map[string]int) *command {
	slices.SortStableFunc(cands, func(a, b *stateNode) int {
		sa, _ := unhealthySince(a.node)
		sb, _ := unhealthySince(b.node)
		return cmp.Or(sa.Compare(sb), strings.Compare(a.name, b.name))
	})
	var keep []*stateNode
	for _, c := range cands {
		if s.repairTripped(c.pool.name) {
			k.traceBlocked(MethodRepair, c.name, fmt.Sprintf("more than %d%% of nodes in nodepool %q are unhealthy", RepairUnhealthyPercent, c.pool.name))
			continue
		}
		keep = append(keep, c)
	}
	return k.firstReplaceable(s, MethodRepair, ReasonUnhealthy, keep, budgets)
}

// firstReplaceable returns a one-node command for the first candidate
// within budget whose pods can be rescheduled, onto other nodes or
// replacements.
func (k *Karpenter) firstReplaceable(s *snapshot, name, reason string, cands []*stateNode, budgets map[string]int) *command {
	for _, c := range cands {
		if budgets[c.pool.name] == 0 {
			k.traceBlocked(name, c.name, budgetBlocker(reason, c.pool.name))
			continue
		}
		plans, ok := k.simulate(s, c)
		if !ok {
			k.traceBlocked(name, c.name, "its pods cannot be rescheduled")
			continue
		}
		return &command{method: k.method(name), candidates: []*stateNode{c}, replacements: plans}
	}
	return nil
}

// computeSingleNode deletes the first candidate (fewest pods first) within
// the Underutilized budget whose pods all fit on the other nodes.
func (k *Karpenter) computeSingleNode(s *snapshot, cands []*stateNode, budgets map[string]int) *command {
	slices.SortStableFunc(cands, func(a, b *stateNode) int {
		return cmp.Or(cmp.Compare(len(a.reschedulable()), len(b.reschedulable())), strings.Compare(a.name, b.name))
	})
	for _, c := range cands {
		if budgets[c.pool.name] == 0 {
			k.traceBlocked(MethodSingleNode, c.name, budgetBlocker(ReasonUnderutilized, c.pool.name))
			continue
		}
		if k.deletable(s, c) {
			return &command{method: k.method(MethodSingleNode), candidates: []*stateNode{c}}
		}
	}
	return nil
}

// deletable reports whether c's pods fit on the other nodes without a
// replacement (simulate finds no claim to plan). The answer depends only on
// the snapshot's objects and on the queue (markedForDeletion), so it is
// kept until either changes: single-node consolidation asks it of every
// candidate on every poll, and in a quiet cluster nothing changes between
// polls (one pass is O(nodes) a candidate, O(nodes²) in all).
func (k *Karpenter) deletable(s *snapshot, c *stateNode) bool {
	m := &k.deletableMemo
	if s.gen == 0 {
		plans, ok := k.simulate(s, c)
		return ok && len(plans) == 0
	}
	queue := k.queueKey()
	if m.gen != s.gen || m.queue != queue {
		m.gen, m.queue = s.gen, queue
		clear(m.fits)
	}
	if fit, ok := m.fits[c.name]; ok {
		return fit
	}
	plans, ok := k.simulate(s, c)
	fit := ok && len(plans) == 0
	if m.fits == nil {
		m.fits = map[string]bool{}
	}
	m.fits[c.name] = fit
	return fit
}

// deletableMemo keeps deletable's answers for one snapshot generation
// and queue.
type deletableMemo struct {
	gen   uint64
	queue string
	fits  map[string]bool
}

// queueKey names the nodes the queued commands hold (markedForDeletion).
func (k *Karpenter) queueKey() string {
	var b strings.Builder
	for _, q := range k.queue {
		for _, c := range q.candidates {
			b.WriteString(c)
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return b.String()
}

// method returns the method named name.
func (k *Karpenter) method(name string) *method {
	for _, m := range k.methods() {
		if m.name == name {
			return m
		}
	}
	panic("fakekarpenter: no method " + name)
}

// repairTripped reports whether more than RepairUnhealthyPercent (rounded
// up) of pool's nodes are unhealthy.
func (s *snapshot) repairTripped(pool string) bool {
	total, unhealthy := 0, 0
	for _, sn := range s.nodes {
		if sn.node == nil || sn.node.Labels[LabelNodePool] != pool {
			continue
		}
		total++
		if _, bad := unhealthySince(sn.node); bad {
			unhealthy++
		}
	}
	return unhealthy > (RepairUnhealthyPercent*total+99)/100
}

// validate checks a command again on a fresh snapshot. It returns the
// command to execute (for emptiness, the candidates still empty) or nil and
// why not.
func (k *Karpenter) validate(s *snapshot, cmd *command) (*command, string) {
	m := cmd.method
	current := map[string]*stateNode{}
	for _, sn := range k.candidates(s, m) {
		current[sn.name] = sn
	}
	budgets := k.budgets(s, m.reason)
	var keep []*stateNode
	var why []string
	for _, old := range cmd.candidates {
		sn := current[old.name]
		switch {
		case sn == nil:
			why = append(why, old.name+" is no longer a candidate")
			continue
		case budgets[sn.pool.name] == 0:
			why = append(why, old.name+": "+budgetBlocker(m.reason, sn.pool.name))
			continue
		}
		if m.name == MethodSingleNode {
			if plans, ok := k.simulate(s, sn); !ok || len(plans) > 0 {
				why = append(why, old.name+": its pods no longer fit on other nodes")
				continue
			}
		}
		budgets[sn.pool.name]--
		keep = append(keep, sn)
	}
	if len(keep) == 0 || (m.name != MethodEmptiness && len(why) > 0) {
		return nil, strings.Join(why, "; ")
	}
	return &command{method: m, candidates: keep, replacements: cmd.replacements}, ""
}

// untaintStale removes the karpenter.sh/disrupted taint from nodes that are
// neither being deleted nor queued (left by a command that was abandoned).
func (k *Karpenter) untaintStale(ctx context.Context, s *snapshot) error {
	for _, sn := range s.nodes {
		if sn.node == nil || !sn.managed() || k.markedForDeletion(sn) || !hasTaint(sn.node.Spec.Taints, disruptedTaint) {
			continue
		}
		if err := k.setDisruptedTaint(ctx, sn.node.Name, false); err != nil {
			return err
		}
	}
	return nil
}

// setDisruptedTaint adds or removes the karpenter.sh/disrupted:NoSchedule
// taint of a node.
func (k *Karpenter) setDisruptedTaint(ctx context.Context, name string, on bool) error {
	n, err := k.getNode(ctx, name)
	if err != nil || n == nil {
		return err
	}
	has := hasTaint(n.Spec.Taints, disruptedTaint)
	switch {
	case on && !has:
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintDisrupted, Effect: corev1.TaintEffectNoSchedule})
	case !on && has:
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&disruptedTaint) })
	default:
		return nil
	}
	if err := k.c.Update(ctx, n); err != nil {
		return fmt.Errorf("updating the %s taint of node %s: %w", TaintDisrupted, name, err)
	}
	return nil
}

// execute carries out a command: each candidate is tainted and marked with
// the DisruptionReason condition; then either the candidates are deleted,
// or the replacements are launched and the command queued until they
// initialize.
func (k *Karpenter) execute(ctx context.Context, cmd *command) error {
	m := cmd.method
	now := k.now()
	for _, c := range cmd.candidates {
		if err := k.setDisruptedTaint(ctx, c.name, true); err != nil {
			return err
		}
		nc, err := k.getClaim(ctx, c.claim.name())
		if err != nil {
			return err
		}
		if nc != nil && nc.setCond(ConditionDisruptionReason, "True", m.reason, "", now) {
			if err := k.writeStatus(ctx, nc); err != nil {
				return err
			}
		}
		k.unblocked(c.name)
	}
	if len(cmd.replacements) == 0 {
		for _, c := range cmd.candidates {
			if err := k.deleteCandidate(ctx, c.claim.name()); err != nil {
				return err
			}
			k.stats.Deleted[m.reason]++
			k.trace("karpenter/disrupt", "node/"+c.name, map[string]any{
				"method": m.name, "reason": m.reason, "decision": "delete", "nodeclaim": c.claim.name(),
			})
		}
		return nil
	}
	q := &queuedCommand{method: m.name, reason: m.reason, deadline: now.Add(ReplacementTimeout)}
	for _, c := range cmd.candidates {
		q.candidates = append(q.candidates, c.name)
		q.claims = append(q.claims, c.claim.name())
	}
	for _, pl := range cmd.replacements {
		u, err := k.createClaim(ctx, pl, "replacement/"+m.reason)
		if err != nil {
			return err
		}
		q.replacements = append(q.replacements, u.GetName())
	}
	k.stats.Replacements[m.reason] += len(q.replacements)
	k.queue = append(k.queue, q)
	for _, c := range cmd.candidates {
		k.trace("karpenter/disrupt", "node/"+c.name, map[string]any{
			"method": m.name, "reason": m.reason, "decision": "replace", "nodeclaim": c.claim.name(),
			"replacements": strings.Join(q.replacements, ","),
		})
	}
	return nil
}

// deleteCandidate deletes a disrupted NodeClaim.
func (k *Karpenter) deleteCandidate(ctx context.Context, name string) error {
	u := newClaimObject()
	u.SetName(name)
	if err := k.c.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NodeClaim %s: %w", name, err)
	}
	return nil
}

// queuedCommand is a replace command waiting for its replacements.
type queuedCommand struct {
	method, reason string
	candidates     []string // node names
	claims         []string // their NodeClaims
	replacements   []string // replacement NodeClaims
	deadline       time.Time
}

// OrchestrationKey is the orchestration queue's only key.
var OrchestrationKey = request("orchestration")

// Orchestration is the disruption orchestration queue: a replace command
// deletes its candidates once all its replacements are initialized, and is
// abandoned (taint and DisruptionReason removed) when a replacement is
// deleted or they do not initialize within ReplacementTimeout.
type Orchestration struct{ k *Karpenter }

// Map enqueues OrchestrationKey for NodeClaim events while commands wait.
func (o *Orchestration) Map(ev apiserver.Event) []reconcile.Request {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GroupVersionKind() == NodeClaimGVK && len(o.k.queue) > 0 {
		return []reconcile.Request{OrchestrationKey}
	}
	return nil
}

// Reconcile moves the queued commands on.
func (o *Orchestration) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	k := o.k
	now := k.now()
	var keep []*queuedCommand
	var wait requeue
	for i, q := range k.queue {
		failed, ready := "", true
		for _, name := range q.replacements {
			nc, err := k.getClaim(ctx, name)
			if err != nil {
				k.queue = append(keep, k.queue[i:]...)
				return reconcile.Result{}, err
			}
			switch {
			case nc == nil || nc.deleting():
				failed = "replacement " + name + " was deleted"
			case !nc.isTrue(ConditionInitialized):
				ready = false
			}
		}
		if failed == "" && !ready && !now.Before(q.deadline) {
			failed = "replacements did not initialize within " + ReplacementTimeout.String()
		}
		switch {
		case failed != "":
			if err := k.abandon(ctx, q, failed); err != nil {
				k.queue = append(keep, k.queue[i:]...)
				return reconcile.Result{}, err
			}
		case ready:
			for j, name := range q.claims {
				if err := k.deleteCandidate(ctx, name); err != nil {
					k.queue = append(keep, k.queue[i:]...)
					return reconcile.Result{}, err
				}
				k.stats.Replaced[q.reason]++
				k.trace("karpenter/replaced", "node/"+q.candidates[j], map[string]any{
					"method": q.method, "reason": q.reason, "nodeclaim": name, "replacements": strings.Join(q.replacements, ","),
				})
			}
		default:
			keep = append(keep, q)
			wait.at(q.deadline.Sub(now))
		}
	}
	k.queue = keep
	return reconcile.Result{RequeueAfter: wait.d}, nil
}

// abandon rolls a queued command back.
func (k *Karpenter) abandon(ctx context.Context, q *queuedCommand, why string) error {
	for j, node := range q.candidates {
		if err := k.setDisruptedTaint(ctx, node, false); err != nil {
			return err
		}
		nc, err := k.getClaim(ctx, q.claims[j])
		if err != nil {
			return err
		}
		if nc != nil && !nc.deleting() && nc.clearCond(ConditionDisruptionReason) {
			if err := k.writeStatus(ctx, nc); err != nil {
				return err
			}
		}
		k.trace("karpenter/command-abandoned", "node/"+node, map[string]any{"method": q.method, "reason": why})
	}
	return nil
}
