package informer

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/apiserver"
)

// cachedClient is a manager's client: Get and List of the kinds the cache
// holds read the cache; everything else goes to the API server.
type cachedClient struct {
	client.Client
	cache *Cache
	read  client.Reader
}

// NewClient returns the client of a process that reads through cache and
// writes (and reads what the cache does not hold) through api, as a
// controller-runtime manager's client does.
func NewClient(cache *Cache, api client.Client) client.Client {
	return &cachedClient{Client: api, cache: cache, read: cache.o.Store.AdminClient()}
}

// Get reads obj from the cache when it holds obj's kind. With
// client.UnsafeDisableDeepCopy the cache's object is not copied, as a
// controller-runtime cache does it: obj gets its fields, and shares its
// maps, slices and pointers with the cache (apiserver.Shared), so the
// caller must copy before it modifies any of them.
func (c *cachedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if c.cache.Holds(obj) {
		if len(opts) > 0 && NoDeepCopy(opts) {
			return c.read.Get(ctx, key, obj, SharedGet...)
		}
		return c.read.Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// SharedGet are the options of a Get of a shared object
// (apiserver.Shared), made once: a variadic argument of the call escaped
// to the heap at every such read. Callees only read them.
var SharedGet = []client.GetOption{apiserver.Shared}

// NoDeepCopy reports whether opts ask for client.UnsafeDisableDeepCopy,
// as client.GetOptions.ApplyOptions would set it (the last option that
// says wins), but by the options' types: the GetOptions that
// ApplyOptions fills escaped to the heap at every read of a shared
// object.
func NoDeepCopy(opts []client.GetOption) bool {
	disable := false
	for _, o := range opts {
		switch o := o.(type) {
		case client.UnsafeDisableDeepCopyOption:
			disable = bool(o)
		case *client.GetOptions:
			if o.UnsafeDisableDeepCopy != nil {
				disable = *o.UnsafeDisableDeepCopy
			}
		}
	}
	return disable
}

// List lists from the cache when it holds the list's kind.
func (c *cachedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.cache.HoldsList(list) {
		return c.read.List(ctx, list, opts...)
	}
	return c.Client.List(ctx, list, opts...)
}
