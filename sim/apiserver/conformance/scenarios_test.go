package conformance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// The scenarios. Each runs in its own namespace, and names its
// cluster-scoped objects after it, since the real server is shared by the
// tests.

func TestCreateGetList(t *testing.T)      { run(t, createGetList) }
func TestUpdatePatch(t *testing.T)        { run(t, updatePatch) }
func TestStatusSubresource(t *testing.T)  { run(t, statusSubresource) }
func TestFinalizersDeletion(t *testing.T) { run(t, finalizersDeletion) }
func TestEviction(t *testing.T)           { run(t, eviction) }
func TestWatchOrder(t *testing.T)         { run(t, watchOrder) }

// TestGarbageCollection needs the real garbage collector, which runs in
// kube-controller-manager; envtest runs none.
func TestGarbageCollection(t *testing.T) {
	startGC(t)
	run(t, garbageCollection)
}

func ns(ctx context.Context, b *backend, tr *transcript, name string) {
	o := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	tr.add("create namespace "+name, "%s gen=%d", outcome(b.c.Create(ctx, o)), o.Generation)
}

func cm(ns, name string, lbls map[string]string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}, Data: data}
}

// meta is the part of an object's metadata a transcript shows: the
// server-set fields only as set or not.
func meta(o client.Object) string {
	return fmt.Sprintf("name=%s ns=%s uid=%t rv=%t created=%t deleting=%t gen=%d labels=%s finalizers=%s",
		o.GetName(), o.GetNamespace(), o.GetUID() != "", o.GetResourceVersion() != "", !o.GetCreationTimestamp().Time.IsZero(),
		o.GetDeletionTimestamp() != nil, o.GetGeneration(), js(o.GetLabels()), js(o.GetFinalizers()))
}

// names is the namespace/name of each listed object, in the listing's order.
func names(objs []client.Object) string {
	out := make([]string, len(objs))
	for i, o := range objs {
		name := o.GetName()
		if strings.HasPrefix(name, "gen-") {
			name = generated(name, "gen-")
		}
		out[i] = o.GetNamespace() + "/" + name
	}
	return strings.Join(out, ",")
}

func cmNames(l *corev1.ConfigMapList) string {
	objs := make([]client.Object, len(l.Items))
	for i := range l.Items {
		objs[i] = &l.Items[i]
	}
	return names(objs)
}

// generated shows a generated name as its prefix and the number of
// characters the server added: the characters themselves differ (random
// on a real server, a sequence in the twin).
func generated(name, prefix string) string {
	if !strings.HasPrefix(name, prefix) {
		return "not generated from " + prefix + ": " + name
	}
	return fmt.Sprintf("%s+%d chars", prefix, len(name)-len(prefix))
}

func rvChange(before, after string) string {
	if before == after {
		return "rv unchanged"
	}
	return "rv changed"
}

