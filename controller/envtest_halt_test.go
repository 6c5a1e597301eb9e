package controller_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
	"github.com/bootroll/bootroll/internal/imageref"
)

// withTestOnly restarts the harness's controller with broken settings.
func (h *harness) withTestOnly(to rollout.TestOnly) {
	h.stopManager()
	h.opts.TestOnly = to
	h.startManager()
}

// forget removes a node from the harness's fleet (its daemon stops).
func (h *harness) forget(name string) {
	h.mu.Lock()
	delete(h.hosts, name)
	delete(h.daemons, name)
	h.mu.Unlock()
}

// inSlotFor counts the nodes that are in a slot or asked to boot image.
func (h *harness) inSlotFor(image string) []string {
	var out []string
	for name, bn := range h.bootcNodes() {
		if bn.Spec.DesiredImage != image {
			continue
		}
		if orderStands(bn) || bn.Status.Phase == v1alpha1.PhaseDraining || bn.Status.Phase == v1alpha1.PhaseRebooting {
			out = append(out, name)
		}
	}
	return out
}

// TestHaltSurvivesDeletionOfFailedNode: the halt is recorded on the pool,
// so deleting the failed node's Node and BootcNode (as Karpenter's repair
// or an admin would) does not lift it; a new spec.image does, and the
// halt stays readable in status.lastHalt. The planted old behaviour
// (halt from live records) resumes the bad rollout, which shows the test
// can fail.
func TestHaltSurvivesDeletionOfFailedNode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		to     rollout.TestOnly
		resume bool // the bad image rolls on after the deletion
	}{
		{name: "durable", resume: false},
		{name: "planted-live-records", to: rollout.TestOnly{HaltFromLiveRecords: true}, resume: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			prefix := "halt" + fmt.Sprint(len(tc.name))
			h := newHarness(t, prefix, 3, clock.RealClock{})
			h.withTestOnly(tc.to)
			bad, good := digestRef("bad"), digestRef("v3")
			h.mu.Lock()
			h.failing[imageref.Digest(bad)] = true
			h.mu.Unlock()
			p := h.pool(prefix, bad, intstr.FromInt32(1))
			var pool v1alpha1.BootcNodePool
			failed := ""
			g.Eventually(func() string {
				for name, bn := range h.bootcNodes() {
					if bn.Status.Phase == v1alpha1.PhaseFailed {
						failed = name
					}
				}
				return failed
			}, 60*time.Second, 100*time.Millisecond).ShouldNot(BeEmpty())
			g.Eventually(func() bool {
				_ = k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &pool)
				return meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.ConditionHalted)
			}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
			if !tc.resume {
				g.Expect(pool.Status.Halt).NotTo(BeNil())
				g.Expect(pool.Status.Halt.Image).To(Equal(bad))
				g.Expect(pool.Status.Halt.Failures).To(HaveLen(1))
				g.Expect(pool.Status.Halt.Failures[0].Node).To(Equal(failed))
				g.Expect(pool.Status.Halt.Failures[0].Reason).To(Equal("BootFailed"))
				// The failed node's boot order is withdrawn.
				g.Expect(orderStands(h.bootcNodes()[failed])).To(BeFalse())
			}

			// Karpenter's repair (or an admin) deletes the failed node.
			h.forget(failed)
			g.Expect(k8s.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: failed}})).To(Succeed())
			g.Eventually(func() bool {
				err := k8s.Delete(h.ctx, &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: failed}})
				if apierrors.IsNotFound(err) {
					return true
				}
				var bn v1alpha1.BootcNode
				return apierrors.IsNotFound(k8s.Get(h.ctx, client.ObjectKey{Name: failed}, &bn))
			}, 20*time.Second, 100*time.Millisecond).Should(BeTrue())

			rolled := func() []string { return h.inSlotFor(bad) }
			if tc.resume {
				g.Eventually(rolled, 30*time.Second, 100*time.Millisecond).ShouldNot(BeEmpty(), "with the halt taken from live records, deleting the failed node lifts it")
				return
			}
			g.Consistently(rolled, 4*time.Second, 100*time.Millisecond).Should(BeEmpty(), "no node gets a slot or a boot order for the halted image")
			g.Expect(k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &pool)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(pool.Status.Conditions, v1alpha1.ConditionHalted)).To(BeTrue())
			g.Expect(pool.Status.Halt).NotTo(BeNil())
			g.Expect(pool.Status.Halt.Failures[0].Node).To(Equal(failed), "the failure outlives its node")

			// A new image lifts the halt and keeps it for debugging.
			h.setPoolImage(p.Name, good)
			g.Eventually(h.allOn(good), 60*time.Second, 200*time.Millisecond).Should(Succeed())
			g.Eventually(func() *v1alpha1.HaltRecord {
				_ = k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &pool)
				return pool.Status.Halt
			}, 10*time.Second, 100*time.Millisecond).Should(BeNil())
			g.Expect(pool.Status.LastHalt).NotTo(BeNil())
			g.Expect(pool.Status.LastHalt.Image).To(Equal(bad))
			g.Expect(pool.Status.LastHalt.Failures[0].Node).To(Equal(failed))
			g.Expect(pool.Status.Failures).To(BeEmpty())
			for name, bn := range h.bootcNodes() {
				g.Expect(orderStands(bn)).To(BeFalse(), "node %s finished but keeps a boot order it did not carry out", name)
			}
		})
	}
}

