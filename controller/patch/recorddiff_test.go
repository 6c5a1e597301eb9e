package patch

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// appendRecordDiff writes out controllerPart's fields by hand: a field
// added to RolloutStatus (or to controllerPart) must be diffed there too,
// and named here.
func TestRecordDiffFields(t *testing.T) {
	for typ, want := range map[reflect.Type][]string{
		reflect.TypeFor[controllerPart](): {"Phase", "Rollout"},
		reflect.TypeFor[v1alpha1.RolloutStatus](): {"TargetImage", "PhaseSince", "PriorUnschedulable", "Cordoned", "AddedAnnotations",
			"AddedNodeClaimAnnotations", "ProtectUntil", "SlotGrantedAt", "DrainStartedAt", "RetryAfter", "Failures", "FailedImage",
			"RollbackTo", "Reason", "Message"},
	} {
		var got []string
		for i := range typ.NumField() {
			got = append(got, typ.Field(i).Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s has fields %v; appendRecordDiff diffs %v: diff the new ones there", typ, got, want)
		}
	}
}

// appendRecordDiff gives appendMergeDiff's bytes for every pair of
// records: each field drawn from values that encode alike or not (nil and
// empty lists, times equal to the second, in other zones or zero, strings
// escaped or not valid UTF-8, one pointer or two to equal values).
func TestRecordDiffAsMergeDiff(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }
	shared := at(time.Minute)
	times := []*metav1.Time{nil, {}, at(0), at(300 * time.Millisecond), ptr.To(metav1.NewTime(t0.In(time.FixedZone("x", 3600)))),
		shared, shared, at(time.Minute), at(time.Hour), ptr.To(metav1.NewTime(time.Now()))}
	strs := []string{"", "", "a", "b", "img@sha256:aa", "m & \"q\" <b> \u2028 é \x01", "a\xff", "a\xfe", "a\ufffd"}
	sharedList := []string{"a", "b"}
	lists := [][]string{nil, {}, {"a"}, {"a", "b"}, sharedList, sharedList, {"<b>"}, {"a\xff"}, {"a\xfe"}, {"a", "b", "c"}}
	bools := []*bool{nil, ptr.To(false), ptr.To(true), ptr.To(true)}
	phases := []v1alpha1.NodePhase{"", v1alpha1.PhasePending, v1alpha1.PhaseDraining, "x\xff", "x\xfe"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) int { return rng.IntN(n) }
	record := func() controllerPart {
		return controllerPart{Phase: phases[pick(len(phases))], Rollout: v1alpha1.RolloutStatus{
			TargetImage: strs[pick(len(strs))], PhaseSince: times[pick(len(times))], PriorUnschedulable: bools[pick(len(bools))],
			Cordoned: pick(2) == 0, AddedAnnotations: lists[pick(len(lists))], AddedNodeClaimAnnotations: lists[pick(len(lists))],
			ProtectUntil: times[pick(len(times))], SlotGrantedAt: times[pick(len(times))], DrainStartedAt: times[pick(len(times))],
			RetryAfter: times[pick(len(times))], Failures: int32(pick(3)), FailedImage: strs[pick(len(strs))],
			RollbackTo: strs[pick(len(strs))], Reason: strs[pick(len(strs))], Message: strs[pick(len(strs))],
		}}
	}
	check := func(a, b controllerPart) {
		t.Helper()
		want, err := appendMergeDiff([]byte("x"), a, b)
		if err != nil {
			t.Fatal(err)
		}
		got := appendRecordDiff([]byte("x"), a.Phase, b.Phase, &a.Rollout, &b.Rollout)
		if string(got) != string(want) {
			t.Fatalf("from %+v\nto %+v:\nappendRecordDiff gives %s\nappendMergeDiff   %s", a, b, got, want)
		}
	}
	check(controllerPart{}, controllerPart{})
	for range 20000 {
		a := record()
		check(a, record())
		// Mostly, a record write changes a few fields.
		b := a
		for range 1 + pick(3) {
			c := record()
			v, w := reflect.ValueOf(&b.Rollout).Elem(), reflect.ValueOf(c.Rollout)
			i := pick(v.NumField())
			v.Field(i).Set(w.Field(i))
			if pick(4) == 0 {
				b.Phase = c.Phase
			}
		}
		check(a, b)
		check(a, a)
	}
}

// nodePatch's Data gives what it gave when it diffed nodeMeta and
// nodeSpec with appendMembers and appendObjectDiff, for Nodes whose
// annotations, taints and cordon are drawn from values that encode alike
// or not (nil and empty maps and lists, escaped keys and values).
func TestNodePatchAsMergeDiff(t *testing.T) {
	reference := func(from, n *corev1.Node) []byte {
		buf := []byte(`{"metadata":{`)
		buf, wrote, err := appendMembers(buf, reflect.ValueOf(nodeMeta{from.Annotations}), reflect.ValueOf(nodeMeta{n.Annotations}), true)
		if err != nil {
			t.Fatal(err)
		}
		if wrote {
			buf = append(buf, ',')
		}
		buf = appendLock(buf, from.ResourceVersion)
		spec := len(buf)
		buf = append(buf, `,"spec":`...)
		buf, wrote, err = appendObjectDiff(buf, reflect.ValueOf(nodeSpec{from.Spec.Unschedulable, from.Spec.Taints}), reflect.ValueOf(nodeSpec{n.Spec.Unschedulable, n.Spec.Taints}))
		if err != nil {
			t.Fatal(err)
		}
		if !wrote {
			buf = buf[:spec]
		}
		return append(buf, '}')
	}
	t0 := metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
	annotations := []map[string]string{nil, {}, {"a": "1"}, {"a": "2"}, {"a": "1", "b<": "&"}, {"b<": "&", "c\xff": "x"}, {"c\xfe": "x"}}
	taints := [][]corev1.Taint{nil, {}, {{Key: "k", Effect: corev1.TaintEffectNoSchedule}}, {{Key: "k", Effect: corev1.TaintEffectNoSchedule}},
		{{Key: "k", Effect: corev1.TaintEffectNoExecute, TimeAdded: &t0}}, {{Key: "k", Value: "v<", Effect: corev1.TaintEffectNoSchedule}, {Key: "j"}}}
	rng := rand.New(rand.NewPCG(3, 4))
	node := func(rv string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv, Annotations: annotations[rng.IntN(len(annotations))]},
			Spec: corev1.NodeSpec{Unschedulable: rng.IntN(2) == 0, Taints: taints[rng.IntN(len(taints))]}}
		if m := n.Annotations; m != nil {
			n.Annotations = maps.Clone(m)
		}
		return n
	}
	for range 5000 {
		from := node("4<2")
		for _, n := range []*corev1.Node{node("9"), from.DeepCopy()} {
			got, err := Node(from).Data(n)
			if err != nil {
				t.Fatal(err)
			}
			if want := reference(from, n); string(got) != string(want) {
				t.Fatalf("from %+v %+v\nto %+v %+v:\nData gives %s\nthe merge diff %s", from.Annotations, from.Spec, n.Annotations, n.Spec, got, want)
			}
		}
	}
}
