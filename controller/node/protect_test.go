package node

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/internal/fakeapi"
	"github.com/bootroll/bootroll/controller/karpenter"
	"github.com/bootroll/bootroll/controller/options"
)

// TestFinishProtectsAfterEverySlot ends a slot that drained a node, as
// Updated, Failed, abandoned (Retargeted) or after the node left its
// pool: the first three keep Karpenter's do-not-disrupt for the pool's
// postUpdateProtection (issue 11, node-churn.no-churn.seed2: Karpenter
// reaped a node emptied by a failed slot 20 s after), the last gives it
// back at once (cleanup).
func TestFinishProtectsAfterEverySlot(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		phase    v1alpha1.NodePhase
		reason   string
		success  bool
		leftPool bool
		wantKeep bool
	}{
		{"updated", v1alpha1.PhaseUpdated, "Updated", true, false, true},
		{"failed", v1alpha1.PhaseFailed, "BootFailed", false, false, true},
		{"drain abandoned", v1alpha1.PhasePending, "Retargeted", false, false, true},
		{"left its pool", v1alpha1.PhasePending, "LeftPool", false, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: 5 * time.Minute}
			labels := map[string]string{"pool": "p"}
			if c.leftPool {
				labels = map[string]string{"pool": "elsewhere"}
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels, Annotations: map[string]string{
				v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true"}}}
			node.Spec.Unschedulable = true
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseVerifying
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			cl := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(cl, options.Options{})
			s := stepOf(t, cl, pool, now)
			cur := s.bn
			if err := r.finish(context.Background(), s, c.phase, c.reason, "test", c.success); err != nil {
				t.Fatal(err)
			}
			var got corev1.Node
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Unschedulable {
				t.Fatal("still cordoned after the slot ended")
			}
			_, kept := got.Annotations[v1alpha1.KarpenterDoNotDisrupt]
			if kept != c.wantKeep {
				t.Fatalf("do-not-disrupt kept = %v, want %v (annotations %v)", kept, c.wantKeep, got.Annotations)
			}
			if c.wantKeep {
				pu := cur.Status.Rollout.ProtectUntil
				if pu == nil || !pu.Time.Equal(now.Add(5*time.Minute)) {
					t.Fatalf("protectUntil = %v, want %s", pu, now.Add(5*time.Minute))
				}
			}
		})
	}
}

