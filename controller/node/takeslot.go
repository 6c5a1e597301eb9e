package node

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/patch"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
)

// fieldManager is the option list of the controller's patches, passed as
// opts...: a variadic call allocated its one-element slice at every Node
// and NodeClaim patch. No client changes the options it is given; nor
// may a caller change this one.
var fieldManager = []client.PatchOption{client.FieldOwner(v1alpha1.FieldManager)}

// takeSlot takes up the slot the pool granted the node (rollout.GrantedSlot):
// the pool owns the slot table and only decides who gets a slot; the node
// reconciler, the one writer of the record's phase and rollout record,
// records the cordon and cordons the Node, then drains. The node is
// cordoned and protected from the grant on (DESIGN §3/§5); the state to give
// back is read from the API server and recorded before the Node is written,
// so a crash cannot forget it.
// What bootroll adds is recorded first, still waiting; then the cordon,
// slot marker and Karpenter annotations go on the Node in one patch, and
// the annotations on its NodeClaim when it has one; only then does the
// record enter the slot (Draining). Karpenter never finds a record in its
// slot on an unprotected Node, whatever write fails or crashes part way (a
// take-up left waiting and cordoned is taken up again on the next pass,
// which puts back what the Node misses). A node without a NodeClaim goes
// the same way: Karpenter may come to manage it while the controller is
// down (rollout.TakeUp).
func (r *Reconciler) takeSlot(ctx context.Context, s *nodeStep, slot v1alpha1.Slot) (reconcile.Result, error) {
	// The slot table read afresh: a halt drops the slots no node has
	// started on, and a pool that is gone or going grants nothing.
	fresh, err := r.freshPool(ctx, s)
	if err != nil {
		return reconcile.Result{}, err
	}
	if r.opts.TestOnly.CountSlotsFromCache {
		fresh = s.pool // planted: the cached table is trusted
	}
	claimed := karpenter.ClaimName(s.node) != ""
	if d := rollout.TakeUp(fresh, slot, claimed, ""); d.Skip != "" {
		if s.bn.Status.Rollout.Cordoned {
			// A take-up that stopped part way (its cordon recorded, the
			// Node cordoned and protected, the record not yet in the
			// slot) on a pool that has halted since: the pool keeps the
			// slot of a node that has started, so the node gives it
			// back, as a drain does (haltedOn; nothing when the pool has
			// not halted). Explorer seed 173151 of
			// nodeclass-drift-mid-rollout: the controller crashed after
			// the NodeClaim patch, the pool halted 10 s later, and the
			// node stayed cordoned and protected for good.
			_, err := r.haltedOn(ctx, s, fresh)
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil // the pool's next pass (or the release) follows
	}
	if err := r.dropStaleFailures(ctx, fresh); err != nil {
		return reconcile.Result{}, err
	}
	// The Node is written before the record: only for the record as the
	// API server has it. A cache that lags may still show a slot the node
	// has long finished, and cordoning it again would leave the cordon and
	// protection behind.
	if err := r.current(ctx, s); err != nil {
		return reconcile.Result{}, err
	}
	grant, err := r.planGrantCordon(ctx, fresh, s.node, s.bn, s.now)
	if err != nil {
		return reconcile.Result{}, err
	}
	s.bn.Status.Rollout.SlotGrantedAt = slot.Since.DeepCopy()
	// The slot was granted on the pool's cached Node; the Node the grant
	// writes is read afresh, and must still be one a slot may go to: a
	// cache that lags does not show that Karpenter has started to delete
	// or disrupt it (karpenter-defaults seed30: the grant cordoned a node
	// Karpenter was draining, and its evictions counted as a reap of a
	// node in its slot).
	ro := &s.bn.Status.Rollout
	downOnFailed := (ro.FailedImage != "" && rollout.DigestOfHost(s.bn.Status.Booted) == imageref.Digest(ro.FailedImage)) || slot.Down
	why, err := karpenter.SlotBlocker(ctx, r.reader, r.client.RESTMapper(), grant.node, downOnFailed)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := rollout.TakeUp(fresh, slot, claimed, why)
	if d.Skip != "" {
		log.FromContext(ctx).V(1).Info("slot not taken up yet", "node", s.node.Name, "reason", d.Skip)
		s.bn.Status.Phase = s.orig.Status.Phase
		s.orig.Status.Rollout.DeepCopyInto(&s.bn.Status.Rollout)
		s.recorded = nil // the edits they announce are undone
		return reconcile.Result{RequeueAfter: d.Wait}, nil
	}
	for _, w := range d.Writes {
		switch w {
		case rollout.WriteCordonRecord:
			if err := r.patchStatus(ctx, s); err != nil {
				return reconcile.Result{}, fmt.Errorf("record the cordon of %s for its slot: %w", s.node.Name, err)
			}
		case rollout.WriteNode:
			n, err := grant.applyNode(ctx, r.client)
			if err != nil {
				return reconcile.Result{}, fmt.Errorf("cordon node %s for its slot: %w", s.node.Name, err)
			}
			s.node = n
		case rollout.WriteClaim:
			if err := grant.applyClaim(ctx, r.client); err != nil {
				return reconcile.Result{}, err
			}
		case rollout.WriteDraining:
			ro := &s.bn.Status.Rollout
			s.bn.Status.Phase = v1alpha1.PhaseDraining
			ro.PhaseSince = &metav1.Time{Time: s.now}
			ro.Reason, ro.Message = "SlotGranted", fmt.Sprintf("reboot slot granted at %s", slot.Since.UTC().Format(time.RFC3339))
			if err := r.patchStatus(ctx, s); err != nil {
				return reconcile.Result{}, fmt.Errorf("take up the slot of %s: %w", s.node.Name, err)
			}
		}
	}
	r.event(s.bn, corev1.EventTypeNormal, "Cordoned", "cordoned for the update to %s", slot.Image)
	r.event(s.bn, corev1.EventTypeNormal, "SlotGranted", "reboot slot granted for %s", slot.Image)
	// The drain starts on the record's own update event, once the cache
	// shows the cordon, as when the pool wrote the grant.
	return reconcile.Result{}, nil
}

// grantCordon is what the node reconciler writes on a node that takes up
// its slot: the cordon and slot marker, and the protection
// annotations bootroll adds to the Node and to its NodeClaim.
type grantCordon struct {
	pool      string
	node      *corev1.Node
	claim     *unstructured.Unstructured
	nodeKeys  []string
	claimKeys []string
}

// planGrantCordon records on b (the BootcNode about to be told of its slot)
// the cordon of node n and the protection annotations bootroll adds, as
// drain does, and returns what to write once b is written.
func (r *Reconciler) planGrantCordon(ctx context.Context, pool *v1alpha1.BootcNodePool, n *corev1.Node, b *v1alpha1.BootcNode, now time.Time) (grantCordon, error) {
	ro := &b.Status.Rollout
	// The state to give back is read from the API server, not the cache
	// (which may not show an admin's cordon yet); the cordon patch is
	// locked on this read.
	var fresh corev1.Node
	if err := r.reader.Get(ctx, types.NamespacedName{Name: n.Name}, &fresh); err != nil {
		return grantCordon{}, fmt.Errorf("re-read node %s before its slot: %w", n.Name, err)
	}
	n = &fresh
	g := grantCordon{pool: pool.Name, node: n}
	if ro.Cordoned {
		// A grant recorded before (its Node patch failed, or the
		// controller stopped): the cordon and the recorded keys go on
		// again, the missing ones only; what bootroll owns stays as
		// recorded. No record write locks this Node patch, so the record
		// must be the current one: the node reconciler may have given the
		// grant back since.
		var cur v1alpha1.BootcNode
		if err := r.reader.Get(ctx, types.NamespacedName{Name: b.Name}, &cur); err != nil {
			return grantCordon{}, fmt.Errorf("re-read BootcNode %s before its slot: %w", b.Name, err)
		}
		if cur.ResourceVersion != b.ResourceVersion {
			return grantCordon{}, apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("bootcnodes").GroupResource(), b.Name,
				fmt.Errorf("the cached record is stale (%s, current %s)", b.ResourceVersion, cur.ResourceVersion))
		}
		_, marked := n.Annotations[v1alpha1.AnnotationSlot]
		switch {
		case r.opts.TestOnly.ForgetPriorCordon:
		case !marked:
			// The earlier grant's cordon never landed (the marker comes
			// with it in one patch, and that patch failed): the Node's
			// state now is the one bootroll found, as for a first grant
			// below; an admin may have cordoned or uncordoned it since
			// the earlier grant read it (explorer seed 176006 of
			// repair-during-slow-reboot: an admin's cordon, the grant's
			// Node patches failed, the admin uncordoned, and the take-up
			// 17 min later gave the node back cordoned for good).
			ro.PriorUnschedulable = ptr.To(n.Spec.Unschedulable)
		case rollout.UncordonedUnderMarker(n, pool.Name):
			// Someone uncordoned the node since the earlier grant's cordon
			// (kubectl uncordon while the take-up waited): that is the
			// state to give back, as for an uncordon during the drain
			// (recordAdminUncordon). The cordon found before that grant
			// is forgotten (explorer seed 171247 of
			// repair-during-slow-reboot: an admin's cordon, the grant's
			// Node patch timed out but applied, the admin uncordoned,
			// and the node was given back cordoned for good).
			ro.PriorUnschedulable = ptr.To(false)
		}
		// The drain starts with this take-up: the earlier one never
		// entered the slot, and its time is no drain's (seed 171247: a
		// take-up 18 min after the first one timed its drain out at once).
		ro.DrainStartedAt = &metav1.Time{Time: now}
		g.nodeKeys = ro.AddedAnnotations
		if len(ro.AddedNodeClaimAnnotations) > 0 {
			cl, err := karpenter.LookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
			if err != nil {
				return grantCordon{}, err
			}
			g.claim, g.claimKeys = cl.Claim, ro.AddedNodeClaimAnnotations
		}
		return g, nil
	}
	if _, ours := n.Annotations[v1alpha1.AnnotationSlot]; !ours && !r.opts.TestOnly.ForgetPriorCordon {
		ro.PriorUnschedulable = ptr.To(n.Spec.Unschedulable)
	}
	if !r.opts.TestOnly.SkipKarpenterProtection && (pool.Spec.Karpenter.Protect == nil || *pool.Spec.Karpenter.Protect) {
		claimAll := r.opts.TestOnly.DropAnnotationOwnership
		_, g.nodeKeys = karpenter.Protect(maps.Clone(n.Annotations))
		if claimAll && len(g.nodeKeys) > 0 {
			g.nodeKeys = karpenter.ProtectAnnotations // test-only: claims the ones that were there before
		}
		cl, err := karpenter.LookupClaim(ctx, r.reader, r.client.RESTMapper(), n)
		if err != nil {
			return grantCordon{}, err
		}
		if cl.Claim != nil {
			g.claim = cl.Claim
			_, g.claimKeys = karpenter.Protect(maps.Clone(cl.Claim.GetAnnotations()))
			if claimAll && len(g.claimKeys) > 0 {
				g.claimKeys = karpenter.ProtectAnnotations
			}
		}
		ro.AddedAnnotations = karpenter.MergeKeys(ro.AddedAnnotations, g.nodeKeys)
		ro.AddedNodeClaimAnnotations = karpenter.MergeKeys(ro.AddedNodeClaimAnnotations, g.claimKeys)
	}
	ro.ProtectUntil = nil
	ro.Cordoned = true
	ro.DrainStartedAt = &metav1.Time{Time: now}
	return g, nil
}

