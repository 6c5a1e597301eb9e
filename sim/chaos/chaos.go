// Package chaos turns the scenario faults that need a cluster's help
// into Chaos Mesh objects (PodChaos and NetworkChaos of chaos-mesh.org/v1alpha1),
// for a cluster where bootroll runs as pods (kind with the kind/overlay
// deployment) and Chaos Mesh is installed.
//
// What maps:
//
//	controllerRestart  PodChaos on the controller's pods: pod-kill when
//	                   downFor is 0, pod-failure for downFor otherwise
//	daemonCrash        PodChaos pod-failure for downFor on the daemon pods of
//	                   the targeted nodes (pod-kill when downFor is 0)
//	nodeCrash,         NetworkChaos partition between the targeted nodes and
//	powerCycle         the API server, plus the daemonCrash above, both for
//	                   downFor (offFor): the Node goes Unknown and its pods
//	                   stay bound as after a crash, but the node's other
//	                   containers keep running
//	apiErrors          latency only (rate 0, every verb): NetworkChaos delay
//	                   of the packets from the hit pods to the API server
//
// Every other fault returns an *UnsupportedError that names it: errors with
// HTTP status codes, per-verb faults and watch faults need a proxy in front
// of the API server (the API server speaks TLS, which Chaos Mesh's HTTPChaos
// cannot rewrite), crashes after the n-th write need the process's own help,
// and host faults (boot failures, slow pulls, disk fill...) are played by the
// daemon's simulated hosts, not by the cluster.
//
// The package only builds objects; when to create and delete them (a fault's
// at or window, on wall-clock time) is the runner's job. Building an object
// reads no clock: durations come from the fault.
package chaos

import (
	"errors"
	"fmt"
	"strings"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/scenario"
)

// Pod labels of the bootroll deployment (config/manager, config/daemon).
const (
	labelName      = "app.kubernetes.io/name"
	labelComponent = "app.kubernetes.io/component"
	appName        = "bootroll"
)

// Options say where bootroll runs in the cluster and how a fault's targets
// are found there.
type Options struct {
	// Namespace holds bootroll's pods and the Chaos Mesh objects. Default
	// bootroll-system.
	Namespace string

	// Nodes resolves a fault's target (a scenario node name, or count nodes
	// of a group) to the names of cluster Nodes. Nil resolves only a target
	// that names one node, to that name.
	Nodes func(scenario.Target) ([]string, error)

	// APIServer is the address of the kube-apiserver as the nodes reach it
	// (an IP, or a CIDR or a host name that Chaos Mesh resolves), the
	// external target of partitions and latency. Required for those faults.
	APIServer string

	// NodeNetworkPods selects, on each targeted node, one host-network pod
	// whose network namespace is the node's, for partitions: Chaos Mesh
	// acts on pods, and a host-network pod's rules hold for the kubelet too.
	// Default kube-proxy (namespace kube-system, k8s-app=kube-proxy), which
	// kind runs on every node.
	NodeNetworkPods *chaosv1alpha1.GenericSelectorSpec
}

// UnsupportedError says that a fault cannot be expressed as Chaos Mesh
// objects, and why.
type UnsupportedError struct {
	// Fault is the fault's kind as the scenario file names it, with the
	// field at fault when only part of it does not map
	// (e.g. "apiErrors.rate").
	Fault string
	// Reason says what would be needed instead.
	Reason string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("fault %s cannot be expressed as Chaos Mesh objects: %s", e.Fault, e.Reason)
}

// IsUnsupported reports whether err says that a fault cannot be expressed
// as Chaos Mesh objects (as opposed to a bad fault or bad options).
func IsUnsupported(err error) bool {
	var u *UnsupportedError
	return errors.As(err, &u)
}

// Kind returns the fault's kind as the scenario file names it
// (controllerRestart, daemonCrash, ...), or "" when it sets none.
func Kind(f scenario.Fault) string {
	switch {
	case f.ControllerRestart != nil:
		return "controllerRestart"
	case f.DaemonCrash != nil:
		return "daemonCrash"
	case f.NodeCrash != nil:
		return "nodeCrash"
	case f.APIErrors != nil:
		return "apiErrors"
	case f.WatchFaults != nil:
		return "watchFaults"
	case f.ControllerCrash != nil:
		return "controllerCrash"
	case f.DaemonWriteCrash != nil:
		return "daemonWriteCrash"
	case f.PowerCycle != nil:
		return "powerCycle"
	case f.LongReboot != nil:
		return "longReboot"
	case f.ClockSkew != nil:
		return "clockSkew"
	case f.BootFailure != nil:
		return "bootFailure"
	case f.RegistryOutage != nil:
		return "registryOutage"
	case f.SlowPulls != nil:
		return "slowPulls"
	case f.DiskFill != nil:
		return "diskFill"
	case f.NodeConditionAfterBoot != nil:
		return "nodeConditionAfterBoot"
	case f.DaemonSetNotReadyAfterBoot != nil:
		return "daemonSetNotReadyAfterBoot"
	case f.ReadyFlapsAfterBoot != nil:
		return "readyFlapsAfterBoot"
	}
	return ""
}

