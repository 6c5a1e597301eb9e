package nodedaemon

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/nodedaemon/bootc"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// This file is the one description of how a node daemon is put together:
// which edges it reaches (Edges, HostEdges), how the production host stack
// and prefetch runner are built over them (Adapters), the Daemon over
// those (Wire), and what wakes its loop (Watches). The daemon binary
// (cmd/bootroll-daemon) passes the real edges and registers the watches
// with a controller-runtime manager; the twin (sim/twin over sim/cluster)
// passes simulated edges and delivers its API server's events through the
// same watches. A field or edge added here reaches both.

// Edges are what the daemon of one node reaches outside its own logic.
type Edges struct {
	// Node is the node's name, and its BootcNode's.
	Node string
	// Client reads (cached) and writes the node's own BootcNode.
	Client client.Client
	// APIReader reads uncached: the node's own Node before a reboot (one
	// GET, no cluster-wide Node informer) and pull secrets, one by one,
	// never listed.
	APIReader client.Reader
	// Clock is the daemon's only source of time.
	Clock clock.PassiveClock
	// Log is the daemon's logger.
	Log logr.Logger
	// Host are the host's edges.
	Host HostEdges
}

// HostEdges are the edges of the host: what the production adapters
// (BootcHost, SpaceCheckedHost, AsyncHost, prefetch.Runner) exec, read and
// call. The daemon binary passes the real ones; the twin's cluster model
// (sim/cluster) passes simulated ones.
type HostEdges struct {
	// Bootc runs the bootc and systemctl commands on the host.
	Bootc bootc.Runner
	// BootID reads the kernel's boot ID.
	BootID func() (string, error)
	// Statfs returns the free bytes of the filesystem bootc stages OS
	// images to.
	Statfs func(ctx context.Context) (available int64, err error)
	// Sizes reads an image's compressed size from its manifest in the
	// registry, for the space check before staging an OS image and for
	// pinned images.
	Sizes prefetch.Sizer
	// StageSize, when set, is the size lookup of the space check instead
	// of Sizes without credentials; the twin's registry answers OS images
	// and pinned images apart.
	StageSize func(ctx context.Context, image string) (int64, error)
	// Images is the container runtime's CRI image service; nil disables
	// pinned images (no prefetch runner).
	Images prefetch.ImageService
	// Context bounds background stages and pulls (cancel it on shutdown);
	// nil lets them run until they end.
	Context context.Context
	// Wake is called when a background stage or pull ends, so the loop
	// looks at the outcome at once instead of at its next requeue; it
	// must not block. It delivers the wake watch of Watches.
	Wake func()

	// The twin's seams; production leaves them nil.

	// GoStage is AsyncHost.Go: it runs a stage on virtual time instead of
	// in a goroutine.
	GoStage func(image string, stage func())
	// GoPull is prefetch.Runner.Go: it runs a pull on virtual time instead
	// of in a goroutine.
	GoPull func(a prefetch.Action, pull func()) (stop func())
	// StageEnded, when set, is told how each background stage ended
	// (err nil: staged), before Wake.
	StageEnded func(image string, err error)
	// Hold, when set, is given the adapters Wire built and returns what
	// the loop drives instead: the twin's hold of the process, whose calls
	// fail once it is dead, and its crash gate. p is nil when Images is.
	Hold func(h *AsyncHost, p *prefetch.Runner) (Host, Prefetcher)
}

// Config are the daemon's settings (the binary's flags).
type Config struct {
	// Resync is Daemon.Resync: 0 requeues only when Step asks, so pass
	// DefaultResync for the binary's default.
	Resync time.Duration
	// StagingReserve is Daemon.StagingReserve.
	StagingReserve int64
	// ControlPlane is Daemon.ControlPlane.
	ControlPlane bool
	// TestOnly is Daemon.TestOnly; production leaves it zero.
	TestOnly TestOnly
}

