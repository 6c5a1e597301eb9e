// Command bench-controller measures the real controller binary at scale:
// it starts a real kube-apiserver and etcd (envtest, from
// $KUBEBUILDER_ASSETS), creates --nodes Nodes and --pods-per-node bound
// Pods on each (no kubelet: created directly, with spec.nodeName), one
// BootcNodePool selecting them, starts the controller binary against them
// and prints its RSS (/proc/PID/status) and API requests per second (its
// own rest_client_requests_total) while idle and during a rollout step.
// The bench plays the node daemons (it reports each BootcNode's booted and
// staged images) and the kubelets (it removes the pods a drain evicted),
// so a rollout step directs, stages, grants, cordons and drains nodes.
//
// Run by `make bench-controller`; see docs/scale.md for the figures.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

const (
	poolName   = "bench"
	oldDigest  = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	newDigest  = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	imageRepo  = "registry.example/bench/os"
	namespaces = 50
)

type config struct {
	controller  string
	nodes       int
	podsPerNode int
	workers     int
	window      time.Duration
	metricsPort int
	maxUnavail  int
	maxStaging  int
	keep        bool
}

func main() {
	var c config
	flag.StringVar(&c.controller, "controller", "bin/bootroll-controller", "The controller binary to measure.")
	flag.IntVar(&c.nodes, "nodes", 5000, "Nodes to create.")
	flag.IntVar(&c.podsPerNode, "pods-per-node", 30, "Pods bound to each Node.")
	flag.IntVar(&c.workers, "workers", 48, "Parallel creates.")
	flag.DurationVar(&c.window, "window", 60*time.Second, "How long each request rate is sampled.")
	flag.IntVar(&c.metricsPort, "metrics-port", 18080, "Port of the controller's /metrics on 127.0.0.1.")
	flag.IntVar(&c.maxUnavail, "max-unavailable", 5, "The pool's rollout.maxUnavailable in the rollout step.")
	flag.IntVar(&c.maxStaging, "max-staging", 50, "The pool's rollout.maxStaging in the rollout step.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-controller:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, c config) error {
	start := time.Now()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{"config/crd/bases"},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("start kube-apiserver and etcd ($KUBEBUILDER_ASSETS=%s): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			logf("stop control plane: %v", err)
		}
	}()
	logf("control plane up at %s", cfg.Host)
	dir, err := os.MkdirTemp("", "bench-controller-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}

	// Fast bulk client: protobuf, no client-side rate limit.
	bulk := rest.CopyConfig(cfg)
	bulk.QPS, bulk.Burst = -1, 0
	bulk.ContentType = "application/vnd.kubernetes.protobuf"
	kc, err := kubernetes.NewForConfig(bulk)
	if err != nil {
		return err
	}
	sch, err := scheme()
	if err != nil {
		return err
	}
	crCfg := rest.CopyConfig(cfg)
	crCfg.QPS, crCfg.Burst = -1, 0
	cl, err := client.New(crCfg, client.Options{Scheme: sch})
	if err != nil {
		return err
	}

	if err := populate(ctx, c, kc); err != nil {
		return err
	}
	logf("cluster populated in %s", time.Since(start).Round(time.Second))

	// The pool, paused: the controller makes one BootcNode per Node and
	// directs nothing.
	pool := &v1alpha1.BootcNodePool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: v1alpha1.BootcNodePoolSpec{
			NodeSelector: map[string]string{"bench.bootroll.dev/pool": poolName},
			Image:        v1alpha1.ImageReference(imageRepo + "@" + newDigest),
			Paused:       true,
			Rollout: v1alpha1.RolloutSpec{
				MaxUnavailable: ptr.To(intstr.FromInt32(int32(c.maxUnavail))),
				MaxStaging:     ptr.To(int32(c.maxStaging)),
			},
		},
	}
	if err := cl.Create(ctx, pool); err != nil {
		return fmt.Errorf("create pool: %w", err)
	}

	// The BootcNodes, as the controller left them before a restart (its
	// client's 20 requests/s would take minutes to make them here).
	t0 := time.Now()
	if err := parallel(ctx, c.workers, c.nodes, "bootcnodes", func(i int) error {
		return bootcNode(ctx, cl, pool, i)
	}); err != nil {
		return err
	}
	logf("%d BootcNodes created in %s", c.nodes, time.Since(t0).Round(time.Second))

	ctlStart := time.Now()
	// KUBECONFIG, not --kubeconfig: the controller then loads it through
	// controller-runtime's GetConfig, which gives the client the same
	// 20 QPS / 30 burst as the in-cluster config of a real install.
	cmd := exec.CommandContext(ctx, c.controller,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", c.metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", c.metricsPort+1),
		"--namespace=default", "--zap-log-level=error")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.controller, err)
	}
	pid := cmd.Process.Pid
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	mem := &rssWatch{pid: pid}
	go mem.poll(ctx)
	logf("controller %s started (pid %d)", c.controller, pid)

	// The daemons report from the start: each BootcNode gets its booted image.
	daemonCtx, stopDaemons := context.WithCancel(ctx)
	defer stopDaemons()
	var daemonWrites atomic.Int64
	go playDaemons(daemonCtx, cl, kc, &daemonWrites)

	// Wait until the pool counts every node.
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		var p v1alpha1.BootcNodePool
		if err := cl.Get(ctx, types.NamespacedName{Name: poolName}, &p); err != nil {
			return false, err
		}
		return int(p.Status.Nodes) == c.nodes, nil
	}); err != nil {
		return fmt.Errorf("pool never counted %d nodes: %w", c.nodes, err)
	}
	synced := time.Since(ctlStart)
	startupPeak := mem.peak()
	logf("pool counts %d nodes %s after the controller started; RSS peak so far %s", c.nodes, synced.Round(time.Second), mib(startupPeak))

	// Idle: settle, then sample.
	time.Sleep(15 * time.Second)
	idle, err := sampleRequests(ctx, c, mem)
	if err != nil {
		return err
	}
	logf("idle: %.2f API requests/s, RSS %s (min %s, max %s over the window)", idle.rate, mib(idle.rssEnd), mib(idle.rssMin), mib(idle.rssMax))

	// Rollout step: unpause.
	var p v1alpha1.BootcNodePool
	if err := cl.Get(ctx, types.NamespacedName{Name: poolName}, &p); err != nil {
		return err
	}
	before := p.DeepCopy()
	p.Spec.Paused = false
	if err := cl.Patch(ctx, &p, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("unpause pool: %w", err)
	}
	logf("pool unpaused (maxStaging %d, maxUnavailable %d): rollout step", c.maxStaging, c.maxUnavail)
	roll, err := sampleRequests(ctx, c, mem)
	if err != nil {
		return err
	}
	if err := cl.Get(ctx, types.NamespacedName{Name: poolName}, &p); err != nil {
		return err
	}
	logf("rollout step: %.2f API requests/s, RSS %s (max %s over the window); pool: %s", roll.rate, mib(roll.rssEnd), mib(roll.rssMax), phases(&p))
	stopDaemons()

	fmt.Println()
	fmt.Println("==== bootroll-controller at scale ====")
	fmt.Printf("cluster:              %d Nodes, %d Pods (%d per node), 1 BootcNodePool selecting all\n", c.nodes, c.nodes*c.podsPerNode, c.podsPerNode)
	fmt.Printf("controller:           %s\n", c.controller)
	fmt.Printf("startup to synced:    %s\n", synced.Round(time.Second))
	fmt.Printf("RSS peak (VmHWM):     %s\n", mib(mem.hwm()))
	fmt.Printf("RSS at startup peak:  %s\n", mib(startupPeak))
	fmt.Printf("RSS steady (idle):    %s\n", mib(idle.rssEnd))
	fmt.Printf("RSS in rollout step:  %s (max %s)\n", mib(roll.rssEnd), mib(roll.rssMax))
	fmt.Printf("API requests/s idle:  %.2f  (%s)\n", idle.rate, idle.detail)
	fmt.Printf("API requests/s step:  %.2f  (%s)\n", roll.rate, roll.detail)
	fmt.Printf("pool after the step:  %s\n", phases(&p))
	fmt.Printf("simulated daemon status writes: %d\n", daemonWrites.Load())
	fmt.Printf("total bench time:     %s\n", time.Since(start).Round(time.Second))
	return nil
}

