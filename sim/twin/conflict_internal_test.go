package twin

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bootroll/bootroll/sim/apiserver"
	"github.com/bootroll/bootroll/sim/scenario"
)

// TestConflictFailsOnlyWrites: no API server answers a get or a list with
// 409, so a conflict fault fails writes only; a read it hits draws from
// the fault's other codes, and goes through when there are none.
func TestConflictFailsOnlyWrites(t *testing.T) {
	get := apiserver.Request{Verb: apiserver.VerbGet, Object: &corev1.Node{}}
	list := apiserver.Request{Verb: apiserver.VerbList, Object: &corev1.NodeList{}}
	patch := apiserver.Request{Verb: apiserver.VerbPatch, Object: &corev1.Node{}}

	g := gateUnder([]scenario.APIErrorCode{"conflict"}, 1)
	for _, r := range []apiserver.Request{get, list} {
		if d := g.Before(r); d.Err != nil || d.Timeout {
			t.Errorf("%s under a conflict fault: %v, want it served", r.Verb, d.Err)
		}
	}
	if d := g.Before(patch); !apierrors.IsConflict(d.Err) {
		t.Errorf("patch under a conflict fault: %v, want a 409", d.Err)
	}

	g = gateUnder([]scenario.APIErrorCode{"conflict", "internalError"}, 1)
	for range 50 {
		if d := g.Before(get); !apierrors.IsInternalError(d.Err) {
			t.Fatalf("get under conflict and internalError: %v, want a 500 every time", d.Err)
		}
	}
}
