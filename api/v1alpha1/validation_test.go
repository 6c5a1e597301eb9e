package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// remove, as a field value in a case, deletes the field from the base object.
type removeField struct{}

var remove = removeField{}

// fields maps a dotted path below the object root to the value to set there
// (remove to delete it). Values must be JSON values: string, int64, float64,
// bool, []any, map[string]any.
type fields map[string]any

type validationCase struct {
	name string
	set  fields
	// For rejected cases: the field path the error must name, and a part of
	// the message that tells the user what is allowed.
	wantField string
	wantMsg   string
}

func basePool() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "BootcNodePool",
		"metadata":   map[string]any{"generateName": "pool-"},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"node-role.kubernetes.io/worker": ""},
			"image":        "quay.io/fedora/fedora-bootc:42",
		},
	}}
}

func baseNode() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.GroupVersion.String(),
		"kind":       "BootcNode",
		"metadata":   map[string]any{"generateName": "node-"},
		"spec": map[string]any{
			"pool":         "workers",
			"desiredImage": "quay.io/fedora/fedora-bootc@" + digest,
		},
	}}
}

func apply(t *testing.T, u *unstructured.Unstructured, set fields) {
	t.Helper()
	for path, v := range set {
		p := strings.Split(path, ".")
		if _, ok := v.(removeField); ok {
			unstructured.RemoveNestedField(u.Object, p...)
			continue
		}
		if err := unstructured.SetNestedField(u.Object, v, p...); err != nil {
			t.Fatalf("setting %s: %v", path, err)
		}
	}
}

// manyLabels is a node selector with n distinct labels.
func manyLabels(n int) map[string]any {
	m := make(map[string]any, n)
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "x"
	}
	return m
}

// conditions is n distinct node condition checks.
func conditions(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"type": fmt.Sprintf("Cond%d", i), "status": "True"}
	}
	return out
}

func window(start, duration string, days ...any) []any {
	w := map[string]any{"start": start, "duration": duration}
	if len(days) > 0 {
		w["days"] = days
	}
	return []any{w}
}

// runValid creates each case on the API server, checks that it is stored and
// that the stored object decodes into typed (typed is a fresh object of the
// kind), then deletes it.
func runValid(t *testing.T, base func() *unstructured.Unstructured, typed func() client.Object, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			u := base()
			apply(t, u, tc.set)
			if err := k8sClient.Create(ctx, u); err != nil {
				t.Fatalf("valid object rejected: %v", err)
			}
			t.Cleanup(func() {
				if err := k8sClient.Delete(context.Background(), u); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("cleanup: %v", err)
				}
			})
			obj := typed()
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(u), obj); err != nil {
				t.Fatalf("stored object does not read back as %T: %v", obj, err)
			}
		})
	}
}

// runRejected creates each case and checks the API server refuses it as
// Invalid with an error that names the field and says what is allowed.
func runRejected(t *testing.T, base func() *unstructured.Unstructured, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			u := base()
			apply(t, u, tc.set)
			err := k8sClient.Create(ctx, u)
			if err == nil {
				_ = k8sClient.Delete(context.Background(), u)
				t.Fatalf("invalid object accepted: %v", tc.set)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			msg := err.Error()
			t.Logf("API server: %s", msg)
			if !strings.Contains(msg, tc.wantField+":") {
				t.Errorf("error does not name the field %q:\n%s", tc.wantField, msg)
			}
			if !strings.Contains(msg, tc.wantMsg) {
				t.Errorf("error does not say %q:\n%s", tc.wantMsg, msg)
			}
		})
	}
}