func createGetList(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-cgl"
	ns(ctx, b, tr, n)
	ns(ctx, b, tr, n+"-other")
	a := cm(n, "a", map[string]string{"app": "web", "tier": "front"}, map[string]string{"k": "v"})
	tr.add("create a", "%s %s", outcome(b.c.Create(ctx, a)), meta(a))
	tr.add("create a again", "%s", outcome(b.c.Create(ctx, cm(n, "a", nil, nil))))
	g := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n, GenerateName: "gen-"}}
	tr.add("create generateName", "%s %s", outcome(b.c.Create(ctx, g)), generated(g.Name, "gen-"))
	tr.add("create without a name", "%s", outcome(b.c.Create(ctx, cm(n, "", nil, nil))))
	withRV := cm(n, "with-rv", nil, nil)
	withRV.ResourceVersion = "5"
	tr.add("create with a resourceVersion", "%s", outcome(b.c.Create(ctx, withRV)))
	tr.add("create b", "%s", outcome(b.c.Create(ctx, cm(n, "b", map[string]string{"app": "web", "tier": "back"}, nil))))
	tr.add("create c", "%s", outcome(b.c.Create(ctx, cm(n, "c", map[string]string{"app": "db"}, nil))))
	tr.add("create other/a", "%s", outcome(b.c.Create(ctx, cm(n+"-other", "a", map[string]string{"app": "web"}, nil))))

	var got corev1.ConfigMap
	err := b.c.Get(ctx, client.ObjectKey{Namespace: n, Name: "a"}, &got)
	tr.add("get a", "%s %s data=%s same-rv-as-create=%t", outcome(err), meta(&got), js(got.Data), got.ResourceVersion == a.ResourceVersion)
	tr.add("get missing", "%s", outcome(b.c.Get(ctx, client.ObjectKey{Namespace: n, Name: "missing"}, &corev1.ConfigMap{})))
	tr.add("get c in another namespace", "%s", outcome(b.c.Get(ctx, client.ObjectKey{Namespace: n + "-other", Name: "c"}, &corev1.ConfigMap{})))
	tr.add("get a missing BootcNode", "%s", outcome(b.c.Get(ctx, client.ObjectKey{Name: "conf-cgl-missing"}, &v1alpha1.BootcNode{})))

	list := func(step string, opts ...client.ListOption) {
		var l corev1.ConfigMapList
		err := b.c.List(ctx, &l, opts...)
		tr.add("list "+step, "%s [%s] rv=%t", outcome(err), cmNames(&l), l.ResourceVersion != "")
	}
	sel := func(s string) client.MatchingLabelsSelector {
		ls, err := labels.Parse(s)
		if err != nil {
			panic(err)
		}
		return client.MatchingLabelsSelector{Selector: ls}
	}
	fsel := func(s string) client.MatchingFieldsSelector {
		fs, err := fields.ParseSelector(s)
		if err != nil {
			panic(err)
		}
		return client.MatchingFieldsSelector{Selector: fs}
	}
	list("namespace", client.InNamespace(n))
	list("app=web", client.InNamespace(n), sel("app=web"))
	list("app=web all namespaces", sel("app=web"))
	list("app in (web,db),tier!=back", client.InNamespace(n), sel("app in (web,db),tier!=back"))
	list("!tier", client.InNamespace(n), sel("!tier"))
	list("tier", client.InNamespace(n), sel("tier"))
	list("app notin (web)", client.InNamespace(n), sel("app notin (web)"))
	list("metadata.name=b", client.InNamespace(n), fsel("metadata.name=b"))
	list("metadata.name==b", client.InNamespace(n), fsel("metadata.name==b"))
	list("metadata.name!=b", client.InNamespace(n), fsel("metadata.name!=b"))
	list("metadata.name=a all namespaces", fsel("metadata.name=a"), sel("app=web"))
	list("metadata.namespace", fsel("metadata.namespace="+n+"-other"))
	list("metadata.namespace!= with app=web", fsel("metadata.namespace!="+n), sel("app=web"))
	list("metadata.name=a,app=web", client.InNamespace(n), fsel("metadata.name=a"), sel("app=web"))
	// A metadata-only listing (as=PartialObjectMetadataList), as the
	// pool reconciler counts its members with before it grants a slot.
	var ml metav1.PartialObjectMetadataList
	ml.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	err = b.c.List(ctx, &ml, client.InNamespace(n), sel("app=web"))
	items := make([]string, len(ml.Items))
	for i := range ml.Items {
		items[i] = meta(&ml.Items[i])
	}
	tr.add("metadata list app=web", "%s [%s] rv=%t", outcome(err), strings.Join(items, "; "), ml.ResourceVersion != "")
	list("unsupported field", client.InNamespace(n), fsel("data.k=v"))

	// Pods by spec.nodeName, the field selector bootroll and the twin's
	// Karpenter use.
	for _, p := range []struct{ name, node string }{{"p1", "node-1"}, {"p2", "node-2"}, {"p3", ""}} {
		pod := testPod(n, p.name, nil)
		pod.Spec.NodeName = p.node
		tr.add("create pod "+p.name, "%s gen=%d", outcome(b.c.Create(ctx, pod)), pod.Generation)
	}
	podList := func(step string, opts ...client.ListOption) {
		var l corev1.PodList
		err := b.c.List(ctx, &l, opts...)
		objs := make([]client.Object, len(l.Items))
		for i := range l.Items {
			objs[i] = &l.Items[i]
		}
		tr.add("list pods "+step, "%s [%s]", outcome(err), names(objs))
	}
	podList("spec.nodeName=node-1", client.InNamespace(n), client.MatchingFields{"spec.nodeName": "node-1"})
	podList("spec.nodeName=node-1 all namespaces", client.MatchingFields{"spec.nodeName": "node-1"})
	podList("spec.nodeName=", client.InNamespace(n), client.MatchingFields{"spec.nodeName": ""})
	podList("spec.nodeName!=node-1", client.InNamespace(n), fsel("spec.nodeName!=node-1"))

	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: n, Name: "s"}, StringData: map[string]string{"k": "v"}}
	tr.add("create secret", "%s gen=%d", outcome(b.c.Create(ctx, sec)), sec.Generation)

	// Cluster-scoped kinds ignore a namespace on create and get.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "conf-cgl-node", Labels: map[string]string{"conf": "cgl"}}}
	tr.add("create node", "%s %s", outcome(b.c.Create(ctx, node)), meta(node))
	var nl corev1.NodeList
	err = b.c.List(ctx, &nl, client.MatchingLabels{"conf": "cgl"})
	tr.add("list nodes conf=cgl", "%s %d", outcome(err), len(nl.Items))
}

func testPod(ns, name string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
}