func phases(p *v1alpha1.BootcNodePool) string {
	var b []string
	for _, pc := range p.Status.Phases {
		b = append(b, fmt.Sprintf("%s=%d", pc.Phase, pc.Nodes))
	}
	return fmt.Sprintf("%s; slots %d", strings.Join(b, " "), len(p.Status.Slots))
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	return clientcmd.WriteToFile(*kc, path)
}

// populate creates the namespaces, Nodes and Pods in parallel.
func populate(ctx context.Context, c config, kc kubernetes.Interface) error {
	for i := range namespaces {
		ns := fmt.Sprintf("bench-%02d", i)
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		// No kube-controller-manager makes the default ServiceAccount.
		if _, err := kc.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	t0 := time.Now()
	if err := parallel(ctx, c.workers, c.nodes, "nodes", func(i int) error {
		_, err := kc.CoreV1().Nodes().Create(ctx, node(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	logf("%d nodes created in %s", c.nodes, time.Since(t0).Round(time.Second))
	t0 = time.Now()
	total := c.nodes * c.podsPerNode
	if err := parallel(ctx, c.workers, total, "pods", func(i int) error {
		_, err := kc.CoreV1().Pods(fmt.Sprintf("bench-%02d", i%namespaces)).Create(ctx, pod(i, c.podsPerNode), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	logf("%d pods created in %s (%.0f/s)", total, time.Since(t0).Round(time.Second), float64(total)/time.Since(t0).Seconds())
	return nil
}

func parallel(ctx context.Context, workers, n int, what string, f func(int) error) error {
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				logf("  %s: %d/%d", what, done.Load(), n)
			}
		}
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				var err error
				for try := 0; try < 5; try++ {
					if err = f(i); err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					time.Sleep(time.Duration(200*(try+1)) * time.Millisecond)
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("create %s %d: %w", what, i, err) })
					next.Store(int64(n))
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// node is a Node as a kubelet registers it, Ready, with a realistic status
// (capacity, addresses, images, system info).
func node(i int) *corev1.Node {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("200Gi"),
	}
	var images []corev1.ContainerImage
	for j := range 20 {
		images = append(images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/team/app-%d@sha256:%064x", j, j), fmt.Sprintf("registry.example/team/app-%d:v1.%d", j, j)},
			SizeBytes: int64(50_000_000 + j),
		})
	}
	conds := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available", LastHeartbeatTime: now, LastTransitionTime: now},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName(i),
			Labels: map[string]string{
				"bench.bootroll.dev/pool": poolName, "kubernetes.io/hostname": nodeName(i), "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m6i.4xlarge", "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3),
			},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), ProviderID: "bench://" + nodeName(i)},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res, Conditions: conds, Images: images,
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.200.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: nodeName(i)}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: fmt.Sprintf("%032x", i), SystemUUID: fmt.Sprintf("%032x", i), BootID: bootID(i, 0),
				KernelVersion: "6.12.0-55.el10.x86_64", OSImage: "CentOS Stream 10", ContainerRuntimeVersion: "cri-o://1.33.0",
				KubeletVersion: "v1.37.2", KubeProxyVersion: "v1.37.2", OperatingSystem: "linux", Architecture: "amd64",
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
		},
	}
}