// TestRevertDuringRebootIsProtected: an operator sets the pool image back
// while a node reboots into the new one. The node finishes its reboot and
// verification, and boots the reverted image only with a fresh cordon,
// drain and slot; every reboot starts while the node is cordoned by
// bootroll, and a finished node keeps no boot order. The planted
// KeepBootOrder shows the check can fail.
func TestRevertDuringRebootIsProtected(t *testing.T) {
	for _, tc := range []struct {
		name        string
		to          rollout.TestOnly
		unprotected bool
	}{
		{name: "honest"},
		{name: "planted-keep-boot-order", to: rollout.TestOnly{KeepBootOrder: true}, unprotected: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			prefix := "rev" + fmt.Sprint(len(tc.name))
			h := newHarnessWith(t, prefix, 1, func(h *harness) { h.rebootTicks = 30 })
			h.withTestOnly(tc.to)
			node := prefix + "-0"
			h.pods(node, 1, "web")
			v1, v2 := digestRef("v1"), digestRef("v2")
			p := h.pool(prefix, v2, intstr.FromInt32(1))
			h.mu.Lock()
			host := h.hosts[node]
			h.mu.Unlock()
			g.Eventually(host.isRebooting, 30*time.Second, 10*time.Millisecond).Should(BeTrue())
			// Revert while the node reboots into v2.
			h.setPoolImage(p.Name, v1)
			if tc.unprotected {
				// The kept boot order sends the node back to v1 with no
				// fresh slot: the reboot starts unprotected, or the daemon,
				// which reboots only a Node cordoned with bootroll's slot
				// marker, refuses it and says so.
				g.Eventually(func() string {
					h.mu.Lock()
					unprotected := append([]string(nil), h.unprotected...)
					h.mu.Unlock()
					if len(unprotected) > 0 {
						return "unprotected reboot of " + unprotected[0]
					}
					var bn v1alpha1.BootcNode
					if err := k8s.Get(h.ctx, client.ObjectKey{Name: node}, &bn); err != nil {
						return ""
					}
					if strings.Contains(bn.Status.Daemon.LastError, "waiting to reboot") {
						return "daemon refused: " + bn.Status.Daemon.LastError
					}
					return ""
				}, 60*time.Second, 100*time.Millisecond).ShouldNot(BeEmpty())
				return
			}
			g.Eventually(h.allOn(v1), 60*time.Second, 200*time.Millisecond).Should(Succeed())
			h.mu.Lock()
			g.Expect(h.unprotected).To(BeEmpty(), "reboots that started without bootroll's cordon and slot")
			g.Expect(h.reboots[node]).To(Equal(2), "one reboot into v2, finished and verified, then one into v1")
			h.mu.Unlock()
			bn := h.bootcNodes()[node]
			g.Expect(orderStands(bn)).To(BeFalse(), "the node finished with a boot order it did not carry out")
			g.Eventually(func() []string { return h.events.of(node) }, 10*time.Second, 50*time.Millisecond).Should(ContainElements("Updated", "SlotGranted"))
			// The slot ends on the record first; the Node follows.
			g.Eventually(func() bool { return h.node(node).Spec.Unschedulable }, 10*time.Second, 20*time.Millisecond).Should(BeFalse())
		})
	}
}

