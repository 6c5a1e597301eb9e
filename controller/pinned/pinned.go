// Package pinned is the PinnedImageSet controller: it writes each set into
// the specs of the BootcNodes it selects, mirrors the set's pull secret for
// the daemons, and aggregates the daemons' progress into the set's status.
package pinned

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/patch"
)

// PinnedSecretNamespace is where the controller mirrors each set's pull
// secret for the daemons. The daemon's Role can read Secrets only there,
// and nothing but these mirrors lives there, so a daemon cannot read any
// other Secret.
const PinnedSecretNamespace = "bootroll-pull-secrets"

// Reconciler writes each PinnedImageSet into the spec of the
// BootcNodes it selects and aggregates their progress into the set's
// status. A set applies to nodes that have a BootcNode (pool members).
type Reconciler struct {
	client   client.Client
	reader   client.Reader
	clock    clock.PassiveClock
	recorder options.Recorder
	opts     options.Options
}

// New builds the PinnedImageSet reconciler from its edges.
func New(c client.Client, opts options.Options) *Reconciler {
	return &Reconciler{client: c, reader: opts.Reader(c), clock: opts.Clock, recorder: opts.Recorder, opts: opts}
}

// Reconcile syncs one PinnedImageSet.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var set v1alpha1.PinnedImageSet
	err := r.client.Get(ctx, req.NamespacedName, &set)
	if apierrors.IsNotFound(err) || (err == nil && set.DeletionTimestamp != nil) {
		return reconcile.Result{}, r.detach(ctx, req.Name, nil)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	selected, err := r.selected(ctx, &set)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.detach(ctx, set.Name, selected); err != nil {
		return reconcile.Result{}, err
	}
	entry, err := r.entry(ctx, &set)
	if err != nil {
		return reconcile.Result{}, err
	}
	for _, name := range slices.Sorted(maps.Keys(selected)) {
		bn := selected[name]
		if err := r.attach(ctx, bn, entry); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, r.status(ctx, &set, selected)
}

// selected returns the BootcNodes the set selects, by name.
func (r *Reconciler) selected(ctx context.Context, set *v1alpha1.PinnedImageSet) (map[string]*v1alpha1.BootcNode, error) {
	out := map[string]*v1alpha1.BootcNode{}
	if set.Spec.Pool != "" {
		var l v1alpha1.BootcNodeList
		if err := r.client.List(ctx, &l, client.MatchingFields{index.BootcNodePool: set.Spec.Pool}); err != nil {
			return nil, fmt.Errorf("list BootcNodes of pool %s: %w", set.Spec.Pool, err)
		}
		for i := range l.Items {
			out[l.Items[i].Name] = &l.Items[i]
		}
		return out, nil
	}
	var nodes corev1.NodeList
	if err := r.client.List(ctx, &nodes, client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(set.Spec.NodeSelector)}); err != nil {
		return nil, fmt.Errorf("list nodes of PinnedImageSet %s: %w", set.Name, err)
	}
	for i := range nodes.Items {
		var bn v1alpha1.BootcNode
		if err := r.client.Get(ctx, types.NamespacedName{Name: nodes.Items[i].Name}, &bn); err != nil {
			if apierrors.IsNotFound(err) {
				continue // not managed by bootroll: no daemon reads a spec for it
			}
			return nil, err
		}
		out[bn.Name] = &bn
	}
	return out, nil
}

// entry is the set as the daemon sees it, with its pull secret mirrored.
func (r *Reconciler) entry(ctx context.Context, set *v1alpha1.PinnedImageSet) (v1alpha1.NodePinnedImageSet, error) {
	e := v1alpha1.NodePinnedImageSet{Name: set.Name, Generation: set.Generation, Throttle: set.Spec.Throttle, MinFreeAfterPull: set.Spec.MinFreeAfterPull}
	for _, img := range set.Spec.Images {
		e.Images = append(e.Images, string(img))
	}
	if set.Spec.Concurrency != nil {
		e.Concurrency = *set.Spec.Concurrency
	}
	if ref := set.Spec.PullSecret; ref != nil {
		mirror, err := r.mirrorSecret(ctx, set, ref)
		if err != nil {
			return e, err
		}
		e.PullSecret = mirror
	}
	return e, nil
}