func TestBootcNodePoolValid(t *testing.T) {
	runValid(t, basePool, func() client.Object { return &v1alpha1.BootcNodePool{} }, []validationCase{
		{name: "minimal tag reference"},
		{name: "digest reference", set: fields{"spec.image": "quay.io/fedora/fedora-bootc@" + digest}},
		{name: "reference without tag", set: fields{"spec.image": "quay.io/fedora/fedora-bootc"}},
		{name: "single component without registry", set: fields{"spec.image": "fedora-bootc"}},
		{name: "registry with port and tag", set: fields{"spec.image": "registry.example.com:5000/os/bootc:v1.2.3"}},
		{name: "registry with port and digest", set: fields{"spec.image": "localhost:5000/os/bootc@" + digest}},
		{name: "tag with upper case, dots and dashes", set: fields{"spec.image": "ghcr.io/org/os_image/bootc:Stable-1.0_rc.1"}},
		{name: "maxUnavailable 0", set: fields{"spec.rollout.maxUnavailable": int64(0)}},
		{name: "maxUnavailable 3", set: fields{"spec.rollout.maxUnavailable": int64(3)}},
		{name: "maxUnavailable 0%", set: fields{"spec.rollout.maxUnavailable": "0%"}},
		{name: "maxUnavailable 25%", set: fields{"spec.rollout.maxUnavailable": "25%"}},
		{name: "maxUnavailable 100%", set: fields{"spec.rollout.maxUnavailable": "100%"}},
		{name: "maxStaging 0", set: fields{"spec.rollout.maxStaging": int64(0)}},
		{name: "timeouts", set: fields{"spec.drainTimeout": "1h30m", "spec.healthTimeout": "900s"}},
		{name: "window over a whole day", set: fields{"spec.windows": window("00:00", "24h")}},
		{name: "window with days", set: fields{"spec.windows": window("23:30", "2h30m", "Sat", "Sun")}},
		{name: "failure policy", set: fields{"spec.failurePolicy.action": "Rollback", "spec.failurePolicy.maxFailures": int64(3)}},
		{name: "failure policy maxFailures 1", set: fields{"spec.failurePolicy.maxFailures": int64(1)}},
		{name: "karpenter", set: fields{"spec.karpenter.protect": false, "spec.karpenter.postUpdateProtection": "30m"}},
		{name: "postUpdateProtection 0s turns it off", set: fields{"spec.karpenter.postUpdateProtection": "0s"}},
		{name: "paused with pull secret", set: fields{"spec.paused": true, "spec.imagePullSecret": "registry-creds"}},
		{name: "tag and digest reference", set: fields{"spec.image": "quay.io/fedora/fedora-bootc:42@" + digest}},
		{name: "registry with port, tag and digest", set: fields{"spec.image": "localhost:5000/os/bootc:v1.2.3@" + digest}},
		{name: "selector with prefixed keys and empty value", set: fields{"spec.nodeSelector": map[string]any{"node-role.kubernetes.io/worker": "", "topology.kubernetes.io/zone": "eu-west-1a", "pool": strings.Repeat("v", 63)}}},
		{name: "selector key with 63-character name", set: fields{"spec.nodeSelector": map[string]any{"example.com/" + strings.Repeat("k", 63): "x"}}},
		{name: "name of 63 characters", set: fields{"metadata.generateName": remove, "metadata.name": strings.Repeat("p", 63)}},
		{name: "durations as Go prints them", set: fields{"spec.drainTimeout": "1h30m0s", "spec.healthTimeout": "1.5s", "spec.karpenter.postUpdateProtection": "99999h"}},
		{name: "durations in small units", set: fields{"spec.drainTimeout": "604800000ms", "spec.healthTimeout": ".5h", "spec.windows": window("00:00", "86400s")}},
		{name: "maxUnavailable largest int32", set: fields{"spec.rollout.maxUnavailable": int64(2147483647)}},
		{name: "health checks", set: fields{"spec.healthChecks.readyFor": "2m", "spec.healthChecks.nodeConditions": []any{
			map[string]any{"type": "NetworkUnavailable", "status": "False"},
			map[string]any{"type": "example.com/DiskPressureSoon", "status": "Unknown"},
		}, "spec.healthChecks.daemonSets": []any{
			map[string]any{"namespace": "kube-system", "name": "calico-node"},
			map[string]any{"namespace": "kube-system", "name": "csi.driver-node"},
		}}},
		{name: "health checks, 16 conditions", set: fields{"spec.healthChecks.nodeConditions": conditions(16)}},
	})
}

