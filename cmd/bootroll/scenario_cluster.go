package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/clusterrun"
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
}

func addClusterTargetFlags(fl *pflag.FlagSet, c *clusterTarget) {
	fl.StringVar(&c.target, "target", targetTwin, "where to run: twin (the deterministic simulator) or cluster (a real API server, see docs/cluster-target.md)")
	fl.StringVar(&c.kubeconfig, "kubeconfig", "", "with --target cluster: the cluster's kubeconfig (default: start a local cluster for the run and stop it at the end)")
	fl.StringVar(&c.clusterDir, "cluster-dir", "", "with --target cluster: the directory of a running `bootroll cluster up` to use")
	fl.StringVar(&c.controller, "controller", "process", "with --target cluster: process (build and start the controller, restart it for faults) or external (one already runs against the cluster)")
	fl.StringVar(&c.workDir, "work-dir", "", "with --target cluster: directory for the run's logs, kubeconfigs and local cluster (default: a new temporary directory, kept)")
	fl.StringVar(&c.daemonBin, "daemon-bin", "", "with --target cluster: the bootroll binary whose `daemon --simulate-hosts` plays the nodes (default: this one)")
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
	repo := c.repo
	if repo == "" {
		wd, err := os.Getwd()
		if err == nil {
			repo, err = localcluster.FindRepo(wd)
		}
		if err != nil {
			fmt.Fprintf(stderr, "--repo: %v\n", err)
			return exitBadInput
		}
	}
	opts := clusterrun.Options{
		Kubeconfig: c.kubeconfig, ClusterDir: c.clusterDir, Repo: repo, WorkDir: c.workDir,
		ExternalController: c.controller == "external", BootrollBin: c.daemonBin, Sets: f.sets, Seed: f.seed, Progress: stderr,
	}
	if opts.WorkDir != "" && several {
		opts.WorkDir = filepath.Join(opts.WorkDir, l.sc.Name)
	}
	if f.trace != "" {
		path := f.trace
		if several {
			if err := os.MkdirAll(f.trace, 0o755); err != nil {
				fmt.Fprintf(stderr, "%s: --trace: %v\n", l.file, err)
				return exitBadInput
			}
			path = filepath.Join(f.trace, l.sc.Name+".jsonl")
		}
		tf, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: --trace: %v\n", l.file, err)
			return exitBadInput
		}
		defer tf.Close()
		opts.Trace = tf
	}
	if f.controls && len(l.sc.NegativeControls) > 0 {
		fmt.Fprintf(stdout, "  skipped: negative controls: the controller and daemon binaries have no deliberately broken modes (bootroll.testOnly)\n")
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
	return code
}
