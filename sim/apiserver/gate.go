package apiserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// This file is the client side of API faults: a Gate wraps a process's
// client (the controller's or a daemon's) and decides, request by
// request, whether it fails, times out (applied or not), or takes extra
// latency, and learns of every write served, which is where a process can
// crash between two writes.

// Request is one request of a gated client: its verb (VerbUpdate,
// VerbPatchStatus, ...) and object.
type Request struct {
	Verb   string
	Object runtime.Object
	// Key is what a Get asks for (its Object is empty until served);
	// zero for the other verbs.
	Key client.ObjectKey
}

// ObjectName is the name of the object the request is for: a Get's key,
// or the name of the object written; empty for a list.
func (r Request) ObjectName() string {
	if r.Key.Name != "" {
		return r.Key.Name
	}
	if o, ok := r.Object.(client.Object); ok {
		return o.GetName()
	}
	return ""
}

// Write reports whether the request changes something.
func (r Request) Write() bool {
	switch r.Verb {
	case VerbGet, VerbList:
		return false
	}
	return true
}

// MatchesVerb reports whether the request's verb is v, or v is the verb of
// a subresource request ("update" matches "update/status").
func (r Request) MatchesVerb(v string) bool {
	if r.Verb == v {
		return true
	}
	base, _, ok := strings.Cut(r.Verb, "/")
	return ok && base == v
}

// Decision is a Gate's answer for one request.
type Decision struct {
	// Err fails the request with this error; it is not served.
	Err error
	// Timeout serves the request when Applied and then returns a timeout
	// error either way: the caller cannot tell whether it was applied.
	Timeout bool
	Applied bool
	// Latency is how long the request takes on top of the usual.
	Latency time.Duration
}

// Gate decides the fate of each request of a gated client.
type Gate interface {
	// Before is asked before the request is served.
	Before(Request) Decision
	// Served is told of every request that reached the server, with the
	// server's answer (a timed-out write that was applied counts, with a
	// nil error).
	Served(Request, error)
}

// timeoutError is the error of a request that timed out (apierrors.IsTimeout).
func timeoutError(r Request) error {
	return apierrors.NewTimeoutError(fmt.Sprintf("sim apiserver: %s timed out (the request may or may not have been applied)", r.Verb), 1)
}

// ErrCrashed is returned by a Dead client: its process has ended.
var ErrCrashed = errors.New("sim apiserver: the process has crashed")

// Gated returns c with every request going through g.
func Gated(c client.Client, g Gate) client.Client {
	doKey := func(verb string, obj runtime.Object, key client.ObjectKey, serve func() error) error {
		r := Request{Verb: verb, Object: obj, Key: key}
		d := g.Before(r)
		switch {
		case d.Err != nil:
			return d.Err
		case d.Timeout:
			if d.Applied {
				g.Served(r, serve())
			}
			return timeoutError(r)
		}
		err := serve()
		g.Served(r, err)
		return err
	}
	do := func(verb string, obj runtime.Object, serve func() error) error {
		return doKey(verb, obj, client.ObjectKey{}, serve)
	}
	return interceptor.NewClient(withWatch{c}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return doKey(VerbGet, obj, key, func() error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return do(VerbList, list, func() error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return do(VerbCreate, obj, func() error { return c.Create(ctx, obj, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return do(VerbDelete, obj, func() error { return c.Delete(ctx, obj, opts...) })
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			return do(VerbDeleteAllOf, obj, func() error { return c.DeleteAllOf(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return do(VerbUpdate, obj, func() error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			return do(VerbPatch, obj, func() error { return c.Patch(ctx, obj, patch, opts...) })
		},
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			return do(subVerb(VerbCreate, sub), obj, func() error { return c.SubResource(sub).Create(ctx, obj, subObj, opts...) })
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return do(subVerb(VerbUpdate, sub), obj, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return do(subVerb(VerbPatch, sub), obj, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	})
}

// subVerb is the verb of a request of subresource sub: verb+"/"+sub,
// without building the string for the usual ones (an eviction refused by a
// PodDisruptionBudget is retried thousands of times in a run).
func subVerb(verb, sub string) string {
	switch {
	case verb == VerbCreate && sub == "eviction":
		return VerbEvict
	case verb == VerbUpdate && sub == "status":
		return VerbUpdateStatus
	case verb == VerbPatch && sub == "status":
		return VerbPatchStatus
	}
	return verb + "/" + sub
}

// withWatch adds the Watch that interceptor.NewClient needs; the twin's
// processes watch through their informer caches, never through a client.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "watch"}, "watch")
}

// FaultError returns the error a server answers with for an injected
// fault code: 409, 429 or 500.
func FaultError(code int, r Request) error {
	name := ""
	if o, ok := r.Object.(client.Object); ok {
		name = o.GetName()
	}
	switch code {
	case 409:
		return apierrors.NewConflict(resourceOf(r.Object), name, fmt.Errorf("injected conflict on %s", r.Verb))
	case 429:
		return apierrors.NewTooManyRequests(fmt.Sprintf("injected throttling of %s", r.Verb), 1)
	case 500:
		return apierrors.NewInternalError(fmt.Errorf("injected internal error on %s", r.Verb))
	}
	return fmt.Errorf("sim apiserver: no injected error for code %d", code)
}

// resourceOf names the resource of obj for an error message: its Go type's
// name in lower case, plural.
func resourceOf(obj runtime.Object) schema.GroupResource {
	t := reflect.TypeOf(obj)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return schema.GroupResource{Resource: "objects"}
	}
	return schema.GroupResource{Resource: strings.ToLower(t.Name()) + "s"}
}