// mirrorSecret copies the set's pull secret into PinnedSecretNamespace:
// a kubernetes.io/dockercfg secret as its type and .dockercfg key, any
// other as a kubernetes.io/dockerconfigjson one with its .dockerconfigjson
// key. The source must be in the controller's namespace: the controller
// reads no Secrets elsewhere.
func (r *Reconciler) mirrorSecret(ctx context.Context, set *v1alpha1.PinnedImageSet, ref *v1alpha1.SecretReference) (*v1alpha1.SecretReference, error) {
	if ref.Namespace != r.opts.SecretNamespace {
		return nil, reconcile.TerminalError(fmt.Errorf("PinnedImageSet %s: spec.pullSecret.namespace %q: the pull secret must be in the controller's namespace %q", set.Name, ref.Namespace, r.opts.SecretNamespace))
	}
	var src corev1.Secret
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &src); err != nil {
		return nil, fmt.Errorf("read spec.pullSecret %s/%s of PinnedImageSet %s: %w", ref.Namespace, ref.Name, set.Name, err)
	}
	mirror := &v1alpha1.SecretReference{Namespace: PinnedSecretNamespace, Name: "pinned-" + set.Name}
	typ, key := corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey
	if src.Type == corev1.SecretTypeDockercfg {
		typ, key = corev1.SecretTypeDockercfg, corev1.DockerConfigKey
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: mirror.Namespace, Name: mirror.Name, Labels: map[string]string{"bootroll.dev/pinned-image-set": set.Name}},
		Type:       typ,
		Data:       map[string][]byte{key: src.Data[key]},
	}
	var cur corev1.Secret
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: mirror.Namespace, Name: mirror.Name}, &cur)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("mirror pull secret of PinnedImageSet %s: %w", set.Name, err)
		}
	case err != nil:
		return nil, err
	case cur.Type != want.Type:
		// A Secret's type is immutable: replace the mirror.
		if err := r.client.Delete(ctx, &cur); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("replace mirrored pull secret of PinnedImageSet %s: %w", set.Name, err)
		}
		if err := r.client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("replace mirrored pull secret of PinnedImageSet %s: %w", set.Name, err)
		}
	case !apiequality.Semantic.DeepEqual(cur.Data, want.Data):
		cur.Data = want.Data
		if err := r.client.Update(ctx, &cur); err != nil {
			return nil, fmt.Errorf("update mirrored pull secret of PinnedImageSet %s: %w", set.Name, err)
		}
	}
	return mirror, nil
}

// attach writes the set's entry into a BootcNode spec when it differs.
func (r *Reconciler) attach(ctx context.Context, bn *v1alpha1.BootcNode, e v1alpha1.NodePinnedImageSet) error {
	b := bn.DeepCopy()
	found := false
	for i := range b.Spec.PinnedImageSets {
		if b.Spec.PinnedImageSets[i].Name == e.Name {
			b.Spec.PinnedImageSets[i] = e
			found = true
		}
	}
	if !found {
		b.Spec.PinnedImageSets = append(b.Spec.PinnedImageSets, e)
		sort.Slice(b.Spec.PinnedImageSets, func(i, j int) bool { return b.Spec.PinnedImageSets[i].Name < b.Spec.PinnedImageSets[j].Name })
	}
	if apiequality.Semantic.DeepEqual(bn.Spec.PinnedImageSets, b.Spec.PinnedImageSets) {
		return nil
	}
	if err := r.client.Patch(ctx, b, patch.Spec(bn, true)); err != nil {
		return fmt.Errorf("write PinnedImageSet %s into BootcNode %s: %w", e.Name, bn.Name, err)
	}
	*bn = *b
	return nil
}

// detach removes the set from BootcNodes that carry it but are not in keep.
func (r *Reconciler) detach(ctx context.Context, set string, keep map[string]*v1alpha1.BootcNode) error {
	var l v1alpha1.BootcNodeList
	if err := r.client.List(ctx, &l, client.MatchingFields{index.BootcNodePinnedSet: set}); err != nil {
		return fmt.Errorf("list BootcNodes of PinnedImageSet %s: %w", set, err)
	}
	for i := range l.Items {
		bn := &l.Items[i]
		if keep[bn.Name] != nil {
			continue
		}
		b := bn.DeepCopy()
		b.Spec.PinnedImageSets = nil
		for _, e := range bn.Spec.PinnedImageSets {
			if e.Name != set {
				b.Spec.PinnedImageSets = append(b.Spec.PinnedImageSets, e)
			}
		}
		if err := r.client.Patch(ctx, b, patch.Spec(bn, true)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove PinnedImageSet %s from BootcNode %s: %w", set, bn.Name, err)
		}
	}
	return nil
}

