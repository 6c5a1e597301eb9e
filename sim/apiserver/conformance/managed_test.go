package conformance_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestAnnotationOwners: who owns each annotation key in managedFields after
// creates, merge patches and updates by several field managers (bootroll
// keeps a protection annotation another manager has written:
// controller/karpenter.ForeignOwned). The twin models only the annotation
// keys; the transcript shows only those, for the managers named here.
func TestAnnotationOwners(t *testing.T) { run(t, annotationOwnership) }

// owners lists, for each conf- manager, the annotation keys it owns.
func owners(o client.Object) string {
	by := map[string][]string{}
	for _, e := range o.GetManagedFields() {
		if !strings.HasPrefix(e.Manager, "conf-") || e.FieldsV1 == nil {
			continue
		}
		var f struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.Raw, &f); err != nil {
			return "<" + err.Error() + ">"
		}
		for k := range f.Metadata.Annotations {
			// "." is the map itself (its creator), not a key.
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				by[e.Manager] = append(by[e.Manager], key)
			}
		}
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(by)) {
		slices.Sort(by[m])
		parts = append(parts, m+"="+strings.Join(by[m], ","))
	}
	return strings.Join(parts, " ")
}

func annotationOwnership(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-owners"
	ns(ctx, b, tr, n)
	a := cm(n, "a", nil, map[string]string{"k": "v"})
	a.Annotations = map[string]string{"x": "1"}
	tr.add("create a as conf-a with x", "%s %s", outcome(b.c.Create(ctx, a, client.FieldOwner("conf-a"))), owners(a))
	patch := func(step, manager, data string) {
		var cur corev1.ConfigMap
		_ = b.c.Get(ctx, client.ObjectKeyFromObject(a), &cur)
		err := b.c.Patch(ctx, &cur, client.RawPatch(types.MergePatchType, []byte(data)), client.FieldOwner(manager))
		tr.add(step, "%s annotations=%s %s", outcome(err), js(cur.Annotations), owners(&cur))
	}
	patch("conf-b adds y", "conf-b", `{"metadata":{"annotations":{"y":"1"}}}`)
	patch("conf-b sets x to the value it has", "conf-b", `{"metadata":{"annotations":{"x":"1"}}}`)
	patch("conf-b changes x", "conf-b", `{"metadata":{"annotations":{"x":"2"}}}`)
	patch("conf-c changes data only", "conf-c", `{"data":{"k":"v2"}}`)
	var cur corev1.ConfigMap
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(a), &cur)
	delete(cur.Annotations, "y")
	cur.Annotations["z"] = "1"
	err := b.c.Update(ctx, &cur, client.FieldOwner("conf-a"))
	tr.add("conf-a updates: removes y, adds z", "%s annotations=%s %s", outcome(err), js(cur.Annotations), owners(&cur))
	patch("conf-c adds y again", "conf-c", `{"metadata":{"annotations":{"y":"3"}}}`)
	patch("conf-b removes x", "conf-b", `{"metadata":{"annotations":{"x":null}}}`)
	patch("conf-a removes y and z", "conf-a", `{"metadata":{"annotations":{"y":null,"z":null}}}`)
}

// TestCordonOwners: who owns a Node's spec.unschedulable after cordons and
// uncordons by several field managers (bootroll's release keeps a cordon
// another manager wrote during the slot: controller/node's uncordon). The
// transcript shows the owners of spec.unschedulable only, for the managers
// named here; annotation writes beside a cordon must not move it.
func TestCordonOwners(t *testing.T) { run(t, cordonOwnership) }

// cordonOwner names the conf- manager that owns spec.unschedulable.
func cordonOwner(o client.Object) string {
	var who []string
	for _, e := range o.GetManagedFields() {
		if !strings.HasPrefix(e.Manager, "conf-") || e.FieldsV1 == nil {
			continue
		}
		var f struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if err := json.Unmarshal(e.FieldsV1.Raw, &f); err != nil {
			return "<" + err.Error() + ">"
		}
		if _, ok := f.Spec["f:unschedulable"]; ok {
			who = append(who, e.Manager)
		}
	}
	slices.Sort(who)
	return "unschedulable owned by [" + strings.Join(who, ",") + "]"
}

func cordonOwnership(ctx context.Context, b *backend, tr *transcript) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "conf-cordon"}, Spec: corev1.NodeSpec{Unschedulable: true}}
	tr.add("create a cordoned node as conf-a", "%s %s", outcome(b.c.Create(ctx, n, client.FieldOwner("conf-a"))), cordonOwner(n))
	patch := func(step, manager, data string) {
		var cur corev1.Node
		_ = b.c.Get(ctx, client.ObjectKeyFromObject(n), &cur)
		err := b.c.Patch(ctx, &cur, client.RawPatch(types.MergePatchType, []byte(data)), client.FieldOwner(manager))
		tr.add(step, "%s unschedulable=%v %s", outcome(err), cur.Spec.Unschedulable, cordonOwner(&cur))
	}
	patch("conf-b cordons it again, with a marker", "conf-b", `{"metadata":{"annotations":{"m":"p"}},"spec":{"unschedulable":true}}`)
	patch("conf-b uncordons", "conf-b", `{"spec":{"unschedulable":null}}`)
	patch("conf-b cordons, with a marker", "conf-b", `{"metadata":{"annotations":{"m":"q"}},"spec":{"unschedulable":true}}`)
	patch("conf-c cordons the cordoned node", "conf-c", `{"spec":{"unschedulable":true}}`)
	patch("conf-c uncordons with false", "conf-c", `{"spec":{"unschedulable":false}}`)
	patch("conf-c cordons", "conf-c", `{"spec":{"unschedulable":true}}`)
	patch("conf-b removes its marker only", "conf-b", `{"metadata":{"annotations":{"m":null}}}`)
	var cur corev1.Node
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(n), &cur)
	cur.Spec.Unschedulable = false
	err := b.c.Update(ctx, &cur, client.FieldOwner("conf-a"))
	tr.add("conf-a uncordons by update", "%s unschedulable=%v %s", outcome(err), cur.Spec.Unschedulable, cordonOwner(&cur))
	_ = b.c.Delete(ctx, n)
}