// TestFinishLeavesTheSlotOnTheRecordFirst ends a slot: the record leaves
// the slot phase (still cordoned, so the pool keeps the slot) before the
// Node loses its marker and protection (issue 11,
// karpenter-defaults.no-reap-while-updating.seed30: the uncordon removed
// do-not-disrupt, the record write timed out and Karpenter drifted the
// node, still Rebooting on its record, 7 s later). With the record write
// failing the Node is untouched; with the Node patch failing the record
// says Updated and cordoned, and the next pass finishes; with both
// succeeding the node is given back. A node without a NodeClaim keeps the
// same order (explorer seed 176094 of nodeclass-drift-mid-rollout: given
// back first and recorded after, in one write, a crash in between left
// the node unprotected and its record in the slot, and Karpenter, its
// CRDs installed again, adopted and drifted it).
func TestFinishLeavesTheSlotOnTheRecordFirst(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name                      string
		claimed                   bool
		failRecord, failNode      bool
		wantPhase                 v1alpha1.NodePhase
		wantRecordCordoned        bool
		wantCordoned, wantProtect bool
	}{
		{"claimed: record write fails", true, true, false, v1alpha1.PhaseVerifying, true, true, true},
		{"claimed: node patch fails", true, false, true, v1alpha1.PhaseUpdated, true, true, true},
		{"claimed: both succeed", true, false, false, v1alpha1.PhaseUpdated, false, false, false},
		{"no claim: record write fails", false, true, false, v1alpha1.PhaseVerifying, true, true, true},
		{"no claim: node patch fails", false, false, true, v1alpha1.PhaseUpdated, true, true, true},
		{"no claim: both succeed", false, false, false, v1alpha1.PhaseUpdated, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			// Off: this test is about the order of the writes that end
			// a slot, not the protection kept after it.
			pool.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}, Annotations: map[string]string{
				v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true"}}}
			node.Spec.Unschedulable = true
			if c.claimed {
				node.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpenter.NodeClaimGVK.Group + "/v1", Kind: karpenter.NodeClaimGVK.Kind, Name: "claim-n", UID: "u1"}}
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseVerifying
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.PriorUnschedulable = ptr.To(false)
			bn.Status.Rollout.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			base := fakeapi.Client(t, pool, bn, node)
			cl := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if c.failRecord {
						return apierrors.NewTimeoutError("patch timed out", 0)
					}
					return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, isNode := obj.(*corev1.Node); isNode && c.failNode {
						return apierrors.NewTimeoutError("patch timed out", 0)
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
			})
			r := NewReconciler(cl, options.Options{})
			s := stepOf(t, cl, pool, now)
			told := 0
			s.onRecorded(func() { told++ })
			err := r.finish(context.Background(), s, v1alpha1.PhaseUpdated, "Updated", "test", true)
			if (err != nil) != (c.failRecord || c.failNode) {
				t.Fatalf("finish: %v", err)
			}
			// The outcome (event, metric) is told once the phase is
			// written, also when a later write fails: the retry finds the
			// phase written and would never tell it (envtest
			// TestRolloutRespectsMaxUnavailable lost "Updated" so).
			if want := map[bool]int{true: 0, false: 1}[c.wantPhase == v1alpha1.PhaseVerifying]; told != want {
				t.Fatalf("outcome told %d time(s), want %d", told, want)
			}
			var got corev1.Node
			if err := base.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			_, marked := got.Annotations[v1alpha1.AnnotationSlot]
			_, protected := got.Annotations[v1alpha1.KarpenterDoNotDisrupt]
			if got.Spec.Unschedulable != c.wantCordoned || marked != c.wantCordoned || protected != c.wantProtect {
				t.Fatalf("node cordoned %v marked %v protected %v, want %v %v %v", got.Spec.Unschedulable, marked, protected, c.wantCordoned, c.wantCordoned, c.wantProtect)
			}
			var rec v1alpha1.BootcNode
			if err := base.Get(context.Background(), types.NamespacedName{Name: "n"}, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Status.Phase != c.wantPhase || rec.Status.Rollout.Cordoned != c.wantRecordCordoned {
				t.Fatalf("record %s cordoned %v, want %s %v", rec.Status.Phase, rec.Status.Rollout.Cordoned, c.wantPhase, c.wantRecordCordoned)
			}
		})
	}
}

