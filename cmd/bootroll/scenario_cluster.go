package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/sim/clusterrun"
	"github.com/bootroll/bootroll/sim/scenario"
)

// The targets of scenario run.
const (
	targetTwin    = "twin"
	targetCluster = "cluster"
)

// clusterTarget holds the flags of `scenario run --target cluster`.
type clusterTarget struct {
	target     string
	kubeconfig string
	clusterDir string
	controller string
	workDir    string
	repo       string
	daemonBin  string
	testOnly   string
	daemon     string
	chaosMesh  string
	apiServer  string
}

func addClusterTargetFlags(fl *pflag.FlagSet, c *clusterTarget) {
	fl.StringVar(&c.target, "target", targetTwin, "where to run: twin (the deterministic simulator) or cluster (a real API server, see docs/cluster-target.md)")
	fl.StringVar(&c.kubeconfig, "kubeconfig", "", "with --target cluster: the cluster's kubeconfig (default: start a local cluster for the run and stop it at the end)")
	fl.StringVar(&c.clusterDir, "cluster-dir", "", "with --target cluster: the directory of a running `bootroll cluster up` to use")
	fl.StringVar(&c.controller, "controller", "process", "with --target cluster: process (build and start the controller, restart it for faults) or external (one already runs against the cluster)")
	fl.StringVar(&c.workDir, "work-dir", "", "with --target cluster: directory for the run's logs, kubeconfigs and local cluster (default: a new temporary directory, kept)")
	fl.StringVar(&c.daemonBin, "daemon-bin", "", "with --target cluster: the bootroll binary whose `daemon --simulate-hosts` plays the nodes (default: this one)")
	fl.StringVar(&c.testOnly, "testonly-bin", "", "with --target cluster --negative-controls: a bootroll built with -tags "+clusterrun.TestOnlyTag+" whose hidden "+clusterrun.TestOnlyCommand+" command is the controller of controls that set bootroll.testOnly (default: go build it into the checkout's bin/bootroll-testonly)")
	fl.StringVar(&c.daemon, "daemon", "process", "with --target cluster: process (start the host-mode daemon that plays the scenario's hosts) or external (daemons already run in the cluster, e.g. kind/overlay's host-mode DaemonSet; what only the run's own daemon can do is skipped by name)")
	fl.StringVar(&c.chaosMesh, "chaos-mesh", string(clusterrun.ChaosAuto), "with --target cluster: inject controller, daemon and node faults and API latency as Chaos Mesh objects: auto (when the controller is external and the cluster serves chaos-mesh.org/v1alpha1), on (required), off")
	fl.StringVar(&c.apiServer, "api-server-address", "", "with --chaos-mesh: the API server's address as the nodes reach it, the target of partitions and latency (default: the kubernetes Service's endpoint)")
	fl.StringVar(&c.repo, "repo", "", "with --target cluster: the bootroll checkout (CRDs, bin/k8s, the controller's source; default: the current directory or the first parent that is one)")
}

// validate checks the target flags.
func (c *clusterTarget) validate() error {
	switch c.target {
	case targetTwin:
		if c.kubeconfig != "" || c.clusterDir != "" {
			return fmt.Errorf("--kubeconfig and --cluster-dir need --target cluster")
		}
		return nil
	case targetCluster:
	default:
		return fmt.Errorf("--target %q: want twin or cluster", c.target)
	}
	if c.kubeconfig != "" && c.clusterDir != "" {
		return fmt.Errorf("--kubeconfig and --cluster-dir: give one")
	}
	if c.controller != "process" && c.controller != "external" {
		return fmt.Errorf("--controller %q: want process or external", c.controller)
	}
	if c.daemon != "process" && c.daemon != "external" {
		return fmt.Errorf("--daemon %q: want process or external", c.daemon)
	}
	if _, err := clusterrun.ParseChaosMode(c.chaosMesh); err != nil {
		return err
	}
	return nil
}

// runOnCluster runs one scenario on a cluster and prints its verdict as
// the twin's, then what was skipped or approximated.
func runOnCluster(stdout, stderr io.Writer, l loaded, f runFlags, several bool) int {
	c := f.cluster
	if err := c.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitBadInput
	}
	repo, err := repoOrCwd(c.repo)
	if err != nil {
		fmt.Fprintf(stderr, "--repo: %v\n", err)
		return exitBadInput
	}
	opts := clusterrun.Options{
		Kubeconfig: c.kubeconfig, ClusterDir: c.clusterDir, Repo: repo, WorkDir: c.workDir,
		ExternalController: c.controller == "external", BootrollBin: c.daemonBin, Sets: f.sets, Seed: f.seed, Progress: stderr,
		ExternalDaemon: c.daemon == "external", APIServerAddress: c.apiServer,
	}
	opts.Chaos, _ = clusterrun.ParseChaosMode(c.chaosMesh) // checked by validate
	if opts.WorkDir != "" && several {
		opts.WorkDir = filepath.Join(opts.WorkDir, l.sc.Name)
	}
	tf, err := createTrace(f.trace, l.sc.Name, several)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --trace: %v\n", l.file, err)
		return exitBadInput
	}
	if tf != nil {
		defer tf.Close()
		opts.Trace = tf
	}
	// The run's watches use controller-runtime, which logs nothing
	// useful here; the controller's own log is in the work directory.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	res, err := clusterrun.Run(ctx, l.sc, opts)
	wall := time.Since(start)
	if err != nil {
		fmt.Fprintf(stderr, "%s: --target cluster: %v\n", l.file, err)
		return exitViolated
	}
	printLine(stdout, res.Result, wall)
	for _, v := range res.Exceptions {
		fmt.Fprintf(stdout, "  exception %s\n", v)
	}
	code := exitOK
	if !res.Passed() {
		code = exitViolated
		printViolations(stdout, res.Result)
	}
	for _, n := range res.Notices {
		fmt.Fprintf(stdout, "  %s\n", n)
	}
	fmt.Fprintf(stdout, "  logs: %s\n", res.Dir)
	if f.controls {
		opts.Trace = nil
		if c := runClusterControls(ctx, stdout, stderr, l, f, opts); c > code {
			code = c
		}
	}
	return code
}

