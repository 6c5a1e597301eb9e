package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootroll/bootroll/internal/localcluster"
)

// defaultClusterDir is the cluster directory under the repository root:
// bin/ is git-ignored.
const defaultClusterDir = "bin/cluster"

type clusterFlags struct {
	dir     string
	binDir  string
	repo    string
	timeout time.Duration
	grace   time.Duration
	// karpenter is the Karpenter version (localcluster.Options.KarpenterVersion).
	karpenter string
}

func newClusterCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start and stop a local control plane with the real Karpenter (KWOK nodes)",
		Long: `A local Kubernetes control plane for running bootroll against real
components, with no container engine: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler (k8s.io/kubernetes v1.37.2),
kwok v0.8.0 (fake nodes and pods) and Karpenter's KWOK provider v1.15.0
(karpenter-kwok), each a process bound to 127.0.0.1 on a free port
(karpenter-kwok's metrics and health ports listen on every interface: its
options take no address). The binaries come from bin/k8s: build them once
with ` + "`" + localcluster.BuildTarget + "`" + `. See docs/local-cluster.md.`,
	}
	cmd.AddCommand(newClusterUpCmd(stdout, stderr), newClusterDownCmd(stdout, stderr))
	return cmd
}

func newClusterUpCmd(stdout, stderr io.Writer) *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "up [--dir D]",
		Short: "Start the local control plane; print the kubeconfig path",
		Long: `Start etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
and karpenter-kwok with certificates generated for the run (a CA, a serving
certificate for 127.0.0.1, an admin client certificate in system:masters,
a service-account key), wait until each is ready, install Karpenter's CRDs
and bootroll's (config/crd/bases of the checkout), give kwok the stages of
internal/localcluster/manifests/kwok-stages.yaml (a Node annotated
` + localcluster.RebootingAnnotation + `: "true" is NotReady until the annotation goes), create the
KWOKNodeClass and the default NodePool of manifests/nodepool.yaml (those
manifests are compiled into bootroll), then print the kubeconfig path on
stdout and return. The processes keep running.

D holds pki/, kubeconfig, etcd/, kwok-stages.yaml, one log file per
component (etcd.log, kube-apiserver.log, ...) and state.json, the pids that
` + "`bootroll cluster down --dir D`" + ` stops. Each up starts a fresh cluster;
it refuses while one it started in D still runs.

Exit status: 0 when the cluster is up, 1 when it failed to start (what was
started is stopped again, the logs stay), 2 on bad input or missing
binaries.`,
		Example: `  bootroll cluster up
  export KUBECONFIG=$(bootroll cluster up --dir /tmp/c | tail -1)
  bootroll cluster down --dir /tmp/c`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClusterUp(stdout, stderr, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "cluster directory (default: "+defaultClusterDir+" in the repository)")
	fl.StringVar(&f.repo, "repo", "", "the bootroll checkout whose CRDs (config/crd/bases) are installed (default: the current directory or the first parent that is one)")
	fl.StringVar(&f.binDir, "bin-dir", "", "directory of the binaries (default: bin/k8s in the repository)")
	fl.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up when the cluster is not ready by then")
	fl.StringVar(&f.karpenter, "karpenter-version", localcluster.DefaultKarpenterVersion, "Karpenter to install and start: "+localcluster.DefaultKarpenterVersion+" (v1.15.0, make cluster-tools) or "+localcluster.KarpenterV114+" (v1.14.3, make karpenter-v1.14)")
	return cmd
}

func newClusterDownCmd(stdout, stderr io.Writer) *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "down [--dir D]",
		Short: "Stop the processes that cluster up started in D",
		Long: `Stop the processes recorded in D/state.json by ` + "`bootroll cluster up`" + `, in reverse
start order: SIGTERM, then SIGKILL after --grace. A pid is signalled only
while it still runs the recorded binary with the recorded start time, so a
reused pid is left alone. The logs, certificates and etcd data stay in D;
state.json goes.

Exit status: 0 when every process is gone, 1 when one could not be
stopped, 2 when D holds no state.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runClusterDown(stdout, stderr, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", "", "cluster directory (default: "+defaultClusterDir+" in the repository)")
	fl.StringVar(&f.repo, "repo", "", "the bootroll checkout (only to find the default --dir)")
	fl.DurationVar(&f.grace, "grace", 10*time.Second, "time each process has to exit after SIGTERM before SIGKILL")
	return cmd
}

// repoOrCwd is the --repo flag's checkout, or the current directory's (or
// its first parent that is one) when the flag is empty.
func repoOrCwd(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return localcluster.FindRepo(wd)
}

// clusterPaths fills in the defaults that depend on the repository.
func clusterPaths(f *clusterFlags, needRepo bool) error {
	if f.repo == "" && (needRepo || f.dir == "" || f.binDir == "") {
		repo, err := repoOrCwd("")
		if err != nil {
			return err
		}
		f.repo = repo
	}
	if f.dir == "" {
		f.dir = filepath.Join(f.repo, defaultClusterDir)
	}
	if f.binDir == "" && f.repo != "" {
		f.binDir = filepath.Join(f.repo, "bin", "k8s")
	}
	return nil
}

func runClusterUp(stdout, stderr io.Writer, f clusterFlags) error {
	if err := clusterPaths(&f, true); err != nil {
		fmt.Fprintln(stderr, "bootroll cluster up:", err)
		return exitError{exitBadInput}
	}
	if err := localcluster.CheckKarpenterVersion(f.karpenter); err != nil {
		fmt.Fprintln(stderr, "bootroll cluster up: --karpenter-version:", err)
		return exitError{exitBadInput}
	}
	// Ctrl-C while starting: stop what was started, like any failure.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // edge: the CLI's signals
	defer stop()
	fmt.Fprintf(stderr, "starting a local control plane in %s\n", f.dir)
	st, err := localcluster.Up(ctx, localcluster.Options{
		Dir: f.dir, BinDir: f.binDir, Repo: f.repo, Timeout: f.timeout, Progress: stderr, KarpenterVersion: f.karpenter,
	})
	if err != nil {
		fmt.Fprintln(stderr, "bootroll cluster up:", err)
		if localcluster.IsMissingBinaries(err) {
			return exitError{exitBadInput}
		}
		return exitError{exitViolated}
	}
	fmt.Fprintf(stderr, "up: API server %s; stop it with: bootroll cluster down --dir %s\n", st.Server, f.dir)
	fmt.Fprintln(stdout, st.Kubeconfig)
	return nil
}

func runClusterDown(stdout, stderr io.Writer, f clusterFlags) error {
	if f.dir == "" {
		if err := clusterPaths(&f, false); err != nil {
			fmt.Fprintln(stderr, "bootroll cluster down:", err)
			return exitError{exitBadInput}
		}
	}
	err := localcluster.Down(localcluster.DownOptions{Dir: f.dir, Grace: f.grace, Progress: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "bootroll cluster down:", err)
		if errors.Is(err, localcluster.ErrNoState) {
			return exitError{exitBadInput}
		}
		return exitError{exitViolated}
	}
	fmt.Fprintf(stdout, "stopped; logs in %s\n", f.dir)
	return nil
}
