package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
)

// TestPoolDeletionCleansUp deletes a pool while two of its nodes are
// cordoned in their slots (a PDB holds their drains). The finalizers
// restore each Node's prior cordon state and remove exactly what bootroll
// added: the slot marker, and the Karpenter annotations on the Node and on
// its NodeClaim, keeping those an admin had set. The planted
// SkipCleanupOnDelete leaves the nodes cordoned (the failing control);
// recreating the pool then clears the stray slot marker and cordon.
func TestPoolDeletionCleansUp(t *testing.T) {
	if cfg == nil {
		t.Skip("needs a real API server (KUBEBUILDER_ASSETS); run make test")
	}
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{karpenterCRDs}, ErrorIfPathMissing: true, MaxTime: crdInstallWait})
	if err != nil {
		t.Fatalf("install Karpenter CRDs: %v", err)
	}
	t.Cleanup(func() { _ = envtest.UninstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: crds}) })
	for _, tc := range []struct {
		name string
		to   rollout.TestOnly
	}{
		{name: "finalizers"},
		{name: "planted-skip-cleanup", to: rollout.TestOnly{SkipCleanupOnDelete: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			prefix := "del" + fmt.Sprint(len(tc.name))
			h := newHarness(t, prefix, 0, nil)
			h.withTestOnly(tc.to)
			claimName := prefix + "-claim"
			claim := newClaim(claimName)
			g.Eventually(func() error { return k8s.Create(h.ctx, claim) }, 20*time.Second, 200*time.Millisecond).Should(Succeed())
			t.Cleanup(func() { _ = k8s.Delete(h.ctx, claim) })
			karp, admin := prefix+"-0", prefix+"-1"
			h.addClaimedNode(karp, claimName, string(claim.GetUID()), nil)
			h.addNode(admin, true)
			g.Eventually(func() error {
				n := h.node(admin)
				n.Annotations = map[string]string{v1alpha1.KarpenterDoNotDisrupt: "true"}
				return k8s.Update(h.ctx, &n, client.FieldOwner("admin"))
			}, 10*time.Second).Should(Succeed())
			h.pods(karp, 1, "db")
			h.pods(admin, 1, "db")
			h.blockingPDB("db", 2)
			p := h.pool(prefix, digestRef("v2"), intstr.FromInt32(2), func(p *v1alpha1.BootcNodePool) {
				p.Spec.DrainTimeout = &metav1.Duration{Duration: 10 * time.Minute}
			})
			g.Eventually(func() error {
				for _, name := range []string{karp, admin} {
					n := h.node(name)
					if n.Annotations[v1alpha1.AnnotationSlot] != prefix || !n.Spec.Unschedulable || n.Annotations[v1alpha1.KarpenterDoNotRepair] != "true" {
						return fmt.Errorf("%s not yet in its slot: unschedulable=%v annotations=%v", name, n.Spec.Unschedulable, n.Annotations)
					}
				}
				if a := h.claimAnnotations(claimName); a[v1alpha1.KarpenterDoNotDisrupt] != "true" {
					return fmt.Errorf("NodeClaim not protected yet: %v", a)
				}
				return nil
			}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

			g.Expect(k8s.Delete(h.ctx, p)).To(Succeed())
			g.Eventually(func() bool {
				var x v1alpha1.BootcNodePool
				return apierrors.IsNotFound(k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &x))
			}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the pool goes once its nodes are cleaned up")
			if tc.to.SkipCleanupOnDelete {
				// envtest runs no garbage collector: do its work on the
				// records the pool owned.
				g.Expect(k8s.DeleteAllOf(h.ctx, &v1alpha1.BootcNode{}, client.MatchingLabels{v1alpha1.LabelPool: prefix})).To(Succeed())
			}
			g.Eventually(func() int { return len(h.bootcNodes()) }, 30*time.Second, 100*time.Millisecond).Should(Equal(0))

			if tc.to.SkipCleanupOnDelete {
				n := h.node(karp)
				var writers []string
				for _, mf := range n.ManagedFields {
					writers = append(writers, fmt.Sprintf("%s %s %s %s", mf.Manager, mf.Operation, mf.Time, mf.FieldsV1))
				}
				g.Expect(n.Spec.Unschedulable).To(BeTrue(), "without cleanup the node stays cordoned; annotations %v; events of its record %v; field managers:\n%s",
					n.Annotations, h.events.of(karp), strings.Join(writers, "\n"))
				g.Expect(n.Annotations).To(HaveKey(v1alpha1.AnnotationSlot))
				// A new pool, with an honest controller, clears what the
				// old one left: the marker and the cordon it stands for.
				h.withTestOnly(rollout.TestOnly{})
				h.pool(prefix+"-again", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) { p.Spec.Paused = true })
				g.Eventually(func() error {
					n := h.node(karp)
					if n.Spec.Unschedulable || n.Annotations[v1alpha1.AnnotationSlot] != "" {
						return fmt.Errorf("unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
					}
					return nil
				}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
				return
			}
			n := h.node(karp)
			g.Expect(n.Spec.Unschedulable).To(BeFalse(), "restored to uncordoned")
			g.Expect(n.Annotations).NotTo(HaveKey(v1alpha1.AnnotationSlot))
			g.Expect(n.Annotations).NotTo(HaveKey(v1alpha1.KarpenterDoNotDisrupt))
			g.Expect(n.Annotations).NotTo(HaveKey(v1alpha1.KarpenterDoNotRepair))
			a := h.claimAnnotations(claimName)
			g.Expect(a).NotTo(HaveKey(v1alpha1.KarpenterDoNotDisrupt))
			g.Expect(a).NotTo(HaveKey(v1alpha1.KarpenterDoNotRepair))
			m := h.node(admin)
			g.Expect(m.Spec.Unschedulable).To(BeTrue(), "an admin's cordon stays")
			g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.AnnotationSlot))
			g.Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.KarpenterDoNotDisrupt, "true"), "an admin's annotation stays")
			g.Expect(m.Annotations).NotTo(HaveKey(v1alpha1.KarpenterDoNotRepair))
		})
	}
}

