package clusterrun

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/scenario"
)

// Step is one scenario event or fault at its time from the start of the
// run, with what the cluster target does with it.
type Step struct {
	// At is when it happens; Until, for faults in effect over a span
	// (apiErrors) or that end (a restart's downFor, a crash), when it ends.
	At, Until time.Duration
	// Name is the event's action or the fault's kind (setPoolImage,
	// controllerRestart, ...).
	Name string
	// Event or Fault is what the scenario says; one is set.
	Event *scenario.Event
	Fault *scenario.Fault
	// Skip, when not empty, is why the cluster target does not do it.
	Skip string
	// Approx, when not empty, says how the cluster target does something
	// close to it rather than it.
	Approx string
	// Chaos is true for a fault injected through Chaos Mesh objects.
	Chaos bool
}

// Label names the step in reports: its name and time.
func (s Step) Label() string { return fmt.Sprintf("%s@%s", s.Name, s.At) }

// Notice is a scenario feature or setting the cluster target leaves out
// or only approximates, reported as "skipped: NAME: WHY" or
// "approximated: NAME: HOW".
type Notice struct {
	Name, Why string
	// Approx is true for an approximation, false for a skip.
	Approx bool
}

func (n Notice) String() string {
	if n.Approx {
		return "approximated: " + n.Name + ": " + n.Why
	}
	return "skipped: " + n.Name + ": " + n.Why
}

// PlanOptions are the run's settings that change what can be injected.
type PlanOptions struct {
	// Seed draws the time of faults given by a window.
	Seed uint64
	// ExternalController is true when the controller is one already
	// deployed, which the run cannot restart.
	ExternalController bool
	// ExternalDaemon is true when the daemons are deployed ones, which
	// the run can neither restart nor give the scenario's host faults.
	ExternalDaemon bool
	// Chaos is true when faults that need the cluster's help go through
	// Chaos Mesh objects (sim/chaos) instead of the run's own means.
	Chaos bool
	// OwnKarpenter is true when the run starts the local cluster and, in
	// it, Karpenter itself (at time 0 or at karpenter.installCRDsAt, with
	// the scenario's feature gates); false when the cluster is given
	// (--kubeconfig, --cluster-dir) with its Karpenter running.
	OwnKarpenter bool
}

// Reasons shared by several skips.
const (
	whyHostFault        = "a host fault: the host-mode daemon's simulated hosts take no faults at run time (only what the scenario file says at start)"
	whyExternal         = "the controller is external (--controller=external): the run cannot restart it"
	whyExternalDaemon   = "the daemons are external (--daemon=external): the run cannot restart them, and they play the hosts they were deployed with, not this scenario's"
	whyWatch            = "the API proxy forwards watch streams unchanged; it cannot delay or drop single watch events"
	whyDaemonWriteCrash = "played by the host-mode daemon from the scenario file, timed from its own start (within a second of the run's): it counts each node's daemon's successful writes (and host calls with hostCalls) while the fault is in effect and, at the one the fault crashes it after, that daemon process dies (its later calls fail, as in the twin) and starts again downFor plus host.daemonStartup later"
	whyControllerCrash  = "the controller's API proxy counts its successful writes while the fault is in effect; at the one the fault crashes it after, the proxy withholds that write's answer and refuses every later request of the process, and the run kills it (SIGKILL) and starts a new one downFor later; writes the process had already sent when that write was answered still land (its requests run concurrently)"
	whyDaemonHost       = "played by the host-mode daemon from the scenario file, timed from its own start (the run's start, within a second): the targeted nodes' daemon processes stop, losing what they kept in memory and a stage in flight, and start again downFor later; a window's time and a group's nodes are drawn from host mode's own seeded source"
	whyNodeCrash        = "the node's Ready condition goes False at once (KWOK node-rebooting stage, annotation " + "bootroll.dev/rebooting" + ") for the down time instead of Unknown after the node lifecycle grace period; the host-mode daemon is not told its host went down"
	whyNodeClassIm      = "a KWOKNodeClass has no image; what new nodes boot is the host-mode daemon's"
	whyAdopted          = "the nodes exist from the setup on as KWOK Nodes with a KWOK provider ID; when Karpenter is installed (time 0, or karpenter.installCRDsAt) the run creates their NodeClaims already marked Launched and then starts karpenter-kwok, which registers them instead of launching new ones (real Karpenter does not adopt nodes it did not launch; the twin's fake one does)"
)