func pool(name string) *v1alpha1.BootcNodePool {
	return &v1alpha1.BootcNodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.BootcNodePoolSpec{
			NodeSelector: map[string]string{"pool": name},
			Image:        "registry.example/os:1",
		},
	}
}

func updatePatch(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-up"
	ns(ctx, b, tr, n)
	a := cm(n, "a", map[string]string{"app": "web", "tier": "front"}, map[string]string{"k": "v"})
	tr.add("create a", "%s", outcome(b.c.Create(ctx, a)))
	stale := a.DeepCopy()

	upd := a.DeepCopy()
	upd.Data["k"] = "v2"
	err := b.c.Update(ctx, upd)
	tr.add("update a", "%s %s %s data=%s", outcome(err), rvChange(a.ResourceVersion, upd.ResourceVersion), meta(upd), js(upd.Data))
	stale.Data["k"] = "stale"
	tr.add("update a with a stale resourceVersion", "%s", outcome(b.c.Update(ctx, stale)))
	same := upd.DeepCopy()
	err = b.c.Update(ctx, same)
	tr.add("update a unchanged", "%s %s", outcome(err), rvChange(upd.ResourceVersion, same.ResourceVersion))
	uncond := upd.DeepCopy()
	uncond.ResourceVersion = ""
	uncond.Data["k"] = "v3"
	err = b.c.Update(ctx, uncond)
	tr.add("update a without a resourceVersion", "%s data=%s", outcome(err), js(uncond.Data))
	tr.add("update missing", "%s", outcome(b.c.Update(ctx, cm(n, "missing", nil, nil))))
	wrongUID := uncond.DeepCopy()
	wrongUID.UID = types.UID("00000000-0000-0000-0000-000000000000")
	tr.add("update a with another uid", "%s", outcome(b.c.Update(ctx, wrongUID)))

	// Merge patches.
	var cur corev1.ConfigMap
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(a), &cur)
	err = b.c.Patch(ctx, &cur, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":null,"new":"x"}},"data":{"k2":"v"}}`)))
	tr.add("merge patch a", "%s labels=%s data=%s", outcome(err), js(cur.Labels), js(cur.Data))
	old := cur.DeepCopy()
	mod := cur.DeepCopy()
	mod.Data["k"] = "locked"
	err = b.c.Patch(ctx, mod, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{}))
	tr.add("merge patch a with optimistic lock", "%s data=%s", outcome(err), js(mod.Data))
	mod2 := old.DeepCopy()
	mod2.Data["k"] = "stale-lock"
	err = b.c.Patch(ctx, mod2, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{}))
	tr.add("merge patch a with a stale optimistic lock", "%s", outcome(err))
	noop := mod.DeepCopy()
	err = b.c.Patch(ctx, noop, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"locked"}}`)))
	tr.add("merge patch a changing nothing", "%s %s", outcome(err), rvChange(mod.ResourceVersion, noop.ResourceVersion))
	err = b.c.Patch(ctx, cm(n, "missing", nil, nil), client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v"}}`)))
	tr.add("merge patch missing", "%s", outcome(err))
	err = b.c.Patch(ctx, noop.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"name":"renamed"}}`)))
	tr.add("merge patch a renaming it", "%s", outcome(err))
	err = b.c.Patch(ctx, noop.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`not json`)))
	tr.add("merge patch a with bad JSON", "%s", outcome(err))

	// JSON patches.
	jp := noop.DeepCopy()
	err = b.c.Patch(ctx, jp, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/data/k","value":"locked"},{"op":"replace","path":"/data/k","value":"json"},{"op":"add","path":"/metadata/labels/jp","value":"1"}]`)))
	tr.add("json patch a", "%s labels=%s data=%s", outcome(err), js(jp.Labels), js(jp.Data))
	err = b.c.Patch(ctx, jp.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"test","path":"/data/k","value":"wrong"},{"op":"replace","path":"/data/k","value":"x"}]`)))
	tr.add("json patch a with a failing test", "%s", outcome(err))
	err = b.c.Patch(ctx, jp.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/nothing"}]`)))
	tr.add("json patch a removing a missing field", "%s", outcome(err))
	err = b.c.Patch(ctx, jp.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/metadata/resourceVersion","value":"1"},{"op":"replace","path":"/data/k","value":"x"}]`)))
	tr.add("json patch a with a stale resourceVersion", "%s", outcome(err))

	// Strategic merge patches: the containers list merges by name.
	pod := testPod(n, "p", map[string]string{"app": "web"})
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "side", Image: "registry.example/side:1"})
	tr.add("create pod p", "%s", outcome(b.c.Create(ctx, pod)))
	orig := pod.DeepCopy()
	pod.Spec.Containers[0].Image = "registry.example/app:2"
	pod.Labels["v"] = "2"
	err = b.c.Patch(ctx, pod, client.StrategicMergeFrom(orig))
	imgs := []string{}
	for _, c := range pod.Spec.Containers {
		imgs = append(imgs, c.Name+"="+c.Image)
	}
	tr.add("strategic merge patch pod p", "%s images=%s labels=%s", outcome(err), js(imgs), js(pod.Labels))
	err = b.c.Patch(ctx, pod.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"c","image":"registry.example/app:3"}]}}`)))
	tr.add("raw strategic merge patch pod p", "%s", outcome(err))
	var pp corev1.Pod
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(pod), &pp)
	imgs = imgs[:0]
	for _, c := range pp.Spec.Containers {
		imgs = append(imgs, c.Name+"="+c.Image)
	}
	tr.add("get pod p", "images=%s", js(imgs))

	// Patches of a custom resource: no strategic merge patch.
	p := pool("conf-up-pool")
	tr.add("create pool", "%s %s", outcome(b.c.Create(ctx, p)), meta(p))
	po := p.DeepCopy()
	p.Spec.Image = "registry.example/os:2"
	err = b.c.Patch(ctx, p, client.MergeFrom(po))
	tr.add("merge patch pool spec", "%s image=%s gen=%d %s", outcome(err), p.Spec.Image, p.Generation, rvChange(po.ResourceVersion, p.ResourceVersion))
	p2 := p.DeepCopy()
	err = b.c.Patch(ctx, p2, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`)))
	tr.add("merge patch pool labels", "%s gen=%d", outcome(err), p2.Generation)
	err = b.c.Patch(ctx, p2.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(`{"spec":{"image":"registry.example/os:3"}}`)))
	tr.add("strategic merge patch pool", "%s", outcome(err))
	p3 := p2.DeepCopy()
	err = b.c.Patch(ctx, p3, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/image","value":"registry.example/os:4"}]`)))
	tr.add("json patch pool", "%s image=%s gen=%d", outcome(err), p3.Spec.Image, p3.Generation)
	p4 := p3.DeepCopy()
	p4.ResourceVersion = ""
	p4.Spec.Image = "registry.example/os:5"
	err = b.c.Update(ctx, p4)
	tr.add("update pool without a resourceVersion", "%s", outcome(err))
}

