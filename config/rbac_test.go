package config_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// use is one grant a component's code needs, as boundGrants writes it
// ("group/resource:verb", "ns:group/resource:verb" for a Role's), and the
// code that needs it. The tables below are the review of every grant
// against the code (docs/security.md); TestRBACMatchesUse keeps the roles
// and the tables equal both ways, so a grant nothing uses and a use
// nothing grants both fail. A change to what the code calls must change
// its table, the markers in controller/rbac.go (or
// config/rbac/daemon_role.yaml) and docs/security.md together.
type use struct{ grant, why string }

// controllerUses is what the controller's code does with the API.
var controllerUses = []use{
	{"bootroll.dev/bootcnodepools:get", "node.go freshPool, recordPoolFailure: read past the cache"},
	{"bootroll.dev/bootcnodepools:list", "cache"},
	{"bootroll.dev/bootcnodepools:watch", "cache"},
	{"bootroll.dev/bootcnodepools:patch", "pool.go, cleanup.go: the finalizer"},
	{"bootroll.dev/bootcnodepools/status:update", "pool.go: the status, under the resourceVersion read"},
	{"bootroll.dev/bootcnodepools/status:patch", "node.go recordPoolFailure"},
	{"bootroll.dev/bootcnodepools/finalizers:update", "blockOwnerDeletion on the BootcNodes' owner reference (OwnerReferencesPermissionEnforcement)"},
	{"bootroll.dev/bootcnodes:get", "takeslot.go, cleanup.go, pool.go: read past the cache"},
	{"bootroll.dev/bootcnodes:list", "cache"},
	{"bootroll.dev/bootcnodes:watch", "cache"},
	{"bootroll.dev/bootcnodes:create", "pool.go: one per selected Node"},
	{"bootroll.dev/bootcnodes:patch", "spec (node.go, pool.go, pinned.go) and the finalizer (cleanup.go)"},
	{"bootroll.dev/bootcnodes:delete", "pool.go, cleanup.go"},
	{"bootroll.dev/bootcnodes/status:patch", "node.go: status.phase and status.rollout"},
	{"bootroll.dev/pinnedimagesets:list", "cache"},
	{"bootroll.dev/pinnedimagesets:watch", "cache"},
	{"bootroll.dev/pinnedimagesets/status:patch", "pinned/pinned.go"},
	{"/nodes:get", "node.go, takeslot.go: read past the cache before a cordon"},
	{"/nodes:list", "cache"},
	{"/nodes:watch", "cache"},
	{"/nodes:patch", "cordon, annotations, taints"},
	{"/pods:list", "cache (indexed by node) and drain.go PodsToLeave"},
	{"/pods:watch", "cache"},
	{"/pods/eviction:create", "drain.go"},
	{"/events:create", "the manager's core/v1 event recorder, leader election"},
	{"/events:patch", "the recorder counts a repeated event"},
	{"karpenter.sh/nodeclaims:get", "karpenter/karpenter.go LookupClaim, past the cache"},
	{"karpenter.sh/nodeclaims:patch", "karpenter.go, takeslot.go: do-not-disrupt"},
	{"apiextensions.k8s.io/customresourcedefinitions:get", "karpenter/karpenter.go LookupClaim: is Karpenter installed"},
	{namespace + ":/secrets:get", "pool.go: imagePullSecrets; pinned.go: the source of a mirrored pull secret"},
	{namespace + ":coordination.k8s.io/leases:get", "leader election"},
	{namespace + ":coordination.k8s.io/leases:create", "leader election"},
	{namespace + ":coordination.k8s.io/leases:update", "leader election"},
	{pullSecretNamespace + ":/secrets:get", "pinned.go mirrorSecret"},
	{pullSecretNamespace + ":/secrets:create", "pinned.go mirrorSecret"},
	{pullSecretNamespace + ":/secrets:update", "pinned.go mirrorSecret"},
	{pullSecretNamespace + ":/secrets:delete", "pinned.go mirrorSecret: a changed Secret type"},
}

// daemonUses is what the node daemon's code does with the API.
var daemonUses = []use{
	{"bootroll.dev/bootcnodes:list", "its cache: one field-selected informer on its own BootcNode"},
	{"bootroll.dev/bootcnodes:watch", "its cache"},
	{"bootroll.dev/bootcnodes/status:patch", "nodedaemon/daemon.go: its report"},
	{"/nodes:get", "nodedaemon/daemon.go: its own Node before a reboot"},
	{pullSecretNamespace + ":/secrets:get", "nodedaemon/wiring.go PullSecrets"},
}

