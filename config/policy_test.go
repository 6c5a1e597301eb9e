package config_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootroll/bootroll/api/v1alpha1"
)

// daemonStatusFields are the status fields of a BootcNode the node daemon
// writes; every other status field is the controller's, and the daemon
// policy must refuse a daemon's change to it.
var daemonStatusFields = []string{"booted", "daemon", "rollbackImage", "staged"}

// controllerStatusWrites are, for each controller-owned status field, merge
// patches a daemon might send to change it; the API server test sends each
// with the field absent and with it set, and wants each refused with the
// policy's message naming the field. nil values remove the field.
var controllerStatusWrites = map[string][]string{
	"phase": {`{"status":{"phase":"Updated"}}`, `{"status":{"phase":null}}`},
	"rollout": {
		`{"status":{"rollout":{"reason":"DaemonSaysSo"}}}`,
		`{"status":{"rollout":{"cordoned":false,"priorUnschedulable":true}}}`,
		`{"status":{"rollout":{"addedAnnotations":[]}}}`,
		`{"status":{"rollout":null}}`,
	},
}

// TestDaemonPolicyCoversStatus: every status field of the BootcNode CRD
// is the daemon's or checked by the daemon policy, so a field added to
// BootcNodeStatus cannot be left open to the daemons.
func TestDaemonPolicyCoversStatus(t *testing.T) {
	idx := byKey(t, loadAll(t))
	crd := get[*apiextensionsv1.CustomResourceDefinition](t, idx, "CustomResourceDefinition/bootcnodes.bootroll.dev")
	vap := get[*admissionregistrationv1.ValidatingAdmissionPolicy](t, idx, "ValidatingAdmissionPolicy/"+daemonPolicyName)
	controllerFields := slices.Sorted(maps.Keys(controllerStatusWrites))
	for _, v := range crd.Spec.Versions {
		var fields []string
		for f := range v.Schema.OpenAPIV3Schema.Properties["status"].Properties {
			if !slices.Contains(daemonStatusFields, f) {
				fields = append(fields, f)
			}
		}
		sort.Strings(fields)
		if !slices.Equal(fields, controllerFields) {
			t.Errorf("BootcNode %s: the controller's status fields are %v, config/policy_test.go knows %v: "+
				"check the new field in config/rbac/daemon_status_policy.yaml and add it to controllerStatusWrites (or daemonStatusFields)",
				v.Name, fields, controllerFields)
		}
	}
	for _, f := range controllerFields {
		check := "object.?status.?" + f + " == oldObject.?status.?" + f
		found := false
		for _, v := range vap.Spec.Validations {
			found = found || (strings.Contains(v.Expression, check) && strings.Contains(v.MessageExpression, "status."+f))
		}
		if !found {
			t.Errorf("the daemon policy has no validation %q with a message naming status.%s", check, f)
		}
	}
}

// mergePatch sends a JSON merge patch to BootcNode name, to its status
// when status is true.
func mergePatch(c client.Client, name string, status bool, data string) error {
	b := &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p := client.RawPatch(types.MergePatchType, []byte(data))
	if status {
		return c.Status().Patch(context.Background(), b, p)
	}
	return c.Patch(context.Background(), b, p)
}

// wantRefused fails unless err is the policy's Forbidden with msg (and not
// a CEL evaluation error).
func wantRefused(t *testing.T, what string, err error, msg string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want refused with %q", what, msg)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), msg) || strings.Contains(err.Error(), "resulted in error"):
		t.Errorf("%s: want Forbidden by %s with %q, got %v", what, daemonPolicyName, msg, err)
	}
}