func TestBootcNodePoolRejected(t *testing.T) {
	const (
		image   = "spec.image"
		maxU    = "spec.rollout.maxUnavailable"
		maxUMsg = "an integer >= 0"
		sel     = "spec.nodeSelector"
		keyMsg  = "every key must be a valid label key"
		durMsg  = "one to three numbers, each followed by a unit"
	)
	runRejected(t, basePool, []validationCase{
		{name: "image with upper case repository", set: fields{image: "Not/Upper:Case"}, wantField: image, wantMsg: "OCI image reference"},
		{name: "image with short digest", set: fields{image: "repo@sha256:short"}, wantField: image, wantMsg: "OCI image reference"},
		{name: "image with scheme", set: fields{image: "https://quay.io/fedora/fedora-bootc:42"}, wantField: image, wantMsg: "OCI image reference"},
		{name: "image with tag too long", set: fields{image: "repo:" + strings.Repeat("t", 129)}, wantField: image, wantMsg: "OCI image reference"},
		{name: "image empty", set: fields{image: ""}, wantField: image, wantMsg: "at least 1 chars long"},
		{name: "image missing", set: fields{image: remove}, wantField: image, wantMsg: "Required value"},
		{name: "image too long", set: fields{image: "quay.io/" + strings.Repeat("a", 512)}, wantField: image, wantMsg: "may not be more than 512"},
		{name: "nodeSelector missing", set: fields{"spec.nodeSelector": remove}, wantField: "spec.nodeSelector", wantMsg: "Required value"},
		{name: "tag and short digest", set: fields{image: "quay.io/os:42@sha256:abc"}, wantField: image, wantMsg: "OCI image reference"},
		{name: "digest before tag", set: fields{image: "quay.io/os@" + digest + ":42"}, wantField: image, wantMsg: "OCI image reference"},
		{name: "two tags", set: fields{image: "quay.io/os:42:43"}, wantField: image, wantMsg: "OCI image reference"},

		{name: "nodeSelector empty", set: fields{sel: map[string]any{}}, wantField: sel, wantMsg: "an empty nodeSelector would select every Node, control plane included"},
		{name: "nodeSelector key with space", set: fields{sel: map[string]any{"bad key": "x"}}, wantField: sel, wantMsg: keyMsg},
		{name: "nodeSelector key with two slashes", set: fields{sel: map[string]any{"a/b/c": "x"}}, wantField: sel, wantMsg: keyMsg},
		{name: "nodeSelector key name too long", set: fields{sel: map[string]any{strings.Repeat("k", 64): "x"}}, wantField: sel, wantMsg: keyMsg},
		{name: "nodeSelector key prefix not a DNS name", set: fields{sel: map[string]any{"Example_COM/x": "x"}}, wantField: sel, wantMsg: keyMsg},
		{name: "nodeSelector key empty", set: fields{sel: map[string]any{"": "x"}}, wantField: sel, wantMsg: keyMsg},
		{name: "nodeSelector value too long", set: fields{sel: map[string]any{"k": strings.Repeat("v", 64)}}, wantField: sel, wantMsg: "at most 63 characters"},
		{name: "nodeSelector value not a string", set: fields{sel: map[string]any{"k": int64(1)}}, wantField: sel + ".k", wantMsg: "must be of type string"},
		{name: "nodeSelector not a map", set: fields{sel: "role=worker"}, wantField: sel, wantMsg: "must be of type object"},
		{name: "nodeSelector with 65 labels", set: fields{sel: manyLabels(65)}, wantField: sel, wantMsg: "must have at most 64 items"},
		{name: "name of 64 characters", set: fields{"metadata.generateName": remove, "metadata.name": strings.Repeat("p", 64)}, wantField: "metadata", wantMsg: "must be at most 63 characters: the pool's name is the value of the bootroll.dev/pool label"},

		{name: "maxUnavailable -1", set: fields{maxU: int64(-1)}, wantField: maxU, wantMsg: maxUMsg},
		{name: "maxUnavailable 101%", set: fields{maxU: "101%"}, wantField: maxU, wantMsg: maxUMsg},
		{name: "maxUnavailable -1%", set: fields{maxU: "-1%"}, wantField: maxU, wantMsg: maxUMsg},
		{name: "maxUnavailable 05%", set: fields{maxU: "05%"}, wantField: maxU, wantMsg: maxUMsg},
		{name: "maxUnavailable abc", set: fields{maxU: "abc"}, wantField: maxU, wantMsg: maxUMsg},
		// A count in a string is neither an integer nor a percentage (as for
		// Deployment maxUnavailable); the message says to drop the quotes.
		{name: "maxUnavailable string 10", set: fields{maxU: "10"}, wantField: maxU, wantMsg: "without quotes"},
		{name: "maxUnavailable 1.5", set: fields{maxU: 1.5}, wantField: maxU, wantMsg: "integer"},
		{name: "maxUnavailable above int32", set: fields{maxU: int64(2147483648)}, wantField: maxU, wantMsg: "at most 2147483647"},
		{name: "maxUnavailable boolean", set: fields{maxU: true}, wantField: maxU, wantMsg: "must be of type integer,string"},
		{name: "maxStaging string", set: fields{"spec.rollout.maxStaging": "3"}, wantField: "spec.rollout.maxStaging", wantMsg: "must be of type integer"},
		{name: "paused string", set: fields{"spec.paused": "yes"}, wantField: "spec.paused", wantMsg: "must be of type boolean"},
		{name: "maxStaging -1", set: fields{"spec.rollout.maxStaging": int64(-1)}, wantField: "spec.rollout.maxStaging", wantMsg: "greater than or equal to 0"},

		{name: "drainTimeout -5m", set: fields{"spec.drainTimeout": "-5m"}, wantField: "spec.drainTimeout", wantMsg: "positive duration"},
		{name: "drainTimeout 0s", set: fields{"spec.drainTimeout": "0s"}, wantField: "spec.drainTimeout", wantMsg: "positive duration"},
		{name: "drainTimeout without unit", set: fields{"spec.drainTimeout": "10"}, wantField: "spec.drainTimeout", wantMsg: "duration"},
		{name: "drainTimeout abc", set: fields{"spec.drainTimeout": "abc"}, wantField: "spec.drainTimeout", wantMsg: "duration"},
		{name: "drainTimeout in days", set: fields{"spec.drainTimeout": "1d"}, wantField: "spec.drainTimeout", wantMsg: "duration"},
		// Numbers too big for a Go duration were refused with "type
		// conversion error from 'string' to 'google.protobuf.Duration'".
		{name: "drainTimeout overflowing", set: fields{"spec.drainTimeout": "9999999999999999h"}, wantField: "spec.drainTimeout", wantMsg: durMsg},
		{name: "drainTimeout above 99999h", set: fields{"spec.drainTimeout": "99999h60m"}, wantField: "spec.drainTimeout", wantMsg: "at most 99999h"},
		{name: "drainTimeout four parts", set: fields{"spec.drainTimeout": "1h1m1s1ms"}, wantField: "spec.drainTimeout", wantMsg: durMsg},
		{name: "drainTimeout integer", set: fields{"spec.drainTimeout": int64(600)}, wantField: "spec.drainTimeout", wantMsg: "must be of type string"},
		{name: "healthTimeout overflowing", set: fields{"spec.healthTimeout": "99999999999999999999s"}, wantField: "spec.healthTimeout", wantMsg: durMsg},
		{name: "postUpdateProtection overflowing", set: fields{"spec.karpenter.postUpdateProtection": "999999999999999999999ns"}, wantField: "spec.karpenter.postUpdateProtection", wantMsg: durMsg},
		{name: "window duration overflowing", set: fields{"spec.windows": window("01:00", "99999999999999h")}, wantField: "spec.windows[0].duration", wantMsg: "at most 24h"},
		{name: "window duration integer", set: fields{"spec.windows": []any{map[string]any{"start": "01:00", "duration": int64(60)}}}, wantField: "spec.windows[0].duration", wantMsg: "must be of type string"},
		{name: "windows not a list", set: fields{"spec.windows": "01:00-02:00"}, wantField: "spec.windows", wantMsg: "must be of type array"},
		{name: "failurePolicy maxFailures string", set: fields{"spec.failurePolicy.maxFailures": "10%"}, wantField: "spec.failurePolicy.maxFailures", wantMsg: "must be of type integer"},
		{name: "drainTimeout too long", set: fields{"spec.drainTimeout": strings.Repeat("1", 32) + "s"}, wantField: "spec.drainTimeout", wantMsg: "may not be more than 32"},
		{name: "imagePullSecret not a name", set: fields{"spec.imagePullSecret": "Registry_Creds"}, wantField: "spec.imagePullSecret", wantMsg: "name of a Secret"},
		{name: "healthTimeout 0s", set: fields{"spec.healthTimeout": "0s"}, wantField: "spec.healthTimeout", wantMsg: "positive duration"},
		{name: "postUpdateProtection negative", set: fields{"spec.karpenter.postUpdateProtection": "-5m"}, wantField: "spec.karpenter.postUpdateProtection", wantMsg: durMsg},
		{name: "postUpdateProtection over 99999h", set: fields{"spec.karpenter.postUpdateProtection": "99999h1m"}, wantField: "spec.karpenter.postUpdateProtection", wantMsg: "at most 99999h"},

		{name: "window start 25:00", set: fields{"spec.windows": window("25:00", "1h")}, wantField: "spec.windows[0].start", wantMsg: "HH:MM"},
		{name: "window start 9:00", set: fields{"spec.windows": window("9:00", "1h")}, wantField: "spec.windows[0].start", wantMsg: "HH:MM"},
		{name: "window duration 0s", set: fields{"spec.windows": window("01:00", "0s")}, wantField: "spec.windows[0].duration", wantMsg: "at most 24h"},
		{name: "window duration 25h", set: fields{"spec.windows": window("01:00", "25h")}, wantField: "spec.windows[0].duration", wantMsg: "at most 24h"},
		{name: "window duration abc", set: fields{"spec.windows": window("01:00", "abc")}, wantField: "spec.windows[0].duration", wantMsg: "duration"},
		{name: "window day Monday", set: fields{"spec.windows": window("01:00", "1h", "Monday")}, wantField: "spec.windows[0].days[0]", wantMsg: `supported values: "Mon"`},
		{name: "window without start", set: fields{"spec.windows": []any{map[string]any{"duration": "1h"}}}, wantField: "spec.windows[0].start", wantMsg: "Required value"},

		{name: "failurePolicy maxFailures 0", set: fields{"spec.failurePolicy.maxFailures": int64(0)}, wantField: "spec.failurePolicy.maxFailures", wantMsg: "greater than or equal to 1"},
		{name: "failurePolicy maxFailures -1", set: fields{"spec.failurePolicy.maxFailures": int64(-1)}, wantField: "spec.failurePolicy.maxFailures", wantMsg: "greater than or equal to 1"},
		{name: "failurePolicy unknown action", set: fields{"spec.failurePolicy.action": "Retry"}, wantField: "spec.failurePolicy.action", wantMsg: `supported values: "Halt", "Rollback"`},

		{name: "readyFor 0s", set: fields{"spec.healthChecks.readyFor": "0s"}, wantField: "spec.healthChecks.readyFor", wantMsg: "positive duration"},
		{name: "readyFor abc", set: fields{"spec.healthChecks.readyFor": "abc"}, wantField: "spec.healthChecks.readyFor", wantMsg: durMsg},
		{name: "nodeCondition status Maybe", set: fields{"spec.healthChecks.nodeConditions": []any{map[string]any{"type": "NetworkUnavailable", "status": "Maybe"}}},
			wantField: "spec.healthChecks.nodeConditions[0].status", wantMsg: `supported values: "True", "False", "Unknown"`},
		{name: "nodeCondition without status", set: fields{"spec.healthChecks.nodeConditions": []any{map[string]any{"type": "NetworkUnavailable"}}},
			wantField: "spec.healthChecks.nodeConditions[0].status", wantMsg: "Required value"},
		{name: "nodeCondition without type", set: fields{"spec.healthChecks.nodeConditions": []any{map[string]any{"status": "True"}}},
			wantField: "spec.healthChecks.nodeConditions[0].type", wantMsg: "Required value"},
		{name: "nodeCondition type with space", set: fields{"spec.healthChecks.nodeConditions": []any{map[string]any{"type": "Network Unavailable", "status": "False"}}},
			wantField: "spec.healthChecks.nodeConditions[0].type", wantMsg: "must be a condition type"},
		{name: "nodeCondition type twice", set: fields{"spec.healthChecks.nodeConditions": []any{
			map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "Ready", "status": "False"}}},
			wantField: "spec.healthChecks.nodeConditions[1]", wantMsg: "Duplicate value"},
		{name: "17 nodeConditions", set: fields{"spec.healthChecks.nodeConditions": conditions(17)}, wantField: "spec.healthChecks.nodeConditions", wantMsg: "must have at most 16 items"},
		{name: "daemonSet without namespace", set: fields{"spec.healthChecks.daemonSets": []any{map[string]any{"name": "calico-node"}}},
			wantField: "spec.healthChecks.daemonSets[0].namespace", wantMsg: "Required value"},
		{name: "daemonSet namespace with dot", set: fields{"spec.healthChecks.daemonSets": []any{map[string]any{"namespace": "kube.system", "name": "calico-node"}}},
			wantField: "spec.healthChecks.daemonSets[0].namespace", wantMsg: "must be a namespace name"},
		{name: "daemonSet name upper case", set: fields{"spec.healthChecks.daemonSets": []any{map[string]any{"namespace": "kube-system", "name": "Calico"}}},
			wantField: "spec.healthChecks.daemonSets[0].name", wantMsg: "must be a DaemonSet name"},
		{name: "daemonSet name empty", set: fields{"spec.healthChecks.daemonSets": []any{map[string]any{"namespace": "kube-system", "name": ""}}},
			wantField: "spec.healthChecks.daemonSets[0].name", wantMsg: "at least 1 chars long"},
	})
}