// TestReleaseLeavesTheSlotOnTheRecordFirst: the release of a record being
// deleted in its slot (its boot order settled) writes the record out of
// its slot phase first, still cordoned and owning what bootroll added, and
// only then gives the Node and its NodeClaim back, as finish does. With
// the record write failing nothing is given back; with the Node's or the
// NodeClaim's patch failing the record already says Pending (explorer
// seed 176610 of cluster-repair-during-slow-reboot: the Node was given
// back first, the NodeClaim's patch failed on API errors, and Karpenter
// repaired kp-0, still down, while its record said Draining).
func TestReleaseLeavesTheSlotOnTheRecordFirst(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                                 string
		failRecord, failNode, failClaim      bool
		wantPhase                            v1alpha1.NodePhase
		wantRecordCordoned                   bool
		wantNodeCordoned, wantClaimProtected bool
	}{
		{"record write fails", true, false, false, v1alpha1.PhaseDraining, true, true, true},
		{"node patch fails", false, true, false, v1alpha1.PhasePending, true, true, true},
		{"claim patch fails", false, false, true, v1alpha1.PhasePending, true, false, true},
		{"all succeed", false, false, false, v1alpha1.PhasePending, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}, Annotations: map[string]string{
				v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "claim-n", UID: "u"}}}}
			node.Spec.Unschedulable = true
			claim := &unstructured.Unstructured{}
			claim.SetGroupVersionKind(karpenter.NodeClaimGVK)
			claim.SetName("claim-n")
			claim.SetAnnotations(map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true"})
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Finalizers: []string{v1alpha1.Finalizer}}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseDraining
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable = true, ptr.To(false)
			ro.DrainStartedAt = &metav1.Time{Time: now.Add(-11 * time.Minute)}
			ro.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
			ro.AddedNodeClaimAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			base := fakeapi.Client(t, pool, bn, node, claim)
			timeout := apierrors.NewTimeoutError("patch timed out", 0)
			cl := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					if c.failRecord {
						return timeout
					}
					return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					_, isNode := obj.(*corev1.Node)
					_, isClaim := obj.(*unstructured.Unstructured)
					if isNode && c.failNode || isClaim && c.failClaim {
						return timeout
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
			})
			r := NewReconciler(cl, options.Options{})
			wait, err := r.release(context.Background(), stepOf(t, cl, pool, now), "Released", "test")
			if (err != nil) != (c.failRecord || c.failNode || c.failClaim) || wait != 0 {
				t.Fatalf("release: wait %v, err %v", wait, err)
			}
			var rec v1alpha1.BootcNode
			if err := base.Get(context.Background(), types.NamespacedName{Name: "n"}, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Status.Phase != c.wantPhase || rec.Status.Rollout.Cordoned != c.wantRecordCordoned {
				t.Fatalf("record %s cordoned %v, want %s %v", rec.Status.Phase, rec.Status.Rollout.Cordoned, c.wantPhase, c.wantRecordCordoned)
			}
			var got corev1.Node
			if err := base.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			_, marked := got.Annotations[v1alpha1.AnnotationSlot]
			_, protected := got.Annotations[v1alpha1.KarpenterDoNotRepair]
			if got.Spec.Unschedulable != c.wantNodeCordoned || marked != c.wantNodeCordoned || protected != c.wantNodeCordoned {
				t.Fatalf("node cordoned %v marked %v protected %v, want all %v", got.Spec.Unschedulable, marked, protected, c.wantNodeCordoned)
			}
			gc := &unstructured.Unstructured{}
			gc.SetGroupVersionKind(karpenter.NodeClaimGVK)
			if err := base.Get(context.Background(), types.NamespacedName{Name: "claim-n"}, gc); err != nil {
				t.Fatal(err)
			}
			if _, has := gc.GetAnnotations()[v1alpha1.KarpenterDoNotDisrupt]; has != c.wantClaimProtected {
				t.Fatalf("NodeClaim protected %v, want %v", has, c.wantClaimProtected)
			}
		})
	}
}

// TestKeepProtected: a node in its slot, or in its post-update protection,
// whose do-not-disrupt someone else had put there and has since lifted
// gets it again as bootroll's own (recorded before the Node is written);
// one that still shows every protection annotation is not written at all
// (issue 11, crd-install-mid-rollout seed1029: an operator lifted their
// do-not-disrupt mid-slot and Karpenter reaped the drained node).
func TestKeepProtected(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		present map[string]string
		want    []string // recorded as bootroll's
	}{
		{"operator lifted do-not-disrupt", map[string]string{v1alpha1.KarpenterDoNotRepair: "true"}, []string{v1alpha1.KarpenterDoNotRepair, v1alpha1.KarpenterDoNotDisrupt}},
		{"all present", map[string]string{v1alpha1.KarpenterDoNotRepair: "true", v1alpha1.KarpenterDoNotDisrupt: "true"}, []string{v1alpha1.KarpenterDoNotRepair}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			ann := map[string]string{v1alpha1.AnnotationSlot: "p"}
			for k, v := range c.present {
				ann[k] = v
			}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}, Annotations: ann}}
			node.Spec.Unschedulable = true
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = v1alpha1.PhaseRebooting
			bn.Status.Rollout.Cordoned = true
			bn.Status.Rollout.AddedAnnotations = []string{v1alpha1.KarpenterDoNotRepair}
			cl := fakeapi.Client(t, pool, bn, node)
			r := NewReconciler(cl, options.Options{})
			s := stepOf(t, cl, pool, now)
			if err := r.keepProtected(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			var got corev1.Node
			var rec v1alpha1.BootcNode
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &rec); err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Annotations[v1alpha1.KarpenterDoNotDisrupt]; !ok {
				t.Errorf("do-not-disrupt missing after keepProtected: %v", got.Annotations)
			}
			if g := rec.Status.Rollout.AddedAnnotations; len(g) != len(c.want) {
				t.Errorf("recorded as bootroll's: %v, want %v", g, c.want)
			}
		})
	}
}

