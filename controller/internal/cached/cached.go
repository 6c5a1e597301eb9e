// Package cached reads the pools as the controller's cache holds them,
// without copies, for the reconcilers and the watch mappings.
package cached

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/readopts"
)

// Pools lists the pools as the cache holds them, not copied: the
// caller must not change them. A plain Get would deep-copy a pool's slot table
// (maxUnavailable entries) on every node event; listing the few pools
// without copies does not grow with the pool.
func Pools(ctx context.Context, c client.Reader) ([]v1alpha1.BootcNodePool, error) {
	var pools v1alpha1.BootcNodePoolList
	if err := c.List(ctx, &pools, readopts.NoCopyList...); err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return pools.Items, nil
}

// Pool returns the pool named name as the cache holds it, not copied
// (client.UnsafeDisableDeepCopy: the caller gets the cached pool's maps
// and slices and must not change them), or nil when there is none. One
// Get by name reads no other pool and builds no list.
func Pool(ctx context.Context, c client.Reader, name string) (*v1alpha1.BootcNodePool, error) {
	if name == "" {
		return nil, nil // a Get needs a name; no pool has none
	}
	var pool v1alpha1.BootcNodePool
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &pool, readopts.NoCopyGet...); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get pool %s: %w", name, err)
	}
	return &pool, nil
}

// Find returns the pool named name in pools, or nil.
func Find(pools []v1alpha1.BootcNodePool, name string) *v1alpha1.BootcNodePool {
	for i := range pools {
		if pools[i].Name == name {
			return &pools[i]
		}
	}
	return nil
}
