package node

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/podorder"
)

// DrainResult says how far a drain got in one pass.
type DrainResult struct {
	// Remaining are the pods that still have to leave the node.
	Remaining int
	// Blocked are the pods that hold the drain up in this pass: a
	// PodDisruptionBudget refused its eviction, or it needs an opt-in of
	// the pool's spec.drain.
	Blocked []BlockedPod
}

// BlockedPod is a pod that holds a drain up, and why. Its text
// ("namespace/name (why)", String) is made only for the messages that
// name it (blockedMessage): a drain held up by a budget meets a refusal
// for each of its pods at every poll, and most polls say nothing new.
type BlockedPod struct {
	Namespace, Name string
	// why is the opt-in the pod needs, or "" when refused is set.
	why string
	// refused is the error that refused the pod's eviction.
	refused error
}

func (b BlockedPod) String() string {
	why := b.why
	if b.refused != nil {
		why = refusalReason(b.refused)
	}
	return b.Namespace + "/" + b.Name + " (" + why + ")"
}

// Drainer evicts a node's pods through the Eviction API, so PDBs are honoured.
type Drainer struct {
	Client client.Client
	// DeleteInsteadOfEvict deletes the pods directly, bypassing the
	// Eviction API and so every PDB. It is TestOnly.DeleteInsteadOfEvict,
	// a deliberately broken setting for the twin's negative controls;
	// production never sets it.
	DeleteInsteadOfEvict bool
	// evictions is Client's eviction subresource, made once (NewDrainer)
	// rather than at every pass; nil, Drain makes it.
	evictions client.SubResourceClient
}

// NewDrainer returns the drainer the node reconciler uses; to carries the
// deliberately broken settings of the twin's negative controls.
func NewDrainer(c client.Client, to rollout.TestOnly) *Drainer {
	return &Drainer{Client: c, DeleteInsteadOfEvict: to.DeleteInsteadOfEvict, evictions: c.SubResource("eviction")}
}

// Drain runs one pass with the pool's opt-ins: it lists the node's pods
// through the index and, as kubectl drain does, evicts nothing while a pod
// needs an opt-in the pool does not give (those pods are reported in
// Blocked); otherwise it evicts every pod that must leave and is not
// already terminating, and reports what remains. Evictions carry no grace
// period, so each pod gets its own terminationGracePeriodSeconds, and a
// terminating pod counts as remaining until it is gone. It never deletes
// a pod directly, unless the test-only DeleteInsteadOfEvict is set.
func (d *Drainer) Drain(ctx context.Context, node string, opts v1alpha1.DrainSpec) (DrainResult, error) {
	// The pods are only read (an eviction names its pod; its answer goes
	// into the Eviction): no deep copies of the cache's pods.
	var pods corev1.PodList
	if err := d.Client.List(ctx, &pods, onNode(node), client.UnsafeDisableDeepCopy); err != nil {
		return DrainResult{}, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	var res DrainResult
	var evict []*corev1.Pod
	for _, p := range podorder.ByName(pods.Items) {
		if !mustLeave(p) {
			continue
		}
		res.Remaining++
		if p.DeletionTimestamp != nil {
			continue
		}
		if why := needsOptIn(p, opts); why != "" {
			res.Blocked = append(res.Blocked, BlockedPod{Namespace: p.Namespace, Name: p.Name, why: why})
			continue
		}
		evict = append(evict, p)
	}
	if len(res.Blocked) > 0 {
		// kubectl drain refuses the whole drain: no pod is disrupted for
		// a drain that cannot finish.
		return res, nil
	}
	evictions := d.evictions
	if evictions == nil {
		evictions = d.Client.SubResource("eviction")
	}
	for i, p := range evict {
		if d.DeleteInsteadOfEvict {
			// Deliberately broken (TestOnly): no PDB is consulted.
			if err := d.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return res, fmt.Errorf("delete pod %s/%s from node %s: %w", p.Namespace, p.Name, node, err)
			}
			continue
		}
		// No DeleteOptions: the pod's own grace period applies.
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := evictions.Create(ctx, p, ev)
		switch {
		case err == nil, !tooManyRequests(err) && apierrors.IsNotFound(err):
		case tooManyRequests(err), apierrors.IsTooManyRequests(err), budgetRefusal(err) != "":
			if res.Blocked == nil {
				// A budget that refuses one pod mostly refuses the
				// others too: room for them all at once.
				res.Blocked = make([]BlockedPod, 0, len(evict)-i)
			}
			res.Blocked = append(res.Blocked, BlockedPod{Namespace: p.Namespace, Name: p.Name, refused: err})
		default:
			return res, fmt.Errorf("evict pod %s/%s from node %s: %w", p.Namespace, p.Name, node, err)
		}
	}
	return res, nil
}