// TestReleaseWaitKeepsProtection: a node that left its pool, or whose
// record is being deleted, while down in its slot's reboot stays in the
// slot until the boot order settles; a protection lifted meanwhile is put
// back (explorer seeds 107078 and 113126 of
// cluster-repair-during-slow-reboot: an operator's do-not-repair removed
// mid-reboot, and Karpenter repaired the node), also when the pool's image
// changed since the order (seed 176610).
func TestReleaseWaitKeepsProtection(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	ann := map[string]string{v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "elsewhere"}, Annotations: ann}}
	node.Spec.Unschedulable = true
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, LastTransitionTime: metav1.NewTime(now.Add(-9 * time.Minute))}}
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: 2}}
	bn.Spec.Pool = "p"
	bn.Spec.DesiredImage = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	bn.Spec.BootOrder = &v1alpha1.BootOrder{Image: bn.Spec.DesiredImage, At: metav1.NewTime(now.Add(-10 * time.Minute))}
	bn.Status.Phase = v1alpha1.PhaseDraining
	bn.Status.Rollout.TargetImage = bn.Spec.DesiredImage
	bn.Status.Rollout.Cordoned = true
	bn.Status.Rollout.DrainStartedAt = &metav1.Time{Time: now.Add(-11 * time.Minute)}
	bn.Status.Rollout.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair}
	bn.Status.Daemon.Phase = v1alpha1.DaemonRebooting
	bn.Status.Daemon.ObservedGeneration = 2
	// The pool went back to the image the node ran while it was down in
	// its reboot: the order is void, the reboot is not over (explorer
	// seed 176610 of cluster-repair-during-slow-reboot: the release went
	// at once, and Karpenter repaired the node mid-reboot).
	voided := bn.DeepCopy()
	voided.Generation = 3
	voided.Spec.DesiredImage = "registry.example/os@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	voided.Spec.BootOrder.Withdrawn = true
	voided.Status.Daemon.BootID = "boot-1"
	voided.Status.Daemon.LastReboot = &v1alpha1.RebootRecord{Image: bn.Spec.DesiredImage, BootID: "boot-1", At: bn.Spec.BootOrder.At}
	for _, path := range []string{"left its pool", "record being deleted", "record being deleted, the order voided"} {
		rec := bn.DeepCopy()
		if path == "record being deleted, the order voided" {
			rec = voided.DeepCopy()
		}
		cl := fakeapi.Client(t, pool, rec, node.DeepCopy())
		r := NewReconciler(cl, options.Options{})
		var wait time.Duration
		if path == "left its pool" {
			res, err := r.step(context.Background(), stepOf(t, cl, pool, now))
			if err != nil {
				t.Fatal(err)
			}
			wait = res.RequeueAfter
		} else {
			// The release of a record being deleted (cleanup.go) waits
			// the same way.
			var err error
			if wait, err = r.release(context.Background(), stepOf(t, cl, pool, now), "Released", "test"); err != nil {
				t.Fatal(err)
			}
		}
		if wait <= 0 {
			t.Errorf("%s: wait %v, want a wait for the boot order to settle", path, wait)
		}
		var got corev1.Node
		if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
			t.Fatal(err)
		}
		if _, ok := got.Annotations[v1alpha1.KarpenterDoNotRepair]; !ok || !got.Spec.Unschedulable {
			t.Errorf("%s: node while its release waits: cordoned %v, annotations %v; want cordoned, do-not-repair back", path, got.Spec.Unschedulable, got.Annotations)
		}
	}
}

// stepOf reads record and Node "n" from cl into a node step of pool at now.
func stepOf(t *testing.T, cl client.Client, pool *v1alpha1.BootcNodePool, now time.Time) *nodeStep {
	t.Helper()
	var cur v1alpha1.BootcNode
	var n corev1.Node
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &cur); err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &n); err != nil {
		t.Fatal(err)
	}
	return &nodeStep{orig: recordOf(&cur), bn: &cur, node: &n, pool: pool, now: now}
}