func statusSubresource(ctx context.Context, b *backend, tr *transcript) {
	// BootcNodePool.
	p := pool("conf-st-pool")
	p.Status.TargetImage = "set-on-create"
	err := b.c.Create(ctx, p)
	tr.add("create pool with status", "%s gen=%d status.targetImage=%q", outcome(err), p.Generation, p.Status.TargetImage)
	p.Spec.Image = "registry.example/os:2"
	p.Status.TargetImage = "set-by-update"
	err = b.c.Update(ctx, p)
	tr.add("update pool spec and status", "%s gen=%d image=%s status.targetImage=%q", outcome(err), p.Generation, p.Spec.Image, p.Status.TargetImage)
	p.Spec.Image = "registry.example/os:3"
	p.Status.TargetImage = "set-by-status-update"
	p.Status.ObservedGeneration = 2
	before := p.ResourceVersion
	err = b.c.Status().Update(ctx, p)
	tr.add("status update pool spec and status", "%s gen=%d image=%s status.targetImage=%q %s", outcome(err), p.Generation, p.Spec.Image, p.Status.TargetImage, rvChange(before, p.ResourceVersion))
	var got v1alpha1.BootcNodePool
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(p), &got)
	tr.add("get pool", "gen=%d image=%s status.targetImage=%q observed=%d", got.Generation, got.Spec.Image, got.Status.TargetImage, got.Status.ObservedGeneration)
	err = b.c.Status().Patch(ctx, &got, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"image":"registry.example/os:9"},"status":{"targetDigest":"sha256:aa"},"metadata":{"labels":{"by":"status"}}}`)))
	tr.add("status merge patch pool spec, status and labels", "%s gen=%d image=%s status.targetDigest=%q labels=%s", outcome(err), got.Generation, got.Spec.Image, got.Status.TargetDigest, js(got.Labels))
	err = b.c.Patch(ctx, &got, client.RawPatch(types.MergePatchType, []byte(`{"status":{"targetDigest":"sha256:bb"}}`)))
	tr.add("merge patch pool status", "%s gen=%d status.targetDigest=%q", outcome(err), got.Generation, got.Status.TargetDigest)
	stale := got.DeepCopy()
	stale.ResourceVersion = before
	tr.add("status update pool with a stale resourceVersion", "%s", outcome(b.c.Status().Update(ctx, stale)))
	tr.add("status update missing pool", "%s", outcome(b.c.Status().Update(ctx, pool("conf-st-missing"))))
	same := got.DeepCopy()
	err = b.c.Status().Update(ctx, same)
	tr.add("status update pool unchanged", "%s %s", outcome(err), rvChange(got.ResourceVersion, same.ResourceVersion))

	// BootcNode.
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "conf-st-node"}, Spec: v1alpha1.BootcNodeSpec{Pool: "conf-st-pool"}}
	bn.Status.Phase = "Pending"
	err = b.c.Create(ctx, bn)
	tr.add("create bootcnode with status", "%s gen=%d status.phase=%q", outcome(err), bn.Generation, bn.Status.Phase)
	bn.Status.Daemon.BootID = "boot-1"
	bn.Spec.Pool = "other"
	err = b.c.Status().Update(ctx, bn)
	tr.add("status update bootcnode", "%s gen=%d pool=%s bootID=%q", outcome(err), bn.Generation, bn.Spec.Pool, bn.Status.Daemon.BootID)
	bn.Spec.Pool = "other"
	bn.Status.Daemon.BootID = "boot-2"
	err = b.c.Update(ctx, bn)
	tr.add("update bootcnode", "%s gen=%d pool=%s bootID=%q", outcome(err), bn.Generation, bn.Spec.Pool, bn.Status.Daemon.BootID)
	err = b.c.Status().Patch(ctx, bn, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/status/daemon/bootID","value":"boot-3"},{"op":"replace","path":"/spec/pool","value":"third"}]`)))
	tr.add("status json patch bootcnode", "%s gen=%d pool=%s bootID=%q", outcome(err), bn.Generation, bn.Spec.Pool, bn.Status.Daemon.BootID)

	// Node.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "conf-st-node"}}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	err = b.c.Create(ctx, node)
	tr.add("create node with status", "%s %s conditions=%d", outcome(err), meta(node), len(node.Status.Conditions))
	node.Spec.Unschedulable = true
	node.Status.Conditions[0].Status = corev1.ConditionFalse
	err = b.c.Update(ctx, node)
	tr.add("update node", "%s unschedulable=%t ready=%s gen=%d", outcome(err), node.Spec.Unschedulable, node.Status.Conditions[0].Status, node.Generation)
	node.Spec.Unschedulable = false
	node.Status.Conditions[0].Status = corev1.ConditionUnknown
	err = b.c.Status().Update(ctx, node)
	tr.add("status update node", "%s unschedulable=%t ready=%s gen=%d", outcome(err), node.Spec.Unschedulable, node.Status.Conditions[0].Status, node.Generation)

	// Pod.
	const n = "conf-st"
	ns(ctx, b, tr, n)
	pod := testPod(n, "p", nil)
	tr.add("create pod", "%s", outcome(b.c.Create(ctx, pod)))
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	pod.Spec.Containers[0].Image = "registry.example/app:2"
	err = b.c.Status().Update(ctx, pod)
	tr.add("status update pod", "%s phase=%s image=%s", outcome(err), pod.Status.Phase, pod.Spec.Containers[0].Image)
	pod.Status.Phase = corev1.PodFailed
	pod.Spec.Containers[0].Image = "registry.example/app:3"
	err = b.c.Update(ctx, pod)
	tr.add("update pod", "%s phase=%s image=%s", outcome(err), pod.Status.Phase, pod.Spec.Containers[0].Image)
	tr.add("status update of a ConfigMap", "%s", outcome(b.c.Status().Update(ctx, cm(n, "x", nil, nil))))
}