// runClusterControls runs the scenario's negative controls on the cluster,
// each in a run of its own that the named invariant must catch, as the
// twin runs them. A control that sets the controller's bootroll.testOnly
// runs with a controller built with the bootroll_testonly tag
// (docs/testonly-build.md); one that breaks the node daemon
// (forgetLastReboot, noStagingReserve), or any with --controller
// external, is reported as skipped, by name.
func runClusterControls(ctx context.Context, stdout, stderr io.Writer, l loaded, f runFlags, opts clusterrun.Options) int {
	code := exitOK
	testOnlyBin := f.cluster.testOnly
	for _, nc := range l.sc.NegativeControls {
		sets := append(slices.Clone(f.sets), nc.Set...)
		sc, err := scenario.LoadWithSets(l.file, sets)
		if err != nil {
			fmt.Fprintf(stderr, "negative control %s: %v\n", nc.Name, err)
			return exitBadInput
		}
		o := opts
		o.Sets = sets
		if o.WorkDir != "" {
			o.WorkDir = filepath.Join(o.WorkDir, "control-"+nc.Name)
		}
		if why := testOnlySkip(sc.Bootroll.TestOnly, o.ExternalController, o.ExternalDaemon); why != "" {
			fmt.Fprintf(stdout, "  skipped: negative control %s: %s\n", nc.Name, why)
			continue
		}
		// The daemon's settings reach the host-mode daemon through the
		// scenario the run writes for it (with the control's sets); the
		// controller's need the bootroll_testonly build.
		if ctl, _ := controllerTestOnly(sc.Bootroll.TestOnly); ctl != (rollout.TestOnly{}) {
			if testOnlyBin == "" {
				fmt.Fprintf(stderr, "building bootroll with -tags %s for the negative controls\n", clusterrun.TestOnlyTag)
				if testOnlyBin, err = clusterrun.BuildTestOnly(o.Repo); err != nil {
					fmt.Fprintf(stderr, "%s: negative control %s: %v\n", l.file, nc.Name, err)
					return exitBadInput
				}
			}
			if o.WorkDir == "" {
				if o.WorkDir, err = os.MkdirTemp("", "bootroll-cluster-run-"); err != nil {
					fmt.Fprintf(stderr, "%s: negative control %s: %v\n", l.file, nc.Name, err)
					return exitBadInput
				}
			}
			if o.ControllerBin, err = clusterrun.TestOnlyController(o.WorkDir, testOnlyBin, controllerNames(sc.Bootroll.TestOnly)); err != nil {
				fmt.Fprintf(stderr, "%s: negative control %s: %v\n", l.file, nc.Name, err)
				return exitBadInput
			}
		}
		start := time.Now()
		res, err := clusterrun.Run(ctx, sc, o)
		wall := time.Since(start)
		if err != nil {
			fmt.Fprintf(stderr, "%s: negative control %s: --target cluster: %v\n", l.file, nc.Name, err)
			code = exitViolated
			continue
		}
		caughtBy := string(nc.CaughtBy)
		if res.Caught(caughtBy) {
			at := res.FirstAt(caughtBy)
			fmt.Fprintf(stdout, "  negative control %s: caught by %s at %s (scenario time %s, wall %s; violated: %s)\n", nc.Name, caughtBy, ms(at), ms(res.End), wallString(wall), strings.Join(slices.Sorted(maps.Keys(res.Counts)), ", "))
			continue
		}
		code = exitViolated
		fmt.Fprintf(stdout, "  FAIL negative control %s was not caught by %s (scenario time %s, wall %s)\n", nc.Name, caughtBy, ms(res.End), wallString(wall))
		if len(res.Violations) > 0 {
			fmt.Fprintf(stdout, "    it was caught only by: %s\n", strings.Join(slices.Sorted(maps.Keys(res.Counts)), ", "))
		}
		fmt.Fprintf(stdout, "    logs: %s\n", res.Dir)
	}
	return code
}

// testOnlySkip says why a control with testOnly settings t cannot run on
// the cluster, or "" when it can: host mode plays forgetLastReboot but
// simulates no image service (no pinned images, so no staging reserve to
// drop), and daemons or a controller deployed outside the run cannot be
// given any setting.
func testOnlySkip(t scenario.TestOnly, externalController, externalDaemon bool) string {
	ctl, daemon := controllerTestOnly(t)
	for _, d := range daemon {
		if !slices.Contains(hostModeTestOnly, d) {
			return fmt.Sprintf("bootroll.testOnly.%s breaks the node daemon's pinned images, which host mode (sim/hostmode) does not simulate", d)
		}
	}
	if len(daemon) > 0 && externalDaemon {
		return fmt.Sprintf("it needs bootroll.testOnly.%s, and --daemon external runs daemons this run cannot break", strings.Join(daemon, ", bootroll.testOnly."))
	}
	if ctl != (rollout.TestOnly{}) && externalController {
		return "it needs bootroll.testOnly, and --controller external runs a controller this run cannot break"
	}
	return ""
}
