// Command bootroll-controller rolls bootc OS images out to the nodes of
// each BootcNodePool: a few nodes at a time it stages, cordons, drains
// (honouring PodDisruptionBudgets), reboots, verifies and uncordons them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/internal/kubeconfig"
)

const usage = `bootroll-controller rolls bootc OS images out to Kubernetes nodes.

For each BootcNodePool it keeps one BootcNode per selected Node, resolves
the pool's image to a digest, lets nodes stage it (at most rollout.maxStaging
at once), and gives at most rollout.maxUnavailable nodes a reboot slot:
cordon, drain through the Eviction API, ask the node daemon to boot the image,
wait until the node runs the digest and is Ready, uncordon. Every step is
recorded on the BootcNode, so the controller can be restarted at any time.

Permissions: see config/rbac/role.yaml (generated from the code).

Usage:
  bootroll-controller [flags]

Flags:
`

// options are the controller's flags.
type options struct {
	kubeconfig  string
	metricsAddr string
	probeAddr   string
	leaderElect bool
	namespace   string
	insecure    bool
	zap         zap.Options
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootroll-controller:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if err := run(o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "bootroll-controller stopped")
		os.Exit(1)
	}
}

func parseFlags(args []string, out io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bootroll-controller", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty means $KUBECONFIG, then the in-cluster config.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader so only one replica acts (use with more than one replica).")
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "bootroll-system"), "Namespace of the pools' imagePullSecrets and of the leader lease.")
	fs.BoolVar(&o.insecure, "insecure-registry", false, "Allow plain-HTTP registries when resolving tags (test registries only).")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q (run with --help)", fs.Args())
	}
	return o, nil
}

func run(o options) error {
	cfg, err := kubeconfig.Load(o.kubeconfig)
	if err != nil {
		return err
	}
	return controller.Run(cfg, controller.RunConfig{
		MetricsAddr: o.metricsAddr, ProbeAddr: o.probeAddr, LeaderElect: o.leaderElect,
		Namespace: o.namespace, InsecureRegistry: o.insecure,
		StartMessage: "starting", StartValues: []any{"namespace", o.namespace, "leaderElect", o.leaderElect},
	})
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
