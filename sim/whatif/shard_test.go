package whatif

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// shardFiles runs every shard of n of the plan and encodes and decodes
// each, as the Job's pods and merge do.
func shardFiles(t *testing.T, p *Plan, n int) []NamedShard {
	t.Helper()
	var out []NamedShard
	for i := range n {
		sh := Shard{Index: i, Count: n}
		runs, err := RunShard(p, sh, Config{Jobs: 2, Replay: replay})
		if err != nil {
			t.Fatal(err)
		}
		f, err := NewShardFile(p, sh, runs)
		if err != nil {
			t.Fatal(err)
		}
		data, err := f.Encode()
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeShard(sh.FileName(), data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, NamedShard{Name: sh.FileName(), File: d})
	}
	return out
}

func encoded(t *testing.T, r *Results) (string, string) {
	t.Helper()
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := r.CSV()
	if err != nil {
		t.Fatal(err)
	}
	return string(js), string(cs)
}

// TestMergeEqualsLocal: 2 points × 4 seeds in 3 shards of 3, 3 and 2 runs,
// merged in every order, give results.json and results.csv byte for byte
// as one local run; so do 4 shards of a sweep whose runs violate
// invariants (violations and replay commands go through the shard files).
func TestMergeEqualsLocal(t *testing.T) {
	for _, tc := range []struct {
		p     *Plan
		n     int
		sizes string
	}{
		{plan(t, 4, "bootroll.pools[0].maxUnavailable=1,3"), 3, "[3 3 2]"},
		{plan(t, 3, "bootroll.testOnly.ignoreSlotLimit=false,true"), 4, "[2 2 1 1]"},
	} {
		local, err := Run(tc.p, Config{Jobs: 2, Replay: replay})
		if err != nil {
			t.Fatal(err)
		}
		wantJS, wantCSV := encoded(t, local)
		shards := shardFiles(t, tc.p, tc.n)
		var sizes []int
		for _, s := range shards {
			sizes = append(sizes, len(s.File.Runs))
		}
		if fmt.Sprint(sizes) != tc.sizes {
			t.Fatalf("shard sizes %v, want %s", sizes, tc.sizes)
		}
		r := rand.New(rand.NewPCG(3, 4))
		for range 3 {
			in := slices.Clone(shards)
			r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
			_, merged, err := Merge(in)
			if err != nil {
				t.Fatalf("%d shards: %v", tc.n, err)
			}
			js, cs := encoded(t, merged)
			if js != wantJS {
				t.Errorf("%d shards: merged results.json differs from the local run:\n%s\nwant\n%s", tc.n, js, wantJS)
			}
			if cs != wantCSV {
				t.Errorf("%d shards: merged results.csv differs from the local run", tc.n)
			}
		}
		if tc.n == 4 && !strings.Contains(wantJS, `"replay": "bootroll scenario run`) {
			t.Errorf("the sweep with ignoreSlotLimit has no violations with replay commands:\n%s", wantJS)
		}
	}
}

// TestMergeRefuses: a missing shard, a duplicate, and a shard of another
// sweep are refused, naming the shard indexes or the field.
func TestMergeRefuses(t *testing.T) {
	p := plan(t, 2, "bootroll.pools[0].maxUnavailable=1,3")
	shards := shardFiles(t, p, 3)
	other := shardFiles(t, plan(t, 3, "bootroll.pools[0].maxUnavailable=1,3"), 3)
	otherAxis := shardFiles(t, plan(t, 2, "bootroll.pools[0].maxUnavailable=1,2"), 3)
	two := shardFiles(t, p, 2)
	edited := *shards[2].File
	edited.Sweep.FirstSeed = 7
	for _, tc := range []struct {
		name string
		in   []NamedShard
		want string
	}{
		{"missing", []NamedShard{shards[0], shards[2]}, "missing shards 1 of 3"},
		{"missing two", []NamedShard{shards[1]}, "missing shards 0, 2 of 3"},
		{"duplicate", []NamedShard{shards[0], shards[1], {Name: "copy.json", File: shards[1].File}, shards[2]}, "shard 1 of 3 is in shard-1-of-3.json and copy.json"},
		{"other seeds", []NamedShard{shards[0], other[1], shards[2]}, "sweep.seeds differs (2, 3)"},
		{"other axis", []NamedShard{shards[0], shards[1], otherAxis[2]}, "sweep.axes differs"},
		{"other first seed", []NamedShard{shards[0], shards[1], {Name: "edited.json", File: &edited}}, "sweep.firstSeed differs (1, 7)"},
		{"other count", []NamedShard{shards[0], two[1]}, "shards differs (3, 2)"},
		{"none", nil, "no shard files"},
	} {
		_, _, err := Merge(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestShardRunsPartition: the shards of n cover every run exactly once.
func TestShardRunsPartition(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		total, n := r.IntN(40), 1+r.IntN(9)
		seen := make([]int, total)
		for i := range n {
			for _, j := range (Shard{i, n}).Runs(total) {
				seen[j]++
			}
		}
		for j, c := range seen {
			if c != 1 {
				t.Fatalf("%d runs in %d shards: run %d in %d shards", total, n, j, c)
			}
		}
	}
	for _, bad := range []string{"3/3", "-1/2", "1", "a/b", "0/0"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
}

// TestDecodeShardRefuses: a cut or edited scenario, another format.
func TestDecodeShardRefuses(t *testing.T) {
	p := plan(t, 1, "bootroll.pools[0].maxUnavailable=1")
	f, err := NewShardFile(p, Shard{0, 1}, make([]RunSummary, 1))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := f.Encode()
	for _, tc := range []struct{ old, new, want string }{
		{ShardFormat, "x/v0", `format "x/v0"`},
		{`"scenarioData": "`, `"scenarioData": "#`, "does not match sweep.scenarioSHA256"},
	} {
		_, err := DecodeShard("f.json", bytes.Replace(data, []byte(tc.old), []byte(tc.new), 1))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.want)
		}
	}
}

// TestKeptTimelinesEqualReplays: a local sweep keeps the timeline of each
// point's median run, so AttachTimelines replays nothing, and what it
// attaches is byte for byte what a replay (the path of merged shards)
// gives.
func TestKeptTimelinesEqualReplays(t *testing.T) {
	p := plan(t, 3, "bootroll.pools[0].maxUnavailable=1,3")
	local, err := Run(p, Config{Jobs: 2, Replay: replay})
	if err != nil {
		t.Fatal(err)
	}
	if len(local.kept) != len(p.Points) {
		t.Fatalf("kept %d timelines, want one per point (%d)", len(local.kept), len(p.Points))
	}
	for i, k := range local.kept {
		if k == nil || k.Seed != local.Points[i].MedianSeed {
			t.Fatalf("point %d: kept timeline %v, want the median run's (seed %d)", i, k, local.Points[i].MedianSeed)
		}
	}
	replayed := *local
	replayed.Points = slices.Clone(local.Points)
	replayed.kept = nil
	if err := AttachTimelines(p, local, 2); err != nil {
		t.Fatal(err)
	}
	if err := AttachTimelines(p, &replayed, 2); err != nil {
		t.Fatal(err)
	}
	kjs, _ := encoded(t, local)
	rjs, _ := encoded(t, &replayed)
	if kjs != rjs {
		t.Errorf("results.json with the kept timelines differs from the replayed ones:\n%s\nwant\n%s", kjs, rjs)
	}
	if !strings.Contains(kjs, `"medianRun"`) {
		t.Errorf("no medianRun in results.json:\n%s", kjs)
	}
}
