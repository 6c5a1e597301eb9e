// Package localcluster starts and stops a local Kubernetes control plane
// with the real Karpenter: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok and Karpenter's KWOK provider (karpenter-kwok), as
// processes bound to 127.0.0.1 on free ports, with generated certificates,
// each logging to a file in one directory (bootroll cluster up / down).
//
// It is an edge of the system, like the binaries' wiring: it starts
// processes, reads the clock and listens on ports. The pure parts (the
// command lines, the certificates, the state file) are separate functions
// so that they are tested without starting anything. See
// docs/local-cluster.md.
package localcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Component names, in start order; they are also the log files' names.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	KWOK              = "kwok"
	KarpenterKWOK     = "karpenter-kwok"
)

// Order is the start order; Down stops them in reverse.
var Order = []string{Etcd, APIServer, ControllerManager, Scheduler, KWOK, KarpenterKWOK}

// BuildTarget is the make target that builds every binary of Order into
// bin/k8s.
const BuildTarget = "make cluster-tools"

// RebootingAnnotation on a Node makes the node-rebooting KWOK stage of
// manifests/kwok-stages.yaml set its Ready condition False until the
// annotation is removed.
const RebootingAnnotation = "bootroll.dev/rebooting"

// KWOKNodeAnnotation marks the Nodes that kwok manages; Karpenter's KWOK
// provider puts it on every Node it creates.
const KWOKNodeAnnotation = "kwok.x-k8s.io/node"

// FindBinaries returns the path of each component's binary in binDir, or
// an error naming every missing one and the make target that builds them.
func FindBinaries(binDir string) (map[string]string, error) {
	paths := map[string]string{}
	var missing []string
	for _, name := range Order {
		abs, found, err := binary(binDir, name)
		if err != nil {
			return nil, err
		}
		if !found {
			missing = append(missing, name)
			continue
		}
		paths[name] = abs
	}
	if len(missing) > 0 {
		return paths, &MissingBinariesError{Dir: binDir, Names: missing}
	}
	return paths, nil
}

// binary resolves the executable name in binDir to the path that
// /proc/PID/exe will show, so Down can tell our processes from others;
// found is false when it is missing, a directory or not executable.
func binary(binDir, name string) (abs string, found bool, err error) {
	p := filepath.Join(binDir, name)
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return "", false, nil
	}
	abs, err = filepath.Abs(p)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", false, fmt.Errorf("resolving %s: %w", p, err)
	}
	return abs, true, nil
}

// MissingBinariesError says which binaries are not built.
type MissingBinariesError struct {
	Dir   string
	Names []string
	// Target is the make target that builds them; "" is BuildTarget.
	Target string
}

func (e *MissingBinariesError) Error() string {
	t := e.Target
	if t == "" {
		t = BuildTarget
	}
	return fmt.Sprintf("%s not found in %s: build them with `%s` in the repository", strings.Join(e.Names, ", "), e.Dir, t)
}

// IsMissingBinaries tells whether err is a MissingBinariesError.
func IsMissingBinaries(err error) bool {
	var m *MissingBinariesError
	return errors.As(err, &m)
}

// Ports are the TCP ports on 127.0.0.1 that the components listen on.
type Ports struct {
	EtcdClient, EtcdPeer int
	APIServer            int
	ControllerManager    int
	Scheduler            int
	KWOK                 int
	// Karpenter's metrics and health probe: karpenter-kwok binds them on
	// every interface (its options take a port, not an address).
	KarpenterMetrics, KarpenterHealth int
}

// FreePorts picks free ports on 127.0.0.1 by listening on port 0. They are
// free when picked; another process could take one before the component
// binds it, which then fails to start and says so in its log.
func FreePorts() (Ports, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	next := func() (int, error) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("picking a free port: %w", err)
		}
		ls = append(ls, l)
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	var p Ports
	for _, f := range []*int{&p.EtcdClient, &p.EtcdPeer, &p.APIServer, &p.ControllerManager, &p.Scheduler, &p.KWOK, &p.KarpenterMetrics, &p.KarpenterHealth} {
		n, err := next()
		if err != nil {
			return p, err
		}
		*f = n
	}
	return p, nil
}

// Layout names the files of a cluster directory.
type Layout struct {
	Dir string
}

// Paths in the cluster directory.
func (l Layout) PKI() PKI               { return PKI{Dir: filepath.Join(l.Dir, "pki")} }
func (l Layout) Kubeconfig() string     { return filepath.Join(l.Dir, "kubeconfig") }
func (l Layout) EtcdData() string       { return filepath.Join(l.Dir, "etcd") }
func (l Layout) Stages() string         { return filepath.Join(l.Dir, "kwok-stages.yaml") }
func (l Layout) State() string          { return filepath.Join(l.Dir, "state.json") }
func (l Layout) Log(name string) string { return filepath.Join(l.Dir, name+".log") }