func bootID(i, gen int) string { return fmt.Sprintf("%08x-0000-0000-0000-%012x", i, gen) }

// pod is a Deployment's pod as a typical workload has it: one container
// with resources, env, probes and ports, owned by a ReplicaSet, bound to
// its node.
func pod(i, perNode int) *corev1.Pod {
	app := fmt.Sprintf("app-%d", i%200)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:   fmt.Sprintf("%s-%07d", app, i),
			Labels: map[string]string{"app.kubernetes.io/name": app, "pod-template-hash": "5d8f7c9b4", "team": fmt.Sprintf("team-%d", i%20)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-5d8f7c9b4", UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i%200)),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName:                     nodeName(i / perNode),
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name:  "main",
				Image: fmt.Sprintf("registry.example/team/%s:v1.%d", app, i%7),
				Args:  []string{"--port=8080", "--log-level=info"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env: []corev1.EnvVar{
					{Name: "APP", Value: app}, {Name: "REGION", Value: "eu-west-1"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}},
			}},
		},
	}
}

// playDaemons plays every node's daemon (each BootcNode reports the old
// image booted, then stages the desired image when directed) and every
// kubelet (pods of a node being drained are gone once evicted).
func playDaemons(ctx context.Context, cl client.Client, kc kubernetes.Interface, writes *atomic.Int64) {
	for ctx.Err() == nil {
		var bns v1alpha1.BootcNodeList
		if err := cl.List(ctx, &bns); err == nil {
			for i := range bns.Items {
				bn := &bns.Items[i]
				if patch := daemonReport(bn); patch != "" {
					if err := cl.Status().Patch(ctx, bn, client.RawPatch(types.MergePatchType, []byte(patch))); err == nil {
						writes.Add(1)
					}
				}
				if bn.Status.Rollout.Cordoned && bn.Status.Phase == v1alpha1.PhaseDraining {
					kubeletDeletesEvicted(ctx, kc, bn.Name)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

func daemonReport(bn *v1alpha1.BootcNode) string {
	i, _ := strconv.Atoi(strings.TrimPrefix(bn.Name, "node-"))
	host := func(d string) string {
		return fmt.Sprintf(`{"image":%q,"digest":%q}`, imageRepo+"@"+d, d)
	}
	switch {
	case bn.Status.Booted == nil:
		return fmt.Sprintf(`{"status":{"booted":%s,"daemon":{"phase":"Idle","bootID":%q,"observedGeneration":%d}}}`,
			host(oldDigest), bootID(i, 0), bn.Generation)
	case bn.Spec.DesiredImage != "" && (bn.Status.Staged == nil || bn.Status.Staged.Digest != newDigest):
		return fmt.Sprintf(`{"status":{"staged":%s,"daemon":{"phase":"Staged","observedGeneration":%d}}}`, host(newDigest), bn.Generation)
	}
	return ""
}

// kubeletDeletesEvicted removes the pods of a node that are terminating,
// as its kubelet would once their containers stopped.
func kubeletDeletesEvicted(ctx context.Context, kc kubernetes.Interface, node string) {
	pods, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			_ = kc.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}
}

type sample struct {
	rate                   float64
	detail                 string
	rssEnd, rssMin, rssMax int64
}

// sampleRequests reads rest_client_requests_total from the controller's
// /metrics at the start and end of the window.
func sampleRequests(ctx context.Context, c config, mem *rssWatch) (sample, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", c.metricsPort)
	a, err := scrape(url)
	if err != nil {
		return sample{}, err
	}
	mem.resetWindow()
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return sample{}, ctx.Err()
	case <-time.After(c.window):
	}
	b, err := scrape(url)
	if err != nil {
		return sample{}, err
	}
	secs := time.Since(t0).Seconds()
	var total float64
	var parts []string
	for k, v := range b {
		d := v - a[k]
		total += d
		if d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, d))
		}
	}
	lo, hi := mem.window()
	s := sample{rate: total / secs, rssEnd: mem.current(), rssMin: lo, rssMax: hi}
	s.detail = fmt.Sprintf("%.0f requests in %.0f s", total, secs)
	if len(parts) > 0 {
		s.detail += ": " + strings.Join(sortStrings(parts), ", ")
	}
	return s, nil
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// scrape sums rest_client_requests_total by method and code.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url) //nolint:gosec,noctx // the controller's own loopback endpoint
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		key := label(line, "method") + " " + label(line, "code")
		out[key] += v
	}
	return out, sc.Err()
}

