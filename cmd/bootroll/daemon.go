package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/bootroll/bootroll/internal/kubeconfig"
	"github.com/bootroll/bootroll/nodedaemon"
	"github.com/bootroll/bootroll/sim/hostmode"
	"github.com/bootroll/bootroll/sim/scenario"
)

type daemonFlags struct {
	simulate   string
	nodes      string
	node       string
	kubeconfig string
	seed       uint64
	resync     time.Duration
	seedSet    bool
}

func newDaemonCmd(stdout, stderr io.Writer) *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "daemon --simulate-hosts FILE (--nodes SELECTOR | --node NAME) [--kubeconfig K]",
		Short: "Run the real node daemon for many simulated hosts against a real API server",
		Long: `Host mode: play the hosts of Nodes of a real cluster (the local control
plane of ` + "`bootroll cluster up`" + `, or kind) with the real node daemon code.
For each played Node it runs the daemon that bootroll-daemon runs
(nodedaemon.Wire: the production bootc adapters and daemon loop) against
the API server, and simulates only what that code execs and reads on the
host, from the scenario FILE:

  images:  the OS images there are (refs, digests and sizes); staging any
           other fails as an unknown manifest would
  host:    staging takes size / pullBandwidth + a draw of stageOverhead;
           a reboot takes a draw of reboot; the daemon starts a draw of
           daemonStartup after a boot
  images[].failsToBoot, and the faults bootFailure and longReboot (timed
           from this command's start): boots that fall back, crash-loop,
           never get Ready, flap or come up without a network

A reboot annotates the Node bootroll.dev/rebooting: "true" (the KWOK stage of
bootroll cluster up makes it NotReady meanwhile), stops the daemon, and
after the reboot sets the Node's status.nodeInfo.bootID to a new boot ID,
removes the annotation and starts a new daemon. Each node's first image is
what the Node says (annotation hostmode.bootroll.dev/booted, written by
host mode), else the bootImage of the scenario node group it matches (by
labels, or by name <group>-<i>), else of its Karpenter NodePool's node
class, else the scenario's first image. Randomness comes from --seed and
the node's name, so one seed gives each node the same draws.

--nodes plays every Node the label selector matches, from when it appears
until it is gone (Karpenter creates and deletes them); --node plays one
(in a DaemonSet pod: --node=$NODE_NAME). Pinned images (PinnedImageSets)
are not simulated. See docs/host-mode.md.

It runs until interrupted. Exit status: 0 after SIGINT or SIGTERM, 1 when
it fails, 2 on bad input.`,
		Example: `  KUBECONFIG=$(bootroll cluster up | tail -1)
  bootroll daemon --simulate-hosts scenarios/basic.yaml --nodes kwok.x-k8s.io/node=fake --kubeconfig $KUBECONFIG`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.seedSet = cmd.Flags().Changed("seed")
			return runDaemon(stderr, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.simulate, "simulate-hosts", "", "scenario file whose images, host timings and boot failures the simulated hosts follow (required)")
	fl.StringVar(&f.nodes, "nodes", "", "label selector of the Nodes to play, each while it exists")
	fl.StringVar(&f.node, "node", "", "the one Node to play (default $NODE_NAME when --nodes is not given)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, or in-cluster config)")
	fl.Uint64Var(&f.seed, "seed", 0, "seed of the hosts' random draws (default the scenario's seed)")
	fl.DurationVar(&f.resync, "resync", nodedaemon.DefaultResync, "how often each daemon looks at its host when nothing else asks, as bootroll-daemon --resync")
	return cmd
}

// daemonInput is the checked command line of bootroll daemon.
type daemonInput struct {
	sc       *scenario.Scenario
	selector labels.Selector
	node     string
	seed     uint64
}

// checkDaemonFlags loads the scenario and checks the flags; errors name
// the flag and value at fault.
func checkDaemonFlags(f daemonFlags, getenv func(string) string) (daemonInput, error) {
	var in daemonInput
	if f.simulate == "" {
		return in, fmt.Errorf("--simulate-hosts is required: the scenario file whose images and host timings the simulated hosts follow")
	}
	sc, err := scenario.Load(f.simulate)
	if err != nil {
		return in, fmt.Errorf("--simulate-hosts %s: %w", f.simulate, err)
	}
	in.sc, in.seed = sc, sc.Seed
	if f.seedSet {
		in.seed = f.seed
	}
	if f.resync < 0 {
		return in, fmt.Errorf("--resync %v: must not be negative", f.resync)
	}
	switch {
	case f.nodes != "" && f.node != "":
		return in, fmt.Errorf("--nodes %q and --node %q: give one (a selector of Nodes, or one Node)", f.nodes, f.node)
	case f.nodes != "":
		sel, err := labels.Parse(f.nodes)
		if err != nil {
			return in, fmt.Errorf("--nodes %q: not a label selector: %w", f.nodes, err)
		}
		if sel.Empty() {
			return in, fmt.Errorf("--nodes %q: selects every Node; name the simulated ones (e.g. kwok.x-k8s.io/node=fake)", f.nodes)
		}
		in.selector = sel
	case f.node != "":
		in.node = f.node
	case getenv("NODE_NAME") != "":
		in.node = getenv("NODE_NAME")
	default:
		return in, fmt.Errorf("give the Nodes to play: --nodes SELECTOR, --node NAME, or $NODE_NAME")
	}
	return in, nil
}

func runDaemon(stderr io.Writer, f daemonFlags) error {
	in, err := checkDaemonFlags(f, os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "bootroll daemon:", err)
		return exitError{exitBadInput}
	}
	cfg, err := kubeconfig.Load(f.kubeconfig)
	if err != nil {
		fmt.Fprintln(stderr, "bootroll daemon:", err)
		return exitError{exitBadInput}
	}
	log := zap.New(zap.WriteTo(stderr))
	ctrl.SetLogger(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // edge: the CLI's signals
	defer stop()
	err = hostmode.Run(ctx, hostmode.Options{
		Scenario: in.sc, Seed: in.seed, Selector: in.selector, Node: in.node,
		Config: cfg, Clock: clock.RealClock{}, // edge: host mode runs on wall-clock time
		Log: log.WithName("hostmode"), Resync: f.resync,
		Ready: func() { log.WithName("hostmode").Info("ready: watching Nodes and BootcNodes") },
	})
	if err != nil {
		fmt.Fprintln(stderr, "bootroll daemon:", err)
		return exitError{exitViolated}
	}
	return nil
}
