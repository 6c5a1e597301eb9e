package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestDaemonSetArgsParse keeps config/daemon/daemonset.yaml and the flags
// in step: every argument the DaemonSet passes must parse.
func TestDaemonSetArgsParse(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "daemon", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatalf("decode daemonset.yaml: %v", err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	t.Setenv("NODE_NAME", "node-a")
	o, err := parseFlags(c.Args, io.Discard)
	if err != nil {
		t.Fatalf("DaemonSet args %q do not parse: %v", c.Args, err)
	}
	if o.nodeName != "node-a" {
		t.Errorf("node name from $NODE_NAME = %q, want node-a", o.nodeName)
	}
	if o.hostRoot != "/host" || o.hostExec {
		t.Errorf("the DaemonSet must run bootc chrooted into the host's root at /host (--host-root=/host), not through nsenter, which its image does not have")
	}
}

func TestNodeNameRequired(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	if _, err := parseFlags(nil, io.Discard); err == nil {
		t.Fatal("want an error without --node-name and $NODE_NAME")
	}
}
