package controller_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/rollout"
)

func (h *harness) getPool(name string) v1alpha1.BootcNodePool {
	var p v1alpha1.BootcNodePool
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, &p); err != nil {
		h.t.Fatalf("get pool %s: %v", name, err)
	}
	return p
}

func (h *harness) setPoolImage(name, image string) {
	h.t.Helper()
	NewWithT(h.t).Eventually(func() error {
		p := h.getPool(name)
		p.Spec.Image = v1alpha1.ImageReference(image)
		return k8s.Update(h.ctx, &p)
	}, 10*time.Second).Should(Succeed())
}

// pushImage pushes a random image to the in-process registry and returns
// its digest reference.
func pushImage(t *testing.T, host, repoTag string, seed int64) string {
	t.Helper()
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(host + "/" + repoTag)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	d, _ := img.Digest()
	return ref.Context().String() + "@" + d.String()
}

func TestTagResolvedToDigestAndBadTagChangesNothing(t *testing.T) {
	g := NewWithT(t)
	reg := httptest.NewServer(registry.New())
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://")
	want := pushImage(t, host, "os:v2", 1)

	h := newHarness(t, "tag", 2, clock.RealClock{})
	h.pool("tag", host+"/os:v2", intstr.FromInt32(1))
	g.Eventually(func() string { return h.getPool("tag").Status.TargetImage }, 20*time.Second, 100*time.Millisecond).Should(Equal(want))
	g.Eventually(h.allOn(want), 60*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, bn := range h.bootcNodes() {
		g.Expect(bn.Spec.DesiredImage).To(Equal(want), "the rollout targets the digest, never the tag")
	}

	// An unknown tag: a condition, and nothing else changes.
	h.setPoolImage("tag", host+"/os:does-not-exist")
	g.Eventually(func() string {
		c := meta.FindStatusCondition(h.getPool("tag").Status.Conditions, v1alpha1.ConditionDegraded)
		if c == nil {
			return ""
		}
		return c.Reason + " " + c.Message
	}, 20*time.Second, 100*time.Millisecond).Should(And(ContainSubstring(v1alpha1.ReasonResolveFailed), ContainSubstring("NotFound")))
	g.Expect(h.getPool("tag").Status.TargetImage).To(Equal(want))
	g.Consistently(func() []string {
		var out []string
		for _, bn := range h.bootcNodes() {
			out = append(out, bn.Spec.DesiredImage)
		}
		return out
	}, 2*time.Second, 200*time.Millisecond).Should(HaveEach(want))

	// An unreachable registry: the same.
	reg.Close()
	h.setPoolImage("tag", host+"/os:v3")
	g.Eventually(func() string {
		c := meta.FindStatusCondition(h.getPool("tag").Status.Conditions, v1alpha1.ConditionDegraded)
		if c == nil {
			return ""
		}
		return c.Message
	}, 20*time.Second, 100*time.Millisecond).Should(ContainSubstring("RegistryUnreachable"))
	g.Expect(h.getPool("tag").Status.TargetImage).To(Equal(want))
	for _, bn := range h.bootcNodes() {
		g.Expect(bn.Spec.DesiredImage).To(Equal(want))
		g.Expect(bn.Status.Phase).To(Equal(v1alpha1.PhaseUpdated))
	}
}

func TestNodeConflictLeavesNodeAlone(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "conf", 2, clock.RealClock{})
	// A second pool that also selects conf-1.
	var n corev1.Node
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Name: "conf-1"}, &n)).To(Succeed())
	n.Labels = mergeLabels(n.Labels, map[string]string{"extra": "conf"})
	g.Expect(k8s.Update(h.ctx, &n)).To(Succeed())
	h.pool("conf", digestRef("v2"), intstr.FromInt32(1))
	h.pool("conf-other", digestRef("v2"), intstr.FromInt32(1), func(p *v1alpha1.BootcNodePool) {
		p.Spec.NodeSelector = map[string]string{"extra": "conf"}
	})
	for _, pool := range []string{"conf", "conf-other"} {
		g.Eventually(func() string {
			c := meta.FindStatusCondition(h.getPool(pool).Status.Conditions, v1alpha1.ConditionDegraded)
			if c == nil || c.Status != metav1.ConditionTrue {
				return ""
			}
			return c.Reason + ": " + c.Message
		}, 20*time.Second, 100*time.Millisecond).Should(And(HavePrefix(v1alpha1.ReasonNodeConflict), ContainSubstring("conf-1")), "pool %s", pool)
	}
	// conf-0 is updated; conf-1 is left alone (no BootcNode, never cordoned).
	g.Eventually(func() v1alpha1.NodePhase { return h.bootcNodes()["conf-0"].Status.Phase }, 60*time.Second, 200*time.Millisecond).Should(Equal(v1alpha1.PhaseUpdated))
	g.Expect(h.bootcNodes()).NotTo(HaveKey("conf-1"))
	h.mu.Lock()
	g.Expect(h.reboots["conf-1"]).To(Equal(0))
	h.mu.Unlock()
}