// TestRollbackHaltsAtOnce: with failurePolicy Rollback, a node that boots
// the new image but never gets Ready is rolled back; its failure is on the
// pool (and halts it) from the moment the rollback starts, so no other node
// gets a slot for the image while it rolls back, and the record keeps the
// failed image after the rollback. Each finished node keeps no boot order.
func TestRollbackHaltsAtOnce(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "rb", 3, nil)
	sick := digestRef("sick")
	h.mu.Lock()
	h.sick[imageref.Digest(sick)] = true
	h.mu.Unlock()
	p := h.pool("rb", sick, intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.FailurePolicy.Action = v1alpha1.FailureRollback
		p.Spec.HealthTimeout = &metav1.Duration{Duration: 3 * time.Second}
	})
	var pool v1alpha1.BootcNodePool
	rolling, others := "", map[string]bool{}
	g.Eventually(func() v1alpha1.NodePhase {
		for name, bn := range h.bootcNodes() {
			if bn.Spec.RollingBack() {
				rolling = name
			}
			if name != rolling && bn.Spec.DesiredImage == sick && (bn.Spec.Order() != nil || bn.Status.Phase == v1alpha1.PhaseDraining) {
				others[name] = true
			}
		}
		if rolling == "" {
			return ""
		}
		return h.bootcNodes()[rolling].Status.Phase
	}, 60*time.Second, 20*time.Millisecond).Should(Equal(v1alpha1.PhaseRolledBack))
	delete(others, rolling)
	g.Expect(others).To(BeEmpty(), "nodes given a slot for the failing image while one rolled back")
	g.Expect(k8s.Get(h.ctx, client.ObjectKeyFromObject(p), &pool)).To(Succeed())
	g.Expect(pool.Status.Halt).NotTo(BeNil())
	g.Expect(pool.Status.Halt.Image).To(Equal(sick))
	g.Expect(pool.Status.Halt.Failures[0].Node).To(Equal(rolling))
	g.Expect(pool.Status.Halt.Failures[0].Reason).To(Equal("HealthTimeout"))
	bn := h.bootcNodes()[rolling]
	g.Expect(bn.Status.Rollout.FailedImage).To(Equal(sick))
	g.Expect(orderStands(bn)).To(BeFalse(), "the rollback's boot order is carried out once it booted")
	g.Expect(bn.Status.Booted.Digest).To(Equal(imageref.Digest(digestRef("v1"))))
	g.Consistently(func() []string { return h.inSlotFor(sick) }, 2*time.Second, 100*time.Millisecond).Should(BeEmpty())
	g.Expect(h.node(rolling).Spec.Unschedulable).To(BeFalse())
}

// orderStands reports whether bn carries a boot order that stands and that
// the node does not run yet: one that could still reboot it. An order
// carried out (the node runs its image, or left it for a rollback order)
// is spent.
func orderStands(bn v1alpha1.BootcNode) bool {
	o := bn.Spec.Order()
	if o == nil {
		return false
	}
	on := bn.Status.Booted != nil && bn.Status.Booted.Digest == imageref.Digest(o.Image)
	if o.Rollback {
		return on // a rollback order names the image it leaves
	}
	return !on
}