// status aggregates the nodes' progress on the set. Work in progress is
// Progressing, never an error; Degraded names nodes, images and reasons.
func (r *Reconciler) status(ctx context.Context, set *v1alpha1.PinnedImageSet, selected map[string]*v1alpha1.BootcNode) error {
	orig := set.DeepCopy()
	st := &set.Status
	st.Nodes, st.Done, st.Pulling, st.Failed = int32(len(selected)), 0, 0, 0
	st.Failures, st.OmittedFailures = nil, 0
	reasons := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(selected)) {
		p := progressOf(selected[name], set)
		if c := meta.FindStatusCondition(selected[name].Status.Daemon.Conditions, conditionPrefetchAvailable); c != nil && c.Status == metav1.ConditionFalse {
			// No runtime answers on the node: none of the set's images
			// can be pulled or checked there, whatever progress says.
			st.Failed++
			for _, img := range set.Spec.Images {
				reasons[c.Reason]++
				if len(st.Failures) < v1alpha1.MaxPinnedFailures {
					st.Failures = append(st.Failures, v1alpha1.PinnedImageFailure{Node: name, Image: string(img), Reason: c.Reason, Message: shortMessage(c.Message)})
				} else {
					st.OmittedFailures++
				}
			}
			continue
		}
		switch {
		case p == nil || p.Generation != set.Generation:
			st.Pulling++ // the daemon has not reported this generation yet
		case p.Failed > 0:
			st.Failed++
			for _, img := range p.Images {
				if img.State != v1alpha1.PinnedFailed {
					continue
				}
				reasons[img.Reason]++
				if len(st.Failures) < v1alpha1.MaxPinnedFailures {
					st.Failures = append(st.Failures, v1alpha1.PinnedImageFailure{Node: name, Image: img.Image, Reason: img.Reason, Message: img.Message})
				} else {
					st.OmittedFailures++
				}
			}
		case int(p.Present) == len(set.Spec.Images):
			st.Done++
		default:
			st.Pulling++
		}
	}
	now := metav1.NewTime(r.clock.Now())
	cond := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: set.Generation, LastTransitionTime: now})
	}
	summary := fmt.Sprintf("%d/%d nodes have all %d images; %d pulling; %d failed", st.Done, st.Nodes, len(set.Spec.Images), st.Pulling, st.Failed)
	if st.Nodes == 0 {
		// Not Complete: a set that selects no node has pinned nothing,
		// and a selector with a typo, or a first pass on a cache that
		// has no BootcNodes yet, said Complete ("0/0 nodes"), which
		// kubectl wait --for=condition=Complete took at its word.
		cond(v1alpha1.ConditionComplete, false, "NoNodesSelected", "no BootcNode matches spec.nodeSelector; nothing is pinned")
	} else {
		cond(v1alpha1.ConditionComplete, st.Done == st.Nodes, "AllPresent", summary)
	}
	cond(v1alpha1.ConditionProgressing, st.Pulling > 0, "Pulling", summary)
	if st.Failed > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(reasons)) {
			parts = append(parts, fmt.Sprintf("%s: %d image(s)", k, reasons[k]))
		}
		var first []string
		for i, f := range st.Failures {
			if i == 3 {
				break
			}
			first = append(first, fmt.Sprintf("%s %s (%s)", f.Node, f.Image, f.Reason))
		}
		cond(v1alpha1.ConditionDegraded, true, topReason(reasons), fmt.Sprintf("%d node(s) failed: %s; e.g. %s", st.Failed, strings.Join(parts, ", "), strings.Join(first, "; ")))
	} else {
		cond(v1alpha1.ConditionDegraded, false, v1alpha1.ReasonAsExpected, summary)
	}
	st.ObservedGeneration = set.Generation
	if equalPinnedStatus(&orig.Status, st) {
		return nil
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionComplete); c != nil && c.Status == metav1.ConditionTrue &&
		!meta.IsStatusConditionTrue(orig.Status.Conditions, v1alpha1.ConditionComplete) && r.recorder != nil {
		r.recorder.Eventf(set, corev1.EventTypeNormal, "Complete", "%s", summary)
	}
	if st.Failed > orig.Status.Failed && r.recorder != nil {
		r.recorder.Eventf(set, corev1.EventTypeWarning, "Degraded", "%s", meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded).Message)
	}
	if r.opts.Metrics != nil {
		r.opts.Metrics.PinnedNodes.WithLabelValues(set.Name, "done").Set(float64(st.Done))
		r.opts.Metrics.PinnedNodes.WithLabelValues(set.Name, "pulling").Set(float64(st.Pulling))
		r.opts.Metrics.PinnedNodes.WithLabelValues(set.Name, "failed").Set(float64(st.Failed))
	}
	if err := r.client.Status().Patch(ctx, set, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update status of PinnedImageSet %s: %w", set.Name, err)
	}
	return nil
}

