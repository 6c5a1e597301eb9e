package twin_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden traces in testdata/golden")

// goldenScenarios are small shipped scenarios whose traces are committed
// in testdata/golden, each run with the scenario's own seed.
var goldenScenarios = []string{
	"plain-rollout-10",
	"pdb-blocks-drain",
	"bad-image-halt-recover",
	"pool-image-revert-mid-reboot",
	// Pinned images: the production prefetch runner over the twin's CRI.
	"pinned-set-changed-mid-pull",
}

const regenerate = "go test ./sim/twin -run TestGoldenTraces -update"

// TestGoldenTraces runs each golden scenario twice with its seed, requires
// the two JSONL traces (what bootroll scenario run FILE --trace writes) to be
// equal, and compares the trace byte for byte with
// testdata/golden/<name>.jsonl, so that a change in behaviour shows up as a
// diff of the trace. -update rewrites the files.
func TestGoldenTraces(t *testing.T) {
	for _, name := range goldenScenarios {
		t.Run(name, func(t *testing.T) {
			res, got := run(t, load(t, name+".yaml"), 0)
			if !res.Passed() {
				t.Fatalf("%s did not pass: %v", name, res.Violations)
			}
			if _, again := run(t, load(t, name+".yaml"), 0); !bytes.Equal(got, again) {
				t.Fatalf("two runs with seed %d differ at line %d", res.Seed, firstDiff(got, again))
			}
			file := filepath.Join("testdata", "golden", name+".jsonl")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v; run %s", err, regenerate)
			}
			if !bytes.Equal(want, got) {
				t.Errorf("the trace of %s differs from %s (-golden +run):\n%s\nif the change is intended, run %s and commit the diff",
					name, file, lineDiff(want, got), regenerate)
			}
		})
	}
}

// lineDiff shows the first few lines that differ, each pair numbered and
// cut around its first differing byte. A line missing on one side is
// shown on the other only.
func lineDiff(want, got []byte) string {
	const pairs, scan = 5, 200
	lw, lg := splitLines(want), splitLines(got)
	first := firstDiff(want, got) - 1
	var b strings.Builder
	fmt.Fprintf(&b, "golden %d lines, run %d lines; first difference at line %d\n", len(lw), len(lg), first+1)
	shown := 0
	for i := first; i < first+scan && i < max(len(lw), len(lg)) && shown < pairs; i++ {
		var w, g string
		if i < len(lw) {
			w = lw[i]
		}
		if i < len(lg) {
			g = lg[i]
		}
		if w == g {
			continue
		}
		col := 0
		for col < min(len(w), len(g)) && w[col] == g[col] {
			col++
		}
		if i < len(lw) {
			fmt.Fprintf(&b, "-%5d %s\n", i+1, around(w, col))
		}
		if i < len(lg) {
			fmt.Fprintf(&b, "+%5d %s\n", i+1, around(g, col))
		}
		shown++
	}
	return b.String()
}

// around cuts line to a window around byte col.
func around(line string, col int) string {
	const before, after = 100, 140
	from, to := max(0, col-before), min(len(line), col+after)
	out := line[from:to]
	if from > 0 {
		out = "..." + out
	}
	if to < len(line) {
		out += "..."
	}
	return out
}

func splitLines(data []byte) []string {
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}
