package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/bootroll/bootroll/sim/clusterrun"
	"github.com/bootroll/bootroll/sim/fidelity"
	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

type fidelityFlags struct {
	sets       []string
	markdown   string
	kubeconfig string
	clusterDir string
	workDir    string
	daemonBin  string
	repo       string
	twinSeeds  int
}

func newFidelityCmd(stdout, stderr io.Writer) *cobra.Command {
	var f fidelityFlags
	cmd := &cobra.Command{
		Use:   "fidelity FILE...",
		Short: "Run scenarios in the twin and on a real cluster and compare what happened",
		Long: `Run each scenario twice: in the twin, and on a real API server as
bootroll scenario run --target cluster does (a local control plane with the
real Karpenter unless --kubeconfig or --cluster-dir is given). Print, per
scenario, both verdicts and, for each kind of event of a rollout
(cordoned, drained, rebooted, verified, reaped by Karpenter, replaced),
the count and the delay from its cause on both sides (median and max) and
the difference of the medians. The twin also runs with the --twin-seeds
seeds from the scenario's on: a delay that turns on a coin neither target
controls (kube-scheduler picks at random among equally good nodes) is a
different draw in each run, so the twin's median over seeds, with its
range, is its prediction. The goal is the same verdicts and every kind
within 10 s of that prediction, with the counts of the scenario's seed
(the last column). Events are read from the API-level lines of both
runs' traces, so both sides are measured the same way (see
docs/fidelity.md for the definitions).

What the cluster cannot inject is printed as skipped, as scenario run
prints it. --markdown writes the table for docs/fidelity.md.

Exit status: 0 when every scenario ran on both (whatever the table says),
1 when a verdict differs, 2 on bad input or a run that could not be made.`,
		Example: `  bootroll fidelity scenarios/cluster/static-rollout-3.yaml
  bootroll fidelity scenarios/cluster/*.yaml --markdown docs/fidelity-table.md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return runFidelity(stdout, stderr, args, f) },
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.sets, "set", nil, "override a scenario field on both sides, path=value (as scenario run --set)")
	fl.StringVar(&f.markdown, "markdown", "", "also write the table as markdown to this file; in a file that has the lines "+tableBegin+" and "+tableEnd+", only what is between them is replaced (make fidelity: docs/fidelity.md)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default: start a local cluster for each run and stop it)")
	fl.StringVar(&f.clusterDir, "cluster-dir", "", "the directory of a running `bootroll cluster up` to use")
	fl.StringVar(&f.workDir, "work-dir", "", "directory for the cluster runs' logs (default: a new temporary directory, kept)")
	fl.StringVar(&f.daemonBin, "daemon-bin", "", "the bootroll binary whose `daemon --simulate-hosts` plays the nodes (default: this one)")
	fl.StringVar(&f.repo, "repo", "", "the bootroll checkout (default: the current directory or the first parent that is one)")
	fl.IntVar(&f.twinSeeds, "twin-seeds", 21, "twin runs per scenario, with seeds from the scenario's on (1 to 1000): the twin's prediction is their median; 1 compares the scenario's seed alone")
	return cmd
}

func runFidelity(stdout, stderr io.Writer, files []string, f fidelityFlags) error {
	if f.kubeconfig != "" && f.clusterDir != "" {
		fmt.Fprintln(stderr, "--kubeconfig and --cluster-dir: give one")
		return exitError{exitBadInput}
	}
	if f.twinSeeds < 1 || f.twinSeeds > maxTwinSeeds {
		fmt.Fprintf(stderr, "--twin-seeds %d: must be 1 to %d\n", f.twinSeeds, maxTwinSeeds)
		return exitError{exitBadInput}
	}
	var scs []loaded
	for _, file := range files {
		sc, err := scenario.LoadWithSets(file, f.sets)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return exitError{exitBadInput}
		}
		scs = append(scs, loaded{file, sc})
	}
	repo, err := repoOrCwd(f.repo)
	if err != nil {
		fmt.Fprintf(stderr, "--repo: %v\n", err)
		return exitError{exitBadInput}
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cs []*fidelity.Comparison
	code := exitOK
	for _, l := range scs {
		c, err := compareOne(ctx, stderr, l, f, repo)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", l.file, err)
			return exitError{exitBadInput}
		}
		if c.TwinVerdict != c.ClusterVerdict {
			code = exitViolated
		}
		cs = append(cs, c)
		if err := fidelity.WriteText(stdout, []*fidelity.Comparison{c}); err != nil {
			return err
		}
	}
	if f.markdown != "" {
		var b bytes.Buffer
		if err := fidelity.WriteMarkdown(&b, cs); err != nil {
			return err
		}
		out := b.Bytes()
		if old, err := os.ReadFile(f.markdown); err == nil {
			out = spliceTable(old, out)
		}
		if err := os.WriteFile(f.markdown, out, 0o644); err != nil {
			fmt.Fprintf(stderr, "--markdown: %v\n", err)
			return exitError{exitBadInput}
		}
	}
	if code != exitOK {
		return exitError{code}
	}
	return nil
}

func verdict(res *twin.Result) string {
	if res.Passed() {
		return "PASS"
	}
	return "FAIL"
}

// maxTwinSeeds bounds --twin-seeds: each is one twin run per scenario.
const maxTwinSeeds = 1000

// compareOne runs one scenario on both sides.
func compareOne(ctx context.Context, stderr io.Writer, l loaded, f fidelityFlags, repo string) (*fidelity.Comparison, error) {
	c := &fidelity.Comparison{Scenario: l.sc.Name}
	start := time.Now() // edge: wall time of the command, printed only
	res, twinEvents, err := twinRun(l.sc, 0)
	c.TwinWall = time.Since(start) // edge: wall time of the command, printed only
	if err != nil {
		return nil, err
	}
	c.TwinVerdict = verdict(res)

	var apiTrace bytes.Buffer
	opts := clusterrun.Options{
		Kubeconfig: f.kubeconfig, ClusterDir: f.clusterDir, Repo: repo, WorkDir: f.workDir,
		BootrollBin: f.daemonBin, Sets: f.sets, Progress: stderr, APITrace: &apiTrace,
	}
	if opts.WorkDir != "" {
		opts.WorkDir = filepath.Join(opts.WorkDir, l.sc.Name)
	}
	start = time.Now() // edge: wall time of the command, printed only
	cres, err := clusterrun.Run(ctx, l.sc, opts)
	c.ClusterWall = time.Since(start) // edge: wall time of the command, printed only
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.ClusterVerdict = verdict(cres.Result)
	for _, n := range cres.Notices {
		c.Skipped = append(c.Skipped, n.String())
	}
	clusterLines, err := fidelity.ReadTrace(&apiTrace)
	if err != nil {
		return nil, fmt.Errorf("cluster trace: %w", err)
	}
	c.Rows = fidelity.Compare(twinEvents, fidelity.Extract(clusterLines))
	if f.twinSeeds > 1 {
		runs := []fidelity.Events{twinEvents}
		for i := 1; i < f.twinSeeds; i++ {
			_, ev, err := twinRun(l.sc, res.Seed+uint64(i))
			if err != nil {
				return nil, err
			}
			runs = append(runs, ev)
		}
		fidelity.AddSeeds(c.Rows, runs)
	}
	return c, nil
}

// twinRun runs sc in the twin with seed (0: the scenario's) and returns
// the result and the events of its trace.
func twinRun(sc *scenario.Scenario, seed uint64) (*twin.Result, fidelity.Events, error) {
	var tr bytes.Buffer
	res, err := twin.Run(sc, twin.Options{Seed: seed, Trace: &tr})
	if err != nil {
		if seed == 0 {
			seed = sc.Seed
		}
		return nil, nil, fmt.Errorf("twin, seed %d: %w", seed, err)
	}
	lines, err := fidelity.ReadTrace(&tr)
	if err != nil {
		return nil, nil, fmt.Errorf("twin trace, seed %d: %w", res.Seed, err)
	}
	return res, fidelity.Extract(lines), nil
}

// The markers of the generated table in a hand-written file.
const (
	tableBegin = "<!-- fidelity-table:begin -->"
	tableEnd   = "<!-- fidelity-table:end -->"
)

// spliceTable puts table between old's markers; without both markers, in
// order, the table replaces old whole.
func spliceTable(old, table []byte) []byte {
	i := bytes.Index(old, []byte(tableBegin))
	j := bytes.Index(old, []byte(tableEnd))
	if i < 0 || j < i {
		return table
	}
	var b bytes.Buffer
	b.Write(old[:i+len(tableBegin)])
	b.WriteString("\n")
	b.Write(table)
	b.Write(old[j:])
	return b.Bytes()
}
