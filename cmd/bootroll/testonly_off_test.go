//go:build !bootroll_testonly

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootroll/bootroll/sim/clusterrun"
)

// TestDefaultBuildHasNoTestOnlyCommand: the bootroll binary as shipped
// (no build tags) has no way to start a deliberately broken controller.
func TestDefaultBuildHasNoTestOnlyCommand(t *testing.T) {
	root := newRoot(nil, nil)
	for _, c := range root.Commands() {
		if c.Name() == clusterrun.TestOnlyCommand {
			t.Fatalf("the default build has the command %s", c.Name())
		}
	}
	code, _, errs := runCLI(t, clusterrun.TestOnlyCommand, "--test-only=ignoreSlotLimit", "--kubeconfig=/nonexistent")
	if code != exitBadInput || !strings.Contains(errs, "unknown command") {
		t.Fatalf("bootroll %s: exit %d, stderr %q; want exit 2, unknown command", clusterrun.TestOnlyCommand, code, errs)
	}
}

// TestTestOnlyWiringIsTagged: a file of bootroll that wires the
// controller (controller.Setup) or sets a TestOnly field must be built
// only with the bootroll_testonly tag; bootroll-controller and
// bootroll-daemon never set a TestOnly field.
func TestTestOnlyWiringIsTagged(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, dir := range []string{".", "../bootroll-controller", "../bootroll-daemon"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			tagged := strings.HasPrefix(string(src), "//go:build "+clusterrun.TestOnlyTag+"\n")
			ast.Inspect(f, func(n ast.Node) bool {
				var what string
				switch n := n.(type) {
				case *ast.KeyValueExpr:
					if id, ok := n.Key.(*ast.Ident); ok && id.Name == "TestOnly" {
						what = "sets TestOnly"
					}
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && dir == "." && x.Name == "controller" && n.Sel.Name == "Setup" {
						what = "calls controller.Setup"
					}
				}
				if what != "" && (dir != "." || !tagged) {
					t.Errorf("%s:%d %s outside a file built only with -tags %s", path, fset.Position(n.Pos()).Line, what, clusterrun.TestOnlyTag)
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("no files read")
	}
}
