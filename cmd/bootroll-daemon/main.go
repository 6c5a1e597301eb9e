// Command bootroll-daemon is bootroll's node daemon: one runs on each node,
// stages and boots the OS image the node's BootcNode asks for with the bootc
// CLI, and reports what the host runs in that BootcNode's status.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/internal/kubeconfig"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/nodedaemon/bootc"
	"github.com/bootroll/bootroll/nodedaemon/cri"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

const usage = `bootroll-daemon is bootroll's node daemon. Run one on every node (a
DaemonSet); it acts only for its own node.

It watches the BootcNode named like its node. When the controller sets
spec.desiredImage (a digest reference) it downloads and stages the image
(bootc switch --download-only), which does not disturb workloads. When
spec.bootOrder names that same image (and is not withdrawn) it records the
reboot in the BootcNode's status and then boots the staged image (bootc
switch --from-downloaded; systemctl reboot), but only while its Node is
cordoned with bootroll's slot marker (annotation bootroll.dev/slot) or
carries the startup taint bootroll.dev/os-not-ready; otherwise it waits and
says why in status.daemon.lastError. An order that names another image is
void. A rollback order (bootOrder.rollback) names the image the node runs
and failed on: the daemon leaves it for the rollback deployment (bootc
rollback; systemctl reboot) and does not stage it again. It never reboots twice for one image:
after a reboot that did not bring the image up it reports an error instead.
It reports the booted, staged and rollback deployments and its own state in
status.booted, status.staged, status.rollbackImage and status.daemon, and
writes nothing else.

Permissions:
  Kubernetes (its service account), on bootroll.dev bootcnodes:
    get, list, watch            (the cache lists and watches only its own
                                 object, with fieldSelector metadata.name)
    patch on bootcnodes/status  (JSON merge patches of the fields above)
  on nodes: get                 (its own Node, read uncached before a reboot)
  RBAC cannot name each node's object in one DaemonSet role; to keep a
  daemon to its own BootcNode, add an admission policy that compares the
  object's name with the service account token's node name
  (user extra authentication.kubernetes.io/node-name).
  Host: bootc and systemctl must act on the host, so the daemon runs them
  as root on the host's root filesystem with the host's /run (systemd's bus)
  and /sysroot: in a privileged pod with hostPID and the host's / mounted at
  DIR, --host-root DIR runs them chrooted into DIR (the image needs nothing
  but the daemon); --host-exec runs them through nsenter into PID 1's mount
  namespace instead (the image must then have nsenter). It reads the kernel
  boot ID to tell that a reboot happened. For pinned images it talks to the
  container runtime's CRI socket (root's): --cri-socket=auto finds it below
  --host-root. Without a runtime that answers it keeps staging and booting
  OS images and reports PrefetchAvailable=False (reason RuntimeUnavailable)
  in status.daemon.conditions.

Usage:
  bootroll-daemon --node-name NODE [flags]

Flags:
`

// options are the daemon's flags.
type options struct {
	nodeName    string
	kubeconfig  string
	bootIDPath  string
	resync      time.Duration
	metricsAddr string
	probeAddr   string
	hostExec    bool
	hostRoot    string
	zap         zap.Options
	// Pinned images.
	criSocket      string
	stagingReserve resource.Quantity
	controlPlane   bool
	stageFS        string
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bootroll-daemon: %v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts.zap)))
	if err := run(ctrl.SetupSignalHandler(), opts); err != nil {
		ctrl.Log.WithName("setup").Error(err, "bootroll-daemon stopped")
		os.Exit(1)
	}
}