// removedGrants were granted once and are used by no code; the API server
// test checks they stay refused.
var removedGrants = map[string][]string{
	controllerName: {
		"events.k8s.io/events:create", "events.k8s.io/events:patch",
		"/pods:get",
		"policy/poddisruptionbudgets:get", "policy/poddisruptionbudgets:list", "policy/poddisruptionbudgets:watch",
		"apiextensions.k8s.io/customresourcedefinitions:list", "apiextensions.k8s.io/customresourcedefinitions:watch",
		"karpenter.sh/nodeclaims:list", "karpenter.sh/nodeclaims:watch",
		"bootroll.dev/bootcnodes:update",
		"bootroll.dev/bootcnodes/status:get", "bootroll.dev/bootcnodes/status:update",
		"bootroll.dev/pinnedimagesets:get",
		"bootroll.dev/pinnedimagesets/status:get", "bootroll.dev/pinnedimagesets/status:update",
	},
	daemonName: {"bootroll.dev/bootcnodes:get"},
}

func grantsOf(uses []use) []string {
	var out []string
	for _, u := range uses {
		out = append(out, u.grant)
	}
	sort.Strings(out)
	return out
}

// parseGrant turns a boundGrants string back into an access.
func parseGrant(g string) access {
	rest, verb := g[:strings.LastIndex(g, ":")], g[strings.LastIndex(g, ":")+1:]
	var a access
	if ns, r, ok := strings.Cut(rest, ":"); ok {
		a.namespace, rest = ns, r
	}
	a.verb = verb
	a.group, rest, _ = strings.Cut(rest, "/")
	a.resource, a.subresource, _ = strings.Cut(rest, "/")
	return a
}

func accessesOf(grants []string) []access {
	var out []access
	for _, g := range grants {
		out = append(out, parseGrant(g))
	}
	return out
}

// diff returns what is in a and not in b (both sorted).
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, found := slices.BinarySearch(b, x); !found {
			out = append(out, x)
		}
	}
	return out
}

// TestRBACMatchesUse: each workload's service account is granted exactly
// what its code uses (controllerUses, daemonUses), and none of the grants
// removed as unused.
func TestRBACMatchesUse(t *testing.T) {
	idx := byKey(t, loadAll(t))
	dep := get[*appsv1.Deployment](t, idx, "Deployment/"+namespace+"/"+controllerName)
	ds := get[*appsv1.DaemonSet](t, idx, "DaemonSet/"+namespace+"/"+daemonName)
	for _, c := range []struct {
		name, sa string
		uses     []use
		where    string
	}{
		{controllerName, dep.Spec.Template.Spec.ServiceAccountName, controllerUses, "the markers of controller/rbac.go (then `make manifests`)"},
		{daemonName, ds.Spec.Template.Spec.ServiceAccountName, daemonUses, "config/rbac/daemon_role.yaml or daemon_pull_secrets.yaml"},
	} {
		got := boundGrants(t, idx, namespace, c.sa)
		want := grantsOf(c.uses)
		for _, g := range diff(got, want) {
			t.Errorf("%s is granted %s, which no code of it uses (not in its table in config/rbac_test.go): remove it from %s, or add the use to the table",
				c.name, g, c.where)
		}
		for _, g := range diff(want, got) {
			t.Errorf("%s's code uses %s, which its roles do not grant: add it to %s", c.name, g, c.where)
		}
		for _, g := range removedGrants[c.name] {
			if slices.Contains(want, g) {
				t.Errorf("%s is both used and in removedGrants", g)
			}
		}
	}
}

func TestParseGrant(t *testing.T) {
	for g, want := range map[string]access{
		"bootroll.dev/bootcnodes/status:patch":              {verb: "patch", group: "bootroll.dev", resource: "bootcnodes", subresource: "status"},
		"/pods/eviction:create":                             {verb: "create", resource: "pods", subresource: "eviction"},
		"bootroll-system:coordination.k8s.io/leases:update": {verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "bootroll-system"},
		"bootroll-pull-secrets:/secrets:get":                {verb: "get", resource: "secrets", namespace: "bootroll-pull-secrets"},
	} {
		if got := parseGrant(g); got != want {
			t.Errorf("parseGrant(%q) = %+v, want %+v", g, got, want)
		}
	}
}