func TestBootcNodeValid(t *testing.T) {
	runValid(t, baseNode, func() client.Object { return &v1alpha1.BootcNode{} }, []validationCase{
		{name: "no boot order"},
		{name: "desiredImage with a tag and a digest", set: fields{"spec.desiredImage": "quay.io/acme/os:42@sha256:" + strings.Repeat("b", 64)}},
		{name: "boot order", set: fields{"spec.bootOrder": map[string]any{"image": "quay.io/acme/os@sha256:" + strings.Repeat("a", 64), "at": "2026-01-05T00:00:00Z"}}},
		{name: "rollback order withdrawn", set: fields{"spec.bootOrder": map[string]any{"image": "quay.io/acme/os@sha256:" + strings.Repeat("a", 64), "at": "2026-01-05T00:00:00Z", "rollback": true, "withdrawn": true}}},
	})
}

func TestBootcNodeRejected(t *testing.T) {
	runRejected(t, baseNode, []validationCase{
		{name: "boot order without image", set: fields{"spec.bootOrder": map[string]any{"at": "2026-01-05T00:00:00Z"}}, wantField: "spec.bootOrder.image", wantMsg: "Required value"},
		{name: "boot order without time", set: fields{"spec.bootOrder": map[string]any{"image": "quay.io/acme/os@sha256:" + strings.Repeat("a", 64)}}, wantField: "spec.bootOrder.at", wantMsg: "Required value"},
		{name: "pool missing", set: fields{"spec.pool": remove}, wantField: "spec.pool", wantMsg: "Required value"},
		{name: "desiredImage a tag", set: fields{"spec.desiredImage": "quay.io/acme/os:42"}, wantField: "spec.desiredImage", wantMsg: "pinned by digest"},
		{name: "desiredImage with a scheme", set: fields{"spec.desiredImage": "https://quay.io/acme/os@sha256:" + strings.Repeat("a", 64)}, wantField: "spec.desiredImage", wantMsg: "pinned by digest"},
		{name: "boot order for a tag", set: fields{"spec.bootOrder": map[string]any{"image": "quay.io/acme/os:42", "at": "2026-01-05T00:00:00Z"}}, wantField: "spec.bootOrder.image", wantMsg: "pinned by digest"},
		{name: "pool name too long", set: fields{"spec.pool": strings.Repeat("p", 64)}, wantField: "spec.pool", wantMsg: "63"},
		{name: "pool name upper case", set: fields{"spec.pool": "Workers"}, wantField: "spec.pool", wantMsg: "must be the name of a BootcNodePool"},
	})
}

// TestBootcNodePoolTypedDurations: durations as Go writes them
// (metav1.Duration marshals 90m as "1h30m0s", 1.5s as "1.5s") pass the
// duration rules.
func TestBootcNodePoolTypedDurations(t *testing.T) {
	ctx := context.Background()
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	pool := &v1alpha1.BootcNodePool{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "typed-"},
		Spec: v1alpha1.BootcNodePoolSpec{
			NodeSelector:  map[string]string{"a": "b"},
			Image:         "quay.io/fedora/fedora-bootc@" + digest,
			DrainTimeout:  d(90 * time.Minute),
			HealthTimeout: d(1500 * time.Millisecond),
			Windows:       []v1alpha1.MaintenanceWindow{{Start: "02:00", Duration: *d(24 * time.Hour), Days: []v1alpha1.Weekday{"Mon"}}},
			Karpenter:     v1alpha1.KarpenterOptions{PostUpdateProtection: d(time.Hour + 30*time.Second)},
			Rollout:       v1alpha1.RolloutSpec{MaxUnavailable: ptr.To(intstr.FromString("50%"))},
		},
	}
	if err := k8sClient.Create(ctx, pool); err != nil {
		t.Fatalf("pool with Go-formatted durations rejected: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), pool) })
}
