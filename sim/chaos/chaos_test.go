package chaos

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	chaosv1alpha1 "github.com/chaos-mesh/chaos-mesh/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/internal/apitest"
	"github.com/bootroll/bootroll/sim/scenario"
)

// crdDir holds the Chaos Mesh CRDs of the pinned chaos-mesh/api module.
const crdDir = "../../kind/chaos-mesh-crds"

func dur(d time.Duration) *time.Duration { return &d }

var opts = Options{
	APIServer: "172.18.0.2",
	Nodes: func(t scenario.Target) ([]string, error) {
		if t.Node != "" {
			return []string{"kind-" + t.Node}, nil
		}
		if t.Group == "nowhere" {
			return nil, errors.New("no such group")
		}
		var out []string
		for i := range t.Count {
			out = append(out, "bootroll-worker"+strings.Repeat("x", i))
		}
		return out, nil
	},
}

// mappedFaults are faults that Chaos Mesh expresses, one of each shape.
func mappedFaults() map[string]scenario.Fault {
	return map[string]scenario.Fault{
		"restart":         {At: dur(time.Minute), ControllerRestart: &scenario.ControllerRestart{}},
		"restart-down":    {At: dur(time.Minute), ControllerRestart: &scenario.ControllerRestart{DownFor: 90 * time.Second}},
		"daemon-crash":    {At: dur(time.Minute), DaemonCrash: &scenario.DaemonCrash{Target: scenario.Target{Group: "workers", Count: 2}, DownFor: 10 * time.Second}},
		"node-crash":      {At: dur(time.Minute), NodeCrash: &scenario.NodeCrash{Target: scenario.Target{Node: "workers-0"}, DownFor: 5 * time.Minute}},
		"power-cycle":     {At: dur(time.Minute), PowerCycle: &scenario.PowerCycle{Target: scenario.Target{Node: "workers-1"}, OffFor: 30 * time.Second}},
		"latency-fixed":   {Window: &scenario.TimeRange{From: time.Minute, To: 6 * time.Minute}, APIErrors: &scenario.APIErrors{Latency: &scenario.Distribution{Dist: scenario.DistFixed, Value: 200 * time.Millisecond}, Who: "controller"}},
		"latency-uniform": {At: dur(time.Minute), APIErrors: &scenario.APIErrors{Latency: &scenario.Distribution{Dist: scenario.DistUniform, Min: 100 * time.Millisecond, Max: 500 * time.Millisecond}, Who: "all"}},
	}
}