// TestBootcNodeDeletedByHandCleansUp deletes a node's BootcNode while the
// node is cordoned in its slot: the record's finalizer uncordons the Node
// and removes the marker first; the pool then makes a new record.
func TestBootcNodeDeletedByHandCleansUp(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "bnd", 1, nil)
	h.pods("bnd-0", 1, "db")
	h.blockingPDB("db", 1)
	h.pool("bnd", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	})
	g.Eventually(func() bool {
		n := h.node("bnd-0")
		return n.Spec.Unschedulable && n.Annotations[v1alpha1.AnnotationSlot] == "bnd"
	}, 60*time.Second, 100*time.Millisecond).Should(BeTrue())
	var old v1alpha1.BootcNode
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Name: "bnd-0"}, &old)).To(Succeed())
	g.Expect(old.Finalizers).To(ContainElement(v1alpha1.Finalizer))
	g.Expect(k8s.Delete(h.ctx, &old)).To(Succeed())
	g.Eventually(func() error {
		var bn v1alpha1.BootcNode
		if err := k8s.Get(h.ctx, client.ObjectKey{Name: "bnd-0"}, &bn); err != nil {
			return err
		}
		if bn.UID == old.UID {
			return fmt.Errorf("the old record is still there (deleting since %v)", bn.DeletionTimestamp)
		}
		return nil
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "a new record replaces the deleted one")
	// The new record knows nothing of the old slot: the old one's
	// finalizer must have given everything back before it went.
	n := h.node("bnd-0")
	if _, marked := n.Annotations[v1alpha1.AnnotationSlot]; marked && n.Spec.Unschedulable {
		// The new record may already hold a new slot: then it is its own.
		var bn v1alpha1.BootcNode
		g.Expect(k8s.Get(h.ctx, client.ObjectKey{Name: "bnd-0"}, &bn)).To(Succeed())
		g.Expect(bn.Status.Rollout.Cordoned).To(BeTrue(), "cordoned with a marker no record accounts for")
	}
	g.Eventually(func() []string { return h.events.of("bnd-0") }, 10*time.Second, 50*time.Millisecond).Should(ContainElement("Released"))
}