// TestKeepProtectedLeavesAnUnmarkedSlotToTheCordon: a record in its slot
// whose Node does not carry the slot marker yet (the grant's cordon
// failed) gets no protection written alone: the drain's cordon writes the
// marker, the cordon and the protection in one patch (explorer seed 100025
// of node-churn: written alone first, the protection read as an operator's
// and outlived the slot).
func TestKeepProtectedLeavesAnUnmarkedSlotToTheCordon(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	pool.Spec.NodeSelector = map[string]string{"pool": "p"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}}}
	bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	bn.Spec.Pool = "p"
	bn.Status.Phase = v1alpha1.PhaseDraining
	bn.Status.Rollout.Cordoned = true
	cl := fakeapi.Client(t, pool, bn, node)
	r := NewReconciler(cl, options.Options{})
	if err := r.keepProtected(context.Background(), stepOf(t, cl, pool, now)); err != nil {
		t.Fatal(err)
	}
	var got corev1.Node
	if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Annotations) != 0 {
		t.Errorf("keepProtected wrote %v on a Node without the slot marker; want nothing until the cordon", got.Annotations)
	}
}

// TestPostUpdateProtectionAsksTheAPIServer: a slot that ends on a node
// the cache still shows owned by a NodeClaim, which the API server shows
// owned by none (Karpenter's CRDs removed), gets no default post-update
// protection (explorer seed 120245 of
// cluster-halt-lifted-by-node-delete-karpenter: the node kept bootroll's
// annotations for 5 minutes nothing needed); one the API server shows
// owned gets the default 5 minutes.
func TestPostUpdateProtectionAsksTheAPIServer(t *testing.T) {
	const img = "registry.example/os@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	now := time.Date(2026, 1, 5, 0, 1, 0, 0, time.UTC)
	owned := []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim", Name: "nc-n", UID: "u"}}
	for _, c := range []struct {
		name  string
		owner bool // the API server's Node is owned by a NodeClaim
		want  bool // ProtectUntil set
	}{{"owner gone on the API server", false, false}, {"still owned", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"},
				Annotations: map[string]string{v1alpha1.AnnotationSlot: "p", v1alpha1.KarpenterDoNotDisrupt: "true"}, OwnerReferences: owned}}
			node.Spec.Unschedulable = true
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool, bn.Spec.DesiredImage = "p", img
			bn.Status.Phase = v1alpha1.PhaseVerifying
			ro := &bn.Status.Rollout
			ro.TargetImage, ro.Cordoned, ro.AddedAnnotations = img, true, []string{v1alpha1.KarpenterDoNotDisrupt}
			cached := fakeapi.Client(t, pool, bn, node)
			api := node.DeepCopy()
			if !c.owner {
				api.OwnerReferences = nil
			}
			apiServer := fakeapi.Client(t, pool.DeepCopy(), bn.DeepCopy(), api)
			r := NewReconciler(cached, options.Options{Clock: clocktesting.NewFakePassiveClock(now), APIReader: apiServer})
			s := &nodeStep{orig: recordOf(bn), bn: bn, node: node, pool: pool, now: now}
			if err := r.finish(context.Background(), s, v1alpha1.PhaseUpdated, "Updated", "test", true); err != nil {
				t.Fatal(err)
			}
			if got := s.bn.Status.Rollout.ProtectUntil != nil; got != c.want {
				t.Errorf("protectUntil %v, want set %v", s.bn.Status.Rollout.ProtectUntil, c.want)
			}
		})
	}
}

