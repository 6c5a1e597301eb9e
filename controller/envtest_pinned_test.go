package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
	"github.com/bootroll/bootroll/controller/pinned"
	"github.com/bootroll/bootroll/internal/imageref"
	"github.com/bootroll/bootroll/nodedaemon/prefetch"
)

// fakePrefetch plays the daemon's prefetch manager: every image is pulled
// at once, except those marked as too big, which fail with OutOfSpace.
type fakePrefetch struct{ h *harness }

func (f *fakePrefetch) Sync(_ context.Context, _ time.Time, sets []v1alpha1.NodePinnedImageSet, _ []v1alpha1.PinnedSetProgress, _ prefetch.Env) ([]v1alpha1.PinnedSetProgress, time.Duration, error) {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	var out []v1alpha1.PinnedSetProgress
	for _, s := range sets {
		p := v1alpha1.PinnedSetProgress{Name: s.Name, Generation: s.Generation}
		for _, img := range s.Images {
			if f.h.noSpace[img] {
				p.Failed++
				p.Images = append(p.Images, v1alpha1.PinnedImageProgress{Image: img, State: v1alpha1.PinnedFailed, Reason: v1alpha1.PinnedReasonOutOfSpace, Message: "no space left on device"})
				continue
			}
			p.Present++
			p.Images = append(p.Images, v1alpha1.PinnedImageProgress{Image: img, State: v1alpha1.PinnedPresent})
		}
		out = append(out, p)
	}
	return out, 0, nil
}

func appRef(name string) v1alpha1.DigestReference {
	return v1alpha1.DigestReference(fmt.Sprintf("registry.example/apps/%s@%s", name, imageref.Digest(digestRef(name))))
}

func (h *harness) getSet(name string) v1alpha1.PinnedImageSet {
	var s v1alpha1.PinnedImageSet
	if err := k8s.Get(h.ctx, client.ObjectKey{Name: name}, &s); err != nil {
		h.t.Fatalf("get PinnedImageSet %s: %v", name, err)
	}
	return s
}

func TestPinnedImageSetDistributedAndAggregated(t *testing.T) {
	g := NewWithT(t)
	h := newHarness(t, "pin", 3, clock.RealClock{})
	h.pool("pin", digestRef("v1"), intstr.FromInt32(1))
	// The pull secret lives in the controller's namespace; the controller
	// mirrors it where the daemons may read it.
	_ = k8s.Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: pinned.PinnedSecretNamespace}})
	g.Expect(k8s.Create(h.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pin-creds"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"dTpw"}}}`)}})).To(Succeed())

	set := &v1alpha1.PinnedImageSet{ObjectMeta: metav1.ObjectMeta{Name: "pin-apps"}, Spec: v1alpha1.PinnedImageSetSpec{
		Pool: "pin", Images: []v1alpha1.DigestReference{appRef("a"), appRef("b"), appRef("c")},
		PullSecret: &v1alpha1.SecretReference{Namespace: "default", Name: "pin-creds"},
	}}
	g.Expect(k8s.Create(h.ctx, set)).To(Succeed())
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), set) })

	// Every node of the pool gets the set in its spec, secret mirrored.
	g.Eventually(func() error {
		bns := h.bootcNodes()
		if len(bns) != 3 {
			return fmt.Errorf("%d BootcNodes, want 3", len(bns))
		}
		for name, bn := range bns {
			if len(bn.Spec.PinnedImageSets) != 1 || len(bn.Spec.PinnedImageSets[0].Images) != 3 {
				return fmt.Errorf("%s: %+v", name, bn.Spec.PinnedImageSets)
			}
			if ps := bn.Spec.PinnedImageSets[0].PullSecret; ps == nil || ps.Namespace != pinned.PinnedSecretNamespace {
				return fmt.Errorf("%s: pull secret %+v", name, ps)
			}
		}
		return nil
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	var mirror corev1.Secret
	g.Expect(k8s.Get(h.ctx, client.ObjectKey{Namespace: pinned.PinnedSecretNamespace, Name: "pinned-pin-apps"}, &mirror)).To(Succeed())
	g.Expect(string(mirror.Data[corev1.DockerConfigJsonKey])).To(ContainSubstring("registry.example"))

	// Complete once every node reports every image.
	g.Eventually(func() bool {
		return meta.IsStatusConditionTrue(h.getSet("pin-apps").Status.Conditions, v1alpha1.ConditionComplete)
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
	st := h.getSet("pin-apps").Status
	g.Expect([]int32{st.Nodes, st.Done, st.Pulling, st.Failed}).To(Equal([]int32{3, 3, 0, 0}))
	g.Expect(meta.IsStatusConditionFalse(st.Conditions, v1alpha1.ConditionDegraded)).To(BeTrue())

	// A big image that fits nowhere: Degraded, with the node and reason.
	h.mu.Lock()
	h.noSpace[string(appRef("huge"))] = true
	h.mu.Unlock()
	g.Eventually(func() error {
		s := h.getSet("pin-apps")
		s.Spec.Images = append(s.Spec.Images, appRef("huge"))
		return k8s.Update(h.ctx, &s)
	}, 10*time.Second).Should(Succeed())
	g.Eventually(func() string {
		c := meta.FindStatusCondition(h.getSet("pin-apps").Status.Conditions, v1alpha1.ConditionDegraded)
		if c == nil || c.Status != metav1.ConditionTrue {
			return ""
		}
		return c.Reason + ": " + c.Message
	}, 30*time.Second, 100*time.Millisecond).Should(And(HavePrefix(v1alpha1.PinnedReasonOutOfSpace), ContainSubstring("3 node(s) failed")))
	st = h.getSet("pin-apps").Status
	g.Expect(st.Failed).To(Equal(int32(3)))
	g.Expect(st.Failures).To(HaveLen(3))
	g.Expect(st.Failures[0].Image).To(Equal(string(appRef("huge"))))
	g.Expect(meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionComplete)).To(BeFalse())

	// Deleting the set takes it off every node.
	g.Expect(k8s.Delete(h.ctx, set)).To(Succeed())
	g.Eventually(func() int {
		n := 0
		for _, bn := range h.bootcNodes() {
			n += len(bn.Spec.PinnedImageSets)
		}
		return n
	}, 30*time.Second, 100*time.Millisecond).Should(Equal(0))
}