// applyNode cordons the Node with the slot marker and the planned
// annotations in one patch, and returns the Node as written. Only missing
// keys are added; a Node that is gone is not an error (the node
// reconciler gives the slot back).
func (g grantCordon) applyNode(ctx context.Context, c client.Client) (*corev1.Node, error) {
	if g.node == nil {
		return nil, nil
	}
	m := g.node.DeepCopy()
	m.Spec.Unschedulable = true
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[v1alpha1.AnnotationSlot] = g.pool
	for _, k := range g.nodeKeys {
		if _, ok := m.Annotations[k]; !ok {
			m.Annotations[k] = "true"
		}
	}
	if err := c.Patch(ctx, m, patch.Node(g.node), fieldManager...); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("cordon node %s: %w", g.node.Name, err)
	}
	return m, nil
}

// applyClaim adds the planned annotations to the NodeClaim (the missing
// ones only; a NodeClaim that is gone is not an error).
func (g grantCordon) applyClaim(ctx context.Context, c client.Client) error {
	if g.claim == nil || len(g.claimKeys) == 0 {
		return nil
	}
	orig := g.claim.DeepCopy()
	ann := g.claim.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for _, k := range g.claimKeys {
		if _, ok := ann[k]; !ok {
			ann[k] = "true"
		}
	}
	g.claim.SetAnnotations(ann)
	if err := c.Patch(ctx, g.claim, client.MergeFrom(orig), fieldManager...); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("annotate NodeClaim %s: %w", g.claim.GetName(), err)
	}
	return nil
}
