package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/index"
	"github.com/bootroll/bootroll/controller/rollout"
)

// DrainResult says how far a drain got in one pass.
type DrainResult struct {
	// Remaining are the pods that still have to leave the node.
	Remaining int
	// Blocked names pods whose eviction a PDB refused in this pass.
	Blocked []string
}

// Drainer evicts a node's pods through the Eviction API, so PDBs are honoured.
type Drainer struct {
	Client client.Client
	// DeleteInsteadOfEvict deletes the pods directly, bypassing the
	// Eviction API and so every PDB. It is TestOnly.DeleteInsteadOfEvict,
	// a deliberately broken setting for the twin's negative controls;
	// production never sets it.
	DeleteInsteadOfEvict bool
}

// NewDrainer returns the drainer the node reconciler uses; to carries the
// deliberately broken settings of the twin's negative controls.
func NewDrainer(c client.Client, to rollout.TestOnly) *Drainer {
	return &Drainer{Client: c, DeleteInsteadOfEvict: to.DeleteInsteadOfEvict}
}

// Drain runs one pass: it lists the node's pods through the index, evicts
// every pod that must leave and is not already terminating, and reports
// what remains. It never deletes a pod directly, unless the test-only
// DeleteInsteadOfEvict is set.
func (d *Drainer) Drain(ctx context.Context, node string) (DrainResult, error) {
	// The pods are only read (an eviction names its pod; its answer goes
	// into the Eviction): no deep copies of the cache's pods.
	var pods corev1.PodList
	if err := d.Client.List(ctx, &pods, client.MatchingFields{index.PodNode: node}, client.UnsafeDisableDeepCopy); err != nil {
		return DrainResult{}, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	var res DrainResult
	sort.Slice(pods.Items, func(i, j int) bool {
		a, b := &pods.Items[i], &pods.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	for i := range pods.Items {
		p := &pods.Items[i]
		if !mustLeave(p) {
			continue
		}
		res.Remaining++
		if p.DeletionTimestamp != nil {
			continue
		}
		if d.DeleteInsteadOfEvict {
			// Deliberately broken (TestOnly): no PDB is consulted.
			if err := d.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return res, fmt.Errorf("delete pod %s/%s from node %s: %w", p.Namespace, p.Name, node, err)
			}
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		err := d.Client.SubResource("eviction").Create(ctx, p, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			res.Blocked = append(res.Blocked, p.Namespace+"/"+p.Name)
		default:
			return res, fmt.Errorf("evict pod %s/%s from node %s: %w", p.Namespace, p.Name, node, err)
		}
	}
	return res, nil
}

// mustLeave reports whether a pod has to be evicted before a reboot:
// DaemonSet pods, mirror (static) pods and finished pods stay.
func mustLeave(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return false
		}
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
	if err := c.List(ctx, &pods, client.MatchingFields{index.PodNode: node}, client.UnsafeDisableDeepCopy); err != nil {
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

func blockedMessage(blocked []string) string {
	if len(blocked) == 0 {
		return ""
	}
	if len(blocked) > 5 {
		return strings.Join(blocked[:5], ", ") + fmt.Sprintf(" and %d more", len(blocked)-5)
	}
	return strings.Join(blocked, ", ")
}
