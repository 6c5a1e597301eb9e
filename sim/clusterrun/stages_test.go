package clusterrun

import (
	"bytes"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/bootroll/bootroll/internal/localcluster"
	"github.com/bootroll/bootroll/sim/cluster"
)

// The KWOK stages of the local control plane time a pod as the twin does:
// Ready cluster.ScheduleDelay + cluster.PodStartup after kube-scheduler
// (which binds in milliseconds) bound it, gone cluster.PodGrace after its
// deletion. With kwok's own stages a replacement pod was Ready at once,
// and a drain on the cluster evicted a node's second pod of a budget the
// twin still refused (cluster-daemon-crash-while-staging, drained -10 s).
func TestStagesTimeLikeTheTwin(t *testing.T) {
	data, err := localcluster.Manifests.ReadFile(localcluster.StagesFile)
	if err != nil {
		t.Fatal(err)
	}
	delays := map[string]time.Duration{}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var st struct {
			Metadata struct{ Name string }
			Spec     struct {
				Delay *struct {
					DurationMilliseconds int64 `json:"durationMilliseconds"`
				}
			}
		}
		if err := yaml.Unmarshal(doc, &st); err != nil {
			t.Fatal(err)
		}
		if st.Spec.Delay != nil {
			delays[st.Metadata.Name] = time.Duration(st.Spec.Delay.DurationMilliseconds) * time.Millisecond
		}
	}
	for stage, want := range map[string]time.Duration{
		"pod-ready":  cluster.ScheduleDelay + cluster.PodStartup,
		"pod-delete": cluster.PodGrace,
	} {
		if got := delays[stage]; got != want {
			t.Errorf("kwok stage %s: delay %s, want %s (the twin's)", stage, got, want)
		}
	}
}