func finalizersDeletion(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-fin"
	const fin = "conf.bootroll.dev/hold"
	ns(ctx, b, tr, n)
	f := cm(n, "f", nil, map[string]string{"k": "v"})
	f.Finalizers = []string{fin}
	tr.add("create f with a finalizer", "%s", outcome(b.c.Create(ctx, f)))
	tr.add("delete f", "%s", outcome(b.c.Delete(ctx, f.DeepCopy())))
	var got corev1.ConfigMap
	err := b.c.Get(ctx, client.ObjectKeyFromObject(f), &got)
	tr.add("get f", "%s %s grace=%s %s", outcome(err), meta(&got), js(got.DeletionGracePeriodSeconds), rvChange(f.ResourceVersion, got.ResourceVersion))
	ts := got.DeletionTimestamp.DeepCopy()
	rv := got.ResourceVersion
	tr.add("delete f again", "%s", outcome(b.c.Delete(ctx, f.DeepCopy())))
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(f), &got)
	tr.add("get f", "%s same-deletionTimestamp=%t", rvChange(rv, got.ResourceVersion), got.DeletionTimestamp.Equal(ts))
	add := got.DeepCopy()
	add.Finalizers = append(add.Finalizers, "conf.bootroll.dev/another")
	tr.add("add a finalizer to f while it is deleted", "%s", outcome(b.c.Update(ctx, add)))
	data := got.DeepCopy()
	data.Data["k"] = "v2"
	err = b.c.Update(ctx, data)
	tr.add("update f's data while it is deleted", "%s data=%s deleting=%t", outcome(err), js(data.Data), data.DeletionTimestamp != nil)
	clearTS := data.DeepCopy()
	clearTS.DeletionTimestamp = nil
	err = b.c.Update(ctx, clearTS)
	tr.add("update f clearing deletionTimestamp", "%s deleting=%t", outcome(err), clearTS.DeletionTimestamp != nil)
	err = b.c.Patch(ctx, clearTS, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	tr.add("remove f's finalizer", "%s returned: deleting=%t finalizers=%s", outcome(err), clearTS.DeletionTimestamp != nil, js(clearTS.Finalizers))
	tr.add("get f", "%s", outcome(b.c.Get(ctx, client.ObjectKeyFromObject(f), &corev1.ConfigMap{})))
	tr.add("delete f once gone", "%s", outcome(b.c.Delete(ctx, f.DeepCopy())))

	g := cm(n, "g", nil, nil)
	tr.add("create g", "%s", outcome(b.c.Create(ctx, g)))
	tr.add("delete g with a stale resourceVersion", "%s", outcome(b.c.Delete(ctx, g.DeepCopy(), client.Preconditions{ResourceVersion: new("1")})))
	tr.add("delete g with another uid", "%s", outcome(b.c.Delete(ctx, g.DeepCopy(), client.Preconditions{UID: new(types.UID("00000000-0000-0000-0000-000000000000"))})))
	tr.add("delete g with its resourceVersion", "%s", outcome(b.c.Delete(ctx, g.DeepCopy(), client.Preconditions{ResourceVersion: new(g.ResourceVersion)})))
	tr.add("get g", "%s", outcome(b.c.Get(ctx, client.ObjectKeyFromObject(g), &corev1.ConfigMap{})))

	// A custom resource: its generation moves on with the deletion.
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "conf-fin-node", Finalizers: []string{fin}}, Spec: v1alpha1.BootcNodeSpec{Pool: "p"}}
	tr.add("create bootcnode with a finalizer", "%s gen=%d", outcome(b.c.Create(ctx, bn)), bn.Generation)
	tr.add("delete bootcnode", "%s", outcome(b.c.Delete(ctx, bn.DeepCopy())))
	var gbn v1alpha1.BootcNode
	err = b.c.Get(ctx, client.ObjectKeyFromObject(bn), &gbn)
	tr.add("get bootcnode", "%s %s", outcome(err), meta(&gbn))
	gbn.Status.Daemon.BootID = "while-deleting"
	err = b.c.Status().Update(ctx, &gbn)
	tr.add("status update bootcnode while deleted", "%s bootID=%q", outcome(err), gbn.Status.Daemon.BootID)
	gbn.Finalizers = nil
	err = b.c.Update(ctx, &gbn)
	tr.add("update bootcnode without its finalizer", "%s", outcome(err))
	tr.add("get bootcnode", "%s", outcome(b.c.Get(ctx, client.ObjectKeyFromObject(bn), &v1alpha1.BootcNode{})))

	// DeleteAllOf by label.
	for _, name := range []string{"d1", "d2", "keep"} {
		lbl := map[string]string{"del": "yes"}
		if name == "keep" {
			lbl = nil
		}
		tr.add("create "+name, "%s", outcome(b.c.Create(ctx, cm(n, name, lbl, nil))))
	}
	tr.add("delete all del=yes", "%s", outcome(b.c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(n), client.MatchingLabels{"del": "yes"})))
	var l corev1.ConfigMapList
	err = b.c.List(ctx, &l, client.InNamespace(n))
	tr.add("list", "%s [%s]", outcome(err), cmNames(&l))
}