// ServiceClusterIPRange is the apiserver's range for Service IPs; nothing
// routes it, the apiserver only allocates from it.
const ServiceClusterIPRange = "10.96.0.0/16"

// Component is one process to start.
type Component struct {
	Name string
	Path string
	Args []string
	// Env is added to the environment of bootroll itself.
	Env []string
	// Ready is the URL that answers 200 once the component is ready.
	Ready string
}

// Components returns the command line of each component, in Order, for
// the binaries, ports and directory given.
func Components(bins map[string]string, p Ports, l Layout) []Component {
	pki := l.PKI()
	kc := l.Kubeconfig()
	loop := "127.0.0.1"
	url := func(scheme string, port int, path string) string {
		return scheme + "://" + net.JoinHostPort(loop, strconv.Itoa(port)) + path
	}
	etcdClient := url("http", p.EtcdClient, "")
	etcdPeer := url("http", p.EtcdPeer, "")
	apiserver := url("https", p.APIServer, "")
	return []Component{{
		Name: Etcd,
		Path: bins[Etcd],
		Args: []string{
			"--name=default",
			"--data-dir=" + l.EtcdData(),
			"--listen-client-urls=" + etcdClient,
			"--advertise-client-urls=" + etcdClient,
			"--listen-peer-urls=" + etcdPeer,
			"--initial-advertise-peer-urls=" + etcdPeer,
			"--initial-cluster=default=" + etcdPeer,
			// A throwaway cluster: durability buys nothing and costs seconds.
			"--unsafe-no-fsync=true",
		},
		Ready: url("http", p.EtcdClient, "/health"),
	}, {
		Name: APIServer,
		Path: bins[APIServer],
		Args: []string{
			"--etcd-servers=" + etcdClient,
			"--bind-address=" + loop,
			"--advertise-address=" + loop,
			"--secure-port=" + strconv.Itoa(p.APIServer),
			// 1.37 refuses a loopback advertise address with the default
			// endpoint reconciler.
			"--endpoint-reconciler-type=none",
			"--cert-dir=" + pki.Dir,
			"--client-ca-file=" + pki.CACert(),
			"--tls-cert-file=" + pki.ServingCert(),
			"--tls-private-key-file=" + pki.ServingKey(),
			"--authorization-mode=Node,RBAC",
			"--service-cluster-ip-range=" + ServiceClusterIPRange,
			"--service-account-issuer=" + apiserver,
			"--service-account-key-file=" + pki.ServiceAccountPub(),
			"--service-account-signing-key-file=" + pki.ServiceAccountKey(),
		},
		Ready: url("https", p.APIServer, "/readyz"),
	}, {
		Name: ControllerManager,
		Path: bins[ControllerManager],
		Args: []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=" + loop,
			"--secure-port=" + strconv.Itoa(p.ControllerManager),
			"--service-account-private-key-file=" + pki.ServiceAccountKey(),
			"--root-ca-file=" + pki.CACert(),
		},
		Ready: url("https", p.ControllerManager, "/healthz"),
	}, {
		Name: Scheduler,
		Path: bins[Scheduler],
		Args: []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=" + loop,
			"--secure-port=" + strconv.Itoa(p.Scheduler),
		},
		Ready: url("https", p.Scheduler, "/readyz"),
	}, {
		Name: KWOK,
		Path: bins[KWOK],
		Args: []string{
			"--kubeconfig=" + kc,
			"--config=" + l.Stages(),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KWOKNodeAnnotation + "=fake",
			"--node-lease-duration-seconds=40",
			"--server-address=" + net.JoinHostPort(loop, strconv.Itoa(p.KWOK)),
		},
		Ready: url("http", p.KWOK, "/healthz"),
	}, {
		Name: KarpenterKWOK,
		Path: bins[KarpenterKWOK],
		Env: []string{
			"KUBECONFIG=" + kc,
			"DISABLE_LEADER_ELECTION=true",
			"METRICS_PORT=" + strconv.Itoa(p.KarpenterMetrics),
			"HEALTH_PROBE_PORT=" + strconv.Itoa(p.KarpenterHealth),
			// Launch within a second or two of a pending pod, not after
			// Karpenter's production batching window.
			"BATCH_IDLE_DURATION=1s",
			"BATCH_MAX_DURATION=10s",
		},
		Ready: url("http", p.KarpenterHealth, "/readyz"),
	}}
}