func TestObjects(t *testing.T) {
	got := map[string][]client.Object{}
	for name, f := range mappedFaults() {
		objs, err := Objects(name, f, opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = objs
	}
	pod := func(o client.Object) chaosv1alpha1.PodChaosSpec { return o.(*chaosv1alpha1.PodChaos).Spec }
	net := func(o client.Object) chaosv1alpha1.NetworkChaosSpec { return o.(*chaosv1alpha1.NetworkChaos).Spec }

	if s := pod(got["restart"][0]); s.Action != chaosv1alpha1.PodKillAction || s.Duration != nil ||
		s.Selector.LabelSelectors["app.kubernetes.io/component"] != "controller" || s.Mode != chaosv1alpha1.AllMode {
		t.Errorf("controllerRestart, downFor 0: %+v, want a pod-kill of every controller pod", s)
	}
	if s := pod(got["restart-down"][0]); s.Action != chaosv1alpha1.PodFailureAction || s.Duration == nil || *s.Duration != "1m30s" {
		t.Errorf("controllerRestart, downFor 90s: %+v, want pod-failure for 1m30s", s)
	}
	if s := pod(got["daemon-crash"][0]); s.Action != chaosv1alpha1.PodFailureAction || *s.Duration != "10s" ||
		!reflect.DeepEqual(s.Selector.Nodes, []string{"bootroll-worker", "bootroll-workerx"}) ||
		s.Selector.LabelSelectors["app.kubernetes.io/component"] != "daemon" ||
		!reflect.DeepEqual(s.Selector.Namespaces, []string{"bootroll-system"}) {
		t.Errorf("daemonCrash of 2 workers for 10s: %+v", s)
	}
	for _, name := range []string{"node-crash", "power-cycle"} {
		objs := got[name]
		if len(objs) != 2 {
			t.Fatalf("%s: %d objects, want a partition and a daemon failure", name, len(objs))
		}
		p := net(objs[0])
		want := map[string]string{"node-crash": "5m0s", "power-cycle": "30s"}[name]
		if p.Action != chaosv1alpha1.PartitionAction || p.Direction != chaosv1alpha1.Both || *p.Duration != want ||
			!reflect.DeepEqual(p.ExternalTargets, []string{opts.APIServer}) || len(p.Selector.Nodes) != 1 ||
			p.Selector.LabelSelectors["k8s-app"] != "kube-proxy" {
			t.Errorf("%s: partition %+v", name, p)
		}
		if d := pod(objs[1]); d.Action != chaosv1alpha1.PodFailureAction || *d.Duration != want || !reflect.DeepEqual(d.Selector.Nodes, p.Selector.Nodes) {
			t.Errorf("%s: daemon failure %+v, want pod-failure for %s on %v", name, d, want, p.Selector.Nodes)
		}
	}
	if s := net(got["latency-fixed"][0]); s.Action != chaosv1alpha1.DelayAction || s.Delay == nil ||
		s.Delay.Latency != "200ms" || s.Delay.Jitter != "0s" || *s.Duration != "5m0s" || s.Direction != chaosv1alpha1.To ||
		s.Selector.LabelSelectors["app.kubernetes.io/component"] != "controller" {
		t.Errorf("apiErrors latency 200ms on the controller over a 5m window: %+v", s)
	}
	if s := net(got["latency-uniform"][0]); s.Delay.Latency != "300ms" || s.Delay.Jitter != "200ms" || s.Duration != nil ||
		s.Selector.LabelSelectors["app.kubernetes.io/component"] != "" || s.Selector.LabelSelectors["app.kubernetes.io/name"] != "bootroll" {
		t.Errorf("apiErrors latency uniform 100ms-500ms on all from at: %+v", s)
	}
}

// TestUnsupported: the faults Chaos Mesh cannot express fail with an
// UnsupportedError that names them; none gives objects or a plain error.
func TestUnsupported(t *testing.T) {
	lat := &scenario.Distribution{Dist: scenario.DistFixed, Value: time.Second}
	for want, f := range map[string]scenario.Fault{
		"apiErrors.rate":         {APIErrors: &scenario.APIErrors{Rate: 0.1, Codes: []scenario.APIErrorCode{"conflict"}}},
		"apiErrors.verbs":        {APIErrors: &scenario.APIErrors{Verbs: []string{"patch"}, Latency: lat}},
		"apiErrors.latency":      {APIErrors: &scenario.APIErrors{Latency: &scenario.Distribution{Dist: scenario.DistNormal, Mean: time.Second, Stddev: time.Second}}},
		"watchFaults":            {WatchFaults: &scenario.WatchFaults{Drop: 0.1}},
		"controllerCrash":        {ControllerCrash: &scenario.ControllerCrash{AfterWrites: 3}},
		"daemonWriteCrash":       {DaemonWriteCrash: &scenario.DaemonWriteCrash{Rate: 0.1}},
		"longReboot":             {LongReboot: &scenario.LongReboot{Target: scenario.Target{Node: "w-0"}}},
		"bootFailure":            {BootFailure: &scenario.BootFailureFault{Target: scenario.Target{Node: "w-0"}, Mode: scenario.BootNeverReady}},
		"registryOutage":         {RegistryOutage: &scenario.RegistryOutage{For: time.Minute}},
		"slowPulls":              {SlowPulls: &scenario.SlowPulls{For: time.Minute, Factor: 10}},
		"diskFill":               {DiskFill: &scenario.DiskFill{Target: scenario.Target{Node: "w-0"}}},
		"nodeConditionAfterBoot": {NodeConditionAfterBoot: &scenario.NodeConditionAfterBoot{}},
	} {
		objs, err := Objects("x", f, opts)
		var u *UnsupportedError
		if !errors.As(err, &u) || u.Fault != want || !IsUnsupported(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: objects %v, error %v; want an UnsupportedError naming %s", want, objs, err, want)
		}
	}
}

// TestEveryFaultKindIsDecided: each fault kind of the scenario format (the
// oneOf:"kind" fields of scenario.Fault) is named by Kind and either maps to
// objects or is refused with an UnsupportedError naming it, so a new fault
// kind cannot be dropped silently.
func TestEveryFaultKindIsDecided(t *testing.T) {
	ft := reflect.TypeFor[scenario.Fault]()
	kinds := 0
	for i := range ft.NumField() {
		field := ft.Field(i)
		if field.Tag.Get("oneOf") != "kind" {
			continue
		}
		kinds++
		name, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		var f scenario.Fault
		v := reflect.New(field.Type.Elem())
		// Give every fault a target, a duration and a latency where it has
		// them, so that what fails is the mapping, not the example.
		if tf := v.Elem().FieldByName("Target"); tf.IsValid() {
			tf.Set(reflect.ValueOf(scenario.Target{Node: "w-0"}))
		}
		for _, d := range []string{"DownFor", "OffFor"} {
			if df := v.Elem().FieldByName(d); df.IsValid() {
				df.SetInt(int64(time.Minute))
			}
		}
		if lf := v.Elem().FieldByName("Latency"); lf.IsValid() {
			lf.Set(reflect.ValueOf(&scenario.Distribution{Dist: scenario.DistFixed, Value: time.Second}))
		}
		reflect.ValueOf(&f).Elem().Field(i).Set(v)
		if got := Kind(f); got != name {
			t.Errorf("Kind of a fault with %s = %q", name, got)
		}
		objs, err := Objects("x", f, opts)
		var u *UnsupportedError
		switch {
		case err == nil && len(objs) == 0:
			t.Errorf("%s: no objects and no error", name)
		case err != nil && !errors.As(err, &u):
			t.Errorf("%s: %v, want objects or an UnsupportedError", name, err)
		case u != nil && !strings.HasPrefix(u.Fault, name):
			t.Errorf("%s: UnsupportedError names %q", name, u.Fault)
		}
	}
	if kinds < 10 {
		t.Fatalf("found %d fault kinds in scenario.Fault: has the oneOf tag changed?", kinds)
	}
}

func TestBadOptions(t *testing.T) {
	faults := mappedFaults()
	for _, tc := range []struct {
		fault string
		o     Options
		want  string
	}{
		{"node-crash", Options{}, "Options.APIServer"},
		{"latency-fixed", Options{}, "Options.APIServer"},
		{"daemon-crash", Options{}, `target group "workers" needs Options.Nodes`},
		{"daemon-crash", Options{Nodes: func(scenario.Target) ([]string, error) { return nil, nil }}, "resolves to no node"},
		{"daemon-crash", Options{Nodes: opts.Nodes}, ""},
	} {
		_, err := Objects("x", faults[tc.fault], tc.o)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) || IsUnsupported(err) {
			t.Errorf("%s with %+v: error %v, want one containing %q", tc.fault, tc.o, err, tc.want)
		}
	}
}

