package apiserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// subResourceClient serves the "status" and "eviction" subresources.
type subResourceClient struct {
	c    *simClient
	name string
}

var _ client.SubResourceClient = (*subResourceClient)(nil)

func (r *subResourceClient) unsupported(verb string) error {
	return apierrors.NewMethodNotSupported(corev1.Resource(r.name), verb)
}

// Get is not supported for any subresource.
func (r *subResourceClient) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return r.unsupported("get")
}

// Create evicts the pod obj when the subresource is "eviction" and
// subResource a *policyv1.Eviction.
func (r *subResourceClient) Create(ctx context.Context, obj client.Object, subResource client.Object, _ ...client.SubResourceCreateOption) error {
	if r.name != "eviction" {
		return r.unsupported("create")
	}
	if _, ok := obj.(*corev1.Pod); !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("eviction: %T is not a *corev1.Pod", obj))
	}
	ev, ok := subResource.(*policyv1.Eviction)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("eviction: %T is not a *policyv1.Eviction", subResource))
	}
	return r.c.evict(ctx, obj.(*corev1.Pod), ev)
}

// Update updates the status of obj.
func (r *subResourceClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if r.name != "status" {
		return r.unsupported("update")
	}
	o := client.SubResourceUpdateOptions{}
	o.ApplyOptions(opts)
	return r.c.update(ctx, VerbUpdateStatus, obj, true, o.DryRun, r.c.managerOf(o.FieldManager), echoes(opts))
}

// Patch patches the status of obj.
func (r *subResourceClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if r.name != "status" {
		return r.unsupported("patch")
	}
	o := client.SubResourcePatchOptions{}
	o.ApplyOptions(opts)
	return r.c.patch(ctx, VerbPatchStatus, obj, patch, true, o.DryRun, r.c.managerOf(o.FieldManager), echoes(opts))
}

// Apply is not supported.
func (r *subResourceClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return ErrApplyNotSupported
}

// evict hands an eviction of pod to the eviction handler or, when there is
// none, evicts it as kube-apiserver does (evictDefault).
func (c *simClient) evict(ctx context.Context, pod *corev1.Pod, ev *policyv1.Eviction) error {
	k, key, err := c.begin(ctx, VerbEvict, pod, client.ObjectKeyFromObject(pod))
	if err != nil {
		return err
	}
	e := k.store.get(objKey{key.Namespace, key.Name})
	if e == nil {
		return notFound(k, key.Name)
	}
	ev = ev.DeepCopy()
	if ev.Name == "" {
		ev.Name = key.Name
	}
	if ev.Namespace == "" {
		ev.Namespace = key.Namespace
	}
	if c.s.evict != nil {
		return c.s.evict(ctx, e.obj.(*corev1.Pod), ev)
	}
	return c.s.evictDefault(k, e, ev)
}
