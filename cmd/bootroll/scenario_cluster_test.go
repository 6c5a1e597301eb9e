package main

import "testing"

func TestClusterTargetValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    clusterTarget
		ok   bool
	}{
		{"twin default", clusterTarget{target: targetTwin, controller: "process"}, true},
		{"twin with kubeconfig", clusterTarget{target: targetTwin, kubeconfig: "k"}, false},
		{"unknown target", clusterTarget{target: "kind", controller: "process"}, false},
		{"cluster", clusterTarget{target: targetCluster, controller: "process", daemon: "process"}, true},
		{"cluster external", clusterTarget{target: targetCluster, controller: "external", daemon: "external", chaosMesh: "on", kubeconfig: "k"}, true},
		{"both clusters", clusterTarget{target: targetCluster, controller: "process", daemon: "process", kubeconfig: "k", clusterDir: "d"}, false},
		{"bad controller", clusterTarget{target: targetCluster, controller: "pod", daemon: "process"}, false},
		{"bad daemon", clusterTarget{target: targetCluster, controller: "process", daemon: "pod"}, false},
		{"bad chaos mode", clusterTarget{target: targetCluster, controller: "external", daemon: "external", chaosMesh: "maybe"}, false},
	} {
		if err := tc.c.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