// TestObjectsPassChaosMeshWebhook: the objects pass the validation of Chaos
// Mesh's own admission webhook (the generated ValidateCreate of the pinned
// chaos-mesh/api), which a dry run on an API server without Chaos Mesh's
// controller does not run.
func TestObjectsPassChaosMeshWebhook(t *testing.T) {
	for name, f := range mappedFaults() {
		objs, err := Objects(name, f, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			var err error
			switch c := o.(type) {
			case *chaosv1alpha1.PodChaos:
				_, err = c.ValidateCreate(context.Background(), c)
			case *chaosv1alpha1.NetworkChaos:
				_, err = c.ValidateCreate(context.Background(), c)
			default:
				t.Fatalf("%s: %T", name, o)
			}
			if err != nil {
				t.Errorf("%s: %s %s refused by Chaos Mesh's webhook validation: %v", name, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
			}
		}
	}
	// The validation does validate: a partition-less delay from both
	// directions with external targets is refused.
	bad, _ := Objects("bad", mappedFaults()["latency-fixed"], opts)
	nc := bad[0].(*chaosv1alpha1.NetworkChaos)
	nc.Spec.Direction = chaosv1alpha1.Both
	if _, err := nc.ValidateCreate(context.Background(), nc); err == nil {
		t.Error("a delay in both directions to external targets passes Chaos Mesh's validation: the check checks nothing")
	}
}

// TestObjectsOnAPIServer: a real kube-apiserver with the vendored Chaos
// Mesh CRDs accepts every object (server-side dry run, strict field
// validation), and refuses one the CRD schema forbids.
func TestObjectsOnAPIServer(t *testing.T) {
	c := apitest.Client(t, apitest.Start(t, crdDir), chaosv1alpha1.AddToScheme)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bootroll-system"}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, f := range mappedFaults() {
		objs, err := Objects(name, f, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			want := o.DeepCopyObject().(client.Object)
			if nc, ok := want.(*chaosv1alpha1.NetworkChaos); ok && nc.Spec.PartitionBehavior == "" {
				nc.Spec.PartitionBehavior = "drop" // the CRD's default, meaningless for a delay
			}
			if err := c.Create(ctx, o, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
				t.Errorf("%s: dry-run create %s %s: %v", name, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
				continue
			}
			n++
			// The API server kept every field (none pruned by the schema).
			if d := cmp.Diff(specOf(want), specOf(o)); d != "" {
				t.Errorf("%s: the API server changed the spec of %s (-sent +stored):\n%s", name, o.GetName(), d)
			}
		}
	}
	if n < 9 {
		t.Errorf("%d objects accepted, want 9", n)
	}
	bad, _ := Objects("bad", mappedFaults()["restart"], opts)
	pc := bad[0].(*chaosv1alpha1.PodChaos)
	pc.Spec.Action = "pod-explode"
	if err := c.Create(ctx, pc, client.DryRunAll, client.FieldValidation("Strict")); err == nil || !strings.Contains(err.Error(), "action") {
		t.Errorf("a PodChaos with action pod-explode: error %v, want one about action: the dry run does not validate", err)
	}
}

func specOf(o client.Object) any {
	switch c := o.(type) {
	case *chaosv1alpha1.PodChaos:
		return c.Spec
	case *chaosv1alpha1.NetworkChaos:
		return c.Spec
	}
	return nil
}
