package apiserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/sim/apiserver"
)

// roundTrip returns obj after a trip through JSON: the form a real server
// stores.
func roundTrip[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// fieldPatchObjects are objects of several kinds, with finalizers, in JSON
// round-trip form.
func fieldPatchObjects(t *testing.T) []client.Object {
	at := metav1.NewTime(t0.Add(-time.Hour))
	meta := func(ns, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Namespace:   ns,
			Name:        name,
			Finalizers:  []string{"bootroll.dev/f"},
			Labels:      map[string]string{"bootroll.dev/pool": "a", "kubernetes.io/hostname": name},
			Annotations: map[string]string{"bootroll.dev/state": "idle", "a.b/c.d": "e"},
		}
	}
	n := node("n1")
	n.ObjectMeta = meta("", "n1")
	n.Spec.Taints = []corev1.Taint{
		{Key: "bootroll.dev/updating", Effect: corev1.TaintEffectNoSchedule},
		{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute, TimeAdded: &at},
	}
	n.Status = corev1.NodeStatus{
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3900m")},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: at, LastTransitionTime: at,
		}},
		NodeInfo: corev1.NodeSystemInfo{BootID: "b1", OSImage: "os:1"},
		Images:   []corev1.ContainerImage{{Names: []string{"img:1", "img@sha256:1"}, SizeBytes: 100}},
	}

	p := pod("ns", "p", "n1")
	p.ObjectMeta = meta("ns", "p")
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs"}}
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	p.Spec.Tolerations = []corev1.Toleration{{Key: "bootroll.dev/updating", Operator: corev1.TolerationOpExists}}
	p.Status = corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at}},
		PodIP:      "10.0.0.1",
		StartTime:  &at,
	}

	bn := bootcNode("n1")
	bn.ObjectMeta = meta("", "n1")
	bn.Spec.DesiredImage = "img:2"
	bn.Spec.PinnedImageSets = []v1alpha1.NodePinnedImageSet{{
		Name: "set", Images: []string{"a", "b"}, Generation: 3,
		Throttle: &metav1.Duration{Duration: time.Second}, MinFreeAfterPull: new(intstr.FromString("10%")),
	}}
	bn.Status = v1alpha1.BootcNodeStatus{
		Booted: &v1alpha1.HostImage{Image: "img:1", Digest: "sha256:1", Timestamp: &at},
		Daemon: v1alpha1.DaemonStatus{
			Phase: "Idle", BootID: "b1",
			LastReboot: &v1alpha1.RebootRecord{Image: "img:1", BootID: "b0", At: at},
		},
		Phase: "Idle",
		Rollout: v1alpha1.RolloutStatus{
			PhaseSince: &at, PriorUnschedulable: new(false), AddedAnnotations: []string{"a.b/c.d"},
		},
	}

	pool := &v1alpha1.BootcNodePool{
		ObjectMeta: meta("", "a"),
		Spec: v1alpha1.BootcNodePoolSpec{
			NodeSelector: map[string]string{"bootroll.dev/pool": "a", "node-role.kubernetes.io/worker": ""},
			Image:        "img:2",
			Rollout:      v1alpha1.RolloutSpec{MaxUnavailable: new(intstr.FromInt32(2))},
		},
		Status: v1alpha1.BootcNodePoolStatus{
			ObservedGeneration: 1,
			TargetImage:        "img:2",
			Nodes:              3,
			Phases:             []v1alpha1.PhaseCount{{Phase: "Idle", Nodes: 2}, {Phase: "Updating", Nodes: 1}},
			Slots:              []v1alpha1.Slot{{Node: "n1", Image: "img:2", Since: at}},
			Conditions: []metav1.Condition{{
				Type: v1alpha1.ConditionUpToDate, Status: metav1.ConditionFalse, Reason: "Rolling", LastTransitionTime: at,
			}},
		},
	}

	cm := &corev1.ConfigMap{ObjectMeta: meta("ns", "cm")} // no data: left out of its JSON
	cmData := &corev1.ConfigMap{ObjectMeta: meta("ns", "cm-data"), Data: map[string]string{"k": "v", "a.b/c": "d"}}

	return []client.Object{
		roundTrip(t, n), roundTrip(t, p), roundTrip(t, bn), roundTrip(t, pool),
		roundTrip(t, cm), roundTrip(t, cmData),
	}
}