// Adapters builds the production host stack over e,
// AsyncHost{SpaceCheckedHost{BootcHost{bootc.Client}}}, and the prefetch
// runner (nil when e.Images is nil), without credentials for pulls. Wire
// calls it for every daemon; the twin's cluster model calls it alone for
// its tests of the host.
func Adapters(e HostEdges) (*AsyncHost, *prefetch.Runner) {
	size := e.StageSize
	if size == nil && e.Sizes != nil {
		sizes := e.Sizes
		size = func(ctx context.Context, image string) (int64, error) { return sizes.Size(ctx, image, nil) }
	}
	var inner Host = SpaceCheckedHost{
		Host:      BootcHost{Bootc: &bootc.Client{Runner: e.Bootc}, BootID: e.BootID},
		Size:      size,
		Available: e.Statfs,
	}
	if e.StageEnded != nil {
		inner = stageEnded{Host: inner, ended: e.StageEnded}
	}
	h := &AsyncHost{Host: inner, Context: e.Context, OnDone: e.Wake, Go: e.GoStage}
	if e.Images == nil {
		return h, nil
	}
	return h, &prefetch.Runner{
		Images:  e.Images,
		Sizes:   e.Sizes,
		Context: e.Context,
		OnDone:  e.Wake,
		Go:      e.GoPull,
	}
}

// Wire builds the daemon of node e.Node over its edges: the host stack and
// prefetch runner of Adapters, pulls authenticated with the pull secrets
// that e.APIReader reads, and the Daemon with cfg. It is the only place
// outside tests that calls New.
func Wire(e Edges, cfg Config) *Daemon {
	host, runner := Adapters(e.Host)
	if runner != nil {
		runner.Credentials = PullSecrets(e.APIReader)
	}
	var loopHost Host = host
	var pf Prefetcher
	if runner != nil {
		pf = runner // a nil *Runner would be a non-nil Prefetcher
	}
	if e.Host.Hold != nil {
		loopHost, pf = e.Host.Hold(host, runner)
	}
	d := New(e.Node, e.Client, loopHost, e.Clock, e.Log)
	d.Resync = cfg.Resync
	d.NodeReader = e.APIReader
	d.Prefetch = pf
	d.StagingReserve = cfg.StagingReserve
	d.ControlPlane = cfg.ControlPlane
	d.TestOnly = cfg.TestOnly
	return d
}

// PullSecrets returns the credentials of a PinnedImageSet's pull secret,
// read with r (nil for a set without one).
func PullSecrets(r client.Reader) prefetch.Credentials {
	return func(ctx context.Context, set v1alpha1.NodePinnedImageSet, ref string) (*cri.Auth, error) {
		if set.PullSecret == nil {
			return nil, nil
		}
		var sec corev1.Secret
		key := client.ObjectKey{Namespace: set.PullSecret.Namespace, Name: set.PullSecret.Name}
		if err := r.Get(ctx, key, &sec); err != nil {
			return nil, fmt.Errorf("read pull secret %s of PinnedImageSet %s: %w", key, set.Name, err)
		}
		return cri.AuthForSecret(sec, ref)
	}
}

// stageEnded tells HostEdges.StageEnded how each stage ended.
type stageEnded struct {
	Host
	ended func(image string, err error)
}

func (s stageEnded) Stage(ctx context.Context, image string) error {
	err := s.Host.Stage(ctx, image)
	s.ended(image, err)
	return err
}

// Watch is one source of the daemon loop's requests: events of Object's
// type that pass Predicates, which Handler maps to requests; For marks the
// loop's primary type. A Wake watch is no API watch: each call of
// HostEdges.Wake hands Handler a generic event for Object.
type Watch struct {
	Object     client.Object
	For        bool
	Predicates []predicate.Predicate
	Handler    handler.EventHandler
	Wake       bool
}

// Watches is the one list of what wakes the daemon of node: spec changes
// of its own BootcNode (WatchPredicates), and the end of a background
// stage or pull (HostEdges.Wake). The daemon binary registers each with
// its manager; the twin delivers its API server's events and its host's
// wake-ups through the same list.
func Watches(node string) []Watch {
	self := &handler.EnqueueRequestForObject{}
	return []Watch{
		{Object: &v1alpha1.BootcNode{}, For: true, Predicates: WatchPredicates(node), Handler: self},
		{Object: &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: node}}, Handler: self, Wake: true},
	}
}
