package main

import (
	"strings"
	"testing"
)

func TestDaemonBadInput(t *testing.T) {
	kc := "--kubeconfig=/nonexistent/kubeconfig"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no scenario", []string{"daemon", "--nodes", "a=b", kc}, "--simulate-hosts is required"},
		{"missing scenario", []string{"daemon", "--simulate-hosts", "nope.yaml", "--nodes", "a=b", kc}, "--simulate-hosts nope.yaml: "},
		{"bad selector", []string{"daemon", "--simulate-hosts", plain, "--nodes", "a==b=c", kc}, `--nodes "a==b=c": not a label selector`},
		{"both", []string{"daemon", "--simulate-hosts", plain, "--nodes", "a=b", "--node", "n1", kc}, `--nodes "a=b" and --node "n1": give one`},
		{"negative resync", []string{"daemon", "--simulate-hosts", plain, "--node", "n1", "--resync", "-1s", kc}, "--resync -1s: must not be negative"},
		{"bad kubeconfig", []string{"daemon", "--simulate-hosts", plain, "--node", "n1", kc}, "--kubeconfig /nonexistent/kubeconfig: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "")
			code, out, errs := runCLI(t, tt.args...)
			if code != exitBadInput || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, exitBadInput)
			}
			if !strings.Contains(errs, tt.want) {
				t.Errorf("stderr %q; want it to contain %q", errs, tt.want)
			}
		})
	}
}

func TestDaemonNodes(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	in, err := checkDaemonFlags(daemonFlags{simulate: plain, nodes: "pool=workers"}, getenv)
	if err != nil || in.selector == nil || in.selector.String() != "pool=workers" || in.node != "" {
		t.Errorf("--nodes: %+v, %v", in, err)
	}
	if in.seed != in.sc.Seed {
		t.Errorf("seed %d, want the scenario's %d", in.seed, in.sc.Seed)
	}
	if _, err := checkDaemonFlags(daemonFlags{simulate: plain}, getenv); err == nil || !strings.Contains(err.Error(), "$NODE_NAME") {
		t.Errorf("no nodes: %v", err)
	}
	env["NODE_NAME"] = "kind-worker"
	in, err = checkDaemonFlags(daemonFlags{simulate: plain, seed: 9, seedSet: true}, getenv)
	if err != nil || in.node != "kind-worker" || in.seed != 9 {
		t.Errorf("$NODE_NAME: %+v, %v", in, err)
	}
	if _, err := checkDaemonFlags(daemonFlags{simulate: plain, nodes: ""}, getenv); err != nil {
		t.Errorf("$NODE_NAME alone: %v", err)
	}
	if _, err := checkDaemonFlags(daemonFlags{simulate: plain, nodes: "!x"}, getenv); err != nil {
		t.Errorf("a selector of absence: %v", err)
	}
	if _, err := checkDaemonFlags(daemonFlags{simulate: plain, nodes: ","}, getenv); err == nil {
		t.Error("an empty selector was accepted")
	}
}
