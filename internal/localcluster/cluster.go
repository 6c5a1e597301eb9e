package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options configure Up.
type Options struct {
	// Dir is the cluster directory: certificates, kubeconfig, etcd data,
	// one log file per component and state.json.
	Dir string
	// BinDir holds the binaries (bin/k8s of the repository).
	BinDir string
	// Repo is the repository root, whose CRDs (config/crd/bases) Up
	// installs.
	Repo string
	// Timeout bounds the whole start, readiness included.
	Timeout time.Duration
	// Progress receives one line per step.
	Progress io.Writer
	// Karpenter is how much of Karpenter Up installs and starts.
	Karpenter KarpenterMode
	// KarpenterVersion is the Karpenter whose CRDs Up installs and whose
	// karpenter-kwok it starts: "" (DefaultKarpenterVersion) or
	// KarpenterV114.
	KarpenterVersion string
}

// KarpenterMode says how much of Karpenter Up installs and starts.
type KarpenterMode int

const (
	// KarpenterStarted (the default): Karpenter's CRDs, the KWOKNodeClass
	// and the default NodePool, and the karpenter-kwok process.
	KarpenterStarted KarpenterMode = iota
	// KarpenterDeferred: the CRDs, the KWOKNodeClass and the NodePool,
	// but not the process; StartKarpenter starts it.
	KarpenterDeferred
	// KarpenterAbsent: none of it; InstallKarpenter and StartKarpenter
	// install and start it, as an operator installing Karpenter would.
	KarpenterAbsent
)

// Up starts the components, waits until each is ready, installs
// Karpenter's and bootroll's CRDs, the KWOKNodeClass and the default
// NodePool, and returns the state it wrote to the directory. If a step
// fails it stops what it started (the logs stay) and returns an error that
// names the component and its log file.
//
// The processes outlive the caller: they are in process groups of their
// own, and Down stops them. Within the calling process a goroutine per
// process reaps it when it exits.
func Up(ctx context.Context, o Options) (st State, err error) {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout) // edge: a wall-clock limit on start-up
	defer cancel()

	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return st, err
	}
	bins, err := FindBinaries(o.BinDir)
	if err != nil {
		return st, err
	}
	if bins[KarpenterKWOK], err = karpenterBinary(o.BinDir, o.KarpenterVersion, bins[KarpenterKWOK]); err != nil {
		return st, err
	}
	l := Layout{Dir: o.Dir}
	if err := refuseRunning(l); err != nil {
		return st, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return st, fmt.Errorf("creating the cluster directory: %w", err)
	}
	// A fresh cluster each time: old data and certificates go, and logs
	// are truncated when their component starts.
	for _, p := range []string{l.EtcdData(), l.PKI().Dir, l.State()} {
		if err := os.RemoveAll(p); err != nil {
			return st, fmt.Errorf("cleaning the cluster directory: %w", err)
		}
	}
	pki, err := GeneratePKI(l.PKI().Dir, time.Now()) // edge: certificate validity starts now
	if err != nil {
		return st, err
	}
	stages, err := Manifests.ReadFile(StagesFile)
	if err != nil {
		return st, fmt.Errorf("reading the KWOK stages: %w", err)
	}
	if err := os.WriteFile(l.Stages(), stages, 0o644); err != nil {
		return st, fmt.Errorf("writing the KWOK stages: %w", err)
	}
	ports, err := FreePorts()
	if err != nil {
		return st, err
	}
	st = State{
		Kubeconfig: l.Kubeconfig(),
		Server:     fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer),
		Ports:      ports,
	}
	if err := writeKubeconfig(l.Kubeconfig(), st.Server, pki); err != nil {
		return st, err
	}
	probe, err := newProber(pki)
	if err != nil {
		return st, err
	}

	defer func() {
		if err != nil && len(st.Processes) > 0 {
			fmt.Fprintf(o.Progress, "start failed; stopping what was started (logs stay in %s)\n", o.Dir)
			if derr := stop(st, 10*time.Second, o.Progress); derr != nil {
				err = fmt.Errorf("%w; stopping: %v", err, derr)
			} else {
				os.Remove(l.State())
			}
		}
	}()
	started := time.Now() // edge: progress timing
	comps := Components(bins, ports, l)
	running := map[string]*running{}
	start := func(c Component) error {
		r, err := startProcess(c, l)
		if err != nil {
			return err
		}
		running[c.Name] = r
		st.Processes = append(st.Processes, r.proc)
		return WriteState(l.State(), st)
	}
	ready := func(names ...string) error {
		for _, n := range names {
			if err := probe.wait(ctx, comps[indexOf(n)], running[n]); err != nil {
				return err
			}
			fmt.Fprintf(o.Progress, "%-24s ready (pid %d, %.1fs)\n", n, running[n].proc.PID, time.Since(started).Seconds())
		}
		return nil
	}

	for _, n := range []string{Etcd, APIServer} {
		if err := start(comps[indexOf(n)]); err != nil {
			return st, err
		}
		if err := ready(n); err != nil {
			return st, err
		}
	}
	c, err := newClient(l.Kubeconfig())
	if err != nil {
		return st, err
	}
	var crds []*unstructured.Unstructured
	if o.Karpenter != KarpenterAbsent {
		if crds, err = KarpenterCRDsFor(o.KarpenterVersion); err != nil {
			return st, err
		}
	}
	own, err := ReadManifests(os.DirFS(o.Repo), BootrollCRDDir+"/*.yaml")
	if err != nil {
		return st, fmt.Errorf("bootroll's CRDs in %s: %w", o.Repo, err)
	}
	crds = append(crds, own...)
	if err := createAll(ctx, c, crds); err != nil {
		return st, err
	}
	// Karpenter checks for its CRDs when it starts.
	if err := waitEstablished(ctx, c, crds); err != nil {
		return st, err
	}
	fmt.Fprintf(o.Progress, "%-24s installed (%d, %.1fs)\n", "CRDs", len(crds), time.Since(started).Seconds())
	rest := []string{ControllerManager, Scheduler, KWOK}
	if o.Karpenter == KarpenterStarted {
		rest = append(rest, KarpenterKWOK)
	}
	for _, n := range rest {
		if err := start(comps[indexOf(n)]); err != nil {
			return st, err
		}
	}
	if err := ready(rest...); err != nil {
		return st, err
	}
	if o.Karpenter == KarpenterAbsent {
		return st, nil
	}
	pool, err := ReadManifests(Manifests, NodePoolFile)
	if err != nil {
		return st, err
	}
	if err := createAll(ctx, c, pool); err != nil {
		return st, err
	}
	fmt.Fprintf(o.Progress, "%-24s created (%.1fs)\n", "KWOKNodeClass, NodePool", time.Since(started).Seconds())
	return st, nil
}

