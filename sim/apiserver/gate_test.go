package apiserver_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// scripted is a Gate that answers every request with d and records what
// it was asked and told.
type scripted struct {
	d      apiserver.Decision
	asked  []string
	names  []string
	served []string
}

func (g *scripted) Before(r apiserver.Request) apiserver.Decision {
	g.asked = append(g.asked, r.Verb)
	g.names = append(g.names, r.ObjectName())
	return g.d
}

func (g *scripted) Served(r apiserver.Request, err error) {
	g.served = append(g.served, fmt.Sprintf("%s err=%v", r.Verb, err != nil))
}

func TestGateErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		code int
		is   func(error) bool
	}{
		{409, apierrors.IsConflict},
		{429, apierrors.IsTooManyRequests},
		{500, apierrors.IsInternalError},
	} {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			s, _ := newServer(t)
			g := &scripted{}
			c := apiserver.Gated(s.Client(), g)
			g.d = apiserver.Decision{Err: apiserver.FaultError(tc.code, apiserver.Request{Verb: "create", Object: node("n")})}
			err := c.Create(ctx, node("n"))
			if !tc.is(err) {
				t.Fatalf("create: got %v, want a %d", err, tc.code)
			}
			if err := s.AdminClient().Get(ctx, client.ObjectKey{Name: "n"}, node("")); !apierrors.IsNotFound(err) {
				t.Errorf("a failed create was applied: %v", err)
			}
			if len(g.served) != 0 {
				t.Errorf("a failed request counts as served: %q", g.served)
			}
			// Subresource writes go through the gate too.
			g.d = apiserver.Decision{}
			mustCreate(t, c, node("n"))
			n := node("n")
			if err := s.AdminClient().Get(ctx, client.ObjectKey{Name: "n"}, n); err != nil {
				t.Fatal(err)
			}
			g.d = apiserver.Decision{Err: apiserver.FaultError(tc.code, apiserver.Request{Verb: "update/status", Object: n})}
			if err := c.Status().Update(ctx, n); !tc.is(err) {
				t.Fatalf("status update: got %v, want a %d", err, tc.code)
			}
			want := []string{"create", "create", "update/status"}
			if fmt.Sprint(g.asked) != fmt.Sprint(want) {
				t.Errorf("asked %q, want %q", g.asked, want)
			}
		})
	}
}

// TestGateNamesTheObject: the gate is told the name of the object of each
// request, a Get's (from its key, its object still empty) as a write's;
// a list has none.
func TestGateNamesTheObject(t *testing.T) {
	s, _ := newServer(t)
	g := &scripted{}
	c := apiserver.Gated(s.Client(), g)
	mustCreate(t, c, node("n"))
	if err := c.Get(ctx, client.ObjectKey{Name: "n"}, node("")); err != nil {
		t.Fatal(err)
	}
	var l corev1.NodeList
	if err := c.List(ctx, &l); err != nil {
		t.Fatal(err)
	}
	if want := []string{"n", "n", ""}; fmt.Sprint(g.names) != fmt.Sprint(want) {
		t.Errorf("names %q, want %q", g.names, want)
	}
}

func TestGateTimeoutMayOrMayNotApply(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(fmt.Sprint("applied=", applied), func(t *testing.T) {
			s, _ := newServer(t)
			g := &scripted{d: apiserver.Decision{Timeout: true, Applied: applied}}
			c := apiserver.Gated(s.Client(), g)
			err := c.Create(ctx, node("n"))
			if !apierrors.IsTimeout(err) {
				t.Fatalf("got %v, want a timeout", err)
			}
			gerr := s.AdminClient().Get(ctx, client.ObjectKey{Name: "n"}, node(""))
			if applied && gerr != nil {
				t.Errorf("an applied timeout left no object: %v", gerr)
			}
			if !applied && !apierrors.IsNotFound(gerr) {
				t.Errorf("an unapplied timeout created the object: %v", gerr)
			}
			wantServed := 0
			if applied {
				wantServed = 1
			}
			if len(g.served) != wantServed {
				t.Errorf("served %q, want %d", g.served, wantServed)
			}
		})
	}
}

func TestGateServedAndCrashed(t *testing.T) {
	s, _ := newServer(t)
	g := &scripted{}
	c := apiserver.Gated(s.Client(), g)
	mustCreate(t, c, node("a"))
	if err := c.Delete(ctx, node("missing")); !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	want := []string{"create err=false", "delete err=true"}
	if fmt.Sprint(g.served) != fmt.Sprint(want) {
		t.Errorf("served %q, want %q", g.served, want)
	}
	g.d = apiserver.Decision{Err: apiserver.ErrCrashed}
	if err := c.Get(ctx, client.ObjectKey{Name: "a"}, node("")); !errors.Is(err, apiserver.ErrCrashed) {
		t.Errorf("a crashed process's read: %v", err)
	}
}

func TestRequestMatchesVerb(t *testing.T) {
	r := apiserver.Request{Verb: apiserver.VerbUpdateStatus}
	if !r.MatchesVerb("update") || !r.MatchesVerb("update/status") || r.MatchesVerb("patch") || r.MatchesVerb("status") {
		t.Error("update/status matches update and update/status only")
	}
	if (apiserver.Request{Verb: apiserver.VerbGet}).Write() || !(apiserver.Request{Verb: apiserver.VerbEvict}).Write() {
		t.Error("get is a read, create/eviction a write")
	}
}