// TestResumedFinishKeepsTheProtectionDeadline: the post-update protection
// runs from the Node's give-back. A finish resumed after its first pass
// recorded the deadline (the record Updated and still cordoned: a later
// write failed) keeps that deadline when the Node was given back; set
// again from the resumed pass, it moved on with every late retry
// (explorer seed 176161 of repair-during-slow-reboot: kp-1 given back at
// 25m00s with its deadline at 30m00s, the finish resumed at 35m08s and
// set 40m08s). When the Node still carries bootroll's slot marker (its
// uncordon failed), this pass gives it back and the deadline runs from
// now, recorded before the uncordon: should the uncordon fail again, the
// record already holds it (explorer seed 176264 of node-churn: the
// protection ended 4m40s after the give-back). A finish that ends the
// slot sets it from now.
func TestResumedFinishKeepsTheProtectionDeadline(t *testing.T) {
	end := time.Date(2026, 1, 5, 0, 25, 0, 0, time.UTC)
	now := end.Add(10 * time.Minute)
	for _, c := range []struct {
		name     string
		phase    v1alpha1.NodePhase
		recorded *metav1.Time // ProtectUntil on the record
		marked   bool         // the Node still carries the slot marker
		failNode bool         // the uncordon (the Node's patch) fails
		want     time.Time
	}{
		{"resumed after the Node was given back", v1alpha1.PhaseUpdated, &metav1.Time{Time: end.Add(5 * time.Minute)}, false, false, end.Add(5 * time.Minute)},
		// The uncordon failed: the Node is given back now, and its
		// protection runs from now (explorer seed 176264 of node-churn).
		{"resumed before the Node was given back", v1alpha1.PhaseUpdated, &metav1.Time{Time: end.Add(5 * time.Minute)}, true, false, now.Add(5 * time.Minute)},
		{"resumed before the Node was given back, the uncordon fails again", v1alpha1.PhaseUpdated, &metav1.Time{Time: end.Add(5 * time.Minute)}, true, true, now.Add(5 * time.Minute)},
		{"the slot ends now", v1alpha1.PhaseVerifying, nil, true, false, now.Add(5 * time.Minute)},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := &v1alpha1.BootcNodePool{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
			pool.Spec.NodeSelector = map[string]string{"pool": "p"}
			pool.Spec.Karpenter.PostUpdateProtection = &metav1.Duration{Duration: 5 * time.Minute}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"pool": "p"}, Annotations: map[string]string{
				v1alpha1.KarpenterDoNotDisrupt: "true"}}}
			if c.marked {
				node.Annotations[v1alpha1.AnnotationSlot] = "p"
				node.Spec.Unschedulable = true
			}
			bn := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
			bn.Spec.Pool = "p"
			bn.Status.Phase = c.phase
			ro := &bn.Status.Rollout
			ro.Cordoned, ro.PriorUnschedulable, ro.ProtectUntil = true, ptr.To(false), c.recorded
			ro.AddedAnnotations = []string{v1alpha1.KarpenterDoNotDisrupt}
			base := fakeapi.Client(t, pool, bn, node)
			cl := interceptor.NewClient(base.(client.WithWatch), interceptor.Funcs{
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, isNode := obj.(*corev1.Node); isNode && c.failNode {
						return apierrors.NewTooManyRequests("test", 1)
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
			})
			r := NewReconciler(cl, options.Options{})
			err := r.finish(context.Background(), stepOf(t, cl, pool, now), v1alpha1.PhaseUpdated, "Updated", "test", true)
			if (err != nil) != c.failNode {
				t.Fatalf("finish: %v, want an error %v", err, c.failNode)
			}
			var got v1alpha1.BootcNode
			if err := cl.Get(context.Background(), types.NamespacedName{Name: "n"}, &got); err != nil {
				t.Fatal(err)
			}
			if pu := got.Status.Rollout.ProtectUntil; pu == nil || !pu.Time.Equal(c.want) || got.Status.Rollout.Cordoned != c.failNode {
				t.Fatalf("record: protectUntil %v, cordoned %v; want %s, cordoned %v", pu, got.Status.Rollout.Cordoned, c.want, c.failNode)
			}
		})
	}
}

// protected says what karpenter.Protect says by adding nothing.
func TestProtectedAsProtect(t *testing.T) {
	for _, ann := range []map[string]string{
		nil, {}, {"other": "x"},
		{v1alpha1.KarpenterDoNotDisrupt: "true"},
		{v1alpha1.KarpenterDoNotRepair: "true", "other": "x"},
		{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "false"},
		{v1alpha1.KarpenterDoNotDisrupt: "true", v1alpha1.KarpenterDoNotRepair: "true", "other": "x"},
	} {
		before := maps.Clone(ann)
		_, added := karpenter.Protect(maps.Clone(ann))
		if got, want := protected(ann), len(added) == 0; got != want {
			t.Errorf("protected(%v) = %v, Protect adds %v", ann, got, added)
		}
		if !maps.Equal(ann, before) {
			t.Errorf("protected changed %v", before)
		}
	}
}