// InstallKarpenter installs Karpenter's CRDs on the cluster of
// kubeconfig, waits until they are established, and creates the
// KWOKNodeClass and the default NodePool: what Up does for Karpenter
// before it starts the process, for a cluster started with
// KarpenterAbsent. It leaves objects that exist alone.
func InstallKarpenter(ctx context.Context, kubeconfig, version string) error {
	c, err := newClient(kubeconfig)
	if err != nil {
		return err
	}
	crds, err := KarpenterCRDsFor(version)
	if err != nil {
		return err
	}
	if err := createAll(ctx, c, crds); err != nil {
		return err
	}
	if err := waitEstablished(ctx, c, crds); err != nil {
		return err
	}
	pool, err := ReadManifests(Manifests, NodePoolFile)
	if err != nil {
		return err
	}
	return createAll(ctx, c, pool)
}

// StartKarpenterOptions configure StartKarpenter.
type StartKarpenterOptions struct {
	// Dir is the directory of a cluster that Up started with
	// KarpenterDeferred or KarpenterAbsent.
	Dir string
	// BinDir holds the binaries, as for Up.
	BinDir string
	// FeatureGates is Karpenter's --feature-gates value (FEATURE_GATES),
	// e.g. "NodeRepair=true"; empty: Karpenter's defaults.
	FeatureGates string
	// Version is the Karpenter to start, as Options.KarpenterVersion; its
	// CRDs must be the ones installed.
	Version string
	// Wait waits until Karpenter answers its readiness probe, at most
	// Timeout (default 1 min).
	Wait    bool
	Timeout time.Duration
}

