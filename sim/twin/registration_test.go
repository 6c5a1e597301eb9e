package twin_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/bootroll/bootroll/sim/scenario"
	"github.com/bootroll/bootroll/sim/twin"
)

// TestRegistrationDelay: a node Karpenter launches registers (its Node is
// created, Ready) its class's registrationDelay after the launch, 30 s by
// default; 0s registers it at once, as the KWOK provider does. The delays
// are read from the trace: node/launched to node.created of the same node.
func TestRegistrationDelay(t *testing.T) {
	for _, c := range []struct {
		set  []string
		want time.Duration
	}{
		{nil, 30 * time.Second},
		{[]string{"karpenter.nodeClasses[0].registrationDelay=2s"}, 2 * time.Second},
		{[]string{"karpenter.nodeClasses[0].registrationDelay=0s"}, 0},
	} {
		const file = "../../scenarios/cluster/post-update-emptiness-reaping.yaml"
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// Without protection Karpenter reaps the drained nodes and
		// launches replacements for the pods left pending.
		set := append([]string{"bootroll.pools[0].karpenter.protect=false"}, c.set...)
		if data, err = scenario.ApplySets(file, data, set); err != nil {
			t.Fatal(err)
		}
		sc, err := scenario.Parse(file, data)
		if err != nil {
			t.Fatal(err)
		}
		var trace bytes.Buffer
		if _, err := twin.Run(sc, twin.Options{Trace: &trace}); err != nil {
			t.Fatal(err)
		}
		launched := map[string]time.Time{}
		n := 0
		sc2 := bufio.NewScanner(&trace)
		sc2.Buffer(nil, 1<<20)
		for sc2.Scan() {
			var e struct {
				T      time.Time `json:"t"`
				Kind   string    `json:"kind"`
				Object string    `json:"object"`
			}
			if err := json.Unmarshal(sc2.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			switch e.Kind {
			case "node/launched":
				launched[e.Object[len("node/"):]] = e.T
			case "node.created":
				name := e.Object[len("Node/"):]
				if at, ok := launched[name]; ok {
					n++
					if got := e.T.Sub(at); got != c.want {
						t.Errorf("%v: node %s registered %s after its launch, want %s", c.set, name, got, c.want)
					}
				}
			}
		}
		if n == 0 {
			t.Errorf("%v: no launched node registered: the scenario no longer launches any", c.set)
		}
	}
}
