package node

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/index"
)

// tooManyRequests is the drain's shortcut past IsNotFound and
// IsTooManyRequests: whatever it says yes to, they say IsTooManyRequests
// and not IsNotFound of, so the drain counts the same evictions refused.
func TestTooManyRequestsAsIsChecks(t *testing.T) {
	pdb := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	pdb.ErrStatus.Details.Causes = append(pdb.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 2 healthy pods and has 2 currently"})
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: policyv1.GroupName, Resource: "poddisruptionbudget"}, "web", errors.New("negative"))
	odd := func(reason metav1.StatusReason, code int32) error {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Reason: reason, Code: code}}
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p")
	for name, err := range map[string]error{
		"budget refusal":             pdb,
		"throttled":                  apierrors.NewTooManyRequests("slow down", 1),
		"throttled without a reason": odd("", http.StatusTooManyRequests),
		"throttled with a 404":       odd(metav1.StatusReasonTooManyRequests, http.StatusNotFound),
		"unknown reason with a 404":  odd(metav1.StatusReasonUnknown, http.StatusNotFound),
		"not found":                  notFound,
		"not found with a 429":       odd(metav1.StatusReasonNotFound, http.StatusTooManyRequests),
		"forbidden by a budget":      forbidden,
		"wrapped refusal":            fmt.Errorf("evict: %w", pdb),
		"wrapped not found":          fmt.Errorf("evict: %w", notFound),
		"internal":                   apierrors.NewInternalError(errors.New("boom")),
		"plain":                      errors.New("plain"),
	} {
		if !tooManyRequests(err) {
			continue
		}
		if apierrors.IsNotFound(err) || !apierrors.IsTooManyRequests(err) {
			t.Errorf("%s: tooManyRequests says refused; IsNotFound %v, IsTooManyRequests %v", name, apierrors.IsNotFound(err), apierrors.IsTooManyRequests(err))
		}
	}
	if !tooManyRequests(pdb) {
		t.Error("a budget's refusal takes the long way")
	}
}

// onNode selects what client.MatchingFields on the pods-by-node index
// selects: the same requirements, sent as the same string.
func TestOnNodeAsMatchingFields(t *testing.T) {
	var got, want client.ListOptions
	onNode("workers-1").ApplyToList(&got)
	client.MatchingFields{index.PodNode: "workers-1"}.ApplyToList(&want)
	g, w := got.FieldSelector, want.FieldSelector
	if !reflect.DeepEqual(g.Requirements(), w.Requirements()) || g.String() != w.String() || g.Empty() != w.Empty() {
		t.Errorf("onNode selects %v (%+v), MatchingFields %v (%+v)", g, g.Requirements(), w, w.Requirements())
	}
	if v, ok := g.RequiresExactMatch(index.PodNode); !ok || v != "workers-1" {
		t.Errorf("onNode does not require %s=workers-1 exactly, as the cache's index needs", index.PodNode)
	}
}
