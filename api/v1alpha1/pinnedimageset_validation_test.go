package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// pinnedRef is a digest reference; i makes distinct ones.
func pinnedRef(i int) string {
	return fmt.Sprintf("registry.example.com:5000/apps/app-%d@%s", i, digest)
}

func pinnedImages(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = pinnedRef(i)
	}
	return out
}

func basePinned() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "PinnedImageSet",
		"metadata":   map[string]any{"generateName": "pinned-"},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"node-role.kubernetes.io/worker": ""},
			"images":       pinnedImages(3),
		},
	}}
}

func TestPinnedImageSetValid(t *testing.T) {
	runValid(t, basePinned, func() client.Object { return &v1alpha1.PinnedImageSet{} }, []validationCase{
		{name: "node selector"},
		{name: "pool", set: fields{"spec.nodeSelector": remove, "spec.pool": "workers"}},
		{name: "500 images", set: fields{"spec.images": pinnedImages(500)}},
		{name: "docker hub style digest reference", set: fields{"spec.images": []any{"library/busybox@" + digest}}},
		{name: "tag and digest reference", set: fields{"spec.images": []any{"registry.example.com:5000/apps/app:v1@" + digest}}},
		{name: "set name of 63 characters", set: fields{"metadata.generateName": remove, "metadata.name": strings.Repeat("s", 63)}},
		{name: "pool name of 63 characters", set: fields{"spec.nodeSelector": remove, "spec.pool": strings.Repeat("p", 63)}},
		{name: "knobs", set: fields{"spec.concurrency": int64(16), "spec.throttle": "1m30s", "spec.minFreeAfterPull": "5Gi"}},
		{name: "minFreeAfterPull decimal quantity", set: fields{"spec.minFreeAfterPull": "1.5G"}},
		{name: "minFreeAfterPull 0%", set: fields{"spec.minFreeAfterPull": "0%"}},
		{name: "minFreeAfterPull 99%", set: fields{"spec.minFreeAfterPull": "99%"}},
		{name: "throttle 0s", set: fields{"spec.throttle": "0s"}},
		{name: "pull secret", set: fields{"spec.pullSecret": map[string]any{"namespace": "apps", "name": "registry-creds"}}},
	})
}

func TestPinnedImageSetRejected(t *testing.T) {
	const (
		minFree    = "spec.minFreeAfterPull"
		minFreeMsg = "quantity with a unit"
		oneOfMsg   = "exactly one of nodeSelector and pool must be set"
	)
	tagged := pinnedImages(4)
	tagged[2] = "registry.example.com:5000/apps/app-2:v1"
	lastTagged := pinnedImages(3)
	lastTagged[2] = "quay.io/fedora/fedora:latest"
	runRejected(t, basePinned, []validationCase{
		{name: "tag names the entry", set: fields{"spec.images": tagged}, wantField: "spec.images[2]", wantMsg: "pinned by digest"},
		{name: "latest tag names the entry", set: fields{"spec.images": lastTagged}, wantField: "spec.images[2]", wantMsg: "pinned by digest"},
		{name: "repository without tag or digest", set: fields{"spec.images": []any{"quay.io/fedora/fedora"}}, wantField: "spec.images[0]", wantMsg: "pinned by digest"},
		{name: "short digest", set: fields{"spec.images": []any{"quay.io/fedora/fedora@sha256:abc"}}, wantField: "spec.images[0]", wantMsg: "pinned by digest"},
		{name: "501 images", set: fields{"spec.images": pinnedImages(501)}, wantField: "spec.images", wantMsg: "must have at most 500 items"},
		{name: "no images", set: fields{"spec.images": []any{}}, wantField: "spec.images", wantMsg: "should have at least 1 items"},
		{name: "images missing", set: fields{"spec.images": remove}, wantField: "spec.images", wantMsg: "Required value"},
		{name: "duplicate image", set: fields{"spec.images": []any{pinnedRef(1), pinnedRef(1)}}, wantField: "spec.images[1]", wantMsg: "Duplicate value"},

		{name: "selector and pool", set: fields{"spec.pool": "workers"}, wantField: "spec", wantMsg: oneOfMsg},
		{name: "neither selector nor pool", set: fields{"spec.nodeSelector": remove}, wantField: "spec", wantMsg: oneOfMsg},
		{name: "empty selector", set: fields{"spec.nodeSelector": map[string]any{}}, wantField: "spec.nodeSelector", wantMsg: "must name at least one label; to select every node, use a label all nodes carry"},
		{name: "selector key invalid", set: fields{"spec.nodeSelector": map[string]any{"bad key!": "x"}}, wantField: "spec.nodeSelector", wantMsg: "every key must be a valid label key"},
		{name: "selector value too long", set: fields{"spec.nodeSelector": map[string]any{"k": strings.Repeat("v", 64)}}, wantField: "spec.nodeSelector", wantMsg: "at most 63 characters"},
		{name: "pool name too long", set: fields{"spec.nodeSelector": remove, "spec.pool": strings.Repeat("p", 64)}, wantField: "spec.pool", wantMsg: "at most 63 characters"},
		{name: "set name of 64 characters", set: fields{"metadata.generateName": remove, "metadata.name": strings.Repeat("s", 64)}, wantField: "metadata", wantMsg: "must be at most 63 characters: the set's name is the value of the bootroll.dev/pinned-image-set label"},
		{name: "tag and short digest", set: fields{"spec.images": []any{"quay.io/fedora/fedora:42@sha256:abc"}}, wantField: "spec.images[0]", wantMsg: "pinned by digest"},
		{name: "throttle overflowing", set: fields{"spec.throttle": "9999999999999999h"}, wantField: "spec.throttle", wantMsg: "one to three numbers"},
		{name: "images not a list", set: fields{"spec.images": pinnedRef(0)}, wantField: "spec.images", wantMsg: "must be of type array"},
		{name: "concurrency string", set: fields{"spec.concurrency": "2"}, wantField: "spec.concurrency", wantMsg: "must be of type integer"},
		{name: "empty pool", set: fields{"spec.nodeSelector": remove, "spec.pool": ""}, wantField: "spec.pool", wantMsg: "at least 1 chars long"},
		{name: "pool not a name", set: fields{"spec.nodeSelector": remove, "spec.pool": "Workers"}, wantField: "spec.pool", wantMsg: "name of a BootcNodePool"},

		{name: "minFreeAfterPull without unit", set: fields{minFree: "10"}, wantField: minFree, wantMsg: minFreeMsg},
		{name: "minFreeAfterPull abc", set: fields{minFree: "abc"}, wantField: minFree, wantMsg: minFreeMsg},
		{name: "minFreeAfterPull 150%", set: fields{minFree: "150%"}, wantField: minFree, wantMsg: minFreeMsg},
		{name: "minFreeAfterPull 100%", set: fields{minFree: "100%"}, wantField: minFree, wantMsg: minFreeMsg},
		{name: "minFreeAfterPull integer", set: fields{minFree: int64(10)}, wantField: minFree, wantMsg: minFreeMsg},
		{name: "minFreeAfterPull negative", set: fields{minFree: "-5Gi"}, wantField: minFree, wantMsg: minFreeMsg},
		{name: "minFreeAfterPull lower-case unit", set: fields{minFree: "5gi"}, wantField: minFree, wantMsg: minFreeMsg},

		{name: "concurrency 0", set: fields{"spec.concurrency": int64(0)}, wantField: "spec.concurrency", wantMsg: "greater than or equal to 1"},
		{name: "concurrency 17", set: fields{"spec.concurrency": int64(17)}, wantField: "spec.concurrency", wantMsg: "less than or equal to 16"},
		{name: "throttle negative", set: fields{"spec.throttle": "-1s"}, wantField: "spec.throttle", wantMsg: "duration of 0s or more"},
		{name: "throttle without unit", set: fields{"spec.throttle": "10"}, wantField: "spec.throttle", wantMsg: "duration"},
		{name: "pull secret without namespace", set: fields{"spec.pullSecret": map[string]any{"name": "creds"}}, wantField: "spec.pullSecret.namespace", wantMsg: "Required value"},
		{name: "pull secret bad name", set: fields{"spec.pullSecret": map[string]any{"namespace": "apps", "name": "Creds"}}, wantField: "spec.pullSecret.name", wantMsg: "should match"},
	})
}