func garbageCollection(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-gc"
	ns(ctx, b, tr, n)
	owner := cm(n, "owner", nil, nil)
	other := cm(n, "other-owner", nil, nil)
	tr.add("create owner", "%s", outcome(b.c.Create(ctx, owner)))
	tr.add("create other owner", "%s", outcome(b.c.Create(ctx, other)))
	ref := func(o *corev1.ConfigMap) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID}
	}
	dep := cm(n, "dep", nil, nil)
	dep.OwnerReferences = []metav1.OwnerReference{ref(owner)}
	both := cm(n, "both", nil, nil)
	both.OwnerReferences = []metav1.OwnerReference{ref(owner), ref(other)}
	depFin := cm(n, "dep-fin", nil, nil)
	depFin.OwnerReferences = []metav1.OwnerReference{ref(owner)}
	depFin.Finalizers = []string{"conf.bootroll.dev/hold"}
	for _, o := range []*corev1.ConfigMap{dep, both, depFin} {
		tr.add("create "+o.Name, "%s", outcome(b.c.Create(ctx, o)))
	}
	tr.add("delete owner", "%s", outcome(b.c.Delete(ctx, owner.DeepCopy())))
	gone := func(name string) func() bool {
		return func() bool {
			return b.c.Get(ctx, client.ObjectKey{Namespace: n, Name: name}, &corev1.ConfigMap{}) != nil
		}
	}
	tr.add("dep collected", "%t", b.eventually(gone("dep")))
	tr.add("dep-fin being deleted", "%t", b.eventually(func() bool {
		var o corev1.ConfigMap
		return b.c.Get(ctx, client.ObjectKey{Namespace: n, Name: "dep-fin"}, &o) == nil && o.DeletionTimestamp != nil
	}))
	var o corev1.ConfigMap
	err := b.c.Get(ctx, client.ObjectKey{Namespace: n, Name: "both"}, &o)
	tr.add("both kept", "%s deleting=%t", outcome(err), o.DeletionTimestamp != nil)
	tr.add("delete other owner", "%s", outcome(b.c.Delete(ctx, other.DeepCopy())))
	tr.add("both collected", "%t", b.eventually(gone("both")))

	// Foreground deletion: the real garbage collector keeps the owner
	// (deletionTimestamp, finalizer foregroundDeletion) until its blocking
	// dependents are gone, where the twin removes both in the request, a
	// documented difference (docs/fidelity.md); the end state is the same.
	fg := cm(n, "fg-owner", nil, nil)
	tr.add("create fg-owner", "%s", outcome(b.c.Create(ctx, fg)))
	fgDep := cm(n, "fg-dep", nil, nil)
	r := ref(fg)
	r.BlockOwnerDeletion = new(true)
	fgDep.OwnerReferences = []metav1.OwnerReference{r}
	tr.add("create fg-dep", "%s", outcome(b.c.Create(ctx, fgDep)))
	tr.add("delete fg-owner in the foreground", "%s", outcome(b.c.Delete(ctx, fg.DeepCopy(), client.PropagationPolicy(metav1.DeletePropagationForeground))))
	tr.add("fg-dep and fg-owner collected", "%t", b.eventually(func() bool { return gone("fg-dep")() && gone("fg-owner")() }))
}