// StartKarpenter starts the karpenter-kwok process of a cluster that Up
// started without it, records it in the state file (so Down stops it)
// and returns its process. Its CRDs must be installed (Up with
// KarpenterDeferred, or InstallKarpenter): Karpenter checks for them when
// it starts.
func StartKarpenter(ctx context.Context, o StartKarpenterOptions) (Process, error) {
	l := Layout{Dir: o.Dir}
	st, err := ReadState(l.State())
	if err != nil {
		return Process{}, err
	}
	for _, p := range st.Processes {
		if p.Name != KarpenterKWOK {
			continue
		}
		if ok, _ := identify(p); ok {
			return p, fmt.Errorf("%s runs already (pid %d)", KarpenterKWOK, p.PID)
		}
	}
	bins, err := FindBinaries(o.BinDir)
	if err != nil {
		return Process{}, err
	}
	c := KarpenterComponent(Components(bins, st.Ports, l), o.FeatureGates)
	if c.Path, err = karpenterBinary(o.BinDir, o.Version, c.Path); err != nil {
		return Process{}, err
	}
	r, err := startProcess(c, l)
	if err != nil {
		return Process{}, err
	}
	st.Processes = append(st.Processes, r.proc)
	if err := WriteState(l.State(), st); err != nil {
		return r.proc, err
	}
	if !o.Wait {
		return r.proc, nil
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout) // edge: a wall-clock limit on start-up
	defer cancel()
	probe, err := newProber(l.PKI())
	if err != nil {
		return r.proc, err
	}
	return r.proc, probe.wait(ctx, c, r)
}

// karpenterBinary is the karpenter-kwok of a Karpenter version: def (the
// default one FindBinaries found) or that version's binary in binDir,
// which must be built.
func karpenterBinary(binDir, version, def string) (string, error) {
	f, err := karpenterVersion(version)
	if err != nil {
		return "", err
	}
	if f.bin == KarpenterKWOK {
		return def, nil
	}
	abs, found, err := binary(binDir, f.bin)
	if err == nil && !found {
		err = &MissingBinariesError{Dir: binDir, Names: []string{f.bin}, Target: "make karpenter-v1.14"}
	}
	return abs, err
}

// KarpenterComponent is the karpenter-kwok component of comps with the
// feature gates set (FEATURE_GATES) when gates is not empty.
func KarpenterComponent(comps []Component, gates string) Component {
	c := comps[indexOf(KarpenterKWOK)]
	c.Env = slices.Clone(c.Env)
	if gates != "" {
		c.Env = append(c.Env, "FEATURE_GATES="+gates)
	}
	return c
}

func indexOf(name string) int {
	for i, n := range Order {
		if n == name {
			return i
		}
	}
	panic("localcluster: unknown component " + name)
}

// refuseRunning returns an error when the directory's state file names a
// process that still runs: one cluster per directory.
func refuseRunning(l Layout) error {
	s, err := ReadState(l.State())
	if errors.Is(err, ErrNoState) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range s.Processes {
		if ok, _ := identify(p); ok {
			return fmt.Errorf("a cluster started in %s is still running (%s, pid %d): stop it with `bootroll cluster down --dir %s` first", l.Dir, p.Name, p.PID, l.Dir)
		}
	}
	return nil
}

// running is a started process and a channel closed when it exits.
type running struct {
	proc   Process
	exited chan struct{}
	err    error // the exit status, once exited is closed
}

func startProcess(c Component, l Layout) (*running, error) {
	logf, err := os.Create(l.Log(c.Name))
	if err != nil {
		return nil, fmt.Errorf("creating the log of %s: %w", c.Name, err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = l.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// A group of its own: a Ctrl-C in the terminal of `cluster up` does not
	// reach it, and it keeps running after bootroll exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", c.Name, c.Path, err)
	}
	r := &running{
		proc:   Process{Name: c.Name, PID: cmd.Process.Pid, Path: c.Path, Log: l.Log(c.Name)},
		exited: make(chan struct{}),
	}
	go func() { // edge: reaps the child while this process lives
		r.err = cmd.Wait()
		close(r.exited)
	}()
	info, ok, err := readProc(r.proc.PID)
	if err != nil || !ok {
		return r, fmt.Errorf("%s (pid %d) exited at once: see %s", c.Name, r.proc.PID, r.proc.Log)
	}
	r.proc.StartTicks = info.startTicks
	return r, nil
}

// prober polls the components' readiness endpoints.
type prober struct {
	apiserver, insecure *http.Client
}

func newProber(pki PKI) (*prober, error) {
	caPEM, err := os.ReadFile(pki.CACert())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	admin, err := tls.LoadX509KeyPair(pki.AdminCert(), pki.AdminKey())
	if err != nil {
		return nil, fmt.Errorf("loading the admin certificate: %w", err)
	}
	return &prober{
		apiserver: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{admin}},
		}},
		// kube-controller-manager and kube-scheduler serve /healthz and
		// /readyz with a self-signed certificate of their own making.
		insecure: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a loopback readiness probe
		}},
	}, nil
}

