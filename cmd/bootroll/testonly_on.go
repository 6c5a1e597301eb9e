//go:build bootroll_testonly

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller"
	ctrlopts "github.com/bootroll/bootroll/controller/options"
	"github.com/bootroll/bootroll/controller/resolve"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/clusterrun"
)

// addTestOnlyCommands adds the hidden testonly-controller command: this
// build has the bootroll_testonly tag.
func addTestOnlyCommands(root *cobra.Command, _, stderr io.Writer) {
	root.AddCommand(&cobra.Command{
		Use:    clusterrun.TestOnlyCommand + " --test-only=NAME,... [bootroll-controller flags]",
		Short:  "bootroll-controller with deliberately broken modes (bootroll.testOnly), for negative controls on a cluster",
		Hidden: true,
		// The controller's own flags, parsed as bootroll-controller
		// parses them (stdlib flag, with zap's).
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			o, err := parseTestOnlyControllerFlags(args, stderr)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			if err != nil {
				fmt.Fprintln(stderr, "bootroll "+clusterrun.TestOnlyCommand+":", err)
				return exitError{exitBadInput}
			}
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
			if err := runTestOnlyController(o); err != nil {
				ctrl.Log.WithName("setup").Error(err, "bootroll "+clusterrun.TestOnlyCommand+" stopped")
				return exitError{exitViolated}
			}
			return nil
		},
	})
}

// testOnlyControllerOptions are bootroll-controller's flags plus the
// broken modes.
type testOnlyControllerOptions struct {
	kubeconfig  string
	metricsAddr string
	probeAddr   string
	leaderElect bool
	namespace   string
	insecure    bool
	zap         zap.Options
	testOnly    rollout.TestOnly
	names       []string
}

func parseTestOnlyControllerFlags(args []string, out io.Writer) (testOnlyControllerOptions, error) {
	var o testOnlyControllerOptions
	var list string
	fs := flag.NewFlagSet(clusterrun.TestOnlyCommand, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&list, "test-only", "", "comma-separated bootroll.testOnly settings (scenario schema names) of the controller to turn on (required)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "as bootroll-controller --kubeconfig")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "as bootroll-controller")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "as bootroll-controller")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "as bootroll-controller")
	fs.StringVar(&o.namespace, "namespace", "bootroll-system", "as bootroll-controller")
	fs.BoolVar(&o.insecure, "insecure-registry", false, "as bootroll-controller")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if list == "" {
		return o, fmt.Errorf("--test-only is required: without it run bootroll-controller")
	}
	t, err := parseTestOnly(list)
	if err != nil {
		return o, err
	}
	to, daemon := controllerTestOnly(t)
	if len(daemon) > 0 {
		return o, fmt.Errorf("--test-only %q: %s break the node daemon, not the controller", list, strings.Join(daemon, ", "))
	}
	o.testOnly, o.names = to, testOnlyNames(t)
	return o, nil
}

// runTestOnlyController is cmd/bootroll-controller's run with
// Options.TestOnly set: the same scheme, cache, client and manager
// options, and controller.Setup.
func runTestOnlyController(o testOnlyControllerOptions) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := daemonRestConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   ctrlopts.CacheOptions(),
		Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "bootroll-controller.bootroll.dev",
		LeaderElectionNamespace: o.namespace,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	err = controller.Setup(mgr, ctrlopts.Options{
		Clock:           clock.RealClock{}, // edge: production time
		Resolver:        &resolve.Registry{Insecure: o.insecure},
		Recorder:        mgr.GetEventRecorderFor("bootroll-controller"), //nolint:staticcheck // as bootroll-controller
		Metrics:         ctrlopts.NewMetrics(metrics.Registry),
		SecretNamespace: o.namespace,
		TestOnly:        o.testOnly,
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting with deliberately broken modes", "testOnly", strings.Join(o.names, ","))
	return mgr.Start(ctrl.SetupSignalHandler())
}
