package clusterrun

import (
	"fmt"
	"strconv"
	"strings"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/sim/chaos"
	"github.com/bootroll/bootroll/sim/scenario"
)

// ChaosMode says when a run injects faults through Chaos Mesh objects
// (sim/chaos) instead of its own means (killing the processes it started,
// its API proxies).
type ChaosMode string

const (
	// ChaosAuto uses Chaos Mesh when the controller is external (deployed
	// in the cluster, as on kind, where the run cannot kill its process
	// nor put a proxy in front of it) and the cluster serves
	// chaos-mesh.org/v1alpha1.
	ChaosAuto ChaosMode = "auto"
	// ChaosOn requires Chaos Mesh: a run on a cluster without it fails.
	ChaosOn ChaosMode = "on"
	// ChaosOff never uses Chaos Mesh.
	ChaosOff ChaosMode = "off"
)

// ParseChaosMode checks a --chaos-mesh value.
func ParseChaosMode(s string) (ChaosMode, error) {
	switch m := ChaosMode(s); m {
	case ChaosAuto, ChaosOn, ChaosOff:
		return m, nil
	case "":
		return ChaosAuto, nil
	}
	return "", fmt.Errorf("invalid --chaos-mesh %q: want auto, on or off", s)
}

// whyChaos is the approximation note of a fault injected by Chaos Mesh.
const whyChaos = "injected by Chaos Mesh objects (sim/chaos): "

// chaosStep plans a fault for Chaos Mesh: the kinds sim/chaos maps are
// injected by it (with what the mapping changes said), the others are
// skipped with its reason. It reports false for a fault that stays with
// the run's own means (host faults played by the host-mode daemon).
func chaosStep(s *Step) bool {
	f := s.Fault
	if f.ControllerRestart == nil && f.DaemonCrash == nil && f.NodeCrash == nil && f.PowerCycle == nil &&
		!f.Span() {
		return false
	}
	// Built once with stand-ins for what only the cluster knows, to learn
	// whether the fault maps.
	_, err := chaos.Objects("plan", *f, chaos.Options{APIServer: "192.0.2.1", Nodes: func(scenario.Target) ([]string, error) { return []string{"node"}, nil }})
	switch {
	case err != nil:
		s.Skip, s.Approx = err.Error(), ""
	case f.NodeCrash != nil || f.PowerCycle != nil:
		s.Chaos, s.Skip, s.Approx = true, "", whyChaos+"a partition of the node from the API server and its daemon pod failed, for the down time; its other containers keep running"
	default:
		s.Chaos, s.Skip, s.Approx = true, "", ""
	}
	return true
}

// chaosServed reports whether the cluster serves Chaos Mesh's API.
func chaosServed(m meta.RESTMapper) (bool, error) {
	_, err := m.RESTMapping(chaosv1alpha1.SchemeGroupVersion.WithKind("PodChaos").GroupKind(), chaosv1alpha1.SchemeGroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, err
}

// useChaos decides whether the run injects faults through Chaos Mesh.
func (r *runner) useChaos() (bool, error) {
	mode := r.opts.Chaos
	if mode == "" {
		mode = ChaosAuto
	}
	if mode == ChaosOff || (mode == ChaosAuto && !r.opts.ExternalController) {
		return false, nil
	}
	served, err := chaosServed(r.c.RESTMapper())
	if err != nil {
		return false, fmt.Errorf("looking for Chaos Mesh: %w", err)
	}
	if !served && mode == ChaosOn {
		return false, fmt.Errorf("--chaos-mesh=on: the cluster does not serve %s (install Chaos Mesh)", chaosv1alpha1.SchemeGroupVersion)
	}
	return served, nil
}

// apiServerAddress is the API server's address as the nodes reach it, the
// target of partitions and latency: Options.APIServerAddress, or the
// first endpoint of the default/kubernetes Service.
func (r *runner) apiServerAddress() (string, error) {
	if r.opts.APIServerAddress != "" {
		return r.opts.APIServerAddress, nil
	}
	var l discoveryv1.EndpointSliceList
	if err := r.c.List(r.ctx, &l, client.InNamespace("default"), client.MatchingLabels{discoveryv1.LabelServiceName: "kubernetes"}); err != nil {
		return "", fmt.Errorf("finding the API server's address (the kubernetes Service's endpoints): %w", err)
	}
	for _, s := range l.Items {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 {
				return e.Addresses[0], nil
			}
		}
	}
	return "", fmt.Errorf("the kubernetes Service in namespace default has no endpoint: give the API server's address as the nodes reach it")
}

// injectChaos creates the Chaos Mesh objects of a fault step and deletes
// them when the fault ends (or at the end of the run).
func (r *runner) injectChaos(s Step) {
	r.chaosN++
	index := r.chaosN
	addr, err := r.apiServerAddress()
	if err != nil && (s.Fault.NodeCrash != nil || s.Fault.PowerCycle != nil || s.Fault.APIErrors != nil) {
		r.notices = append(r.notices, Notice{Name: s.Label(), Why: "failed: " + err.Error()})
		return
	}
	// Unique in the namespace across runs: the step's index and the run's
	// start (objects of a run that died are not reused).
	name := "bootroll-" + strconv.Itoa(index) + "-" + strconv.FormatInt(r.start.Unix(), 36)
	objs, err := chaos.Objects(name, *s.Fault, chaos.Options{
		Namespace: r.opts.ChaosNamespace,
		APIServer: addr,
		Nodes: func(t scenario.Target) ([]string, error) {
			if t.Node != "" {
				return []string{r.act.nodeName(r.ctx, t.Node)}, nil
			}
			return Targets(t, r.nodes, r.rng), nil
		},
	})
	if err != nil {
		r.notices = append(r.notices, Notice{Name: s.Label(), Why: "failed: " + err.Error()})
		return
	}
	var made []string
	for _, o := range objs {
		if err := r.c.Create(r.ctx, o); err != nil {
			r.notices = append(r.notices, Notice{Name: s.Label(), Why: fmt.Sprintf("failed: creating %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)})
			continue
		}
		made = append(made, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetNamespace()+"/"+o.GetName())
		r.chaosObjs = append(r.chaosObjs, o)
	}
	r.emit("step.chaos", "", map[string]any{"name": s.Name, "objects": strings.Join(made, ",")})
	if s.Until > s.At && s.Until < r.sc.Limit {
		r.at(r.start.Add(s.Until), func() { r.removeChaos(objs) })
	}
}

// removeChaos deletes Chaos Mesh objects (Chaos Mesh undoes what they did).
func (r *runner) removeChaos(objs []client.Object) {
	for _, o := range objs {
		if err := r.c.Delete(r.ctx, o); err != nil && !apierrors.IsNotFound(err) {
			r.notices = append(r.notices, Notice{Name: o.GetName(), Why: "could not delete the Chaos Mesh object: " + err.Error()})
		}
	}
}
