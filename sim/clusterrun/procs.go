package clusterrun

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is a process the run starts, kills and starts again: the
// controller or the host-mode daemon. Its output goes to one log file,
// appended across restarts.
type proc struct {
	name string
	bin  string
	args []string
	log  string

	cmd  *exec.Cmd
	done chan struct{}
	// exits receives the name of a process that exited without being
	// killed by the run.
	exits  chan<- string
	killed bool
	starts int
}

func (p *proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "==== start %d: %s %s\n", p.starts+1, p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.starts++
	p.cmd, p.killed = cmd, false
	done := make(chan struct{})
	p.done = done
	go func() { // edge: reaps the child process
		cmd.Wait() //nolint:errcheck // the exit is reported through exits
		f.Close()
		close(done)
		if !p.killed && p.exits != nil {
			p.exits <- p.name
		}
	}()
	return nil
}

// running reports whether the process was started and not killed.
func (p *proc) running() bool { return p.cmd != nil && !p.killed }

// kill stops the process at once (SIGKILL, as a crash) and waits for it.
func (p *proc) kill() {
	if p.cmd == nil || p.killed {
		return
	}
	p.killed = true
	p.cmd.Process.Kill() //nolint:errcheck // it may have exited already
	select {
	case <-p.done:
	case <-time.After(10 * time.Second): // edge: bounded wait for the child
	}
}

// stop ends the process gracefully (SIGTERM, then SIGKILL after grace).
func (p *proc) stop(grace time.Duration) {
	if p.cmd == nil || p.killed {
		return
	}
	p.killed = true
	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited already
	select {
	case <-p.done:
	case <-time.After(grace): // edge: the grace period
		p.cmd.Process.Kill() //nolint:errcheck // it may have exited already
		<-p.done
	}
}

// buildController builds cmd/bootroll-controller of the checkout into
// its bin/ (go build does nothing when it is up to date).
func buildController(repo string) (string, error) {
	out := filepath.Join(repo, "bin", "bootroll-controller")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/bootroll-controller")
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/bootroll-controller: %w: %s", err, stderr.String())
	}
	return out, nil
}

// DaemonCommand is the command line of the host-mode daemon, for
// scenario file file and kubeconfig kubeconfig.
func DaemonCommand(file, kubeconfig string) []string {
	return []string{"daemon", "--simulate-hosts", file, "--nodes", DaemonSelector, "--kubeconfig", kubeconfig}
}

// ControllerCommand is the controller's command line: the proxy's
// kubeconfig, no metrics, a free health port, no leader election.
func ControllerCommand(kubeconfig string) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0", "--namespace=bootroll-system"}
}

// daemonAvailable reports whether bootroll at bin has the host-mode
// daemon command, and if not why.
func daemonAvailable(bin string) (bool, string) {
	out, err := exec.Command(bin, "daemon", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--simulate-hosts") {
		return false, fmt.Sprintf("`%s daemon --simulate-hosts FILE --nodes SELECTOR --kubeconfig K` is not in this build of bootroll (sim/hostmode, cmd/bootroll/daemon.go)", filepath.Base(bin))
	}
	return true, ""
}

// TestOnlyTag is the build tag under which the bootroll binary has the
// hidden TestOnlyCommand: bootroll-controller's wiring with the
// deliberately broken modes of rollout.TestOnly, for negative controls on
// a cluster (docs/testonly-build.md). Shipped binaries are built without it.
const TestOnlyTag = "bootroll_testonly"

// TestOnlyCommand is the hidden command of a TestOnlyTag build of bootroll:
// `bootroll testonly-controller --test-only=NAME,... [bootroll-controller flags]`.
const TestOnlyCommand = "testonly-controller"

// BuildTestOnly builds cmd/bootroll of the checkout with TestOnlyTag into
// its bin/bootroll-testonly (go build does nothing when it is up to date).
func BuildTestOnly(repo string) (string, error) {
	out := filepath.Join(repo, "bin", "bootroll-testonly")
	cmd := exec.Command("go", "build", "-tags", TestOnlyTag, "-o", out, "./cmd/bootroll")
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build -tags %s ./cmd/bootroll: %w: %s", TestOnlyTag, err, stderr.String())
	}
	return out, nil
}

// TestOnlyController writes dir/bootroll-controller-testonly, a script
// that runs bin's TestOnlyCommand with the named bootroll.testOnly
// settings and the command line the run gives a controller
// (ControllerCommand), and returns its path for Options.ControllerBin.
// The script execs, so the run's kill and stop reach the controller.
func TestOnlyController(dir, bin string, names []string) (string, error) {
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, ",' \t\n") {
			return "", fmt.Errorf("testOnly setting %q: not a setting name", n)
		}
	}
	if strings.Contains(bin, "'") {
		return "", fmt.Errorf("testOnly controller binary %q: a path with a quote", bin)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bootroll-controller-testonly")
	script := fmt.Sprintf("#!/bin/sh\n# bootroll-controller with deliberately broken modes (docs/testonly-build.md)\nexec '%s' %s --test-only=%s \"$@\"\n",
		bin, TestOnlyCommand, strings.Join(names, ","))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return "", err
	}
	return path, nil
}
