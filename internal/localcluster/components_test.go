package localcluster

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func testPorts() Ports {
	return Ports{EtcdClient: 2001, EtcdPeer: 2002, APIServer: 2003, ControllerManager: 2004, Scheduler: 2005, KWOK: 2006, KarpenterMetrics: 2007, KarpenterHealth: 2008}
}

func TestComponents(t *testing.T) {
	bins := map[string]string{}
	for _, n := range Order {
		bins[n] = "/b/" + n
	}
	l := Layout{Dir: "/d"}
	cs := Components(bins, testPorts(), l)

	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
		if c.Path != bins[c.Name] {
			t.Errorf("%s: path %q, want %q", c.Name, c.Path, bins[c.Name])
		}
		u, err := url.Parse(c.Ready)
		if err != nil || u.Hostname() != "127.0.0.1" {
			t.Errorf("%s: readiness URL %q, want one on 127.0.0.1", c.Name, c.Ready)
		}
		for _, a := range append(slices.Clone(c.Args), c.Env...) {
			if strings.Contains(a, "0.0.0.0") || strings.Contains(a, "localhost") {
				t.Errorf("%s: %q: want 127.0.0.1 only", c.Name, a)
			}
		}
	}
	if !slices.Equal(names, Order) {
		t.Errorf("components %v, want %v", names, Order)
	}

	// The flags without which a component binds every interface, fights
	// over a lease, or fails on 1.37 (docs/local-cluster.md).
	want := map[string][]string{
		Etcd: {
			"--listen-client-urls=http://127.0.0.1:2001",
			"--listen-peer-urls=http://127.0.0.1:2002",
			"--data-dir=/d/etcd",
			"--unsafe-no-fsync=true",
		},
		APIServer: {
			"--etcd-servers=http://127.0.0.1:2001",
			"--bind-address=127.0.0.1",
			"--advertise-address=127.0.0.1",
			"--secure-port=2003",
			"--endpoint-reconciler-type=none",
			"--client-ca-file=/d/pki/ca.crt",
			"--tls-cert-file=/d/pki/apiserver.crt",
			"--service-account-signing-key-file=/d/pki/sa.key",
			"--service-account-key-file=/d/pki/sa.pub",
			"--authorization-mode=Node,RBAC",
		},
		ControllerManager: {
			"--kubeconfig=/d/kubeconfig",
			"--authentication-kubeconfig=/d/kubeconfig",
			"--authorization-kubeconfig=/d/kubeconfig",
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=2004",
			"--service-account-private-key-file=/d/pki/sa.key",
			"--root-ca-file=/d/pki/ca.crt",
		},
		Scheduler: {
			"--kubeconfig=/d/kubeconfig",
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=2005",
		},
		KWOK: {
			"--kubeconfig=/d/kubeconfig",
			"--config=/d/kwok-stages.yaml",
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--server-address=127.0.0.1:2006",
		},
		KarpenterKWOK: {
			"KUBECONFIG=/d/kubeconfig",
			"DISABLE_LEADER_ELECTION=true",
			"METRICS_PORT=2007",
			"HEALTH_PROBE_PORT=2008",
		},
	}
	for _, c := range cs {
		have := append(slices.Clone(c.Args), c.Env...)
		for _, w := range want[c.Name] {
			if !slices.Contains(have, w) {
				t.Errorf("%s: no %q in %q", c.Name, w, have)
			}
		}
	}
	if got, want := cs[indexOf(APIServer)].Ready, "https://127.0.0.1:2003/readyz"; got != want {
		t.Errorf("apiserver readiness %q, want %q", got, want)
	}
	if got, want := cs[indexOf(KarpenterKWOK)].Ready, "http://127.0.0.1:2008/readyz"; got != want {
		t.Errorf("karpenter-kwok readiness %q, want %q", got, want)
	}
}

func TestFreePortsDistinct(t *testing.T) {
	p, err := FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	all := []int{p.EtcdClient, p.EtcdPeer, p.APIServer, p.ControllerManager, p.Scheduler, p.KWOK, p.KarpenterMetrics, p.KarpenterHealth}
	seen := map[int]bool{}
	for _, n := range all {
		if n <= 0 || seen[n] {
			t.Fatalf("ports %v: want 8 distinct positive ports", all)
		}
		seen[n] = true
	}
}