const (
	needsProxy = "the API server speaks TLS, so HTTP-level faults need bootroll's API proxy in front of it, not Chaos Mesh"
	needsHost  = "it is a host fault, played by the daemon's simulated hosts (--simulate-hosts), not by the cluster"
)

// Objects returns the Chaos Mesh objects that inject fault f. name prefixes
// their names (for example "<scenario>-<index of the fault>"); it must be a
// DNS label short enough for the suffixes ("-partition", 10 characters).
// A fault that Chaos Mesh cannot express returns an *UnsupportedError naming
// it; nothing is dropped silently.
func Objects(name string, f scenario.Fault, o Options) ([]client.Object, error) {
	if o.Namespace == "" {
		o.Namespace = "bootroll-system"
	}
	kind := Kind(f)
	switch {
	case f.ControllerRestart != nil:
		return []client.Object{podChaos(name, o.Namespace, f.ControllerRestart.DownFor,
			selector(o.Namespace, "controller", nil))}, nil

	case f.DaemonCrash != nil:
		nodes, err := resolve(kind, f.DaemonCrash.Target, o)
		if err != nil {
			return nil, err
		}
		return []client.Object{podChaos(name, o.Namespace, f.DaemonCrash.DownFor,
			selector(o.Namespace, "daemon", nodes))}, nil

	case f.NodeCrash != nil:
		return nodeDown(name, kind, f.NodeCrash.Target, f.NodeCrash.DownFor, o)
	case f.PowerCycle != nil:
		return nodeDown(name, kind, f.PowerCycle.Target, f.PowerCycle.OffFor, o)

	case f.APIErrors != nil:
		return apiLatency(name, f, o)

	case f.WatchFaults != nil:
		return nil, &UnsupportedError{kind, "watch events cannot be told from other API traffic below HTTP; " + needsProxy}
	case f.ControllerCrash != nil, f.DaemonWriteCrash != nil:
		return nil, &UnsupportedError{kind, "a crash right after the n-th successful write needs the process's own help; Chaos Mesh kills pods at a time, not after a write"}
	case f.ClockSkew != nil:
		return nil, &UnsupportedError{kind, "not mapped yet: Chaos Mesh's TimeChaos would shift the daemon container's clock, but its CRD is not among the vendored ones (kind/chaos-mesh-crds)"}
	case kind == "":
		return nil, errors.New("fault sets no kind")
	default:
		return nil, &UnsupportedError{kind, needsHost}
	}
}

// resolve returns the cluster Nodes of a fault's target.
func resolve(kind string, t scenario.Target, o Options) ([]string, error) {
	if o.Nodes != nil {
		nodes, err := o.Nodes(t)
		if err != nil {
			return nil, fmt.Errorf("%s: resolving its target: %w", kind, err)
		}
		if len(nodes) == 0 {
			return nil, fmt.Errorf("%s: its target resolves to no node", kind)
		}
		return nodes, nil
	}
	if t.Node == "" {
		return nil, fmt.Errorf("%s: target group %q needs Options.Nodes to pick the cluster's nodes", kind, t.Group)
	}
	return []string{t.Node}, nil
}

// selector picks bootroll's pods of one component, on nodes when given.
func selector(ns, component string, nodes []string) chaosv1alpha1.PodSelector {
	labels := map[string]string{labelName: appName}
	if component != "" {
		labels[labelComponent] = component
	}
	return chaosv1alpha1.PodSelector{
		Selector: chaosv1alpha1.PodSelectorSpec{
			GenericSelectorSpec: chaosv1alpha1.GenericSelectorSpec{Namespaces: []string{ns}, LabelSelectors: labels},
			Nodes:               nodes,
		},
		Mode: chaosv1alpha1.AllMode,
	}
}

// podChaos kills the selected pods (downFor 0: they restart at once) or
// keeps their containers failed for downFor, after which they start anew,
// as a process that is down for downFor.
func podChaos(name, ns string, downFor time.Duration, sel chaosv1alpha1.PodSelector) *chaosv1alpha1.PodChaos {
	spec := chaosv1alpha1.PodChaosSpec{ContainerSelector: chaosv1alpha1.ContainerSelector{PodSelector: sel}}
	if downFor <= 0 {
		spec.Action = chaosv1alpha1.PodKillAction
	} else {
		spec.Action = chaosv1alpha1.PodFailureAction
		spec.Duration = duration(downFor)
	}
	return &chaosv1alpha1.PodChaos{
		TypeMeta:   metav1.TypeMeta{APIVersion: chaosv1alpha1.SchemeGroupVersion.String(), Kind: "PodChaos"},
		ObjectMeta: meta(name, ns),
		Spec:       spec,
	}
}