// wait polls c.Ready until it answers 200, r exits, or ctx ends.
func (p *prober) wait(ctx context.Context, c Component, r *running) error {
	hc := p.insecure
	if c.Name == APIServer {
		hc = p.apiserver
	}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Ready, nil)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, firstLine(string(body)))
		} else {
			last = err.Error()
		}
		select {
		case <-r.exited:
			return fmt.Errorf("%s (pid %d) exited before it was ready (%v); the end of %s:\n%s", c.Name, r.proc.PID, r.err, r.proc.Log, tail(r.proc.Log, 10))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s (%v; last answer: %s); see %s", c.Name, c.Ready, ctx.Err(), last, r.proc.Log)
		case <-time.After(100 * time.Millisecond): // edge: polling a readiness endpoint
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// KubeconfigBytes returns a kubeconfig for server with the admin client
// certificate, the certificates inlined so the file can be copied.
func KubeconfigBytes(server string, caPEM, certPEM, keyPEM []byte) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bootroll-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["bootroll-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts["bootroll-local"] = &clientcmdapi.Context{Cluster: "bootroll-local", AuthInfo: "bootroll-admin"}
	cfg.CurrentContext = "bootroll-local"
	return clientcmd.Write(*cfg)
}

func writeKubeconfig(path, server string, pki PKI) error {
	var pems [3][]byte
	for i, f := range []string{pki.CACert(), pki.AdminCert(), pki.AdminKey()} {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("writing the kubeconfig: %w", err)
		}
		pems[i] = b
	}
	b, err := KubeconfigBytes(server, pems[0], pems[1], pems[2])
	if err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return os.WriteFile(path, b, 0o600)
}

func newClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("a client for %s: %w", cfg.Host, err)
	}
	return c, nil
}

// DownOptions configure Down.
type DownOptions struct {
	Dir string
	// Grace is how long each process has to exit after SIGTERM before
	// SIGKILL.
	Grace    time.Duration
	Progress io.Writer
}

// Down stops the processes that Up recorded in the directory's state
// file, in reverse start order, and removes the state file; logs and data
// stay. It signals a pid only while it still runs the recorded binary with
// the recorded start time, so a pid reused by another process is left
// alone.
func Down(o DownOptions) error {
	if o.Grace <= 0 {
		o.Grace = 10 * time.Second
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	l := Layout{Dir: o.Dir}
	st, err := ReadState(l.State())
	if err != nil {
		return err
	}
	if err := stop(st, o.Grace, o.Progress); err != nil {
		return err
	}
	if err := os.Remove(l.State()); err != nil {
		return fmt.Errorf("removing the state file: %w", err)
	}
	return nil
}

func stop(st State, grace time.Duration, progress io.Writer) error {
	var errs []error
	for i := len(st.Processes) - 1; i >= 0; i-- {
		p := st.Processes[i]
		if err := stopOne(p, grace); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(progress, "%-24s stopped (pid %d)\n", p.Name, p.PID)
	}
	return errors.Join(errs...)
}

func stopOne(p Process, grace time.Duration) error {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		ok, err := identify(p)
		if err != nil {
			return fmt.Errorf("%s (pid %d): %w", p.Name, p.PID, err)
		}
		if !ok {
			return nil
		}
		if err := syscall.Kill(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("%s (pid %d): %v: %w", p.Name, p.PID, sig, err)
		}
		deadline := time.Now().Add(grace) // edge: waiting for a process to exit
		for time.Now().Before(deadline) {
			if ok, _ := identify(p); !ok {
				return nil
			}
			time.Sleep(50 * time.Millisecond) // edge: polling /proc
		}
	}
	return fmt.Errorf("%s (pid %d) still runs after SIGKILL", p.Name, p.PID)
}