// TestPinnedImageSetDefaults: the API server fills in the documented
// defaults, and a typed object round-trips with its status subresource.
func TestPinnedImageSetDefaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set := &v1alpha1.PinnedImageSet{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "defaults-"},
		Spec: v1alpha1.PinnedImageSetSpec{
			Pool:   "workers",
			Images: []v1alpha1.DigestReference{v1alpha1.DigestReference(pinnedRef(0))},
		},
	}
	if err := k8sClient.Create(ctx, set); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), set) })

	if got, want := ptr.Deref(set.Spec.Concurrency, 0), int32(v1alpha1.DefaultPinConcurrency); got != want {
		t.Errorf("concurrency = %d, want %d", got, want)
	}
	if set.Spec.Throttle == nil || set.Spec.Throttle.Duration != 0 {
		t.Errorf("throttle = %v, want 0s", set.Spec.Throttle)
	}
	if got, want := set.Spec.MinFreeAfterPull, intstr.FromString(v1alpha1.DefaultMinFreeAfterPull); got == nil || *got != want {
		t.Errorf("minFreeAfterPull = %v, want %v", got, want)
	}

	set.Status = v1alpha1.PinnedImageSetStatus{
		ObservedGeneration: set.Generation, Nodes: 3, Done: 1, Pulling: 1, Failed: 1,
		Failures: []v1alpha1.PinnedImageFailure{{Node: "n1", Image: pinnedRef(0), Reason: v1alpha1.PinnedReasonOutOfSpace, Message: "no space left on device"}},
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.PinnedReasonOutOfSpace,
			Message: "1 of 3 nodes failed", LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0)),
		}},
	}
	if err := k8sClient.Status().Update(ctx, set); err != nil {
		t.Fatalf("status update: %v", err)
	}
	var got v1alpha1.PinnedImageSet
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(set), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Failed != 1 || len(got.Status.Failures) != 1 || got.Status.Failures[0].Reason != v1alpha1.PinnedReasonOutOfSpace {
		t.Errorf("status did not round-trip: %+v", got.Status)
	}
}

// TestPinnedImageSetFailuresBounded: status.failures holds at most
// MaxPinnedFailures entries.
func TestPinnedImageSetFailuresBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set := &v1alpha1.PinnedImageSet{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bounded-"},
		Spec: v1alpha1.PinnedImageSetSpec{
			NodeSelector: map[string]string{"a": "b"},
			Images:       []v1alpha1.DigestReference{v1alpha1.DigestReference(pinnedRef(0))},
		},
	}
	if err := k8sClient.Create(ctx, set); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), set) })
	for i := 0; i <= v1alpha1.MaxPinnedFailures; i++ {
		set.Status.Failures = append(set.Status.Failures, v1alpha1.PinnedImageFailure{Node: fmt.Sprintf("n%03d", i), Image: pinnedRef(0), Reason: "NotFound"})
	}
	err := k8sClient.Status().Update(ctx, set)
	if err == nil || !strings.Contains(err.Error(), "must have at most 50 items") {
		t.Fatalf("want status.failures bounded at 50, got %v", err)
	}
}