func TestFindBinaries(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{Etcd, APIServer, KWOK} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Not executable: as good as missing.
	if err := os.WriteFile(filepath.Join(dir, Scheduler), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FindBinaries(dir)
	if !IsMissingBinaries(err) {
		t.Fatalf("FindBinaries: %v, want a MissingBinariesError", err)
	}
	msg := err.Error()
	for _, w := range []string{ControllerManager, Scheduler, KarpenterKWOK, "make cluster-tools", dir} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not name %q", msg, w)
		}
	}
	if strings.Contains(msg, KWOK+",") || strings.Contains(msg, APIServer) {
		t.Errorf("error %q names a binary that is there", msg)
	}

	for _, n := range []string{ControllerManager, Scheduler, KarpenterKWOK} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bins, err := FindBinaries(dir)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if got, want := bins[KarpenterKWOK], filepath.Join(real, KarpenterKWOK); got != want {
		t.Errorf("karpenter-kwok at %q, want %q", got, want)
	}
}

// StartKarpenter's command: the karpenter-kwok component, with
// FEATURE_GATES only when gates are asked for, and the shared component
// list left as it was.
func TestKarpenterComponent(t *testing.T) {
	bins := map[string]string{}
	for _, n := range Order {
		bins[n] = "/b/" + n
	}
	cs := Components(bins, testPorts(), Layout{Dir: "/d"})
	c := KarpenterComponent(cs, "NodeRepair=true")
	if c.Name != KarpenterKWOK || !slices.Contains(c.Env, "FEATURE_GATES=NodeRepair=true") {
		t.Errorf("with gates: %s %v", c.Name, c.Env)
	}
	for _, e := range cs[len(cs)-1].Env {
		if strings.HasPrefix(e, "FEATURE_GATES=") {
			t.Errorf("KarpenterComponent changed the shared component: %v", cs[len(cs)-1].Env)
		}
	}
	for _, e := range KarpenterComponent(cs, "").Env {
		if strings.HasPrefix(e, "FEATURE_GATES=") {
			t.Errorf("without gates: %v", e)
		}
	}
}

// TestKarpenterVersions: each version a local cluster runs has its own
// CRDs (v1.14's NodePool has no Unhealthy budget reason, v1.15's has) and
// karpenter-kwok binary; an unknown version and a v1.14 binary not built
// are errors that say what to do.
func TestKarpenterVersions(t *testing.T) {
	unhealthy := func(version string) bool {
		crds, err := KarpenterCRDsFor(version)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(kinds(crds), "CustomResourceDefinition/kwoknodeclasses.karpenter.kwok.sh") {
			t.Errorf("%s: CRDs %v lack the KWOKNodeClass", version, kinds(crds))
		}
		for _, c := range crds {
			if c.GetName() == "nodepools.karpenter.sh" {
				b, _ := json.Marshal(c.Object)
				return strings.Contains(string(b), `"Unhealthy"`)
			}
		}
		t.Fatalf("%s: no NodePool CRD", version)
		return false
	}
	if !unhealthy("") || !unhealthy(DefaultKarpenterVersion) || unhealthy(KarpenterV114) {
		t.Errorf("Unhealthy budget reason: default %v, v1.14 %v; want true, false", unhealthy(""), unhealthy(KarpenterV114))
	}
	if err := CheckKarpenterVersion("v1.13"); err == nil || !strings.Contains(err.Error(), "make karpenter-v1.14") {
		t.Errorf("v1.13: %v", err)
	}

	dir := t.TempDir()
	if p, err := karpenterBinary(dir, "", "/x/karpenter-kwok"); err != nil || p != "/x/karpenter-kwok" {
		t.Errorf("default: %q, %v", p, err)
	}
	_, err := karpenterBinary(dir, KarpenterV114, "/x/karpenter-kwok")
	if !IsMissingBinaries(err) || !strings.Contains(err.Error(), "karpenter-kwok-v1.14") || !strings.Contains(err.Error(), "make karpenter-v1.14") {
		t.Errorf("v1.14 not built: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "karpenter-kwok-v1.14"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(dir)
	if p, err := karpenterBinary(dir, KarpenterV114, "/x/karpenter-kwok"); err != nil || p != filepath.Join(real, "karpenter-kwok-v1.14") {
		t.Errorf("v1.14: %q, %v", p, err)
	}
}
