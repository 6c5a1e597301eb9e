// Command bootroll runs bootroll's scenarios in the digital twin:
//
//	bootroll scenario run FILE... [--seed N] [--trace FILE] [--report DIR] [--set path=value]... [--bench] [--negative-controls]
//	bootroll scenario validate FILE...
//	bootroll scenario list [DIR]
//	bootroll whatif FILE --vary path=v1,v2,... [--vary ...] --seeds N [--jobs K] [--out DIR]
//	bootroll cluster up [--dir D]
//	bootroll cluster down [--dir D]
//	bootroll daemon --simulate-hosts FILE (--nodes SELECTOR | --node NAME) [--kubeconfig K]
//
// Exit status: 0 when every expectation holds, 1 when one is violated, 2
// on bad input.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/bootroll/bootroll/sim/twin"
)

// Exit codes.
const (
	exitOK       = 0
	exitViolated = 1
	exitBadInput = 2
)

// exitError carries an exit code out of a command; its message, if any,
// has been printed already.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// No command writes a heap profile, and the runtime's sampling of
	// allocations for one (a stack walk every 512 KiB allocated) was 2% of
	// a twin run's instructions. --cpuprofile is unaffected.
	runtime.MemProfileRate = 0
	gogc, _ = twin.SetGCPercent() // for the whole process: never restored
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	default:
		// Usage errors: unknown flags, wrong argument counts.
		fmt.Fprintln(stderr, "bootroll:", err)
		return exitBadInput
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "bootroll",
		Short: "Run bootroll's scenarios in the deterministic digital twin",
		Long: `bootroll rolls bootc OS images out to Kubernetes nodes. This command runs
its scenarios in the digital twin: a single-threaded discrete-event
simulation, on virtual time and one seeded random source, that runs the
real controller and node daemon against a simulated API server, nodes,
pods and PodDisruptionBudgets, and checks invariants after every event.

The same scenario and seed always give the same run, byte for byte.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newScenarioCmd(stdout, stderr), newWhatifCmd(stdout, stderr), newClusterCmd(stdout, stderr), newDaemonCmd(stdout, stderr), newFidelityCmd(stdout, stderr))
	addTestOnlyCommands(root, stdout, stderr)
	return root
}