// karpenterRepairToleration is the KWOK provider's repair policy for
// Ready False or Unknown (sigs.k8s.io/karpenter/kwok/cloudprovider,
// RepairPolicies, v1.15.0).
const karpenterRepairToleration = 10 * time.Minute

// Plan lists the scenario's events and faults in time order (events
// before faults at the same time, each in file order) with what the
// cluster target does with each, and the notices about the rest of the
// scenario. Window faults get a time drawn from a PRNG seeded with
// o.Seed.
func Plan(sc *scenario.Scenario, o PlanOptions) ([]Step, []Notice) {
	rng := rand.New(rand.NewPCG(o.Seed, 0x636c75737465))
	var steps []Step
	for i := range sc.Events {
		ev := &sc.Events[i]
		name, _ := ev.Action()
		s := Step{At: ev.At, Name: name, Event: ev}
		switch {
		case ev.SetNodeClassImage != nil:
			s.Skip = whyNodeClassIm
		case ev.ScaleWorkload != nil && workloadUnmanaged(sc, ev.ScaleWorkload.Workload):
			s.Skip = "the workload is unmanaged (bare pods); scaling it is not carried out on the cluster target"
		}
		steps = append(steps, s)
	}
	nEvents := len(steps)
	for i := range sc.Faults {
		f := &sc.Faults[i]
		kind := faultKind(f)
		at := time.Duration(0)
		switch {
		case f.At != nil:
			at = *f.At
		case f.Window != nil && f.Span():
			at = f.Window.From // in effect over the whole window
		case f.Window != nil:
			at = f.Window.From + time.Duration(rng.Int64N(int64(f.Window.To-f.Window.From)))
		}
		s := Step{At: at, Name: kind, Fault: f, Until: sc.Limit}
		if f.Window != nil {
			s.Until = f.Window.To
		}
		switch {
		case f.ControllerRestart != nil:
			s.Until = at + f.ControllerRestart.DownFor
			if o.ExternalController {
				s.Skip = whyExternal
			}
		case f.DaemonCrash != nil:
			s.Until = at + f.DaemonCrash.DownFor
			s.Approx = whyDaemonHost
			if o.ExternalDaemon {
				s.Skip, s.Approx = whyExternalDaemon, ""
			}
		case f.NodeCrash != nil:
			s.Until = at + f.NodeCrash.DownFor
			s.Approx = whyNodeCrash
		case f.PowerCycle != nil:
			s.Until = at + f.PowerCycle.OffFor
			s.Approx = whyNodeCrash
		case f.APIErrors != nil:
			if f.APIErrors.Who == "controller" && o.ExternalController {
				s.Skip = whyExternal + "; its requests do not go through the run's API proxy"
			} else if slices.Contains(f.APIErrors.Codes, "timeout") {
				s.Approx = "timeout: the proxy forwards the request or not on a coin and answers 504 either way"
			}
		case f.BootFailure != nil, f.LongReboot != nil:
			s.Approx = "played by the host-mode daemon from the scenario file, timed from its own start (the run's start, within a second)"
			if o.ExternalDaemon {
				s.Skip, s.Approx = whyExternalDaemon, ""
			}
		case f.WatchFaults != nil:
			s.Skip = whyWatch
		case f.ControllerCrash != nil:
			s.Approx = whyControllerCrash
			if o.ExternalController {
				s.Skip, s.Approx = whyExternal+"; its requests do not go through the run's API proxy, which counts its writes", ""
			}
		case f.DaemonWriteCrash != nil:
			s.Approx = whyDaemonWriteCrash
			if o.ExternalDaemon {
				s.Skip, s.Approx = whyExternalDaemon, ""
			}
		default:
			s.Skip = whyHostFault
		}
		if o.Chaos && (f.ControllerCrash == nil || o.ExternalController) && (f.DaemonWriteCrash == nil || o.ExternalDaemon) {
			// (A controller the run started crashes through its API
			// proxy, and the host-mode daemon plays daemonWriteCrash;
			// Chaos Mesh cannot time a crash after a write.)
			chaosStep(&s)
		}
		steps = append(steps, s)
	}
	// Stable: events keep file order and come before faults at one time.
	idx := make([]int, len(steps))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := steps[a].At - steps[b].At; c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		ea, eb := a < nEvents, b < nEvents
		switch {
		case ea && !eb:
			return -1
		case !ea && eb:
			return 1
		}
		return a - b
	})
	out := make([]Step, len(steps))
	for i, j := range idx {
		out[i] = steps[j]
	}
	return out, notices(sc, o)
}

