package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/bootroll/bootroll/sim/whatif"
)

// defaultWhatifImage is the Job's image when --image is not given: the
// bootroll CLI image `make images` builds (binary /bootroll), under the
// placeholder registry of config/default/kustomization.yaml; push it and
// name it with --image (docs/whatif.md, "Sharding").
const defaultWhatifImage = "registry.invalid/bootroll/bootroll:set-me"

// Where the Job's pods see the scenario and write their shard files.
const (
	jobScenarioDir = "/scenario"
	jobResultsDir  = "/results"
)

type jobFlags struct {
	emit        bool
	shards      int
	parallelism int
	image       string
	namespace   string
	name        string
	cpu         string
	memory      string
	resultsPVC  string
	outSet      bool
}

func addJobFlags(fl *pflag.FlagSet, f *jobFlags) {
	fl.BoolVar(&f.emit, "emit-job", false, "write a Kubernetes Indexed Job (and a ConfigMap with the scenario) that runs the sweep in --shards pods, instead of running it; to stdout, or to DIR/whatif-job.yaml when --out is given")
	fl.IntVar(&f.shards, "shards", 4, "with --emit-job: shards, the Job's completions (one shard per completion index)")
	fl.IntVar(&f.parallelism, "parallelism", 0, "with --emit-job: pods at once (default: --shards)")
	fl.StringVar(&f.image, "image", defaultWhatifImage, "with --emit-job: an image with the bootroll CLI on its PATH")
	fl.StringVar(&f.namespace, "namespace", "default", "with --emit-job: namespace of the Job and the ConfigMap")
	fl.StringVar(&f.name, "job-name", "", "with --emit-job: name of the Job (default whatif-SCENARIO)")
	fl.StringVar(&f.cpu, "cpu", "2", "with --emit-job: CPU request and limit of each pod; the pod runs that many workers (--jobs), rounded up")
	fl.StringVar(&f.memory, "memory", "2Gi", "with --emit-job: memory request and limit of each pod; GOMEMLIMIT is 90% of it")
	fl.StringVar(&f.resultsPVC, "results-pvc", "", "with --emit-job: PersistentVolumeClaim (ReadWriteMany, or ReadWriteOnce with every pod on one node) mounted at /results for the shard files (default: an emptyDir, whose files are lost when the pod ends)")
}

var dns1123 = regexp.MustCompile(`[^a-z0-9-]+`)

// jobName derives a Job name from the scenario name: lower case, DNS label
// characters, at most 52 characters (the Job controller labels pods with
// the name and adds a suffix to their names).
func jobName(scenario string) string {
	n := strings.Trim(dns1123.ReplaceAllString(strings.ToLower("whatif-"+scenario), "-"), "-")
	if len(n) > 52 {
		n = strings.TrimRight(n[:52], "-")
	}
	return n
}

// emitJob writes the manifest of the sweep as an Indexed Job.
func emitJob(stdout, stderr io.Writer, plan *whatif.Plan, f whatifFlags) error {
	bad := func(format string, a ...any) error {
		fmt.Fprintf(stderr, format+"\n", a...)
		return exitError{exitBadInput}
	}
	data, err := jobManifest(plan, f)
	if err != nil {
		return bad("--emit-job: %v", err)
	}
	if !f.job.outSet {
		_, err := stdout.Write(data)
		return err
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return bad("--out: %v", err)
	}
	name := filepath.Join(f.out, "whatif-job.yaml")
	if err := os.WriteFile(name, data, 0o644); err != nil {
		return bad("--out: %v", err)
	}
	fmt.Fprintf(stderr, "whatif: wrote %s (%d shards of %d runs)\n", name, f.job.shards, plan.Runs())
	return nil
}

