package whatif

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

const plain = "../../scenarios/plain-rollout-10.yaml"

func plan(t *testing.T, seeds int, vary ...string) *Plan {
	t.Helper()
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	s := Spec{File: plain, Data: data, Seeds: seeds}
	for _, v := range vary {
		a, err := ParseVary(v)
		if err != nil {
			t.Fatal(err)
		}
		s.Axes = append(s.Axes, a)
	}
	p, err := Prepare(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func replay(file string, seed uint64, sets []string) string {
	return fmt.Sprintf("bootroll scenario run %s --seed %d --set %s", file, seed, strings.Join(sets, " --set "))
}

// TestGrid runs a 2×2 grid over 3 seeds: 4 points in nested-loop order,
// each summarising 3 runs, with the gauges the twin measures.
func TestGrid(t *testing.T) {
	p := plan(t, 3, "bootroll.pools[0].maxUnavailable=1,3", "host.reboot.max=3m,6m")
	res, err := Run(p, Config{Jobs: 2, Replay: replay})
	if err != nil {
		t.Fatal(err)
	}
	if res.Runs != 12 || len(res.Points) != 4 {
		t.Fatalf("runs %d, points %d; want 12 runs, 4 points", res.Runs, len(res.Points))
	}
	want := [][]string{{"1", "3m"}, {"1", "6m"}, {"3", "3m"}, {"3", "6m"}}
	for i, pt := range res.Points {
		if strings.Join(pt.Values, ",") != strings.Join(want[i], ",") {
			t.Errorf("point %d values %v, want %v", i, pt.Values, want[i])
		}
		d, ok := pt.Get(Duration)
		if !ok || d.N != 3 {
			t.Errorf("point %v: duration over %d runs, want 3", pt.Values, d.N)
		}
		if !(d.Min <= d.P5 && d.P5 <= d.P50 && d.P50 <= d.P95 && d.P95 <= d.Max && d.Min <= d.Mean && d.Mean <= d.Max) {
			t.Errorf("point %v: duration stats out of order: %+v", pt.Values, d)
		}
		if pt.MedianSeed < 1 || pt.MedianSeed > 3 {
			t.Errorf("point %v: median seed %d", pt.Values, pt.MedianSeed)
		}
		// maxUnavailable n of 10 equal nodes: at most n down, so the
		// schedulable CPU goes down to (10-n)/10 and no further.
		n := map[string]float64{"1": 1, "3": 3}[pt.Values[0]]
		if u, _ := pt.Get(PeakUnavailable); u.Max != n {
			t.Errorf("point %v: peak unavailable %v, want %v", pt.Values, u.Max, n)
		}
		if c, _ := pt.Get(MinSchedCPUPct); c.Min != 100*(10-n)/10 {
			t.Errorf("point %v: min schedulable CPU %v%%, want %v%%", pt.Values, c.Min, 100*(10-n)/10)
		}
		if _, ok := pt.Get(KarpenterLaunched); ok {
			t.Errorf("point %v: Karpenter metrics without Karpenter", pt.Values)
		}
	}
	csv, err := res.CSV()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if lines[0] != "bootroll.pools[0].maxUnavailable,host.reboot.max,metric,unit,n,p5,p50,p95,min,mean,max" {
		t.Errorf("csv header %q", lines[0])
	}
	if got, want := len(lines)-1, 4*len(res.Points[0].Metrics); got != want {
		t.Errorf("csv has %d rows, want %d", got, want)
	}
}

// TestDeterministicAcrossJobs: the files do not depend on the number of
// workers. Runs of maxUnavailable 10 take a fraction of the wall time of
// those of 1, so with three workers the runs finish out of order.
func TestDeterministicAcrossJobs(t *testing.T) {
	p := plan(t, 2, "bootroll.pools[0].maxUnavailable=1,10,2")
	var outs [][]byte
	for _, jobs := range []int{1, 3} {
		res, err := Run(p, Config{Jobs: jobs, Replay: replay})
		if err != nil {
			t.Fatal(err)
		}
		js, err := res.JSON()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := res.CSV()
		if err != nil {
			t.Fatal(err)
		}
		var tb bytes.Buffer
		if err := res.Table(&tb); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, append(append(js, cs...), tb.Bytes()...))
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Errorf("--jobs 1 and --jobs 3 differ:\n%s\n---\n%s", outs[0], outs[1])
	}
}

// TestMaxUnavailableShortensRollout: more nodes at once, a shorter rollout
// and less capacity.
func TestMaxUnavailableShortensRollout(t *testing.T) {
	p := plan(t, 3, "bootroll.pools[0].maxUnavailable=1,4")
	res, err := Run(p, Config{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := res.Points[0].Get(Duration)
	d4, _ := res.Points[1].Get(Duration)
	if !(d4.Max < d1.Min) {
		t.Errorf("maxUnavailable 4 took %vs..%vs, not less than maxUnavailable 1's %vs..%vs", d4.Min, d4.Max, d1.Min, d1.Max)
	}
	c1, _ := res.Points[0].Get(MeanSchedCPU)
	c4, _ := res.Points[1].Get(MeanSchedCPU)
	if !(c4.P50 < c1.P50) {
		t.Errorf("mean schedulable CPU %v at maxUnavailable 4, not below %v at 1", c4.P50, c1.P50)
	}
}

// TestViolationsCarryReplay: a broken controller's violations are listed
// per seed with the command that replays them.
func TestViolationsCarryReplay(t *testing.T) {
	p := plan(t, 2, "bootroll.testOnly.ignoreSlotLimit=false,true")
	res, err := Run(p, Config{Jobs: 2, Replay: replay})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Points[0].Violations); n != 0 {
		t.Errorf("the sound controller has %d violations", n)
	}
	vs := res.Points[1].Violations
	if len(vs) == 0 {
		t.Fatal("ignoreSlotLimit=true: no violations")
	}
	for _, v := range vs {
		want := fmt.Sprintf("--seed %d --set bootroll.testOnly.ignoreSlotLimit=true", v.Seed)
		if v.Count < 1 || !strings.Contains(v.Replay, want) {
			t.Errorf("violation %+v: want a count and a replay with %q", v, want)
		}
	}
	if s, _ := res.Points[1].Get(Violations); s.Min < 1 {
		t.Errorf("violations metric %+v", s)
	}
}

func TestBadInput(t *testing.T) {
	data, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vary  []string
		seeds int
		want  string
	}{
		{[]string{"bootroll.pools[0].maxUnavailable="}, 1, `empty list of values for bootroll.pools[0].maxUnavailable`},
		{[]string{"bootroll.pools[0].maxUnavailable=1,,2"}, 1, `empty value`},
		{[]string{"=1,2"}, 1, `want path=v1,v2`},
		{[]string{"bootroll.pools[0].maxUnavailable"}, 1, `want path=v1,v2`},
		{[]string{"bootroll.pools[0].maxUnavalable=1,2"}, 1, `--vary bootroll.pools[0].maxUnavalable: value "1"`},
		{[]string{"bootroll.pools[0].maxUnavailable=1,abc"}, 1, `--vary bootroll.pools[0].maxUnavailable: value "abc"`},
		{[]string{"bootroll.pools[0].maxUnavailable=1,2"}, 0, `--seeds: want at least 1, got 0`},
		{[]string{"bootroll.pools[0].maxUnavailable=1,2", "bootroll.pools[0].maxUnavailable=3"}, 1, `varied twice`},
		{nil, 1, `--vary: give at least one`},
		{[]string{"bootroll.pools[0].maxUnavailable=1,2,3,4,5,6,7,8,9,10"}, 10001, `more than the limit of 100000 runs`},
	} {
		s := Spec{File: plain, Data: data, Seeds: tc.seeds}
		var err error
		for _, v := range tc.vary {
			var a Axis
			if a, err = ParseVary(v); err != nil {
				break
			}
			s.Axes = append(s.Axes, a)
		}
		if err == nil {
			_, err = Prepare(s)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v seeds %d: error %v, want one with %q", tc.vary, tc.seeds, err, tc.want)
		}
	}
}
