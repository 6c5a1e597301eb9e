package controller_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// slotNodes returns the node names in a pool's slot table.
func slotNodes(p v1alpha1.BootcNodePool) []string {
	var out []string
	for _, s := range p.Status.Slots {
		out = append(out, s.Node)
	}
	return out
}

// TestDeletedNodeInSlotReleasesSlot deletes a Node while it holds the only
// reboot slot, cordoned and stuck in a drain that a PDB blocks. The node
// reconciler must record that the node left its slot (NodeGone, not
// cordoned), the pool must drop the slot entry and delete the record, and
// the other node must then get the slot and finish the rollout.
func TestDeletedNodeInSlotReleasesSlot(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "gone", 2, clock.RealClock{})
	// A PDB-protected pod on each node: whichever node gets the slot
	// cannot be drained. The other node's pod is removed once the slot
	// holder is known, so that node can drain when its turn comes.
	h.pods("gone-0", 1, "db")
	h.pods("gone-1", 1, "db")
	h.blockingPDB("db", 2)

	h.pool("gone", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.DrainTimeout = &metav1.Duration{Duration: 10 * time.Minute} // never times out here
	})

	// 1. One node holds the slot: Draining, cordoned, named in the slot table.
	var gone, other string
	g.Eventually(func() error {
		for name, bn := range h.bootcNodes() {
			if bn.Status.Phase == v1alpha1.PhaseDraining && bn.Status.Rollout.Cordoned {
				if slots := slotNodes(h.getPool("gone")); len(slots) != 1 || slots[0] != name {
					return fmt.Errorf("%s is draining but the pool's slots are %v", name, slots)
				}
				gone = name
				return nil
			}
		}
		return fmt.Errorf("no node draining and cordoned yet")
	}, 20*time.Second, 50*time.Millisecond).Should(Succeed())
	other = "gone-0"
	if gone == "gone-0" {
		other = "gone-1"
	}
	// The record says cordoned before the Node is (the state to give back
	// is recorded first, then the cordon written): the Node follows.
	g.Eventually(func() bool { return h.node(gone).Spec.Unschedulable }, 10*time.Second, 50*time.Millisecond).Should(BeTrue())
	// Unblock the other node's future drain.
	g.Expect(k8s.Delete(h.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: other + "-db-0"}}, client.GracePeriodSeconds(0))).To(Succeed())
	// The drain stays blocked and the other node waits for the slot.
	g.Consistently(func() v1alpha1.NodePhase { return h.bootcNodes()[gone].Status.Phase }, time.Second, 100*time.Millisecond).Should(Equal(v1alpha1.PhaseDraining))
	g.Expect(slotNodes(h.getPool("gone"))).To(Equal([]string{gone}))
	h.mu.Lock()
	g.Expect(h.reboots[other]).To(Equal(0))
	h.mu.Unlock()
	g.Expect(h.bootcNodes()[other].Status.Phase).NotTo(Or(Equal(v1alpha1.PhaseDraining), Equal(v1alpha1.PhaseRebooting), Equal(v1alpha1.PhaseUpdated)))

	// 2. The Node is deleted. Its host and daemon go with it (the fake
	// kubelet never recreates Nodes; the harness just stops driving it).
	h.mu.Lock()
	delete(h.hosts, gone)
	delete(h.daemons, gone)
	h.mu.Unlock()
	g.Expect(k8s.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: gone}})).To(Succeed())

	// 3. The record leaves its slot (NodeGone, uncordoned) and the pool
	// deletes it. Either state may be seen first; a cordoned or
	// slot-holding record that stays forever fails.
	sawNodeGone := false
	g.Eventually(func() error {
		var bn v1alpha1.BootcNode
		err := k8s.Get(h.ctx, client.ObjectKey{Name: gone}, &bn)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		ro := bn.Status.Rollout
		if ro.Reason == "NodeGone" {
			if ro.Cordoned || bn.Status.Phase != v1alpha1.PhasePending {
				return StopTrying(fmt.Sprintf("BootcNode %s records NodeGone but phase=%s cordoned=%v", gone, bn.Status.Phase, ro.Cordoned))
			}
			sawNodeGone = true
		}
		return fmt.Errorf("BootcNode %s still exists: phase=%s reason=%q cordoned=%v", gone, bn.Status.Phase, ro.Reason, ro.Cordoned)
	}, 15*time.Second, 20*time.Millisecond).Should(Succeed())
	t.Logf("deleted node %s: NodeGone record observed before deletion: %v", gone, sawNodeGone)

	g.Eventually(func() []string { return slotNodes(h.getPool("gone")) }, 10*time.Second, 50*time.Millisecond).ShouldNot(ContainElement(gone))

	// 4. The other node gets the slot and completes its update.
	g.Eventually(h.allOn(digestRef("v2")), 20*time.Second, 100*time.Millisecond).Should(Succeed())
	// The host boots v2 before the record says Updated: its event follows
	// (the full suite on a loaded host saw Uncordoned without it yet).
	g.Eventually(func() []string { return h.events.of(other) }, 10*time.Second, 50*time.Millisecond).Should(ContainElements("SlotGranted", "Drained", "Updated", "Uncordoned"))
	g.Eventually(func() string { return h.getPool("gone").Status.Summary }, 10*time.Second, 100*time.Millisecond).Should(Equal("1/1 updated"))
	p := h.getPool("gone")
	g.Expect(p.Status.Slots).To(BeEmpty())
	g.Expect(p.Status.Nodes).To(Equal(int32(1)))
	g.Expect(h.node(other).Spec.Unschedulable).To(BeFalse())
	h.mu.Lock()
	g.Expect(h.reboots[other]).To(Equal(1))
	g.Expect(h.reboots[gone]).To(Equal(0))
	h.mu.Unlock()
}