// conditionPrefetchAvailable is the condition a daemon sets in its
// BootcNode's status.daemon.conditions when no container runtime answers
// (False with reason RuntimeUnavailable).
const conditionPrefetchAvailable = v1alpha1.DaemonConditionPrefetchAvailable

// runtimeConditionEqual reports whether two versions of a BootcNode say
// the same of the node's runtime (PrefetchAvailable status and message).
func runtimeConditionEqual(a, b *v1alpha1.BootcNode) bool {
	ca := meta.FindStatusCondition(a.Status.Daemon.Conditions, conditionPrefetchAvailable)
	cb := meta.FindStatusCondition(b.Status.Daemon.Conditions, conditionPrefetchAvailable)
	if ca == nil || cb == nil {
		return ca == nil && cb == nil
	}
	return ca.Status == cb.Status && ca.Reason == cb.Reason && ca.Message == cb.Message
}

// shortMessage keeps a failure's message within the API's 1024 bytes.
func shortMessage(m string) string {
	const limit = 1024
	if len(m) <= limit {
		return m
	}
	cut := limit - 3
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "..."
}

func progressOf(bn *v1alpha1.BootcNode, set *v1alpha1.PinnedImageSet) *v1alpha1.PinnedSetProgress {
	for i := range bn.Status.Daemon.PinnedImages {
		if bn.Status.Daemon.PinnedImages[i].Name == set.Name {
			return &bn.Status.Daemon.PinnedImages[i]
		}
	}
	return nil
}

func topReason(reasons map[string]int) string {
	best, n := v1alpha1.PinnedReasonUnknown, -1
	for _, k := range slices.Sorted(maps.Keys(reasons)) {
		if reasons[k] > n {
			best, n = k, reasons[k]
		}
	}
	return best
}

func equalPinnedStatus(a, b *v1alpha1.PinnedImageSetStatus) bool {
	return patch.EqualIgnoringTransitions(a, b, func(s *v1alpha1.PinnedImageSetStatus) *[]metav1.Condition { return &s.Conditions })
}

// BootcNodeToPinnedSets maps a BootcNode to the sets in its spec, and, for
// a node newly in a pool, to every set (few) that may select it.
func BootcNodeToPinnedSets(ctx context.Context, c client.Reader, o client.Object) []reconcile.Request {
	bn, ok := o.(*v1alpha1.BootcNode)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []reconcile.Request
	add := func(n string) {
		if !seen[n] {
			seen[n] = true
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
		}
	}
	for _, e := range bn.Spec.PinnedImageSets {
		add(e.Name)
	}
	var sets v1alpha1.PinnedImageSetList
	if err := c.List(ctx, &sets); err == nil {
		for _, s := range sets.Items {
			if s.Spec.Pool == bn.Spec.Pool || len(s.Spec.NodeSelector) > 0 {
				add(s.Name)
			}
		}
	}
	return out
}

// PinnedProgressChanged reports whether a BootcNode update can change a
// set's status or selection.
func PinnedProgressChanged(old, cur *v1alpha1.BootcNode) bool {
	return !apiequality.Semantic.DeepEqual(old.Status.Daemon.PinnedImages, cur.Status.Daemon.PinnedImages) ||
		old.Spec.Pool != cur.Spec.Pool ||
		!runtimeConditionEqual(old, cur)
}

// NodeToPinnedSets maps a Node whose labels changed to the sets that
// select nodes by label.
func NodeToPinnedSets(ctx context.Context, c client.Reader, _ *corev1.Node) []reconcile.Request {
	var sets v1alpha1.PinnedImageSetList
	if err := c.List(ctx, &sets); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, s := range sets.Items {
		if len(s.Spec.NodeSelector) > 0 {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
		}
	}
	return out
}