// nodeDown cuts the targeted nodes off the API server and fails their
// daemons for downFor.
func nodeDown(name, kind string, t scenario.Target, downFor time.Duration, o Options) ([]client.Object, error) {
	if o.APIServer == "" {
		return nil, fmt.Errorf("%s: a partition from the API server needs Options.APIServer", kind)
	}
	if downFor <= 0 {
		return nil, fmt.Errorf("%s: down for %v: a partition needs a positive duration", kind, downFor)
	}
	nodes, err := resolve(kind, t, o)
	if err != nil {
		return nil, err
	}
	hostPods := chaosv1alpha1.GenericSelectorSpec{Namespaces: []string{"kube-system"}, LabelSelectors: map[string]string{"k8s-app": "kube-proxy"}}
	if o.NodeNetworkPods != nil {
		hostPods = *o.NodeNetworkPods
	}
	partition := &chaosv1alpha1.NetworkChaos{
		TypeMeta:   metav1.TypeMeta{APIVersion: chaosv1alpha1.SchemeGroupVersion.String(), Kind: "NetworkChaos"},
		ObjectMeta: meta(name+"-partition", o.Namespace),
		Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector: chaosv1alpha1.PodSelector{
				Selector: chaosv1alpha1.PodSelectorSpec{GenericSelectorSpec: hostPods, Nodes: nodes},
				Mode:     chaosv1alpha1.AllMode,
			},
			Action: chaosv1alpha1.PartitionAction,
			// Dropped, not refused: a crashed node answers nothing.
			PartitionBehavior: chaosv1alpha1.DropPartitionBehavior,
			Direction:         chaosv1alpha1.Both,
			ExternalTargets:   []string{o.APIServer},
			Duration:          duration(downFor),
		},
	}
	daemons := podChaos(name+"-daemon", o.Namespace, downFor, selector(o.Namespace, "daemon", nodes))
	return []client.Object{partition, daemons}, nil
}

// apiLatency maps the latency of an apiErrors fault to a delay of the
// packets from the hit pods to the API server.
func apiLatency(name string, f scenario.Fault, o Options) ([]client.Object, error) {
	e := f.APIErrors
	if e.Rate > 0 {
		return nil, &UnsupportedError{"apiErrors.rate", fmt.Sprintf("failing requests with %v: %s", codes(e.Codes), needsProxy)}
	}
	if len(e.Verbs) > 0 {
		return nil, &UnsupportedError{"apiErrors.verbs", fmt.Sprintf("slowing only %s: verbs cannot be told apart below HTTP; %s", strings.Join(e.Verbs, ", "), needsProxy)}
	}
	if e.Latency == nil {
		return nil, errors.New("apiErrors: neither rate nor latency: nothing to inject")
	}
	if o.APIServer == "" {
		return nil, errors.New("apiErrors: latency towards the API server needs Options.APIServer")
	}
	delay, err := delaySpec(e.Latency)
	if err != nil {
		return nil, err
	}
	component := ""
	switch e.Who {
	case "controller", "daemon":
		component = string(e.Who)
	}
	nc := &chaosv1alpha1.NetworkChaos{
		TypeMeta:   metav1.TypeMeta{APIVersion: chaosv1alpha1.SchemeGroupVersion.String(), Kind: "NetworkChaos"},
		ObjectMeta: meta(name, o.Namespace),
		Spec: chaosv1alpha1.NetworkChaosSpec{
			PodSelector:     selector(o.Namespace, component, nil),
			Action:          chaosv1alpha1.DelayAction,
			Direction:       chaosv1alpha1.To,
			ExternalTargets: []string{o.APIServer},
			TcParameter:     chaosv1alpha1.TcParameter{Delay: delay},
		},
	}
	// In effect over the window, or from at to the end of the run: then no
	// duration, and the runner deletes the object at the end.
	if w := f.Window; w != nil {
		nc.Spec.Duration = duration(w.To - w.From)
	}
	return []client.Object{nc}, nil
}

// delaySpec maps a latency distribution to netem's delay: a fixed value
// exactly, a uniform one as its middle plus or minus half its width (netem
// draws jitter uniformly when no distribution table is given, and Chaos
// Mesh gives none), draws not correlated. Written out, not left to Chaos
// Mesh's defaulting webhook, whose validation refuses them empty. Normal and lognormal draws have no netem equivalent
// that Chaos Mesh can ask for.
func delaySpec(d *scenario.Distribution) (*chaosv1alpha1.DelaySpec, error) {
	switch d.Dist {
	case scenario.DistFixed:
		return &chaosv1alpha1.DelaySpec{Latency: d.Value.String(), Jitter: "0s", Correlation: "0"}, nil
	case scenario.DistUniform:
		return &chaosv1alpha1.DelaySpec{Latency: ((d.Min + d.Max) / 2).String(), Jitter: ((d.Max - d.Min) / 2).String(), Correlation: "0"}, nil
	}
	return nil, &UnsupportedError{"apiErrors.latency", fmt.Sprintf("dist %s: Chaos Mesh's delay is fixed or uniform (latency plus or minus jitter)", d.Dist)}
}

func codes(cs []scenario.APIErrorCode) []string {
	if len(cs) == 0 {
		return []string{"internalError"}
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

func meta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: ns,
		Labels:    map[string]string{labelName: appName, "app.kubernetes.io/managed-by": "bootroll-scenario"},
	}
}

// duration writes d as Chaos Mesh durations are written (Go's form).
func duration(d time.Duration) *string {
	s := d.String()
	return &s
}
