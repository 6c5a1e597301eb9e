package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestDeploymentArgsParse keeps config/manager/manager.yaml and the flags
// in step: every argument the Deployment passes must parse.
func TestDeploymentArgsParse(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	for _, doc := range splitDocs(data) {
		var d appsv1.Deployment
		if err := yaml.Unmarshal(doc, &d); err == nil && d.Kind == "Deployment" {
			dep = &d
		}
	}
	if dep == nil {
		t.Fatal("no Deployment in config/manager/manager.yaml")
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	o, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatalf("Deployment args %q do not parse: %v", args, err)
	}
	if !o.leaderElect {
		t.Error("the Deployment should elect a leader")
	}
	if _, err := parseFlags([]string{"--no-such-flag"}, io.Discard); err == nil {
		t.Error("an unknown flag must be an error")
	}
}

func splitDocs(data []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i+4 <= len(data); i++ {
		if string(data[i:i+4]) == "\n---" {
			out = append(out, data[start:i])
			start = i + 4
		}
	}
	return append(out, data[start:])
}