func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return "?"
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// rssWatch polls the controller's VmRSS once a second.
type rssWatch struct {
	pid          int
	mu           sync.Mutex
	cur, max     int64
	winLo, winHi int64
}

func (w *rssWatch) poll(ctx context.Context) {
	for ctx.Err() == nil {
		if v, err := status(w.pid, "VmRSS"); err == nil {
			w.mu.Lock()
			w.cur = v
			w.max = max(w.max, v)
			if w.winLo == 0 || v < w.winLo {
				w.winLo = v
			}
			w.winHi = max(w.winHi, v)
			w.mu.Unlock()
		}
		time.Sleep(time.Second)
	}
}

func (w *rssWatch) current() int64 { w.mu.Lock(); defer w.mu.Unlock(); return w.cur }
func (w *rssWatch) peak() int64    { w.mu.Lock(); defer w.mu.Unlock(); return w.max }
func (w *rssWatch) resetWindow()   { w.mu.Lock(); defer w.mu.Unlock(); w.winLo, w.winHi = 0, 0 }
func (w *rssWatch) window() (int64, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.winLo, w.winHi
}

// hwm is the kernel's peak RSS of the process (VmHWM).
func (w *rssWatch) hwm() int64 {
	v, err := status(w.pid, "VmHWM")
	if err != nil {
		return w.peak()
	}
	return v
}

// status reads a "kB" field of /proc/PID/status, in bytes.
func status(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func waitFor(ctx context.Context, limit time.Duration, ok func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		done, err := ok()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("timed out after %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, v1alpha1.AddToScheme(s)
}

// bootcNode creates node i's record as the pool reconciler makes it, with
// the status its daemon and the node reconciler have written: Pending on
// the old image.
func bootcNode(ctx context.Context, cl client.Client, pool *v1alpha1.BootcNodePool, i int) error {
	bn := &v1alpha1.BootcNode{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName(i), Labels: map[string]string{v1alpha1.LabelPool: poolName}, Finalizers: []string{v1alpha1.Finalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "BootcNodePool", Name: pool.Name, UID: pool.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec: v1alpha1.BootcNodeSpec{Pool: poolName},
	}
	if err := cl.Create(ctx, bn); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	patch := fmt.Sprintf(`{"status":{"phase":"Pending","booted":{"image":%q,"digest":%q},"daemon":{"phase":"Idle","bootID":%q,"observedGeneration":1}}}`,
		imageRepo+"@"+oldDigest, oldDigest, bootID(i, 0))
	return cl.Status().Patch(ctx, bn, client.RawPatch(types.MergePatchType, []byte(patch)))
}