// fieldPatches are merge patches to apply to each of fieldPatchObjects; RV
// stands for the stored resourceVersion.
var fieldPatches = []struct {
	name, patch string
	whole       bool // must take the whole path
}{
	{name: "lock and status", patch: `{"metadata":{"resourceVersion":"RV"},"status":{"phase":"Updating"}}`},
	{name: "stale lock", patch: `{"metadata":{"resourceVersion":"999"},"status":{"phase":"Updating"}}`},
	{name: "other uid", patch: `{"metadata":{"uid":"other"}}`},
	{name: "empty", patch: `{}`},
	{name: "same status", patch: `{"status":{"phase":"Idle"}}`},
	{name: "status in a main patch", patch: `{"status":{"phase":"Ignored","nodes":9}}`},
	{name: "nested merge", patch: `{"status":{"daemon":{"phase":"Staged","lastReboot":{"bootID":"b2"}},"nodeInfo":{"bootID":"b2"}}}`},
	{name: "spec merge", patch: `{"spec":{"rollout":{"maxUnavailable":"50%"},"unschedulable":true,"pool":"b"}}`},
	{name: "labels and annotations", patch: `{"metadata":{"labels":{"bootroll.dev/pool":"b","x.y/z":"1"},"annotations":{"a.b/c.d":null,"bootroll.dev/x":"y"}}}`},
	{name: "dotted and slashed keys", patch: `{"spec":{"nodeSelector":{"kubernetes.io/os":"linux","node-role.kubernetes.io/worker":null}},"status":{"capacity":{"example.com/gpu":"2","cpu":"8"}},"data":{"a.b/c":null,"x/y.z":"1"}}`},
	{name: "status null", patch: `{"status":null}`},
	{name: "spec null", patch: `{"spec":null}`},
	{name: "data null", patch: `{"data":null,"immutable":true}`},
	{name: "metadata null", patch: `{"metadata":null}`},
	{name: "nulls deep", patch: `{"metadata":{"labels":null},"status":{"booted":null,"daemon":{"lastReboot":null},"rollout":{"phaseSince":null},"startTime":null,"capacity":{"memory":null}}}`},
	{name: "null of an absent key", patch: `{"status":{"staged":null,"nominatedNodeName":null},"binaryData":null}`},
	{name: "absent keys", patch: `{"status":{"staged":{"image":"img:3","timestamp":null},"hostIP":"10.0.0.2"},"spec":{"providerID":"aws:///x"},"binaryData":{"b":"AAE="}}`},
	{name: "array replacement", patch: `{"spec":{"taints":[{"key":"k2","value":null,"effect":"NoSchedule"}],"containers":[{"name":"c","image":"i"}]},"status":{"slots":[],"conditions":[{"type":"Ready","status":"False","lastTransitionTime":"2030-01-01T00:00:05Z","reason":"r","message":null}]}}`},
	{name: "arrays of nulls", patch: `{"status":{"images":[null,{"names":null}],"phases":null},"spec":{"pinnedImageSets":[{"name":"s","images":["x"],"generation":1,"throttle":null}]}}`},
	{name: "server-managed metadata", patch: `{"metadata":{"generation":9,"creationTimestamp":"2031-01-01T00:00:00Z","deletionTimestamp":null}}`},
	{name: "finalizers removed", patch: `{"metadata":{"finalizers":null}}`},
	{name: "finalizer added", patch: `{"metadata":{"finalizers":["bootroll.dev/f","new"]}}`},
	{name: "rename", patch: `{"metadata":{"name":"other"}}`},
	{name: "wrong type", patch: `{"spec":{"unschedulable":"yes","pool":5,"containers":{}}}`},
	{name: "spaces and escapes", patch: " \n{ \"st\\u0061tus\" : { \"phase\" : \"Updating\\u003c\" } } \n"},
	// Nested patches: applied field by field below the top level.
	{name: "lock only", patch: `{"metadata":{"resourceVersion":"RV"}}`},
	{name: "stale lock only", patch: `{"metadata":{"resourceVersion":"999"}}`},
	{name: "lock and uid", patch: `{"metadata":{"resourceVersion":"RV","uid":null,"generation":9}}`},
	{name: "rollout sub-fields", patch: `{"metadata":{"resourceVersion":"RV"},"status":{"phase":"Draining","rollout":{"phaseSince":"2030-01-01T00:00:07Z","reason":"Draining","message":"evicting 3 pods"}}}`},
	{name: "same sub-fields", patch: `{"metadata":{"resourceVersion":"RV","labels":{"bootroll.dev/pool":"a"}},"status":{"phase":"Idle","rollout":{"priorUnschedulable":false,"addedAnnotations":["a.b/c.d"],"phaseSince":"2029-12-31T23:00:00.4Z"},"booted":{"image":"img:1"},"podIP":"10.0.0.1","nodeInfo":{"bootID":"b1"}},"spec":{"unschedulable":false,"desiredImage":"img:2","nodeName":"n1","rollout":{"maxUnavailable":2}}}`},
	{name: "empty objects", patch: `{"status":{"rollout":{},"daemon":{}},"spec":{},"metadata":{}}`},
	{name: "booted pointer", patch: `{"status":{"booted":{"image":"img:9","timestamp":"2030-01-01T00:00:00Z","version":"9"},"daemon":{"lastReboot":{"bootID":"b7","at":"2030-01-01T00:00:01Z"}}}}`},
	{name: "pointers from nil", patch: `{"status":{"staged":{"image":"img:3","digest":null,"timestamp":null},"rollbackImage":{},"startTime":"2030-01-01T00:00:00Z"},"spec":{"configSource":{"configMap":{"name":"c"}}}}`},
	{name: "spec sub-fields", patch: `{"metadata":{"resourceVersion":"RV"},"spec":{"desiredImage":"img:3","desiredState":"Booted","nodeName":"n2","image":"img:4","rollout":{"maxUnavailable":"20%"}}}`},
	{name: "cordon", patch: `{"metadata":{"annotations":{"bootroll.dev/state":"draining","x/y":"z"},"resourceVersion":"RV"},"spec":{"unschedulable":true}}`},
	{name: "map edge cases", patch: `{"metadata":{"labels":{"a":"1","a":null,"b":null,"kubernetes.io/hostname":"n1","c":"x","c":"y"},"annotations":{}}}`},
	{name: "map escapes", patch: `{"metadata":{"annotations":{"k\u00e9":"v\u00e9","\u0041":"\"q\"","raw":"été"}}}`},
	{name: "map value not a string", patch: `{"metadata":{"labels":{"a":1}}}`},
	{name: "nested unknown key", patch: `{"status":{"rollout":{"unknownKey":1,"reason":"x"},"phase":"Updating","unknown":{"a":null}},"spec":{"unknown":[1]}}`},
	{name: "nested case variant", patch: `{"status":{"Phase":"X","daemon":{"BootID":"b9"}},"metadata":{"Labels":{"a":"b"}}}`},
	{name: "nested case variant and exact", patch: `{"status":{"rollout":{"reason":"a","Reason":"b"},"phase":"P","PHASE":"Q"}}`},
	{name: "same BootcNode", patch: `{"metadata":{"resourceVersion":"RV"},"status":{"phase":"Idle","rollout":{"priorUnschedulable":false,"addedAnnotations":["a.b/c.d"],"phaseSince":"2029-12-31T23:00:00.4Z"},"booted":{"image":"img:1"},"daemon":{"lastReboot":{"bootID":"b0"}}}}`},
	{name: "same Node", patch: `{"metadata":{"resourceVersion":"RV","annotations":{"a.b/c.d":"e"}},"spec":{"unschedulable":false,"taints":[{"key":"bootroll.dev/updating","effect":"NoSchedule"},{"key":"k","value":"v","effect":"NoExecute","timeAdded":"2029-12-31T23:00:00Z"}]},"status":{"nodeInfo":{"bootID":"b1"}}}`},
	{name: "nested case variant of an empty field", patch: `{"status":{"rollout":{"Message":"m"},"daemon":{"LastError":"e"},"HostIP":"h"},"spec":{"ProviderID":"p"}}`},
	{name: "nested duplicate objects", patch: `{"status":{"rollout":{"reason":"a"},"rollout":{"message":"b"},"daemon":{"phase":"Staged"},"daemon":null}}`},
	{name: "nested duplicate", patch: `{"status":{"phase":"A","phase":"B","rollout":{"reason":"a","reason":null}}}`},
	{name: "duplicate lock", patch: `{"metadata":{"resourceVersion":"999","resourceVersion":"RV"},"status":{"phase":"Updating"}}`},
	{name: "nested escaped key", patch: `{"status":{"ph\u0061se":"Updating","rollout":{"re\u0061son":"x"}}}`},
	{name: "nested nulls", patch: `{"status":{"rollout":{"phaseSince":null,"priorUnschedulable":null,"addedAnnotations":null},"daemon":{"lastReboot":{"at":null}},"nodeInfo":{"bootID":null}},"spec":{"taints":null,"pinnedImageSets":null}}`},
	{name: "nested wrong types", patch: `{"status":{"rollout":{"failures":"3"},"booted":{"image":5}}}`},
	{name: "string into a struct", patch: `{"status":{"booted":"img:1","rollout":"x","nodeInfo":"y"}}`},
	{name: "array into a struct", patch: `{"status":{"rollout":[{"reason":null}],"booted":[1],"nodeInfo":[]}}`},
	{name: "number lock", patch: `{"metadata":{"resourceVersion":5}}`},
	{name: "metadata array", patch: `{"metadata":[]}`},
	{name: "numbers", patch: `{"status":{"rollout":{"failures":-7},"observedGeneration":12,"daemon":{"observedGeneration":0,"stageAttempts":3}}}`},
	{name: "numbers out of range", patch: `{"status":{"daemon":{"stageAttempts":2147483648}}}`},
	{name: "numbers not integers", patch: `{"status":{"rollout":{"failures":1.0},"observedGeneration":1e1}}`},
	{name: "strings", patch: `{"status":{"phase":"\u00e9t\u00e9 \"q\" \t","rollout":{"reason":"café","message":"<&>"}}}`},
	{name: "invalid UTF-8", patch: "{\"status\":{\"phase\":\"a\xffb\"},\"metadata\":{\"labels\":{\"k\":\"\xfe\"}}}"},
	{name: "bools", patch: `{"status":{"rollout":{"cordoned":true,"priorUnschedulable":true}},"spec":{"rollback":true,"unschedulable":false}}`},
	{name: "bool strings", patch: `{"status":{"rollout":{"cordoned":"true"}},"spec":{"unschedulable":1}}`},
	{name: "times", patch: `{"status":{"rollout":{"phaseSince":"2030-01-01T00:00:00.5Z","retryAfter":"2030-01-01T01:00:00+02:00"},"startTime":"2030-01-01T00:00:00Z"}}`},
	{name: "bad time", patch: `{"status":{"rollout":{"phaseSince":"yesterday"}}}`},
	{name: "taints replaced", patch: `{"metadata":{"resourceVersion":"RV"},"spec":{"taints":[{"key":"bootroll.dev/updating","effect":"NoSchedule"},{"key":"k","value":"v","effect":"NoExecute","timeAdded":"2029-12-31T23:00:00Z"}]}}`},
	{name: "quantities", patch: `{"status":{"capacity":{"cpu":"4"},"allocatable":{"cpu":"3.9"}},"spec":{"containers":[{"name":"main","image":"img","resources":{"requests":{"cpu":"0.1"}}}]}}`},
	{name: "case variant", patch: `{"Status":{"phase":"Updating"}}`, whole: true},
	{name: "case variant and exact", patch: `{"status":{"phase":"A"},"STATUS":{"phase":"B"}}`, whole: true},
	{name: "apiVersion", patch: `{"apiVersion":"v9"}`, whole: true},
	{name: "kind", patch: `{"kind":"Other","status":{"phase":"Updating"}}`, whole: true},
	{name: "unknown key", patch: `{"unknown":1,"status":{"phase":"Updating"}}`, whole: true},
	{name: "duplicate key", patch: `{"status":{"phase":"A"},"status":{"observedGeneration":4}}`, whole: true},
	{name: "array", patch: `[{"status":1}]`, whole: true},
	{name: "null", patch: `null`, whole: true},
	{name: "string", patch: `"x"`, whole: true},
	{name: "invalid", patch: `{"status":`, whole: true},
}

