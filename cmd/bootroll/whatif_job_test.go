package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// emitted runs --emit-job and decodes its ConfigMap and Job.
func emitted(t *testing.T, args ...string) (*corev1.ConfigMap, *batchv1.Job) {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"whatif", plain, "--emit-job"}, args...)...)
	if code != 0 {
		t.Fatalf("--emit-job %v: exit %d\n%s", args, code, stderr)
	}
	docs := strings.Split(out, "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("%d YAML documents, want 2:\n%s", len(docs), out)
	}
	var cm corev1.ConfigMap
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &cm); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &job); err != nil {
		t.Fatal(err)
	}
	return &cm, &job
}

// TestWhatifEmitJob: the Job is Indexed with one completion per shard,
// mounts the scenario from the ConfigMap, sets GOMEMLIMIT to 90% of the
// memory limit, and its pods' arguments, run here with each completion
// index, write shards that merge into the whole sweep.
func TestWhatifEmitJob(t *testing.T) {
	cm, job := emitted(t, "--vary", "bootroll.pools[0].maxUnavailable=1,3", "--seeds", "4", "--set", "host.reboot.max=6m",
		"--shards", "3", "--parallelism", "2", "--memory", "1Gi", "--cpu", "1500m", "--namespace", "sweeps", "--results-pvc", "whatif-results")
	scenario, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["plain-rollout-10.yaml"]; got != string(scenario) {
		t.Errorf("ConfigMap data %q, want the scenario file", got)
	}
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 3 || *s.Parallelism != 2 {
		t.Errorf("Job spec %+v: want Indexed, 3 completions, parallelism 2", s)
	}
	if job.Namespace != "sweeps" || cm.Namespace != "sweeps" || job.Name != "whatif-plain-rollout-10" {
		t.Errorf("Job %s/%s, ConfigMap in %s", job.Namespace, job.Name, cm.Namespace)
	}
	pod := s.Template.Spec
	c := pod.Containers[0]
	if c.Image != defaultWhatifImage || !slices.Equal(c.Command, []string{"/bootroll"}) {
		t.Errorf("image %s command %v", c.Image, c.Command)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "GOMEMLIMIT" || c.Env[0].Value != strconv.Itoa(1<<30/10*9) {
		t.Errorf("env %v, want GOMEMLIMIT=%d", c.Env, 1<<30/10*9)
	}
	if c.Resources.Limits.Memory().String() != "1Gi" || c.Resources.Requests.Cpu().String() != "1500m" {
		t.Errorf("resources %v", c.Resources)
	}
	if pod.Volumes[0].ConfigMap.Name != cm.Name || pod.Volumes[1].PersistentVolumeClaim.ClaimName != "whatif-results" {
		t.Errorf("volumes %+v", pod.Volumes)
	}

	// Run each pod's arguments here: the scenario at its path in the
	// ConfigMap volume, the shard index in place of the kubelet's.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "plain-rollout-10.yaml"), scenario, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		args := slices.Clone(c.Args)
		for k, a := range args {
			a = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i))
			a = strings.Replace(a, jobScenarioDir+"/", dir+"/", 1)
			args[k] = strings.Replace(a, jobResultsDir, filepath.Join(dir, "results"), 1)
		}
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("pod %d: %v: exit %d\n%s", i, args, code, stderr)
		}
	}
	code, _, stderr := runCLI(t, "whatif", "merge", filepath.Join(dir, "results"), "--out", filepath.Join(dir, "merged"))
	if code != 0 || !strings.Contains(stderr, "3 shards, 8 runs") {
		t.Fatalf("merge: exit %d\n%s", code, stderr)
	}
	js := readFiles(t, filepath.Join(dir, "merged"), "results.json")[0]
	if !strings.Contains(js, `"host.reboot.max=6m"`) || !strings.Contains(js, `"seeds": 4`) {
		t.Errorf("merged results.json lost the sweep's --set or --seeds:\n%s", js)
	}

	_, job = emitted(t, "--vary", "bootroll.pools[0].maxUnavailable=1,3")
	if job.Spec.Template.Spec.Volumes[1].EmptyDir == nil || *job.Spec.Completions != 4 || *job.Spec.Parallelism != 4 {
		t.Errorf("defaults: %+v", job.Spec)
	}
}

func TestWhatifEmitJobBadInput(t *testing.T) {
	mu := "bootroll.pools[0].maxUnavailable=1,2"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0"}, "--shards: want 1 to the 20 runs"},
		{[]string{"--shards", "21"}, "--shards: want 1 to the 20 runs"},
		{[]string{"--shards", "4", "--parallelism", "5"}, "--parallelism: want 1 to --shards (4)"},
		{[]string{"--memory", "1Mi"}, `--memory "1Mi"`},
		{[]string{"--cpu", "0"}, `--cpu "0"`},
		{[]string{"--namespace", "Not_A_Name"}, `--namespace "Not_A_Name"`},
		{[]string{"--job-name", strings.Repeat("x", 53)}, "at most 52 characters"},
		{[]string{"--shard", "0/2"}, "--emit-job and --shard: give one"},
	} {
		code, _, stderr := runCLI(t, append([]string{"whatif", plain, "--vary", mu, "--emit-job"}, tc.args...)...)
		if code != exitBadInput || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
