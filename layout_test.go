// Package bootroll_test holds checks on the repository's layout. The
// module root has no package of its own; this file is the only one here.
package bootroll_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/bootroll/bootroll"

// simImporters are the folders outside sim/ that may import sim/...:
// the twin's command line, which runs it.
var simImporters = []string{"cmd/bootroll"}

// TestNothingShippedImportsTheTwin keeps the arrows pointing one way:
// sim/ (the twin, its fake Karpenter, its invariants) may import what
// ships, and nothing that ships may import sim/. Only cmd/bootroll, the
// twin's command line, is allowed to. Every .go file of the module is
// read, tests included, whatever its build tags.
func TestNothingShippedImportsTheTwin(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "." {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (hack/tools)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if under(dir, "sim") || underAny(dir, simImporters) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if rest, ours := strings.CutPrefix(p, module+"/"); ours && under(rest, "sim") {
				t.Errorf("%s imports %s: only sim/ and %s may import the twin", filepath.ToSlash(path), p, strings.Join(simImporters, ", "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Go files read outside sim/: is the test running at the module root?")
	}
}

// under reports whether the slash-separated path p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

// TestInvariantsDoNotImportWhatTheyJudge: the invariants compute what is
// allowed from the specs and the trace, never with the code they judge, so
// sim/invariant must not depend on controller/ or nodedaemon/, not even
// through another package (the cluster model runs the daemon's code: the
// checker takes its facts from sim/facts instead).
func TestInvariantsDoNotImportWhatTheyJudge(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./sim/invariant").Output()
	if err != nil {
		t.Fatalf("go list -deps ./sim/invariant: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies: the check checks nothing")
	}
	for _, d := range deps {
		if rest, ours := strings.CutPrefix(d, module+"/"); ours && (under(rest, "controller") || under(rest, "nodedaemon")) {
			t.Errorf("sim/invariant depends on %s", d)
		}
	}
}