// fieldwise reports whether the patch must take the field-wise path for
// obj: a JSON object whose keys are top-level fields of obj's type, each
// once and spelled exactly. Whether a key names such a field is written
// out here for the kinds of fieldPatchObjects.
func fieldwise(obj client.Object, patch []byte) bool {
	fields := []string{"metadata", "spec", "status"}
	if _, ok := obj.(*corev1.ConfigMap); ok {
		fields = []string{"metadata", "data", "binaryData", "immutable"}
	}
	if !json.Valid(patch) {
		return false
	}
	d := json.NewDecoder(bytes.NewReader(patch))
	if tok, _ := d.Token(); tok != json.Delim('{') {
		return false
	}
	var seen []string
	for d.More() {
		tok, _ := d.Token()
		key := tok.(string)
		if !slices.Contains(fields, key) || slices.Contains(seen, key) {
			return false
		}
		seen = append(seen, key)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			panic(err)
		}
	}
	return true
}

// hasStatus reports whether obj's kind has a status subresource.
func hasStatus(obj client.Object) bool {
	_, ok := reflect.TypeOf(obj).Elem().FieldByName("Status")
	return ok
}

// fieldPatchServer returns a server storing obj (deleted, pending its
// finalizer, when deleting) and the types of the events after that.
func fieldPatchServer(t *testing.T, obj client.Object, deleting, whole bool) (*apiserver.Server, *[]apiserver.EventType) {
	t.Helper()
	s, _ := newServer(t)
	apiserver.SetWholePatches(s, whole)
	c := s.Client()
	created := obj.DeepCopyObject().(client.Object)
	mustCreate(t, c, created)
	if hasStatus(obj) {
		// Create drops the status of custom resources.
		st := obj.DeepCopyObject().(client.Object)
		st.SetResourceVersion(created.GetResourceVersion())
		if err := c.Status().Update(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if deleting {
		if err := c.Delete(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			t.Fatal(err)
		}
	}
	var events []apiserver.EventType
	s.Subscribe(func(ev apiserver.Event) { events = append(events, ev.Type) })
	return s, &events
}

func showJSON(obj any) string {
	b, err := json.Marshal(obj)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// serverTimes returns a copy of obj with the times the server sets in UTC:
// the server takes them from its clock, a JSON decoding makes them Local.
func serverTimes(obj client.Object) client.Object {
	out := obj.DeepCopyObject().(client.Object)
	out.SetCreationTimestamp(metav1.NewTime(out.GetCreationTimestamp().UTC()))
	if ts := out.GetDeletionTimestamp(); ts != nil {
		out.SetDeletionTimestamp(new(metav1.NewTime(ts.UTC())))
	}
	if mf := out.GetManagedFields(); len(mf) > 0 {
		for i := range mf {
			if mf[i].Time != nil {
				mf[i].Time = new(metav1.NewTime(mf[i].Time.UTC()))
			}
		}
		out.SetManagedFields(mf)
	}
	return out
}

// zeroField returns a copy of obj with its top-level field name zeroed.
func zeroField(obj client.Object, name string) client.Object {
	out := obj.DeepCopyObject().(client.Object)
	if f := reflect.ValueOf(out).Elem().FieldByName(name); f.IsValid() {
		f.SetZero()
	}
	return out
}

// TestFieldPatchMatchesWhole checks that a merge patch applied field by
// field gives what applying it to the whole object gives: the same object
// from applyPatch, and through the client the same stored object,
// resourceVersion, generation, events and errors.
func TestFieldPatchMatchesWhole(t *testing.T) {
	var fast, fallback, written, noop, failed int
	for _, obj := range fieldPatchObjects(t) {
		for _, deleting := range []bool{false, true} {
			for _, status := range []bool{false, true} {
				if status && !hasStatus(obj) {
					continue
				}
				for _, tt := range fieldPatches {
					name := fmt.Sprintf("%T %s deleting=%v status=%v %s", obj, obj.GetName(), deleting, status, tt.name)
					t.Run(name, func(t *testing.T) {
						sf, evf := fieldPatchServer(t, obj, deleting, false)
						sw, evw := fieldPatchServer(t, obj, deleting, true)
						stored := get(t, sf.Client(), obj.DeepCopyObject().(client.Object))
						data := []byte(strings.ReplaceAll(tt.patch, "RV", stored.GetResourceVersion()))

						w, err := apiserver.MergePatchWays(sf, obj, data, status)
						if err != nil {
							t.Fatal(err)
						}
						fw := fieldwise(obj, data)
						if tt.whole && fw {
							t.Fatalf("bad case: %s is meant for the whole path", data)
						}
						switch {
						case !fw && w.Fields != nil:
							t.Fatalf("the patch took the field-wise path")
						case fw && w.Fields == nil && w.WholeErr == nil:
							t.Fatalf("the patch took the whole path")
						case w.Fields != nil:
							fast++
							if w.WholeErr != nil {
								t.Fatalf("field-wise path succeeded, whole path: %v", w.WholeErr)
							}
							if !slices.Equal(w.Changed, w.Differs) {
								t.Errorf("field-wise diff %v, the objects differ in %v", w.Changed, w.Differs)
							}
							if !reflect.DeepEqual(serverTimes(w.Fields), serverTimes(w.Reference)) {
								t.Errorf("field-wise result differs from the whole document decoded:\n got %s\nwant %s", showJSON(w.Fields), showJSON(w.Reference))
							}
							// applyPatch leaves out what update does not read.
							a, b := serverTimes(w.Fields), serverTimes(w.Whole)
							if status {
								a, b = zeroField(a, "Spec"), zeroField(b, "Spec")
							} else if hasStatus(obj) {
								a, b = zeroField(a, "Status"), zeroField(b, "Status")
							}
							if !reflect.DeepEqual(a, b) {
								t.Errorf("field-wise result differs from applyPatch's whole path:\n got %s\nwant %s", showJSON(a), showJSON(b))
							}
						default:
							fallback++
						}

						of, ow := obj.DeepCopyObject().(client.Object), obj.DeepCopyObject().(client.Object)
						errf := patchVia(sf.Client(), of, data, status)
						errw := patchVia(sw.Client(), ow, data, status)
						if fmt.Sprint(errf) != fmt.Sprint(errw) || apierrors.ReasonForError(errf) != apierrors.ReasonForError(errw) {
							t.Fatalf("Patch error: field-wise %v, whole %v", errf, errw)
						}
						if !reflect.DeepEqual(of, ow) {
							t.Errorf("patched object:\n got %s\nwant %s", showJSON(of), showJSON(ow))
						}
						gf, gw := obj.DeepCopyObject().(client.Object), obj.DeepCopyObject().(client.Object)
						gerrf := sf.Client().Get(ctx, client.ObjectKeyFromObject(obj), gf)
						gerrw := sw.Client().Get(ctx, client.ObjectKeyFromObject(obj), gw)
						if fmt.Sprint(gerrf) != fmt.Sprint(gerrw) {
							t.Fatalf("Get after the patch: field-wise %v, whole %v", gerrf, gerrw)
						}
						if !reflect.DeepEqual(gf, gw) {
							t.Errorf("stored object:\n got %s\nwant %s", showJSON(gf), showJSON(gw))
						}
						if sf.ResourceVersion() != sw.ResourceVersion() || !reflect.DeepEqual(*evf, *evw) {
							t.Errorf("field-wise: resourceVersion %d, events %v; whole: %d, %v",
								sf.ResourceVersion(), *evf, sw.ResourceVersion(), *evw)
						}
						switch {
						case errw != nil || gerrw != nil:
							failed++ // or removed
						case len(*evw) > 0:
							written++
							if gw.GetResourceVersion() == stored.GetResourceVersion() {
								t.Errorf("a write kept resourceVersion %s", stored.GetResourceVersion())
							}
						default:
							noop++
							if !reflect.DeepEqual(gw, stored) {
								t.Errorf("a patch without an event changed the object:\n got %s\nwant %s", showJSON(gw), showJSON(stored))
							}
						}
					})
				}
			}
		}
	}
	t.Logf("field-wise %d, fallback %d; written %d, no-op %d, failed or removed %d", fast, fallback, written, noop, failed)
	if fast == 0 || fallback == 0 || written == 0 || noop == 0 || failed == 0 {
		t.Errorf("the cases do not cover both paths and every outcome")
	}
}

func patchVia(c client.Client, obj client.Object, data []byte, status bool) error {
	p := client.RawPatch(types.MergePatchType, data)
	if status {
		return c.Status().Patch(ctx, obj, p)
	}
	return c.Patch(ctx, obj, p)
}

// TestFieldPatchGeneration checks the generation and resourceVersion of a
// few field-wise patches.
func TestFieldPatchGeneration(t *testing.T) {
	s, _ := newServer(t)
	c := s.Client()
	// A Pod: unlike a Node, it has a generation.
	n := pod("ns", "p1", "")
	mustCreate(t, c, n)
	steps := []struct {
		patch      string
		status     bool
		rv         string
		generation int64
	}{
		{patch: `{"spec":{"nodeName":"n1"}}`, rv: "2", generation: 2},
		{patch: `{"spec":{"nodeName":"n1"}}`, rv: "2", generation: 2},
		{patch: `{"metadata":{"labels":{"a":"b"}}}`, rv: "3", generation: 2},
		{patch: `{"status":{"phase":"Running"}}`, rv: "3", generation: 2},
		{patch: `{"status":{"phase":"Running"}}`, status: true, rv: "4", generation: 2},
		{patch: `{"status":{"phase":"Running"}}`, status: true, rv: "4", generation: 2},
		{patch: `{"spec":{"nodeName":null}}`, rv: "5", generation: 3},
	}
	for i, st := range steps {
		if err := patchVia(c, n, []byte(st.patch), st.status); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := get(t, c, pod("ns", "p1", ""))
		if got.ResourceVersion != st.rv || got.Generation != st.generation || n.ResourceVersion != st.rv {
			t.Errorf("step %d %s: resourceVersion %s (returned %s), generation %d; want %s, %d",
				i, st.patch, got.ResourceVersion, n.ResourceVersion, got.Generation, st.rv, st.generation)
		}
	}
}
