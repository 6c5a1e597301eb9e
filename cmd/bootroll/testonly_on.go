//go:build bootroll_testonly

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bootroll/bootroll/controller"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/kubeconfig"
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
// Options.TestOnly set: the same controller.Run.
func runTestOnlyController(o testOnlyControllerOptions) error {
	cfg, err := kubeconfig.Load(o.kubeconfig)
	if err != nil {
		return err
	}
	return controller.Run(cfg, controller.RunConfig{
		MetricsAddr: o.metricsAddr, ProbeAddr: o.probeAddr, LeaderElect: o.leaderElect,
		Namespace: o.namespace, InsecureRegistry: o.insecure, TestOnly: o.testOnly,
		StartMessage: "starting with deliberately broken modes", StartValues: []any{"testOnly", strings.Join(o.names, ",")},
	})
}