// TestRelabelOutOfPoolCleansUp relabels a node out of its pool while it
// is cordoned in its slot: bootroll gives back the cordon, the marker and
// the Karpenter annotations it added, and the record goes.
func TestRelabelOutOfPoolCleansUp(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "rel", 1, nil)
	h.pods("rel-0", 1, "db")
	h.blockingPDB("db", 1)
	h.pool("rel", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	})
	g.Eventually(func() bool {
		n := h.node("rel-0")
		return n.Spec.Unschedulable && n.Annotations[v1alpha1.AnnotationSlot] == "rel" && n.Annotations[v1alpha1.KarpenterDoNotDisrupt] == "true"
	}, 60*time.Second, 100*time.Millisecond).Should(BeTrue())
	g.Eventually(func() error {
		n := h.node("rel-0")
		n.Labels = map[string]string{"elsewhere": "yes"}
		return k8s.Update(h.ctx, &n)
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func() error {
		n := h.node("rel-0")
		for _, k := range []string{v1alpha1.AnnotationSlot, v1alpha1.KarpenterDoNotDisrupt, v1alpha1.KarpenterDoNotRepair} {
			if _, ok := n.Annotations[k]; ok {
				return fmt.Errorf("annotation %s left: %v", k, n.Annotations)
			}
		}
		if n.Spec.Unschedulable {
			return fmt.Errorf("still cordoned")
		}
		var bn v1alpha1.BootcNode
		if err := k8s.Get(h.ctx, client.ObjectKey{Name: "rel-0"}, &bn); !apierrors.IsNotFound(err) {
			return fmt.Errorf("record still there (err %v, phase %s)", err, bn.Status.Phase)
		}
		return nil
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestPoolDeletedMidRebootKeepsCordonUntilRebooted deletes a pool while a
// node reboots into the new image: the boot order is withdrawn at once,
// but the node stays cordoned until the daemon is past the reboot (it may
// have read the order before the withdrawal), and is then given back.
func TestPoolDeletedMidRebootKeepsCordonUntilRebooted(t *testing.T) {
	g := NewWithT(t)
	h := newHarnessWith(t, "mrb", 1, func(h *harness) { h.rebootTicks = 40 })
	h.mu.Lock()
	host := h.hosts["mrb-0"]
	h.mu.Unlock()
	p := h.pool("mrb", digestRef("v2"), intstr.FromInt32(1))
	g.Eventually(host.isRebooting, 30*time.Second, 10*time.Millisecond).Should(BeTrue())
	g.Expect(k8s.Delete(h.ctx, p)).To(Succeed())
	for host.isRebooting() {
		n := h.node("mrb-0")
		g.Expect(n.Spec.Unschedulable).To(BeTrue(), "uncordoned while its reboot runs")
		time.Sleep(20 * time.Millisecond)
	}
	g.Eventually(func() error {
		n := h.node("mrb-0")
		if n.Spec.Unschedulable || len(n.Annotations) > 0 {
			var bn v1alpha1.BootcNode
			err := k8s.Get(h.ctx, client.ObjectKey{Name: "mrb-0"}, &bn)
			return fmt.Errorf("unschedulable=%v annotations=%v; record: err=%v deleting=%v generation=%d daemon observed %d", n.Spec.Unschedulable, n.Annotations, err, bn.DeletionTimestamp, bn.Generation, bn.Status.Daemon.ObservedGeneration)
		}
		var x v1alpha1.BootcNodePool
		if err := k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &x); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pool still there: %v", err)
		}
		return nil
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	h.mu.Lock()
	defer h.mu.Unlock()
	g.Expect(h.unprotected).To(BeEmpty())
	g.Expect(h.reboots["mrb-0"]).To(Equal(1))
}