// testDaemonStatusFields: on the API server with the policy active, the
// daemon of node (client dc) writes its own fields of its BootcNode and
// cannot change the controller's, whether they are set or not; spec and
// metadata sent to the status subresource are dropped by the API server.
// admin writes the controller's fields.
func testDaemonStatusFields(t *testing.T, admin, dc client.Client, node string) {
	ctx := context.Background()
	read := func() *v1alpha1.BootcNode {
		t.Helper()
		var bn v1alpha1.BootcNode
		if err := admin.Get(ctx, client.ObjectKey{Name: node}, &bn); err != nil {
			t.Fatal(err)
		}
		return &bn
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	const image = "quay.io/example/os@" + digest
	own := `{"status":{
		"booted":{"image":"` + image + `","digest":"` + digest + `","version":"42"},
		"staged":{"image":"` + image + `","digest":"` + digest + `"},
		"rollbackImage":{"image":"` + image + `","digest":"` + digest + `"},
		"daemon":{"phase":"Staged","bootID":"b-1","lastError":"none","stageAttempts":2,"observedGeneration":3,
			"lastAttempt":"2026-01-05T00:00:00Z",
			"lastReboot":{"image":"` + image + `","bootID":"b-0","at":"2026-01-05T00:00:00Z"},
			"conditions":[{"type":"PrefetchAvailable","status":"False","reason":"RuntimeUnavailable","message":"no socket","lastTransitionTime":"2026-01-05T00:00:00Z"}],
			"pinnedImages":[{"name":"set-a","generation":1,"present":1,"images":[{"image":"` + image + `","state":"Present"}]}]}}}`

	for _, state := range []struct {
		name, set string
	}{
		{"absent", `{"status":{"phase":null,"rollout":null}}`},
		{"set", `{"status":{"phase":"Draining","rollout":{"targetImage":"` + image + `","cordoned":true,"priorUnschedulable":false,
			"addedAnnotations":["bootroll.dev/slot"],"reason":"Drain","message":"draining","failures":1}}}`},
	} {
		if err := mergePatch(admin, node, true, state.set); err != nil {
			t.Fatalf("set the controller's fields %s: %v", state.name, err)
		}
		before := read()
		for _, f := range slices.Sorted(maps.Keys(controllerStatusWrites)) {
			for _, p := range controllerStatusWrites[f] {
				if state.name == "absent" && strings.Contains(p, "null") {
					continue // removing an absent field changes nothing
				}
				err := mergePatch(dc, node, true, p)
				wantRefused(t, "controller's fields "+state.name+": daemon patches "+p, err, "bootroll-daemon on node "+node+" may not change status."+f+" of BootcNode "+node)
				t.Logf("status %s, daemon patches %s: %v", state.name, p, err)
			}
		}
		if err := mergePatch(dc, node, true, own); err != nil {
			t.Errorf("controller's fields %s: the daemon cannot write its own status fields: %v", state.name, err)
		}
		after := read()
		if after.Status.Phase != before.Status.Phase || !equalJSON(t, after.Status.Rollout, before.Status.Rollout) {
			t.Errorf("controller's fields %s: the daemon's writes changed them: phase %q -> %q, rollout %+v -> %+v",
				state.name, before.Status.Phase, after.Status.Phase, before.Status.Rollout, after.Status.Rollout)
		}
		if after.Status.Daemon.Phase != v1alpha1.DaemonStaged || len(after.Status.Daemon.PinnedImages) != 1 || len(after.Status.Daemon.Conditions) != 1 ||
			after.Status.Booted == nil || after.Status.Staged == nil || after.Status.RollbackImage == nil {
			t.Errorf("controller's fields %s: the daemon's own fields were not written: %+v", state.name, after.Status)
		}
		// Its own fields may also go away.
		if err := mergePatch(dc, node, true, `{"status":{"staged":null,"daemon":{"conditions":null,"pinnedImages":null}}}`); err != nil {
			t.Errorf("controller's fields %s: the daemon cannot clear its own fields: %v", state.name, err)
		}
	}

	// Spec and metadata sent to the status subresource never reach the
	// object, whatever the policy says.
	before := read()
	err := mergePatch(dc, node, true, `{"metadata":{"labels":{"bootroll.dev/pool":"other","evil":"yes"},"finalizers":null},
		"spec":{"pool":"other","desiredImage":"`+image+`"},"status":{"daemon":{"phase":"Idle"}}}`)
	t.Logf("daemon sends spec and metadata to the status: %v", err)
	after := read()
	if !equalJSON(t, after.Spec, before.Spec) || !equalJSON(t, after.Labels, before.Labels) || !slices.Equal(after.Finalizers, before.Finalizers) {
		t.Errorf("a daemon's status patch changed spec or metadata: spec %+v -> %+v, labels %v -> %v, finalizers %v -> %v",
			before.Spec, after.Spec, before.Labels, after.Labels, before.Finalizers, after.Finalizers)
	}
}

// testDaemonMainResource grants the daemon's service account, for the
// test only, every write of bootcnodes, and checks the policy still
// refuses all but status writes (a role that grants too much is not
// enough to write spec).
func testDaemonMainResource(t *testing.T, admin, dc client.Client, node string) {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-daemon-too-much"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"bootcnodes", "bootcnodes/status"},
			Verbs: []string{"create", "update", "patch", "delete"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: daemonName, Namespace: namespace}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(ctx, o) })
	}
	user := "system:serviceaccount:" + namespace + ":" + daemonName
	deadline := time.Now().Add(10 * time.Second)
	for !allowed(t, admin, user, access{verb: "delete", group: v1alpha1.GroupVersion.Group, resource: "bootcnodes"}) {
		if time.Now().After(deadline) {
			t.Fatal("the test's extra ClusterRole for the daemon did not take effect")
		}
		time.Sleep(100 * time.Millisecond)
	}

	err := mergePatch(dc, node, false, `{"spec":{"desiredImage":"quay.io/evil/os@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}`)
	wantRefused(t, "daemon patches its BootcNode's spec", err, "bootroll-daemon: UPDATE of bootcnodes refused: the daemon may only patch the status of its own BootcNode")
	t.Logf("daemon patches spec: %v", err)
	err = dc.Delete(ctx, &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: node}})
	wantRefused(t, "daemon deletes its BootcNode", err, "bootroll-daemon: DELETE of bootcnodes refused")
	err = dc.Create(ctx, &v1alpha1.BootcNode{ObjectMeta: metav1.ObjectMeta{Name: node + "-new"}, Spec: v1alpha1.BootcNodeSpec{Pool: "workers"}})
	wantRefused(t, "daemon creates a BootcNode", err, "bootroll-daemon: CREATE of bootcnodes refused")
}

// equalJSON reports whether a and b encode to the same JSON.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}
