package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file is the eviction subresource of a server with no eviction
// handler, after kube-apiserver's (pkg/registry/core/pod/storage/
// eviction.go, v1.37): it reads the PodDisruptionBudgets' status as the
// disruption controller left it (the twin's cluster model, which does that
// controller's work, installs its own handler instead).

// pdbKind is the kind of PodDisruptionBudgets.
var pdbKind = policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")

// evictDefault evicts the pod of e as kube-apiserver does.
func (s *Server) evictDefault(k *kind, e *entry, ev *policyv1.Eviction) error {
	do := ev.DeleteOptions
	if do == nil {
		do = &metav1.DeleteOptions{}
	}
	if err := checkDelete(do); err != nil {
		return err
	}
	pod := e.obj.(*corev1.Pod)
	// Pods that are done, not started or already going may go whatever
	// the budgets say.
	if p := pod.Status.Phase; p == corev1.PodSucceeded || p == corev1.PodFailed || p == corev1.PodPending || pod.DeletionTimestamp != nil {
		return s.evictDelete(k, e, do.Preconditions)
	}
	pdbs, err := s.podBudgets(pod)
	if err != nil {
		return err
	}
	switch {
	case len(pdbs) > 1:
		// A bare 500, with no reason, as kube-apiserver answers.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}
	case len(pdbs) == 1:
		pk, pe := pdbs[0].k, pdbs[0].e
		pdb := pe.obj.(*policyv1.PodDisruptionBudget)
		ready := podReady(pod)
		switch {
		case !ready && pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow:
		case !ready && pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0:
			// An unready pod of a budget that is met goes without
			// using it up.
		default:
			if err := s.decrementBudget(pk, pe, pod.Name); err != nil {
				return err
			}
		}
	}
	return s.evictDelete(k, e, do.Preconditions)
}

// evictDelete marks the pod of e as a disruption target, as an eviction
// does, and deletes it.
func (s *Server) evictDelete(k *kind, e *entry, pre *metav1.Preconditions) error {
	if pre != nil {
		if (pre.UID != nil && *pre.UID != e.obj.GetUID()) || (pre.ResourceVersion != nil && *pre.ResourceVersion != e.obj.GetResourceVersion()) {
			return conflict(k, e.key.name)
		}
	}
	pod := e.obj.(*corev1.Pod).DeepCopy()
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}
	i := 0
	for i < len(pod.Status.Conditions) && pod.Status.Conditions[i].Type != cond.Type {
		i++
	}
	if i == len(pod.Status.Conditions) || pod.Status.Conditions[i].Status != cond.Status || pod.Status.Conditions[i].Reason != cond.Reason || pod.Status.Conditions[i].Message != cond.Message {
		cond.LastTransitionTime = s.now()
		if i == len(pod.Status.Conditions) {
			pod.Status.Conditions = append(pod.Status.Conditions, cond)
		} else {
			pod.Status.Conditions[i] = cond
		}
		s.replace(k, e, pod)
	}
	s.delete(k, e)
	return nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

type kindEntry struct {
	k *kind
	e *entry
}

// podBudgets returns the PodDisruptionBudgets whose selector matches pod.
func (s *Server) podBudgets(pod *corev1.Pod) ([]kindEntry, error) {
	pk, err := s.kindFor(pdbKind)
	if err != nil {
		var nk *meta.NoKindMatchError
		if errors.As(err, &nk) {
			return nil, nil
		}
		return nil, err
	}
	var out []kindEntry
	for _, e := range pk.store.list(pod.Namespace) {
		sel, err := metav1.LabelSelectorAsSelector(e.obj.(*policyv1.PodDisruptionBudget).Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			// An invalid selector matches no pod.
			continue
		}
		out = append(out, kindEntry{pk, e})
	}
	return out, nil
}

// tooManyRequests is the error of an eviction a budget refuses.
func tooManyRequests(retryAfter int, cause string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", retryAfter)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

// decrementBudget takes one disruption from the budget of e for the
// eviction of podName, or refuses it.
func (s *Server) decrementBudget(k *kind, e *entry, podName string) error {
	pdb := e.obj.(*policyv1.PodDisruptionBudget)
	st := &pdb.Status
	forbidden := func(why, cause string) error {
		err := apierrors.NewForbidden(schema.GroupResource{Group: policyv1.GroupName, Resource: "poddisruptionbudget"}, pdb.Name, errors.New(why))
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
		return err
	}
	switch {
	case st.ObservedGeneration < pdb.Generation:
		return tooManyRequests(10, fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	case st.DisruptionsAllowed < 0:
		return forbidden("pdb disruptions allowed is negative",
			fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name))
	case len(st.DisruptedPods) > maxDisruptedPods:
		return forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller", pdb.Name))
	case st.DisruptionsAllowed == 0:
		cond := meta.FindStatusCondition(st.Conditions, policyv1.DisruptionAllowedCondition)
		var msg string
		switch {
		case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "" && cond.Reason == policyv1.SyncFailedReason:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, cond.Message)
		case st.CurrentHealthy <= st.DesiredHealthy:
			msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, st.DesiredHealthy, st.CurrentHealthy)
		case cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != "":
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, cond.Reason, cond.Message)
		default:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		}
		return tooManyRequests(0, msg)
	}
	next := pdb.DeepCopy()
	next.Status.DisruptionsAllowed--
	if next.Status.DisruptionsAllowed == 0 {
		meta.SetStatusCondition(&next.Status.Conditions, metav1.Condition{
			Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse, Reason: policyv1.InsufficientPodsReason,
			ObservedGeneration: next.Status.ObservedGeneration, LastTransitionTime: s.now(),
		})
	}
	if next.Status.DisruptedPods == nil {
		next.Status.DisruptedPods = map[string]metav1.Time{}
	}
	next.Status.DisruptedPods[podName] = s.now()
	s.replace(k, e, next)
	return nil
}

// maxDisruptedPods is kube-apiserver's bound on a budget's evictions the
// disruption controller has not confirmed yet.
const maxDisruptedPods = 2000