// jobManifest returns the ConfigMap and the Job, as YAML documents.
func jobManifest(plan *whatif.Plan, f whatifFlags) ([]byte, error) {
	j := f.job
	if j.shards < 1 || j.shards > plan.Runs() {
		return nil, fmt.Errorf("--shards: want 1 to the %d runs of the sweep, got %d", plan.Runs(), j.shards)
	}
	par := j.parallelism
	if par == 0 {
		par = j.shards
	}
	if par < 1 || par > j.shards {
		return nil, fmt.Errorf("--parallelism: want 1 to --shards (%d), got %d", j.shards, j.parallelism)
	}
	name := j.name
	if name == "" {
		name = jobName(plan.Scenario)
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 || len(name) > 52 {
		return nil, fmt.Errorf("--job-name %q: want a DNS label of at most 52 characters", name)
	}
	if errs := validation.IsDNS1123Label(j.namespace); len(errs) > 0 {
		return nil, fmt.Errorf("--namespace %q: %s", j.namespace, strings.Join(errs, "; "))
	}
	if j.resultsPVC != "" {
		if errs := validation.IsDNS1123Subdomain(j.resultsPVC); len(errs) > 0 {
			return nil, fmt.Errorf("--results-pvc %q: %s", j.resultsPVC, strings.Join(errs, "; "))
		}
	}
	if strings.TrimSpace(j.image) == "" {
		return nil, fmt.Errorf("--image: empty")
	}
	cpu, err := resource.ParseQuantity(j.cpu)
	if err != nil || cpu.Sign() <= 0 {
		return nil, fmt.Errorf("--cpu %q: want a positive quantity such as 2 or 1500m", j.cpu)
	}
	mem, err := resource.ParseQuantity(j.memory)
	if err != nil || mem.Value() < 64<<20 {
		return nil, fmt.Errorf("--memory %q: want a quantity of at least 64Mi, such as 2Gi", j.memory)
	}
	key := filepath.Base(plan.File)
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		return nil, fmt.Errorf("scenario file name %q cannot be a ConfigMap key: %s", key, strings.Join(errs, "; "))
	}
	if len(plan.Data) > 900<<10 {
		return nil, fmt.Errorf("scenario %s is %d bytes: a ConfigMap holds at most 1 MiB", plan.File, len(plan.Data))
	}

	workers := int((cpu.MilliValue() + 999) / 1000)
	args := []string{"whatif", jobScenarioDir + "/" + key}
	for _, a := range plan.Axes {
		args = append(args, "--vary", a.Path+"="+strings.Join(a.Values, ","))
	}
	for _, s := range plan.Sets {
		args = append(args, "--set", s)
	}
	args = append(args,
		"--seeds", strconv.Itoa(plan.Seeds), "--seed", strconv.FormatUint(plan.FirstSeed, 10),
		"--jobs", strconv.Itoa(workers),
		// The kubelet expands $(JOB_COMPLETION_INDEX), which the Job
		// controller sets in every pod of an Indexed Job.
		"--shard", "$(JOB_COMPLETION_INDEX)/"+strconv.Itoa(j.shards),
		"--out", jobResultsDir)

	labels := map[string]string{"app.kubernetes.io/name": "bootroll-whatif", "app.kubernetes.io/instance": name}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-scenario", Namespace: j.namespace, Labels: labels},
		Data:       map[string]string{key: string(plan.Data)},
	}
	results := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	if j.resultsPVC != "" {
		results = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: j.resultsPVC}}
	}
	res := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
	// 90% of the limit: the runtime collects harder before the kernel's
	// OOM killer would end the pod.
	gomemlimit := mem.Value() / 10 * 9
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To(int32(j.shards)),
			Parallelism:    ptr.To(int32(par)),
			// A shard is deterministic: a retry fails the same way
			// unless the pod was evicted or OOM-killed.
			BackoffLimitPerIndex: ptr.To(int32(2)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(65532)),
						RunAsGroup:     ptr.To(int64(65532)),
						FSGroup:        ptr.To(int64(65532)),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:    "whatif",
						Image:   j.image,
						Command: []string{"/bootroll"},
						Args:    args,
						Env:     []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: strconv.FormatInt(gomemlimit, 10)}},
						Resources: corev1.ResourceRequirements{
							Requests: res,
							Limits:   res,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "scenario", MountPath: jobScenarioDir, ReadOnly: true},
							{Name: "results", MountPath: jobResultsDir},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "scenario", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
						{Name: "results", VolumeSource: results},
					},
				},
			},
		},
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# bootroll whatif %s: %d runs in %d shards (run i in shard i mod %d).\n", plan.File, plan.Runs(), j.shards, j.shards)
	if j.resultsPVC == "" {
		buf.WriteString("# Shard files go to an emptyDir and are lost when a pod ends: give --results-pvc to keep them.\n")
	} else {
		fmt.Fprintf(&buf, "# Shard files go to PVC %s: /results/shard-i-of-%d.json; collect them and run bootroll whatif merge.\n", j.resultsPVC, j.shards)
	}
	for i, obj := range []any{cm, job} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding the manifest: %w", err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(stripStatus(b))
	}
	return buf.Bytes(), nil
}

// stripStatus drops the empty status and creationTimestamp that the API
// types marshal.
func stripStatus(b []byte) []byte {
	var out []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		switch strings.TrimSpace(l) {
		case "status: {}", "creationTimestamp: null":
			continue
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, ""))
}
