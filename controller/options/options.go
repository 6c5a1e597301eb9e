// Package options holds what the controller's reconcilers are built
// from: their edges (clock, resolver, event recorder, metrics, API reader)
// and settings. Production and the twin fill it differently; the
// reconcilers read it the same way.
package options

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/controller/poolfeed"
	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/controller/rollout"
)

// Recorder records Kubernetes Events; client-go's record.EventRecorder
// satisfies it, and the twin records into its trace.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Options are the edges and settings shared by the reconcilers.
type Options struct {
	Clock    clock.PassiveClock
	Resolver resolve.Resolver
	Recorder Recorder
	Metrics  *Metrics
	// SecretNamespace is where pools' imagePullSecrets live.
	SecretNamespace string
	// APIReader reads what must not be cached: pull Secrets (a cache would
	// watch every Secret) and Karpenter NodeClaims (whose CRD may come and
	// go). nil means the client.
	APIReader client.Reader
	// Feed is how the pool reconciler learns of BootcNode and Node
	// changes: the pool controller's watch handlers (controller.Controllers)
	// fill it. controller.Setup makes one when nil; the twin passes the
	// same feed to controller.Controllers and to the reconcilers.
	Feed     *poolfeed.Feed
	TestOnly rollout.TestOnly
}

// Reader is what reads past the cache: APIReader, or c when none is set.
func (o Options) Reader(c client.Client) client.Reader {
	if o.APIReader != nil {
		return o.APIReader
	}
	return c
}