func workloadUnmanaged(sc *scenario.Scenario, name string) bool {
	for _, w := range sc.Workloads {
		if w.Name == name {
			return w.Unmanaged
		}
	}
	return false
}

// faultKind is the YAML key of the fault's kind.
func faultKind(f *scenario.Fault) string {
	v := reflect.ValueOf(f).Elem()
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Tag.Get("oneOf") != "kind" || v.Field(i).IsNil() {
			continue
		}
		name := sf.Tag.Get("json")
		for j := range name {
			if name[j] == ',' {
				return name[:j]
			}
		}
		return name
	}
	return "unknown"
}

// notices are the scenario settings outside events and faults that the
// cluster target leaves out or approximates.
func notices(sc *scenario.Scenario, o PlanOptions) []Notice {
	var out []Notice
	if sc.Bootroll.TestOnly != (scenario.TestOnly{}) {
		out = append(out, Notice{Name: "bootroll.testOnly", Why: "the controller and daemon binaries have no deliberately broken modes; the run uses the real ones"})
	}
	if sc.Profile != "" && sc.Profile != "default" {
		out = append(out, Notice{Name: "profile=" + string(sc.Profile), Why: "the informer caches are the real controller's"})
	}
	for _, p := range sc.Bootroll.Pools {
		if len(p.Windows) > 0 {
			out = append(out, Notice{Name: "start", Approx: true, Why: "maintenance windows are evaluated by the real controller against the real clock, not against the scenario's start " + sc.Start.Format(time.RFC3339)})
			break
		}
	}
	for _, g := range sc.NodeGroups {
		if len(g.Conditions) > 0 {
			out = append(out, Notice{Name: "nodeGroups." + g.Name + ".conditions", Why: "KWOK's node stages own the Node conditions"})
		}
	}
	if k := sc.Karpenter; k != nil {
		if k.Version != "" && k.Version != localcluster.DefaultKarpenterVersion && !o.OwnKarpenter {
			// A local cluster the run starts runs that version
			// (karpenter-kwok-v1.14, make karpenter-v1.14).
			out = append(out, Notice{Name: "karpenter.version=" + string(k.Version), Why: "the cluster's Karpenter runs already, at the version deployed"})
		}
		switch {
		case !o.OwnKarpenter && k.NodeRepair:
			out = append(out, Notice{Name: "karpenter.nodeRepair", Why: "the cluster's Karpenter runs already, with its own feature gates (the run starts Karpenter with NodeRepair only in a local cluster it starts itself)"})
		case o.OwnKarpenter && k.NodeRepair && k.RepairToleration != karpenterRepairToleration:
			out = append(out, Notice{Name: "karpenter.repairToleration=" + k.RepairToleration.String(), Approx: true, Why: "Karpenter's KWOK provider repairs a node NotReady for " + karpenterRepairToleration.String() + " (its repair policy, fixed in the provider)"})
		}
		if k.InstallCRDsAt != nil && !o.OwnKarpenter {
			out = append(out, Notice{Name: "karpenter.installCRDsAt", Why: "the cluster's Karpenter and its CRDs are installed already (the run installs them mid-run only in a local cluster it starts itself)"})
		}
		if o.OwnKarpenter {
			for _, g := range sc.NodeGroups {
				if g.Karpenter != nil {
					out = append(out, Notice{Name: "nodeGroups." + g.Name + ".karpenter", Approx: true, Why: whyAdopted})
				}
			}
		} else {
			for _, np := range k.NodePools {
				if !np.ExpireAfter.Never {
					out = append(out, Notice{Name: "karpenter.nodePools." + np.Name + ".expireAfter", Approx: true, Why: "the NodeClaims are created and launched in the setup, before the scenario's time 0, and expireAfter counts from their creation"})
				}
			}
		}
		for _, nc := range k.NodeClasses {
			out = append(out, Notice{Name: "karpenter.nodeClasses." + nc.Name, Approx: true, Why: "a KWOKNodeClass of that name, its registrationDelay as the nodeRegistrationDelay; the boot image is the host-mode daemon's"})
		}
	}
	return out
}