// parseFlags reads the flags without touching the process-wide flag set.
func parseFlags(args []string, out io.Writer) (options, error) {
	o := options{stagingReserve: *resource.NewQuantity(nodedaemon.DefaultStagingReserve, resource.BinarySI)}
	fs := flag.NewFlagSet("bootroll-daemon", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "Name of this node and of its BootcNode (default $NODE_NAME, set it from the pod's spec.nodeName).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty means in-cluster config or $KUBECONFIG.")
	fs.StringVar(&o.bootIDPath, "bootid-path", bootc.DefaultBootIDPath, "File holding the kernel's boot ID.")
	fs.DurationVar(&o.resync, "resync", nodedaemon.DefaultResync, "How often to look at the host when nothing else asks (the host can change without an API event); 0 disables.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints; 0 disables them.")
	fs.StringVar(&o.criSocket, "cri-socket", criAuto, "CRI socket of the container runtime, for pinned images (PinnedImageSets), as the daemon sees it. \"auto\" uses the first that answers of "+strings.Join(cri.WellKnownSockets, ", ")+" (below --host-root when set); empty disables prefetching. While no runtime answers, the daemon keeps running, reports PrefetchAvailable=False in its BootcNode's status.daemon.conditions and looks again with a backoff.")
	fs.Func("staging-reserve", "Image-filesystem space pinned-image pulls leave free for the next OS image staging, a quantity (default 8Gi).", func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return fmt.Errorf("%q is not a non-negative quantity such as 8Gi", v)
		}
		o.stagingReserve = q
		return nil
	})
	fs.StringVar(&o.stageFS, "stage-fs", "/sysroot", "A path on the filesystem bootc stages OS images to; staging is refused when the image does not fit there twice.")
	fs.BoolVar(&o.controlPlane, "control-plane", false, "This is a control-plane node: pull pinned images one at a time.")
	fs.BoolVar(&o.hostExec, "host-exec", false, "Run bootc and systemctl through nsenter in the mount namespace of PID 1 (a pod with hostPID); off when the daemon already runs in the host's mount namespace.")
	fs.StringVar(&o.hostRoot, "host-root", "", "Run bootc and systemctl chrooted into this directory, the host's / mounted in the pod (with hostPID); the daemon's image needs no host tools.")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (run with --help)", fs.Args())
	}
	if o.nodeName == "" {
		return o, errors.New("--node-name is required: pass it, or set $NODE_NAME (in a DaemonSet, from the downward API field spec.nodeName)")
	}
	if o.hostExec && o.hostRoot != "" {
		return o, errors.New("--host-exec and --host-root are two ways to reach the host's tools: pass one")
	}
	if o.resync < 0 {
		return o, fmt.Errorf("--resync %v: must not be negative", o.resync)
	}
	return o, nil
}

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := kubeconfig.Load(o.kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// The daemon sees one object: its own BootcNode.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.BootcNode{}: {Field: fields.OneTermEqualSelector("metadata.name", o.nodeName)},
		}},
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	// A finished stage or pull wakes the loop at once instead of at the
	// next poll: the wake watch of nodedaemon.Watches, fed by a channel.
	watches := nodedaemon.Watches(o.nodeName)
	wakeC := make(chan event.GenericEvent, 1)
	var wakeEv event.GenericEvent
	for _, w := range watches {
		if w.Wake {
			wakeEv = event.GenericEvent{Object: w.Object}
		}
	}
	var runner bootc.Runner = bootc.ExecRunner{}
	if o.hostExec {
		runner = nsenterRunner{bootc.ExecRunner{}}
	}
	if o.hostRoot != "" {
		runner = bootc.ChrootRunner{Root: o.hostRoot}
	}
	host := nodedaemon.HostEdges{
		Bootc:  runner,
		BootID: func() (string, error) { return bootc.ReadBootID(o.bootIDPath) },
		Statfs: func(context.Context) (int64, error) {
			sp, err := cri.Statfs(o.stageFS)
			return sp.Available, err
		},
		Sizes:   prefetch.RegistrySizer{},
		Context: ctx,
		Wake: func() {
			select {
			case wakeC <- wakeEv:
			default: // a wake-up is already pending
			}
		},
	}
	if sockets := criSockets(o.criSocket, o.hostRoot); len(sockets) > 0 {
		// Not dialed here: a node whose runtime does not answer (yet)
		// still stages and boots OS images; the prefetch reports it.
		crilog := ctrl.Log.WithName("cri")
		finder := &cri.Finder{
			Sockets: sockets,
			Clock:   clock.RealClock{}, // edge: paces the searches for the runtime
			OnFound: func(rt cri.Runtime, skipped []cri.Skipped) {
				crilog.Info("container runtime found", "socket", rt.Socket, "runtime", rt.Name, "version", rt.Version, "skipped", skippedList(skipped))
			},
			OnFailed: func(err error, retryIn time.Duration) {
				crilog.Info("no container runtime answers: pinned images wait, OS updates go on", "error", err.Error(), "retryIn", retryIn)
			},
		}
		defer finder.Close()
		host.Images = &prefetch.CRIImages{Finder: finder}
	}
	daemon := nodedaemon.Wire(nodedaemon.Edges{
		Node:   o.nodeName,
		Client: mgr.GetClient(),
		// Its own Node (one GET before a reboot) and pull secrets: read
		// one by one, never cached or listed.
		APIReader: mgr.GetAPIReader(),
		Clock:     clock.RealClock{}, // edge: production time
		Log:       ctrl.Log.WithName("daemon"),
		Host:      host,
	}, nodedaemon.Config{
		Resync:         o.resync,
		StagingReserve: o.stagingReserve.Value(),
		ControlPlane:   o.controlPlane,
	})

	b := ctrl.NewControllerManagedBy(mgr).
		Named("bootroll-daemon").
		// One host, one action at a time.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1})
	for _, w := range watches {
		switch {
		case w.Wake:
			b = b.WatchesRawSource(source.Channel(wakeC, w.Handler))
		case w.For:
			b = b.For(w.Object, builder.WithPredicates(w.Predicates...))
		default:
			b = b.Watches(w.Object, w.Handler, builder.WithPredicates(w.Predicates...))
		}
	}
	if err := b.Complete(daemon); err != nil {
		return fmt.Errorf("create controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting", "node", o.nodeName, "resync", o.resync, "hostExec", o.hostExec, "hostRoot", o.hostRoot, "criSocket", o.criSocket)
	return mgr.Start(ctx)
}

// criAuto is --cri-socket's default: find the runtime's socket.
const criAuto = "auto"

// criSockets are the sockets the daemon tries for --cri-socket flag: none
// when it is empty, the well-known ones (below hostRoot) for "auto", else
// the one given.
func criSockets(flag, hostRoot string) []string {
	switch flag {
	case "":
		return nil
	case criAuto:
		return cri.Candidates(hostRoot)
	}
	return []string{flag}
}

func skippedList(skipped []cri.Skipped) []string {
	out := make([]string, 0, len(skipped))
	for _, s := range skipped {
		out = append(out, s.Socket+": "+s.Reason)
	}
	return out
}

// nsenterRunner runs host commands in the mount namespace of PID 1, for a
// daemon in a pod with hostPID.
type nsenterRunner struct{ bootc.Runner }

func (r nsenterRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return r.Runner.Run(ctx, "nsenter", append([]string{"--target", "1", "--mount", "--", name}, args...)...)
}