// needsOptIn says which opt-ins of the pool's spec.drain a pod that must
// leave needs and does not have, as kubectl drain's filters decide: a pod
// with an emptyDir volume of any medium needs deleteEmptyDirData, a pod
// with no controller needs force. It returns "" when the pod may be
// evicted.
func needsOptIn(p *corev1.Pod, opts v1alpha1.DrainSpec) string {
	var why []string
	if !opts.DeleteEmptyDirData && hasEmptyDir(p) {
		why = append(why, "emptyDir data would be lost: set spec.drain.deleteEmptyDirData")
	}
	if !opts.Force && metav1.GetControllerOfNoCopy(p) == nil {
		why = append(why, "no controller recreates it: set spec.drain.force")
	}
	return strings.Join(why, "; ")
}

func hasEmptyDir(p *corev1.Pod) bool {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].EmptyDir != nil {
			return true
		}
	}
	return false
}

// tooManyRequests reports whether err is a StatusError whose reason is
// TooManyRequests, as a budget's refusal of an eviction mostly is: such an
// error is IsTooManyRequests, and not IsNotFound (TooManyRequests is a
// known reason, so IsNotFound does not look at its code). It tells so
// without their reads of the error's status, a copy of it each: a drain
// blocked by a budget meets one refusal per pod at every poll.
// TestTooManyRequestsAsIsChecks checks it against them.
func tooManyRequests(err error) bool {
	se, ok := err.(*apierrors.StatusError)
	return ok && se.ErrStatus.Reason == metav1.StatusReasonTooManyRequests
}

// budgetRefusal returns the message of the PodDisruptionBudget cause of an
// eviction's error, or "". The API server gives the budget's name there
// ("The disruption budget web needs 2 healthy pods and has 2 currently"),
// with a 429, or a 403 when the budget's disruptionsAllowed is negative.
func budgetRefusal(err error) string {
	// The error itself first, as errors.As would, without its reflection:
	// a drain blocked by a budget meets one refusal per poll.
	st, ok := err.(apierrors.APIStatus)
	if !ok && !errors.As(err, &st) {
		return ""
	}
	details := st.Status().Details
	if details == nil {
		return ""
	}
	for _, c := range details.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return c.Message
		}
	}
	return ""
}

// refusalReason says why an eviction was refused: "PDB <name>" when the
// error names the budget, else the error's message.
func refusalReason(err error) string {
	msg := budgetRefusal(err)
	if name, ok := strings.CutPrefix(msg, "The disruption budget "); ok {
		name, _, _ = strings.Cut(name, " ")
		return "PDB " + name
	}
	if msg != "" {
		return msg
	}
	return err.Error()
}

// mustLeave reports whether a pod has to be gone before a reboot, as
// kubectl drain decides: DaemonSet pods (controller apps/v1 DaemonSet),
// mirror (static) pods and finished pods stay.
func mustLeave(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if o := metav1.GetControllerOfNoCopy(p); o != nil && o.Kind == "DaemonSet" && o.APIVersion == "apps/v1" {
		return false
	}
	return true
}

// WorkloadPods counts the pods on a node that are not DaemonSet, mirror or
// finished pods, and not terminating.
func WorkloadPods(ctx context.Context, c client.Reader, node string) (int, error) {
	return countPods(ctx, c, node, false)
}

// PodsToLeave counts the pods on a node that a drain waits for: not
// DaemonSet, mirror or finished pods, terminating ones included.
func PodsToLeave(ctx context.Context, c client.Reader, node string) (int, error) {
	return countPods(ctx, c, node, true)
}

func countPods(ctx context.Context, c client.Reader, node string, terminating bool) (int, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, onNode(node), client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	n := 0
	for i := range pods.Items {
		if mustLeave(&pods.Items[i]) && (terminating || pods.Items[i].DeletionTimestamp == nil) {
			n++
		}
	}
	return n, nil
}

// onNode selects the pods bound to node through the pods-by-node index
// (index.PodNode): the selector client.MatchingFields makes of a map,
// made without the map at every pass of a drain.
func onNode(node string) client.MatchingFieldsSelector {
	return client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(index.PodNode, node)}
}

// blockedMessage names the first five blocked pods, and how many more.
func blockedMessage(blocked []BlockedPod) string {
	named := make([]string, 0, min(len(blocked), 5))
	for _, b := range blocked[:cap(named)] {
		named = append(named, b.String())
	}
	msg := strings.Join(named, ", ")
	if len(blocked) > 5 {
		msg += fmt.Sprintf(" and %d more", len(blocked)-5)
	}
	return msg
}

// drainOptions are a pool's spec.drain; none without a pool.
func drainOptions(pool *v1alpha1.BootcNodePool) v1alpha1.DrainSpec {
	if pool == nil {
		return v1alpha1.DrainSpec{}
	}
	return pool.Spec.Drain
}