func pdbFor(ns, name string, app string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
}

func eviction(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-ev"
	ns(ctx, b, tr, n)
	running := func(name, app string) *corev1.Pod {
		p := testPod(n, name, map[string]string{"app": app})
		tr.add("create pod "+name, "%s", outcome(b.c.Create(ctx, p)))
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		tr.add("status update pod "+name+" running", "%s", outcome(b.c.Status().Update(ctx, p)))
		return p
	}
	setStatus := func(pdb *policyv1.PodDisruptionBudget, allowed int32) {
		// An eviction writes the status too: start from the stored PDB.
		_ = b.c.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
		pdb.Status = policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: pdb.Generation, DisruptionsAllowed: allowed,
			CurrentHealthy: 1 + allowed, DesiredHealthy: 1, ExpectedPods: 1 + allowed,
		}
		tr.add(fmt.Sprintf("status update pdb %s disruptionsAllowed=%d", pdb.Name, allowed), "%s", outcome(b.c.Status().Update(ctx, pdb)))
	}
	evict := func(step string, p *corev1.Pod) {
		err := b.c.SubResource("eviction").Create(ctx, p, &policyv1.Eviction{})
		var causes []string
		if st, ok := err.(interface{ Status() metav1.Status }); ok && st.Status().Details != nil {
			for _, c := range st.Status().Details.Causes {
				causes = append(causes, string(c.Type)+": "+c.Message)
			}
		}
		tr.add("evict "+step, "%s causes=%s", outcome(err), js(causes))
	}
	exists := func(p *corev1.Pod) string {
		var got corev1.Pod
		err := b.c.Get(ctx, client.ObjectKeyFromObject(p), &got)
		return fmt.Sprintf("%s deleting=%t", outcome(err), got.DeletionTimestamp != nil)
	}

	pdb := pdbFor(n, "web", "web")
	tr.add("create pdb", "%s gen=%d", outcome(b.c.Create(ctx, pdb)), pdb.Generation)
	w1 := running("w1", "web")
	w2 := running("w2", "web")
	setStatus(pdb, 0)
	evict("w1 with no disruption allowed", w1)
	tr.add("get w1", "%s", exists(w1))
	setStatus(pdb, 1)
	evict("w1 with one disruption allowed", w1)
	tr.add("get w1", "%s", exists(w1))
	var got policyv1.PodDisruptionBudget
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(pdb), &got)
	_, disrupted := got.Status.DisruptedPods["w1"]
	tr.add("get pdb", "disruptionsAllowed=%d disruptedPods has w1=%t", got.Status.DisruptionsAllowed, disrupted)
	evict("w2 after the one disruption was used", w2)
	tr.add("get w2", "%s", exists(w2))

	// Not here: a PDB whose status is older than its spec refuses with a
	// 429 that carries Retry-After: 10, which client-go retries ten
	// times, 100 s in all. sim/apiserver's own tests check that case.

	// An unready pod under a budget that is met goes without using it.
	pdb2 := pdbFor(n, "db", "db")
	tr.add("create pdb db", "%s", outcome(b.c.Create(ctx, pdb2)))
	d1 := running("d1", "db")
	d1.Status.Conditions[0].Status = corev1.ConditionFalse
	tr.add("status update pod d1 unready", "%s", outcome(b.c.Status().Update(ctx, d1)))
	setStatus(pdb2, 0)
	evict("unready d1 under a met pdb with no disruption allowed", d1)
	tr.add("get d1", "%s", exists(d1))
	_ = b.c.Get(ctx, client.ObjectKeyFromObject(pdb2), pdb2)
	tr.add("get pdb db", "disruptionsAllowed=%d disruptedPods=%d", pdb2.Status.DisruptionsAllowed, len(pdb2.Status.DisruptedPods))

	// Pods no budget covers, pods not running yet, and pods that are gone.
	free := running("free", "none")
	evict("a pod no pdb covers", free)
	tr.add("get free", "%s", exists(free))
	pending := testPod(n, "pending", map[string]string{"app": "web"})
	tr.add("create pod pending", "%s", outcome(b.c.Create(ctx, pending)))
	evict("a pending pod under an exhausted pdb", pending)
	tr.add("get pending", "%s", exists(pending))
	evict("a missing pod", testPod(n, "missing", nil))

	// Two budgets over one pod.
	pdb3 := pdbFor(n, "web-too", "web")
	tr.add("create pdb web-too", "%s", outcome(b.c.Create(ctx, pdb3)))
	setStatus(pdb, 1)
	setStatus(pdb3, 1)
	evict("w2 under two pdbs", w2)
	tr.add("get w2", "%s", exists(w2))
}