func TestNodeDeletionAndLabelChange(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "mem", 3, clock.RealClock{})
	h.pool("mem", digestRef("v2"), intstr.FromInt32(1))
	g.Eventually(h.allOn(digestRef("v2")), 60*time.Second, 200*time.Millisecond).Should(Succeed())

	// A label change takes the node out of the pool: its BootcNode goes.
	var n corev1.Node
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Name: "mem-2"}, &n)).To(Succeed())
	delete(n.Labels, "bootroll-test")
	g.Expect(k8s.Update(h.ctx, &n)).To(Succeed())
	g.Eventually(func() error {
		var bn v1alpha1.BootcNode
		return k8s.Get(h.ctx, client.ObjectKey{Name: "mem-2"}, &bn)
	}, 20*time.Second, 100*time.Millisecond).Should(Satisfy(apierrors.IsNotFound))

	// A deleted Node loses its BootcNode too, and the pool counts follow.
	g.Expect(k8s.Delete(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mem-1"}})).To(Succeed())
	g.Eventually(func() error {
		var bn v1alpha1.BootcNode
		return k8s.Get(h.ctx, client.ObjectKey{Name: "mem-1"}, &bn)
	}, 20*time.Second, 100*time.Millisecond).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func() string { return h.getPool("mem").Status.Summary }, 20*time.Second, 100*time.Millisecond).Should(Equal("1/1 updated"))
	_ = k8s.Delete(context.Background(), &n)
}

func TestMaintenanceWindowWithInjectedClock(t *testing.T) {
	g := NewWithT(t)
	// Monday 12:00 UTC; the window opens at 02:00 for one hour.
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, "win", 2, clk)
	h.pool("win", digestRef("v2"), intstr.FromInt32(2), func(p *v1alpha1.BootcNodePool) {
		p.Spec.Windows = []v1alpha1.MaintenanceWindow{{Start: "02:00", Duration: metav1.Duration{Duration: time.Hour}}}
	})
	// Staging happens at any time; slots wait for the window. The pool
	// makes at most one full pass per passInterval of its clock, so the
	// test steps the fake clock while it waits (a frozen clock would allow
	// one pass per generation and the test would depend on which events
	// that pass happened to see).
	g.Eventually(func() int {
		clk.Step(time.Second)
		n := 0
		for _, bn := range h.bootcNodes() {
			if rollout.ObservedPhase(&bn) == v1alpha1.PhaseStaged {
				n++
			}
		}
		return n
	}, 20*time.Second, 100*time.Millisecond).Should(Equal(2))
	g.Consistently(func() int {
		clk.Step(time.Second)
		return len(h.getPool("win").Status.Slots)
	}, 3*time.Second, 100*time.Millisecond).Should(Equal(0))
	c := meta.FindStatusCondition(h.getPool("win").Status.Conditions, v1alpha1.ConditionUpToDate)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(v1alpha1.ReasonOutsideWindow))

	// Tuesday 02:30: inside the window. Nudge the pool with a node label.
	clk.SetTime(time.Date(2026, 1, 6, 2, 30, 0, 0, time.UTC))
	var n corev1.Node
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Name: "win-0"}, &n)).To(Succeed())
	n.Labels = mergeLabels(n.Labels, map[string]string{"nudge": fmt.Sprint(time.Now().UnixNano())})
	g.Expect(k8s.Update(h.ctx, &n)).To(Succeed())
	allOn := h.allOn(digestRef("v2"))
	g.Eventually(func() error {
		clk.Step(time.Second) // 5 minutes at most: the window stays open
		return allOn()
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
}