func watchOrder(ctx context.Context, b *backend, tr *transcript) {
	const n = "conf-watch"
	ns(ctx, b, tr, n)
	w, err := b.watch.Watch(ctx, &corev1.ConfigMapList{}, n)
	if err != nil {
		tr.add("watch", "%s", outcome(err))
		return
	}
	defer w.Stop()
	var rvs []string // the resourceVersions the writes returned
	x := cm(n, "x", nil, map[string]string{"k": "1"})
	tr.add("create x", "%s", outcome(b.c.Create(ctx, x)))
	rvs = append(rvs, x.ResourceVersion)
	y := cm(n, "y", nil, nil)
	y.Finalizers = []string{"conf.bootroll.dev/hold"}
	tr.add("create y", "%s", outcome(b.c.Create(ctx, y)))
	rvs = append(rvs, y.ResourceVersion)
	x.Data["k"] = "2"
	tr.add("update x", "%s", outcome(b.c.Update(ctx, x)))
	rvs = append(rvs, x.ResourceVersion)
	tr.add("update x unchanged", "%s", outcome(b.c.Update(ctx, x)))
	tr.add("delete y", "%s", outcome(b.c.Delete(ctx, y.DeepCopy())))
	rvs = append(rvs, "") // not returned
	tr.add("merge patch x", "%s", outcome(b.c.Patch(ctx, x, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"3"}}`)))))
	rvs = append(rvs, x.ResourceVersion)
	tr.add("remove y's finalizer", "%s", outcome(b.c.Patch(ctx, y, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))))
	rvs = append(rvs, "")
	tr.add("delete x", "%s", outcome(b.c.Delete(ctx, x.DeepCopy())))
	rvs = append(rvs, "")
	// Another namespace's writes are not seen.
	tr.add("create in another namespace", "%s", outcome(b.c.Create(ctx, cm("default", "conf-watch-elsewhere", nil, nil))))

	evs, err := w.Next(len(rvs))
	tr.add("watch events", "%s count=%d", outcomeOrErr(err), len(evs))
	var prev uint64
	for i, ev := range evs {
		rv, perr := parseRV(ev.Obj.GetResourceVersion())
		c := ev.Obj.(*corev1.ConfigMap)
		tr.add(fmt.Sprintf("event %d", i), "%s %s data=%s deleting=%t finalizers=%s rv-increasing=%t rv-as-written=%t",
			ev.Type, c.Name, js(c.Data), c.DeletionTimestamp != nil, js(c.Finalizers),
			perr == nil && rv > prev, rvs[i] == "" || rvs[i] == c.ResourceVersion)
		prev = rv
	}
}

func outcomeOrErr(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func parseRV(s string) (uint64, error) {
	var v uint64
	_, err := fmt.Sscan(s, &v)
	return v, err
}
